"""Shared fixtures: the real data sets in the workspace's shared folder, where there is one."""
from pathlib import Path

import pytest

# The shared folder sits beside the repository: <workspace>/shared/data next to <workspace>/main.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """The folder holding ml-100k/ (never copied into the repository); skips where absent."""
    if not (SHARED_DATA / "ml-100k" / "u.data").is_file():
        pytest.skip(f"no MovieLens 100K under {SHARED_DATA}")
    return SHARED_DATA
