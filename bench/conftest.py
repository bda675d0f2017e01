"""pytest-benchmark settings of the kernel microbenchmarks."""


def pytest_xdist_auto_num_workers(config):
    """No workers where benchmarks run (pyproject's `-n auto` is for the tests): a timing taken
    beside another is not a figure, and pytest-benchmark switches itself off under xdist."""
    return 0


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """Keep each case's statistics, not its every round: the raw timings of the fast ops ran to
    megabytes per file, and results are committed."""
    for case in output_json["benchmarks"]:
        case["stats"].pop("data", None)
