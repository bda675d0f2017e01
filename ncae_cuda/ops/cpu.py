"""Numba CPU backend: every op of ops/reference.py, same names, argument order and semantics.

Each public function is a thin launcher (like ops/gpu.py's) that casts scalars to float32 and
calls a jitted kernel; the dense parts and the step's bookkeeping are the reference's numpy.
The cast matters: Numba types a Python float as float64 and an int literal mixed with float32
as float64, which would silently run the hot loops in double.

Parallelism follows ownership, so results never depend on thread timing: a row-parallel loop
writes only its row; the scatters into embedding rows (dE, dV, dc) run over the batch's column
runs, each summing its entries in the fixed order of Batch.col_order.
"""
from __future__ import annotations

import contextlib
import functools
import sys

import numpy as np
from numba import njit, prange
from numba.core import event as numba_event
from threadpoolctl import ThreadpoolController

from .common import Batch, dropout_stream, dropout_threshold, GOLDEN, KEEP_BITS, MIX1, MIX2
from .reference import (bias_backward, bias_tanh, capture, decayed, gemm,  # noqa: F401
                        load_plan, step_loss)

xp = np
name = "cpu"

_F1 = np.float32(1.0)
_F2 = np.float32(2.0)
_GOLDEN, _MIX1, _MIX2 = np.uint64(GOLDEN), np.uint64(MIX1), np.uint64(MIX2)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_KEEP_SHIFT = np.uint64(64 - KEEP_BITS)

_jit = njit(cache=True, nogil=True)
_pjit = njit(cache=True, nogil=True, parallel=True)


@contextlib.contextmanager
def compile_note(say=lambda line: print(line, file=sys.stderr, flush=True)):
    """Within the block, say(COMPILING) once before the first kernel of this module compiles
    (seconds each, once an install: docs/performance.md), so that a command's user knows why it
    waits; nothing where Numba's cache has them. Numba's compile event fires only for a
    compile, not for a load from its cache."""
    said = []

    class Note(numba_event.Listener):
        def on_start(self, event) -> None:
            if not said and event.data["dispatcher"].py_func.__module__ == __name__:
                said.append(True)
                say(COMPILING)

        def on_end(self, event) -> None:
            pass
    with numba_event.install_listener("numba:compile", Note()):
        yield


COMPILING = "note: compiling the CPU kernels, once for this install (they are cached after)"


def to_device(a):
    return np.asarray(a)


def to_host(a):
    return np.asarray(a)


def session():
    """Context to train and evaluate in: BLAS on one thread, so that its threads and Numba's
    do not spin against each other between the dense and the sparse ops. On 2 cores that cost
    5x on a 2-layer ML-100K epoch, and one BLAS thread was faster even for (128, 69226) outputs."""
    return _thread_pools().limit(limits=1, user_api="blas")


@functools.cache
def _thread_pools() -> ThreadpoolController:
    """The process's thread pools (BLAS's among them: numpy's, loaded before this module), found
    once: finding them reads the process's memory map, 0.5 ms a time, which was most of a
    one-user recommend (a served request's) when every session found them again."""
    return ThreadpoolController()


# ---------------------------------------------------------------------------------------------
# batching

@_jit
def _cut(cols, vals, keep, entry_rows, row_entries, indptr, indices, data, first_entry,
         src_entries, rows, batch_indptr, stream, threshold):
    for b in range(rows.shape[0]):
        r = rows[b]
        row_entries[b] = src_entries[r]
        for p in range(batch_indptr[b], batch_indptr[b + 1]):
            within = p - batch_indptr[b]
            e = indptr[r] + within
            cols[p], vals[p], entry_rows[p] = indices[e], data[e], b
            keep[p] = _kept(stream, first_entry[r] + within, threshold)


