"""Op backends behind one interface: `reference` (numpy), `cpu` (Numba) and `gpu` (CUDA via CuPy).

Every backend has the same op functions (see reference.py), `xp` (its array module for the
dense algebra), `to_device` / `to_host`, `session()` (the context to train and evaluate in)
and `name`: the CPU ones as modules, the GPU one as an object bound to the current device.
`get_backend` picks one.
"""
from __future__ import annotations

import importlib

from ..errors import NcaeError, SettingError


def _cuda_devices() -> tuple[int, str]:
    """(number of CUDA devices CuPy sees, why none when 0)."""
    try:
        import cupy
    except ImportError:
        return 0, "CuPy is not installed (pip install 'ncae-cuda[cuda12]' or '[cuda13]')"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:   # no driver, or the driver refuses: CuPy raises its own runtime error
        return 0, f"CuPy finds no usable CUDA device ({e})"
    return n, "" if n else "CuPy finds no CUDA device"


N_CUDA_DEVICES, NO_CUDA_REASON = _cuda_devices()
HAS_CUDA = N_CUDA_DEVICES > 0
BACKENDS = ("reference", "cpu", "gpu")


class BackendUnavailable(NcaeError, RuntimeError):
    """The backend asked for cannot run here: the message says why and what to use."""


def as_backend(device):
    """The ops module a device names (get_backend's names), or `device`, a backend already (what
    has a backend's name, array module and session); SettingError for anything else."""
    if isinstance(device, str):
        return get_backend(device)
    if not all(hasattr(device, part) for part in ("name", "xp", "session")):
        # (before, None or a number was taken for a backend, an AttributeError at the fit)
        raise SettingError("device", f"must be one of auto, {', '.join(BACKENDS)}, or a "
                                     f"backend; got {device!r}")
    return device


def get_backend(device: str = "auto"):
    """The ops module for 'auto' (gpu when there is one, else cpu), 'cpu', 'gpu' or 'reference'."""
    device = backend_name(device)
    if device == "gpu":
        from .gpu import backend
        return backend()
    return importlib.import_module(f"{__name__}.{device}")


def backend_name(device: str = "auto") -> str:
    """The name of the backend get_backend(device) gives, checked as it checks it but not made:
    a command whose work runs in other processes refuses a GPU that is not there up front,
    holding none of the GPU's memory itself."""
    if device == "auto":
        device = "gpu" if HAS_CUDA else "cpu"
    if device not in BACKENDS:
        raise SettingError("device", f"must be one of auto, {', '.join(BACKENDS)}; got "
                                     f"{device!r}")
    if device == "gpu" and not HAS_CUDA:
        raise BackendUnavailable(f"--device gpu needs a CUDA GPU: {NO_CUDA_REASON}")
    return device
