"""The README's quick start is what CI runs (its set-up and its test command are in .ci/run),
and every other command it shows runs as written, where it needs no downloaded data."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ncae_cuda.data import datasets

ROOT = Path(__file__).resolve().parents[1]
TRAIN = " && .venv/bin/python -m ncae_cuda.train"


def quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", text, re.S)
    assert block, "README.md needs a '## Quick start' section with a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_two_commands_that_ci_runs_first_as_written():
    install_and_train, test = quick_start()
    assert install_and_train.endswith(TRAIN)
    ci = [line.split("#")[0].strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    ci = [line for line in ci if line]
    start = ci.index(install_and_train)
    assert ci[start + 1] == test                         # then its tests, before any extra
    assert not any("pip install" in line for line in ci[:start])


def test_the_extras_the_readme_installs_are_what_ci_installs():
    """All but the GPU's (CuPy): CI has no GPU."""
    installs = [c for c in readme_commands()
                if c.startswith(".venv/bin/pip install") and "cuda" not in c]
    ci = [line.split("#")[0].strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert installs and all(command in ci for command in installs), installs


def test_performance_section_is_generated_from_the_results_files():
    from bench import report
    assert report.main(["--check"]) == 0


def test_python_api_example_runs_as_written(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Python API\n\n```python\n(.*?)```", text, re.S)
    assert block, "README.md needs a '## Python API' section opening with a python block"
    code = block.group(1)
    assert len(code.strip().splitlines()) <= 12
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["items"].shape == (3, 10) and (tmp_path / "model.npz").exists()
    assert namespace["new_items"].shape == (1, 10)


PUBLISHED = [name for name, entry in datasets.DATASETS.items()
             if isinstance(entry, datasets.Published)]


def readme_commands() -> list[str]:
    """Every command of the README's bash blocks, continuation lines joined, comments dropped."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.split("#")[0].strip()
            if command:
                commands.append(command)
    return commands


TORCHRUN = ".venv/bin/torchrun"      # a sharded job: where the [distributed] extra is installed


def runs_here(command: str, sharded: bool) -> bool:
    """A README command this test runs, of the trainer's commands or (sharded) torchrun's: not
    one that needs downloaded data or a GPU, nor the quick start's (CI runs it first)."""
    words = command.split()
    return (command.startswith(TORCHRUN if sharded else ".venv/bin/python -m ncae_cuda.")
            and not any(name in words for name in PUBLISHED) and "gpu" not in words
            and command != TRAIN.strip(" &"))


def argv_of(command: str) -> list[str]:
    """The command run by this test's Python (the README's .venv/bin/ is CI's)."""
    words = shlex.split(command)
    if words[0] == TORCHRUN:
        return [sys.executable, "-m", "torch.distributed.run", *words[1:]]
    return [sys.executable, *words[1:]]


@pytest.mark.parametrize("sharded", [False, pytest.param(True, marks=pytest.mark.extra(
    "distributed"))], ids=["python", "torchrun"])
def test_every_readme_command_without_downloaded_data_runs_as_written(tmp_path, sharded):
    commands = [c for c in readme_commands() if runs_here(c, sharded)]
    assert len(commands) >= (1 if sharded else 5), commands
    # the user's own file the README trains on, and a split of it into two files
    data = datasets.load("synthetic-tiny")
    lines = [f"{u},{i},{r:g}\n" for u, i, r in zip(data.user_ids[data.users],
                                                   data.item_ids[data.items], data.ratings)]
    for name, part in (("ratings.csv", lines), ("train.csv", lines[:500]),
                       ("test.csv", lines[500:])):
        (tmp_path / name).write_text("user,item,rating\n" + "".join(part))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(datasets.DATA_ENV, None)
    for command in commands:
        done = subprocess.run(argv_of(command), cwd=tmp_path, env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    assert sharded or (tmp_path / "runs" / "demo" / "top100.csv").stat().st_size > 0