def _cut_from(csr, batch, rows, stream, threshold):
    """The entries of `rows` of the CSR into the batch's arrays (see ops/reference.py)."""
    _cut(batch.cols, batch.vals, batch.keep, batch.entry_rows, batch.row_entries, csr.indptr,
         csr.indices, csr.data, csr.first_entry, csr.row_entries, rows, batch.indptr, stream,
         threshold)


def cut_batch(memory, csr, plan, step):
    v, B = memory.views, plan.batch_size
    if int(memory.step[0]) != step:
        raise RuntimeError("cut_batch out of step with step_loss")
    n = plan.rows(step)
    batch = memory.batch(plan.entries(step))
    batch.indptr[:] = v["batch_indptr"][step]
    header = v["header"]
    batch.row_entries[n:] = 0
    _cut_from(csr, batch, v["order"][step * B:step * B + n], header[2:4].view(np.uint64)[0],
              np.uint64(header[1]))
    start = v["col_offsets"][step]
    batch.col_order[:] = v["col_order"][start:start + len(batch.cols)]
    batch.row_weight[:] = 0
    batch.row_weight[:n] = 1.0 / n
    return batch


def cut_rows(csr, rows):
    rows = np.asarray(rows, np.int32)
    indptr = np.zeros(len(rows) + 1, np.int32)
    np.cumsum(csr.indptr[rows + 1] - csr.indptr[rows], out=indptr[1:])
    nnz = int(indptr[-1])
    batch = Batch(indptr, np.empty(nnz, np.int32), np.empty(nnz, np.float32),
                  np.empty(nnz, np.uint8), np.empty(nnz, np.int32), None,
                  np.full(len(rows), 1.0 / max(len(rows), 1), np.float32),
                  np.empty(len(rows), np.int32))
    _cut_from(csr, batch, rows, np.uint64(0), np.uint64(0))
    return batch


@_jit
def _column_runs(cols, col_order):
    """(starts (runs+1,)) of the column runs of col_order: where each column's entries begin."""
    n = col_order.shape[0]
    starts = np.empty(n + 1, np.int64)
    runs = 0
    for t in range(n):
        if t == 0 or cols[col_order[t]] != cols[col_order[t - 1]]:
            starts[runs] = t
            runs += 1
    starts[runs] = n
    return starts[:runs + 1]


# ---------------------------------------------------------------------------------------------
# input dropout

@_jit
def _kept(stream, entry_id, threshold):
    z = stream + np.uint64(entry_id) * _GOLDEN
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    z = z ^ (z >> _S31)
    return (z >> _KEEP_SHIFT) >= threshold


@_pjit
def _dropout_keep(keep, entry_ids, stream, threshold):
    for p in prange(entry_ids.shape[0]):
        keep[p] = _kept(stream, entry_ids[p], threshold)


def dropout_keep(keep, entry_ids, seed, epoch, q):
    _dropout_keep(keep, entry_ids, np.uint64(dropout_stream(seed, epoch)),
                  np.uint64(dropout_threshold(q)))


# ---------------------------------------------------------------------------------------------
# input layer: gather forward, scatter backward

@_pjit
def _gather_forward(a1, indptr, cols, vals, keep, E, b1, activate, scale):
    B, K = a1.shape
    for b in prange(B):
        acc = b1.copy() if activate else np.zeros(K, a1.dtype)  # (K,)
        for p in range(indptr[b], indptr[b + 1]):
            if keep[p]:
                w = vals[p] * scale
                e = E[cols[p]]
                for k in range(K):
                    acc[k] += w * e[k]
        for k in range(K):
            a1[b, k] = np.tanh(acc[k]) if activate else acc[k]


def gather_forward(a1, batch, E, b1, scale):
    activate = b1 is not None                   # None: a column shard's part of the sum
    _gather_forward(a1, batch.indptr, batch.cols, batch.vals, batch.keep, E,
                    b1 if activate else np.zeros(0, a1.dtype), activate, np.float32(scale))


