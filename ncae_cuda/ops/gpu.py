"""CUDA backend: the ops of ops/reference.py as the hand-written kernels of kernels/*.cu.

The kernels are one CUDA C source compiled at run time by CuPy's NVRTC (each file behind a
#line directive, so a compile error names the .cu file and line), the numbers it shares with
Python in kernels/device_numbers.cuh (ops/common.py's DEVICE_NUMBERS), one module per device,
each kernel looked up once. `KernelOps`
holds the launchers: the same names, argument order and semantics as ops/cpu.py, over a
device binding: `CupyDevice` on a GPU (`backend()`), or the CPU emulator (ops/emulator.py).

A training step launches the same kernels with the same arguments every time: what changes
from step to step (the step, its batch's size, Adam's step count, the dropout stream) is read
from device memory, the buffers are the step memory's (memory.py), and the work is dealt out
in windows of equal length, not by rows (kernels/common.cuh). Kernels over K-vectors run a
block per window with one warp per slab of K; the others BLOCK threads a block. Every launch
reports to a ledger (ops/ledger.py) when one is counting: its blocks' work, from its arguments
(ops/launch_work.py).
"""
from __future__ import annotations

import functools
import hashlib
import re
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import numpy as np

from . import cublas, ledger
from .common import (
    DEVICE_NUMBERS,
    KERNEL_DIR,
    MAX_WIDTH,
    Batch,
    Windows,
    adam_state,
    dropout_stream,
    dropout_threshold,
    pieces_stride,
    slabs,
)
from .launch_work import (
    adam_work,
    bias_backward_work,
    blocks,
    column_windows_work,
    cut_work,
    dense_rows_work,
    even,
    reads,
    row_windows_work,
    windows_even,
)
from .memory import pack_plan
from .plan import EpochPlan

# Whether fine-tuning replays each training step from a CUDA graph captured once (KernelOps.
# graphs; python -m ncae_cuda.train --cuda-graphs). Off until a GPU measurement shows it pays.
GRAPHS = False

BLOCK = DEVICE_NUMBERS["BLOCK"]
WARP = DEVICE_NUMBERS["WARP"]
UNROLL = DEVICE_NUMBERS["UNROLL"]
MAX_TOPK = DEVICE_NUMBERS["MAX_TOPK"]
MAX_GRID = 65_535 * 8       # grid-stride kernels (adam, bias_tanh): enough blocks for any GPU

KERNEL_FILES = ("dropout_keep.cu", "cut_batch.cu", "gather_forward.cu", "scatter_backward.cu",
                "sparse_output.cu", "reweighted_error.cu", "multinomial_error.cu", "dense.cu",
                "step_loss.cu", "adam.cu", "rank_heldout.cu", "topk.cu")
COMPILE_OPTIONS = ("-std=c++17", f"-I{KERNEL_DIR}")


def module_source(paths=tuple(KERNEL_DIR / name for name in KERNEL_FILES)) -> str:
    """The .cu files as one translation unit; #line keeps errors pointing at them. The first
    line is a digest of the headers they include: CuPy's cache of compiled modules is keyed by
    this text alone, and would hand back kernels built with an older header."""
    headers = "".join(p.read_text() for p in sorted(KERNEL_DIR.glob("*.cuh")))
    return (f"// headers {hashlib.sha256(headers.encode()).hexdigest()}\n"
            + "".join(f'#line 1 "{path}"\n{Path(path).read_text()}\n' for path in paths))


def _check(dtype, *arrays) -> None:
    # A kernel reads raw memory: a float64 or int64 array here would be misread, not refused.
    for a in arrays:
        if a.dtype != dtype or not a.flags.c_contiguous:
            raise TypeError(f"kernel argument of dtype {a.dtype}, shape {a.shape}: "
                            f"needs C-contiguous {np.dtype(dtype)}")


def _check_width(K: int) -> None:
    if K > MAX_WIDTH:
        raise ValueError(f"the GPU kernels take hidden widths up to {MAX_WIDTH}; got {K}")


