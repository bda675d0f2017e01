"""The epoch plan: each step's rows, their entry pointers and their entries grouped by column,
against a plain numpy derivation; dropout masks that do not depend on batching."""
import numpy as np
import pytest
from helpers import long_row_matrix, one_step, random_matrix

from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.plan import WINDOWS_PER_SM, Planner, Schedule, pieces_bound, window_sizes


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
        for s in range(plan.steps):                 # every batch's windows fit the scratch
            assert -(-plan.entries(s) // plan.windows[s].min()) <= g.max_windows
    assert g.epoch_entries == m.nnz and g.steps == plan.steps and g.rows == len(rows)
    assert g.max_windows == min(g.max_entries, 132 * WINDOWS_PER_SM)


def test_plan_records_each_steps_windows():
    m = long_row_matrix(np.random.default_rng(2), 5000, 3000, 60)
    planner, _ = planner_of(m, 8)
    plan = planner.plan(3)
    lengths = np.diff(plan.batch_indptr, axis=1)                     # (steps, B)
    expect = [window_sizes(lengths[s].max(), plan.entries(s), 8, 132)[0]
              for s in range(plan.steps)]
    np.testing.assert_array_equal(plan.windows, expect)
    assert len(np.unique(plan.windows[:, 0])) > 1   # the batch with the long row differs


# (longest row, entries, B, SMs): (window over rows, over columns), by hand
@pytest.mark.parametrize("longest, entries, B, sms, expect", [
    (0, 0, 128, 132, (1, 12)),              # nothing: runs of 128 need 12 (11 + 1 pieces)
    (1000, 4810, 128, 108, (33, 32)),       # issue 24's skewed batch on an A100: 146 windows
                                            # (a power of two >= sqrt(2 * 1000) gave 64: 76)
    (52_334, 200_000, 128, 132, (379, 379)),  # plenty of entries: 4 windows an SM, no more
    (50, 2112, 128, 132, (16, 16)),         # few entries: every SM gets a window of 16 < 32
    (5000, 2112, 128, 132, (72, 16)),       # a long row bounds the rows' windows: 71 + 1 pieces
    (10, 100, 4096, 132, (4, 133)),         # runs of 4096 entries span at most 31 windows
])
def test_window_sizes(longest, entries, B, sms, expect):
    np.testing.assert_array_equal(window_sizes(longest, entries, B, sms), [expect])


def test_window_sizes_keep_their_bounds():
    rng = np.random.default_rng(5)
    for _ in range(2000):
        B, sms = int(rng.integers(1, 5000)), int(rng.integers(1, 200))
        longest = int(rng.integers(0, 60_000))
        entries = longest + int(rng.integers(0, 300_000))
        rows, columns = window_sizes(longest, entries, B, sms)[0]
        assert -(-longest // rows) + 1 <= rows                  # a row's pieces: C at most
        assert -(-B // columns) + 1 <= columns                  # a run's pieces: C at most
        assert -(-(B - 1) // columns) <= 31                     # a run spans 31 windows on
        run = max(pieces_bound(B), -(-(B - 1) // 31))           # either side at most
        for C, least in ((rows, pieces_bound(longest)), (columns, run)):
            assert -(-entries // C) <= max(1, sms * WINDOWS_PER_SM)     # the scratch holds
            if C > least:                   # where the bounds allow: every SM has a window,
                assert -(-entries // C) >= min(sms, entries)    # or every entry one


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
