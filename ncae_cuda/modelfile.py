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
VERSION = 3          # 3: models and checkpoints as ncae_cuda.estimator writes them


def write(path: str | os.PathLike, kind: str, meta: dict, arrays: dict) -> None:
    """Write `arrays` and the JSON-ready `meta` to `path` as a `kind` file, atomically."""
    path = Path(path)
    header = {"format": FORMAT, "version": VERSION, "kind": kind, **meta}
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, header=np.array(json.dumps(header)), **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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
    meta = json.loads(str(arrays.pop("header")))
    if meta.get("format") != FORMAT or meta.get("kind") != kind:
        raise DataError(f"{path}: a {meta.get('format')} {meta.get('kind')} file, "
                        f"not an {FORMAT} {kind}")
    if meta.get("version") != VERSION:
        raise DataError(f"{path}: format version {meta.get('version')}; this ncae_cuda reads "
                        f"version {VERSION} (retrain, or load it with the ncae_cuda that wrote it)")
    return meta, arrays
