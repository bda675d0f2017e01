"""pytest-benchmark settings of the kernel microbenchmarks."""
import pytest

from bench.cli import unwritable_folder


def pytest_configure(config):
    """--benchmark-json's folder made before any case runs, as a bench's --out is, or the run
    refused in a line: pytest-benchmark opens the file only once every case has been timed, and
    a path it cannot open then lost them all to a traceback."""
    path = config.getoption("benchmark_json", None)
    if path is None:
        return
    why = unwritable_folder(path.parent)
    if why is None and path.is_dir():
        why = f"is a folder: name the file, as {path / 'kernels.json'}"
    if why:
        raise pytest.UsageError(f"--benchmark-json {path}: {why}")


def pytest_xdist_auto_num_workers(config):
    """No workers where benchmarks run (pyproject's `-n auto` is for the tests): a timing taken
    beside another is not a figure, and pytest-benchmark switches itself off under xdist."""
    return 0


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """Keep each case's statistics, not its every round: the raw timings of the fast ops ran to
    megabytes per file, and results are committed."""
    for case in output_json["benchmarks"]:
        case["stats"].pop("data", None)
