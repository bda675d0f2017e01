"""The NCAE network: forward, backward and Adam step for any depth, over one ops backend.

    a1 = tanh(sum over kept inputs of x_p / (1-q) * E[col_p] + b1)        (B, K1)   gather
    a_l = tanh(a_{l-1} @ W_l^T + b_l)                                       (B, K_l)  dense
    out = a_last @ V^T + c ;  yhat = s * tanh(out) + m_off                  (B, N)

Explicit feedback computes `out` only at the observed entries (sparse output); implicit feedback
needs every column (dense output through the backend's BLAS). A training step is nothing but the
ops of ops/reference.py (the dense products are its gemm) on the step memory's buffers, so the
same code runs on numpy, Numba and CUDA, and on the GPU it allocates, copies and waits for
nothing; prediction uses the backend's array algebra. With tf32 (Config.matmul) the step's
dense products take their inputs rounded to TF32; prediction's stay float32.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ops import BackendUnavailable
from ..ops.layout import SHARDED, AdamConfig, NCAELayout, Parameters
from ..ops.memory import StepMemory
from .config import MULTINOMIAL, WEIGHTED_SQUARE

# Explicit: the scale the network reads and predicts ratings on, the paper's 1-5 stars; a data
# set's own scale is mapped onto it affinely, in and out. Inputs as they are would put a 1-100
# scale's first-layer sums 25x further out on the tanh than a 1-5 scale's, so one recipe would
# not train both alike; on 1-5 data the map is the identity, bit for bit.
NETWORK_SCALE = (1.0, 5.0)


def to_network_scale(ratings, scale: tuple[float, float]):
    """Ratings on `scale` (r_min, r_max) mapped affinely onto NETWORK_SCALE."""
    (low, high), (r_min, r_max) = NETWORK_SCALE, scale
    return low + (ratings - r_min) * ((high - low) / (r_max - r_min))


@dataclass(frozen=True)
class Objective:
    """What the output layer is trained to do (docs/design.md, "The model")."""
    feedback: str                     # 'explicit' or 'implicit'
    s: float = 1.0                    # yhat = s * tanh(out) + m_off
    m_off: float = 0.0
    alpha: float = 1.0                # explicit: weight of errors on dropped inputs
    beta: float = 1.0                 # explicit: weight of errors on kept inputs
    # Reconstruct the corrupted input itself instead of the clean row (pre-training's "U" on
    # layer 1): dropped entries are no target (explicit) or a negative one (implicit).
    target_corrupted: bool = False
    identity: bool = False            # explicit: yhat = out + m_off, clipped to the rating
                                      # scale when predicting, instead of s * tanh(out) + m_off
    row_norm: float = 1.0             # explicit: a row's errors weigh 1/|R|^row_norm (the
                                      # paper's 1/|R|: 1)
    scale: tuple | None = None        # explicit: the data's (r_min, r_max); s and m_off are
                                      # NETWORK_SCALE's, where the network's ratings live
    loss: str = WEIGHTED_SQUARE       # implicit: config.LOSSES's

    @classmethod
    def explicit(cls, r_min: float, r_max: float, alpha: float, beta: float,
                 identity: bool = False, row_norm: float = 1.0) -> Objective:
        low, high = NETWORK_SCALE
        return cls("explicit", s=(high - low) / 2, m_off=(high + low) / 2,
                   alpha=alpha, beta=beta, identity=identity, row_norm=row_norm,
                   scale=(r_min, r_max))

    @classmethod
    def implicit(cls, loss: str = WEIGHTED_SQUARE) -> Objective:
        return cls("implicit", loss=loss)

    @property
    def unit(self) -> float:
        """Explicit: the weight 1/s^2 that puts the squared errors in ratings mapped to the unit
        range, so that the data term weighs the same beside the L2 term on any rating scale
        (the same lr, weight_decay, alpha and beta train a 1-5 and a 1-100 scale alike)."""
        return 1.0 / self.s ** 2

    def rating(self, out, xp=np):
        """Explicit: the predicted rating, on the data's scale, from the logits `out`."""
        if self.identity:
            return self.clipped(out + self.m_off, xp)
        return self.clipped(self.s * xp.tanh(out) + self.m_off, xp)

    def logit(self, rating: np.ndarray) -> np.ndarray:
        """Explicit: (n,) float64 the logits whose rating() is `rating` (on the data's scale,
        host arrays): rating()'s inverse. The scaled tanh reaches the scale's ends only at an
        infinite logit: a rating there gets the finite one nearest, whose float32 rating is
        the end itself."""
        out = to_network_scale(np.asarray(rating, np.float64), self.scale) - self.m_off
        if self.identity:
            return out
        below_one = np.nextafter(1.0, 0.0)
        return np.arctanh(np.clip(out / self.s, -below_one, below_one))

    def clipped(self, yhat, xp=np):
        """Explicit outputs (on NETWORK_SCALE) as predicted, on the data's scale: the identity
        output's clipped to the scale (the scaled tanh's are inside it already); implicit
        outputs as they are."""
        if self.feedback == "implicit":
            return yhat
        if self.identity:
            yhat = xp.clip(yhat, *NETWORK_SCALE)
        (low, high), (r_min, r_max) = NETWORK_SCALE, self.scale
        return r_min + (yhat - low) * ((r_max - r_min) / (high - low))


