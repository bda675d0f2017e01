"""NCAE (Neural Collaborative Autoencoder) recommender: CUDA kernels and a Numba CPU backend."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# The package's face, each name imported from its module as it is first read (PEP 562):
# `python -m ncae_cuda.train` imports the package before the command's shim runs, and a Ctrl-C
# in what the face's modules import (numpy, Numba, SciPy: most of a command's start) was a
# traceback there; the shim loads them within cli.exit_with, which ends the command in a line.
_FACE = {"NCAE": ".model.estimator", "BlendedNCAE": ".model.blend",
         "make_model": ".runs.factory", "load_model": ".runs.factory",
         "NotFitted": ".model.base", "Unsupported": ".model.base"}
__all__ = [*_FACE, "__version__"]

if TYPE_CHECKING:       # the same names, as type checkers and the docs' reader (griffe) see them
    from .model.base import NotFitted, Unsupported  # noqa: F401  (the face's: re-exported)
    from .model.blend import BlendedNCAE  # noqa: F401
    from .model.estimator import NCAE  # noqa: F401
    from .runs.factory import load_model, make_model  # noqa: F401


def __getattr__(name: str):
    """A name of the face, imported from its module as it is first read."""
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_FACE[name], __name__), name)
    globals()[name] = value             # read as a plain attribute from now on
    return value


def __dir__() -> list[str]:
    """The module's names, the face's among them before they are read."""
    return sorted({*globals(), *__all__})
