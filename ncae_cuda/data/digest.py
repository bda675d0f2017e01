"""A file's sha256, read a block at a time: what a run records of a file it read (a warm
start's model, a pool's data files) and a server of the model it serves, so that a later
command tells the same bytes from others without keeping them. (hashlib.file_digest does this
from Python 3.11 only.)"""
from __future__ import annotations

import hashlib
from pathlib import Path

READ_BYTES = 1 << 20              # of the file at a time


def file_sha256(path: Path | str) -> str:
    """The hex sha256 of the file's bytes; OSError where it cannot be read."""
    h = hashlib.sha256()
    with open(Path(path).expanduser(), "rb") as f:
        while chunk := f.read(READ_BYTES):
            h.update(chunk)
    return h.hexdigest()
