"""The op conformance cases: every op of a backend at one small random shape that holds what is
hard for the kernels, its outputs beside ops/reference.py's run in float64 on the same inputs.
python -m ncae_cuda.check runs them on a user's machine; the tests run them on every backend.

The shape: a row of LONG entries among short and empty rows (its sums are shared by many windows
on the GPU), padding rows, and a width K that is not a multiple of 4 and spans two warps'
slabs. Integer outputs must be equal, float ones within TOLERANCE of the largest expected
value; a second run must give the same bits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from . import reference as ref
from .common import adam_state

TOLERANCE = 2e-5      # float32 against float64: a few ulps of accumulated rounding, relative to
                      # the largest expected value (or 1, where all are smaller)
TF32_TOLERANCE = 2e-3  # products of inputs rounded to TF32 (11 significant bits) against
                       # float64's of the inputs as they are: their roundings, relative alike
LONG, SHORT, N, K = 2_000, 40, 2_500, 133     # the long row among SHORT rows of 1..20 entries;
                                              # columns; width: 133 = 128 + 5, two slabs
BATCH = 48            # the batch holds every row, and padding



@dataclass
class OpCase:
    """One op at the check's shape: run() puts fresh copies of the inputs on the device, runs
    the backend's op and returns its outputs on the host; `expected` holds the reference's."""
    op: str
    run: Callable[[], dict]
    expected: dict
    exact: bool = False   # every output must be equal: the op copies, counts or selects
    tolerance: float = TOLERANCE    # of float outputs, relative to the largest expected value


@dataclass
class OpResult:
    op: str
    error: float          # exact outputs: elements that differ; float ones: the largest error
                          # relative to the largest expected value
    tolerance: float
    passed: bool
    reason: str = ""      # why not, in one line


def long_row_matrix(rng, n_cols: int, long: int, short: int) -> sp.csr_matrix:
    """One row of `long` entries among `short` rows of 1..20 and three empty rows, shuffled;
    ratings 1..5."""
    lengths = np.concatenate([[long], rng.integers(1, 21, short), [0, 0, 0]])
    rng.shuffle(lengths)
    cols = [np.sort(rng.choice(n_cols, n, replace=False)) for n in lengths]
    return sp.csr_matrix((rng.integers(1, 6, lengths.sum()).astype(np.float32),
                          np.concatenate(cols), np.concatenate([[0], np.cumsum(lengths)])),
                         shape=(len(lengths), n_cols))


def compare(actual: np.ndarray, expected: np.ndarray, exact: bool,
            tolerance: float = TOLERANCE) -> tuple[float, float, str]:
    """(error, tolerance, where the worst is) of one output: exact and integer outputs must be
    equal, float ones within `tolerance` of the largest expected value; equal values
    (infinities and NaN too) differ by nothing."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return np.inf, 0.0, f"shape {actual.shape}, expected {expected.shape}"
    same = (actual == expected) | (np.isnan(actual) & np.isnan(expected)
                                   if expected.dtype.kind == "f" else False)
    if exact or expected.dtype.kind != "f":
        wrong = np.flatnonzero(~same.ravel())
        where = "" if not len(wrong) else (
            f"{len(wrong)} of {same.size} differ, first at {_index(wrong[0], same.shape)}: "
            f"{actual.ravel()[wrong[0]]} vs {expected.ravel()[wrong[0]]}")
        return float(len(wrong)), 0.0, where
    finite = expected[np.isfinite(expected)]
    scale = max(np.abs(finite).max(initial=0.0), 1.0)
    with np.errstate(invalid="ignore"):            # inf - inf: equal, and masked by `same`
        diff = np.where(same, 0.0, np.abs(actual.astype(np.float64) - expected))
    diff[np.isnan(diff)] = np.inf                  # NaN (or an infinity) where none belongs
    worst = _index(np.argmax(diff), diff.shape) if diff.size else ()
    error = float(diff.max(initial=0.0)) / scale
    return error, tolerance, (f"at {worst}: {actual[worst]:.6g} vs {expected[worst]:.6g}"
                              if diff.size else "")


