"""CUDA backend: the ops of ops/reference.py as the hand-written kernels of kernels/*.cu.

The kernels are one CUDA C source compiled at run time by CuPy's NVRTC (each file behind a
#line directive, so a compile error names the .cu file and line), one module per device,
cached. `KernelOps` holds the launchers: the same names, argument order and semantics as
ops/cpu.py, over an array module and a kernel launcher. `backend()` binds them to CuPy and the
current device. Tests also bind them to numpy and a CPU emulation of the same kernel sources.

Every kernel is launched with blocks of BLOCK threads (kernels/common.cuh).
"""
from __future__ import annotations

import functools
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from . import ledger
from .common import Batch, CSR, dropout_stream, dropout_threshold

BLOCK = 256                 # kernels/common.cuh: BLOCK
MAX_TOPK = 1024             # kernels/topk.cu: MAX_TOPK
MAX_GRID = 65_535 * 8       # grid-stride kernels (adam): enough blocks to fill any GPU

# The package data in an installed wheel, or kernels/ beside the package in a checkout.
_PACKAGE = Path(__file__).resolve().parent.parent
KERNEL_DIR = next(d for d in (_PACKAGE / "kernels", _PACKAGE.parent / "kernels") if d.is_dir())
KERNEL_FILES = ("dropout_keep.cu", "cut_batch.cu", "gather_forward.cu", "scatter_backward.cu",
                "sparse_output.cu", "reweighted_error.cu", "adam.cu", "rank_heldout.cu",
                "topk.cu")
COMPILE_OPTIONS = ("-std=c++17", f"-I{KERNEL_DIR}")


def module_source() -> str:
    """All kernels as one translation unit; #line keeps errors pointing at the .cu files."""
    return "".join(f'#line 1 "{KERNEL_DIR / name}"\n{(KERNEL_DIR / name).read_text()}\n'
                   for name in KERNEL_FILES)


