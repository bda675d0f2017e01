"""Lower bounds on time, from counting: the bytes an op or an epoch must move through memory and
the floating-point operations it must do, against the device's two ceilings measured on it (the
faster of a large copy and an in-place update; a large float32 matrix product). The larger of
bytes / bandwidth and FLOPs / rate is the floor; measured time over the floor says how far from
it we run.

Counts are minimums: each input read once and each output written once (a gradient row that
is accumulated is read and written once); a batch reads each distinct embedding row once.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ncae_cuda.ops.layout import NCAELayout

F32 = 4                 # bytes of a float32, an int32
ADAM_BYTES = 8 * F32    # per parameter and step: read p, m, v, g; write p, m, v; zero g (one
                        # pass: kernels/adam.cu zeroes the gradient it has read)


@dataclass(frozen=True)
class Work:
    bytes: float
    flops: float

    def __add__(self, other: Work) -> Work:
        return Work(self.bytes + other.bytes, self.flops + other.flops)

    def floor(self, ceilings: Ceilings, tf32: bool = False) -> float:
        """Seconds the work needs at least on the device with these ceilings; tf32: its
        products on TF32 (Config.matmul)."""
        return max(self.bytes / ceilings.bandwidth, self.flops / ceilings.product_rate(tf32))


@dataclass(frozen=True)
class Ceilings:
    device: str
    bandwidth: float    # bytes/s read plus written: the faster of a large copy and a large
                        # in-place update
    flops: float        # FLOP/s of a large float32 matrix product
    tf32_flops: float = math.inf    # of the same product on TF32 tensor cores, where measured
                                    # (a GPU's); unmeasured, the FLOPs bound nothing

    def product_rate(self, tf32: bool = False) -> float:
        return self.tf32_flops if tf32 else self.flops

    def recorded_tf32(self, unit: float = 1.0) -> float | None:
        """The TF32 rate in `unit`s of FLOP/s as a results file keeps it: null where unmeasured
        (JSON has no infinity); read back by tf32_rate."""
        return self.tf32_flops / unit if math.isfinite(self.tf32_flops) else None


def tf32_rate(recorded: float | None, unit: float = 1.0) -> float:
    """A TF32 rate a results file recorded (Ceilings.recorded_tf32, in `unit`s of FLOP/s) as
    Ceilings takes it: infinite, bounding nothing, where none was measured."""
    return recorded * unit if recorded else math.inf


def tf32_said(recorded_gflop_s: float | None) -> str:
    """The TF32 rate a results file recorded (Ceilings.recorded_tf32(1e9)), or its absence, in
    the words every table of ceilings gives it."""
    if recorded_gflop_s:
        return f"on TF32 {recorded_gflop_s:,.0f} GFLOP/s"
    return "on TF32 none measured, so a TF32 case's FLOPs bound nothing"


def measure_ceilings(xp, device: str, repeats: int = 5, small: bool = False,
                     tf32_product=None) -> Ceilings:
    """Both ceilings with the array module xp (numpy, or cupy on the current GPU). Bandwidth
    is the faster of a copy and an in-place update of one array: a CPU's copy also reads the
    lines it writes (write-allocate), which a copy's count leaves out, so on the CPU the update
    is the faster (2 cores of this project's AMD EPYC VM: 25 GB/s copying, 50 GB/s updating in
    place); a GPU writes whole lines, so the two should be close there (not yet measured). On
    the CPU both run on every core (Numba), as the training's memory-bound loops do: numpy's
    are one thread and read low. `small` (a benchmark's --quick, which checks the command, not
    the machine): arrays an eighth and a product a 64th the size, for figures in tenths of a
    second that a cache may flatter. tf32_product(out, a, b), where given (a GPU backend's gemm on
    TF32), measures the product's rate on TF32 too."""
    synchronize = getattr(getattr(xp, "cuda", None), "Device", None)
    sync = (lambda: synchronize().synchronize()) if synchronize else (lambda: None)

    def best(fn) -> float:
        fn()
        sync()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    n = (32 if small else 256) * 2**20 // F32               # 256 MiB: far beyond any cache
    src, dst = xp.ones(n, np.float32), xp.empty(n, np.float32)
    one = np.float32(1)
    if xp is np:
        copy, update = (lambda: _parallel_copy(dst, src)), (lambda: _parallel_scale(src, one))
    else:
        copy, update = (lambda: xp.copyto(dst, src)), (lambda: xp.multiply(src, one, out=src))
    bandwidth = 2 * n * F32 / min(best(copy), best(update))
    m = 1024 if small else 4096
    a = xp.asarray(np.random.default_rng(0).random((m, m), np.float32))
    flops = 2 * m ** 3 / best(lambda: a @ a)
    if tf32_product is None:
        return Ceilings(device, bandwidth, flops)
    out = xp.empty_like(a)
    return Ceilings(device, bandwidth, flops, 2 * m ** 3 / best(lambda: tf32_product(out, a, a)))


