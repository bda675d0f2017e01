"""The collectives of a column-sharded fit (ncae_cuda/ops/shard.py), over torch.distributed: NCCL
between GPUs, gloo between CPUs. An optional extra (pip install -e ".[distributed]"): a fit in
one process imports nothing from here.

    torchrun --nproc-per-node 2 -m ncae_cuda.train --shard columns ...   # start(): the group
    model = NCAE(shard="columns")           # in a process group its launcher has initialised

A sharded step shares two sums: layer 1's pre-activation (B, K1) and the last hidden layer's
gradient with the row losses (B, K_L + 1), 4 * B * (K1 + K_L + 1) bytes a rank, whatever the
number of columns. Each sum is the ranks' partial sums added in rank order: an all-gather of
the partials, then one sum on the device, so every rank holds the same bits and a rerun gives
them again (a reduction's order could depend on the engine's algorithm). Collectives run on
the stream the kernels run on, so nothing waits on the host. The arrays are the backend's own:
numpy arrays reach gloo through torch.from_numpy, CuPy arrays NCCL through DLPack, without a
copy.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import re
import signal

import numpy as np

from ..errors import NcaeError
from ..ops import ledger
from . import stopping


def step_bytes(batch_size: int, hidden: tuple[int, ...]) -> int:
    """The bytes a rank contributes to a sharded training step's collectives: layer 1's
    pre-activation (B, K1), then the last hidden layer's gradient with the row losses
    (B, K_L + 1), in float32, whatever the number of columns."""
    return 4 * batch_size * (hidden[0] + hidden[-1] + 1)


class ShardLost(NcaeError, RuntimeError):
    """A sharded fit that cannot go on: another process of its job stopped or refused, or
    this one cannot join it (PyTorch missing or broken, no launcher): the message says which."""


# what a process says, after why, where another process of the job stopped
ENDS = "the job ends; run it again with --resume to continue from its last checkpoint"


def peer(rank: int, world: int) -> str:
    """The process whose stop ends the job, as rank `rank` of `world` can name it: of two
    ranks the other; of more, neither the engine's error (it names an address) nor the
    launcher's SIGTERM says which."""
    return f"rank {1 - rank}" if world == 2 else "another process of the job"


