"""Every op of every fast backend against ops/reference.py run in float64, on random inputs.

Shapes include empty rows, a single row, padding rows, K not a multiple of 4 and N < 32. The
reference itself is checked against hand-computed cases here and against finite differences in
test_model.py, so agreement with it is agreement with the math.
"""
import numpy as np
import pytest

from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR, dropout_threshold

from helpers import assert_close, host, on, random_batch, random_matrix, random_rows

# (rows in the CSR, N columns, K width, rows in the batch, batch size)
SHAPES = [(40, 50, 16, 32, 32), (9, 7, 5, 1, 4), (300, 31, 13, 100, 128), (64, 200, 33, 64, 64)]


def _keep(rng, n):
    return (rng.random(n) < 0.7).astype(np.uint8)


def _runs(batch):
    """(col_ptr, col_ids) of the distinct columns: a backend may pad both with empty runs."""
    col_ptr, col_ids = np.asarray(batch.col_ptr), np.asarray(batch.col_ids)
    n_runs = int((col_ids >= 0).sum())
    assert (col_ids[n_runs:] == -1).all() and (col_ptr[n_runs:] == len(batch.cols)).all()
    return col_ptr[:n_runs + 1], col_ids[:n_runs]


# ---------------------------------------------------------------------------------------------
# batching and dropout

@pytest.mark.parametrize("shape", SHAPES)
def test_cut_batch_matches_reference(backend, shape):
    rng = np.random.default_rng(1)
    n_rows, n_cols, _, n_batch, batch_size = shape
    m, rows = random_rows(rng, n_rows, n_cols, n_batch)
    expect = ref.cut_batch(CSR.from_scipy(ref, m), rows, batch_size)
    got = backend.cut_batch(CSR.from_scipy(backend, m), rows, batch_size)
    got = type(got)(*(backend.to_host(x) for x in got))
    for field in ("indptr", "cols", "vals", "entry_ids", "entry_rows", "col_order", "row_weight"):
        np.testing.assert_array_equal(getattr(got, field), getattr(expect, field), err_msg=field)
    for g, e in zip(_runs(got), _runs(expect)):
        np.testing.assert_array_equal(g, e)


def test_cut_batch_hand_case():
    # rows 2 and 0 of [[., 5, .], [1, ., .], [4, ., 2]], padded to 3 rows
    indptr = np.array([0, 1, 2, 4], np.int32)
    csr = CSR(indptr, np.array([1, 0, 0, 2], np.int32), np.array([5, 1, 4, 2], np.float32),
              indptr, (3, 3))
    b = ref.cut_batch(csr, np.array([2, 0], np.int32), 3)
    np.testing.assert_array_equal(b.indptr, [0, 2, 3, 3])
    np.testing.assert_array_equal(b.cols, [0, 2, 1])
    np.testing.assert_array_equal(b.vals, [4, 2, 5])
    np.testing.assert_array_equal(b.entry_ids, [2, 3, 0])
    np.testing.assert_array_equal(b.entry_rows, [0, 0, 1])
    np.testing.assert_array_equal(b.col_ids, [0, 1, 2])
    np.testing.assert_array_equal(b.col_order, [0, 2, 1])
    np.testing.assert_array_equal(b.col_ptr, [0, 1, 2, 3])
    np.testing.assert_array_equal(b.row_weight, [0.5, 0.5, 0])


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9])
def test_dropout_keep_matches_reference_and_rate(backend, q):
    entry_ids = np.random.default_rng(2).permutation(200_000).astype(np.int32)
    expect = np.empty(len(entry_ids), np.uint8)
    ref.dropout_keep(expect, entry_ids, 7, 3, q)
    keep = backend.to_device(np.full(len(entry_ids), 9, np.uint8))
    backend.dropout_keep(keep, backend.to_device(entry_ids), 7, 3, q)
    np.testing.assert_array_equal(backend.to_host(keep), expect)
    assert abs(expect.mean() - (1 - q)) < 0.005
    if q == 0.0:
        assert expect.all()