def _blocks(n: int) -> int:
    return -(-n // BLOCK)


def _uniform(n: int, per_block: int = BLOCK) -> np.ndarray:
    """Work of each block when n items are dealt out per_block at a time."""
    work = np.full(-(-n // per_block), per_block, np.float64)
    if len(work):
        work[-1] = n - per_block * (len(work) - 1)
    return work


def _check(dtype, *arrays) -> None:
    # A kernel reads raw memory: a float64 or int64 array here would be misread, not refused.
    for a in arrays:
        if a.dtype != dtype or not a.flags.c_contiguous:
            raise TypeError(f"kernel argument of dtype {a.dtype}, shape {a.shape}: "
                            f"needs C-contiguous {np.dtype(dtype)}")


class KernelOps:
    """The ops over `xp` (cupy, or numpy for the emulator) and launch(kernel, grid, args)."""

    name = "gpu"
    max_topk = MAX_TOPK       # topk's largest M; callers rank on the host beyond it

    def __init__(self, xp, launch, to_host):
        self.xp, self._bound_launch, self.to_host = xp, launch, to_host

    def _launch(self, kernel: str, grid: int, args: tuple, work=None) -> None:
        """Launch `kernel` on `grid` blocks; work() -> each block's work (entries x K), asked
        only when a ledger is counting."""
        if ledger._ACTIVE is not None:
            with ledger.paused():
                block_work = _uniform(grid * BLOCK) if work is None else work()
            ledger._ACTIVE.kernel(kernel, block_work)
        self._bound_launch(kernel, grid, BLOCK, args)

    def _host(self, a) -> np.ndarray:
        return np.asarray(self.to_host(a))

    def to_device(self, a):
        return self.xp.asarray(a)

    def session(self):
        return nullcontext()

    # -----------------------------------------------------------------------------------------
    # batching: the host knows each batch's size from its copy of indptr, so it never waits

    def cut_batch(self, csr: CSR, rows: np.ndarray, batch_size: int) -> Batch:
        ledger.step_begins()
        xp, i32 = self.xp, np.int32
        n = len(rows)
        if not 0 < n <= batch_size:
            raise ValueError(f"a batch needs 1..{batch_size} rows, got {n}")
        lengths = csr.host_indptr[rows + 1] - csr.host_indptr[rows]
        b_indptr = np.zeros(batch_size + 1, i32)                    # (B+1,)
        np.cumsum(lengths, out=b_indptr[1:n + 1])
        b_indptr[n + 1:] = b_indptr[n]
        nnz = int(b_indptr[-1])
        row_weight = np.zeros(batch_size, np.float32)               # (B,)
        row_weight[:n] = 1.0 / n
        cols, entry_ids, entry_rows = (xp.empty(nnz, i32) for _ in range(3))
        vals = xp.empty(nnz, np.float32)
        d_indptr = xp.asarray(b_indptr)
        col_ptr = xp.full(nnz + 1, nnz, i32)      # runs past the distinct columns stay empty
        col_ids = xp.full(nnz, -1, i32)
        col_order = xp.empty(nnz, i32)
        if nnz:
            self._launch("cut_batch_fill_kernel", n, (
                cols, vals, entry_ids, entry_rows, csr.indptr, csr.indices, csr.data,
                xp.asarray(rows.astype(i32)), d_indptr, i32(n)), work=lambda: lengths)
            # unique keys (column, position): any sort gives the one stable column order
            key = cols.astype(np.int64) * nnz + xp.arange(nnz, dtype=np.int64)
            col_order[:] = xp.argsort(key)
            run_start = xp.empty(nnz, i32)
            self._launch("column_run_starts_kernel", _blocks(nnz),
                         (run_start, cols, col_order, i32(nnz)))
            run_index = xp.cumsum(run_start, dtype=i32)
            self._launch("column_runs_kernel", _blocks(nnz),
                         (col_ptr, col_ids, run_start, run_index, cols, col_order, i32(nnz)))
        return Batch(indptr=d_indptr, cols=cols, vals=vals, entry_ids=entry_ids,
                     entry_rows=entry_rows, col_order=col_order, col_ptr=col_ptr,
                     col_ids=col_ids, row_weight=xp.asarray(row_weight))

    # -----------------------------------------------------------------------------------------
    # the ops of DESIGN.md

    def dropout_keep(self, keep, entry_ids, seed, epoch, q):
        nnz = len(entry_ids)
        if nnz:
            self._launch("dropout_keep_kernel", _blocks(nnz), (
                keep, entry_ids, np.uint64(dropout_stream(seed, epoch)),
                np.uint32(dropout_threshold(q)), np.int32(nnz)))

    def gather_forward(self, a1, indptr, cols, vals, keep, E, b1, scale):
        _check(np.float32, a1, vals, E, b1)
        K = a1.shape[1]
        self._launch("gather_forward_kernel", a1.shape[0], (
            a1, indptr, cols, vals, keep, E, b1, np.float32(scale), np.int32(K)),
            work=lambda: np.diff(self._host(indptr)) * K)

    def scatter_backward(self, dE, db1, dpre1, indptr, cols, vals, keep, scale,
                         entry_rows, col_order, col_ptr, col_ids):
        _check(np.float32, dE, db1, dpre1, vals)
        B, K = dpre1.shape
        if len(col_ids):
            self._launch("scatter_backward_kernel", len(col_ids), (
                dE, dpre1, vals, keep, entry_rows, col_order, col_ptr, col_ids,
                np.float32(scale), np.int32(K)), work=lambda: np.diff(self._host(col_ptr)) * K)
        self._launch("bias_backward_kernel", _blocks(K), (db1, dpre1, np.int32(B), np.int32(K)),
                     work=lambda: _uniform(K) * B)

    def sparse_output_forward(self, yhat, a, V, c, indptr, cols, s, m_off):
        _check(np.float32, yhat, a, V, c)
        K = a.shape[1]
        self._launch("sparse_output_forward_kernel", a.shape[0], (
            yhat, a, V, c, indptr, cols, np.float32(s), np.float32(m_off), np.int32(K)),
            work=lambda: np.diff(self._host(indptr)) * K)

    def sparse_output_backward(self, da, dV, dc, row_loss, a, V, yhat, indptr, cols, vals, keep,
                               row_weight, alpha, beta, s, m_off,
                               entry_rows, col_order, col_ptr, col_ids):
        _check(np.float32, da, dV, dc, row_loss, a, V, yhat, vals, row_weight)
        f = np.float32
        B, K = a.shape
        g = self.xp.empty(len(yhat), np.float32)                    # (nnz,) d loss / d out
        self._launch("sparse_output_backward_rows_kernel", B, (
            da, row_loss, g, V, yhat, indptr, cols, vals, keep, row_weight,
            f(alpha), f(beta), f(s), f(m_off), np.int32(K)),
            work=lambda: np.diff(self._host(indptr)) * (K + 1))
        if len(col_ids):
            self._launch("sparse_output_backward_cols_kernel", len(col_ids), (
                dV, dc, g, a, entry_rows, col_order, col_ptr, col_ids, np.int32(K)),
                work=lambda: np.diff(self._host(col_ptr)) * (K + 1))

    def reweighted_error(self, dout, row_loss, out, indptr, cols, weights, row_weight):
        _check(np.float32, dout, row_loss, out, weights, row_weight)
        N = out.shape[1]
        self._launch("reweighted_error_kernel", out.shape[0], (
            dout, row_loss, out, indptr, cols, weights, row_weight, np.int32(N)),
            work=lambda: N + np.diff(self._host(indptr)))

    def adam(self, params, m, v, grads, lr, beta1, beta2, eps, weight_decay, step):
        _check(np.float32, params, m, v, grads)
        # the scalars folded exactly as ops/cpu.py folds them
        f = np.float32
        bc1, bc2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
        n = len(params)
        grid = min(_blocks(n), MAX_GRID)
        self._launch("adam_kernel", grid, (
            params, m, v, grads, f(lr / bc1), f(beta1), f(1.0 - beta1), f(beta2),
            f(1.0 - beta2), f(1.0 / np.sqrt(bc2)), f(eps), f(weight_decay), np.int64(n)),
            work=lambda: _uniform(n, -(-n // grid)))

    def rank_heldout(self, ranks, scores, heldout, excl_indptr, excl_cols):
        _check(np.float32, scores)
        _check(np.int32, ranks, heldout)
        self._launch("rank_heldout_kernel", scores.shape[0], (
            ranks, scores, heldout, excl_indptr, excl_cols, np.int32(scores.shape[1])))

    def topk(self, top_idx, top_vals, scores, excl_indptr, excl_cols):
        _check(np.float32, scores, top_vals)
        B, M = top_idx.shape
        if not 0 < M <= MAX_TOPK:
            raise ValueError(f"topk takes 1..{MAX_TOPK} columns per row, got {M}")
        masked = scores.copy()                                      # (B, N)
        N = np.int32(scores.shape[1])
        self._launch("mask_excluded_kernel", B, (masked, excl_indptr, excl_cols, N))
        self._launch("topk_kernel", B, (top_idx, top_vals, masked, N, np.int32(M)))


@functools.lru_cache(maxsize=None)
def _module(device_id: int):
    import cupy
    with cupy.cuda.Device(device_id):
        return cupy.RawModule(code=module_source(), options=COMPILE_OPTIONS)


def backend() -> KernelOps:
    """The ops on the current CUDA device, its kernels compiled on first use."""
    import cupy

    def launch(kernel: str, grid: int, block: int, args: tuple) -> None:
        _module(cupy.cuda.runtime.getDevice()).get_function(kernel)((grid,), (block,), args)

    return KernelOps(cupy, launch, cupy.asnumpy)
