"""Column shards without communication: the split of the columns, a shard's part of a matrix, its
share of the initial parameters, and the ops on a shard's batch, whose parts add up to the
whole matrix's on every backend: the same dropout masks, the same row weights, and partial sums
that the shards' sum turns into the one-process result."""
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import assert_close, cut_first, host, host_batch, long_row_matrix

from ncae_cuda.ops.plan import trainable_rows
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.layout import NCAELayout
from ncae_cuda.ops.memory import StepMemory
from ncae_cuda.ops.plan import Planner, Schedule
from ncae_cuda.ops.shard import Columns, column_part, split_columns


def test_split_balances_entries_and_gives_every_rank_a_column():
    counts = np.array([5, 5, 5, 5, 0, 0, 10, 10])
    assert split_columns(counts, 1).tolist() == [0, 8]
    assert split_columns(counts, 2).tolist() == [0, 6, 8]          # 20 entries each
    bounds = split_columns(np.array([1000, 1, 1, 1]), 3)           # one column dominates
    assert bounds.tolist() == [0, 1, 2, 4] and (np.diff(bounds) >= 1).all()
    assert split_columns(np.zeros(5), 2).tolist() == [0, 2, 5]     # no entries: by columns
    rng = np.random.default_rng(0)
    skewed = rng.zipf(1.5, 10_007).clip(max=10_000)
    for world in (2, 3, 7):                                        # R does not divide N
        bounds = split_columns(skewed, world)
        shares = np.add.reduceat(skewed, bounds[:-1])
        assert bounds[0] == 0 and bounds[-1] == 10_007 and (np.diff(bounds) >= 1).all()
        # each cut falls within one column of the equal share's point
        assert np.abs(shares - skewed.sum() / world).max() < 2 * skewed.max()
    with pytest.raises(ValueError, match="3 columns cannot be shared among 4 processes"):
        split_columns(np.ones(3), 4)


def test_column_part_keeps_each_entry_and_its_id_in_the_whole():
    rng = np.random.default_rng(1)
    m = long_row_matrix(rng, 300, 200, 20)
    bounds = split_columns(np.bincount(m.indices, minlength=300), 3)
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    parts = []
    for r in range(3):
        columns = Columns(int(bounds[r]), int(bounds[r + 1]), 300)
        part, first, entries = column_part(m, columns)
        np.testing.assert_array_equal(entries, np.diff(m.indptr))
        # the ids of the part's entries, row by row, are those of the same entries in m
        local_rows = np.repeat(np.arange(part.shape[0]), np.diff(part.indptr))
        ids = first[local_rows] + np.arange(part.nnz) - part.indptr[local_rows]
        np.testing.assert_array_equal(m.indices[ids], part.indices + columns.lo)
        np.testing.assert_array_equal(m.data[ids], part.data)
        np.testing.assert_array_equal(rows[ids], local_rows)
        parts.append(part)
    assert sum(p.nnz for p in parts) == m.nnz
    np.testing.assert_array_equal(sp.hstack(parts).toarray(), m.toarray())


@pytest.mark.parametrize("lo, hi", [(0, 10), (10, 37), (36, 37), (0, 37)])
def test_a_shard_starts_from_its_rows_of_the_whole_models_parameters(lo, hi):
    whole = NCAELayout(37, (6, 5))
    expect = whole.views(whole.xavier_init(np.random.default_rng([4, 2])))
    shard = NCAELayout(hi - lo, (6, 5), Columns(lo, hi, 37))
    got = shard.views(shard.xavier_init(np.random.default_rng([4, 2])))
    for key, view in got.items():
        np.testing.assert_array_equal(view, expect[key][lo:hi] if key in "EVc" else expect[key],
                                      err_msg=key)


def _step(backend, m, rows, columns, K):
    """The first step of epoch 1 over `rows` of a shard's part of m: (batch, its host copy)."""
    part, first, entries = column_part(m, columns)
    csr = CSR.from_scipy(backend, part, first, entries)
    planner = Planner(csr, rows, Schedule(3, 64, 0.5))
    memory = StepMemory(backend, NCAELayout(columns.n, (K,), columns), "explicit",
                        planner.geometry)
    batch = cut_first(backend, memory, csr, planner.plan(1))
    return batch, host_batch(backend, batch)


