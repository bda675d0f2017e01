"""A training step's memory: every buffer a step uses, allocated once per fit at the size of the
largest batch there can be, and carved into named views of one allocation (as llm.c carves its
activations), so a step allocates nothing and its memory can be read off in one place.

    memory = StepMemory(ops, layout, "explicit", planner.geometry)
    memory.views["a1"]          # (B, K1), the input layer's activations
"""
from __future__ import annotations

import math

import numpy as np

from .common import Batch, Windows, pieces_stride
from .layout import NCAELayout
from .plan import PLAN_FIELDS, Geometry, plan_spec

ALIGN = 16            # bytes: every view starts float4-aligned


def _nbytes(shape, dtype) -> int:
    return -(-math.prod(shape) * np.dtype(dtype).itemsize // ALIGN) * ALIGN


def size_of(spec: dict) -> int:
    """Bytes of a buffer holding every {name: (shape, dtype)} of spec."""
    return sum(_nbytes(shape, dtype) for shape, dtype in spec.values())


def carve(buffer, spec: dict) -> dict:
    """Named views of spec's shapes and dtypes into a uint8 buffer of size_of(spec) bytes (of any
    array module), in spec's order."""
    views, offset = {}, 0
    for name, (shape, dtype) in spec.items():
        n = math.prod(shape) * np.dtype(dtype).itemsize
        views[name] = buffer[offset:offset + n].view(dtype).reshape(shape)
        offset += _nbytes(shape, dtype)
    return views


def pack_plan(plan, buffer) -> None:
    """Write an epoch plan into a uint8 buffer laid out as a step memory's plan buffers (a host
    buffer: the memory's own on the CPU, a pinned one that one copy moves to the GPU)."""
    for name, view in carve(buffer, plan_spec_of(plan)).items():
        view[...] = getattr(plan, name)


def plan_spec_of(plan) -> dict:
    return {name: (getattr(plan, name).shape, np.int32) for name in PLAN_FIELDS}


def step_spec(layout: NCAELayout, feedback: str, g: Geometry, dtype, windowed: bool,
              sharded: bool = False) -> dict:
    """{name: (shape, dtype)} of every buffer of a step, in the order they are laid out. A
    column shard's step (sharded) keeps the last hidden layer's gradient and the row losses,
    which the ranks add up in one collective, side by side in one buffer: `exchange`."""
    B, cap, N, top = g.batch_size, g.max_entries, layout.n_cols, layout.n_layers
    i32, f32 = np.int32, np.float32
    spec = dict(plan_spec(g))                     # the epoch's plan: first, one copy an epoch
    spec["losses"] = ((g.steps,), f32)            # the epoch's loss of each step
    spec.update({                                 # the batch, cut into place by cut_batch
        "indptr": ((B + 1,), i32), "cols": ((cap,), i32), "vals": ((cap,), f32),
        "keep": ((cap,), np.uint8), "entry_rows": ((cap,), i32), "batch_col_order": ((cap,), i32),
        "row_weight": ((B,), f32), "row_entries": ((B,), i32)})
    for layer, K in enumerate(layout.hidden, 1):  # each hidden layer's output and its gradient
        spec[f"a{layer}"] = ((B, K), dtype)
        if not (sharded and layer == top):
            spec[f"da{layer}"] = ((B, K), dtype)  # dL/da, turned into dL/d(pre-activation)
    if feedback == "explicit":
        spec["g"] = ((cap,), dtype)               # d loss / d out at each entry
    else:
        spec["z"] = ((B, N), dtype)               # a V^T: the logits before the bias
        spec["dout"] = ((B, N), dtype)
    if sharded:                                   # da{top} (B, K_top), then row_loss (B,)
        spec["exchange"] = ((B * (layout.hidden[-1] + 1),), dtype)
    else:
        spec["row_loss"] = ((B,), dtype)
    if windowed:                                  # the batch's windows, cut from the plan,
        spec["window_sizes"] = ((2,), i32)
        spec["pieces"] = ((2 * g.max_windows, pieces_stride(max(layout.hidden))), f32)
        spec["arrivals"] = ((g.max_windows,), i32)   # and what windows sharing a segment leave
    return spec


class StepMemory:
    """The buffers of a fit's training steps on one backend (see the module's docstring)."""

    def __init__(self, ops, layout: NCAELayout, feedback: str, geometry: Geometry,
                 dtype=np.float32, sharded: bool = False):
        self.ops, self.geometry = ops, geometry
        windowed = getattr(ops, "windowed", False)
        self.spec = step_spec(layout, feedback, geometry, dtype, windowed, sharded)
        self.buffer = ops.xp.zeros(size_of(self.spec), np.uint8)
        self.views = carve(self.buffer, self.spec)
        v = self.views
        if sharded:
            B, K = geometry.batch_size, layout.hidden[-1]
            v[f"da{layout.n_layers}"] = v["exchange"][:B * K].reshape(B, K)
            v["row_loss"] = v["exchange"][B * K:]
        self.plan_bytes = self.buffer[:size_of(plan_spec(geometry))]    # what load_plan fills
        self.step = v["header"][:1]               # the step being taken, on the device
        self.acts = [v[f"a{layer}"] for layer in range(1, len(layout.hidden) + 1)]
        self.das = [v[f"da{layer}"] for layer in range(1, len(layout.hidden) + 1)]
        self.windows = (Windows(0, 0, v["window_sizes"], v["pieces"], v["arrivals"],
                                geometry.max_entries, geometry.max_windows)
                        if windowed else None)
        self.warm = False         # a graph-replayed step has run uncaptured (loop.run_epoch)
        self.graph = None         # its step, captured for replay (loop.run_epoch)

    def __getattr__(self, name):
        try:
            return self.__dict__["views"][name]
        except KeyError:
            raise AttributeError(name) from None

    def batch(self, entries: int, windows=(0, 0)) -> Batch:
        """The batch buffers as a Batch of `entries` entries, in windows of (rows, columns)
        entries where the memory has windows (views: nothing is copied)."""
        v = self.views
        w = self.windows and self.windows._replace(rows=int(windows[0]), columns=int(windows[1]))
        return Batch(v["indptr"], v["cols"][:entries], v["vals"][:entries],
                     v["keep"][:entries], v["entry_rows"][:entries],
                     v["batch_col_order"][:entries], v["row_weight"], v["row_entries"], w)

    def describe(self) -> str:
        """One line a buffer: name, shape, dtype, MiB."""
        lines = [f"{name:16} {str(shape):22} {np.dtype(dtype).name:8} "
                 f"{_nbytes(shape, dtype) / 2**20:10.2f} MiB"
                 for name, (shape, dtype) in self.spec.items()]
        return "\n".join(lines + [f"{'total':48} {self.buffer.nbytes / 2**20:10.2f} MiB"])