@_pjit
def _scatter_backward(dE, dpre1, cols, vals, keep, scale, entry_rows, col_order, starts):
    K = dE.shape[1]
    for u in prange(starts.shape[0] - 1):
        de = dE[cols[col_order[starts[u]]]]
        for t in range(starts[u], starts[u + 1]):
            p = col_order[t]
            if keep[p]:
                w = vals[p] * scale
                d = dpre1[entry_rows[p]]
                for k in range(K):
                    de[k] += w * d[k]


def scatter_backward(dE, dpre1, batch, scale):
    _scatter_backward(dE, dpre1, batch.cols, batch.vals, batch.keep, np.float32(scale),
                      batch.entry_rows, batch.col_order,
                      _column_runs(batch.cols, batch.col_order))


# ---------------------------------------------------------------------------------------------
# explicit output: only the observed entries are computed

@_pjit
def _sparse_output_forward(yhat, a, V, c, indptr, cols, s, m_off, identity):
    K = a.shape[1]
    for b in prange(a.shape[0]):
        for p in range(indptr[b], indptr[b + 1]):
            j = cols[p]
            out = c[j]
            for k in range(K):
                out += V[j, k] * a[b, k]
            yhat[p] = out + m_off if identity else s * np.tanh(out) + m_off


def sparse_output_forward(yhat, a, V, c, batch, s, m_off, identity=False):
    _sparse_output_forward(yhat, a, V, c, batch.indptr, batch.cols, np.float32(s),
                           np.float32(m_off), identity)


@_pjit
def _sparse_output_backward(da, dV, dc, row_loss, g, a, V, c, indptr, cols, vals, keep,
                            row_weight, row_entries, alpha, beta, s, m_off, identity, row_norm,
                            entry_rows, col_order, starts):
    K = a.shape[1]
    for b in prange(a.shape[0]):                                # rows: forward, loss, g, da
        n_obs = np.float32(row_entries[b])
        if row_norm != _F1:                                     # the paper's 1/|R| is exact
            n_obs = n_obs ** row_norm
        loss = 0.0
        for k in range(K):
            da[b, k] = 0
        for p in range(indptr[b], indptr[b + 1]):
            j = cols[p]
            out = c[j]
            for k in range(K):
                out += V[j, k] * a[b, k]
            t = np.tanh(out)                                    # tanh(out), kept
            w = (beta if keep[p] else alpha) / n_obs
            err = (out if identity else s * t) + m_off - vals[p]
            loss += w * err * err
            slope = _F1 if identity else s * (_F1 - t * t)      # d yhat / d out
            g[p] = row_weight[b] * w * _F2 * err * slope
            for k in range(K):
                da[b, k] += g[p] * V[j, k]
        row_loss[b] = loss
    for u in prange(starts.shape[0] - 1):                       # columns: dV, dc
        j = cols[col_order[starts[u]]]
        for t in range(starts[u], starts[u + 1]):
            p = col_order[t]
            ab = a[entry_rows[p]]
            for k in range(K):
                dV[j, k] += g[p] * ab[k]
            dc[j] += g[p]


def sparse_output_backward(da, dV, dc, row_loss, g, a, V, c, batch, alpha, beta, s, m_off,
                           identity=False, row_norm=1.0):
    f = np.float32
    _sparse_output_backward(da, dV, dc, row_loss, g, a, V, c, batch.indptr, batch.cols,
                            batch.vals, batch.keep, batch.row_weight, batch.row_entries,
                            f(alpha), f(beta), f(s),
                            f(m_off), identity, f(row_norm), batch.entry_rows, batch.col_order,
                            _column_runs(batch.cols, batch.col_order))


# ---------------------------------------------------------------------------------------------
# implicit output: dense logits, popularity-reweighted error

