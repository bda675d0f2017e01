"""The numpy definition of every op: the truth that the Numba and CUDA backends are tested against.

Written for clarity, not speed: whole-array numpy, dtype following the inputs (so tests can run it
in float64). Names, argument order and semantics are the contract of docs/design.md that ops/cpu.py
and kernels/*.cu implement: outputs first, then inputs; backward ops accumulate (+=) into
parameter gradients. What a reference op does not need (the column order that makes the fast
scatters deterministic, the GPU's windows) still comes in the batch, so every backend is called
the same way. The dense parts (gemm, bias_tanh, bias_backward) and the step's bookkeeping are
plain numpy, which the CPU backend uses as they are.
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from .common import (GOLDEN, KEEP_BITS, MIX1, MIX2, TF32_HALF, TF32_KEPT, Batch, dropout_stream,
                     dropout_threshold)
from .memory import pack_plan

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

def load_plan(memory, plan) -> None:
    """Put an epoch's plan (plan.EpochPlan) into the step memory: on the host, in place."""
    pack_plan(plan, memory.plan_bytes)


def _cut(csr, rows, batch_indptr, stream, threshold):
    """The entries of `rows` (n,) of a CSR at positions batch_indptr (B+1,), their keep flags
    (drawn by each entry's id in the whole matrix)."""
    entry_rows = _entry_rows(batch_indptr).astype(np.int32)                 # (nnz,)
    within = np.arange(batch_indptr[-1]) - batch_indptr[entry_rows]         # place in the row
    at = csr.indptr[rows][entry_rows] + within
    keep = np.empty(len(at), np.uint8)
    _keep_flags(keep, (csr.first_entry[rows][entry_rows] + within).astype(np.int32), stream,
                threshold)
    return (csr.indices[at].astype(np.int32), csr.data[at].astype(np.float32), keep,
            entry_rows)


def cut_batch(memory, csr, plan, step: int) -> Batch:
    """The batch of step `step` of the epoch whose plan is loaded (the step the memory's step
    counter names; the host's `plan` sizes the views), cut from the training CSR into the
    memory's batch buffers, input dropout applied (keep flags)."""
    v, B = memory.views, plan.batch_size
    assert int(memory.step[0]) == step, "cut_batch out of step with step_loss"
    bi = v["batch_indptr"][step]
    n = plan.rows(step)
    rows = v["order"][step * B:step * B + n]
    header = v["header"]
    stream = int(header[2:4].view(np.uint64)[0])
    cols, vals, keep, entry_rows = _cut(csr, rows, bi, stream, int(header[1]))
    nnz = len(cols)
    batch = memory.batch(nnz)
    batch.indptr[:] = bi
    batch.cols[:], batch.vals[:], batch.keep[:], batch.entry_rows[:] = cols, vals, keep, entry_rows
    start = v["col_offsets"][step]
    batch.col_order[:] = v["col_order"][start:start + nnz]
    batch.row_weight[:] = 0
    batch.row_weight[:n] = 1.0 / n
    batch.row_entries[:] = 0
    batch.row_entries[:n] = csr.row_entries[rows]
    return batch


def cut_rows(csr, rows) -> Batch:
    """Rows `rows` (n,) of a CSR as a batch of n rows, every entry kept: for evaluation."""
    rows = np.asarray(rows, np.int32)
    indptr = np.zeros(len(rows) + 1, np.int32)
    np.cumsum(csr.indptr[rows + 1] - csr.indptr[rows], out=indptr[1:])
    cols, vals, keep, entry_rows = _cut(csr, rows, indptr, 0, 0)
    return Batch(indptr, cols, vals, keep, entry_rows, None,
                 np.full(len(rows), 1.0 / max(len(rows), 1), np.float32),
                 csr.row_entries[rows].astype(np.int32))


def capture(fn):
    """No CUDA graphs here: None, so the caller takes every step itself."""
    return None


def step_loss(losses, step, row_loss, row_weight) -> None:
    """losses[step] = the batch's mean loss over its real rows; then step += 1."""
    losses[int(step[0])] = row_weight @ row_loss
    step[0] += 1


# ---------------------------------------------------------------------------------------------
# the ops of docs/design.md

def _keep_flags(keep, entry_ids, stream, threshold):
    h = _mix64(np.uint64(stream) + entry_ids.astype(np.uint64) * np.uint64(GOLDEN))
    keep[:] = (h >> np.uint64(64 - KEEP_BITS)) >= threshold


