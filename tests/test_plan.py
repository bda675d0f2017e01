"""The epoch plan: each step's rows, their entry pointers and their entries grouped by column,
against a plain numpy derivation; dropout masks that do not depend on batching."""
import numpy as np
import pytest

from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR
from ncae_cuda.plan import Planner, Schedule, window_sizes

from helpers import long_row_matrix, one_step, random_matrix


def planner_of(m, batch_size, q=0.5, seed=3):
    csr = CSR.from_scipy(ref, m)
    rows = np.flatnonzero(np.diff(m.indptr)).astype(np.int32)
    return Planner(csr, rows, Schedule(seed, batch_size, q)), rows


@pytest.mark.parametrize("n_rows, n_cols, batch_size", [(50, 30, 8), (200, 1000, 64),
                                                        (7, 3, 16), (300, 40, 1)])
def test_plan_against_numpy(n_rows, n_cols, batch_size):
    m = random_matrix(np.random.default_rng(n_rows), n_rows, n_cols, density=0.2)
    planner, rows = planner_of(m, batch_size)
    plan = planner.plan(5)
    assert sorted(plan.order) == sorted(rows) and plan.steps == -(-len(rows) // batch_size)
    for s in range(plan.steps):
        chunk = plan.order[s * batch_size:(s + 1) * batch_size]
        lengths = np.zeros(batch_size, np.int64)
        lengths[:len(chunk)] = np.diff(m.indptr)[chunk]
        np.testing.assert_array_equal(plan.batch_indptr[s], np.concatenate([[0],
                                                                           np.cumsum(lengths)]))
        # the batch's entries by (column, source row): what the plan's col_order must list
        entry_rows = np.repeat(np.arange(batch_size), lengths)
        entry_ids = np.concatenate([np.arange(m.indptr[r], m.indptr[r + 1]) for r in chunk])
        cols = m.indices[entry_ids]
        expect = np.lexsort((chunk[entry_rows], cols))
        got = plan.col_order[plan.col_offsets[s]:plan.col_offsets[s + 1]]
        np.testing.assert_array_equal(got, expect)
    assert plan.col_offsets[-1] == m.nnz


def test_plans_are_seeded_by_epoch():
    m = random_matrix(np.random.default_rng(0), 100, 50)
    planner, _ = planner_of(m, 16)
    a, b, c = planner.plan(1), planner.plan(1), planner.plan(2)
    for field in ("header", "order", "batch_indptr", "col_order"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.order, c.order) and not np.array_equal(a.header, c.header)


def test_geometry_holds_every_step():
    m = long_row_matrix(np.random.default_rng(1), 5000, 4000, 60)
    planner, rows = planner_of(m, 8)
    g = planner.geometry
    for epoch in range(5):
        plan = planner.plan(epoch)
        assert max(plan.entries(s) for s in range(plan.steps)) <= g.max_entries
    assert g.epoch_entries == m.nnz and g.steps == plan.steps and g.rows == len(rows)
    assert 2 * (-(-4000 // g.window) + 1) <= g.window and g.column_window >= 8


@pytest.mark.parametrize("longest, B, expect", [(0, 128, (32, 128)), (480, 128, (32, 128)),
                                                (481, 128, (64, 128)), (52_334, 128, (512, 512)),
                                                (100, 16, (32, 32))])
def test_window_sizes(longest, B, expect):
    assert window_sizes(longest, B) == expect
    C = expect[0]
    assert 2 * (-(-longest // C) + 1) <= C          # two rows' pieces: a window's worth


def test_dropout_masks_do_not_depend_on_batching(backend):
    m = random_matrix(np.random.default_rng(3), 200, 60)
    whole = np.empty(m.nnz, np.uint8)
    ref.dropout_keep(whole, np.arange(m.nnz, dtype=np.int32), 11, 4, 0.5)
    rows = np.flatnonzero(np.diff(m.indptr)).astype(np.int32)
    for batch_size in (1, 7, 64):
        csr = CSR.from_scipy(backend, m)
        planner = Planner(csr, rows, Schedule(11, batch_size, 0.5))
        _, memory, _ = one_step(backend, m, rows, batch_size, (4,), seed=11)
        plan = planner.plan(4)
        backend.load_plan(memory, plan)
        for s in range(plan.steps):
            batch = backend.cut_batch(memory, csr, plan, s)
            chunk = plan.order[s * batch_size:(s + 1) * batch_size]
            ids = np.concatenate([np.arange(m.indptr[r], m.indptr[r + 1]) for r in chunk])
            np.testing.assert_array_equal(backend.to_host(batch.keep), whole[ids])
            memory.step[...] = backend.to_device(np.int32([s + 1]))   # as step_loss would


def test_a_prefetched_plan_is_the_plan():
    m = random_matrix(np.random.default_rng(4), 120, 40)
    (ahead, _), (now, _) = planner_of(m, 16), planner_of(m, 16)
    ahead.prefetch(3)
    for field in ("header", "order", "batch_indptr", "col_offsets", "col_order"):
        np.testing.assert_array_equal(getattr(ahead.plan(3), field), getattr(now.plan(3), field))
