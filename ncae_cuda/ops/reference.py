"""The numpy definition of every op: the truth that the Numba and CUDA backends are tested against.

Written for clarity, not speed: whole-array numpy, dtype following the inputs (so tests can run it
in float64). Names, argument order and semantics are the contract of DESIGN.md that ops/cpu.py
and kernels/*.cu implement: outputs first, then inputs; backward ops accumulate (+=) into
gradients. Arguments a reference op does not need (the by-column grouping that makes the fast
scatters deterministic) are still taken, so every backend is called the same way.
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from .common import Batch, dropout_stream, dropout_threshold, GOLDEN, KEEP_BITS, MIX1, MIX2

xp = np
name = "reference"


def to_device(a):
    return np.asarray(a)


def to_host(a):
    return np.asarray(a)


session = nullcontext   # the context to train and evaluate in: nothing to set up for numpy


def _mix64(z):
    # numpy uint64 arithmetic wraps mod 2^64, as splitmix64 wants
    z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
    return z ^ (z >> np.uint64(31))


def _entry_rows(indptr):
    return np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))   # (nnz,) batch row of entry


# ---------------------------------------------------------------------------------------------
# batching

def cut_batch(csr, rows, batch_size):
    """Rows `rows` (n,) of a CSR (host indices), padded with empty rows to batch_size.

    Entry ids are positions in the source CSR. col_order lists the batch's entries sorted by
    column (stable, so ties keep row order); col_ptr/col_ids delimit each column's run there.
    row_weight is 1/n on real rows and 0 on padding: the batch loss is a mean over real rows.
    """
    n = len(rows)
    if not 0 < n <= batch_size:
        raise ValueError(f"a batch needs 1..{batch_size} rows, got {n}")
    indptr, indices, data = csr.indptr, csr.indices, csr.data
    starts, ends = indptr[rows], indptr[rows + 1]
    lengths = np.zeros(batch_size, np.int32)
    lengths[:n] = ends - starts
    b_indptr = np.zeros(batch_size + 1, np.int32)
    np.cumsum(lengths, out=b_indptr[1:])
    entry_ids = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)] or [[]])
    entry_ids = entry_ids.astype(np.int32)                          # (nnz,)
    cols = indices[entry_ids].astype(np.int32)                      # (nnz,)
    col_order = np.argsort(cols, kind="stable").astype(np.int32)    # (nnz,)
    col_ids, counts = np.unique(cols, return_counts=True)           # (U,)
    col_ptr = np.zeros(len(col_ids) + 1, np.int32)
    np.cumsum(counts, out=col_ptr[1:])
    row_weight = np.zeros(batch_size, np.float32)
    row_weight[:n] = 1.0 / n
    return Batch(indptr=b_indptr, cols=cols, vals=data[entry_ids].astype(np.float32),
                 entry_ids=entry_ids, entry_rows=_entry_rows(b_indptr).astype(np.int32),
                 col_order=col_order, col_ptr=col_ptr, col_ids=col_ids.astype(np.int32),
                 row_weight=row_weight)


# ---------------------------------------------------------------------------------------------
# the ops of DESIGN.md

def dropout_keep(keep, entry_ids, seed, epoch, q):
    """keep (nnz,) uint8 = 1 where entry survives input dropout of rate q in this epoch."""
    stream = np.uint64(dropout_stream(seed, epoch))
    h = _mix64(stream + entry_ids.astype(np.uint64) * np.uint64(GOLDEN))
    keep[:] = (h >> np.uint64(64 - KEEP_BITS)) >= dropout_threshold(q)


def gather_forward(a1, indptr, cols, vals, keep, E, b1, scale):
    """a1 (B, K1) = tanh(b1 + sum over kept entries of scale * val * E[col])."""
    pre = np.zeros(a1.shape, np.result_type(a1, E))
    w = vals * keep * scale                                         # (nnz,)
    np.add.at(pre, _entry_rows(indptr), w[:, None] * E[cols])
    a1[:] = np.tanh(pre + b1)


def scatter_backward(dE, db1, dpre1, indptr, cols, vals, keep, scale,
                     entry_rows, col_order, col_ptr, col_ids):
    """dE[col] += scale * val * dpre1[row] over kept entries; db1 += sum over rows of dpre1."""
    w = vals * keep * scale                                         # (nnz,)
    np.add.at(dE, cols, w[:, None] * dpre1[entry_rows])
    db1 += dpre1.sum(axis=0)


def sparse_output_forward(yhat, a, V, c, indptr, cols, s, m_off):
    """yhat (nnz,) = s * tanh(V[col] . a[row] + c[col]) + m_off at each entry of the batch CSR."""
    rows = _entry_rows(indptr)
    out = np.einsum("pk,pk->p", V[cols], a[rows]) + c[cols]
    yhat[:] = s * np.tanh(out) + m_off


def sparse_output_backward(da, dV, dc, row_loss, a, V, yhat, indptr, cols, vals, keep,
                           row_weight, alpha, beta, s, m_off,
                           entry_rows, col_order, col_ptr, col_ids):
    """Explicit loss of each row and its gradient, scattered to da, dV, dc.

    row_loss[b] = sum over the row's observed entries of w/|K_b| * (yhat - x)^2, with w = alpha
    for dropped inputs and beta for kept ones, |K_b| = the row's number of observed entries.
    The gradient is that of sum_b row_weight[b] * row_loss[b].
    """
    n_obs = np.diff(indptr)                                         # (B,)
    rows = _entry_rows(indptr)                                      # (nnz,)
    w = np.where(keep.astype(bool), beta, alpha) / n_obs[rows]      # (nnz,)
    err = yhat - vals
    row_loss[:] = np.bincount(rows, w * err * err, minlength=len(row_loss))
    t = (yhat - m_off) / s                                          # tanh(out)
    g = row_weight[rows] * w * 2.0 * err * s * (1.0 - t * t)        # (nnz,) d loss / d out
    np.add.at(da, rows, g[:, None] * V[cols])
    np.add.at(dV, cols, g[:, None] * a[rows])
    np.add.at(dc, cols, g)


def reweighted_error(dout, row_loss, out, indptr, cols, weights, row_weight):
    """Implicit loss of each row from its dense logits, and d(loss)/d(logits).

    yhat = tanh(out) (B, N); target 1 with weight 1 at the row's observed columns, target 0 with
    weight weights[j] elsewhere. row_loss[b] = sum_j w_j (yhat_j - t_j)^2;
    dout = row_weight[b] * dL_b/dout.
    """
    yhat = np.tanh(out)
    target = np.zeros_like(yhat)
    w = np.broadcast_to(weights, yhat.shape).copy()
    rows = _entry_rows(indptr)
    target[rows, cols] = 1.0
    w[rows, cols] = 1.0
    err = yhat - target
    row_loss[:] = (w * err * err).sum(axis=1)
    dout[:] = row_weight[:, None] * 2.0 * w * err * (1.0 - yhat * yhat)


def adam(params, m, v, grads, lr, beta1, beta2, eps, weight_decay, step):
    """One Adam step (Kingma & Ba, Alg. 1) on the flat buffers, L2 added to the gradient."""
    g = grads + weight_decay * params
    m[:] = beta1 * m + (1 - beta1) * g
    v[:] = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1 ** step)
    v_hat = v / (1 - beta2 ** step)
    params -= lr * m_hat / (np.sqrt(v_hat) + eps)


def rank_heldout(ranks, scores, heldout, excl_indptr, excl_cols):
    """ranks (B,) = number of candidate columns scoring >= the held-out column.

    Candidates are the columns not in the row's excluded set (its training entries), other than
    the held-out column itself; ties count against the held-out item. A NaN held-out score ranks
    behind every candidate.
    """
    B, N = scores.shape
    target = scores[np.arange(B), heldout][:, None]                 # (B, 1)
    beats = (scores >= target) | np.isnan(target)                   # (B, N)
    beats[np.arange(B), heldout] = False
    rows = _entry_rows(excl_indptr)
    beats[rows, excl_cols] = False
    ranks[:] = beats.sum(axis=1)


def topk(top_idx, top_vals, scores, excl_indptr, excl_cols):
    """top_idx, top_vals (B, M): each row's M best candidate columns and their scores, best first.

    Candidates are the columns not in the row's excluded set and not scoring NaN; ties go to the
    lower column index; a row with fewer than M candidates is padded with -1 and -inf.
    """
    B, M = top_idx.shape
    candidate = ~np.isnan(scores)                                   # (B, N)
    candidate[_entry_rows(excl_indptr), excl_cols] = False
    top_idx[:] = -1
    top_vals[:] = -np.inf
    for b in range(B):
        cols = np.flatnonzero(candidate[b])
        best = cols[np.lexsort((cols, -scores[b, cols]))][:M]
        top_idx[b, :len(best)] = best
        top_vals[b, :len(best)] = scores[b, best]
