"""The CUDA kernels run on the CPU: kernels/*.cu compiled by g++ against emu.h, bound to the GPU
backend's own launchers (ops.gpu.KernelOps) over numpy arrays.

The test suite checks the real kernel sources and the real launch code against the reference
this way where there is no GPU, and bench/launches.py counts what a step asks of the device.
Each kernel gets a C wrapper, emu_<name>(grid, block, <its parameters>), generated from its
signature in the source. The arrays are ledger.DeviceArray, so every array operation the
trainer makes around the kernels is visible to a ledger. A thread's fault (an access off its
arrays, which guarded.py makes fault, a misaligned vector access) ends its launch with a
KernelFault, as a GPU's illegal memory access ends it, and leaves the process running.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import re
import shutil
import signal
import subprocess
import tempfile
from collections import Counter
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable

import numpy as np

from . import gpu, guarded, ledger, reference
from .common import DEFAULT_SMS
from .ledger import DeviceNumpy

HERE = Path(__file__).resolve().parent
CXX = shutil.which("g++")
# UBSan's alignment check, a trap (SIGILL, which ends the launch with a KernelFault) at the
# first: a float4 (or float2, double) loaded or stored at an address not a multiple of its size
# faults on a GPU ("misaligned address") and on x86 runs as any other access, so without it a
# kernel's vector access one float off would pass every emulated test. Left out, said by
# alignment_checked(), where the compiler does not take it.
ALIGNMENT_CHECKS = ["-fsanitize=alignment", "-fsanitize-undefined-trap-on-error"]
_SIGNATURE = re.compile(r'extern "C" __global__ void (\w+)\((.*?)\)\s*\{', re.S)
_SCALARS = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
            np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.uint64): ctypes.c_uint64,
            np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


def _wrappers(source: str) -> str:
    lines = []
    for name, params in _SIGNATURE.findall(source):
        params = [p.strip() for p in re.sub(r"//[^\n]*", "", params).split(",")]
        names = [re.findall(r"\w+", p)[-1] for p in params]
        call = f'{name}({", ".join(names)})'
        lines.append(f'extern "C" int emu_{name}(int grid, int block, {", ".join(params)}) '
                     f'{{ return emu_launch(grid, block, [&] {{ {call}; }}); }}')
    return "\n".join(lines)


def build(directory: Path | None = None, source: str | None = None) -> ctypes.CDLL:
    """Compile the kernels (the backend's module, or `source`) and their wrappers into a shared
    library under `directory`; without one, in a temporary folder removed once the library is
    loaded (a loaded library needs its file no more)."""
    if directory is None:
        with tempfile.TemporaryDirectory(prefix="ncae-emu-") as folder:
            return build(Path(folder), source)
    source = source or gpu.module_source()
    source += "\n" + _wrappers(source) + "\n"
    flags = ["-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w",
             *(ALIGNMENT_CHECKS if alignment_checked() else [])]
    digest = hashlib.sha1("\n".join([source, (HERE / "emu.h").read_text(), *flags]).encode()
                          ).hexdigest()
    library = directory / f"kernels-{digest[:12]}.so"
    if not library.exists():
        cpp = directory / "kernels_emulated.cpp"
        cpp.write_text(source)
        subprocess.run([CXX, *flags, "-include", str(HERE / "emu.h"), f"-I{gpu.KERNEL_DIR}",
                        "-x", "c++", str(cpp), "-o", str(library)],
                       check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library))


@functools.cache
def alignment_checked() -> bool:
    """Whether g++ links ALIGNMENT_CHECKS here (its UBSan runtime is installed): the emulated
    kernels then abort at a misaligned vector access, as a GPU faults."""
    with tempfile.TemporaryDirectory(prefix="ncae-emu-") as folder:
        probe = Path(folder) / "probe.cpp"
        probe.write_text("int probe(int* p) { return *p; }\n")
        return subprocess.run([CXX, "-shared", "-fPIC", *ALIGNMENT_CHECKS, str(probe), "-o",
                               str(Path(folder) / "probe.so")],
                              capture_output=True).returncode == 0


class KernelFault(RuntimeError):
    """A thread of an emulated kernel faulted, which ended its launch: where a GPU reports an
    illegal memory access (or a misaligned address), this says which thread of which block
    made it, and where, as compute-sanitizer does. A bug of the kernel or of its launcher."""


class _Fault(ctypes.Structure):
    """emu.h's emu_fault_record."""
    _fields_ = [("signal", ctypes.c_int), ("block", ctypes.c_int), ("thread", ctypes.c_int),
                ("write", ctypes.c_int), ("address", ctypes.c_size_t)]


def _fault(kernel: str, library: ctypes.CDLL, spans: list[guarded.Allocation]) -> KernelFault:
    """The KernelFault of the launch of `kernel` that `library` just ended at a fault."""
    library.emu_last_fault.restype = ctypes.POINTER(_Fault)
    f = library.emu_last_fault().contents
    if f.signal == signal.SIGILL:
        what = "misaligned address (a vector access off its size's boundary)"
    elif f.signal == signal.SIGFPE:
        what = "arithmetic fault (an integer division by zero)"
    else:
        access = {1: "write", 0: "read"}.get(f.write, "access")
        what = (f"invalid __global__ {access} at {f.address:#x}, "
                f"{guarded.where(f.address, spans)}")
    return KernelFault(f"{kernel}: {what}, by thread ({f.thread},0,0) in block ({f.block},0,0)"
                       " (compute-sanitizer's words; the launch was ended there)")


class EmulatedDevice:
    """The device binding of gpu.KernelOps on the CPU: kernels run (or are only counted) by the
    compiled library, memory is ledger.DeviceArray, products are numpy's. It stands for a GPU
    of common.DEFAULT_SMS SMs."""

    sms = DEFAULT_SMS

    def __init__(self, library: ctypes.CDLL, runs: Callable[[str], bool]):
        self.library, self.runs, self.xp = library, runs, DeviceNumpy()
        self._captured = None     # while capturing: the launches and products, in order

    def session(self):
        return nullcontext()

    @contextmanager
    def descending(self):
        """Launches inside the block run their blocks from the highest to the lowest, and
        each block's warps in the other order (emu.h): the first window of a shared sum is then
        the last to arrive and adds the pieces."""
        self.library.emu_set_descending(1)
        try:
            yield
        finally:
            self.library.emu_set_descending(0)

    def capture(self, fn):
        """Stream capture, emulated: fn's launches and products are recorded, not run (an
        array operation or a copy in it is refused), and replayed with the same arguments."""
        self._captured = []
        try:
            with ledger.capturing("a CUDA graph replays only kernels and products"):
                fn()
            captured = self._captured
        finally:
            self._captured = None

        def replay() -> None:
            for call, args in captured:
                call(*args)
        replay.nodes = {"nodes": len(captured),
                        **Counter("kernels" if call == self.launch else "products"
                                  for call, _ in captured)}
        return replay

    def launch(self, kernel: str, grid: int, block: int, args: tuple) -> None:
        if self._captured is not None:
            self._captured.append((self.launch, (kernel, grid, block, args)))
            return
        if not self.runs(kernel):
            return
        if any(isinstance(a, np.ndarray) and not a.flags.c_contiguous for a in args):
            raise TypeError(f"{kernel}: a non-contiguous array argument")
        with guarded.staged(args) as (addresses, spans):
            converted = [ctypes.c_int(grid), ctypes.c_int(block)]
            for i, a in enumerate(args):
                if a is None or i in addresses:
                    converted.append(ctypes.c_void_p(addresses.get(i)))
                else:
                    converted.append(_SCALARS[np.asarray(a).dtype](a))
            if getattr(self.library, f"emu_{kernel}")(*converted):
                raise _fault(kernel, self.library, spans)

    def gemm(self, out, a, b, trans_a, trans_b, accumulate, tf32) -> None:
        if self._captured is not None:
            self._captured.append((self.gemm, (out, a, b, trans_a, trans_b, accumulate, tf32)))
            return
        # on plain views: gpu.KernelOps counts the call once, as one cuBLAS call
        reference.gemm(*(x.view(np.ndarray) for x in (out, a, b)), trans_a, trans_b,
                       accumulate, tf32)

    def pinned(self, nbytes: int) -> np.ndarray:
        return np.zeros(nbytes, np.uint8)

    def upload(self, target, source: np.ndarray) -> None:
        if self._captured is not None:
            raise RuntimeError("a copy from the host while a step is captured")
        ledger.copy()
        target.view(np.ndarray)[...] = source

    def to_device(self, a):
        return self.xp.asarray(a)

    def to_host(self, a) -> np.ndarray:
        return self.xp.to_host(a)


def emulated_backend(directory: Path | None = None,
                     runs: Callable[[str], bool] = lambda kernel: True) -> gpu.KernelOps:
    """KernelOps over emulated device memory whose kernels run on the CPU; a kernel for which
    `runs(name)` is false is launched in name only (counted by a ledger, not run)."""
    return gpu.KernelOps(EmulatedDevice(build(directory), runs))
