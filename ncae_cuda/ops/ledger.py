"""The launch ledger: what each training step asks of the device, counted.

Per step: device operations (custom kernels, BLAS calls and array-library operations alike),
allocations, copies between host and device, synchronisations, and the collectives of a
column-sharded fit with the bytes this rank contributes to each; and for every custom kernel
launch the work of its busiest block over the mean block's (entries x K, from the launch's own
arguments), the measure of how evenly a launch keeps the SMs busy. Two more figures per launch
say whether the SMs have enough to do and how long the slowest block takes at the least: its
parallel slack, blocks over the target device's SM count (fewer than one block an SM leaves
SMs idle), and its serial tail, the longest chain of dependent reads one block makes, in
entries (ops/gpu.py weighs both from the launch's arguments). A step begins at each
`cut_batch`: everything from one to the next, and after the last one the epoch's closing read
of its losses, belongs to that step.

Where the device is emulated, `DeviceNumpy` is the array module: its arrays (`DeviceArray`)
stand for device memory, so every numpy operation on one is a device operation, every array it
creates an allocation, and every read of one's value by the host a copy and a synchronisation.
Nothing has to be declared, so an operation the trainer does not route through a launcher is
counted all the same. On a GPU the backend reports its own launches, BLAS calls, copies and
synchronisations, and CuPy's allocator hook reports allocations.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

_ACTIVE: Ledger | None = None       # the ledger that device operations are counted in


@dataclass
class Counts:
    """What one step (or the set-up before the first) asked of the device."""
    ops: list = field(default_factory=list)        # names, in order
    allocations: int = 0
    copies: int = 0                                # host -> device and device -> host
    syncs: int = 0
    balance: list = field(default_factory=list)    # (kernel, busiest block / mean block)
    collectives: list = field(default_factory=list)  # (name, bytes this rank contributes)
    # (kernel, blocks per SM, serial tail in entries, whether the grid is sized by the
    # batch's entries)
    parallelism: list = field(default_factory=list)


class Ledger:
    def __init__(self):
        self.steps = [Counts()]                    # [0]: everything before the first step

    @property
    def now(self) -> Counts:
        return self.steps[-1]

    def begin_step(self) -> None:
        self.steps.append(Counts())

    def op(self, name: str) -> None:
        self.now.ops.append(name)

    def kernel(self, name: str, busiest: float, mean: float, slack: float | None = None,
               tail: float | None = None, by_entries: bool = False) -> None:
        """A custom kernel launch, with its busiest block's work and its mean block's; and,
        where weighed, its blocks per SM, its serial tail in entries and whether its grid is
        sized by the batch's entries."""
        self.op(name)
        if mean > 0:
            self.now.balance.append((name, float(busiest / mean)))
        if slack is not None:
            self.now.parallelism.append((name, float(slack), float(tail), by_entries))

    def collective(self, name: str, nbytes: int) -> None:
        """A collective across the ranks of a sharded fit (an operation of the device's too)."""
        self.op(f"all-gather {name}")
        self.now.collectives.append((name, int(nbytes)))

    def allocation(self) -> None:
        self.now.allocations += 1

    def copy(self) -> None:
        self.now.copies += 1

    def sync(self) -> None:
        self.now.syncs += 1

    @contextlib.contextmanager
    def recording(self):
        """Count the device operations made inside the block in this ledger."""
        global _ACTIVE
        previous, _ACTIVE = _ACTIVE, self
        try:
            yield self
        finally:
            _ACTIVE = previous

    def summary(self) -> dict:
        """The figures of the steps recorded, one epoch's worth: ops of every step, and what
        happens after the epoch's first step (its set-up and first step may allocate)."""
        steps, later = self.steps[1:], self.steps[2:]
        if not steps:
            raise ValueError("no step was recorded (a step begins at cut_batch)")
        ops = [len(s.ops) for s in steps]
        typical = steps[-1] if len(steps) == 1 else steps[1]       # past the first step's set-up
        by_kernel = {}
        for name, ratio in (b for s in steps for b in s.balance):
            by_kernel[name] = max(ratio, by_kernel.get(name, 0.0))
        worst = max(by_kernel.items(), key=lambda b: b[1], default=None)
        slack, tail = {}, {}                     # per kernel: its least slack, longest tail
        for name, per_sm, chain, by_entries in (p for s in steps for p in s.parallelism):
            if by_entries:
                slack[name] = min(per_sm, slack.get(name, per_sm))
            tail[name] = max(chain, tail.get(name, 0.0))
        idlest = min(slack.items(), key=lambda k: k[1], default=None)
        longest = max(tail.items(), key=lambda k: k[1], default=None)
        return {
            "steps": len(steps),
            "ops_per_step": max(ops),
            "ops_per_step_min": min(ops),
            "ops_of_a_step": _tally(typical.ops),
            "allocations_per_step": max((s.allocations for s in later), default=0),
            "allocations_first_step": self.steps[0].allocations + steps[0].allocations,
            "transfers_per_epoch": sum(s.copies for s in later),
            "syncs_per_epoch": sum(s.syncs for s in later),
            "work_balance": worst[1] if worst else 1.0,
            "least_balanced_kernel": worst[0] if worst else None,
            "work_balance_by_kernel": {k: round(v, 2) for k, v in sorted(by_kernel.items())},
            "collectives_per_step": len(typical.collectives),
            "collective_bytes_per_step": sum(b for _, b in typical.collectives),
            "parallel_slack": idlest[1] if idlest else None,
            "least_parallel_kernel": idlest[0] if idlest else None,
            "parallel_slack_by_kernel": {k: round(v, 3) for k, v in sorted(slack.items())},
            "serial_tail": longest[1] if longest else None,
            "longest_tail_kernel": longest[0] if longest else None,
            "serial_tail_by_kernel": {k: round(v, 1) for k, v in sorted(tail.items())},
        }


