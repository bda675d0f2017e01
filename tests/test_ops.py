"""Every op of every fast backend against ops/reference.py run in float64, on random inputs.

Each backend cuts its own batch from the same epoch plan (the GPU's into its step memory, with
its windows), and the reference computes from a host copy of it. Shapes include empty rows,
padding rows, K = 1, K not a multiple of 4, K over two slabs, N < 32, one row of 1,500
entries among short ones (its sums shared by some 40 windows on the GPU), and 128 rows over
the same 6 columns (each column's run shared by some 10 windows); the training steps' ops are
run twice and must agree bit for bit (on the emulator, the second time with the blocks in the
other order). The reference itself is checked against hand-computed cases here and against
finite differences in test_network.py, so agreement with it is agreement with the math.
"""
from contextlib import nullcontext

import numpy as np
import pytest
import scipy.sparse as sp
from helpers import (
    F32_RTOL,
    assert_close,
    cut_first,
    host,
    host_batch,
    long_row_matrix,
    one_step,
    random_matrix,
    random_rows,
)

from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import (
    CSR,
    DEFAULT_SMS,
    GOLDEN,
    KEEP_BITS,
    adam_state,
    dropout_stream,
    dropout_threshold,
    mix64,
)
from ncae_cuda.ops.conformance import TF32_TOLERANCE
from ncae_cuda.ops.gpu import BLOCK, CupyDevice
from ncae_cuda.ops.layout import NCAELayout
from ncae_cuda.ops.memory import StepMemory
from ncae_cuda.ops.plan import MIN_WINDOW, EpochPlan, Geometry, pieces_bound, window_sizes

# (rows in the CSR, N columns, K width, rows in the batch, batch size)
SHAPES = [(40, 50, 16, 32, 32), (9, 7, 5, 1, 4), (300, 31, 13, 100, 128), (64, 200, 33, 64, 64),
          (30, 20, 1, 20, 32), (60, 40, 260, 40, 48)]
IDS = ["16", "N7-K5", "N31-K13-padded", "K33", "K1", "K260"]
LONG_ROW = "long-row"         # one LONG-entry row among 60 short ones and 3 empty, K = 6
LONG, LONG_COLUMNS = 1_500, 1_800    # long enough that its pieces of sums (pieces_bound), not
                                     # MIN_WINDOW, size the windows over rows: as many windows
                                     # share it as a row can have (test_the_long_row_...)
LONG_RUNS = "long-runs"       # 128 rows over the same 6 columns, some entries and a row empty,
                              # K = 7: runs of some 115 entries in windows of 12 over columns
STEPS = SHAPES + [LONG_ROW, LONG_RUNS]   # the training steps' ops run on these
STEP_IDS = IDS + [LONG_ROW, LONG_RUNS]
# the ops with a block a row run on these too: N over twice a block's threads, so that each
# thread strides over several columns
ROW_SHAPES, ROW_IDS = SHAPES + [(20, 700, 8, 20, 24)], IDS + ["N700"]


def long_runs_matrix(rng) -> sp.csr_matrix:
    ratings = rng.integers(1, 6, (128, 6)) * (rng.random((128, 6)) >= 0.1)
    ratings[5] = 0
    m = sp.csr_matrix(ratings.astype(np.float32))
    m.eliminate_zeros()
    return m


def case(shape, seed, backend, feedback="explicit"):
    """(rng, m, batch on the backend, the same batch on the host, K, B) of a random step."""
    rng = np.random.default_rng(seed)
    if shape in (LONG_ROW, LONG_RUNS):
        m = long_row_matrix(rng, LONG_COLUMNS, LONG, 60) if shape == LONG_ROW \
            else long_runs_matrix(rng)
        rows, K = np.arange(m.shape[0], dtype=np.int32), 6 if shape == LONG_ROW else 7
        B = m.shape[0] + 3 if shape == LONG_ROW else m.shape[0]
    else:
        n_rows, N, K, n_batch, B = shape
        m, rows = random_rows(rng, n_rows, N, n_batch)
    batch, _, _ = one_step(backend, m, rows, B, (K,), feedback)
    return rng, m, batch, host_batch(backend, batch), K, B


def on(backend, *arrays):
    return [backend.to_device(a) for a in arrays]


def runs(backend):
    """Two runs that must agree bit for bit; on the emulator, the second with the blocks (and
    each block's warps) in the other order, so that other windows are the last to arrive and
    add the pieces."""
    descending = getattr(getattr(backend, "device", None), "descending", None)
    for run in range(2):
        with descending() if descending and run else nullcontext():
            yield run


# ---------------------------------------------------------------------------------------------
# batching and dropout

