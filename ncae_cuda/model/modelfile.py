"""The one file format of saved models and training checkpoints: a numpy .npz of plain arrays
plus a JSON header, never a pickle, so a file loads without running code from it and on any
machine. Files are written to a temporary name of their own and renamed, so a killed process
leaves the previous file whole and writers of one path never share a temporary file. A
truncated file, another program's file or another format version is refused with a message,
and so is a damaged one: a SHA-256 of the header and the arrays is stored beside them, and a
file whose contents no longer match it (an edited header: another rating scale or output
layer, which would load and score otherwise), or whose numbers are NaN or infinite, is refused.
Whatever is wrong with a file, reading it fails with a DataError of one line naming it, and
never asks for more memory than the file's size: every entry's sizes and array header are
checked against the file before an array is made.
"""
from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import re
import struct
import zipfile
from pathlib import Path

import numpy as np

from ..data.atomic_file import atomic_write
from ..data.interactions import DataError

FORMAT = "ncae_cuda"
VERSION = 6          # 6: a model file's header names the model and its settings, for any
                     # model (runs/factory.py load_model); 5: explicit models' parameters learn
                     # ratings mapped onto the network's scale (model/network.py
                     # NETWORK_SCALE); 4: with the checksum of header and arrays; 3: models and
                     # checkpoints as model/estimator.py and trainer.py write them
ZIP = b"PK\x03\x04"  # how a .npz (a zip archive of .npy entries, np.savez's) begins
READ_BYTES = 1 << 24                  # read at a time: the most of an array held twice
NPY_VERSIONS = {(1, 0): "<H", (2, 0): "<I"}    # of .npy, np.save's: its header length's format
NPY_TYPE = re.compile(r"[<>|][biufSU][0-9]+")    # as np.save writes numbers' and text's: <f4
MAX_NPY_HEADER = 10_000                         # bytes, as numpy reads them
# What reading a damaged file raises: zipfile's errors, a zip entry's flags, method or version
# (NotImplementedError), its encryption bit (RuntimeError), an array header that is no longer
# Python (SyntaxError) or cut short (struct.error), ...
UNREADABLE = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
              NotImplementedError, RuntimeError, struct.error, SyntaxError)


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


def json_ready(value):
    """numpy scalars and tuples in nested dicts and lists as JSON's numbers and lists."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def damaged(path: str | os.PathLike, kind: str, why: str) -> DataError:
    """The error of a `kind` file that cannot be used as it is, and what to do about it."""
    todo = "train it again" if kind == "model" else "start over instead of resuming (--overwrite)"
    return DataError(f"{path}: a damaged {FORMAT} {kind} file: {why}: {todo}")


def inconsistent(path: str | os.PathLike, kind: str, error: Exception) -> DataError:
    """damaged(), for a file read whole whose parts do not fit together (`error` says how):
    for what uses a file's arrays and header."""
    return damaged(path, kind, f"its contents are inconsistent ({type(error).__name__}: "
                               f"{error})")


def read(path: str | os.PathLike, kind: str) -> tuple[dict, dict]:
    """(meta, arrays) of a `kind` file, every array read into memory."""
    path = Path(path)
    if not path.is_file():
        why = f"a folder, not an {FORMAT} {kind} file" if path.is_dir() else "no such file"
        raise DataError(f"{path}: {why}")
    try:
        with open(path, "rb") as f:
            npz = f.read(len(ZIP)) == ZIP
    except OSError as e:
        raise DataError(f"{path}: cannot read it ({e.strerror or e})", errno=e.errno) from None
    if not npz:
        raise DataError(f"{path}: not an {FORMAT} {kind} file (no .npz archive)")
    try:
        arrays = _arrays(path)
    except UNREADABLE as e:
        detail = " ".join(str(e).split())                   # numpy's span lines
        raise damaged(path, kind, f"truncated or unreadable ({type(e).__name__}: {detail})"
                      ) from None
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
    if str(arrays.pop("checksum", "")) != _checksum(header, arrays):
        raise damaged(path, kind, "its header or arrays are not what was written (their "
                                  "checksum differs)")
    for name, a in arrays.items():
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise damaged(path, kind, f"{name} holds NaN or infinite values")
    return meta, arrays


def _arrays(path: Path) -> dict:
    """{name: array} of the .npz at `path`; ValueError (or what zipfile and numpy raise, see
    UNREADABLE) where an entry is not as np.savez writes it: stored uncompressed, within the
    file, an array of numbers or text whose header says as many bytes as follow it."""
    arrays, size = {}, path.stat().st_size
    with zipfile.ZipFile(path) as z:
        for entry in z.infolist():
            name = entry.filename.removesuffix(".npy")
            if name == entry.filename or name in arrays:
                raise ValueError(f"{entry.filename}: not one array of its own")
            if (entry.compress_type != zipfile.ZIP_STORED
                    or not entry.compress_size == entry.file_size <= size):
                raise ValueError(f"{entry.filename}: {entry.file_size} bytes, method "
                                 f"{entry.compress_type}, in a file of {size}")
            with z.open(entry) as f:
                shape, order, dtype = _npy_header(f)
                count = math.prod(shape)
                nbytes, left = count * dtype.itemsize, entry.file_size - f.tell()
                if nbytes != left:
                    raise ValueError(f"{entry.filename}: its header says {shape} {dtype}, "
                                     f"{nbytes} bytes; it holds {left}")
                a = np.empty(count, dtype)
                raw = a.view(np.uint8)
                for start in range(0, nbytes, READ_BYTES):    # (the entry's CRC at its end)
                    raw[start:start + READ_BYTES] = np.frombuffer(f.read(READ_BYTES), np.uint8)
            arrays[name] = a.reshape(shape, order=order)
    return arrays


def _npy_header(f) -> tuple[tuple, str, np.dtype]:
    """(shape, order, dtype) of the .npy array `f` begins with, an array of numbers or text as
    np.save writes it; ValueError where it is not one. (numpy's reader would take a header that
    is no longer Python for one of Python 2, and warn about that on stderr.)"""
    length = NPY_VERSIONS.get(np.lib.format.read_magic(f))
    if length is None:
        raise ValueError("not a .npy array of version 1 or 2")
    size, = struct.unpack(length, f.read(struct.calcsize(length)))
    if size > MAX_NPY_HEADER:
        raise ValueError(f"an array header of {size} bytes")
    header = ast.literal_eval(f.read(size).decode("latin1"))
    if not (isinstance(header, dict) and header.keys() == {"descr", "fortran_order", "shape"}
            and isinstance(header["descr"], str) and NPY_TYPE.fullmatch(header["descr"])
            and isinstance(header["fortran_order"], bool) and isinstance(header["shape"], tuple)
            and all(type(n) is int and n >= 0 for n in header["shape"])):
        raise ValueError(f"not an array header of numbers or text: {header!r}"[:200])
    try:
        dtype = np.dtype(header["descr"])
    except TypeError as e:                          # a size numpy has not: <f3
        raise ValueError(e) from None
    return header["shape"], "F" if header["fortran_order"] else "C", dtype


def differences(saved: dict, now: dict, prefix: str = "") -> list[str]:
    """'name: saved -> now' for every entry that differs, nested dicts by dotted names."""
    lines = []
    for key in sorted(saved.keys() | now.keys()):
        a, b = saved.get(key), now.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            lines += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            lines.append(f"{prefix}{key}: {a} -> {b}")
    return lines
