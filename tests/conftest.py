"""Shared fixtures: the op backends every backend-parametrized test runs on, and the real data
sets, where $NCAE_CUDA_DATA names a folder with an extracted copy (as it does for the CLI)."""
import os
from pathlib import Path

import pytest

from ncae_cuda import datasets, ops
from ncae_cuda.ops.emulator import CXX, emulated_backend


# cpu: Numba. gpu-emulated: the CUDA kernels and their launchers, run on the CPU (g++).
# gpu: the same on a CUDA device.
BACKENDS = [
    "cpu",
    pytest.param("gpu-emulated", marks=pytest.mark.skipif(CXX is None, reason="no g++")),
    pytest.param("gpu", marks=pytest.mark.skipif(not ops.HAS_CUDA, reason=ops.NO_CUDA_REASON)),
]


@pytest.fixture(scope="session")
def emulated_gpu(tmp_path_factory):
    return emulated_backend(tmp_path_factory.mktemp("cuda-emulator"))


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Each fast backend in turn, to be compared with ops.reference."""
    if request.param == "gpu-emulated":
        return request.getfixturevalue("emulated_gpu")
    return ops.get_backend(request.param)


@pytest.fixture
def shared_data() -> Path:
    """The folder $NCAE_CUDA_DATA names, holding ml-100k/ (never copied into the repository);
    skips where it is not set or holds no MovieLens 100K."""
    folder = Path(os.environ.get(datasets.DATA_ENV, "")).expanduser()
    if not os.environ.get(datasets.DATA_ENV) or not (folder / "ml-100k" / "u.data").is_file():
        pytest.skip(f"no MovieLens 100K in ${datasets.DATA_ENV}")
    return folder