def test_dropout_masks_do_not_depend_on_batching(backend):
    rng = np.random.default_rng(3)
    m = random_matrix(rng, 200, 60)
    csr = CSR.from_scipy(backend, m)
    whole = np.empty(m.nnz, np.uint8)
    ref.dropout_keep(whole, np.arange(m.nnz, dtype=np.int32), 11, 4, 0.5)
    for batch_size in (1, 7, 64):
        order = rng.permutation(200).astype(np.int32)
        for start in range(0, 200, batch_size):
            b = backend.cut_batch(csr, order[start:start + batch_size], batch_size)
            keep = backend.xp.empty(len(b.cols), np.uint8)
            backend.dropout_keep(keep, b.entry_ids, 11, 4, 0.5)
            np.testing.assert_array_equal(backend.to_host(keep),
                                          whole[backend.to_host(b.entry_ids)])


def test_dropout_masks_change_with_epoch_and_seed():
    ids = np.arange(10_000, dtype=np.int32)
    masks = []
    for seed, epoch in [(0, 0), (0, 1), (1, 0)]:
        keep = np.empty(len(ids), np.uint8)
        ref.dropout_keep(keep, ids, seed, epoch, 0.5)
        masks.append(keep)
    assert (masks[0] != masks[1]).mean() > 0.4 and (masks[0] != masks[2]).mean() > 0.4


def test_dropout_threshold_is_exact():
    assert dropout_threshold(0.0) == 0 and dropout_threshold(0.5) == 1 << 23
    with pytest.raises(ValueError):
        dropout_threshold(1.0)


# ---------------------------------------------------------------------------------------------
# input layer

@pytest.mark.parametrize("shape", SHAPES)
def test_gather_forward(backend, shape):
    rng = np.random.default_rng(4)
    n_rows, N, K, n_batch, B = shape
    batch = random_batch(rng, n_rows, N, n_batch, B)
    keep = _keep(rng, len(batch.cols))
    E = rng.normal(0, 0.3, (N, K)).astype(np.float32)
    b1 = rng.normal(0, 0.3, K).astype(np.float32)
    expect = np.empty((B, K))
    ref.gather_forward(expect, batch.indptr, batch.cols, batch.vals.astype(np.float64), keep,
                       E.astype(np.float64), b1.astype(np.float64), 2.0)
    a1 = backend.to_device(np.full((B, K), np.nan, np.float32))
    d = on(backend, batch)
    backend.gather_forward(a1, d.indptr, d.cols, d.vals, backend.to_device(keep),
                           backend.to_device(E), backend.to_device(b1), 2.0)
    assert_close(host(backend, a1), expect)


def test_gather_forward_hand_case():
    E = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    a1 = np.empty((2, 2))
    # row 0: entries (col 0, 3.0) kept and (col 1, 5.0) dropped; row 1 empty
    ref.gather_forward(a1, np.array([0, 2, 2]), np.array([0, 1]), np.array([3.0, 5.0]),
                       np.array([1, 0], np.uint8), E, np.array([0.1, -0.2]), 0.5)
    np.testing.assert_allclose(a1, np.tanh([[1.5 + 0.1, -0.2], [0.1, -0.2]]))


@pytest.mark.parametrize("shape", SHAPES)
def test_scatter_backward(backend, shape):
    rng = np.random.default_rng(5)
    n_rows, N, K, n_batch, B = shape
    m, rows = random_rows(rng, n_rows, N, n_batch)
    batch = ref.cut_batch(CSR.from_scipy(ref, m), rows, B)
    keep = _keep(rng, len(batch.cols))
    dpre1 = rng.normal(0, 1, (B, K)).astype(np.float32)
    dE0 = rng.normal(0, 1, (N, K)).astype(np.float32)       # accumulates: start non-zero
    db0 = rng.normal(0, 1, K).astype(np.float32)
    dE, db1 = dE0.astype(np.float64), db0.astype(np.float64)
    ref.scatter_backward(dE, db1, dpre1.astype(np.float64), batch.indptr, batch.cols,
                         batch.vals.astype(np.float64), keep, 0.5, batch.entry_rows,
                         batch.col_order, batch.col_ptr, batch.col_ids)
    results = []
    for _ in range(2):                                      # the backend's own batch layout
        d = backend.cut_batch(CSR.from_scipy(backend, m), rows, B)
        g_dE, g_db1 = backend.to_device(dE0.copy()), backend.to_device(db0.copy())
        backend.scatter_backward(g_dE, g_db1, backend.to_device(dpre1), d.indptr, d.cols,
                                 d.vals, backend.to_device(keep), 0.5, d.entry_rows,
                                 d.col_order, d.col_ptr, d.col_ids)
        results.append((backend.to_host(g_dE), backend.to_host(g_db1)))
    assert_close(results[0][0], dE)
    assert_close(results[0][1], db1)
    # deterministic: bit-identical on a second run
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