def test_a_shards_ops_add_up_to_the_whole(backend):
    rng = np.random.default_rng(5)
    N, K = 500, 13
    m = long_row_matrix(rng, N, 400, 50)
    rows = trainable_rows(CSR.from_scipy(ref, m))
    whole, whole_host = _step(backend, m, rows, Columns(0, N, N), K)
    bounds = split_columns(np.bincount(m.indices, minlength=N), 3)
    E, V = (rng.normal(0, 0.3, (N, K)).astype(np.float32) for _ in range(2))
    c, b1 = rng.normal(0, 0.3, N).astype(np.float32), rng.normal(0, 0.3, K).astype(np.float32)
    a = np.tanh(rng.normal(0, 1, (64, K))).astype(np.float32)
    d = backend.to_device

    def outputs(batch, lo, hi, b1):
        """gather_forward and sparse_output_backward on the columns [lo, hi)."""
        pre = d(np.zeros((64, K), np.float32))
        backend.gather_forward(pre, batch, d(E[lo:hi]), b1 if b1 is None else d(b1), 2.0)
        da, dV = d(np.zeros((64, K), np.float32)), d(np.zeros((hi - lo, K), np.float32))
        dc, loss = d(np.zeros(hi - lo, np.float32)), d(np.zeros(64, np.float32))
        g = d(np.zeros(len(batch.cols), np.float32))
        backend.sparse_output_backward(da, dV, dc, loss, g, d(a), d(V[lo:hi]), d(c[lo:hi]),
                                       batch, 0.8, 0.3, 2.0, 3.0, True, 0.5)
        return [host(backend, x) for x in (pre, da, dV, dc, loss)]

    a1, da, dV, dc, loss = outputs(whole, 0, N, b1)
    pre_sum, da_sum, loss_sum = 0.0, 0.0, 0.0
    keep = {}                               # (row, column) -> kept, in the whole batch
    for b, (s0, s1) in enumerate(zip(whole_host.indptr[:-1], whole_host.indptr[1:])):
        keep.update({(b, j): k for j, k in zip(whole_host.cols[s0:s1], whole_host.keep[s0:s1])})
    for r in range(3):
        columns = Columns(int(bounds[r]), int(bounds[r + 1]), N)
        batch, h = _step(backend, m, rows, columns, K)
        np.testing.assert_array_equal(h.row_entries, whole_host.row_entries)
        np.testing.assert_array_equal(h.row_weight, whole_host.row_weight)
        for b, (s0, s1) in enumerate(zip(h.indptr[:-1], h.indptr[1:])):
            for j, k in zip(h.cols[s0:s1] + columns.lo, h.keep[s0:s1]):
                assert keep[b, j] == k                  # the same mask as one process draws
        pre, d_a, d_V, d_c, part_loss = outputs(batch, columns.lo, columns.hi, None)
        pre_sum, da_sum, loss_sum = pre_sum + pre, da_sum + d_a, loss_sum + part_loss
        assert_close(d_V, dV[columns.lo:columns.hi])
        assert_close(d_c, dc[columns.lo:columns.hi])
    assert_close(np.tanh(pre_sum + b1), a1)
    assert_close(da_sum, da)
    assert_close(loss_sum, loss)


def test_gather_forward_without_bias_is_the_sum(backend):
    rng = np.random.default_rng(6)
    m = long_row_matrix(rng, 80, 60, 10)
    rows = trainable_rows(CSR.from_scipy(ref, m))
    batch, h = _step(backend, m, rows, Columns(0, 80, 80), 5)
    E = rng.normal(0, 0.3, (80, 5)).astype(np.float32)
    expect = np.empty((64, 5))
    ref.gather_forward(expect, h._replace(vals=h.vals.astype(np.float64)), E.astype(np.float64),
                       None, 2.0)
    out = backend.to_device(np.full((64, 5), np.nan, np.float32))
    backend.gather_forward(out, batch, backend.to_device(E), None, 2.0)
    assert_close(host(backend, out), expect)
    assert np.abs(expect).max() > 1                     # not squashed by a tanh