def test_the_long_row_sizes_the_windows_and_is_cut_into_as_many_pieces_as_they_hold():
    hb = case(LONG_ROW, 1, ref)[3]
    C = window_sizes(LONG, len(hb.cols), len(hb.row_weight), DEFAULT_SMS)[0, 0]
    assert C == pieces_bound(LONG) > MIN_WINDOW
    assert -(-LONG // C) + 1 >= C - 1       # some C windows share its sums: the most there can be


@pytest.mark.parametrize("shape", STEPS, ids=STEP_IDS)
def test_cut_batch_matches_reference(backend, shape):
    expect, got = case(shape, 1, ref)[3], case(shape, 1, backend)[3]
    for field in expect._fields[:-1]:
        np.testing.assert_array_equal(getattr(got, field), getattr(expect, field),
                                      err_msg=field)


def test_cut_batch_hand_case():
    # rows 2 and 0 of [[., 5, .], [1, ., .], [4, ., 2]] in a batch of 3, nothing dropped
    m = sp.csr_matrix((np.float32([5, 1, 4, 2]), [1, 0, 0, 2], [0, 1, 2, 4]), shape=(3, 3))
    plan = EpochPlan(np.zeros(4, np.int32), np.int32([2, 0]), np.int32([[0, 2, 3, 3]]),
                     np.int32([[2, 3]]), np.int32([0, 3]), np.int32([0, 2, 1]), 1.0)
    memory = StepMemory(ref, NCAELayout(3, (2,)), "explicit", Geometry(3, 2, 3, 3))
    b = cut_first(ref, memory, CSR.from_scipy(ref, m), plan)
    np.testing.assert_array_equal(b.indptr, [0, 2, 3, 3])
    np.testing.assert_array_equal(b.cols, [0, 2, 1])
    np.testing.assert_array_equal(b.vals, [4, 2, 5])
    np.testing.assert_array_equal(b.keep, [1, 1, 1])
    np.testing.assert_array_equal(b.entry_rows, [0, 0, 1])
    np.testing.assert_array_equal(b.col_order, [0, 2, 1])
    np.testing.assert_array_equal(b.row_weight, [0.5, 0.5, 0])
    np.testing.assert_array_equal(memory.step, [0])     # step_loss, not the cut, moves it on


def test_cut_rows_matches_reference(backend):
    rng = np.random.default_rng(2)
    m = random_matrix(rng, 50, 30)
    rows = rng.choice(50, 20, replace=False).astype(np.int32)
    expect = ref.cut_rows(CSR.from_scipy(ref, m), rows)
    got = host_batch(backend, backend.cut_rows(CSR.from_scipy(backend, m), rows))
    for field in ("indptr", "cols", "vals", "keep", "entry_rows", "row_weight"):
        np.testing.assert_array_equal(getattr(got, field), getattr(expect, field),
                                      err_msg=field)
    assert expect.keep.all() and expect.col_order is None


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9])
def test_dropout_keep_matches_reference_and_rate(backend, q):
    entry_ids = np.random.default_rng(2).permutation(200_000).astype(np.int32)
    expect = np.empty(len(entry_ids), np.uint8)
    ref.dropout_keep(expect, entry_ids, 7, 3, q)
    n = len(entry_ids)
    assert n % BLOCK                            # the last block has threads past the entries
    keep = backend.to_device(np.full(n + BLOCK, 9, np.uint8))
    backend.dropout_keep(keep[:n], backend.to_device(entry_ids), 7, 3, q)
    np.testing.assert_array_equal(backend.to_host(keep[:n]), expect)
    assert (backend.to_host(keep[n:]) == 9).all()           # and write nothing there
    assert abs(expect.mean() - (1 - q)) < 0.005
    if q == 0.0:
        assert expect.all()


def test_dropout_masks_change_with_epoch_and_seed():
    ids = np.arange(10_000, dtype=np.int32)
    masks = []
    for seed, epoch in [(0, 0), (0, 1), (1, 0)]:
        keep = np.empty(len(ids), np.uint8)
        ref.dropout_keep(keep, ids, seed, epoch, 0.5)
        masks.append(keep)
    assert (masks[0] != masks[1]).mean() > 0.4 and (masks[0] != masks[2]).mean() > 0.4


