"""Each hand-written kernel next to what a user would otherwise call for the same op, on the first
training step of each benchmark shape's synthetic data, with its achieved GB/s against the memory
bandwidth measured on the same device (ncae_cuda/ops/floors.py: on a GPU, its copy rate).

    python -m bench.kernel_peers --device gpu --out bench/results/DATE-DEVICE-kernel-peers
    python -m bench.kernel_peers --device cpu --quick --out /tmp/kp     # a smoke test

Each op, ours against what a user would otherwise call:

- gather_forward: the row-window kernel against tanh(X @ E + b1), CSR times dense (cuSPARSE
  SpMM through cupyx.scipy.sparse; scipy on the CPU);
- sparse_output_forward: the row-window kernel against s * tanh((a[rows] * V[cols]).sum(1) +
  c[cols]) + m, a gathered dot product (SDDMM) in CuPy (numpy);
- scatter_backward: the column-window kernel against the weight gradient of torch's
  embedding_bag (mode sum, per-sample weights);
- adam: the fused kernel against torch.optim.Adam(fused=True) on a buffer of the model's
  parameter count.

Ours adds into its gradient and Adam zeroes the gradient it read (the trainer needs both); the
peers write a fresh gradient and only step. Every pair is first checked against
ops/reference.py in float64 on the same inputs, then timed: on the GPU by CUDA events on the
default stream, where everything here runs (torch's kernels too), on the CPU by the wall
clock; the median of --repeats after warm-up. Writes kernel_peers.json and .md under --out,
with the device, commit and date, again after each shape (a time limit keeps the shapes it
finished); torch's peers are left out, and said so, where torch is not installed.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from bench.cli import check_devices, names, out_folder, said_when_interrupted, write_results
from bench.epoch_time import ceilings, commit
from bench.launches import SHAPES, quick_mark
from bench.timing import cpu_seconds, gpu_seconds
from dev.cuda.run import first_step
from ncae_cuda import cli, ops
from ncae_cuda.data import datasets
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import adam_state
from ncae_cuda.ops.floors import op_work
from ncae_cuda.ops.layout import NCAELayout

SCALE = 2.0                              # 1 / (1 - q): the kept inputs' scale
S, M_OFF = 2.0, 3.0                      # the explicit output's scale and offset
ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-3)
RTOL = 1e-4      # of ||got - want|| / ||want||: float32 sums of hundreds of terms land near 1e-6
QUICK = ("synthetic-tiny", (12,))        # data set and hidden widths of --quick


@dataclass
class Step:
    """The first training step of a shape, on the backend, and what its peers run on."""
    backend: object
    batch: object                        # ops.common.Batch on the device
    host: object                         # its host copy, values in float64
    N: int                               # columns
    K: int                               # hidden width
    hidden: tuple
    torch: object                        # torch.device, or None where torch is not installed
    rng: np.random.Generator

    @property
    def xp(self):
        return self.backend.xp

    def on(self, *arrays):
        return [self.backend.to_device(a) for a in arrays]

    def csr(self):
        """The batch as the B x N CSR matrix of its kept inputs, times the scale: what SpMM
        multiplies (cupyx.scipy.sparse on the GPU, scipy on the CPU)."""
        h = self.host
        data = (h.vals * h.keep * SCALE).astype(np.float32)
        shape = (len(h.row_weight), self.N)
        if self.backend.name == "gpu":
            import cupyx.scipy.sparse as sparse
        else:
            import scipy.sparse as sparse
        return sparse.csr_matrix(tuple(self.on(data, h.cols, h.indptr)), shape=shape)

    def tensors(self, *arrays):
        import torch
        return [torch.tensor(a, device=self.torch) for a in arrays]     # copies: never shared


@dataclass
class Pair:
    """Ours and a peer: each run() does the op once; result() is ours's output after a run."""
    op: str
    peer: str
    ours: Callable[[], object]
    result: Callable[[], object]
    theirs: Callable[[], object]          # returns its output
    expect: np.ndarray                    # the reference's output, float64
    counts: dict                          # ncae_cuda.ops.floors.op_work's sizes


def _sizes(step: Step) -> dict:
    cols = step.host.cols
    return dict(B=len(step.host.row_weight), N=step.N, K=step.K, nnz=len(cols),
                U=len(np.unique(cols)))


