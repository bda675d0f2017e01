"""Kernel microbenchmarks: every op at one training batch of the paper's benchmark shapes, on the
CPU backend and, where there is one, the GPU.

    pytest bench/ --benchmark-only                   # every op, shape and backend
    pytest bench/ --benchmark-only -k "lastfm and cpu"
    pytest bench/ --benchmark-only --benchmark-json DIR/kernels.json   # bench.report's file

Each case first checks its result against ops/reference.py in float64 on the same inputs, then
times it: the median after warm-up of calls each made after a write of a buffer larger than the
caches (bench/timing.py: CUDA events on the GPU, the wall clock on the CPU), beside
pytest-benchmark's own rounds (on the GPU each ending with a device synchronize). Achieved GB/s
and GFLOP/s come from the minimum bytes and FLOPs of ncae_cuda/ops/floors.py's op_work, and are
stored in each benchmark's extra_info (pytest-benchmark's JSON output keeps them).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

from bench.timing import cpu_seconds, gpu_seconds
from ncae_cuda import ops
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR, Batch, adam_state
from ncae_cuda.ops.floors import op_work
from ncae_cuda.ops.layout import NCAELayout
from ncae_cuda.ops.memory import StepMemory
from ncae_cuda.ops.plan import Planner, Schedule


@dataclass(frozen=True)
class Shape:
    """One training batch: B rows of the training matrix, N columns, hidden width K,
    `per_row` entries a row on average, Zipf popularity over the columns."""
    B: int
    N: int
    K: int
    per_row: int
    hidden: tuple[int, ...]


SHAPES = {
    "ml10m": Shape(128, 69_878, 500, 893, (500, 500)),      # item rows: 9M train / 10,073 items
    "lastfm": Shape(128, 17_632, 128, 49, (128,)),          # user rows: 92,834 / 1,892 users
    "delicious": Shape(128, 69_226, 128, 56, (128,)),       # user rows: 104,799 / 1,867 users
}
BACKENDS = [
    "cpu",
    pytest.param("gpu", marks=pytest.mark.skipif(not ops.HAS_CUDA, reason=ops.NO_CUDA_REASON)),
]
RTOL = 2e-5


@pytest.fixture(scope="module", params=list(SHAPES))
def case(request):
    """The shape's batch: its CSR (scipy) and rng."""
    shape = SHAPES[request.param]
    rng = np.random.default_rng(0)
    popularity = 1.0 / np.arange(1, shape.N + 1)
    popularity /= popularity.sum()
    lengths = np.maximum(1, rng.poisson(shape.per_row, shape.B))
    cols = [np.sort(rng.choice(shape.N, n, replace=False, p=popularity)) for n in lengths]
    m = sp.csr_matrix((rng.integers(1, 6, lengths.sum()).astype(np.float32),
                       np.concatenate(cols), np.concatenate([[0], np.cumsum(lengths)])),
                      shape=(shape.B, shape.N))
    return request.param, shape, m, rng


@pytest.fixture(params=BACKENDS)
def backend(request):
    return ops.get_backend(request.param)


def planned(backend, m, shape: Shape, feedback: str = "explicit"):
    """(the batch of all the shape's rows, cut as a training step into a step memory on the
    backend, its host copy for the reference, the backend's CSR, the memory, the plan)."""
    csr = CSR.from_scipy(backend, m)
    planner = Planner(csr, np.arange(shape.B, dtype=np.int32), Schedule(0, shape.B, 0.5))
    memory = StepMemory(backend, NCAELayout(shape.N, shape.hidden), feedback, planner.geometry)
    plan = planner.plan(1)
    backend.load_plan(memory, plan)
    batch = backend.cut_batch(memory, csr, plan, 0)
    host = Batch(*(None if x is None else np.asarray(backend.to_host(x)) for x in batch[:-1]))
    return batch, host._replace(vals=host.vals.astype(np.float64)), csr, memory, plan


def timed(benchmark, backend, fn, op: str, **counts) -> None:
    """Time fn on the backend and record achieved rates against the work op_work counts for
    `op` at these sizes. The seconds recorded are bench/timing.py's, each call after a write
    that flushes the caches (in training, Adam's pass over every parameter comes between two
    calls of an op); pytest-benchmark's own rounds run back to back, a warm cache's."""
    work = op_work(op, **counts)
    if backend.name == "gpu":
        import cupy
        seconds = gpu_seconds(fn)
        sync = cupy.cuda.Device().synchronize
        benchmark.pedantic(lambda: (fn(), sync()), rounds=10, warmup_rounds=1)
    else:
        seconds = cpu_seconds(fn)
        benchmark.pedantic(fn, rounds=10, warmup_rounds=1)
    benchmark.extra_info.update(op=op, seconds=seconds, bytes=work.bytes, flops=work.flops,
                                gb_per_s=work.bytes / seconds / 1e9,
                                gflop_per_s=work.flops / seconds / 1e9)