def _torch():
    """torch and torch.distributed; ShardLost naming why not: PyTorch not installed, an
    installed one that does not import (a broken install: its own error), or a build without
    torch.distributed."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        if isinstance(e, ModuleNotFoundError) and e.name == "torch":
            raise ShardLost("a sharded fit runs on torch.distributed: pip install -e "
                            "'.[distributed]' (PyTorch)") from None
        raise ShardLost(f"PyTorch is installed but does not import ({_first_line(e)}): "
                        "reinstall it") from None
    if not dist.is_available():
        raise ShardLost("this PyTorch is built without torch.distributed: install a build "
                        "with it")
    return torch, dist


@contextlib.contextmanager
def joined(device: str, timeout: float | None = None):
    """Within it, this process is one of the job the launcher (torchrun, or srun torchrun)
    describes in the environment: NCCL on the GPU, gloo on the CPU, a collective waiting for
    the others at most `timeout` seconds (None: torch.distributed's default), after which gloo
    raises (ShardLost) and NCCL's watchdog ends the process. On a GPU each process takes
    the device of its LOCAL_RANK; on the CPU the processes of a machine share its cores among
    Numba's threads, unless NUMBA_NUM_THREADS says otherwise. Leaving it leaves the group, so
    no thread of the engine outlives the interpreter (gloo's would abort the process).

    The launcher ends the job when one of its processes stops: it sends the others SIGTERM.
    Within it, SIGTERM raises ShardLost; once it is left, the process is on its way
    out, with its message said, and a SIGTERM then is ignored rather than cutting the exit
    short with a traceback. A signal that comes while Numba compiles is raised as the compile
    ends (stopping.compiles_whole): a terminal's Ctrl-C, which the launcher hands to every
    process, comes in the first seconds of a job while they compile."""
    torch, dist = _torch()
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise ShardLost("--shard columns runs as processes of a torch.distributed job: launch "
                        "it with torchrun --nproc-per-node R -m ncae_cuda.train --shard columns "
                        "... (several machines: torchrun's --nnodes and rendezvous flags)")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    def stopped(number, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)       # once: the job is ending
        raise ShardLost(f"this process got SIGTERM, the launcher's when {peer(rank, world)} "
                        f"has stopped or the job is cancelled: {ENDS}")
    signal.signal(signal.SIGTERM, stopped)
    local = int(os.environ.get("LOCAL_RANK", 0))
    if device == "gpu":
        import cupy
        cupy.cuda.Device(local).use()
        torch.cuda.set_device(local)
    elif "NUMBA_NUM_THREADS" not in os.environ:
        import numba
        share = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        numba.set_num_threads(max(1, numba.config.NUMBA_NUM_THREADS // share))
    try:
        dist.init_process_group("nccl" if device == "gpu" else "gloo", timeout=None
                                if timeout is None else datetime.timedelta(seconds=timeout))
        try:
            with stopping.compiles_whole():
                yield
        finally:
            dist.destroy_process_group()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


class Collectives:
    """Sums and gathers of device arrays across the ranks of the default process group, on the
    backend `ops`; every call is a collective: every rank makes it, in the same order. Counts
    its calls and the bytes this rank contributes (`calls`, `bytes`), and reports each to a
    counting ledger."""

    def __init__(self, ops):
        self.torch, self.dist = _torch()
        if not self.dist.is_initialized():
            raise ShardLost("shard='columns' trains inside an initialised torch.distributed "
                            "process group: launch with torchrun (python -m ncae_cuda.train "
                            "--shard columns), or call torch.distributed.init_process_group "
                            "first")
        self.ops, self.xp = ops, ops.xp
        self.rank, self.world = self.dist.get_rank(), self.dist.get_world_size()
        # CuPy's arrays (the GPU backend on a GPU) or numpy's (the CPU backends, the emulator)
        self.gpu = getattr(ops.xp, "__name__", "") == "cupy"
        self.calls = self.bytes = 0
        self._gathered = {}               # (size, dtype): a (world * size,) buffer, made once

    def sum(self, x, name: str) -> None:
        """x (a contiguous device array) = the sum over the ranks of their x, in rank order."""
        flat = x.reshape(-1)
        gathered = self._gather(flat, name)
        with ledger.paused():             # counted as one step of the collective
            self.xp.sum(gathered.reshape(self.world, flat.size), axis=0, out=flat)

    def gather(self, x, name: str):
        """(world, *x.shape): every rank's x, in rank order, on the device (a fresh array)."""
        return self._gather(x.reshape(-1), name, keep=False).reshape(self.world, *x.shape)

    def sum_host(self, values) -> np.ndarray:
        """The sum over the ranks of a host array (figures, flags): for what happens once an
        epoch or less."""
        x = self.ops.to_device(np.ascontiguousarray(values))
        self.sum(x, "host values")
        return np.asarray(self.ops.to_host(x))

    def together(self, work, what: str):
        """work() on this rank, going on only where it succeeded on every rank: its NcaeError
        here where it failed here, ShardLost on the ranks where it did not; returns its
        result."""
        try:
            result, error = work(), None
        except NcaeError as e:
            result, error = None, e
        failed = int(self.sum_host(np.array([error is not None], np.int64))[0])
        if error is not None:
            raise error
        if failed:
            raise ShardLost(f"{failed} of {self.world} processes failed {what} (see their "
                            "messages)")
        return result

    def _gather(self, flat, name: str, keep: bool = True):
        key = (flat.size, flat.dtype.str)
        out = self._gathered.get(key) if keep else None
        if out is None:
            out = self.xp.empty(self.world * flat.size, flat.dtype)
            if keep:
                self._gathered[key] = out
        ledger.collective(name, flat.nbytes)
        self.calls += 1
        self.bytes += flat.nbytes
        all_gather = getattr(self.dist, "all_gather_single", None) or \
            self.dist.all_gather_into_tensor              # before torch 2.13
        try:
            with self._on_the_kernels_stream():
                all_gather(self._tensor(out), self._tensor(flat))
        except ShardLost:                     # the launcher's SIGTERM, said already
            raise
        except RuntimeError as e:             # a peer gone: gloo's and NCCL's own errors
            raise ShardLost(f"{peer(self.rank, self.world)} stopped ({_first_line(e)}): "
                            f"{ENDS}") from None
        return out

    def _tensor(self, a):
        """A torch tensor over a's memory: no copy."""
        if self.gpu:
            return self.torch.from_dlpack(a)
        return self.torch.from_numpy(np.asarray(a).view(np.ndarray))

    def _on_the_kernels_stream(self):
        if not self.gpu:
            return contextlib.nullcontext()
        import cupy
        ptr = cupy.cuda.get_current_stream().ptr
        return self.torch.cuda.stream(self.torch.cuda.ExternalStream(ptr))


def _first_line(error: Exception, most: int = 160) -> str:
    line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    line = re.sub(r"^\[[^]\s]+:\d+\] ", "", line)      # gloo's [source file:line] of the error
    return line if len(line) <= most else line[:most] + "..."
