"""Files written whole or not at all: a writer fills a temporary file of its own beside the
target, syncs it and renames it over the target, so a killed process leaves the previous file
whole and writers of one path never share a temporary file; a folder's owner removes what
killed writers left (remove_temporaries).
"""
from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import uuid
from pathlib import Path

from .interactions import DataError

TEMPORARY_DIGITS = 12                 # of a temporary file's name: <name>.<hex digits>.tmp
TEMPORARY = re.compile(rf"(?P<name>.+)\.[0-9a-f]{{{TEMPORARY_DIGITS}}}\.tmp")


def atomic_write(path: str | os.PathLike, fill) -> None:
    """fill(f) writes a binary file object that becomes `path` only once whole (a temporary
    file of this writer's own, synced, then renamed over `path`); on failure or interruption
    the temporary file is removed, and an OSError becomes a DataError saying why (its errno
    kept)."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:TEMPORARY_DIGITS]}.tmp")
    try:
        with open(tmp, "xb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        # a read-only file system refuses even the removal of a file that was never made; what
        # cannot be removed stays (RunDirectory removes it later), and the first error is told
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError):
            raise DataError(f"{path}: cannot write it ({e.strerror or e})",
                            errno=e.errno) from None
        raise


def remove_temporaries(folder: Path, names) -> None:
    """Remove the temporary files atomic_write left in `folder` (a process killed while it
    wrote) of the files whose names match one of `names` (glob patterns), and no other file.
    Only for a folder's owner: a writer still at work would lose its file."""
    for path in folder.iterdir():
        made = TEMPORARY.fullmatch(path.name)
        if made and any(fnmatch.fnmatchcase(made["name"], name) for name in names):
            path.unlink(missing_ok=True)