@_pjit
def _reweighted_error(dout, row_loss, z, c, indptr, cols, keep, kept_only, weights, row_weight):
    B, N = z.shape
    for b in prange(B):
        rw = row_weight[b]
        loss = 0.0
        for j in range(N):                                      # every column as unobserved
            y = dout[b, j]                                      # tanh(z + c), from numpy
            loss += weights[j] * y * y
            dout[b, j] = rw * _F2 * weights[j] * y * (_F1 - y * y)
        for p in range(indptr[b], indptr[b + 1]):               # then correct the observed
            if kept_only and not keep[p]:
                continue
            j = cols[p]
            y = np.tanh(z[b, j] + c[j])
            loss += (y - _F1) * (y - _F1) - weights[j] * y * y
            dout[b, j] = rw * _F2 * (y - _F1) * (_F1 - y * y)
        row_loss[b] = loss


def reweighted_error(dout, row_loss, z, c, batch, weights, kept_only=False):
    # numpy's tanh is SIMD, Numba's a scalar libm call per element: 0.8 ms against 25 ms for
    # a (128, 17632) Last.fm-shaped batch; the loop then only weights and sums. dout holds
    # tanh(z + c) until the loop overwrites it, element by element.
    np.add(z, c, out=dout)
    np.tanh(dout, out=dout)
    _reweighted_error(dout, row_loss, z, c, batch.indptr, batch.cols, batch.keep, kept_only,
                      weights, batch.row_weight)


@_pjit
def _multinomial_error(dout, row_loss, z, c, indptr, cols, keep, kept_only, row_weight):
    B, N = z.shape
    for b in prange(B):
        total = 0.0
        for j in range(N):
            total += dout[b, j]                                 # exp(out - row max), from numpy
        n, observed = 0.0, 0.0
        for p in range(indptr[b], indptr[b + 1]):
            if not (kept_only and not keep[p]):
                n += 1.0
                observed += z[b, cols[p]] + c[cols[p]]
        lse = row_loss[b] + np.log(total)                       # row_loss held the row's max
        scale = row_weight[b] * n / total
        for j in range(N):
            dout[b, j] *= scale                                 # n pi_j
        for p in range(indptr[b], indptr[b + 1]):
            if not (kept_only and not keep[p]):
                dout[b, cols[p]] -= row_weight[b]
        row_loss[b] = n * lse - observed


def multinomial_error(dout, row_loss, z, c, batch, kept_only=False):
    # numpy's exp is SIMD, as its tanh is for reweighted_error: the row max and exp(out - max)
    # are numpy's, in dout and row_loss until the loop overwrites them
    np.add(z, c, out=dout)
    np.max(dout, axis=1, out=row_loss)
    np.subtract(dout, row_loss[:, None], out=dout)
    np.exp(dout, out=dout)
    _multinomial_error(dout, row_loss, z, c, batch.indptr, batch.cols, batch.keep, kept_only,
                       batch.row_weight)


# ---------------------------------------------------------------------------------------------
# optimizer

@_pjit
def _adam(params, m, v, grads, lr_t, beta1, one_minus_beta1, beta2, one_minus_beta2,
          inv_sqrt_bc2, eps, weight_decay):
    for i in prange(params.shape[0]):
        g = grads[i] + weight_decay * params[i]
        mi = beta1 * m[i] + one_minus_beta1 * g
        vi = beta2 * v[i] + one_minus_beta2 * g * g
        m[i] = mi
        v[i] = vi
        params[i] -= lr_t * mi / (np.sqrt(vi) * inv_sqrt_bc2 + eps)
        grads[i] = 0


def adam(params, m, v, grads, counter, lr, beta1, beta2, eps, weight_decay, lr_decay=1.0,
         steps_per_epoch=0, decay_start=0):
    # p -= lr * (m / bc1) / (sqrt(v / bc2) + eps), with the scalar parts folded on the host
    # in double, as kernels/adam.cu folds them
    f = np.float32
    step = int(counter[0]) + 1
    lr = decayed(lr, lr_decay, steps_per_epoch, decay_start, step)
    bc1, bc2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
    _adam(params, m, v, grads, f(lr / bc1), f(beta1), f(1.0 - beta1), f(beta2), f(1.0 - beta2),
          f(1.0 / np.sqrt(bc2)), f(eps), f(weight_decay))
    counter[0] = step


