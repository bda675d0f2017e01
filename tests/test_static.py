"""Every Python file of the repository passes pyflakes: no name used that is defined nowhere (a
NameError met only on the path that reaches it, as tune's refusal of a study with no completed
trial once did), no import or variable left unused, no f-string without a field. A finding on
a line marked `# noqa` is meant (a module that re-exports names) and is kept."""
from pathlib import Path

import pytest
from helpers import missing_extra

pytest.importorskip("pyflakes", reason=missing_extra("test"))
from pyflakes import api, messages  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("ncae_cuda", "bench", "dev", "docs", "tests")       # where the repository's .py are


class Findings:
    """A pyflakes reporter that keeps what it is told as 'path:line: message' lines."""

    def __init__(self):
        self.lines = []

    def flake(self, message: messages.Message):
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
    files = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
    assert len(files) > 150                             # the whole repository, not a corner
    found = Findings()
    for path in files:
        api.checkPath(str(path), found)
    assert [f for f in found.lines if not meant(f)] == []
