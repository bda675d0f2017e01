"""The large synthetic data sets kept once drawn: drawing synthetic-ml20m takes tens of seconds
(its Gumbel noise comes from one seeded stream, so a seed gives the same data on any machine),
and reading it back a fraction of one. Every process of a benchmark that loads the same set
(each device's run, the peer, the floor's count) draws it once between them.

A drawn set is kept as an uncompressed .npz named by its preset, its seed and a digest of what
decides its values: the generator's source (synthetic.py) and NumPy's version (whose random
streams may change between releases). A changed generator so finds no file of its own and
draws anew; an unreadable file is drawn over, and the temporary files of its writers that were
killed removed; a cache that cannot be written costs only the next draw.
"""
from __future__ import annotations

import hashlib
import zipfile
from functools import cache
from pathlib import Path

import numpy as np

from . import synthetic as generator
from .atomic_file import atomic_write, remove_temporaries
from .interactions import DataError, Interactions

FOLDER = "synthetic"            # the cache's subfolder for drawn sets
_FIELDS = ("users", "items", "ratings", "timestamps", "user_ids", "item_ids")


def kept_synthetic(preset: str, seed: int, cache_dir: Path) -> Interactions:
    """synthetic(preset, seed): read from `cache_dir`/synthetic where drawn before by this
    generator, else drawn and kept there."""
    path = cache_dir / FOLDER / f"{preset}-seed{seed}-{generator_digest()}.npz"
    try:
        return _read(path)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):    # absent, or not whole
        pass
    data = generator.synthetic(preset, seed)
    try:
        _write(path, data)
    except (OSError, DataError):    # a read-only or full disk: the data is drawn all the same
        pass
    return data


@cache
def generator_digest() -> str:
    """12 hex digits of SHA-256 over synthetic.py's source and NumPy's version."""
    digest = hashlib.sha256(Path(generator.__file__).read_bytes())
    digest.update(np.__version__.encode())
    return digest.hexdigest()[:12]


def _read(path: Path) -> Interactions:
    with np.load(path) as saved:
        low, high = saved["rating_scale"]
        return Interactions(**{field: saved[field] for field in _FIELDS},
                            rating_scale=(float(low), float(high)),
                            name=str(saved["name"]))


def _write(path: Path, data: Interactions) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # what killed draws of this set left (each a whole set's size, kept for good before); a
    # writer of it still at work only keeps no copy, as this one writes the same values
    remove_temporaries(path.parent, (path.name,))
    atomic_write(path, lambda f: np.savez(f, **{field: getattr(data, field) for field in _FIELDS},
                                          rating_scale=np.array(data.rating_scale),
                                          name=np.array(data.name)))
