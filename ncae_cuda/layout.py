"""One flat float buffer for all parameters, carved into named views; grads and Adam's m, v alike.

A flat buffer lets Adam, the L2 term, zeroing and checkpointing each be one pass over one array,
on any backend. Offsets are rounded up to multiples of 4 elements so every view starts 16-byte
aligned (float4 loads on the GPU).

Names follow DESIGN.md: E (N, K1) input embedding, b1 (K1,); W2 (K2, K1), b2 (K2,) ... for each
further hidden layer; V (N, K_last) output embedding, c (N,).
"""
from __future__ import annotations

import math

import numpy as np

ALIGN = 4


class Layout:
    def __init__(self, n_cols: int, hidden: tuple[int, ...]):
        if n_cols < 1 or not hidden or min(hidden) < 1:
            raise ValueError(f"need n_cols >= 1 and hidden widths >= 1, got {n_cols}, {hidden}")
        self.n_cols, self.hidden = n_cols, tuple(hidden)
        shapes = {"E": (n_cols, hidden[0]), "b1": (hidden[0],)}
        for layer in range(1, len(hidden)):
            shapes[f"W{layer + 1}"] = (hidden[layer], hidden[layer - 1])
            shapes[f"b{layer + 1}"] = (hidden[layer],)
        shapes["V"] = (n_cols, hidden[-1])
        shapes["c"] = (n_cols,)
        self.shapes = shapes
        self.offsets = {}
        size = 0
        for key, shape in shapes.items():
            self.offsets[key] = size
            size += -(-math.prod(shape) // ALIGN) * ALIGN
        self.size = size

    @property
    def n_layers(self) -> int:
        """Number of hidden layers."""
        return len(self.hidden)

    def views(self, flat) -> dict:
        """Named views into a (size,) array of any array module: writes go to the buffer."""
        return {key: flat[off:off + math.prod(self.shapes[key])].reshape(self.shapes[key])
                for key, off in self.offsets.items()}

    def xavier_init(self, rng: np.random.Generator) -> np.ndarray:
        """(size,) float32 parameters: Xavier-uniform weights, zero biases, zero padding."""
        flat = np.zeros(self.size, np.float32)
        for key, view in self.views(flat).items():
            if view.ndim == 2:
                # E and V map a width-N sparse vector to or from K: fan-in/out N and K either way
                fan_in, fan_out = view.shape[1], view.shape[0]
                bound = math.sqrt(6.0 / (fan_in + fan_out))
                view[:] = rng.uniform(-bound, bound, size=view.shape)
        return flat