def gather_forward(step: Step) -> Pair:
    B, N, K, xp = len(step.host.row_weight), step.N, step.K, step.xp
    E = step.rng.normal(0, 0.05, (N, K)).astype(np.float32)
    b1 = step.rng.normal(0, 0.05, K).astype(np.float32)
    expect = np.empty((B, K))
    ref.gather_forward(expect, step.host, E.astype(np.float64), b1.astype(np.float64), SCALE)
    a1, (d_E, d_b1), X = xp.empty((B, K), np.float32), step.on(E, b1), step.csr()
    return Pair("gather_forward", "CSR x dense (SpMM), + b1, tanh",
                lambda: step.backend.gather_forward(a1, step.batch, d_E, d_b1, SCALE),
                lambda: a1, lambda: xp.tanh(X @ d_E + d_b1), expect, _sizes(step))


def sparse_output_forward(step: Step) -> Pair:
    B, N, K, xp = len(step.host.row_weight), step.N, step.K, step.xp
    a = np.tanh(step.rng.normal(0, 1, (B, K))).astype(np.float32)
    V = step.rng.normal(0, 0.05, (N, K)).astype(np.float32)
    c = step.rng.normal(0, 0.05, N).astype(np.float32)
    expect = np.empty(len(step.host.cols))
    ref.sparse_output_forward(expect, *(x.astype(np.float64) for x in (a, V, c)), step.host, S,
                              M_OFF)
    yhat, (d_a, d_V, d_c) = xp.empty(len(expect), np.float32), step.on(a, V, c)
    rows, cols = step.batch.entry_rows, step.batch.cols
    return Pair("sparse_output_forward", "gathered dot (SDDMM): (a[rows] * V[cols]).sum(1)",
                lambda: step.backend.sparse_output_forward(yhat, d_a, d_V, d_c, step.batch, S,
                                                           M_OFF),
                lambda: yhat,
                lambda: S * xp.tanh((d_a[rows] * d_V[cols]).sum(1) + d_c[cols]) + M_OFF,
                expect, _sizes(step))


def scatter_backward(step: Step) -> Pair:
    import torch
    B, N, K, h = len(step.host.row_weight), step.N, step.K, step.host
    dpre1 = step.rng.normal(0, 1, (B, K)).astype(np.float32)
    expect = np.zeros((N, K))
    ref.scatter_backward(expect, dpre1.astype(np.float64), h, SCALE)
    dE, (d_dpre1,) = step.xp.zeros((N, K), np.float32), step.on(dpre1)
    weight = torch.zeros((N, K), device=step.torch, requires_grad=True)
    cols, offsets, weights, grad = step.tensors(
        h.cols.astype(np.int64), h.indptr[:-1].astype(np.int64),
        (h.vals * h.keep * SCALE).astype(np.float32), dpre1)
    bags = torch.nn.functional.embedding_bag(cols, weight, offsets, mode="sum",
                                             per_sample_weights=weights)      # (B, K)
    return Pair("scatter_backward", "torch embedding_bag's weight gradient",
                lambda: step.backend.scatter_backward(dE, d_dpre1, step.batch, SCALE),
                lambda: dE,
                lambda: torch.autograd.grad(bags, weight, grad, retain_graph=True)[0],
                expect, _sizes(step))


def adam(step: Step) -> Pair:
    import torch
    P = NCAELayout(step.N, step.hidden).size                  # the whole model's flat buffer
    p0, g = (step.rng.normal(0, 1, P).astype(np.float32) for _ in range(2))
    expect = [p0.astype(np.float64), np.zeros(P), np.zeros(P)]
    ref.adam(*expect, g.astype(np.float64), np.array([0, 0]), *ADAM.values())
    state = step.on(p0, np.zeros(P, np.float32), np.zeros(P, np.float32), g)
    counter = step.backend.to_device(adam_state())
    param = torch.nn.Parameter(*step.tensors(p0))
    param.grad = step.tensors(g)[0]
    optimizer = torch.optim.Adam([param], lr=ADAM["lr"], betas=(ADAM["beta1"], ADAM["beta2"]),
                                 eps=ADAM["eps"], weight_decay=ADAM["weight_decay"], fused=True)

    def theirs():
        with torch.no_grad():
            optimizer.step()
        return param.detach()
    return Pair("adam", "torch.optim.Adam(fused=True)",
                lambda: step.backend.adam(*state, counter, *ADAM.values()),
                lambda: state[0], theirs, expect[0], dict(P=P))


PAIRS = (gather_forward, sparse_output_forward, scatter_backward, adam)
NEEDS_TORCH = {scatter_backward, adam}


def _host(x) -> np.ndarray:
    if hasattr(x, "detach"):                                  # a torch tensor
        return x.detach().cpu().numpy()
    return np.asarray(x.get() if hasattr(x, "get") else x)