def close(backend, actual, expected) -> None:
    expected = np.asarray(expected, np.float64)
    scale = max(np.abs(expected).max(initial=0.0), 1.0)
    np.testing.assert_allclose(np.asarray(backend.to_host(actual), np.float64), expected,
                               rtol=0, atol=RTOL * scale)


def sizes(shape: Shape, batch) -> dict:
    cols = np.asarray(batch.cols)
    return dict(B=shape.B, N=shape.N, K=shape.K, nnz=len(cols), U=len(np.unique(cols)))


def on(backend, *arrays):
    return [backend.to_device(a) for a in arrays]


# ---------------------------------------------------------------------------------------------

def test_cut_batch(benchmark, backend, case):
    _, shape, m, _ = case
    batch, host, csr, memory, plan = planned(backend, m, shape)
    expect = planned(ref, m, shape)[1]
    for field in ("indptr", "cols", "keep", "entry_rows", "col_order"):
        np.testing.assert_array_equal(getattr(host, field), getattr(expect, field))
    timed(benchmark, backend, lambda: backend.cut_batch(memory, csr, plan, 0), "cut_batch",
          nnz=m.nnz)


def test_gather_forward(benchmark, backend, case):
    _, shape, m, rng = case
    batch, host, *_ = planned(backend, m, shape)
    E = rng.normal(0, 0.05, (shape.N, shape.K)).astype(np.float32)
    b1 = rng.normal(0, 0.05, shape.K).astype(np.float32)
    expect = np.empty((shape.B, shape.K))
    ref.gather_forward(expect, host, E.astype(np.float64), b1.astype(np.float64), 2.0)
    d = on(backend, E, b1)
    a1 = backend.xp.empty((shape.B, shape.K), np.float32)
    run = lambda: backend.gather_forward(a1, batch, *d, 2.0)      # noqa: E731
    run()
    close(backend, a1, expect)
    timed(benchmark, backend, run, "gather_forward", **sizes(shape, host))


def test_scatter_backward(benchmark, backend, case):
    _, shape, m, rng = case
    batch, host, *_ = planned(backend, m, shape)
    dpre = rng.normal(0, 1, (shape.B, shape.K)).astype(np.float32)
    dE = np.zeros((shape.N, shape.K))
    ref.scatter_backward(dE, dpre.astype(np.float64), host, 2.0)
    g_dE = backend.xp.zeros((shape.N, shape.K), np.float32)
    d_dpre = backend.to_device(dpre)
    backend.scatter_backward(g_dE, d_dpre, batch, 2.0)
    close(backend, g_dE, dE)
    timed(benchmark, backend, lambda: backend.scatter_backward(g_dE, d_dpre, batch, 2.0),
          "scatter_backward", **sizes(shape, host))


def _output_inputs(shape, rng):
    a = np.tanh(rng.normal(0, 1, (shape.B, shape.K))).astype(np.float32)
    V = rng.normal(0, 0.05, (shape.N, shape.K)).astype(np.float32)
    c = rng.normal(0, 0.05, shape.N).astype(np.float32)
    return a, V, c


def test_sparse_output_forward(benchmark, backend, case):
    _, shape, m, rng = case
    batch = backend.cut_rows(CSR.from_scipy(backend, m), np.arange(shape.B, dtype=np.int32))
    host = ref.cut_rows(CSR.from_scipy(ref, m), np.arange(shape.B, dtype=np.int32))
    a, V, c = _output_inputs(shape, rng)
    expect = np.empty(m.nnz)
    ref.sparse_output_forward(expect, a.astype(np.float64), V.astype(np.float64),
                              c.astype(np.float64), host, 2.0, 3.0)
    yhat = backend.xp.empty(m.nnz, np.float32)
    d = on(backend, a, V, c)
    run = lambda: backend.sparse_output_forward(yhat, *d, batch, 2.0, 3.0)   # noqa: E731
    run()
    close(backend, yhat, expect)
    timed(benchmark, backend, run, "sparse_output_forward", **sizes(shape, host))


