"""Kernel versions side by side (dev/cuda/<op>.cu, as llm.c's dev/cuda keeps them): each is
checked against ncae_cuda/ops/reference.py on a training batch of a benchmark shape's
synthetic data (the first step of an epoch, uneven rows and all), then timed on a GPU.

    python -m dev.cuda.run gather_forward --shape ml10m        # on a GPU: check, then time
    python -m dev.cuda.run scatter_backward --device emulated  # no GPU: check only (small data)

Version 1 of each op is the first draft, kept in dev/cuda/<op>.cu; the last is the kernel in
use, launched by ncae_cuda/ops/gpu.py. Times are medians of 20 launches after warm-up (CUDA
events), beside the GB/s of the op's minimum traffic (bench/floors.py).
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np

from ncae_cuda import datasets, ops
from ncae_cuda.layout import NCAELayout
from ncae_cuda.memory import StepMemory
from ncae_cuda.ops import gpu, reference as ref
from ncae_cuda.ops.common import Batch, CSR
from ncae_cuda.ops.emulator import EmulatedDevice, build, emulated_backend
from ncae_cuda.plan import Planner, Schedule

from bench.floors import op_work
from bench.launches import SHAPES
from bench.timing import gpu_seconds

HERE = Path(__file__).resolve().parent
OPS = ("gather_forward", "scatter_backward")


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


def versions(op: str, backend, launch1):
    """[(name, run(out, *inputs))] of the op's versions on the backend."""
    B = gpu.BLOCK
    if op == "gather_forward":
        def first(a1, batch, host, E, b1):
            launch1("gather_forward_kernel1", a1.shape[0], B, (
                a1, batch.indptr, batch.cols, batch.vals, batch.keep, E, b1, np.float32(2.0),
                np.int32(a1.shape[1])))
        return [("1: a block a row", first),
                ("2: windows (in use)", lambda a1, batch, host, E, b1:
                 backend.gather_forward(a1, batch, E, b1, 2.0))]

    def first(dE, batch, host, dpre1, run_ptr, run_cols):
        launch1("scatter_backward_kernel1", len(run_cols), B, (
            dE, dpre1, batch.vals, batch.keep, batch.entry_rows, batch.col_order, run_ptr,
            run_cols, np.float32(2.0), np.int32(dE.shape[1])))
    return [("1: a block a column's run", first),
            ("2: windows (in use)", lambda dE, batch, host, dpre1, *_:
             backend.scatter_backward(dE, dpre1, batch, 2.0))]


def inputs(op: str, backend, N: int, host: Batch, K: int, rng):
    """(output, the op's inputs on the device, the reference's output)."""
    B = len(host.row_weight)
    h64 = host._replace(vals=host.vals.astype(np.float64))
    if op == "gather_forward":
        E = rng.normal(0, 0.05, (N, K)).astype(np.float32)
        b1 = rng.normal(0, 0.05, K).astype(np.float32)
        expect = np.empty((B, K))
        ref.gather_forward(expect, h64, E.astype(np.float64), b1.astype(np.float64), 2.0)
        return (backend.xp.zeros((B, K), np.float32),
                [backend.to_device(x) for x in (E, b1)], expect)
    dpre1 = rng.normal(0, 1, (B, K)).astype(np.float32)
    expect = np.zeros((N, K))
    ref.scatter_backward(expect, dpre1.astype(np.float64), h64, 2.0)
    ordered = host.cols[host.col_order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    run_ptr = np.r_[starts, len(ordered)].astype(np.int32)
    return (backend.xp.zeros((N, K), np.float32),
            [backend.to_device(x) for x in (dpre1, run_ptr, ordered[starts].astype(np.int32))],
            expect)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("op", choices=OPS)
    p.add_argument("--shape", choices=tuple(SHAPES), default="ml10m")
    p.add_argument("--device", choices=("gpu", "emulated"),
                   default="gpu" if ops.HAS_CUDA else "emulated")
    args = p.parse_args(argv)
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
        out, device_inputs, expect = inputs(args.op, backend, N, host, K, rng)
        cols = host.cols
        work = op_work(args.op, B=len(host.row_weight), K=K, nnz=len(cols),
                       U=len(np.unique(cols)))
        lengths = np.diff(host.indptr)
        print(f"{args.op} on {dataset} ({args.shape} model, K={K}): {len(cols)} entries, rows "
              f"of {lengths.mean():.0f} on average and {lengths.max()} at most")
        for name, run in versions(args.op, backend, launch1):
            out[...] = 0
            run(out, batch, host, *device_inputs)
            error = np.abs(np.asarray(backend.to_host(out), np.float64) - expect).max()
            line = f"  {name:28} max error {error:.2e}"
            if args.device == "gpu":
                seconds = gpu_seconds(lambda: run(out, batch, host, *device_inputs))
                line += f" | {seconds * 1e6:9.1f} us | {work.bytes / seconds / 1e9:7.1f} GB/s"
            print(line, flush=True)
            if error > 1e-3 * max(1.0, np.abs(expect).max()):
                print(f"  {name}: does not match the reference", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
