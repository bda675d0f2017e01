"""The epoch plan: which entries each training step takes, decided on the host before the epoch
starts, so the device never waits for the host inside an epoch.

An epoch shuffles the training rows (seeded by (seed, epoch)) and cuts them into batches of
batch_size rows. Per step the plan holds the batch's row pointers, from the host's copy of
indptr, and the batch's entries grouped by column: the order the scatters sum each column's
entries in, the same on every backend, so they are deterministic without float atomics. It is
found in one pass over a column index of the training matrix built once per fit, not by a sort
per batch. It also records how the GPU kernels deal each batch's entries out to blocks: the
sizes of its windows, chosen from its entries, its longest row and the SM count of the device
(window_sizes). The device gets the plan in one copy per epoch (ops.load_plan) and cuts each
step's batch from it into the step's fixed buffers (ops.cut_batch); input dropout's keep flags
are a hash of (seed, epoch, entry), computed there.

    planner = Planner(csr, rows, Schedule(seed, batch_size, dropout))   # once per fit
    plan = planner.plan(epoch)                                          # once per epoch

A plan is a pure function of the data, the schedule, the epoch and the SM count of the device
the CSR is on (CSR.sms: on the GPU backend its device's, on any other common.DEFAULT_SMS, an
H100's); only the GPU kernels' windows depend on the SM count.
"""
from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .common import (
    CSR,
    DEFAULT_SMS,
    DEVICE_NUMBERS,
    MAX_WINDOW_THREADS,
    THREADS_PER_SM,
    dropout_stream,
    dropout_threshold,
)

# Entries a window at least, unless fewer leave an SM without a window: pieces of sums stay few.
MIN_WINDOW = 32
# Windows a batch is dealt into at most, per SM: one wave of the widest window kernel's blocks
# (MAX_WINDOW_THREADS threads). More would not run at once and only add pieces; the windows'
# scratch is sized by it.
WINDOWS_PER_SM = THREADS_PER_SM // MAX_WINDOW_THREADS


@dataclass(frozen=True)
class Schedule:
    seed: int
    batch_size: int
    dropout: float                    # input dropout rate q

    @property
    def scale(self) -> float:
        """Kept inputs are scaled by 1/(1-q)."""
        return 1.0 / (1.0 - self.dropout)