def test_sparse_output_backward(benchmark, backend, case):
    _, shape, m, rng = case
    batch, host, *_ = planned(backend, m, shape)
    a, V, c = _output_inputs(shape, rng)
    expect = [np.empty((shape.B, shape.K)), np.zeros((shape.N, shape.K)), np.zeros(shape.N),
              np.empty(shape.B), np.empty(m.nnz)]
    ref.sparse_output_backward(*expect, a.astype(np.float64), V.astype(np.float64),
                               c.astype(np.float64), host, 1.0, 0.5, 2.0, 3.0)
    xp = backend.xp
    out = [xp.empty((shape.B, shape.K), np.float32), xp.zeros((shape.N, shape.K), np.float32),
           xp.zeros(shape.N, np.float32), xp.empty(shape.B, np.float32),
           xp.empty(m.nnz, np.float32)]
    args = (*on(backend, a, V, c), batch, 1.0, 0.5, 2.0, 3.0)
    backend.sparse_output_backward(*out, *args)
    for got, want in zip(out, expect):
        close(backend, got, want)
    timed(benchmark, backend, lambda: backend.sparse_output_backward(*out, *args),
          "sparse_output_backward", **sizes(shape, host))


def test_reweighted_error(benchmark, backend, case):
    _, shape, m, rng = case
    batch, host, *_ = planned(backend, m, shape, "implicit")
    z = rng.normal(0, 1, (shape.B, shape.N)).astype(np.float32)
    c = rng.normal(0, 0.1, shape.N).astype(np.float32)
    weights = rng.random(shape.N).astype(np.float32)
    expect_d, expect_loss = np.empty((shape.B, shape.N)), np.empty(shape.B)
    ref.reweighted_error(expect_d, expect_loss, z.astype(np.float64), c.astype(np.float64),
                         host, weights.astype(np.float64))
    dout = backend.xp.empty((shape.B, shape.N), np.float32)
    loss = backend.xp.empty(shape.B, np.float32)
    d = on(backend, z, c)
    d_weights = backend.to_device(weights)
    run = lambda: backend.reweighted_error(dout, loss, *d, batch, d_weights)   # noqa: E731
    run()
    close(backend, dout, expect_d)
    close(backend, loss, expect_loss)
    timed(benchmark, backend, run, "reweighted_error", B=shape.B, N=shape.N, nnz=m.nnz)


def test_adam(benchmark, backend, case):
    _, shape, _, rng = case
    P = NCAELayout(shape.N, shape.hidden).size              # the whole model's flat buffer
    p0, g = (rng.normal(0, 1, P).astype(np.float32) for _ in range(2))
    m0 = rng.normal(0, 0.1, P).astype(np.float32)
    v0 = rng.random(P).astype(np.float32) * 0.01
    expect = [t.astype(np.float64) for t in (p0, m0, v0)]
    ref.adam(*expect, g.astype(np.float64), np.array([2, 0]), 1e-3, 0.9, 0.999, 1e-8, 1e-3)
    state = on(backend, p0, m0, v0, g)
    counter = backend.to_device(adam_state(2))
    backend.adam(*state, counter, 1e-3, 0.9, 0.999, 1e-8, 1e-3)
    for got, want in zip(state, expect):
        close(backend, got, want)
    timed(benchmark, backend, lambda: backend.adam(*state, counter, 1e-3, 0.9, 0.999, 1e-8,
                                                   1e-3),
          "adam", P=P)
def _scores_and_excluded(shape, m, rng):
    scores = rng.normal(0, 1, (shape.B, shape.N)).astype(np.float32)
    return scores, m.indptr.astype(np.int32), m.indices.astype(np.int32)


def test_rank_heldout(benchmark, backend, case):
    _, shape, m, rng = case
    scores, indptr, cols = _scores_and_excluded(shape, m, rng)
    dense = m.toarray() > 0
    heldout = np.array([rng.choice(np.flatnonzero(~row)) for row in dense], np.int32)
    expect = np.empty(shape.B, np.int64)
    ref.rank_heldout(expect, scores, heldout, indptr, cols)
    ranks = backend.xp.empty(shape.B, np.int32)
    d = [backend.to_device(x) for x in (scores, heldout, indptr, cols)]
    run = lambda: backend.rank_heldout(ranks, *d)    # noqa: E731
    run()
    np.testing.assert_array_equal(backend.to_host(ranks), expect)
    timed(benchmark, backend, run, "rank_heldout", B=shape.B, N=shape.N, nnz=m.nnz)


def test_topk(benchmark, backend, case):
    _, shape, m, rng = case
    scores, indptr, cols = _scores_and_excluded(shape, m, rng)
    M = 100
    expect_idx, expect_vals = np.empty((shape.B, M), np.int64), np.empty((shape.B, M))
    ref.topk(expect_idx, expect_vals, scores, indptr, cols)
    idx = backend.xp.empty((shape.B, M), np.int32)
    vals = backend.xp.empty((shape.B, M), np.float32)
    d = [backend.to_device(x) for x in (scores, indptr, cols)]
    run = lambda: backend.topk(idx, vals, *d)        # noqa: E731
    run()
    np.testing.assert_array_equal(backend.to_host(idx), expect_idx)
    timed(benchmark, backend, run, "topk", B=shape.B, N=shape.N, M=M)