def tanh_layer_backward(dW, db, da_out, a_out, a_in, W, input_grad: bool = True):
    """Backprop through a_out = tanh(a_in @ W^T + b) in array algebra (pre-training's decoder):
    accumulate dW, db; return dL/da_in (None when input_grad is False)."""
    dpre = da_out * (1 - a_out ** 2)                                  # (B, K_out)
    dW += dpre.T @ a_in
    db += dpre.sum(axis=0)
    return dpre @ W if input_grad else None


class Network(Parameters):
    """An NCAE's parameters, gradients and Adam moments on one backend, with its math. A
    training step runs in the buffers of `memory` (prepare()): it allocates nothing."""

    def __init__(self, layout: NCAELayout, ops, objective: Objective, params: np.ndarray,
                 col_weights: np.ndarray | None = None, dtype=np.float32, comm=None,
                 tf32: bool = False):
        if objective.feedback == "implicit" and col_weights is None:
            raise ValueError("implicit feedback needs the per-column weights c_j")
        widest = getattr(ops, "max_width", None)          # the GPU kernels' (ops/common.py)
        ends = (layout.hidden[0], layout.hidden[-1])      # what the sparse layers work in
        if widest is not None and max(ends) > widest:
            raise BackendUnavailable(
                f"hidden {','.join(map(str, layout.hidden))}: the {ops.name} backend takes a first "
                f"and last hidden layer up to {widest} wide (--hidden, hidden=); the cpu backend "
                "takes any")
        super().__init__(layout, ops, params, dtype)
        self.objective = objective
        self.tf32 = tf32                # the step's dense products on TF32 (Config.matmul)
        self.col_weights = None if col_weights is None else ops.to_device(col_weights.astype(dtype))
        self.memory = None
        # A column shard's network (layout.columns, ncae_cuda/ops/shard.py) adds up its partial
        # sums with the other ranks' (distributed.Collectives); None: the whole network.
        self.comm = comm

    def prepare(self, geometry) -> StepMemory:
        """Allocate the buffers of this fit's training steps (see memory.py)."""
        self.memory = StepMemory(self.ops, self.layout, self.objective.feedback, geometry,
                                 self.params.dtype, sharded=self.comm is not None)
        return self.memory

    def l2_penalty(self, weight_decay: float) -> float:
        """lambda/2 * ||params||^2 of the whole network: a shard adds the other ranks' columns
        to its own, and its copy of the replicated layers."""
        if self.comm is None:
            return super().l2_penalty(weight_decay)
        squares = [float(self.p[k].ravel() @ self.p[k].ravel()) for k in SHARDED]
        everything = float(self.params @ self.params)
        columns = float(self.comm.sum_host(np.array([sum(squares)]))[0])
        return 0.5 * weight_decay * (everything - sum(squares) + columns)

    # -----------------------------------------------------------------------------------------
    # forward / backward of the hidden layers

    def hidden_forward(self, batch, scale: float, acts: list) -> list:
        """Fill acts[l-1] (B, K_l) with hidden layer l's output for l = 1..len(acts). A shard
        gathers its columns' part of layer 1's pre-activation, the ranks add theirs up, and
        every rank goes on with the same a1."""
        ops, p = self.ops, self.p
        if self.comm is None:
            ops.gather_forward(acts[0], batch, p["E"], p["b1"], scale)
        else:
            ops.gather_forward(acts[0], batch, p["E"], None, scale)
            self.comm.sum(acts[0], "a1")
            ops.bias_tanh(acts[0], p["b1"])
        for layer in range(2, len(acts) + 1):
            ops.gemm(acts[layer - 1], acts[layer - 2], p[f"W{layer}"], trans_b=True,
                     tf32=self.tf32)
            ops.bias_tanh(acts[layer - 1], p[f"b{layer}"])
        return acts

    def hidden_backward(self, acts: list, das: list, batch, scale: float, lowest: int = 1):
        """Accumulate the gradients of hidden layers lowest..last from das[-1] = dL/da_last.
        das[l-1] (B, K_l) is turned into dL/d(pre-activation of layer l) in place."""
        ops, p, d = self.ops, self.p, self.d
        for layer in range(self.layout.n_layers, max(lowest, 2) - 1, -1):
            dpre = das[layer - 1]
            ops.bias_backward(d[f"b{layer}"], dpre, dpre, acts[layer - 1])
            ops.gemm(d[f"W{layer}"], dpre, acts[layer - 2], trans_a=True, accumulate=True,
                     tf32=self.tf32)
            if layer > lowest:
                ops.gemm(das[layer - 2], dpre, p[f"W{layer}"], tf32=self.tf32)
        if lowest > 1:
            return
        ops.bias_backward(d["b1"], das[0], das[0], acts[0])
        ops.scatter_backward(d["E"], das[0], batch, scale)

    # -----------------------------------------------------------------------------------------
    # the loss

    def loss_and_grad(self, batch, scale: float, lowest: int = 1):
        """Accumulate d(batch loss)/d(params) into the grads; returns row_loss (B,).

        Batch loss = sum_b row_weight[b] * row_loss[b], the mean over the batch's real rows.
        Hidden layers below `lowest` get no gradient (lowest = n_layers + 1: only V and c). A
        shard's output layer gives its columns' parts of dL/da_last and of the row losses; the
        ranks add them up (one collective) before the backward through the hidden layers.
        """
        ops, p, d, obj, mem = self.ops, self.p, self.d, self.objective, self.memory
        acts = self.hidden_forward(batch, scale, mem.acts)
        a, da = acts[-1], mem.das[-1]                                 # (B, K_last)
        if obj.feedback == "explicit":
            # errors in the unit range: 1/s^2 folds into the weights, so the row losses the fit
            # reports are the unit range's too
            alpha = 0.0 if obj.target_corrupted else obj.alpha * obj.unit
            g = mem.g[:len(batch.cols)]                               # (nnz,)
            ops.sparse_output_backward(da, d["V"], d["c"], mem.row_loss, g, a, p["V"], p["c"],
                                       batch, alpha, obj.beta * obj.unit, obj.s, obj.m_off,
                                       obj.identity, obj.row_norm)
        else:
            z, dout = mem.z, mem.dout                                 # (B, N)
            ops.gemm(z, a, p["V"], trans_b=True, tf32=self.tf32)
            if obj.loss == MULTINOMIAL:
                ops.multinomial_error(dout, mem.row_loss, z, p["c"], batch,
                                      kept_only=obj.target_corrupted)
            else:
                ops.reweighted_error(dout, mem.row_loss, z, p["c"], batch, self.col_weights,
                                     kept_only=obj.target_corrupted)
            ops.gemm(d["V"], dout, a, trans_a=True, accumulate=True, tf32=self.tf32)
            ops.bias_backward(d["c"], dout)
            ops.gemm(da, dout, p["V"], tf32=self.tf32)
        if self.comm is not None:
            self.comm.sum(mem.exchange, "da, row loss")
        self.hidden_backward(acts, mem.das, batch, scale, lowest)
        return mem.row_loss

    def train_step(self, batch, scale: float, adam: AdamConfig, first: str | None = None):
        """Backprop one batch and take one Adam step on the parameters from `first` on (E, a
        W_l, or V; all by default); returns row_loss (B,), on the device. The gradients are
        zero before (Adam zeroes them after use)."""
        lowest = {None: 1, "E": 1, "V": self.layout.n_layers + 1}.get(first)
        row_loss = self.loss_and_grad(batch, scale, lowest or int(first[1:]))
        self.adam_step(adam, first)
        return row_loss

    # -----------------------------------------------------------------------------------------
    # prediction (no dropout)

    def codes(self, batch):
        """The last hidden layer (B, K_last) of the batch's rows."""
        B = len(batch.row_weight)
        acts = [self.ops.xp.empty((B, K), self.params.dtype) for K in self.layout.hidden]
        return self.hidden_forward(batch, 1.0, acts)[-1]

    def logits(self, batch):
        """out (B, N) for every column of the batch's rows: the implicit ranking scores.

        Ranking uses the logits rather than tanh(out): the order is the same, and tanh's
        float32 saturation near 1 would create ties that count against the held-out item.
        """
        return self.codes(batch) @ self.p["V"].T + self.p["c"]

    def predict_entries(self, batch, query):
        """yhat (nnz_q,) at the entries of `query` (a batch of the same rows as `batch`): the
        multinomial loss's the softmax over each row's every column, so the whole row."""
        obj, xp = self.objective, self.ops.xp
        if obj.loss == MULTINOMIAL:
            out = self.logits(batch)                                  # (B, N)
            out -= out.max(axis=1, keepdims=True)
            log_pi = out - xp.log(xp.exp(out).sum(axis=1, keepdims=True))
            return xp.exp(log_pi[query.entry_rows, query.cols])
        a = self.codes(batch)
        yhat = xp.empty(len(query.cols), self.params.dtype)
        self.ops.sparse_output_forward(yhat, a, self.p["V"], self.p["c"], query, obj.s,
                                       obj.m_off, obj.identity)
        return obj.clipped(yhat, xp)