def dropout_keep(keep, entry_ids, seed, epoch, q):
    """keep (nnz,) uint8 = 1 where entry survives input dropout of rate q in this epoch."""
    _keep_flags(keep, entry_ids, dropout_stream(seed, epoch), dropout_threshold(q))


def gather_forward(a1, batch, E, b1, scale):
    """a1 (B, K1) = tanh(b1 + sum over the row's kept entries of scale * val * E[col]); with
    b1 None, the sum alone (a column shard's part of the pre-activation)."""
    pre = np.zeros(a1.shape, np.result_type(a1, E))
    w = batch.vals * batch.keep * scale                             # (nnz,)
    np.add.at(pre, batch.entry_rows, w[:, None] * E[batch.cols])
    a1[:] = pre if b1 is None else np.tanh(pre + b1)


def scatter_backward(dE, dpre1, batch, scale):
    """dE[col] += scale * val * dpre1[row] over the batch's kept entries."""
    w = batch.vals * batch.keep * scale                             # (nnz,)
    np.add.at(dE, batch.cols, w[:, None] * dpre1[batch.entry_rows])


def sparse_output_forward(yhat, a, V, c, batch, s, m_off, identity=False):
    """yhat (nnz,) = s * tanh(V[col] . a[row] + c[col]) + m_off at each entry of the batch
    (identity: V[col] . a[row] + c[col] + m_off)."""
    cols = batch.cols
    out = np.einsum("pk,pk->p", V[cols], a[batch.entry_rows]) + c[cols]
    yhat[:] = out + m_off if identity else s * np.tanh(out) + m_off


def sparse_output_backward(da, dV, dc, row_loss, g, a, V, c, batch, alpha, beta, s, m_off,
                           identity=False, row_norm=1.0):
    """The explicit output layer at the batch's entries, forward and backward in one.

    row_loss[b] = sum over the row's entries of w/|K_b|^row_norm * (yhat - x)^2, with w = alpha
    for dropped inputs and beta for kept ones, |K_b| = the row's number of entries in the whole
    training matrix (batch.row_entries: a column shard's batch holds part of it), yhat = s *
    tanh(out) + m_off (identity: out + m_off), out = V[col] . a[row] + c[col]. g (nnz,) =
    d(sum_b row_weight[b] row_loss[b]) / d out at each entry; da (B, K) = its gradient wrt a
    (written); dV, dc accumulate theirs.
    """
    rows, cols = batch.entry_rows, batch.cols
    n_obs = batch.row_entries.astype(np.float64)                    # (B,)
    out = np.einsum("pk,pk->p", V[cols], a[rows]) + c[cols]
    t = np.tanh(out)                                                # tanh(out), kept
    err = (out + m_off if identity else s * t + m_off) - batch.vals
    w = (np.where(batch.keep.astype(bool), beta, alpha)
         / n_obs[rows] ** row_norm)                                 # (nnz,)
    row_loss[:] = np.bincount(rows, w * err * err, minlength=len(row_loss))
    slope = 1.0 if identity else s * (1.0 - t * t)                  # d yhat / d out
    g[:] = batch.row_weight[rows] * w * 2.0 * err * slope
    da[:] = 0
    np.add.at(da, rows, g[:, None] * V[cols])
    np.add.at(dV, cols, g[:, None] * a[rows])
    np.add.at(dc, cols, g)


def reweighted_error(dout, row_loss, z, c, batch, weights, kept_only=False):
    """The implicit loss of each row from z = a V^T (B, N), and d(loss)/d(logits).

    out = z + c, yhat = tanh(out); target 1 with weight 1 at the row's observed columns (only
    its kept ones, with kept_only: pre-training's corrupted target), target 0 with weight
    weights[j] elsewhere. row_loss[b] = sum_j w_j (yhat_j - t_j)^2; dout = row_weight[b] *
    dL_b/dout.
    """
    yhat = np.tanh(z + c)
    target = np.zeros_like(yhat)
    w = np.broadcast_to(weights, yhat.shape).copy()
    use = batch.keep.astype(bool) if kept_only else np.ones(len(batch.cols), bool)
    rows, cols = batch.entry_rows[use], batch.cols[use]
    target[rows, cols] = 1.0
    w[rows, cols] = 1.0
    err = yhat - target
    row_loss[:] = (w * err * err).sum(axis=1)
    dout[:] = batch.row_weight[:, None] * 2.0 * w * err * (1.0 - yhat * yhat)



