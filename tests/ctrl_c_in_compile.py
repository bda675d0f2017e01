"""python -m ncae_cuda.train as a rank of torchrun runs it, for tests/test_distributed.py, but with
a terminal's Ctrl-C pressed where it is hardest to take: rank 1's first Numba compile in its main
thread (the one that takes signals; the planner compiles in another too), inside
llvmlite's ctypes callback that hands Numba the object code (where Python prints an exception
raised as "Exception ignored" and drops it).

    torchrun --standalone --nproc-per-node 2 tests/ctrl_c_in_compile.py --shard columns ...

The callback asks the launcher to stop, as a terminal's Ctrl-C does (torchrun hands the SIGINT
on to every rank), and waits there for the SIGINT that comes back, so that its handler runs in
the callback. Numba's compile needs no cache of a previous run for this (NUMBA_CACHE_DIR: a
fresh folder).
"""
import os
import runpy
import signal
import sys
import threading

from numba.core import codegen

# the callback calls it; the engine reads it as Numba's first compile creates the engine
object_compiled = codegen.JITCodeLibrary._object_compiled_hook
pressed = []


def ctrl_c_here() -> None:
    """SIGINT to the launcher, and back to here once it has handed it on: the byte the signal
    writes to the wakeup pipe as it comes (in whichever thread) ends the wait, and its Python
    handler runs before the next line."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    before = signal.set_wakeup_fd(write_end)
    try:
        os.kill(os.getppid(), signal.SIGINT)
        os.read(read_end, 1)
    finally:
        signal.set_wakeup_fd(before)
        os.close(read_end)
        os.close(write_end)


def on_object_compiled(cls, ll_module, buf) -> None:
    if not pressed and threading.current_thread() is threading.main_thread():
        pressed.append(True)
        ctrl_c_here()
    object_compiled(ll_module, buf)


if os.environ.get("RANK") == "1":
    codegen.JITCodeLibrary._object_compiled_hook = classmethod(on_object_compiled)
sys.argv = ["ncae_cuda.train", *sys.argv[1:]]
runpy.run_module("ncae_cuda.train", run_name="__main__", alter_sys=True)
