"""Shared fixtures: the op backends every backend-parametrized test runs on, and the real data
sets, where $NCAE_CUDA_DATA names a folder with an extracted copy (as it does for the CLI)."""
import os
from pathlib import Path

import pytest
from helpers import missing_extra

from ncae_cuda import ops
from ncae_cuda.data import datasets
from ncae_cuda.ops.emulator import CXX, emulated_backend

# cpu: Numba. gpu-emulated: the CUDA kernels and their launchers, run on the CPU (g++).
# gpu: the same on a CUDA device.
GPUS = [
    pytest.param("gpu-emulated", marks=pytest.mark.skipif(CXX is None, reason="no g++")),
    pytest.param("gpu", marks=pytest.mark.skipif(not ops.HAS_CUDA, reason=ops.NO_CUDA_REASON)),
]
BACKENDS = ["cpu", *GPUS]


def pytest_addoption(parser):
    parser.addoption(
        "--cuda-unpooled", action="store_true",
        help="every CuPy array its own cudaMalloc (CuPy's memory pool off), so that under "
             "compute-sanitizer an access past an array's end leaves its allocation rather than "
             "landing unseen in the pool's next block (bench/gpu_check.sh sanitize)")


def pytest_configure(config):
    """--cuda-unpooled, where there is a GPU (the emulated one's arrays are numpy's)."""
    if config.getoption("cuda_unpooled") and ops.HAS_CUDA:
        import cupy
        cupy.cuda.set_allocator(None)


def pytest_runtest_setup(item):
    """@pytest.mark.extra(NAME): skipped where the extra is not installed, saying which; with
    optional=True the test runs either way (it takes another path with the extra). CI runs the
    suite with the quick start's install, then `-m extra` once the extras are in."""
    for mark in item.iter_markers("extra"):
        reason = missing_extra(mark.args[0])
        if reason and not mark.kwargs.get("optional"):
            pytest.skip(reason)


@pytest.fixture(scope="session")
def emulated_gpu(tmp_path_factory):
    return emulated_backend(tmp_path_factory.mktemp("cuda-emulator"))


def backend_named(name: str, request):
    """The backend of a test parameter's name: NCAE(device=...) takes it as it is."""
    if name == "gpu-emulated":
        return request.getfixturevalue("emulated_gpu")
    return ops.get_backend(name)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Each fast backend in turn, to be compared with ops.reference."""
    return backend_named(request.param, request)


@pytest.fixture(params=GPUS)
def gpu(request):
    """Each GPU backend in turn: the emulated one, and a real one where there is a GPU."""
    return backend_named(request.param, request)


@pytest.fixture
def gpu_cli(request, monkeypatch):
    """For a CLI test on the GPU backends: what --device gpu gets (the CLI takes a name)."""
    def use(name: str) -> None:
        chosen, get_backend = backend_named(name, request), ops.get_backend
        monkeypatch.setattr(ops, "get_backend",
                            lambda device: chosen if device == "gpu" else get_backend(device))
    return use


@pytest.fixture
def shared_data() -> Path:
    """The folder $NCAE_CUDA_DATA names, holding ml-100k/ (never copied into the repository);
    skips where it is not set or holds no MovieLens 100K."""
    folder = Path(os.environ.get(datasets.DATA_ENV, "")).expanduser()
    if not os.environ.get(datasets.DATA_ENV) or not (folder / "ml-100k" / "u.data").is_file():
        pytest.skip(f"no MovieLens 100K in ${datasets.DATA_ENV}")
    return folder
