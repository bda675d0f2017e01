"""The README's quick start is what CI runs (its set-up and its test command are in .ci/run),
and its Python example runs as written; tests/test_docs.py runs its other commands, as it does
every page's."""
import re
from pathlib import Path

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
