"""The machine a run or a bug report is about: the versions of the package and its libraries (and
CUDA's, where CuPy is), and the device a backend runs on. python -m ncae_cuda.check prints them;
the benches record them beside their figures.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

from .. import __version__


def versions() -> dict:
    """The versions a bug report needs: the package's, its libraries', CUDA's where CuPy is."""
    import numba
    import scipy
    found = {"ncae_cuda": __version__, "python": platform.python_version(),
             "numpy": np.__version__, "scipy": scipy.__version__, "numba": numba.__version__}
    try:
        import cupy
    except ImportError:
        return {**found, "cupy": None}
    found["cupy"] = cupy.__version__
    for name, ask in (("cuda_driver", cupy.cuda.runtime.driverGetVersion),
                      ("cuda_runtime", cupy.cuda.runtime.runtimeGetVersion),
                      ("nvrtc", lambda: 1000 * cupy.cuda.nvrtc.getVersion()[0]
                       + 10 * cupy.cuda.nvrtc.getVersion()[1])):
        try:
            v = ask()
            found[name] = f"{v // 1000}.{v % 1000 // 10}"
        except Exception as e:          # no driver: CuPy raises its own runtime errors
            found[name] = f"unknown ({e})"
    return found


def device_facts(device: str) -> dict:
    """What the backend runs on: a GPU's name, memory, compute capability and SM count; the
    CPU's model, cores and memory (the emulated GPU's kernels run on the CPU)."""
    if device == "gpu":
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
        return {"name": props["name"].decode(), "memory_gib": props["totalGlobalMem"] / 2**30,
                "compute_capability": f"{props['major']}.{props['minor']}",
                "sms": props["multiProcessorCount"]}
    model = platform.processor()
    if Path("/proc/cpuinfo").exists():
        model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                      if line.startswith("model name")), model)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"name": model, "cores": os.cpu_count(), "memory_gib": memory}


def describe(device: str, facts: dict) -> str:
    if device == "gpu":
        return (f"{facts['name']}, {facts['memory_gib']:.1f} GiB, compute capability "
                f"{facts['compute_capability']}, {facts['sms']} SMs")
    where = "the CUDA kernels emulated on " if device == "emulated" else ""
    return f"{where}{facts['name']}, {facts['cores']} cores, {facts['memory_gib']:.1f} GiB"