def _tally(names: list) -> dict:
    counts = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts


@contextlib.contextmanager
def paused():
    """A block whose device operations are the ledger's own (reading a launch's arguments to
    weigh its blocks), not the trainer's: nothing in it is counted."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, None
    try:
        yield
    finally:
        _ACTIVE = previous


# What the backends report, to the ledger counting (if any).

def counting() -> bool:
    return _ACTIVE is not None


def step_begins() -> None:
    """Called by cut_batch: what follows belongs to a new step."""
    if _ACTIVE is not None:
        _ACTIVE.begin_step()


def op(name: str) -> None:
    if _ACTIVE is not None:
        _ACTIVE.op(name)


def kernel(name: str, busiest: float, mean: float, slack: float | None = None,
           tail: float | None = None, by_entries: bool = False) -> None:
    if _ACTIVE is not None:
        _ACTIVE.kernel(name, busiest, mean, slack, tail, by_entries)


def allocation() -> None:
    if _ACTIVE is not None:
        _ACTIVE.allocation()


def collective(name: str, nbytes: int) -> None:
    if _ACTIVE is not None:
        _ACTIVE.collective(name, nbytes)


def copy() -> None:
    if _ACTIVE is not None:
        _ACTIVE.copy()


def sync() -> None:
    if _ACTIVE is not None:
        _ACTIVE.sync()


# ---------------------------------------------------------------------------------------------
# device memory, emulated
_CAPTURE: str | None = None        # while set, emulated device memory refuses any operation


def _emulated(kind: str, name: str | None = None) -> None:
    """An operation on emulated device memory: counted, unless a step is being captured."""
    if _CAPTURE is not None:
        raise RuntimeError(f"{kind} {name or ''} on device memory while a step is captured: "
                           f"{_CAPTURE}")
    if kind == "op":
        op(name)
    else:
        globals()[kind]()


@contextlib.contextmanager
def capturing(reason: str):
    """A step being captured: an array operation in it would not be in the graph, so the
    emulated device refuses it, as CUDA's stream capture refuses a synchronous copy."""
    global _CAPTURE
    previous, _CAPTURE = _CAPTURE, reason
    try:
        yield
    finally:
        _CAPTURE = previous


def _host(x):
    """A DeviceArray's plain-numpy view (containers too); anything else as it is."""
    if isinstance(x, DeviceArray):
        return x.view(np.ndarray)
    if isinstance(x, (list, tuple)):
        return type(x)(_host(v) for v in x)
    if isinstance(x, dict):
        return {k: _host(v) for k, v in x.items()}
    return x


def _device(result):
    if isinstance(result, np.ndarray):
        return result.view(DeviceArray)
    if isinstance(result, np.generic):                # a reduction to one value stays on the
        return np.asarray(result).view(DeviceArray)   # device, as CuPy's 0-d arrays do
    if isinstance(result, tuple):
        return tuple(_device(r) for r in result)
    return result


def _arrays(x) -> list:
    if isinstance(x, np.ndarray):
        return [x]
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in _arrays(v)]
    return []


def _host_arrays(values, least_ndim: int = 0) -> bool:
    """Whether any of `values` is a host array of least_ndim dimensions or more."""
    return any(type(a) is np.ndarray and a.ndim >= least_ndim for a in _arrays(list(values)))


