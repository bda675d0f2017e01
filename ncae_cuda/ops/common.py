"""What every backend shares: the batch and matrix types, and the dropout hash's host side.

The dropout mask of an entry is a pure function of (seed, epoch, entry id): a splitmix64 stream
key per (seed, epoch), mixed with the entry id, the top 24 bits compared against an integer
threshold. Integer arithmetic only, so numpy, Numba and CUDA agree exactly and masks do not
depend on batching or backend. kernels/common.cuh holds the device twin of `mix64`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15   # 2^64 / golden ratio: splitmix64's increment
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
KEEP_BITS = 24                # a float32 holds 24 bits exactly: the threshold is an exact q


def mix64(z: int) -> int:
    """splitmix64's finalizer on a Python int (mod 2^64)."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return z ^ (z >> 31)


def dropout_stream(seed: int, epoch: int) -> int:
    """The per-(seed, epoch) key that entry ids are mixed into."""
    return mix64((seed * GOLDEN + epoch) & MASK64)


def dropout_threshold(q: float) -> int:
    """An entry is kept when its 24-bit hash is >= this: q=0 keeps all."""
    if not 0.0 <= q < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {q}")
    return round(q * (1 << KEEP_BITS))


class Batch(NamedTuple):
    """B rows cut from a CSR, in the arrays of the backend that cut them (see cut_batch)."""
    indptr: object      # (B+1,) int32 entry range of each row; padding rows are empty
    cols: object        # (nnz,) int32 column of each entry
    vals: object        # (nnz,) float32 value of each entry
    entry_ids: object   # (nnz,) int32 position in the source CSR: keys the dropout hash
    entry_rows: object  # (nnz,) int32 batch row of each entry
    col_order: object   # (nnz,) int32 entries sorted by column, stable
    col_ptr: object     # (runs+1,) int32 run of each distinct column in col_order
    col_ids: object     # (runs,) int32 the distinct columns, ascending; a backend may add
                        # empty runs after them (col_ids -1), which every consumer skips
    row_weight: object  # (B,) float32 1/n for the n real rows, 0 for padding


class CSR(NamedTuple):
    """A rows x cols sparse matrix in the arrays of one backend, as cut_batch reads it."""
    indptr: object          # (rows+1,) int32
    indices: object         # (nnz,) int32 column of each entry, ascending within a row
    data: object            # (nnz,) float32
    host_indptr: np.ndarray # (rows+1,) int32 on the host: batch sizes without a device sync
    shape: tuple

    @classmethod
    def from_scipy(cls, backend, m) -> CSR:
        if m.nnz >= 2**31:
            raise ValueError(f"{m.nnz} entries: int32 entry ids hold at most 2^31 - 1")
        m.sort_indices()
        indptr = m.indptr.astype(np.int32)
        return cls(backend.to_device(indptr), backend.to_device(m.indices.astype(np.int32)),
                   backend.to_device(m.data.astype(np.float32)), indptr, m.shape)
