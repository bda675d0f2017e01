"""An emulated launch's arrays between guard pages, so that an access off them faults at once.

In the process's heap a thread of an emulated kernel that reads past its array reads another
array's values, and one that writes past it corrupts the heap and kills the process later,
with every test still to run. On a GPU the same access is an illegal memory access, which
compute-sanitizer names. So for the launch each allocation its arrays lie in (their base
array's memory, as cudaMalloc's) is copied to a mapping of its own, its end against pages no
access may touch (GUARD bytes of them) and as many before it, and copied back after: an access
off its end faults, and emu.h ends the launch with the fault, which `where` then places against the
allocations.
"""
from __future__ import annotations

import ctypes
import mmap
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

PAGE = mmap.PAGESIZE
# Address space only, never memory: an index a row or a few past the end still lands in it.
GUARD = max(PAGE, 1 << 20)
# A copy keeps its allocation's address modulo this, so that a vector access aligned (or not)
# in the heap is so in the copy too; up to ALIGNMENT - 1 bytes after the end stay unguarded.
ALIGNMENT = 16
_PROT_NONE = 0
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


@dataclass
class Allocation:
    """The bytes [start, end) of the heap that one or more of a launch's arrays lie in, and
    the arguments (their positions in the launch) that do."""
    start: int
    end: int
    arguments: list
    copy_at: int = 0        # where the copy starts, while it is staged ...
    mapped: tuple = (0, 0)  # ... in the mapping [from, to), both guards in

    def owns(self, address: int) -> bool:
        return self.mapped[0] <= address < self.mapped[1]

    @property
    def nbytes(self) -> int:
        return self.end - self.start


def _bounds(a: np.ndarray) -> tuple[int, int]:
    """The heap bytes of the allocation `a` is a view of: its base array's."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    start = a.__array_interface__["data"][0]
    return start, start + a.nbytes


def allocations(args) -> list[Allocation]:
    """The allocations the array arguments lie in, those that overlap as one."""
    spans = sorted((*_bounds(a), i) for i, a in enumerate(args) if isinstance(a, np.ndarray))
    merged: list[Allocation] = []
    for start, end, i in spans:
        if merged and start < merged[-1].end:
            merged[-1].end = max(merged[-1].end, end)
            merged[-1].arguments.append(i)
        else:
            merged.append(Allocation(start, end, [i]))
    return merged


def _heap(address: int, nbytes: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


@contextmanager
def staged(args):
    """Each array argument's allocation copied between guards for the `with` block, and back
    after it: yields the addresses the kernel is to be given for them ({position in args:
    address in the copy}) and the allocations, to place a fault against."""
    spans, maps, addresses = allocations(args), [], {}
    try:
        for span in spans:
            data_pages = -(-(span.nbytes + ALIGNMENT) // PAGE)
            mapping = mmap.mmap(-1, data_pages * PAGE + 2 * GUARD)
            maps.append(mapping)
            base = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
            end = base + GUARD + data_pages * PAGE
            span.mapped = (base, end + GUARD)
            span.copy_at = end - span.nbytes - (end - span.nbytes - span.start) % ALIGNMENT
            for guard in (base, end):
                if _libc.mprotect(guard, GUARD, _PROT_NONE) != 0:
                    raise OSError(ctypes.get_errno(), "mprotect of a guard failed")
            _heap(span.copy_at, span.nbytes)[...] = _heap(span.start, span.nbytes)
            for i in span.arguments:
                addresses[i] = span.copy_at + args[i].ctypes.data - span.start
        yield addresses, spans
        for span in spans:
            _heap(span.start, span.nbytes)[...] = _heap(span.copy_at, span.nbytes)
    finally:
        for mapping in maps:
            mapping.close()


def where(address: int, spans: list[Allocation]) -> str:
    """Where a faulting address lies against the launch's allocations, as compute-sanitizer
    says it."""
    for span in spans:
        if span.owns(address):
            after = address - (span.copy_at + span.nbytes)
            place = (f"{after} bytes after the end" if after >= 0 else
                     f"{span.copy_at - address} bytes before the start")
            return (f"{place} of the {span.nbytes}-byte allocation of argument"
                    f"{'s' if len(span.arguments) > 1 else ''} "
                    f"{', '.join(str(i) for i in span.arguments)}")
    return "in none of the launch's allocations"
