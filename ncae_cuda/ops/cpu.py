"""Numba CPU backend: every op of ops/reference.py, same names, argument order and semantics.

Each public function is a thin launcher (like ops/gpu.py's) that casts scalars to float32 and
calls a jitted kernel. The cast matters: Numba types a Python float as float64 and an int
literal mixed with float32 as float64, which would silently run the hot loops in double.

Parallelism follows ownership, so results never depend on thread timing: a row-parallel loop
writes only its row; the scatters into embedding rows (dE, dV, dc) run over the batch's distinct
columns, each summing its entries in the fixed order of Batch.col_order.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange
from threadpoolctl import threadpool_limits

from .common import Batch, dropout_stream, dropout_threshold, GOLDEN, KEEP_BITS, MIX1, MIX2

xp = np
name = "cpu"

_F1 = np.float32(1.0)
_F2 = np.float32(2.0)
_GOLDEN, _MIX1, _MIX2 = np.uint64(GOLDEN), np.uint64(MIX1), np.uint64(MIX2)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_KEEP_SHIFT = np.uint64(64 - KEEP_BITS)

_jit = njit(cache=True, nogil=True)
_pjit = njit(cache=True, nogil=True, parallel=True)


def to_device(a):
    return np.asarray(a)


def to_host(a):
    return np.asarray(a)


def session():
    """Context to train and evaluate in: BLAS on one thread, so that its threads and Numba's
    do not spin against each other between the dense and the sparse ops. On 2 cores that cost
    5x on a 2-layer ML-100K epoch, and one BLAS thread was faster even for (128, 69226) outputs."""
    return threadpool_limits(limits=1, user_api="blas")


# ---------------------------------------------------------------------------------------------
# batching

@_jit
def _cut_batch(indptr, indices, data, rows, batch_size):
    n = rows.shape[0]
    b_indptr = np.zeros(batch_size + 1, np.int32)               # (B+1,)
    for b in range(batch_size):
        length = indptr[rows[b] + 1] - indptr[rows[b]] if b < n else 0
        b_indptr[b + 1] = b_indptr[b] + length
    nnz = b_indptr[batch_size]
    cols = np.empty(nnz, np.int32)                              # (nnz,)
    vals = np.empty(nnz, np.float32)                            # (nnz,)
    entry_ids = np.empty(nnz, np.int32)                         # (nnz,)
    entry_rows = np.empty(nnz, np.int32)                        # (nnz,)
    for b in range(n):
        src = indptr[rows[b]]
        for p in range(b_indptr[b], b_indptr[b + 1]):
            e = src + p - b_indptr[b]
            cols[p], vals[p], entry_ids[p], entry_rows[p] = indices[e], data[e], e, b
    col_order = np.argsort(cols, kind="mergesort").astype(np.int32)  # stable: (col, row)
    n_distinct = 0
    for t in range(nnz):
        if t == 0 or cols[col_order[t]] != cols[col_order[t - 1]]:
            n_distinct += 1
    col_ids = np.empty(n_distinct, np.int32)                    # (U,)
    col_ptr = np.empty(n_distinct + 1, np.int32)                # (U+1,)
    u = -1
    for t in range(nnz):
        if t == 0 or cols[col_order[t]] != cols[col_order[t - 1]]:
            u += 1
            col_ids[u], col_ptr[u] = cols[col_order[t]], t
    col_ptr[n_distinct] = nnz
    return b_indptr, cols, vals, entry_ids, entry_rows, col_order, col_ptr, col_ids


def cut_batch(csr, rows, batch_size):
    n = len(rows)
    if not 0 < n <= batch_size:
        raise ValueError(f"a batch needs 1..{batch_size} rows, got {n}")
    row_weight = np.zeros(batch_size, np.float32)
    row_weight[:n] = 1.0 / n
    return Batch(*_cut_batch(csr.indptr, csr.indices, csr.data, rows, batch_size),
                 row_weight=row_weight)


# ---------------------------------------------------------------------------------------------
# input dropout

@_pjit
def _dropout_keep(keep, entry_ids, stream, threshold):
    for p in prange(entry_ids.shape[0]):
        z = stream + np.uint64(entry_ids[p]) * _GOLDEN
        z = (z ^ (z >> _S30)) * _MIX1
        z = (z ^ (z >> _S27)) * _MIX2
        z = z ^ (z >> _S31)
        keep[p] = (z >> _KEEP_SHIFT) >= threshold


def dropout_keep(keep, entry_ids, seed, epoch, q):
    _dropout_keep(keep, entry_ids, np.uint64(dropout_stream(seed, epoch)),
                  np.uint64(dropout_threshold(q)))


# ---------------------------------------------------------------------------------------------
# input layer: gather forward, scatter backward

@_pjit
def _gather_forward(a1, indptr, cols, vals, keep, E, b1, scale):
    B, K = a1.shape
    for b in prange(B):
        acc = b1.copy()                                         # (K,)
        for p in range(indptr[b], indptr[b + 1]):
            if keep[p]:
                w = vals[p] * scale
                e = E[cols[p]]
                for k in range(K):
                    acc[k] += w * e[k]
        for k in range(K):
            a1[b, k] = np.tanh(acc[k])


def gather_forward(a1, indptr, cols, vals, keep, E, b1, scale):
    _gather_forward(a1, indptr, cols, vals, keep, E, b1, np.float32(scale))


@_pjit
def _scatter_backward(dE, db1, dpre1, vals, keep, scale, entry_rows, col_order, col_ptr, col_ids):
    K = dE.shape[1]
    for u in prange(col_ids.shape[0]):
        de = dE[col_ids[u]]
        for t in range(col_ptr[u], col_ptr[u + 1]):
            p = col_order[t]
            if keep[p]:
                w = vals[p] * scale
                d = dpre1[entry_rows[p]]
                for k in range(K):
                    de[k] += w * d[k]
    for b in range(dpre1.shape[0]):
        for k in range(K):
            db1[k] += dpre1[b, k]


def scatter_backward(dE, db1, dpre1, indptr, cols, vals, keep, scale,
                     entry_rows, col_order, col_ptr, col_ids):
    _scatter_backward(dE, db1, dpre1, vals, keep, np.float32(scale),
                      entry_rows, col_order, col_ptr, col_ids)


# ---------------------------------------------------------------------------------------------
# explicit output: only the observed entries are computed

@_pjit
def _sparse_output_forward(yhat, a, V, c, indptr, cols, s, m_off):
    K = a.shape[1]
    for b in prange(a.shape[0]):
        for p in range(indptr[b], indptr[b + 1]):
            j = cols[p]
            out = c[j]
            for k in range(K):
                out += V[j, k] * a[b, k]
            yhat[p] = s * np.tanh(out) + m_off


def sparse_output_forward(yhat, a, V, c, indptr, cols, s, m_off):
    _sparse_output_forward(yhat, a, V, c, indptr, cols, np.float32(s), np.float32(m_off))


@_pjit
def _sparse_output_backward(da, dV, dc, row_loss, a, V, yhat, indptr, cols, vals, keep,
                            row_weight, alpha, beta, s, m_off,
                            entry_rows, col_order, col_ptr, col_ids):
    K = a.shape[1]
    g = np.empty(yhat.shape[0], np.float32)                     # (nnz,) d loss / d out
    for b in prange(a.shape[0]):                                # rows: loss, g, da
        n_obs = np.float32(indptr[b + 1] - indptr[b])
        loss = 0.0
        for p in range(indptr[b], indptr[b + 1]):
            w = (beta if keep[p] else alpha) / n_obs
            err = yhat[p] - vals[p]
            loss += w * err * err
            t = (yhat[p] - m_off) / s                           # tanh(out)
            g[p] = row_weight[b] * w * _F2 * err * s * (_F1 - t * t)
            v = V[cols[p]]
            for k in range(K):
                da[b, k] += g[p] * v[k]
        row_loss[b] = loss
    for u in prange(col_ids.shape[0]):                          # columns: dV, dc
        j = col_ids[u]
        for t in range(col_ptr[u], col_ptr[u + 1]):
            p = col_order[t]
            ab = a[entry_rows[p]]
            for k in range(K):
                dV[j, k] += g[p] * ab[k]
            dc[j] += g[p]


def sparse_output_backward(da, dV, dc, row_loss, a, V, yhat, indptr, cols, vals, keep,
                           row_weight, alpha, beta, s, m_off,
                           entry_rows, col_order, col_ptr, col_ids):
    f = np.float32
    _sparse_output_backward(da, dV, dc, row_loss, a, V, yhat, indptr, cols, vals, keep,
                            row_weight, f(alpha), f(beta), f(s), f(m_off),
                            entry_rows, col_order, col_ptr, col_ids)


# ---------------------------------------------------------------------------------------------
# implicit output: dense logits, popularity-reweighted error

@_pjit
def _reweighted_error(dout, row_loss, yhat, indptr, cols, weights, row_weight):
    B, N = yhat.shape
    for b in prange(B):
        rw = row_weight[b]
        loss = 0.0
        for j in range(N):                                      # every column as unobserved
            y = yhat[b, j]
            loss += weights[j] * y * y
            dout[b, j] = rw * _F2 * weights[j] * y * (_F1 - y * y)
        for p in range(indptr[b], indptr[b + 1]):               # then correct the observed
            j = cols[p]
            y = yhat[b, j]
            loss += (y - _F1) * (y - _F1) - weights[j] * y * y
            dout[b, j] = rw * _F2 * (y - _F1) * (_F1 - y * y)
        row_loss[b] = loss


def reweighted_error(dout, row_loss, out, indptr, cols, weights, row_weight):
    # numpy's tanh is SIMD, Numba's a scalar libm call per element: 0.8 ms against 25 ms for
    # a (128, 17632) Last.fm-shaped batch; the loop then only weights and sums.
    _reweighted_error(dout, row_loss, np.tanh(out), indptr, cols, weights, row_weight)


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


def adam(params, m, v, grads, lr, beta1, beta2, eps, weight_decay, step):
    # p -= lr * (m / bc1) / (sqrt(v / bc2) + eps), with the scalar parts folded on the host
    f = np.float32
    bc1, bc2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
    _adam(params, m, v, grads, f(lr / bc1), f(beta1), f(1.0 - beta1), f(beta2), f(1.0 - beta2),
          f(1.0 / np.sqrt(bc2)), f(eps), f(weight_decay))


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
    B, N = scores.shape
    M = top_idx.shape[1]
    for b in prange(B):
        excluded = np.zeros(N, np.bool_)
        for p in range(excl_indptr[b], excl_indptr[b + 1]):
            excluded[excl_cols[p]] = True
        candidates = np.empty(N, np.int64)                      # ascending column index
        n = 0
        for j in range(N):
            if not excluded[j] and not np.isnan(scores[b, j]):
                candidates[n] = j
                n += 1
        negated = np.empty(n, scores.dtype)
        for i in range(n):
            negated[i] = -scores[b, candidates[i]]
        chosen = np.arange(n)                                   # ascending column index
        if n > M:
            # the M-th best value in O(n), then the better ones and enough of the equal ones,
            # each group in column order: the kernel's selection rule
            cut = np.partition(negated, M - 1)[M - 1]
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
        order = chosen[np.argsort(negated[chosen], kind="mergesort")]   # stable: ties by index
        for r in range(M):
            if r < len(order):
                j = candidates[order[r]]
                top_idx[b, r] = j
                top_vals[b, r] = scores[b, j]
            else:
                top_idx[b, r] = -1
                top_vals[b, r] = -np.inf


def topk(top_idx, top_vals, scores, excl_indptr, excl_cols):
    _topk(top_idx, top_vals, scores, excl_indptr, excl_cols)
