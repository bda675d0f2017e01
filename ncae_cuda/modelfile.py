"""The one file format of saved models and training checkpoints: a numpy .npz of plain arrays
plus a JSON header, never a pickle, so a file loads without running code from it and on any
machine. Files are written to a temporary name and renamed, so a killed process leaves the
previous file whole; a truncated file, another program's file or another format version is
refused with a message.
"""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from .data import DataError

FORMAT = "ncae_cuda"
VERSION = 3          # 3: models and checkpoints as ncae_cuda.estimator and .session write them


def write(path: str | os.PathLike, kind: str, meta: dict, arrays: dict) -> None:
    """Write `arrays` and `meta` to `path` as a `kind` file, atomically; a failed write (a full
    disk, a folder that is not writable) leaves no temporary file and says what failed."""
    header = {"format": FORMAT, "version": VERSION, "kind": kind, **json_ready(meta)}
    atomic_write(path, lambda f: np.savez(f, header=np.array(json.dumps(header)), **arrays))


def atomic_write(path: str | os.PathLike, fill) -> None:
    """fill(f) writes a binary file object that becomes `path` only once whole (a temporary
    file, synced, then renamed); on failure the temporary file is removed and DataError says
    why."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise DataError(f"{path}: cannot write it ({e.strerror or e})") from None


def json_ready(value):
    """numpy scalars and tuples in nested dicts and lists as JSON's numbers and lists."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def read(path: str | os.PathLike, kind: str) -> tuple[dict, dict]:
    """(meta, arrays) of a `kind` file, every array read into memory."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {name: f[name] for name in f.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
        raise DataError(f"{path}: not a readable {FORMAT} {kind} file, truncated or damaged "
                        f"({type(e).__name__}: {e})") from None
    if "header" not in arrays:
        raise DataError(f"{path}: not an {FORMAT} {kind} file (no header)")
    try:
        meta = json.loads(str(arrays.pop("header")))
        if not isinstance(meta, dict):
            raise ValueError("not an object")
    except ValueError as e:
        raise DataError(f"{path}: not an {FORMAT} {kind} file (its header is not JSON: {e})"
                        ) from None
    if meta.get("format") != FORMAT or meta.get("kind") != kind:
        raise DataError(f"{path}: a {meta.get('format')} {meta.get('kind')} file, "
                        f"not an {FORMAT} {kind}")
    if meta.get("version") != VERSION:
        raise DataError(f"{path}: format version {meta.get('version')}; this ncae_cuda reads "
                        f"version {VERSION} (retrain, or load it with the ncae_cuda that wrote it)")
    return meta, arrays