def _refuse_host_arrays(name: str, values) -> None:
    """CuPy's functions and ufuncs take device arrays and scalars only (numpy's scalar types,
    not a 0-d array): a host array among their arguments is a TypeError on a GPU
    ("Unsupported type"), so it is one here too."""
    if _host_arrays(values):
        raise TypeError(f"{name}: a host (numpy) array among device arrays, which CuPy refuses "
                        "on a GPU: move it to the device first (ops.to_device)")


def _advanced(key) -> bool:
    """Whether an index holds an array or a list: CuPy copies those to the device itself."""
    return any(isinstance(k, (np.ndarray, list)) for k in (key if isinstance(key, tuple)
                                                          else (key,)))


class DeviceArray(np.ndarray):
    """A numpy array standing for device memory: see the module's docstring. What CuPy refuses
    of a host array, it refuses alike: as an operand beside it, or written into a plain slice
    of it."""

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        _refuse_host_arrays(ufunc.__name__, inputs + (out or ()))
        if out is not None:
            kwargs["out"] = _host(out)
        result = getattr(ufunc, method)(*_host(inputs), **kwargs)
        _emulated("op", ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}")
        if out is None:
            _emulated("allocation")
            return _device(result)
        return out[0] if len(out) == 1 else out

    def __array_function__(self, func, types, args, kwargs):
        _refuse_host_arrays(func.__name__, [*args, *kwargs.values()])
        result = func(*_host(args), **_host(kwargs))
        given = _arrays(_host(args)) + _arrays(_host(kwargs))
        fresh = [r for r in _arrays(result) if not any(np.shares_memory(r, g) for g in given)]
        if fresh:                                     # not a view nor a query of the inputs
            if func.__name__ not in ("empty_like",):
                _emulated("op", func.__name__)
            for _ in fresh:
                _emulated("allocation")
        return _device(result)

    def __setitem__(self, key, value):
        if _host_arrays([value], least_ndim=1) and not _advanced(key):
            # CuPy fills a plain slice from a scalar alone, a 0-d array's value too (fill)
            raise ValueError("a host (numpy) array written into a slice of a device array: "
                             "CuPy refuses it on a GPU (non-scalar numpy.ndarray cannot be "
                             "used for fill): move it to the device first (ops.to_device)")
        if isinstance(value, np.ndarray) and not isinstance(value, DeviceArray) and value.size > 1:
            _emulated("copy")                 # host data written into device memory
        _emulated("op", "setitem")
        super().__setitem__(_host(key), _host(value))

    def astype(self, dtype, *args, **kwargs):
        _emulated("op", "astype")
        _emulated("allocation")
        return _device(self.view(np.ndarray).astype(dtype, *args, **kwargs))

    def copy(self, order="C"):
        _emulated("op", "copy")
        _emulated("allocation")
        return _device(self.view(np.ndarray).copy(order))

    def fill(self, value):
        _emulated("op", "fill")
        self.view(np.ndarray).fill(value)

    def _read(self):
        _emulated("copy")
        _emulated("sync")
        return self.view(np.ndarray)

    def __float__(self):
        return float(self._read())

    def __int__(self):
        return int(self._read())

    def __index__(self):
        return int(self._read())

    def __bool__(self):
        return bool(self._read())

    def item(self, *args):
        return self._read().item(*args)

    def tolist(self):
        return self._read().tolist()


class DeviceNumpy:
    """numpy as the array module of an emulated device: what it creates is a DeviceArray.
    Arrays start zeroed, so a launch that is only recorded, not run, leaves no garbage."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def _new(shape, dtype, fill=None) -> DeviceArray:
        _emulated("allocation")
        if fill is not None:
            _emulated("op", "fill")
        return np.full(shape, 0 if fill is None else fill, dtype).view(DeviceArray)

    def empty(self, shape, dtype=np.float64):
        return self._new(shape, dtype)

    def zeros(self, shape, dtype=np.float64):
        return self._new(shape, dtype, 0)

    def ones(self, shape, dtype=np.float64):
        return self._new(shape, dtype, 1)

    def full(self, shape, fill_value, dtype=None):
        return self._new(shape, dtype or np.asarray(fill_value).dtype, fill_value)

    def arange(self, *args, **kwargs):
        _emulated("allocation")
        _emulated("op", "arange")
        return np.arange(*args, **kwargs).view(DeviceArray)

    def asarray(self, a, dtype=None):
        if isinstance(a, DeviceArray):
            return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
        _emulated("allocation")
        _emulated("copy")
        return np.array(a, dtype=dtype).view(DeviceArray)

    def to_host(self, a) -> np.ndarray:
        """A device array's values on the host: a copy, and the wait for the device."""
        if isinstance(a, DeviceArray):
            return a._read().copy()
        return np.asarray(a)
