"""What every backend shares: the numbers Python and CUDA agree on, the batch and matrix types,
and the dropout hash's host side.

The dropout mask of an entry is a pure function of (seed, epoch, entry id): a splitmix64 stream
key per (seed, epoch), mixed with the entry id, the top 24 bits compared against an integer
threshold. Integer arithmetic only, so numpy, Numba and CUDA agree exactly and masks do not
depend on batching or backend. kernels/common.cuh holds the device twin of `mix64`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15   # 2^64 / golden ratio: splitmix64's increment
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
KEEP_BITS = 24                # a float32 holds 24 bits exactly: the threshold is an exact q
# TF32 keeps float32's sign, exponent and 10 of its 23 mantissa bits: the bits dropped, and
# half of the last bit kept (rounding to the nearest adds it before the drop)
TF32_KEPT = 0xFFFFE000
TF32_HALF = 0x00001000

# The CUDA sources: the package data in an installed wheel, or kernels/ beside the package in
# a checkout.
_PACKAGE = Path(__file__).resolve().parent.parent
KERNEL_DIR = next(d for d in (_PACKAGE / "kernels", _PACKAGE.parent / "kernels") if d.is_dir())
# The numbers the kernels are compiled with and the launchers size their launches by, read from
# the header that the kernels include (BLOCK, WARP, LANE_FLOATS, UNROLL, MAX_TOPK).
DEVICE_NUMBERS = {name: int(value) for name, value in re.findall(
    r"^#define (\w+) (\d+)", (KERNEL_DIR / "device_numbers.cuh").read_text(), re.M)}
SLAB = DEVICE_NUMBERS["WARP"] * DEVICE_NUMBERS["LANE_FLOATS"]    # a warp's share of a K-vector
# The widest K of the kernels over K-vectors (a warp per slab): blocks of at most 512 threads.
# They use up to 117 registers a thread (ptxas: gather_forward on sm_80, 96 on sm_90), so 1024
# threads would ask for 120K of an SM's 64K registers and fail to launch;
# tests/test_kernels_compile.py checks every kernel against the bound.
MAX_WINDOW_THREADS = 512
MAX_WIDTH = MAX_WINDOW_THREADS // DEVICE_NUMBERS["WARP"] * SLAB
# The SM count that work is dealt out for, and weighed against, where there is no device to ask
# (the emulator, a ledger without a GPU): an H100 SXM's. The GPU backend asks its device.
DEFAULT_SMS = 132
THREADS_PER_SM = 2048         # threads an SM holds at once (sm_80, sm_90)


def adam_state(steps: int = 0) -> np.ndarray:
    """Adam's state as it starts on a device: `steps` steps taken, the rest the GPU kernel's
    (kernels/adam.cu: AdamState), zero. (ADAM_STATE_WORDS,) int32; every backend's adam reads
    and writes the step count, [0]."""
    state = np.zeros(DEVICE_NUMBERS["ADAM_STATE_WORDS"], np.int32)
    state[0] = steps
    return state


def slabs(K: int) -> int:
    """Warps a block of a kernel over K-vectors has: one per slab of K."""
    return -(-K // SLAB)


def pieces_stride(K: int) -> int:
    """Floats of one window's piece of sums for width K: K rounded up to LANE_FLOATS, then the
    scalar's slot (kernels/common.cuh: pieces_stride)."""
    lane = DEVICE_NUMBERS["LANE_FLOATS"]
    return -(-K // lane) * lane + lane


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


class Windows(NamedTuple):
    """How the GPU kernels deal a batch's entries out to blocks, in windows of equal length
    (kernels/common.cuh), and the scratch where windows that share a row or a column's run
    leave their partial sums. The host chooses a batch's sizes (plan.window_sizes); the kernels
    read them from device memory, so a captured step replays every batch's."""
    rows: int           # entries a window over the entries in row order, this batch's
    columns: int        # ... in column order
    sizes: object       # (2,) int32 rows and columns, on the device (cut there from the plan)
    pieces: object      # (2 * most, stride) float32
    arrivals: object    # (most,) int32, zero between launches
    capacity: int       # entries of the largest batch the buffers hold
    most: int           # windows of any batch at most: a CUDA graph's launches have as many
                        # blocks, since it replays every step's


class Batch(NamedTuple):
    """B rows of a CSR, in the arrays of the backend that cut them (cut_batch, cut_rows)."""
    indptr: object      # (B+1,) int32 entry range of each row; padding rows are empty
    cols: object        # (nnz,) int32 column of each entry
    vals: object        # (nnz,) float32 value of each entry
    keep: object        # (nnz,) uint8 1 where the entry survives input dropout (all, outside
                        # training)
    entry_rows: object  # (nnz,) int32 batch row of each entry
    col_order: object   # (nnz,) int32 the entries grouped by column, columns ascending: the
                        # order the scatters sum in (training batches only; else None)
    row_weight: object  # (B,) float32 1/n for the n real rows, 0 for padding
    row_entries: object = None        # (B,) int32 each row's entries in the whole training
                                      # matrix (of which a column shard's batch holds a part)
    windows: Windows | None = None    # the GPU kernels' windows; None on the CPU backends


class CSR(NamedTuple):
    """A rows x cols sparse matrix in the arrays of one backend, as the cuts read it, and its
    host copy: the host plans batches from it without asking the device. It may be a column
    shard's part of a larger matrix (ncae_cuda/ops/shard.py): then each row's first entry's id and
    its number of entries are the whole matrix's, which input dropout and the explicit loss
    go by."""
    indptr: object          # (rows+1,) int32
    indices: object         # (nnz,) int32 column of each entry, ascending within a row
    data: object            # (nnz,) float32
    first_entry: object     # (rows,) int32 the id of each row's first entry in the whole matrix
    row_entries: object     # (rows,) int32 each row's entries in the whole matrix
    host_indptr: np.ndarray # (rows+1,) int32
    host_indices: np.ndarray
    shape: tuple
    sms: int                # the SMs of its device, which the host deals GPU work out for
                            # (plan.py); DEFAULT_SMS on a backend without

    @classmethod
    def from_scipy(cls, backend, m, first_entry: np.ndarray | None = None,
                   row_entries: np.ndarray | None = None) -> CSR:
        """m as the backend's CSR: the whole matrix, or with first_entry and row_entries (the
        whole matrix's, (rows,)), a part of one."""
        if m.nnz >= 2**31:
            raise ValueError(f"{m.nnz} entries: int32 entry ids hold at most 2^31 - 1")
        m.sort_indices()
        indptr, indices = m.indptr.astype(np.int32), m.indices.astype(np.int32)
        if first_entry is None:
            first_entry, row_entries = indptr[:-1], np.diff(indptr)
        return cls(backend.to_device(indptr), backend.to_device(indices),
                   backend.to_device(m.data.astype(np.float32)),
                   backend.to_device(np.asarray(first_entry, np.int32)),
                   backend.to_device(np.asarray(row_entries, np.int32)), indptr, indices,
                   m.shape, getattr(backend, "sms", DEFAULT_SMS))
