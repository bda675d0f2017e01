"""The GPU backend's products: cuBLAS through ops/cublas.py, launched eagerly and captured into a
CUDA graph (CuPy's own binding refuses a capturing stream), against float64 numpy."""
import itertools

import numpy as np
import pytest

from ncae_cuda import ops
from ncae_cuda.ops import cublas, reference
from ncae_cuda.ops.conformance import TF32_TOLERANCE
from ncae_cuda.ops.conformance import TOLERANCE as F32_RTOL


def _libcublas_found() -> bool:
    try:
        cublas.library()
    except Exception:           # no cuda.pathfinder, or it finds no libcublas
        return False
    return True


@pytest.mark.skipif(not _libcublas_found(), reason="no libcublas (pip install 'ncae-cuda[cuda13]')")
def test_the_binding_reaches_cublas():
    """Where there is no GPU, cuBLAS itself answers (the library, its symbols and the status
    names are right); where there is one, a handle is made."""
    if ops.HAS_CUDA:
        assert cublas.Handle().handle.value
    else:
        with pytest.raises(RuntimeError, match=r"cublasCreate failed: CUBLAS_STATUS_\w+ \(\d+\)"):
            cublas.Handle()
    lib = cublas.library()              # the math mode's call is bound: a null handle is refused
    status = lib.cublasSetMathMode(None, cublas.TF32_TENSOR_OP_MATH)
    assert lib.cublasGetStatusName(status) == b"CUBLAS_STATUS_NOT_INITIALIZED"


CASES = list(itertools.product([False, True], [False, True], [False, True]))
# the TF32 product's (M, N, K): cuBLAS may take a plain float32 kernel for a small or ragged
# product (TF32_TENSOR_OP_MATH allows tensor cores, it does not promise them), whose error then
# sits below the TF32 test's lower bound; sides of multiples of 16 and over a hundred are
# tensor-core products
TF32_SHAPE = (128, 96, 160)


def _operands(rng, trans_a, trans_b, M=37, N=29, K=53):
    a = rng.normal(size=(K, M) if trans_a else (M, K)).astype(np.float32)
    b = rng.normal(size=(N, K) if trans_b else (K, N)).astype(np.float32)
    out = rng.normal(size=(M, N)).astype(np.float32)
    expect = out.astype(np.float64)
    return a, b, out, expect


@pytest.mark.parametrize("trans_a, trans_b, accumulate", CASES)
def test_gemm_eager_and_replayed_from_a_graph(gpu, trans_a, trans_b, accumulate):
    rng = np.random.default_rng(7)
    a, b, out, expect = _operands(rng, trans_a, trans_b)
    reference.gemm(expect, a.astype(np.float64), b.astype(np.float64), trans_a, trans_b,
                   accumulate)
    with gpu.session():
        d_a, d_b = gpu.to_device(a), gpu.to_device(b)
        eager = gpu.to_device(out)
        gpu.gemm(eager, d_a, d_b, trans_a, trans_b, accumulate)
        np.testing.assert_allclose(gpu.to_host(eager), expect, rtol=1e-5, atol=1e-4)

        replayed = gpu.to_device(out)
        replay = gpu.capture(lambda: gpu.gemm(replayed, d_a, d_b, trans_a, trans_b, accumulate))
        np.testing.assert_array_equal(gpu.to_host(replayed), out)    # captured, not run
        replay()
        np.testing.assert_allclose(gpu.to_host(replayed), expect, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("trans_a, trans_b, accumulate", CASES)
def test_gemm_on_tf32_eager_and_replayed(gpu, trans_a, trans_b, accumulate):
    """tf32: within TF32's precision of float64's product of the inputs as they are (however
    the GPU rounds them to TF32), and farther from it than a float32 product comes: the inputs
    were rounded. A GPU without TF32 (before Ampere) fails here."""
    rng = np.random.default_rng(8)
    a, b, out, expect = _operands(rng, trans_a, trans_b, *TF32_SHAPE)
    reference.gemm(expect, a.astype(np.float64), b.astype(np.float64), trans_a, trans_b,
                   accumulate)
    scale = np.abs(expect).max()
    with gpu.session():
        d_a, d_b = gpu.to_device(a), gpu.to_device(b)
        eager = gpu.to_device(out)
        gpu.gemm(eager, d_a, d_b, trans_a, trans_b, accumulate, tf32=True)
        replayed = gpu.to_device(out)
        replay = gpu.capture(lambda: gpu.gemm(replayed, d_a, d_b, trans_a, trans_b, accumulate,
                                              tf32=True))
        replay()
        for got in (eager, replayed):
            error = np.abs(gpu.to_host(got) - expect).max() / scale
            assert 5 * F32_RTOL < error < TF32_TOLERANCE        # ~3e-4 rounding to the nearest