# ---------------------------------------------------------------------------------------------
# explicit output

@pytest.mark.parametrize("shape", SHAPES)
def test_sparse_output_forward(backend, shape):
    rng = np.random.default_rng(6)
    n_rows, N, K, n_batch, B = shape
    batch = random_batch(rng, n_rows, N, n_batch, B)
    a = np.tanh(rng.normal(0, 1, (B, K))).astype(np.float32)
    V = rng.normal(0, 0.3, (N, K)).astype(np.float32)
    c = rng.normal(0, 0.3, N).astype(np.float32)
    expect = np.empty(len(batch.cols))
    ref.sparse_output_forward(expect, a.astype(np.float64), V.astype(np.float64),
                              c.astype(np.float64), batch.indptr, batch.cols, 2.0, 3.0)
    yhat = backend.to_device(np.full(len(batch.cols), np.nan, np.float32))
    d = on(backend, batch)
    backend.sparse_output_forward(yhat, backend.to_device(a), backend.to_device(V),
                                  backend.to_device(c), d.indptr, d.cols, 2.0, 3.0)
    assert_close(host(backend, yhat), expect)


@pytest.mark.parametrize("shape", SHAPES)
def test_sparse_output_backward(backend, shape):
    rng = np.random.default_rng(7)
    n_rows, N, K, n_batch, B = shape
    m, rows = random_rows(rng, n_rows, N, n_batch)
    batch = ref.cut_batch(CSR.from_scipy(ref, m), rows, B)
    keep = _keep(rng, len(batch.cols))
    a = np.tanh(rng.normal(0, 1, (B, K))).astype(np.float32)
    V = rng.normal(0, 0.3, (N, K)).astype(np.float32)
    yhat = (2.0 * np.tanh(rng.normal(0, 1, len(batch.cols))) + 3.0).astype(np.float32)
    starts = [rng.normal(0, 1, shape).astype(np.float32) for shape in ((B, K), (N, K), (N,))]
    f64 = [t.astype(np.float64) for t in starts]            # da, dV, dc accumulate
    loss = np.empty(B)
    ref.sparse_output_backward(*f64, loss, a.astype(np.float64), V.astype(np.float64),
                               yhat.astype(np.float64), batch.indptr, batch.cols,
                               batch.vals.astype(np.float64), keep, batch.row_weight,
                               0.8, 0.3, 2.0, 3.0, batch.entry_rows, batch.col_order,
                               batch.col_ptr, batch.col_ids)
    results = []
    for _ in range(2):
        d = backend.cut_batch(CSR.from_scipy(backend, m), rows, B)
        got = [backend.to_device(t.copy()) for t in starts]
        g_loss = backend.to_device(np.full(B, np.nan, np.float32))
        backend.sparse_output_backward(*got, g_loss, backend.to_device(a), backend.to_device(V),
                                       backend.to_device(yhat), d.indptr, d.cols, d.vals,
                                       backend.to_device(keep), d.row_weight, 0.8, 0.3, 2.0,
                                       3.0, d.entry_rows, d.col_order, d.col_ptr, d.col_ids)
        results.append([backend.to_host(t) for t in (*got, g_loss)])
    for actual, expect in zip(results[0], [*f64, loss]):
        assert_close(actual, expect)
    for first, second in zip(*results):
        np.testing.assert_array_equal(first, second)


def test_sparse_output_backward_hand_case():
    # one row, two entries: x = (4, 2), yhat = (3, 3), entry 0 dropped (alpha), 1 kept (beta)
    # s = 2, m_off = 3: t = tanh(out) = 0 for both, so d yhat/d out = s
    da, dV, dc, loss = np.zeros((1, 1)), np.zeros((2, 1)), np.zeros(2), np.zeros(1)
    ref.sparse_output_backward(da, dV, dc, loss, np.array([[0.5]]), np.array([[1.0], [-1.0]]),
                               np.array([3.0, 3.0]), np.array([0, 2]), np.array([0, 1]),
                               np.array([4.0, 2.0]), np.array([0, 1], np.uint8),
                               np.array([1.0]), 1.0, 0.5, 2.0, 3.0, None, None, None, None)
    # loss = 1/2 * (3-4)^2 + 0.5/2 * (3-2)^2
    np.testing.assert_allclose(loss, [0.75])
    g = np.array([1.0 / 2 * 2 * (3 - 4) * 2, 0.5 / 2 * 2 * (3 - 2) * 2])   # w/|K| * 2 err * s
    np.testing.assert_allclose(dc, g)
    np.testing.assert_allclose(dV[:, 0], g * 0.5)
    np.testing.assert_allclose(da, [[g[0] * 1.0 + g[1] * -1.0]])


