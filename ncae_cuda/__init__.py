"""NCAE (Neural Collaborative Autoencoder) recommender: CUDA kernels and a Numba CPU backend."""
__version__ = "0.1.0"

from .model.estimator import NCAE  # noqa: E402  (after __version__, which estimator records)
from .model.blend import BlendedNCAE  # noqa: E402
from .model.base import NotFitted, Unsupported  # noqa: E402
from .runs.factory import load_model, make_model  # noqa: E402

__all__ = ["NCAE", "BlendedNCAE", "make_model", "load_model", "NotFitted", "Unsupported",
           "__version__"]