def test_dropout_keeps_an_entry_whose_hash_is_the_threshold(backend):
    """At a rate q whose threshold is an entry's 24-bit hash exactly, that entry is kept (>=):
    Python's integer hash, entry by entry. A random rate meets such an entry once in 2^24, so
    the rate tests above never do."""
    seed, epoch, ids = 7, 3, np.arange(64, dtype=np.int32)
    stream = dropout_stream(seed, epoch)
    hashes = np.array([mix64(stream + int(i) * GOLDEN) >> (64 - KEEP_BITS) for i in ids])
    threshold = int(np.sort(hashes)[len(ids) // 2])          # half the entries kept
    q = threshold / (1 << KEEP_BITS)
    assert dropout_threshold(q) == threshold
    for ops in (ref, backend):
        keep = ops.to_device(np.full(len(ids), 9, np.uint8))
        ops.dropout_keep(keep, ops.to_device(ids), seed, epoch, q)
        np.testing.assert_array_equal(ops.to_host(keep), hashes >= threshold, err_msg=ops.name)


def test_dropout_threshold_is_exact():
    assert dropout_threshold(0.0) == 0 and dropout_threshold(0.5) == 1 << 23
    with pytest.raises(ValueError):
        dropout_threshold(1.0)


# ---------------------------------------------------------------------------------------------
# input layer

def _gather(backend, batch, hb, rng, N, K):
    E = rng.normal(0, 0.3, (N, K)).astype(np.float32)
    b1 = rng.normal(0, 0.3, K).astype(np.float32)
    B = len(hb.row_weight)
    expect = np.empty((B, K))
    ref.gather_forward(expect, hb._replace(vals=hb.vals.astype(np.float64)), E.astype(np.float64),
                       b1.astype(np.float64), 2.0)
    results = []
    for _ in runs(backend):
        a1 = backend.to_device(np.full((B, K), np.nan, np.float32))
        backend.gather_forward(a1, batch, *on(backend, E, b1), 2.0)
        results.append(host(backend, a1))
    assert_close(results[0], expect)
    np.testing.assert_array_equal(results[0], results[1])    # deterministic: bit-identical


@pytest.mark.parametrize("shape", STEPS, ids=STEP_IDS)
def test_gather_forward(backend, shape):
    rng, m, batch, hb, K, B = case(shape, 4, backend)
    _gather(backend, batch, hb, rng, m.shape[1], K)


def test_gather_forward_of_rows_cut_for_evaluation(backend):
    rng = np.random.default_rng(3)
    m, rows = random_rows(rng, 80, 40, 50)
    batch = backend.cut_rows(CSR.from_scipy(backend, m), rows)
    _gather(backend, batch, host_batch(backend, batch), rng, 40, 12)


def test_gather_forward_hand_case():
    E = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    a1 = np.empty((2, 2))
    # row 0: entries (col 0, 3.0) kept and (col 1, 5.0) dropped; row 1 empty
    batch = ref.Batch(np.array([0, 2, 2]), np.array([0, 1]), np.array([3.0, 5.0]),
                      np.array([1, 0], np.uint8), np.array([0, 0]), None, np.array([1.0, 0.0]))
    ref.gather_forward(a1, batch, E, np.array([0.1, -0.2]), 0.5)
    np.testing.assert_allclose(a1, np.tanh([[1.5 + 0.1, -0.2], [0.1, -0.2]]))


@pytest.mark.parametrize("shape", STEPS, ids=STEP_IDS)
def test_scatter_backward(backend, shape):
    rng, m, batch, hb, K, B = case(shape, 5, backend)
    N = m.shape[1]
    dpre1 = rng.normal(0, 1, (B, K)).astype(np.float32)
    dE0 = rng.normal(0, 1, (N, K)).astype(np.float32)       # accumulates: start non-zero
    dE = dE0.astype(np.float64)
    ref.scatter_backward(dE, dpre1.astype(np.float64), hb._replace(vals=hb.vals.astype(float)),
                         0.5)
    results = []
    for _ in runs(backend):
        g_dE = backend.to_device(dE0.copy())
        backend.scatter_backward(g_dE, backend.to_device(dpre1), batch, 0.5)
        results.append(backend.to_host(g_dE))
    assert_close(results[0], dE)
    np.testing.assert_array_equal(results[0], results[1])     # deterministic: bit-identical


# ---------------------------------------------------------------------------------------------
# explicit output

def _output_inputs(rng, B, N, K):
    a = np.tanh(rng.normal(0, 1, (B, K))).astype(np.float32)
    V = rng.normal(0, 0.3, (N, K)).astype(np.float32)
    c = rng.normal(0, 0.3, N).astype(np.float32)
    return a, V, c


# (identity, row_norm): the paper's tanh output and 1/|K_b|, and the identity output with a
# softened row weight (recipes/ml-100k-explicit.toml)
OUTPUTS = [(False, 1.0), (True, 0.15)]
OUTPUT_IDS = ["tanh", "identity-norm0.15"]


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.parametrize("identity", [False, True], ids=["tanh", "identity"])
def test_sparse_output_forward(backend, shape, identity):
    rng = np.random.default_rng(6)
    n_rows, N, K, n_batch, B = shape
    m, rows = random_rows(rng, n_rows, N, n_batch)
    batch = backend.cut_rows(CSR.from_scipy(backend, m), rows)
    hb = host_batch(backend, batch)
    a, V, c = _output_inputs(rng, len(rows), N, K)
    expect = np.empty(len(hb.cols))
    ref.sparse_output_forward(expect, a.astype(np.float64), V.astype(np.float64),
                              c.astype(np.float64), hb, 2.0, 3.0, identity)
    yhat = backend.to_device(np.full(len(hb.cols), np.nan, np.float32))
    backend.sparse_output_forward(yhat, *on(backend, a, V, c), batch, 2.0, 3.0, identity)
    assert_close(host(backend, yhat), expect)


@pytest.mark.parametrize("shape", STEPS, ids=STEP_IDS)
@pytest.mark.parametrize("identity, row_norm", OUTPUTS, ids=OUTPUT_IDS)
def test_sparse_output_backward(backend, shape, identity, row_norm):
    rng, m, batch, hb, K, B = case(shape, 7, backend)
    N, nnz = m.shape[1], len(hb.cols)
    a, V, c = _output_inputs(rng, B, N, K)
    starts = [rng.normal(0, 1, size).astype(np.float32) for size in ((N, K), (N,))]
    f64 = [t.astype(np.float64) for t in starts]            # dV, dc accumulate
    da, loss, g = np.empty((B, K)), np.empty(B), np.empty(nnz)
    ref.sparse_output_backward(da, *f64, loss, g, a.astype(np.float64), V.astype(np.float64),
                               c.astype(np.float64), hb._replace(vals=hb.vals.astype(float)),
                               0.8, 0.3, 2.0, 3.0, identity, row_norm)
    results = []
    for _ in runs(backend):
        got = [backend.to_device(np.full((B, K), np.nan, np.float32))]
        got += [backend.to_device(t.copy()) for t in starts]
        got += [backend.to_device(np.full(n, np.nan, np.float32)) for n in (B, nnz)]
        backend.sparse_output_backward(*got, *on(backend, a, V, c), batch, 0.8, 0.3, 2.0, 3.0,
                                       identity, row_norm)
        results.append([backend.to_host(t) for t in got])
    for actual, expect in zip(results[0], [da, *f64, loss, g]):
        assert_close(actual, expect)
    for first, second in zip(*results):
        np.testing.assert_array_equal(first, second)


def test_sparse_output_backward_hand_case():
    # one row, two entries: x = (4, 2), out = (0, 0), entry 0 dropped (alpha), 1 kept (beta)
    # s = 2, m_off = 3: yhat = (3, 3), tanh(out) = 0 for both, so d yhat/d out = s
    da, dV, dc, loss, g = np.zeros((1, 1)), np.zeros((2, 1)), np.zeros(2), np.zeros(1), np.zeros(2)
    batch = ref.Batch(np.array([0, 2]), np.array([0, 1]), np.array([4.0, 2.0]),
                      np.array([0, 1], np.uint8), np.array([0, 0]), np.array([0, 1]),
                      np.array([1.0]), np.array([2]))
    ref.sparse_output_backward(da, dV, dc, loss, g, np.array([[0.5]]), np.array([[0.0], [0.0]]),
                               np.zeros(2), batch, 1.0, 0.5, 2.0, 3.0)
    np.testing.assert_allclose(loss, [1.0 / 2 * (3 - 4) ** 2 + 0.5 / 2 * (3 - 2) ** 2])
    expect_g = np.array([1.0 / 2 * 2 * (3 - 4) * 2, 0.5 / 2 * 2 * (3 - 2) * 2])  # w/|K| 2 err s
    np.testing.assert_allclose(g, expect_g)
    np.testing.assert_allclose(dc, expect_g)
    np.testing.assert_allclose(dV[:, 0], expect_g * 0.5)
    np.testing.assert_allclose(da, [[0.0]])                   # V is 0


def test_sparse_output_backward_identity_hand_case():
    # one row, three entries kept (beta = 1), V = 0, c = (1, -1, 0.5), m_off = 3, identity
    # output: yhat = c + 3 = (4, 2, 3.5) against x = (5, 2, 3); |K|^row_norm = 3^0.5;
    # d yhat / d out = 1, so g = 2 err / sqrt(3)
    da, dV, dc, loss, g = np.zeros((1, 2)), np.zeros((3, 2)), np.zeros(3), np.zeros(1), np.zeros(3)
    batch = ref.Batch(np.array([0, 3]), np.array([0, 1, 2]), np.array([5.0, 2.0, 3.0]),
                      np.ones(3, np.uint8), np.zeros(3, int), np.arange(3), np.array([1.0]),
                      np.array([3]))
    ref.sparse_output_backward(da, dV, dc, loss, g, np.array([[0.5, -1.0]]), np.zeros((3, 2)),
                               np.array([1.0, -1.0, 0.5]), batch, 0.0, 1.0, 2.0, 3.0,
                               identity=True, row_norm=0.5)
    err = np.array([-1.0, 0.0, 0.5])
    np.testing.assert_allclose(loss, [(err ** 2).sum() / np.sqrt(3)])
    np.testing.assert_allclose(g, 2 * err / np.sqrt(3))
    np.testing.assert_allclose(dV, np.outer(2 * err / np.sqrt(3), [0.5, -1.0]))
    yhat = np.empty(3)
    ref.sparse_output_forward(yhat, np.array([[0.5, -1.0]]), np.zeros((3, 2)),
                              np.array([1.0, -1.0, 0.5]), batch, 2.0, 3.0, identity=True)
    np.testing.assert_allclose(yhat, [4.0, 2.0, 3.5])


# ---------------------------------------------------------------------------------------------
# implicit output

@pytest.mark.parametrize("shape", ROW_SHAPES, ids=ROW_IDS)
@pytest.mark.parametrize("kept_only", [False, True])
@pytest.mark.parametrize("loss_op", ["reweighted_error", "multinomial_error"])
def test_implicit_error(backend, shape, kept_only, loss_op):
    rng, m, batch, hb, _, B = case(shape, 8, backend, "implicit")
    N = shape[1]
    # logits: the softmax's far from 0 (its exp must not overflow), tanh's near 0 (at 60 tanh is
    # 1 in float32 and every gradient 0); and columns of equal logits
    shift = np.float32(60.0 if loss_op == "multinomial_error" else 0.0)
    z = rng.normal(0, 1.5, (B, N)).astype(np.float32) + shift
    z[:, ::3] = z[:, :1]
    c = rng.normal(0, 0.5, N).astype(np.float32)
    # the popularity weights: reweighted_error's alone
    weights = [rng.random(N).astype(np.float32)] if loss_op == "reweighted_error" else []
    expect_d, expect_loss = np.empty((B, N)), np.empty(B)
    getattr(ref, loss_op)(expect_d, expect_loss, z.astype(np.float64), c.astype(np.float64), hb,
                          *(w.astype(np.float64) for w in weights), kept_only=kept_only)
    dout = backend.to_device(np.full((B, N), np.nan, np.float32))
    loss = backend.to_device(np.full(B, np.nan, np.float32))
    getattr(backend, loss_op)(dout, loss, *on(backend, z, c), batch,
                              *(backend.to_device(w) for w in weights), kept_only=kept_only)
    assert_close(host(backend, dout), expect_d)
    assert_close(host(backend, loss), expect_loss)
    assert not host(backend, dout)[hb.row_weight == 0].any()   # padding rows weigh nothing


def test_reweighted_error_hand_case():
    # one row, N = 2: column 0 observed, column 1 not (weight 0.25); out = (0, atanh(0.5))
    dout, loss = np.empty((1, 2)), np.empty(1)
    batch = ref.Batch(np.array([0, 1]), np.array([0]), np.array([1.0]), np.array([0], np.uint8),
                      np.array([0]), None, np.array([0.5]))
    ref.reweighted_error(dout, loss, np.array([[0.0, np.arctanh(0.5) - 0.1]]),
                         np.array([0.0, 0.1]), batch, np.array([7.0, 0.25]))
    np.testing.assert_allclose(loss, [1.0 + 0.25 * 0.25])
    np.testing.assert_allclose(dout, [[0.5 * 2 * (0 - 1) * 1, 0.5 * 2 * 0.25 * 0.5 * 0.75]])
    # with kept_only, the dropped observed column is a negative with weight 7
    ref.reweighted_error(dout, loss, np.array([[0.0, np.arctanh(0.5) - 0.1]]),
                         np.array([0.0, 0.1]), batch, np.array([7.0, 0.25]), kept_only=True)
    np.testing.assert_allclose(loss, [0.0 + 0.25 * 0.25])


def test_multinomial_error_hand_case():
    # row 0: columns 0 and 2 observed of N = 3, out = (0, log 2, 0): pi = (1/4, 1/2, 1/4);
    # row 1: nothing observed (a row all of whose entries were dropped): no loss, no gradient
    dout, loss = np.empty((2, 3)), np.empty(2)
    batch = ref.Batch(np.array([0, 2, 2]), np.array([0, 2]), np.ones(2), np.array([1, 0], np.uint8),
                      np.array([0, 0]), None, np.array([0.5, 0.5]))
    out = np.array([[0.0, np.log(2.0), 0.0], [3.0, -1.0, 0.0]])
    ref.multinomial_error(dout, loss, out - 0.25, np.full(3, 0.25), batch)
    np.testing.assert_allclose(loss, [2 * np.log(4.0), 0.0])
    np.testing.assert_allclose(dout, [[0.5 * (2 / 4 - 1), 0.5 * 2 / 2, 0.5 * (2 / 4 - 1)],
                                      [0.0, 0.0, 0.0]], atol=1e-15)
    # with kept_only, column 2 (dropped) is no target: n = 1
    ref.multinomial_error(dout, loss, out - 0.25, np.full(3, 0.25), batch, kept_only=True)
    np.testing.assert_allclose(loss, [np.log(4.0), 0.0])
    np.testing.assert_allclose(dout[0], [0.5 * (1 / 4 - 1), 0.5 / 2, 0.5 / 4])


def test_multinomial_error_is_the_gradient_of_its_loss():
    """Central differences of the row loss against the reference's dout, on random logits."""
    rng = np.random.default_rng(3)
    B, N, h = 4, 9, 1e-6
    cols = [np.sort(rng.choice(N, size, replace=False)) for size in (3, 1, 0, 9)]
    batch = ref.Batch(np.cumsum([0] + [len(k) for k in cols]), np.concatenate(cols),
                      np.ones(sum(map(len, cols))), rng.integers(0, 2, sum(map(len, cols))
                                                                 ).astype(np.uint8),
                      np.repeat(np.arange(B), [len(k) for k in cols]), None,
                      np.array([0.25, 0.5, 1.0, 0.125]))
    z, c = rng.normal(0, 2, (B, N)), rng.normal(0, 1, N)
    for kept_only in (False, True):
        dout, loss = np.empty((B, N)), np.empty(B)
        ref.multinomial_error(dout, loss, z, c, batch, kept_only)
        numeric = np.empty((B, N))
        for b in range(B):
            for j in range(N):
                up, down = z.copy(), z.copy()
                up[b, j] += h
                down[b, j] -= h
                lu, ld = np.empty(B), np.empty(B)
                ref.multinomial_error(np.empty((B, N)), lu, up, c, batch, kept_only)
                ref.multinomial_error(np.empty((B, N)), ld, down, c, batch, kept_only)
                numeric[b, j] = batch.row_weight[b] * (lu[b] - ld[b]) / (2 * h)
        np.testing.assert_allclose(dout, numeric, atol=1e-7)


# ---------------------------------------------------------------------------------------------
# dense layers and the step's bookkeeping

@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("tf32", [False, True])
def test_gemm(backend, trans_a, trans_b, accumulate, tf32):
    """The product of float32 inputs, or with tf32 of the inputs rounded to TF32: the CPU
    backends round as the reference does (to the nearest, ties away); cuBLAS does not say how
    it rounds, nor that it takes tensor cores for a product this small, so a GPU's is held to
    TF32's precision of the exact product, as in test_cublas.py."""
    rng = np.random.default_rng(9)
    a = rng.normal(0, 1, (5, 7) if trans_a else (7, 5)).astype(np.float32)   # op(a): (7, 5)
    b = rng.normal(0, 1, (3, 5) if trans_b else (5, 3)).astype(np.float32)   # op(b): (5, 3)
    out0 = rng.normal(0, 1, (7, 3)).astype(np.float32)
    on_cublas = tf32 and isinstance(getattr(backend, "device", None), CupyDevice)
    rounded = [ref.to_tf32(x) if tf32 and not on_cublas else x for x in (a, b)]
    expect = ((rounded[0].T if trans_a else rounded[0]).astype(float)
              @ (rounded[1].T if trans_b else rounded[1]).astype(float)
              + (out0 if accumulate else 0))
    out = backend.to_device(out0.copy())
    backend.gemm(out, *on(backend, a, b), trans_a, trans_b, accumulate, tf32=tf32)
    assert_close(host(backend, out), expect, TF32_TOLERANCE if on_cublas else F32_RTOL)


def test_to_tf32_keeps_ten_mantissa_bits_rounding_ties_away():
    """Hand-computed: TF32's last place at 1 is 2^-10, so 1 + 2^-11 is a tie."""
    ulp = 2.0 ** -10
    cases = [(1.0, 1.0), (1 + ulp, 1 + ulp), (1 + ulp / 4, 1.0),
             (1 + ulp / 2, 1 + ulp), (1 + 3 * ulp / 2, 1 + 2 * ulp),            # ties: away
             (-(1 + ulp / 2), -(1 + ulp)), (1 + ulp / 2 - 2.0 ** -20, 1.0),
             (2 - ulp / 2, 2.0),                                  # the carry moves the exponent
             (3 * 2.0 ** -130, 3 * 2.0 ** -130),                 # subnormal, few bits: kept
             (np.finfo(np.float32).max, np.inf), (np.inf, np.inf), (-np.inf, -np.inf), (0.0, 0.0)]
    x = np.array([c[0] for c in cases], np.float32)
    np.testing.assert_array_equal(ref.to_tf32(x), np.array([c[1] for c in cases], np.float32))
    assert np.isnan(ref.to_tf32(np.array([np.nan], np.float32))).all()
    wide = ref.to_tf32(np.array([1 + ulp / 2]))                          # float64 in, out
    assert wide.dtype == np.float64 and wide[0] == 1 + ulp


@pytest.mark.parametrize("B, K", [(1, 1), (7, 13), (64, 300)])
def test_bias_tanh_and_bias_backward(backend, B, K):
    rng = np.random.default_rng(10)
    x, da, a = (rng.normal(0, 1, (B, K)).astype(np.float32) for _ in range(3))
    b, db0 = (rng.normal(0, 1, K).astype(np.float32) for _ in range(2))
    out = backend.to_device(x.copy())
    backend.bias_tanh(out, backend.to_device(b))
    assert_close(host(backend, out), np.tanh(x.astype(float) + b))
    dpre, db = backend.to_device(da.copy()), backend.to_device(db0.copy())   # dpre is da
    backend.bias_backward(db, dpre, dpre, backend.to_device(a))
    expect = da.astype(float) * (1 - a.astype(float) ** 2)
    assert_close(host(backend, dpre), expect)
    assert_close(host(backend, db), db0 + expect.sum(axis=0))
    db = backend.to_device(db0.copy())
    backend.bias_backward(db, backend.to_device(x))                        # column sums only
    assert_close(host(backend, db), db0 + x.astype(float).sum(axis=0))


def test_step_loss(backend):
    losses = backend.to_device(np.zeros(3, np.float32))
    step = backend.to_device(np.array([1], np.int32))
    backend.step_loss(losses, step, *on(backend, np.float32([2.0, 4.0, 8.0]),
                                        np.float32([0.5, 0.25, 0.0])))
    np.testing.assert_array_equal(backend.to_host(losses), [0.0, 2.0, 0.0])
    np.testing.assert_array_equal(backend.to_host(step), [2])


def test_step_loss_sums_every_row(backend):
    # more rows than a block has threads, the last one weighing too
    rng = np.random.default_rng(14)
    row_loss, row_weight = (rng.random(2 * BLOCK + 37).astype(np.float32) for _ in range(2))
    losses = backend.to_device(np.zeros(1, np.float32))
    backend.step_loss(losses, backend.to_device(np.array([0], np.int32)),
                      *on(backend, row_loss, row_weight))
    assert_close(backend.to_host(losses), [row_weight.astype(np.float64) @ row_loss])


# ---------------------------------------------------------------------------------------------
# optimizer

# (lr_decay, steps_per_epoch, decay_start): constant; and decayed, step 7 being epoch 3's of
# the schedule begun after step 1 (lr * 0.25)
SCHEDULES = [(1.0, 0, 0), (0.5, 2, 1)]


@pytest.mark.parametrize("n", [1, 5, 1000, 4099])
@pytest.mark.parametrize("schedule", SCHEDULES, ids=["constant", "decayed"])
def test_adam(backend, n, schedule):
    rng = np.random.default_rng(9)
    p0, g = (rng.normal(0, 1, n).astype(np.float32) for _ in range(2))
    m0 = rng.normal(0, 0.1, n).astype(np.float32)
    v0 = rng.random(n).astype(np.float32) * 0.01
    expect = [t.astype(np.float64) for t in (p0, m0, v0)]
    counter = np.array([6, 0])
    ref.adam(*expect, g.astype(np.float64), counter, 1e-2, 0.9, 0.999, 1e-8, 0.1, *schedule)
    got = [backend.to_device(t.copy()) for t in (p0, m0, v0, g)]
    d_counter = backend.to_device(adam_state(6))
    backend.adam(*got, d_counter, 1e-2, 0.9, 0.999, 1e-8, 0.1, *schedule)
    for actual, e in zip(got, expect):
        assert_close(host(backend, actual), e)
    assert not host(backend, got[3]).any()                   # the gradient is zeroed
    np.testing.assert_array_equal(backend.to_host(d_counter)[:2], [7, 0])


# Steps 1-7 of one state, each with its gradient, under schedules that change: constant; then
# decayed from step 3 in epochs of 2 steps; then a new learning rate, as a stage would.
STEPS_OF_SCHEDULES = [(1e-2, 1.0, 0, 0)] * 2 + [(1e-2, 0.5, 2, 2)] * 3 + [(5e-3, 0.5, 2, 2)] * 2


def test_adam_steps_follow_their_schedules(backend):
    rng = np.random.default_rng(10)
    n = 3000                                                 # 12 blocks on the GPU
    p0 = rng.normal(0, 1, n).astype(np.float32)
    expect = [p0.astype(np.float64), np.zeros(n), np.zeros(n)]
    got = [backend.to_device(p0.copy())] + [backend.xp.zeros(n, np.float32) for _ in range(2)]
    counter, d_counter = np.zeros(1), backend.to_device(adam_state())
    for lr, *schedule in STEPS_OF_SCHEDULES:
        g = rng.normal(0, 1, n).astype(np.float32)
        ref.adam(*expect, g.astype(np.float64), counter, lr, 0.9, 0.999, 1e-8, 0.1, *schedule)
        backend.adam(*got, backend.to_device(g), d_counter, lr, 0.9, 0.999, 1e-8, 0.1,
                     *schedule)
        for actual, e in zip(got, expect):
            assert_close(host(backend, actual), e)
    assert backend.to_host(d_counter)[0] == len(STEPS_OF_SCHEDULES)


def test_adam_uses_the_corrections_filed_a_step_ahead(gpu):
    # Step 6 from a state that step 5 left (its corrections filed a step ahead) and from a
    # fresh state of 5 steps (computed by every thread): the same numbers, bit for bit. With
    # the filed lr_t set to 0 (the word after the filed step, kernels/adam.cu: Corrections),
    # step 6 leaves the parameters where they were: it used what was filed.
    rng = np.random.default_rng(11)
    n = 2000
    start = [rng.normal(0, s, n).astype(np.float32) for s in (1.0, 0.1, 0.01, 1.0)]
    start[2] = np.abs(start[2])                              # v >= 0
    ahead = gpu.to_device(adam_state(4))
    gpu.adam(*(gpu.to_device(t.copy()) for t in start), ahead, 1e-2, 0.9, 0.999, 1e-8, 0.1)
    results = []
    for state in (ahead, gpu.to_device(adam_state(5))):
        got = [gpu.to_device(t.copy()) for t in start]
        gpu.adam(*got, state, 1e-2, 0.9, 0.999, 1e-8, 0.1)
        results.append([host(gpu, t) for t in got])
    for filed, computed in zip(*results):
        np.testing.assert_array_equal(filed, computed)
    words = gpu.to_host(ahead)                               # now 6 steps, 7's filed
    filed_step = np.flatnonzero(words[1:] == 7) + 1
    assert len(filed_step) == 1
    words[filed_step + 1] = 0                                # lr_t = 0.0f
    words[0] = 6
    got = [gpu.to_device(t.copy()) for t in start]
    gpu.adam(*got, gpu.to_device(words), 1e-2, 0.9, 0.999, 1e-8, 0.1)
    np.testing.assert_array_equal(host(gpu, got[0]), start[0])
    assert not np.array_equal(host(gpu, got[1]), start[1])  # the moments moved


def test_adam_refuses_a_short_state(gpu):
    with pytest.raises(ValueError, match="Adam's state"):
        gpu.adam(*(gpu.xp.zeros(4, np.float32) for _ in range(4)),
                 gpu.to_device(np.zeros(2, np.int32)), 1e-2, 0.9, 0.999, 1e-8, 0.1)


def test_adam_first_step_is_a_signed_lr_step():
    # step 1 from zero moments: m_hat = g, v_hat = g^2, so p moves by lr * g / (|g| + eps)
    p, g = np.array([1.0, 1.0, 1.0]), np.array([0.5, -2.0, 0.0])
    ref.adam(p, np.zeros(3), np.zeros(3), g, np.array([0]), 0.1, 0.9, 0.999, 1e-8, 0.0)
    np.testing.assert_allclose(p, [0.9, 1.1, 1.0], rtol=1e-7)
    # weight decay 0.1 adds 0.1 p to the gradient: (0.15, 0.05, -0.1) here, the second
    # element's sign the L2 term's, not its gradient's
    p, g = np.array([1.0, 1.0, -2.0]), np.array([0.05, -0.05, 0.1])
    ref.adam(p, np.zeros(3), np.zeros(3), g, np.array([0]), 0.1, 0.9, 0.999, 1e-8, 0.1)
    np.testing.assert_allclose(p, [0.9, 0.9, -1.9], rtol=1e-6)


def test_adam_learning_rate_decays_by_epoch():
    # epochs of 3 steps, decay 0.5: steps 1-3 at lr, 4-6 at lr / 2, 7 at lr / 4
    assert ([ref.decayed(0.1, 0.5, 3, 0, t) for t in range(1, 8)]
            == [0.1] * 3 + [0.05] * 3 + [0.025])
    assert ref.decayed(0.1, 0.5, 3, 10, 14) == 0.05          # after 10 pre-training steps
    assert ref.decayed(0.1, 0.5, 0, 0, 100) == 0.1            # no schedule


# ---------------------------------------------------------------------------------------------
# evaluation

def _eval_batch(rng, n_rows, N, n_batch):
    m, rows = random_rows(rng, n_rows, N, n_batch)
    return ref.cut_rows(CSR.from_scipy(ref, m), rows)


def _heldout_outside(rng, batch, N):
    """One held-out column per row, never one of the row's excluded (batch) columns."""
    heldout = np.empty(len(batch.row_weight), np.int32)
    for b in range(len(heldout)):
        excluded = set(batch.cols[batch.indptr[b]:batch.indptr[b + 1]])
        heldout[b] = rng.choice([j for j in range(N) if j not in excluded])
    return heldout


@pytest.mark.parametrize("shape", ROW_SHAPES, ids=ROW_IDS)
def test_rank_heldout(backend, shape):
    rng = np.random.default_rng(10)
    n_rows, N, _, n_batch, _ = shape
    batch = _eval_batch(rng, n_rows, N, n_batch)
    B = len(batch.row_weight)
    scores = rng.integers(0, 4, (B, N)).astype(np.float32)        # few values: many ties
    heldout = _heldout_outside(rng, batch, N)
    scores[-1, ::3] = np.nan                                       # NaN candidates never count
    scores[0, heldout[0]] = np.nan                                 # a NaN held-out ranks last
    expect = np.empty(B, np.int64)
    ref.rank_heldout(expect, scores, heldout, batch.indptr, batch.cols)
    ranks = backend.to_device(np.full(B, -7, np.int32))
    backend.rank_heldout(ranks, *on(backend, scores, heldout, batch.indptr, batch.cols))
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


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.parametrize("M", [1, 5, 40])
def test_topk(backend, shape, M):
    rng = np.random.default_rng(11)
    n_rows, N, _, n_batch, _ = shape
    batch = _eval_batch(rng, n_rows, N, n_batch)
    B = len(batch.row_weight)
    scores = rng.normal(0, 1, (B, N)).astype(np.float32)
    scores[::2] = np.round(scores[::2])                            # many ties (and -0.0, 0.0)
    scores[-1, ::4] = np.nan                                       # NaN is never recommended
    expect_idx, expect_vals = np.empty((B, M), np.int64), np.empty((B, M), np.float32)
    ref.topk(expect_idx, expect_vals, scores, batch.indptr, batch.cols)
    idx = backend.to_device(np.full((B, M), -7, np.int32))
    vals = backend.to_device(np.full((B, M), np.nan, np.float32))
    backend.topk(idx, vals, *on(backend, scores, batch.indptr, batch.cols))
    np.testing.assert_array_equal(backend.to_host(idx), expect_idx)
    np.testing.assert_array_equal(backend.to_host(vals), expect_vals)


def test_topk_hand_case():
    scores = np.array([[0.5, 2.0, 2.0, -1.0, 7.0],    # 4 is excluded; 1 and 2 tie
                       [1.0, np.nan, 3.0, 0.0, 0.0]])
    idx, vals = np.empty((2, 3), np.int64), np.empty((2, 3))
    ref.topk(idx, vals, scores, np.array([0, 1, 4]), np.array([4, 0, 2, 3]))
    np.testing.assert_array_equal(idx, [[1, 2, 0], [4, -1, -1]])
    np.testing.assert_array_equal(vals, [[2.0, 2.0, 0.5], [0.0, -np.inf, -np.inf]])


def test_kth_smallest_is_numpys_sorted_value():
    """The CPU top-k's selection (in place of np.partition, slow to compile): every k of rows
    of distinct values, of few values repeated, sorted, reversed and constant."""
    from ncae_cuda.ops.cpu import _kth_smallest
    rng = np.random.default_rng(13)
    rows = [rng.normal(0, 1, 97), rng.integers(0, 4, 64).astype(float), np.arange(33.0),
            np.arange(33.0)[::-1], np.full(9, 2.5), np.array([-0.0, 0.0, -0.0]), np.ones(1)]
    for row in rows:
        row = row.astype(np.float32)
        for k in range(len(row)):
            assert _kth_smallest(row.copy(), k) == np.sort(row)[k], (row, k)


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
    backend.topk(idx, vals, *on(backend, scores, excl_indptr, excl))
    np.testing.assert_array_equal(backend.to_host(idx), expect_idx)