# ---------------------------------------------------------------------------------------------
# implicit output

@pytest.mark.parametrize("shape", SHAPES)
def test_reweighted_error(backend, shape):
    rng = np.random.default_rng(8)
    n_rows, N, _, n_batch, B = shape
    batch = random_batch(rng, n_rows, N, n_batch, B)
    out = rng.normal(0, 1.5, (B, N)).astype(np.float32)
    weights = rng.random(N).astype(np.float32)
    expect_d, expect_loss = np.empty((B, N)), np.empty(B)
    ref.reweighted_error(expect_d, expect_loss, out.astype(np.float64), batch.indptr,
                         batch.cols, weights.astype(np.float64), batch.row_weight)
    dout = backend.to_device(np.full((B, N), np.nan, np.float32))
    loss = backend.to_device(np.full(B, np.nan, np.float32))
    d = on(backend, batch)
    backend.reweighted_error(dout, loss, backend.to_device(out), d.indptr, d.cols,
                             backend.to_device(weights), d.row_weight)
    assert_close(host(backend, dout), expect_d)
    assert_close(host(backend, loss), expect_loss)
    assert not host(backend, dout)[batch.row_weight == 0].any()   # padding rows weigh nothing


def test_reweighted_error_hand_case():
    # one row, N = 2: column 0 observed, column 1 not (weight 0.25); out = (0, atanh(0.5))
    dout, loss = np.empty((1, 2)), np.empty(1)
    ref.reweighted_error(dout, loss, np.array([[0.0, np.arctanh(0.5)]]), np.array([0, 1]),
                         np.array([0]), np.array([7.0, 0.25]), np.array([0.5]))
    np.testing.assert_allclose(loss, [1.0 + 0.25 * 0.25])
    np.testing.assert_allclose(dout, [[0.5 * 2 * (0 - 1) * 1, 0.5 * 2 * 0.25 * 0.5 * 0.75]])


# ---------------------------------------------------------------------------------------------
# optimizer

@pytest.mark.parametrize("n", [1, 5, 1000, 4099])
def test_adam(backend, n):
    rng = np.random.default_rng(9)
    p0, g = (rng.normal(0, 1, n).astype(np.float32) for _ in range(2))
    m0 = rng.normal(0, 0.1, n).astype(np.float32)
    v0 = rng.random(n).astype(np.float32) * 0.01
    expect = [t.astype(np.float64) for t in (p0, m0, v0)]
    ref.adam(*expect, g.astype(np.float64), 1e-2, 0.9, 0.999, 1e-8, 0.1, 7)
    got = [backend.to_device(t.copy()) for t in (p0, m0, v0)]
    backend.adam(*got, backend.to_device(g), 1e-2, 0.9, 0.999, 1e-8, 0.1, 7)
    for actual, e in zip(got, expect):
        assert_close(host(backend, actual), e)


def test_adam_first_step_is_a_signed_lr_step():
    # step 1 from zero moments: m_hat = g, v_hat = g^2, so p moves by lr * g / (|g| + eps)
    p, g = np.array([1.0, 1.0, 1.0]), np.array([0.5, -2.0, 0.0])
    ref.adam(p, np.zeros(3), np.zeros(3), g, 0.1, 0.9, 0.999, 1e-8, 0.0, 1)
    np.testing.assert_allclose(p, [0.9, 1.1, 1.0], rtol=1e-7)


# ---------------------------------------------------------------------------------------------
# evaluation

def _heldout_outside(rng, batch, N):
    """One held-out column per row, never one of the row's excluded (batch) columns."""
    heldout = np.empty(len(batch.row_weight), np.int32)
    for b in range(len(heldout)):
        excluded = set(batch.cols[batch.indptr[b]:batch.indptr[b + 1]])
        heldout[b] = rng.choice([j for j in range(N) if j not in excluded])
    return heldout