def _index(flat: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def check_op(case: OpCase) -> OpResult:
    """Run the case twice; its outputs against the reference's, and the second run's bits
    against the first's."""
    try:
        first, second = case.run(), case.run()
    except Exception as e:
        return OpResult(case.op, np.inf, 0.0, False, f"raised {type(e).__name__}: {e}")
    worst = OpResult(case.op, 0.0, 0.0, True)
    for name, expected in case.expected.items():
        error, tolerance, where = compare(first[name], expected, case.exact, case.tolerance)
        if error > tolerance:
            return OpResult(case.op, error, tolerance, False,
                            f"{name}: error {error:.3g} over the tolerance {tolerance:.3g} "
                            f"({where})")
        if error / (tolerance or 1) >= worst.error / (worst.tolerance or 1):
            worst = OpResult(case.op, error, tolerance, True)
        if not np.array_equal(first[name], second[name], equal_nan=True):
            changed = int((np.asarray(first[name]) != np.asarray(second[name])).sum())
            return OpResult(case.op, error, tolerance, False,
                            f"{name}: not bit-identical on a rerun ({changed} elements differ)")
    return worst


def op_cases(backend, seed: int = 0) -> list[OpCase]:
    """Every op of the backend at the check's shape, its reference result beside it."""
    from .common import CSR
    from .layout import NCAELayout
    from .memory import StepMemory
    from .plan import Planner, Schedule, trainable_rows

    rng = np.random.default_rng(seed)
    m = long_row_matrix(rng, N, LONG, SHORT)
    h = lambda x: np.asarray(backend.to_host(x))                          # noqa: E731
    d = backend.to_device

    def step_of(ops):
        """The first training step of an epoch over every non-empty row, cut by `ops`."""
        csr = CSR.from_scipy(ops, m)
        planner = Planner(csr, trainable_rows(csr), Schedule(seed, BATCH, 0.5))
        memory = StepMemory(ops, NCAELayout(N, (K,)), "explicit", planner.geometry)
        plan = planner.plan(1)

        def cut():
            ops.load_plan(memory, plan)
            return ops.cut_batch(memory, csr, plan, 0)
        return csr, cut

    csr, cut = step_of(backend)
    ref_csr, ref_cut = step_of(ref)
    fields = ref.Batch._fields[:-1]                       # the windows are the GPU's own
    hb = ref_cut()
    batch = cut()
    h64 = hb._replace(vals=hb.vals.astype(np.float64))
    B, nnz = len(hb.row_weight), len(hb.cols)

    def normal(*shape, sd=0.3):
        return rng.normal(0, sd, shape).astype(np.float32)

    def f64(*arrays):
        return [a.astype(np.float64) for a in arrays]

    cases = [OpCase("cut_batch", lambda: {f: h(getattr(cut(), f)) for f in fields},
                    {f: getattr(hb, f) for f in fields}, exact=True)]

    rows = rng.choice(m.shape[0], 20, replace=False).astype(np.int32)
    expect_rows = ref.cut_rows(ref_csr, rows)
    cases.append(OpCase("cut_rows", lambda: {
        f: h(getattr(backend.cut_rows(csr, rows), f)) for f in fields if f != "col_order"},
        {f: getattr(expect_rows, f) for f in fields if f != "col_order"}, exact=True))

    ids = rng.permutation(5_000).astype(np.int32)
    keep = np.empty(len(ids), np.uint8)
    ref.dropout_keep(keep, ids, seed, 3, 0.3)

    def dropout():
        out = d(np.full(len(ids), 9, np.uint8))
        backend.dropout_keep(out, d(ids), seed, 3, 0.3)
        return {"keep": h(out)}
    cases.append(OpCase("dropout_keep", dropout, {"keep": keep}, exact=True))

    E, b1 = normal(N, K), normal(K)
    a1 = np.empty((B, K))
    ref.gather_forward(a1, h64, *f64(E, b1), 2.0)

    def gather():
        out = d(np.full((B, K), np.nan, np.float32))
        backend.gather_forward(out, batch, d(E), d(b1), 2.0)
        return {"a1": h(out)}
    cases.append(OpCase("gather_forward", gather, {"a1": a1}))

    dpre1, dE0 = normal(B, K, sd=1.0), normal(N, K, sd=1.0)
    dE = dE0.astype(np.float64)
    ref.scatter_backward(dE, dpre1.astype(np.float64), h64, 0.5)

    def scatter():
        out = d(dE0.copy())
        backend.scatter_backward(out, d(dpre1), batch, 0.5)
        return {"dE": h(out)}
    cases.append(OpCase("scatter_backward", scatter, {"dE": dE}))

    a, V, c = np.tanh(normal(B, K, sd=1.0)), normal(N, K), normal(N)
    yhat = np.empty(nnz)
    ref.sparse_output_forward(yhat, *f64(a, V, c), h64, 2.0, 3.0)

    def output_forward():
        out = d(np.full(nnz, np.nan, np.float32))
        backend.sparse_output_forward(out, d(a), d(V), d(c), batch, 2.0, 3.0)
        return {"yhat": h(out)}
    cases.append(OpCase("sparse_output_forward", output_forward, {"yhat": yhat}))

    dV0, dc0 = normal(N, K, sd=1.0), normal(N, sd=1.0)
    names = ("da", "dV", "dc", "row_loss", "g")
    expect = [np.empty((B, K)), *f64(dV0, dc0), np.empty(B), np.empty(nnz)]
    ref.sparse_output_backward(*expect, *f64(a, V, c), h64, 0.8, 0.3, 2.0, 3.0)

    def output_backward():
        outs = [d(np.full((B, K), np.nan, np.float32)), d(dV0.copy()), d(dc0.copy()),
                d(np.full(B, np.nan, np.float32)), d(np.full(nnz, np.nan, np.float32))]
        backend.sparse_output_backward(*outs, d(a), d(V), d(c), batch, 0.8, 0.3, 2.0, 3.0)
        return dict(zip(names, map(h, outs)))
    cases.append(OpCase("sparse_output_backward", output_backward, dict(zip(names, expect))))

    z, weights = normal(B, N, sd=1.5), rng.random(N).astype(np.float32)
    dout, loss = np.empty((B, N)), np.empty(B)
    ref.reweighted_error(dout, loss, *f64(z, c), hb, weights.astype(np.float64))

    def reweighted():
        outs = d(np.full((B, N), np.nan, np.float32)), d(np.full(B, np.nan, np.float32))
        backend.reweighted_error(*outs, d(z), d(c), batch, d(weights))
        return {"dout": h(outs[0]), "row_loss": h(outs[1])}
    cases.append(OpCase("reweighted_error", reweighted, {"dout": dout, "row_loss": loss}))

    dout_m, loss_m = np.empty((B, N)), np.empty(B)
    ref.multinomial_error(dout_m, loss_m, *f64(z, c), hb)

    def multinomial():
        outs = d(np.full((B, N), np.nan, np.float32)), d(np.full(B, np.nan, np.float32))
        backend.multinomial_error(*outs, d(z), d(c), batch)
        return {"dout": h(outs[0]), "row_loss": h(outs[1])}
    cases.append(OpCase("multinomial_error", multinomial, {"dout": dout_m, "row_loss": loss_m}))

    W, dW0 = normal(37, K), normal(37, K)          # a dense layer K -> 37 and its gradient
    dpre2 = normal(B, 37, sd=1.0)
    expect_gemm = {"a W^T": a.astype(np.float64) @ W.astype(np.float64).T,
                   "dW + dpre^T a": dW0 + dpre2.astype(np.float64).T @ a.astype(np.float64)}

    def gemm(tf32=False):
        out, dW = d(np.full((B, 37), np.nan, np.float32)), d(dW0.copy())
        backend.gemm(out, d(a), d(W), trans_b=True, tf32=tf32)
        backend.gemm(dW, d(dpre2), d(a), trans_a=True, accumulate=True, tf32=tf32)
        return {"a W^T": h(out), "dW + dpre^T a": h(dW)}
    cases.append(OpCase("gemm", gemm, expect_gemm))
    cases.append(OpCase("gemm, tf32", lambda: gemm(tf32=True), expect_gemm,
                        tolerance=TF32_TOLERANCE))

    x = normal(B, K, sd=1.0)

    def bias_tanh():
        out = d(x.copy())
        backend.bias_tanh(out, d(b1))
        return {"a": h(out)}
    cases.append(OpCase("bias_tanh", bias_tanh, {"a": np.tanh(x.astype(np.float64) + b1)}))

    dpre = dpre1.astype(np.float64) * (1 - a.astype(np.float64) ** 2)

    def bias_backward():
        dpre_out, db = d(dpre1.copy()), d(b1.copy())
        backend.bias_backward(db, dpre_out, dpre_out, d(a))
        return {"dpre": h(dpre_out), "db": h(db)}
    cases.append(OpCase("bias_backward", bias_backward,
                        {"dpre": dpre, "db": b1 + dpre.sum(axis=0)}))

    n = 10_007                                     # not a multiple of any block
    p0, g0, m0 = normal(n, sd=1.0), normal(n, sd=1.0), normal(n, sd=0.1)
    v0 = rng.random(n).astype(np.float32) * 0.01
    state = f64(p0, m0, v0)
    counter = adam_state(6)
    schedule = (1e-2, 0.9, 0.999, 1e-8, 0.1, 0.5, 2, 1)     # ..., λ, lr decay from step 1
    ref.adam(*state, g0.astype(np.float64), counter, *schedule)

    def adam():
        outs = [d(t.copy()) for t in (p0, m0, v0, g0)]
        count = d(adam_state(6))
        backend.adam(*outs, count, *schedule)
        return {**dict(zip(("params", "m", "v", "grads"), map(h, outs))),
                "step": h(count)[:1]}
    cases.append(OpCase("adam", adam, {"params": state[0], "m": state[1], "v": state[2],
                                       "grads": np.zeros(n), "step": counter[:1]}))

    row_loss = rng.random(B).astype(np.float32)

    def step_loss():
        losses, step = d(np.zeros(3, np.float32)), d(np.array([1], np.int32))
        backend.step_loss(losses, step, d(row_loss), batch.row_weight)
        return {"losses": h(losses), "step": h(step)}
    cases.append(OpCase("step_loss", step_loss, {
        "losses": np.array([0.0, hb.row_weight.astype(np.float64) @ row_loss, 0.0]),
        "step": np.array([2])}))

    scores = rng.integers(0, 4, (len(rows), N)).astype(np.float32)    # few values: many ties
    scores[-1, ::3] = np.nan
    taken = [set(expect_rows.cols[expect_rows.indptr[i]:expect_rows.indptr[i + 1]])
             for i in range(len(rows))]
    heldout = np.array([next(j for j in rng.permutation(N) if j not in t) for t in taken],
                       np.int32)
    ranks = np.empty(len(rows), np.int64)
    ref.rank_heldout(ranks, scores, heldout, expect_rows.indptr, expect_rows.cols)
    excluded = backend.cut_rows(csr, rows)

    def rank():
        out = d(np.full(len(rows), -7, np.int32))
        backend.rank_heldout(out, d(scores), d(heldout), excluded.indptr, excluded.cols)
        return {"ranks": h(out)}
    cases.append(OpCase("rank_heldout", rank, {"ranks": ranks}, exact=True))

    top = 10
    top_idx, top_vals = np.empty((len(rows), top), np.int64), np.empty((len(rows), top))
    ref.topk(top_idx, top_vals, scores, expect_rows.indptr, expect_rows.cols)

    def topk():
        idx = d(np.full((len(rows), top), -7, np.int32))
        vals = d(np.full((len(rows), top), np.nan, np.float32))
        backend.topk(idx, vals, d(scores), excluded.indptr, excluded.cols)
        return {"idx": h(idx), "vals": h(vals)}
    cases.append(OpCase("topk", topk, {"idx": top_idx, "vals": top_vals}, exact=True))
    return cases