@dataclass(frozen=True)
class Geometry:
    """The sizes every training step of a fit fits in: what its memory is allocated for."""
    batch_size: int                   # B
    rows: int                         # rows an epoch trains
    max_entries: int                  # entries of the largest batch there can be: the B longest
                                      # rows'
    epoch_entries: int                # entries an epoch trains
    sms: int = DEFAULT_SMS            # the SMs the GPU windows are dealt out for

    @property
    def steps(self) -> int:
        return -(-self.rows // self.batch_size)

    @property
    def max_windows(self) -> int:
        """The most windows of any batch (window_sizes): what the windows' scratch holds."""
        return max(1, min(self.max_entries, self.sms * WINDOWS_PER_SM))


def pieces_bound(longest):
    """The smallest C with ceil(L / C) + 1 <= C, for each L of `longest`: windows of C
    entries cut a segment of L entries into at most C pieces. It lies between sqrt(L) and
    sqrt(L) + 2: C <= sqrt(L) would make ceil(L / C) >= C."""
    L = np.asarray(longest, np.int64)
    C = np.floor(np.sqrt(L)).astype(np.int64) + 1
    return C + (-(-L // C) + 1 > C)


def window_sizes(longest_row, entries, batch_size: int, sms: int) -> np.ndarray:
    """(n, 2) int32: the windows over rows and over columns of n batches with these longest
    rows and entries (arrays, or numbers for one batch), on a GPU of `sms` SMs.

    A window of C entries is large enough that there are at most WINDOWS_PER_SM windows an SM,
    and at least MIN_WINDOW entries unless that would leave an SM without a window (then
    C = entries // sms). Before either, it keeps a segment's pieces of sums to C at most
    (pieces_bound): the block that finishes a segment reads its pieces UNROLL at a time, a read
    each, and its own C entries take two reads a UNROLL (their indices, then their rows), so
    adding the pieces of the two segments it shares takes no longer than its window. A segment
    is a row (the longest row) for the windows over rows, a column's run (at most batch_size
    entries, one a row) for those over columns, which also must span at most WARP - 1 windows
    either side of one (kernels/common.cuh: reduce_columns)."""
    longest = np.atleast_1d(longest_row).astype(np.int64)
    entries = np.atleast_1d(entries).astype(np.int64)
    every_sm = np.maximum(1, entries // sms)
    C = np.minimum(every_sm, np.maximum(MIN_WINDOW, -(-entries // (sms * WINDOWS_PER_SM))))
    run = max(int(pieces_bound(batch_size)),
              -(-(batch_size - 1) // (DEVICE_NUMBERS["WARP"] - 1)))
    return np.stack([np.maximum(C, pieces_bound(longest)), np.maximum(C, run)],
                    axis=1).astype(np.int32)


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's steps, as the device receives them (PLAN_FIELDS' order)."""
    header: np.ndarray          # (4,) int32: the step to cut (0), the dropout threshold, the
                                # dropout stream (a uint64 in two words)
    order: np.ndarray           # (rows,) int32 the rows in epoch order
    batch_indptr: np.ndarray    # (steps, B+1) int32 each step's row pointers; padding rows empty
    windows: np.ndarray         # (steps, 2) int32 each step's GPU windows (window_sizes)
    col_offsets: np.ndarray     # (steps+1,) int32 where each step's entries start in col_order
    col_order: np.ndarray       # (entries,) int32 each step's entries, as positions in its
                                # batch, grouped by column
    scale: float                # 1/(1-q): kept inputs' scale

    @property
    def steps(self) -> int:
        return len(self.batch_indptr)

    @property
    def batch_size(self) -> int:
        return self.batch_indptr.shape[1] - 1

    def entries(self, step: int) -> int:
        return int(self.batch_indptr[step, -1])

    def rows(self, step: int) -> int:
        """Real rows of the step's batch."""
        return min(self.batch_size, len(self.order) - step * self.batch_size)

    @classmethod
    def of_rows(cls, indptr: np.ndarray, rows: np.ndarray, sms: int) -> EpochPlan:
        """One step of the given rows, every entry kept, no column order, its windows for a
        GPU of `sms` SMs: an evaluation batch."""
        rows = np.asarray(rows, np.int32)
        lengths = indptr[rows + 1] - indptr[rows]
        batch_indptr = np.zeros((1, len(rows) + 1), np.int32)
        np.cumsum(lengths, out=batch_indptr[0, 1:])
        windows = window_sizes(lengths.max(initial=0), batch_indptr[0, -1], len(rows), sms)
        return cls(_header(0, 0), rows, batch_indptr, windows, np.zeros(2, np.int32),
                   np.zeros(0, np.int32), 1.0)


PLAN_FIELDS = ("header", "order", "batch_indptr", "windows", "col_offsets", "col_order")


def plan_spec(g: Geometry) -> dict:
    """{field: (shape, dtype)} of an epoch plan of a fit of this geometry."""
    return {"header": ((4,), np.int32), "order": ((g.rows,), np.int32),
            "batch_indptr": ((g.steps, g.batch_size + 1), np.int32),
            "windows": ((g.steps, 2), np.int32),
            "col_offsets": ((g.steps + 1,), np.int32),
            "col_order": ((g.epoch_entries,), np.int32)}


def _header(threshold: int, stream: int) -> np.ndarray:
    header = np.zeros(4, np.int32)
    header[1] = threshold
    header[2:] = np.array([stream], np.uint64).view(np.int32)
    return header


def trainable_rows(csr: CSR) -> np.ndarray:
    """Rows with at least one training entry: an empty row has no input to encode."""
    return np.flatnonzero(np.diff(csr.host_indptr) > 0)


class Planner:
    """The plans of one fit: `rows` of the training CSR in batches by `schedule`, their
    windows for the SMs of the CSR's device."""

    def __init__(self, csr: CSR, rows: np.ndarray, schedule: Schedule):
        indptr, indices = csr.host_indptr, csr.host_indices
        self._ahead = {}                                  # epoch: the plan being made
        self.rows = np.asarray(rows, np.int32)
        self.schedule = schedule
        self._indptr = indptr
        self._lengths = (indptr[1:] - indptr[:-1]).astype(np.int64)        # (all rows,)
        # the column index: every entry in column order (rows ascending within a column) as
        # its row and its offset within that row
        by_column = np.argsort(indices, kind="stable")
        row_of_entry = np.repeat(np.arange(len(indptr) - 1, dtype=np.int32), self._lengths)
        self._column_rows = row_of_entry[by_column]                         # (nnz,)
        self._column_offsets = (by_column - indptr[self._column_rows]).astype(np.int32)
        lengths = self._lengths[self.rows]
        B = schedule.batch_size
        self.geometry = Geometry(
            batch_size=B, rows=len(self.rows),
            max_entries=int(np.sort(lengths)[-B:].sum()) if len(lengths) else 0,
            epoch_entries=int(lengths.sum()), sms=csr.sms)

    def plan(self, epoch: int) -> EpochPlan:
        """The plan of epoch `epoch` (any integer key: pre-training stages use their own); the
        one prefetch() began, if it did."""
        ahead = self._ahead.pop(epoch, None)
        return ahead.result() if ahead is not None else self._plan(epoch)

    def prefetch(self, epoch: int) -> None:
        """Begin planning `epoch` on a background thread: a plan is a pure function of the
        epoch, so the host can make the next while the device runs this one (at the ML-10M
        shape it takes about as long as the GPU's epoch)."""
        if epoch not in self._ahead:
            self._ahead[epoch] = _planning_thread().submit(self._plan, epoch)

    def _plan(self, epoch: int) -> EpochPlan:
        s = self.schedule
        B, n = s.batch_size, len(self.rows)
        order = np.random.default_rng([s.seed, epoch]).permutation(self.rows).astype(np.int32)
        steps = -(-n // B)
        lengths = np.zeros(steps * B, np.int64)
        lengths[:n] = self._lengths[order]
        batch_indptr = np.zeros((steps, B + 1), np.int32)
        np.cumsum(lengths.reshape(steps, B), axis=1, out=batch_indptr[:, 1:])
        windows = window_sizes(lengths.reshape(steps, B).max(axis=1), batch_indptr[:, -1], B,
                               self.geometry.sms)
        col_offsets = np.zeros(steps + 1, np.int32)
        np.cumsum(batch_indptr[:, -1], out=col_offsets[1:])
        step_of_row = np.full(len(self._indptr) - 1, -1, np.int32)      # -1: not trained
        step_of_row[order] = np.arange(n, dtype=np.int32) // B
        slot_of_row = np.zeros(len(self._indptr) - 1, np.int32)
        slot_of_row[order] = np.arange(n, dtype=np.int32) % B
        col_order = _column_order(self._column_rows, self._column_offsets, step_of_row,
                                  slot_of_row, batch_indptr, col_offsets)
        return EpochPlan(_header(dropout_threshold(s.dropout), dropout_stream(s.seed, epoch)),
                         order, batch_indptr, windows, col_offsets, col_order, s.scale)


@functools.lru_cache(maxsize=1)
def _planning_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix="ncae-plan")


@njit(cache=True, parallel=True, nogil=True)
def _column_order(column_rows, column_offsets, step_of_row, slot_of_row, batch_indptr,
                  col_offsets):
    """Each step's entries in column order, as positions in the step's batch: the column index
    walked in parts, one a thread; each part's share of every step is counted first, so the
    parts write disjoint ranges and the result does not depend on the threads."""
    steps = batch_indptr.shape[0]
    nnz = column_rows.shape[0]
    parts = max(1, min(64, nnz // 65536))
    bounds = np.linspace(0, nnz, parts + 1).astype(np.int64)
    counts = np.zeros((parts, steps), np.int64)
    for part in prange(parts):
        for q in range(bounds[part], bounds[part + 1]):
            s = step_of_row[column_rows[q]]
            if s >= 0:
                counts[part, s] += 1
    cursor = np.empty((parts, steps), np.int64)
    for s in range(steps):
        at = col_offsets[s]
        for part in range(parts):
            cursor[part, s] = at
            at += counts[part, s]
    out = np.empty(col_offsets[steps], np.int32)
    for part in prange(parts):
        for q in range(bounds[part], bounds[part + 1]):
            r = column_rows[q]
            s = step_of_row[r]
            if s >= 0:
                out[cursor[part, s]] = batch_indptr[s, slot_of_row[r]] + column_offsets[q]
                cursor[part, s] += 1
    return out