# ---------------------------------------------------------------------------------------------
# evaluation

@_pjit
def _rank_heldout(ranks, scores, heldout, excl_indptr, excl_cols):
    B, N = scores.shape
    for b in prange(B):
        target = scores[b, heldout[b]]
        worst = target != target                                # NaN ranks behind everyone
        count = 0
        for j in range(N):
            if worst or scores[b, j] >= target:
                count += 1
        for p in range(excl_indptr[b], excl_indptr[b + 1]):
            if worst or scores[b, excl_cols[p]] >= target:
                count -= 1
        ranks[b] = count - 1                                    # the held-out column itself


def rank_heldout(ranks, scores, heldout, excl_indptr, excl_cols):
    _rank_heldout(ranks, scores, heldout, excl_indptr, excl_cols)


@_pjit
def _topk(top_idx, top_vals, scores, excl_indptr, excl_cols):
    for b in prange(scores.shape[0]):
        excluded = excl_cols[excl_indptr[b]:excl_indptr[b + 1]]
        _top_of_row(top_idx[b], top_vals[b], scores[b], excluded)


# A row's selection is a plain function the parallel loop calls, and the M-th value is found by
# _kth_smallest rather than np.partition: a first recommend waits for the compile, which took
# 30 s of CPU with the same code inside the prange body and np.partition (12 s of it alone).
@_jit
def _top_of_row(top_idx, top_vals, scores, excluded_cols):
    """topk's one row: its M best candidates (not excluded, not NaN), ties by column index."""
    N, M = len(scores), len(top_idx)
    excluded = np.zeros(N, np.bool_)
    for j in excluded_cols:
        excluded[j] = True
    candidates = np.empty(N, np.int64)                          # ascending column index
    n = 0
    for j in range(N):
        if not excluded[j] and not np.isnan(scores[j]):
            candidates[n] = j
            n += 1
    negated = np.empty(n, scores.dtype)
    for i in range(n):
        negated[i] = -scores[candidates[i]]
    chosen = np.arange(n)                                       # ascending column index
    if n > M:
        # the M-th best value in O(n), then the better ones and enough of the equal ones,
        # each group in column order: the kernel's selection rule
        cut = _kth_smallest(negated.copy(), M - 1)
        chosen = np.empty(M, np.int64)
        k = 0
        for i in range(n):
            if negated[i] < cut:
                chosen[k] = i
                k += 1
        for i in range(n):
            if negated[i] == cut and k < M:
                chosen[k] = i
                k += 1
    order = chosen[np.argsort(negated[chosen], kind="mergesort")]       # stable: ties by index
    for r in range(M):
        if r < len(order):
            j = candidates[order[r]]
            top_idx[r] = j
            top_vals[r] = scores[j]
        else:
            top_idx[r] = -1
            top_vals[r] = -np.inf


@_jit
def _kth_smallest(values, k):
    """The k-th smallest of `values` (0-based), which it reorders: Hoare's selection, O(n) on
    average."""
    lo, hi = 0, len(values) - 1
    while lo < hi:
        pivot = values[(lo + hi) // 2]
        i, j = lo, hi
        while i <= j:                 # [lo, j] <= pivot <= [i, hi]
            while values[i] < pivot:
                i += 1
            while values[j] > pivot:
                j -= 1
            if i <= j:
                values[i], values[j] = values[j], values[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:                         # between the two parts: equal to the pivot
            return values[k]
    return values[k]


def topk(top_idx, top_vals, scores, excl_indptr, excl_cols):
    _topk(top_idx, top_vals, scores, excl_indptr, excl_cols)