class KernelOps:
    """The ops over a device binding (see the module's docstring)."""

    name = "gpu"
    max_topk = MAX_TOPK       # topk's largest M; callers rank on the host beyond it
    max_width = MAX_WIDTH     # the widest first and last hidden layers the kernels take
    windowed = True           # the step memory holds the windows' scratch

    def __init__(self, device):
        self.device, self.xp = device, device.xp
        self.sms = device.sms             # the SMs that launches are weighed against
        self.graphs = GRAPHS
        self._capturing = False   # launches sized for the largest batch, not this one

    def capture(self, fn):
        """fn() (a training step) captured, as a function that replays it; None where the
        device cannot capture. What changes from step to step is read from device memory, so
        the replays take the epoch's steps in turn; launches are sized for the largest batch."""
        self._capturing = True
        try:
            with ledger.paused():           # counted as launched; weighing would read memory
                replay = self.device.capture(fn)
        finally:
            self._capturing = False

        if replay is None:
            return None

        def step() -> None:
            ledger.step_begins()
            ledger.op("graph replay")
            replay()
        step.nodes = replay.nodes           # what the graph holds: {kind: count}
        step.dot = getattr(replay, "dot", None)
        return step

    def _entries(self, batch: Batch) -> int:
        """Entries the launches over the batch are sized for."""
        return batch.windows.capacity if self._capturing else len(batch.cols)

    def to_device(self, a):
        return self.device.to_device(a)

    def to_host(self, a) -> np.ndarray:
        return self.device.to_host(a)

    def session(self):
        return self.device.session()

    def _launch(self, kernel: str, grid: int, block: int, args: tuple, work=None,
                by_entries: bool = False) -> None:
        """Launch `kernel` on `grid` blocks of `block` threads; work() -> (busiest block's
        work, mean block's, serial tail), asked only when a ledger is counting (by default
        even, a read a thread); by_entries: the grid is sized by the batch's entries."""
        if ledger.counting():
            with ledger.paused():
                busiest, mean, tail = work() if work else (1.0, 1.0, reads(1))
            ledger.kernel(kernel, busiest, mean, grid / self.sms, tail, by_entries)
        self.device.launch(kernel, grid, block, args)

    def _host(self, a) -> np.ndarray:
        return np.asarray(self.to_host(a))

    # -----------------------------------------------------------------------------------------
    # batching: the host knows each batch's size from its plan, so it never waits

    def load_plan(self, memory, plan: EpochPlan) -> None:
        staging = getattr(memory, "staging", None)
        if staging is None:                               # once a fit: pinned host memory
            staging = memory.staging = self.device.pinned(memory.plan_bytes.nbytes)
        pack_plan(plan, staging)
        self.device.upload(memory.plan_bytes, staging)

    def cut_batch(self, memory, csr, plan: EpochPlan, step: int) -> Batch:
        ledger.step_begins()
        v, B = memory.views, plan.batch_size
        batch = memory.batch(plan.entries(step), plan.windows[step])
        self._cut(batch, v["header"], v["order"], v["batch_indptr"], v["windows"],
                  v["col_offsets"], v["col_order"], csr, len(plan.order), B)
        return batch

    def cut_rows(self, csr, rows) -> Batch:
        plan = EpochPlan.of_rows(csr.host_indptr, rows, csr.sms)
        xp, n, nnz = self.xp, len(plan.order), plan.entries(0)
        rows_C, columns_C = (int(C) for C in plan.windows[0])
        batch = Batch(xp.empty(n + 1, np.int32), xp.empty(nnz, np.int32),
                      xp.empty(nnz, np.float32), xp.empty(nnz, np.uint8),
                      xp.empty(nnz, np.int32), None, xp.empty(n, np.float32),
                      xp.empty(n, np.int32),
                      Windows(rows_C, columns_C, xp.empty(2, np.int32), None, None, nnz,
                              blocks(nnz, min(rows_C, columns_C))))
        d = [self.to_device(x) for x in (plan.header, plan.order, plan.batch_indptr,
                                         plan.windows, plan.col_offsets)]
        self._cut(batch, *d, None, csr, n, n)
        return batch

    def _scratch(self, batch: Batch, K: int) -> tuple:
        """(pieces, arrivals) of the batch's windows: a training batch's are its step
        memory's; an evaluation batch's are made here, for width K."""
        w = batch.windows
        if w.pieces is not None:
            return w.pieces, w.arrivals
        return (self.xp.zeros((2 * w.most, pieces_stride(K)), np.float32),
                self.xp.zeros(w.most, np.int32))

    def _cut(self, batch, header, order, batch_indptr, windows, col_offsets, epoch_col_order,
             csr, n_rows, B):
        nnz = self._entries(batch)
        self._launch("cut_batch_kernel", blocks(max(nnz, B + 1)), BLOCK, (
            batch.indptr, batch.cols, batch.vals, batch.keep, batch.entry_rows,
            batch.col_order, batch.row_weight, batch.row_entries, batch.windows.sizes, header,
            order, batch_indptr, windows, col_offsets, epoch_col_order, csr.indptr, csr.indices,
            csr.data, csr.first_entry, csr.row_entries, np.int32(n_rows), np.int32(B)),
            work=lambda: cut_work(max(nnz, B + 1)), by_entries=True)

    def step_loss(self, losses, step, row_loss, row_weight) -> None:
        _check(np.float32, losses, row_loss, row_weight)
        self._launch("step_loss_kernel", 1, BLOCK,
                     (losses, step, row_loss, row_weight, np.int32(len(row_weight))))

    # -----------------------------------------------------------------------------------------
    # the ops of docs/design.md

    def dropout_keep(self, keep, entry_ids, seed, epoch, q):
        nnz = len(entry_ids)
        self._launch("dropout_keep_kernel", blocks(nnz), BLOCK, (
            keep, entry_ids, np.uint64(dropout_stream(seed, epoch)),
            np.uint32(dropout_threshold(q)), np.int32(nnz)), work=lambda: even(nnz, BLOCK),
            by_entries=True)

    def _windows_launch(self, kernel: str, batch: Batch, K: int, args: tuple,
                        columns: bool = False, shared: bool = True) -> None:
        """A window kernel over the batch's entries in row order (or in column order): a block
        a window (as many as any batch has, while a step is captured), then the sizes B, K
        and the window's, on the device. shared: windows that share a segment leave pieces."""
        _check_width(K)
        w = batch.windows
        C, nnz = w.columns if columns else w.rows, len(batch.cols)

        def work():
            if not shared:
                return windows_even(nnz, C)
            if columns:
                return column_windows_work(self._host(batch.cols), self._host(batch.col_order),
                                            C)
            return row_windows_work(self._host(batch.indptr), C)
        self._launch(kernel, w.most if self._capturing else blocks(nnz, C), WARP * slabs(K),
                     args + (np.int32(len(batch.row_weight)), np.int32(K),
                             w.sizes[1:] if columns else w.sizes[:1]),
                     work=work, by_entries=True)

    def gather_forward(self, a1, batch, E, b1, scale):
        _check(np.float32, a1, E, *(() if b1 is None else (b1,)))
        self._windows_launch("gather_forward_kernel", batch, a1.shape[1], (
            a1, *self._scratch(batch, a1.shape[1]), batch.indptr, batch.cols, batch.vals,
            batch.keep, batch.entry_rows, E, b1, np.float32(scale)))

    def scatter_backward(self, dE, dpre1, batch, scale):
        _check(np.float32, dE, dpre1)
        w = batch.windows
        self._windows_launch("scatter_backward_kernel", batch, dE.shape[1], (
            dE, w.pieces, w.arrivals, dpre1, batch.indptr, batch.cols, batch.vals, batch.keep,
            batch.entry_rows, batch.col_order, np.float32(scale)), columns=True)

    def sparse_output_forward(self, yhat, a, V, c, batch, s, m_off, identity=False):
        _check(np.float32, yhat, a, V, c)
        self._windows_launch("sparse_output_forward_kernel", batch, a.shape[1], (
            yhat, a, V, c, batch.indptr, batch.cols, batch.entry_rows, np.float32(s),
            np.float32(m_off), np.int32(identity)), shared=False)

    def sparse_output_backward(self, da, dV, dc, row_loss, g, a, V, c, batch, alpha, beta, s,
                               m_off, identity=False, row_norm=1.0):
        _check(np.float32, da, dV, dc, row_loss, g, a, V, c)
        f, w, K = np.float32, batch.windows, a.shape[1]
        self._windows_launch("sparse_output_rows_kernel", batch, K, (
            da, row_loss, g, w.pieces, w.arrivals, a, V, c, batch.indptr, batch.cols,
            batch.vals, batch.keep, batch.entry_rows, batch.row_weight, batch.row_entries,
            f(alpha), f(beta),
            f(s), f(m_off), np.int32(identity), f(row_norm)))
        self._windows_launch("sparse_output_cols_kernel", batch, K, (
            dV, dc, w.pieces, w.arrivals, g, a, batch.indptr, batch.cols, batch.entry_rows,
            batch.col_order), columns=True)

    def reweighted_error(self, dout, row_loss, z, c, batch, weights, kept_only=False):
        _check(np.float32, dout, row_loss, z, c, weights)
        B, N = z.shape
        self._launch("reweighted_error_kernel", B, BLOCK, (
            dout, row_loss, z, c, batch.indptr, batch.cols, batch.keep if kept_only else None,
            weights, batch.row_weight, np.int32(N)),
            work=lambda: dense_rows_work(N, np.diff(self._host(batch.indptr))))

    def multinomial_error(self, dout, row_loss, z, c, batch, kept_only=False):
        _check(np.float32, dout, row_loss, z, c)
        B, N = z.shape
        self._launch("multinomial_error_kernel", B, BLOCK, (
            dout, row_loss, z, c, batch.indptr, batch.cols, batch.keep if kept_only else None,
            batch.row_weight, np.int32(N)),
            work=lambda: dense_rows_work(N, np.diff(self._host(batch.indptr))))

    def adam(self, params, m, v, grads, counter, lr, beta1, beta2, eps, weight_decay,
             lr_decay=1.0, steps_per_epoch=0, decay_start=0):
        _check(np.float32, params, m, v, grads)
        _check(np.int32, counter)
        if counter.shape != adam_state().shape:     # the kernel writes all of its state
            raise ValueError(f"Adam's state is {adam_state().shape} int32 (common.adam_state), "
                             f"not {counter.shape}")
        f, n = np.float32, len(params)
        grid = min(blocks(n), MAX_GRID)
        self._launch("adam_kernel", grid, BLOCK, (
            params, m, v, grads, counter, np.float64(lr), np.float64(beta1),
            np.float64(beta2), np.float64(lr_decay), np.int32(steps_per_epoch),
            np.int32(decay_start), f(beta1), f(1.0 - beta1), f(beta2), f(1.0 - beta2), f(eps),
            f(weight_decay), np.int64(n)), work=lambda: adam_work(n, grid))

    # -----------------------------------------------------------------------------------------
    # the dense layers

    def gemm(self, out, a, b, trans_a=False, trans_b=False, accumulate=False, tf32=False):
        _check(np.float32, out, a, b)
        if ledger.counting():
            ledger.op("gemm")
        self.device.gemm(out, a, b, trans_a, trans_b, accumulate, tf32)

    def bias_tanh(self, a, b):
        _check(np.float32, a, b)
        B, K = a.shape
        grid = min(blocks(B * K), MAX_GRID)
        self._launch("bias_tanh_kernel", grid, BLOCK, (a, b, np.int32(B), np.int32(K)),
                     work=lambda: even(B * K, -(-B * K // grid)))

    def bias_backward(self, db, dpre, da=None, a=None):
        _check(np.float32, db, dpre)
        B, K = dpre.shape
        self._launch("bias_backward_kernel", blocks(K, WARP), BLOCK,
                     (db, dpre, da, a, np.int32(B), np.int32(K)),
                     work=lambda: bias_backward_work(B, K))

    # -----------------------------------------------------------------------------------------
    # evaluation

    def rank_heldout(self, ranks, scores, heldout, excl_indptr, excl_cols):
        _check(np.float32, scores)
        _check(np.int32, ranks, heldout)
        self._launch("rank_heldout_kernel", scores.shape[0], BLOCK, (
            ranks, scores, heldout, excl_indptr, excl_cols, np.int32(scores.shape[1])))

    def topk(self, top_idx, top_vals, scores, excl_indptr, excl_cols):
        _check(np.float32, scores, top_vals)
        B, M = top_idx.shape
        if not 0 < M <= MAX_TOPK:
            raise ValueError(f"topk takes 1..{MAX_TOPK} columns per row, got {M}")
        masked = scores.copy()                                      # (B, N)
        N = np.int32(scores.shape[1])
        self._launch("mask_excluded_kernel", B, BLOCK, (masked, excl_indptr, excl_cols, N))
        self._launch("topk_kernel", B, BLOCK, (top_idx, top_vals, masked, N, np.int32(M)))


# ---------------------------------------------------------------------------------------------
# CuPy

@functools.lru_cache(maxsize=None)
def _function(device_id: int, kernel: str):
    """A kernel of the module compiled for a device: compiled once, looked up once."""
    return _module(device_id).get_function(kernel)


@functools.lru_cache(maxsize=None)
def _module(device_id: int):
    import cupy
    with cupy.cuda.Device(device_id):
        return cupy.RawModule(code=module_source(), options=COMPILE_OPTIONS)


class CupyDevice:
    """The GPU: kernels, products (cuBLAS) and copies on the current stream. session() makes a
    stream of the backend's own current (a captured step needs one other than the legacy
    default stream); it is a blocking stream, so its work and the work on the legacy default
    stream outside a session (a model loaded, then recommending; a fit, then saved) wait for
    each other. Pinned host memory for the plan's one copy an epoch; copies and syncs reported
    to a counting ledger, allocations through CuPy's allocator hook."""

    def __init__(self):
        import cupy
        self.xp = cupy
        self.device_id = cupy.cuda.runtime.getDevice()
        self.sms = cupy.cuda.Device(self.device_id).attributes["MultiProcessorCount"]
        self.stream = cupy.cuda.Stream(non_blocking=False)
        self._blas = _blas_handle(self.device_id)
        self._sessions = 0        # entered and not left: an evaluation inside a fit nests

    @contextmanager
    def session(self):
        import cupy

        class Allocations(cupy.cuda.MemoryHook):
            name = "ncae_cuda ledger"

            def malloc_preprocess(self, **kwargs):
                ledger.allocation()

        with ExitStack() as entered:
            if self._sessions == 0:
                entered.enter_context(cupy.cuda.Device(self.device_id))
                entered.enter_context(self.stream)
            if Allocations.name not in cupy.cuda.memory_hook.get_memory_hooks():
                entered.enter_context(Allocations())     # CuPy refuses a second of one name
            self._sessions += 1
            try:
                yield
            finally:
                self._sessions -= 1

    def launch(self, kernel, grid, block, args):
        _function(self.device_id, kernel)((grid,), (block,), args)

    def gemm(self, out, a, b, trans_a, trans_b, accumulate, tf32):
        # Row-major out (M, N) = op(a) (M, K) @ op(b) (K, N) is column-major out^T = op(b)^T
        # op(a)^T: cuBLAS gets b first; a row-major (r, c) array is a column-major (c, r) one.
        M, N = out.shape
        K = a.shape[0] if trans_a else a.shape[1]
        self._blas.sgemm(self.xp.cuda.get_current_stream().ptr,
                         cublas.OP_T if trans_b else cublas.OP_N,
                         cublas.OP_T if trans_a else cublas.OP_N, N, M, K,
                         b.data.ptr, b.shape[1], a.data.ptr, a.shape[1], out.data.ptr, N,
                         accumulate, tf32)

    def capture(self, fn):
        with self.stream:                   # current, inside a session or not
            self.stream.begin_capture()
            try:
                fn()
            except BaseException:
                with suppress(Exception):   # the capture's own failure would hide fn's error
                    self.stream.end_capture()
                raise
            graph = self.stream.end_capture()

        def replay() -> None:
            graph.launch()                  # on the current stream
        # what the graph holds, cuBLAS's own kernels too: its node definitions in CUDA's DOT
        replay.dot = graph.debug_dot_str()
        replay.nodes = {"nodes": len(set(re.findall(r'"(\w+_node_\d+)"\s*\[', replay.dot)))}
        return replay

    def pinned(self, nbytes: int) -> np.ndarray:
        import cupy
        memory = cupy.cuda.alloc_pinned_memory(nbytes)
        return np.frombuffer(memory, np.uint8, nbytes)    # keeps `memory` alive

    def upload(self, target, source: np.ndarray) -> None:
        ledger.copy()
        target.data.copy_from_host_async(source.ctypes.data, source.nbytes)

    def to_device(self, a):
        ledger.copy()
        return self.xp.asarray(a)

    def to_host(self, a) -> np.ndarray:
        ledger.copy()
        ledger.sync()
        return a.get()                      # waits for the current stream's work before it


@functools.lru_cache(maxsize=None)
def _blas_handle(device_id: int) -> cublas.Handle:
    import cupy
    with cupy.cuda.Device(device_id):
        return cublas.Handle()


def backend() -> KernelOps:
    """The ops on the current CUDA device, its kernels compiled on first use."""
    return KernelOps(CupyDevice())
