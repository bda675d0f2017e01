"""The one file format of saved models and training checkpoints: a numpy .npz of plain arrays
plus a JSON header, never a pickle, so a file loads without running code from it and on any
machine. Files are written to a temporary name of their own and renamed, so a killed process
leaves the previous file whole and writers of one path never share a temporary file. A
truncated file, another program's file or another format version is refused with a message,
and so is a damaged one: a SHA-256 of the header and the arrays is stored beside them, and a
file whose contents no longer match it (an edited header: another rating scale or output
layer, which would load and score otherwise), or whose numbers are NaN or infinite, is refused.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
import zipfile
from pathlib import Path

import numpy as np

from .data import DataError

FORMAT = "ncae_cuda"
VERSION = 4          # 4: with the checksum of header and arrays; 3: models and checkpoints as
                     # ncae_cuda.estimator and .session write them


def write(path: str | os.PathLike, kind: str, meta: dict, arrays: dict) -> None:
    """Write `arrays` and `meta` to `path` as a `kind` file, atomically; a failed write (a full
    disk, a folder that is not writable) leaves no temporary file and says what failed."""
    header = np.array(json.dumps({"format": FORMAT, "version": VERSION, "kind": kind,
                                  **json_ready(meta)}))
    arrays = {name: np.asarray(a) for name, a in arrays.items()}
    atomic_write(path, lambda f: np.savez(f, header=header, **arrays,
                                          checksum=np.array(_checksum(header, arrays))))


def _checksum(header: np.ndarray, arrays: dict) -> str:
    """SHA-256 of the header and every array's name, type, shape and bytes."""
    h = hashlib.sha256(str(header).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def atomic_write(path: str | os.PathLike, fill) -> None:
    """fill(f) writes a binary file object that becomes `path` only once whole (a temporary
    file of this writer's own, synced, then renamed over `path`); on failure or interruption
    the temporary file is removed, and an OSError becomes a DataError saying why."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "xb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise DataError(f"{path}: cannot write it ({e.strerror or e})") from None
        raise


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
    header = arrays.pop("header")
    try:
        meta = json.loads(str(header))
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
    damaged = f"{path}: a damaged {FORMAT} {kind} file"
    if str(arrays.pop("checksum", "")) != _checksum(header, arrays):
        raise DataError(f"{damaged}: its header or arrays are not what was written (their "
                        "checksum differs)")
    for name, a in arrays.items():
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise DataError(f"{damaged}: {name} holds NaN or infinite values")
    return meta, arrays
