"""The NCAE network: forward, backward and Adam step for any depth, over one ops backend.

    a1 = tanh(sum over kept inputs of x_p / (1-q) * E[col_p] + b1)        (B, K1)   gather
    a_l = tanh(a_{l-1} @ W_l^T + b_l)                                       (B, K_l)  dense
    out = a_last @ V^T + c ;  yhat = s * tanh(out) + m_off                  (B, N)

Explicit feedback computes `out` only at the observed entries (sparse output); implicit feedback
needs every column (dense output through the backend's BLAS). The sparse parts are the ops of
ops/reference.py; the dense parts are `xp` algebra, so the same code runs on numpy and CuPy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layout import AdamConfig, NCAELayout, Parameters


@dataclass(frozen=True)
class Objective:
    """What the output layer is trained to do (DESIGN.md, "Model")."""
    feedback: str                     # 'explicit' or 'implicit'
    s: float = 1.0                    # yhat = s * tanh(out) + m_off
    m_off: float = 0.0
    alpha: float = 1.0                # explicit: weight of errors on dropped inputs
    beta: float = 1.0                 # explicit: weight of errors on kept inputs
    # Reconstruct the corrupted input itself instead of the clean row (pre-training's "U" on
    # layer 1): dropped entries are no target (explicit) or a negative one (implicit).
    target_corrupted: bool = False

    @classmethod
    def explicit(cls, r_min: float, r_max: float, alpha: float, beta: float) -> Objective:
        return cls("explicit", s=(r_max - r_min) / 2, m_off=(r_max + r_min) / 2,
                   alpha=alpha, beta=beta)

    @classmethod
    def implicit(cls) -> Objective:
        return cls("implicit")


def tanh_layer_backward(dW, db, da_out, a_out, a_in, W, input_grad: bool = True):
    """Backprop through a_out = tanh(a_in @ W^T + b): accumulate dW, db; return dL/da_in
    (None when input_grad is False: the layer below is not trained)."""
    dpre = da_out * (1 - a_out ** 2)                                  # (B, K_out)
    dW += dpre.T @ a_in
    db += dpre.sum(axis=0)
    return dpre @ W if input_grad else None


class Network(Parameters):
    """An NCAE's parameters, gradients and Adam moments on one backend, with its math."""

    def __init__(self, layout: NCAELayout, ops, objective: Objective, params: np.ndarray,
                 col_weights: np.ndarray | None = None, dtype=np.float32):
        if objective.feedback == "implicit" and col_weights is None:
            raise ValueError("implicit feedback needs the per-column weights c_j")
        super().__init__(layout, ops, params, dtype)
        self.objective = objective
        self.col_weights = None if col_weights is None else ops.to_device(col_weights.astype(dtype))

    # -----------------------------------------------------------------------------------------
    # forward / backward of the hidden layers

    def hidden_forward(self, batch, keep, scale: float, depth: int | None = None) -> list:
        """Activations [a1, ..., a_depth] (all hidden layers by default), each (B, K_l)."""
        xp, p = self.ops.xp, self.p
        B = len(batch.row_weight)
        a = xp.empty((B, self.layout.hidden[0]), self.params.dtype)   # (B, K1)
        self.ops.gather_forward(a, batch.indptr, batch.cols, batch.vals, keep,
                                p["E"], p["b1"], scale)
        acts = [a]
        for layer in range(2, (depth or self.layout.n_layers) + 1):
            a = xp.tanh(a @ p[f"W{layer}"].T + p[f"b{layer}"])        # (B, K_l)
            acts.append(a)
        return acts

    def hidden_backward(self, acts: list, da, batch, keep, scale: float, lowest: int = 1):
        """Accumulate the gradients of hidden layers lowest..last from da = dL/da_last."""
        p, d = self.p, self.d
        for layer in range(self.layout.n_layers, max(lowest, 2) - 1, -1):
            da = tanh_layer_backward(d[f"W{layer}"], d[f"b{layer}"], da, acts[layer - 1],
                                     acts[layer - 2], p[f"W{layer}"], input_grad=layer > lowest)
        if lowest > 1:
            return
        dpre1 = da * (1 - acts[0] ** 2)                               # (B, K1)
        self.ops.scatter_backward(d["E"], d["b1"], dpre1, batch.indptr, batch.cols, batch.vals,
                                  keep, scale, batch.entry_rows, batch.col_order,
                                  batch.col_ptr, batch.col_ids)

    # -----------------------------------------------------------------------------------------
    # the loss

    def loss_and_grad(self, batch, keep, scale: float, lowest: int = 1):
        """Accumulate d(batch loss)/d(params) into the grads; returns row_loss (B,).

        Batch loss = sum_b row_weight[b] * row_loss[b], the mean over the batch's real rows.
        Hidden layers below `lowest` get no gradient (lowest = n_layers + 1: only V and c).
        """
        xp, p, d, obj = self.ops.xp, self.p, self.d, self.objective
        acts = self.hidden_forward(batch, keep, scale)
        a = acts[-1]                                                  # (B, K_last)
        B = a.shape[0]
        row_loss = xp.empty(B, self.params.dtype)                     # (B,)
        da = xp.zeros_like(a)                                         # (B, K_last)
        if obj.feedback == "explicit":
            yhat = xp.empty(len(batch.cols), self.params.dtype)       # (nnz,)
            self.ops.sparse_output_forward(yhat, a, p["V"], p["c"], batch.indptr, batch.cols,
                                           obj.s, obj.m_off)
            alpha = 0.0 if obj.target_corrupted else obj.alpha
            self.ops.sparse_output_backward(da, d["V"], d["c"], row_loss, a, p["V"], yhat,
                                            batch.indptr, batch.cols, batch.vals, keep,
                                            batch.row_weight, alpha, obj.beta, obj.s,
                                            obj.m_off, batch.entry_rows, batch.col_order,
                                            batch.col_ptr, batch.col_ids)
        else:
            out = a @ p["V"].T + p["c"]                               # (B, N) logits
            dout = xp.empty_like(out)                                 # (B, N)
            indptr, cols = (kept_entries(xp, batch, keep) if obj.target_corrupted
                            else (batch.indptr, batch.cols))
            self.ops.reweighted_error(dout, row_loss, out, indptr, cols, self.col_weights,
                                      batch.row_weight)
            d["V"] += dout.T @ a
            d["c"] += dout.sum(axis=0)
            da += dout @ p["V"]
        self.hidden_backward(acts, da, batch, keep, scale, lowest)
        return row_loss

    def train_step(self, batch, keep, scale: float, adam: AdamConfig, first: str | None = None):
        """Zero the grads, backprop one batch, take one Adam step on the parameters from
        `first` on (E, a W_l, or V; all by default); returns the batch loss as a 0-d device
        array, so the host need not wait for it."""
        self.grads.fill(0)
        lowest = {None: 1, "E": 1, "V": self.layout.n_layers + 1}.get(first)
        row_loss = self.loss_and_grad(batch, keep, scale, lowest or int(first[1:]))
        self.adam_step(adam, first)
        return row_loss @ batch.row_weight

    # -----------------------------------------------------------------------------------------
    # prediction (no dropout)

    def codes(self, batch):
        """The last hidden layer (B, K_last) of the batch's rows."""
        keep = self.ops.xp.ones(len(batch.cols), np.uint8)
        return self.hidden_forward(batch, keep, 1.0)[-1]

    def logits(self, batch):
        """out (B, N) for every column of the batch's rows: the implicit ranking scores.

        Ranking uses the logits rather than tanh(out): the order is the same, and tanh's
        float32 saturation near 1 would create ties that count against the held-out item.
        """
        return self.codes(batch) @ self.p["V"].T + self.p["c"]

    def predict_entries(self, batch, query):
        """yhat (nnz_q,) at the entries of `query` (a batch of the same rows as `batch`)."""
        a = self.codes(batch)
        yhat = self.ops.xp.empty(len(query.cols), self.params.dtype)
        self.ops.sparse_output_forward(yhat, a, self.p["V"], self.p["c"], query.indptr,
                                       query.cols, self.objective.s, self.objective.m_off)
        return yhat


def kept_entries(xp, batch, keep):
    """(indptr (B+1,), cols) of the batch's entries that survived input dropout."""
    kept = keep.astype(bool)
    counts = xp.bincount(batch.entry_rows[kept], minlength=len(batch.row_weight))
    indptr = xp.zeros(len(counts) + 1, np.int32)
    indptr[1:] = xp.cumsum(counts)
    return indptr, batch.cols[kept]