def _close(name: str, got, want: np.ndarray) -> None:
    error = np.linalg.norm(_host(got).astype(np.float64) - want) / np.linalg.norm(want)
    if not error <= RTOL:                                     # NaN fails too
        raise AssertionError(f"{name}: relative error {error:.3g} against the reference "
                             f"(allowed {RTOL:g})")


def measure(pair: Pair, seconds: Callable, bandwidth: float) -> dict:
    pair.ours()
    _close(f"{pair.op} (ours)", pair.result(), pair.expect)
    _close(f"{pair.op} ({pair.peer})", pair.theirs(), pair.expect)
    work = op_work(pair.op, **pair.counts)
    ours, theirs = seconds(pair.ours), seconds(pair.theirs)
    return {"op": pair.op, "peer": pair.peer, "bytes": work.bytes, "seconds": ours,
            "gb_per_s": work.bytes / ours / 1e9, "of_bandwidth": work.bytes / ours / bandwidth,
            "peer_seconds": theirs, "peer_gb_per_s": work.bytes / theirs / 1e9,
            "peer_over_ours": theirs / ours}


def table(result: dict) -> list[str]:
    """The markdown table of a result (the README's too: bench/report.py)."""
    lines = [f"| shape | op | ours us | GB/s | of bandwidth "
             f"({result['bandwidth_gb_s']:.0f} GB/s) | library alternative | its us | "
             "its time / ours |",
             "|---|---|---:|---:|---:|---|---:|---:|"]
    for name, rows in result["shapes"].items():
        lines += [f"| {name} | {r['op']} | {r['seconds'] * 1e6:.1f} | {r['gb_per_s']:.1f} | "
                  f"{r['of_bandwidth']:.0%} | {r['peer']} | {r['peer_seconds'] * 1e6:.1f} | "
                  f"{r['peer_over_ours']:.2f}x |" for r in rows]
    return lines


def _torch_device(device: str):
    if device == "cpu":
        # OpenMP threads that spin after torch's ops would take the cores from ours (Numba's
        # own pool): measured here, a 0.2 ms gather ran at 7 ms right after torch's Adam
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
    except ImportError:
        return None
    return torch.device("cuda" if device == "gpu" else "cpu")


def markdown(result: dict) -> str:
    """kernel_peers.md: the device and versions, then the table."""
    return "\n".join([f"{result['device']}, commit {result['commit']}, {result['date']}; torch "
                      f"{result['torch']}" + quick_mark(result), "", *table(result)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "gpu"), default="gpu" if ops.HAS_CUDA else "cpu",
                   help="the backend of our kernels, torch's beside them on the same device "
                        "(default: gpu where there is one, else cpu)")
    p.add_argument("--shapes", type=names(SHAPES), default=",".join(SHAPES),
                   help="comma-separated, of: " + ", ".join(SHAPES) + " (default: all)")
    p.add_argument("--repeats", type=cli.count, default=20,
                   help="timed runs per op (median) (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="tiny data: a smoke test")
    p.add_argument("--out", type=Path, required=True, help="folder for kernel_peers.json and .md")
    args = p.parse_args(argv)
    check_devices(p, [args.device])
    out_folder(p, args.out)
    with said_when_interrupted(args.out, "kernel_peers"):
        backend = ops.get_backend(args.device)
        measured = ceilings(args.device, args.quick)
        timer = gpu_seconds if args.device == "gpu" else cpu_seconds
        seconds = lambda fn: timer(fn, repeats=args.repeats)                  # noqa: E731
        torch_device = _torch_device(args.device)
        result = {"device": measured.device, "commit": commit(),
                  "date": datetime.date.today().isoformat(), "quick": args.quick,
                  "bandwidth_gb_s": measured.bandwidth / 1e9,
                  "torch": "installed" if torch_device else "not installed: its peers left out",
                  "shapes": {}}
        for name in args.shapes:
            dataset, feedback, based, hidden = SHAPES[name]
            if args.quick:
                dataset, hidden = QUICK
            N, batch, host = first_step(backend, datasets.load(dataset), based, feedback, hidden[0])
            step = Step(backend, batch, host._replace(vals=host.vals.astype(np.float64)), N,
                        hidden[0], hidden, torch_device, np.random.default_rng(0))
            result["shapes"][name] = [measure(make(step), seconds, measured.bandwidth)
                                      for make in PAIRS if torch_device or make not in NEEDS_TORCH]
            write_results(args.out, "kernel_peers", result, markdown(result),   # after each shape
                          (len(result["shapes"]), len(args.shapes), "shapes measured"))
        print(markdown(result))
        return 0


if __name__ == "__main__":
    sys.exit(main())
