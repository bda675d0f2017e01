"""The ledger's weighing of a kernel launch (ops/ledger.py): from its arguments, the busiest
block's work, the mean block's work and the serial tail, each in entries, for every kernel of
ops/gpu.py. What a launch costs where it cannot be timed: the work a block is dealt.
"""
from __future__ import annotations

import numpy as np

from .common import DEVICE_NUMBERS

BLOCK = DEVICE_NUMBERS["BLOCK"]
UNROLL = DEVICE_NUMBERS["UNROLL"]
WARP = DEVICE_NUMBERS["WARP"]


def blocks(n: int, per_block: int = BLOCK) -> int:
    """Blocks of per_block elements that cover n (at least one)."""
    return max(1, -(-n // per_block))


# The serial tail is the longest chain of dependent global reads one block makes, in entries: a
# window reads UNROLL entries' indices, then their rows, so one read of a chain counts as
# UNROLL / 2 entries. A thread's element of an elementwise kernel counts as a read (a bound:
# the compiler may overlap a thread's elements).
ENTRIES_PER_READ = UNROLL / 2
# Adam's bias corrections in double (two pow, a division, a square root, a reciprocal): about
# 4,500 cycles a block in a cycle-level simulation of an A100, taken here as the
# latency of some 8 global reads (an estimate).
CORRECTIONS_READS = 8


def reads(n: float) -> float:
    return n * ENTRIES_PER_READ


def even(n: int, per_block: int, threads: int = BLOCK) -> tuple[float, float, float]:
    """n elements, per_block a block, one a thread at a time."""
    count = blocks(n, per_block)
    return float(min(n, per_block)), n / count, reads(-(-min(n, per_block) // threads))


def windows_even(nnz: int, C: int) -> tuple[float, float, float]:
    """Windows of C entries that share no sums: a block walks its window's entries."""
    busiest, mean, _ = even(nnz, C)
    return busiest, mean, busiest


def windows_work(starts: np.ndarray, ends: np.ndarray, nnz: int,
                  C: int) -> tuple[float, float, float]:
    """Windows of C entries over segments [starts, ends) of entries: each window's entries,
    and on top, for a segment that several windows share, its pieces, which one of them adds
    up (any of them may: a bound), UNROLL a read."""
    windows = blocks(nnz, C)
    work = np.full(windows, float(C))
    work[-1] = nnz - C * (windows - 1)
    starts, ends = starts.astype(np.int64), ends.astype(np.int64)
    w0, w1 = starts // C, (ends - 1) // C
    shared = (ends > starts) & (w1 > w0)
    fixup = 0
    bound, tail = work.copy(), work.copy()
    for a, b in zip(w0[shared], w1[shared]):
        bound[a:b + 1] += b - a + 1
        tail[a:b + 1] += reads(-(-(b - a + 1) // UNROLL))
        fixup += b - a + 1
    return float(bound.max()), (work.sum() + fixup) / windows, float(tail.max())


def row_windows_work(indptr: np.ndarray, C: int) -> tuple[float, float, float]:
    """Windows over entries in row order: the segments are the rows."""
    return windows_work(indptr[:-1], indptr[1:], int(indptr[-1]), C)


def column_windows_work(cols: np.ndarray, col_order: np.ndarray,
                         C: int) -> tuple[float, float, float]:
    """Windows over entries in column order: the segments are the columns' runs."""
    ordered = cols[col_order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return windows_work(starts, np.r_[starts[1:], len(ordered)], len(ordered), C)


def cut_work(n: int) -> tuple[float, float, float]:
    """cut_batch, an entry a thread: the step and the batch's entry count, then the entry's
    row, that row's start in the CSR and the entry there (the binary search over the B+1 row
    pointers reads cached values, not counted)."""
    return (*even(n, BLOCK)[:2], reads(5))


def dense_rows_work(N: int, lengths: np.ndarray) -> tuple[float, float, float]:
    """A block a row of N columns, threads striding over them, then over the row's entries
    (their columns, then their values)."""
    tail = -(-N // BLOCK) + 2 * -(-int(lengths.max(initial=0)) // BLOCK)
    return N + float(lengths.max(initial=0)), N + float(lengths.mean()), reads(tail)


def bias_backward_work(B: int, K: int) -> tuple[float, float, float]:
    """A block a WARP columns, each of its warps striding over the rows."""
    return (*even(K, WARP)[:2], reads(-(-B // (BLOCK // WARP))))


def adam_work(n: int, grid: int) -> tuple[float, float, float]:
    """Every block reads its state (the step count, the step's bias corrections), then its
    threads stride over the elements; then block 0 computes the next step's corrections."""
    busiest, mean, elements = even(n, -(-n // grid))
    return busiest, mean, reads(1 + CORRECTIONS_READS) + elements
