"""Kernel versions side by side (dev/cuda/<op>.cu, as llm.c's dev/cuda keeps them): each is
checked against ncae_cuda/ops/reference.py on a training batch of a benchmark shape's
synthetic data (the first step of an epoch, uneven rows and all), then timed on a GPU.

    python -m dev.cuda.run gather_forward --shape ml10m        # on a GPU: check, then time
    python -m dev.cuda.run scatter_backward --device emulated  # no GPU: check only (small data)
    python -m dev.cuda.run adam --shape lastfm                 # one step over the shape's model

Version 1 of each op is the first draft, kept in dev/cuda/<op>.cu; the last is the kernel in
use, launched by ncae_cuda/ops/gpu.py. The window kernels' version 2 is the kernel in use on
the windows of the first rule (first_window_sizes), against the plan's (plan.window_sizes). Times
are medians of 20 launches after warm-up (CUDA events), beside the GB/s of the op's minimum
traffic (ncae_cuda/ops/floors.py).
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np

from bench.cli import check_devices
from bench.launches import SHAPES
from bench.timing import gpu_seconds
from ncae_cuda import ops
from ncae_cuda.data import datasets
from ncae_cuda.ops import gpu
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR, THREADS_PER_SM, Batch, adam_state, pieces_stride
from ncae_cuda.ops.emulator import EmulatedDevice, build, emulated_backend
from ncae_cuda.ops.floors import op_work
from ncae_cuda.ops.layout import NCAELayout
from ncae_cuda.ops.memory import StepMemory
from ncae_cuda.ops.plan import MIN_WINDOW, Planner, Schedule

HERE = Path(__file__).resolve().parent
OPS = ("gather_forward", "scatter_backward", "adam")
# weight decay large enough that its term shows in the check (at 1e-3 a wrong sign moved the
# step by 4e-4 of itself)
ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1)
ADAM_STEPS = 6                  # taken before the step that is checked
# Adam's buffers are views that start this many floats past a 16-byte boundary and hold the
# model's parameters but ADAM_SHORT (the layout pads its blocks to float4s): 3 elements before
# the first whole float4 and 3 after the last, which the float4 versions step one at a time
ADAM_OFFSET, ADAM_SHORT = 1, 2
FLOAT4 = 4                      # floats in a float4


def first_step(backend, data, based: str, feedback: str, K: int):
    """The first training step of epoch 1 of the data, cut on the backend, and its host copy."""
    m = data.to_csr(based, implicit=feedback == "implicit")
    csr = CSR.from_scipy(backend, m)
    planner = Planner(csr, np.flatnonzero(np.diff(m.indptr)).astype(np.int32),
                      Schedule(0, 128, 0.5))
    memory = StepMemory(backend, NCAELayout(m.shape[1], (K,)), feedback, planner.geometry)
    plan = planner.plan(1)
    backend.load_plan(memory, plan)
    batch = backend.cut_batch(memory, csr, plan, 0)
    host = Batch(*(np.asarray(backend.to_host(x)) for x in batch[:-1]))
    return m.shape[1], batch, host


def first_window_sizes(longest_row: int, batch_size: int) -> tuple[int, int]:
    """The windows of the window kernels' version 2 (until issue 24), over rows and over
    columns: over rows the smallest power of two C >= MIN_WINDOW that cuts the longest row
    into at most C/2 pieces (C about sqrt(2 x longest row)); over columns C >= B as well."""
    rows = MIN_WINDOW
    while 2 * (-(-longest_row // rows) + 1) > rows:
        rows *= 2
    return rows, max(rows, batch_size)


def in_first_windows(backend, batch: Batch, host: Batch, K: int) -> Batch:
    """The batch dealt out in the windows of first_window_sizes, with scratch for them."""
    sizes = first_window_sizes(int(np.diff(host.indptr).max()), len(host.row_weight))
    most = -(-len(host.cols) // min(sizes))
    return batch._replace(windows=batch.windows._replace(
        rows=sizes[0], columns=sizes[1], sizes=backend.to_device(np.int32(sizes)),
        pieces=backend.xp.zeros((2 * most, pieces_stride(K)), np.float32),
        arrivals=backend.xp.zeros(most, np.int32), most=most))


def versions(op: str, backend, launch1, first_windows: Batch | None):
    """[(name, run(out, *inputs))] of the op's versions on the backend."""
    B = gpu.BLOCK
    if op == "adam":
        a, f = ADAM, np.float32

        wave = backend.sms * THREADS_PER_SM // B           # blocks the GPU holds at once

        def version(kernel, grid):
            """Versions 1-2 take the counter (steps, blocks done), 4-5 the state (AdamState)."""
            def run(params, batch, host, m, v, grads, counter, state):
                n = len(params)
                launch1(kernel, grid(n), B, (
                    params, m, v, grads, counter if kernel == "adam_kernel1" else state,
                    np.float64(a["lr"]), np.float64(a["beta1"]), np.float64(a["beta2"]),
                    np.float64(1.0), np.int32(0), np.int32(0), f(a["beta1"]),
                    f(1 - a["beta1"]), f(a["beta2"]), f(1 - a["beta2"]), f(a["eps"]),
                    f(a["weight_decay"]), np.int64(n)))
            return run
        return [("1: corrections in every block", version("adam_kernel1", lambda n: -(-n // B))),
                ("2: 1 on one wave of blocks", version(
                    "adam_kernel1", lambda n: min(-(-n // B), wave))),
                ("3: corrections a step ahead (in use)",
                 lambda params, batch, host, m, v, grads, counter, state:
                 backend.adam(params, m, v, grads, state, *ADAM.values())),
                ("4: 3 a float4 a thread, one wave", version(
                    "adam_kernel4", lambda n: min(-(-n // (4 * B)), wave))),
                ("5: 4 on a block per BLOCK float4s", version(
                    "adam_kernel4", lambda n: -(-n // (4 * B))))]
    if op == "gather_forward":
        def first(a1, batch, host, E, b1):
            launch1("gather_forward_kernel1", a1.shape[0], B, (
                a1, batch.indptr, batch.cols, batch.vals, batch.keep, E, b1, np.float32(2.0),
                np.int32(a1.shape[1])))
        return [("1: a block a row", first),
                ("2: windows of the first rule", lambda a1, batch, host, E, b1:
                 backend.gather_forward(a1, first_windows, E, b1, 2.0)),
                ("3: windows of the plan (in use)", lambda a1, batch, host, E, b1:
                 backend.gather_forward(a1, batch, E, b1, 2.0))]

    def first(dE, batch, host, dpre1, run_ptr, run_cols):
        launch1("scatter_backward_kernel1", len(run_cols), B, (
            dE, dpre1, batch.vals, batch.keep, batch.entry_rows, batch.col_order, run_ptr,
            run_cols, np.float32(2.0), np.int32(dE.shape[1])))
    return [("1: a block a column's run", first),
            ("2: windows of the first rule", lambda dE, batch, host, dpre1, *_:
             backend.scatter_backward(dE, dpre1, first_windows, 2.0)),
            ("3: windows of the plan (in use)", lambda dE, batch, host, dpre1, *_:
             backend.scatter_backward(dE, dpre1, batch, 2.0))]


def _address(a) -> int:
    return a.data.ptr if hasattr(a.data, "ptr") else a.ctypes.data     # cupy's, numpy's


def partial_float4s(a) -> tuple[int, int]:
    """The elements of the float32 device array `a` before its first whole (16-byte aligned)
    float4 and after its last: those a float4 version steps one at a time."""
    head = min(-(_address(a) // a.itemsize) % FLOAT4, len(a))
    return head, (len(a) - head) % FLOAT4


def _past_boundary(backend, x: np.ndarray, offset: int):
    """x on the device, in a view that starts `offset` elements past a 16-byte boundary."""
    base = backend.xp.zeros(len(x) + FLOAT4, x.dtype)
    start = (offset - _address(base) // x.itemsize) % FLOAT4
    view = base[start:start + len(x)]
    view[...] = backend.to_device(x)
    return view


def inputs(op: str, backend, N: int, host: Batch, hidden: tuple, rng):
    """(output, the op's inputs on the device, the reference's output, reset(): the output
    and inputs as they were, before a version runs)."""
    B, K = len(host.row_weight), hidden[0]
    h64 = host._replace(vals=host.vals.astype(np.float64))
    if op == "adam":                # one step of the shape's model, at step ADAM_STEPS + 1
        P = NCAELayout(N, hidden).size - ADAM_SHORT
        start = [rng.normal(0, s, P).astype(np.float32) for s in (1.0, 0.1, 0.01, 1.0)]
        start[2] = np.abs(start[2])                                     # v >= 0
        expect = [x.astype(np.float64) for x in start[:3]]
        ref.adam(*expect, start[3].astype(np.float64), np.int32([ADAM_STEPS]), *ADAM.values())
        device = [_past_boundary(backend, x, ADAM_OFFSET) for x in start]  # params, m, v, grads
        start += [np.int32([ADAM_STEPS, 0]), adam_state(ADAM_STEPS)]   # versions 1-2, 3-5
        device += [backend.to_device(x) for x in start[4:]]

        def reset():
            for d, x in zip(device, start):
                d[...] = backend.to_device(x)
        return device[0], device[1:], expect[0], reset
    if op == "gather_forward":
        E = rng.normal(0, 0.05, (N, K)).astype(np.float32)
        b1 = rng.normal(0, 0.05, K).astype(np.float32)
        expect = np.empty((B, K))
        ref.gather_forward(expect, h64, E.astype(np.float64), b1.astype(np.float64), 2.0)
        out = backend.xp.zeros((B, K), np.float32)
        return out, [backend.to_device(x) for x in (E, b1)], expect, lambda: out.fill(0)
    dpre1 = rng.normal(0, 1, (B, K)).astype(np.float32)
    expect = np.zeros((N, K))
    ref.scatter_backward(expect, dpre1.astype(np.float64), h64, 2.0)
    ordered = host.cols[host.col_order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    run_ptr = np.r_[starts, len(ordered)].astype(np.int32)
    out = backend.xp.zeros((N, K), np.float32)
    return (out, [backend.to_device(x)
                  for x in (dpre1, run_ptr, ordered[starts].astype(np.int32))],
            expect, lambda: out.fill(0))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("op", choices=OPS, help="the op whose versions are compared")
    p.add_argument("--shape", choices=tuple(SHAPES), default="ml10m",
                   help="the benchmark shape whose first training batch the versions run on "
                        "(emulated: synthetic-tiny, trained as the shape is) (default: "
                        "%(default)s)")
    p.add_argument("--device", choices=("gpu", "emulated"),
                   default="gpu" if ops.HAS_CUDA else "emulated",
                   help="gpu: checked, then timed; emulated: no GPU needed, checked only, on "
                        "small data (default: gpu where there is one, else emulated)")
    args = p.parse_args(argv)
    if args.device == "gpu":
        check_devices(p, ["gpu"])
    path = HERE / f"{args.op}.cu"
    source = gpu.module_source([path])
    dataset, feedback, based, hidden = SHAPES[args.shape]
    if args.device == "gpu":
        import cupy
        backend = ops.get_backend("gpu")
        module = cupy.RawModule(code=source, options=gpu.COMPILE_OPTIONS)
        function = functools.cache(module.get_function)     # looked up once, not per launch

        def launch1(kernel, grid, block, args_):
            function(kernel)((grid,), (block,), args_)
    else:                        # small data: the emulator runs a thread per CUDA thread
        dataset, hidden = "synthetic-tiny", (12,)
        backend = emulated_backend()
        launch1 = EmulatedDevice(build(source=source), lambda k: True).launch
    K = hidden[0]
    with backend.session():
        N, batch, host = first_step(backend, datasets.load(dataset), based, feedback, K)
        rng = np.random.default_rng(0)
        out, device_inputs, expect, reset = inputs(args.op, backend, N, host, hidden, rng)
        first_windows = None
        if args.op == "adam":
            work = op_work("adam", P=len(out))
            head, tail = partial_float4s(out)
            print(f"adam on {dataset} ({args.shape} model, hidden "
                  f"{','.join(map(str, hidden))}): {len(out)} parameters, {head} of them before "
                  f"the first whole float4 and {tail} after the last, {backend.sms} SMs")
        else:
            cols = host.cols
            work = op_work(args.op, B=len(host.row_weight), K=K, nnz=len(cols),
                           U=len(np.unique(cols)))
            lengths = np.diff(host.indptr)
            first_windows = in_first_windows(backend, batch, host, K)
            print(f"{args.op} on {dataset} ({args.shape} model, K={K}): {len(cols)} entries, "
                  f"rows of {lengths.mean():.0f} on average and {lengths.max()} at most; "
                  f"windows over rows, columns: first rule {first_windows.windows[:2]}, plan's "
                  f"{batch.windows[:2]} for {backend.sms} SMs")
        for name, run in versions(args.op, backend, launch1, first_windows):
            reset()
            before = np.asarray(backend.to_host(out), np.float64)
            run(out, batch, host, *device_inputs)
            # the change made against the reference's: adam's step is some 1e-3 of the
            # parameters, so a tolerance on them passed a version that took no step
            change = expect - before
            error = np.abs(np.asarray(backend.to_host(out), np.float64) - before - change).max()
            line = f"  {name:38} max error {error:.2e}"
            if args.device == "gpu":
                seconds = gpu_seconds(lambda: run(out, batch, host, *device_inputs))
                line += f" | {seconds * 1e6:9.1f} us | {work.bytes / seconds / 1e9:7.1f} GB/s"
            print(line, flush=True)
            if error > 1e-3 * np.abs(change).max():
                print(f"  {name}: does not match the reference", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
