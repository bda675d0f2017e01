"""One flat float buffer for all parameters, carved into named views; grads and Adam's m, v alike.

A flat buffer lets Adam, the L2 term, zeroing and checkpointing each be one pass over one array,
on any backend. Offsets are rounded up to multiples of 4 elements so every view starts 16-byte
aligned (float4 loads on the GPU). Parameters are laid out in the order the network is built,
input side first, so the parameters of the upper part of a network are a tail of the buffer:
greedy pre-training trains exactly such a tail.

NCAE's names follow docs/design.md: E (N, K1) input embedding, b1 (K1,); W2 (K2, K1), b2 (K2,) ...
for each further hidden layer; V (N, K_last) output embedding, c (N,). A column shard's layout
(ncae_cuda/ops/shard.py) holds the rows of E, V and c of its columns, and all of the rest.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .common import adam_state
from .shard import Columns

ALIGN = 4
SHARDED = ("E", "V", "c")       # NCAE's views with a row per column: a column shard holds its rows


class Layout:
    """Offsets of named arrays of the given shapes, in the order given, in one flat buffer."""

    def __init__(self, shapes: dict[str, tuple[int, ...]]):
        self.shapes = dict(shapes)
        self.offsets = {}
        size = 0
        for key, shape in self.shapes.items():
            self.offsets[key] = size
            size += -(-math.prod(shape) // ALIGN) * ALIGN
        self.size = size

    def views(self, flat) -> dict:
        """Named views into a (size,) array of any array module: writes go to the buffer."""
        return {key: flat[off:off + math.prod(self.shapes[key])].reshape(self.shapes[key])
                for key, off in self.offsets.items()}

    def xavier_init(self, rng: np.random.Generator) -> np.ndarray:
        """(size,) float32 parameters: Xavier-uniform matrices, zero vectors and padding."""
        flat = np.zeros(self.size, np.float32)
        for key, view in self.views(flat).items():
            if view.ndim == 2:
                self._draw(rng, key, view)
        return flat

    def _draw(self, rng: np.random.Generator, key: str, view: np.ndarray) -> None:
        # (fan_out, fan_in) for W; E and V map width N to or from K: N and K either way
        bound = math.sqrt(6.0 / (view.shape[0] + view.shape[1]))
        view[:] = rng.uniform(-bound, bound, size=view.shape)


class NCAELayout(Layout):
    """E, b1, then W_l, b_l for each further hidden layer, then V, c: of all n_cols columns, or
    of a column shard's (`columns`, of which n_cols is the count)."""

    def __init__(self, n_cols: int, hidden: tuple[int, ...], columns: Columns | None = None):
        if n_cols < 1 or not hidden or min(hidden) < 1:
            raise ValueError(f"need n_cols >= 1 and hidden widths >= 1, got {n_cols}, {hidden}")
        self.columns = columns or Columns(0, n_cols, n_cols)
        if self.columns.n != n_cols:
            raise ValueError(f"{n_cols} columns cannot be the shard {self.columns}")
        self.n_cols, self.hidden = n_cols, tuple(hidden)
        shapes = {"E": (n_cols, hidden[0]), "b1": (hidden[0],)}
        for layer in range(2, len(hidden) + 1):
            shapes[f"W{layer}"] = (hidden[layer - 1], hidden[layer - 2])
            shapes[f"b{layer}"] = (hidden[layer - 1],)
        shapes["V"] = (n_cols, hidden[-1])
        shapes["c"] = (n_cols,)
        super().__init__(shapes)

    @property
    def n_layers(self) -> int:
        """Number of hidden layers."""
        return len(self.hidden)

    def _draw(self, rng: np.random.Generator, key: str, view: np.ndarray) -> None:
        """A shard draws the rows of its columns from the whole matrix's stream: the draws of
        the rows before them skipped, those after them too, so that every shard's parameters
        are the one-process model's (one 64-bit draw a value: numpy's uniform)."""
        if key not in SHARDED or self.columns.whole:
            return super()._draw(rng, key, view)
        lo, hi, total = self.columns
        K = view.shape[1]
        bound = math.sqrt(6.0 / (total + K))
        rng.bit_generator.advance(lo * K)
        view[:] = rng.uniform(-bound, bound, size=view.shape)
        rng.bit_generator.advance((total - hi) * K)


@dataclass(frozen=True)
class AdamConfig:
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0         # lambda: L2 on every weight and bias, added to the gradient
    lr_decay: float = 1.0             # the learning rate of epoch e is lr * lr_decay^(e-1) ...
    steps_per_epoch: int = 0          # ... epochs of this many steps (0: no decay) ...
    decay_start: int = 0              # ... counted from this step count (pre-training's end)


class Parameters:
    """Parameters, gradients and Adam's moments in one (4, P) buffer on a backend's device, and
    Adam's step count there too (so a step reads it from device memory)."""

    def __init__(self, layout: Layout, ops, params: np.ndarray, dtype=np.float32):
        self.layout, self.ops = layout, ops
        self.state = ops.xp.zeros((4, layout.size), dtype)            # params, grads, m, v
        self.state[0] = ops.to_device(params.astype(dtype))
        self.params, self.grads, self.m, self.v = self.state
        self.p = layout.views(self.params)
        self.d = layout.views(self.grads)
        self.counter = ops.to_device(adam_state())    # Adam's steps taken first (common.py)

    @property
    def steps(self) -> int:
        """Adam's steps taken (read from the device: a replayed CUDA graph counts there)."""
        return int(self.ops.to_host(self.counter)[0])

    def adam_step(self, adam: AdamConfig, first: str | None = None) -> None:
        """One Adam step on the parameters from `first` (a layout key) to the end of the
        buffer, all of them by default; the ones before it stay bit-identical. The gradients
        it reads are zero after it."""
        start = self.layout.offsets[first] if first else 0
        self.ops.adam(self.params[start:], self.m[start:], self.v[start:], self.grads[start:],
                      self.counter, adam.lr, adam.beta1, adam.beta2, adam.eps,
                      adam.weight_decay, adam.lr_decay, adam.steps_per_epoch, adam.decay_start)

    def restore(self, params, m, v, steps: int) -> None:
        """Set the parameters, Adam's moments and step count (a checkpoint's); zero grads."""
        self.params[...] = self.ops.to_device(params)
        self.m[...] = self.ops.to_device(m)
        self.v[...] = self.ops.to_device(v)
        self.grads.fill(0)
        self.counter[...] = self.ops.to_device(adam_state(steps))

    def reset_optimizer(self) -> None:
        """Zero Adam's moments and step, as for a fresh start from the current parameters."""
        self.m.fill(0)
        self.v.fill(0)
        self.counter.fill(0)

    def l2_penalty(self, weight_decay: float) -> float:
        """lambda/2 * ||params||^2, the regularization part of the objective."""
        return 0.5 * weight_decay * float(self.params @ self.params)