@pytest.mark.parametrize("shape", SHAPES)
def test_rank_heldout(backend, shape):
    rng = np.random.default_rng(10)
    n_rows, N, _, n_batch, B = shape
    batch = random_batch(rng, n_rows, N, n_batch, B)
    scores = rng.integers(0, 4, (B, N)).astype(np.float32)        # few values: many ties
    heldout = _heldout_outside(rng, batch, N)
    scores[-1, ::3] = np.nan                                       # NaN candidates never count
    scores[0, heldout[0]] = np.nan                                 # a NaN held-out ranks last
    expect = np.empty(B, np.int64)
    ref.rank_heldout(expect, scores, heldout, batch.indptr, batch.cols)
    ranks = backend.to_device(np.full(B, -7, np.int32))
    d = on(backend, batch)
    backend.rank_heldout(ranks, backend.to_device(scores), backend.to_device(heldout),
                         d.indptr, d.cols)
    np.testing.assert_array_equal(backend.to_host(ranks), expect)


def test_rank_heldout_hand_cases():
    scores = np.array([[5.0, 1.0, 5.0, 9.0, 2.0],     # held-out 0 ties 2; 3 beats it but is seen
                       [3.0, 3.0, 3.0, 3.0, 3.0],     # constant model: ties with everything
                       [0.0, np.nan, 1.0, 2.0, 3.0],  # NaN held-out ranks last
                       [9.0, 1.0, 2.0, 3.0, 4.0]])    # best
    excl_indptr = np.array([0, 1, 2, 2, 2])
    excl_cols = np.array([3, 4])
    ranks = np.empty(4, np.int64)
    ref.rank_heldout(ranks, scores, np.array([0, 0, 1, 0]), excl_indptr, excl_cols)
    np.testing.assert_array_equal(ranks, [1, 3, 4, 0])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("M", [1, 5, 40])
def test_topk(backend, shape, M):
    rng = np.random.default_rng(11)
    n_rows, N, _, n_batch, B = shape
    batch = random_batch(rng, n_rows, N, n_batch, B)
    scores = rng.normal(0, 1, (B, N)).astype(np.float32)
    scores[::2] = np.round(scores[::2])                            # many ties (and -0.0, 0.0)
    scores[-1, ::4] = np.nan                                       # NaN is never recommended
    expect_idx, expect_vals = np.empty((B, M), np.int64), np.empty((B, M), np.float32)
    ref.topk(expect_idx, expect_vals, scores, batch.indptr, batch.cols)
    idx = backend.to_device(np.full((B, M), -7, np.int32))
    vals = backend.to_device(np.full((B, M), np.nan, np.float32))
    d = on(backend, batch)
    backend.topk(idx, vals, backend.to_device(scores), d.indptr, d.cols)
    np.testing.assert_array_equal(backend.to_host(idx), expect_idx)
    np.testing.assert_array_equal(backend.to_host(vals), expect_vals)


def test_topk_hand_case():
    scores = np.array([[0.5, 2.0, 2.0, -1.0, 7.0],    # 4 is excluded; 1 and 2 tie
                       [1.0, np.nan, 3.0, 0.0, 0.0]])
    idx, vals = np.empty((2, 3), np.int64), np.empty((2, 3))
    ref.topk(idx, vals, scores, np.array([0, 1, 4]), np.array([4, 0, 2, 3]))
    np.testing.assert_array_equal(idx, [[1, 2, 0], [4, -1, -1]])
    np.testing.assert_array_equal(vals, [[2.0, 2.0, 0.5], [0.0, -np.inf, -np.inf]])


def test_topk_radix_select_at_scale(backend):
    # wide rows with one value repeated across the cut: the equal-key bookkeeping decides
    rng = np.random.default_rng(12)
    B, N, M = 3, 5000, 300
    scores = rng.choice(np.float32([-2.5, 0.0, 1.0, 1.5, 4.0]), (B, N)).astype(np.float32)
    scores[1] = rng.normal(0, 1, N)
    excl = np.sort(rng.choice(N, 500, replace=False)).astype(np.int32)
    excl_indptr = np.array([0, 500, 500, 500], np.int32)
    expect_idx, expect_vals = np.empty((B, M), np.int64), np.empty((B, M), np.float32)
    ref.topk(expect_idx, expect_vals, scores, excl_indptr, excl)
    idx = backend.to_device(np.empty((B, M), np.int32))
    vals = backend.to_device(np.empty((B, M), np.float32))
    backend.topk(idx, vals, backend.to_device(scores), backend.to_device(excl_indptr),
                 backend.to_device(excl))
    np.testing.assert_array_equal(backend.to_host(idx), expect_idx)