@njit(parallel=True, cache=True)
def _parallel_copy(dst, src):
    for i in prange(len(src)):
        dst[i] = src[i]


@njit(parallel=True, cache=True)
def _parallel_scale(a, s):
    for i in prange(len(a)):          # s a run-time argument: a constant 1.0 would be folded
        a[i] *= s


# ---------------------------------------------------------------------------------------------
# per op: B rows, N columns, K width, nnz entries of which U distinct columns

def op_work(op: str, B: int = 0, N: int = 0, K: int = 0, nnz: int = 0, U: int = 0,
            P: int = 0, M: int = 0) -> Work:
    entries = nnz * (F32 + F32 + 1)                          # cols, vals, keep
    if op == "dropout_keep":
        return Work(nnz * (F32 + 1), 0)
    if op == "cut_batch":                                    # copy the rows' entries, sort them
        return Work(nnz * 2 * (3 * F32) + nnz * 4 * F32, 0)
    if op == "gather_forward":                               # E rows in, a1 out
        return Work(U * K * F32 + entries + B * K * F32, 2 * nnz * K)
    if op == "scatter_backward":                             # dE rows read+written, dpre1 in
        return Work(2 * U * K * F32 + B * K * F32 + entries + nnz * 2 * F32, 2 * nnz * K + B * K)
    if op == "sparse_output_forward":                        # V rows and a in, yhat out
        return Work(U * K * F32 + B * K * F32 + nnz * 3 * F32, 2 * nnz * K)
    if op == "sparse_output_backward":                       # V in; dV, da read+written
        return Work(3 * U * K * F32 + 3 * B * K * F32 + entries + nnz * 4 * F32, 4 * nnz * K)
    if op == "reweighted_error":                             # out in, dout out, weights in
        return Work(2 * B * N * F32 + N * F32 + nnz * F32, 8 * B * N)
    if op == "multinomial_error":                            # out in twice, dout out
        return Work(3 * B * N * F32 + 2 * N * F32 + nnz * F32, 10 * B * N)
    if op == "adam":
        return Work(ADAM_BYTES * P, 12 * P)
    if op == "rank_heldout":
        return Work(B * N * F32 + nnz * F32, B * N)
    if op == "topk":                                         # copy, mask, 5 passes to select
        return Work(7 * B * N * F32 + 2 * B * M * F32, 5 * B * N)
    raise ValueError(f"no count for op {op!r}")


# ---------------------------------------------------------------------------------------------
# per training epoch

def epoch_work(m, rows: np.ndarray, batch_size: int, hidden: tuple[int, ...], feedback: str,
               seed: int = 0) -> Work:
    """The work of one training epoch over `rows` of the rows x columns CSR m (scipy), in
    batches of batch_size of a seeded shuffle: each step's sparse ops, dense layers and the
    exact dense Adam over every parameter."""
    N = m.shape[1]
    P = NCAELayout(N, hidden).size                           # every parameter, Adam's stream
    order = np.random.default_rng(seed).permutation(rows)
    total = Work(0, 0)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        cols = np.concatenate([m.indices[m.indptr[r]:m.indptr[r + 1]] for r in chunk])
        nnz, U, B = len(cols), len(np.unique(cols)), batch_size
        K1, KL = hidden[0], hidden[-1]
        step = (op_work("cut_batch", nnz=nnz) + op_work("dropout_keep", nnz=nnz)
                + op_work("gather_forward", B=B, K=K1, nnz=nnz, U=U)
                + op_work("scatter_backward", B=B, K=K1, nnz=nnz, U=U)
                + Work(ADAM_BYTES * P, 12 * P))
        for k_in, k_out in zip(hidden, hidden[1:]):          # forward and two backward products
            step += Work(3 * (k_in * k_out + 2 * B * (k_in + k_out)) * F32, 6 * B * k_in * k_out)
        if feedback == "explicit":
            step += (op_work("sparse_output_forward", B=B, K=KL, nnz=nnz, U=U)
                     + op_work("sparse_output_backward", B=B, K=KL, nnz=nnz, U=U))
        else:                                                # out = a V^T; dV, da products
            step += (Work(3 * (N * KL + B * N) * F32, 6 * B * N * KL)
                     + op_work("reweighted_error", B=B, N=N, nnz=nnz))
        total += step
    return total