def multinomial_error(dout, row_loss, z, c, batch, kept_only=False):
    """The implicit loss of each row as a multinomial likelihood over the items (Mult-VAE's),
    from z = a V^T (B, N), and d(loss)/d(logits).

    out = z + c, pi = softmax(out) over the row; x = 1 at the row's observed columns (only its
    kept ones, with kept_only), 0 elsewhere; row_loss[b] = -sum_j x_j log pi_j; dout =
    row_weight[b] * (sum_j x_j * pi - x).
    """
    out = z + c
    log_pi = out - out.max(axis=1, keepdims=True)
    log_pi -= np.log(np.exp(log_pi).sum(axis=1, keepdims=True))
    x = np.zeros_like(out)
    use = batch.keep.astype(bool) if kept_only else np.ones(len(batch.cols), bool)
    x[batch.entry_rows[use], batch.cols[use]] = 1.0
    n = x.sum(axis=1, keepdims=True)
    row_loss[:] = -(x * log_pi).sum(axis=1)
    dout[:] = batch.row_weight[:, None] * (n * np.exp(log_pi) - x)

def adam(params, m, v, grads, counter, lr, beta1, beta2, eps, weight_decay, lr_decay=1.0,
         steps_per_epoch=0, decay_start=0):
    """One Adam step (Kingma & Ba, Alg. 1) on the flat buffers, L2 added to the gradient; the
    step count t = counter[0] + 1 is read from `counter` and written back, and the gradient is
    zeroed for the next step. With steps_per_epoch, step t's learning rate is lr *
    lr_decay^((t-1-decay_start) // steps_per_epoch): the epoch's."""
    step = int(counter[0]) + 1
    lr = decayed(lr, lr_decay, steps_per_epoch, decay_start, step)
    g = grads + weight_decay * params
    m[:] = beta1 * m + (1 - beta1) * g
    v[:] = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1 ** step)
    v_hat = v / (1 - beta2 ** step)
    params -= lr * m_hat / (np.sqrt(v_hat) + eps)
    grads[:] = 0
    counter[0] = step


def decayed(lr: float, lr_decay: float, steps_per_epoch: int, decay_start: int,
            step: int) -> float:
    """Step `step`'s learning rate: lr times lr_decay per epoch of steps_per_epoch steps
    after the first decay_start (kernels/adam.cu: the same, in double)."""
    if not steps_per_epoch:
        return lr
    return lr * lr_decay ** ((step - 1 - decay_start) // steps_per_epoch)


# ---------------------------------------------------------------------------------------------
# the dense layers

def gemm(out, a, b, trans_a=False, trans_b=False, accumulate=False, tf32=False):
    """out (+)= op(a) @ op(b), op transposing where asked: the BLAS call of the dense layers.
    tf32: a and b rounded to TF32 first (to_tf32), as a GPU's tensor cores take them; the sums
    stay in out's precision."""
    if tf32:
        a, b = to_tf32(a), to_tf32(b)
    product = (a.T if trans_a else a) @ (b.T if trans_b else b)
    if accumulate:
        out += product
    else:
        out[...] = product


def to_tf32(x):
    """x rounded to TF32 (float32's exponent, 10 of its 23 mantissa bits), to the nearest, ties
    away from zero (PTX's cvt.rna.tf32.f32), in x's dtype. A carry out of the mantissa moves
    the exponent on, and the largest floats round to infinity; NaN stays NaN."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(TF32_HALF)) & np.uint32(TF32_KEPT)).view(np.float32)
    return np.where(np.isnan(x), x, rounded).astype(np.asarray(x).dtype, copy=False)


def bias_tanh(a, b):
    """a = tanh(a + b) in place: a dense hidden layer's activation."""
    np.add(a, b, out=a)
    np.tanh(a, out=a)


def bias_backward(db, dpre, da=None, a=None):
    """db += the column sums of dpre; given a layer's tanh output a, dpre = da * (1 - a^2) is
    formed (into dpre, which may be da itself) first."""
    if a is not None:
        np.multiply(da, 1 - a * a, out=dpre)
    db += dpre.sum(axis=0)


# ---------------------------------------------------------------------------------------------
# evaluation

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
