"""cuBLAS's SGEMM through ctypes, on a handle of the GPU backend's own.

CuPy's binding (cupy_backends.cuda.libs.cublas, CuPy 14) refuses every call while a stream is
being captured into a CUDA graph: it raises NotImplementedError before it reaches cuBLAS. cuBLAS
itself captures SGEMM (since CUDA 12.2 its workspace comes from the stream-ordered allocator),
and the training step is captured whole (--cuda-graphs), so the step's products go through here:
the same library CuPy loaded (found the way CuPy finds it, by cuda.pathfinder), one handle per
device, and each call names the stream it runs on.
"""
from __future__ import annotations

import ctypes
import functools

OP_N, OP_T = 0, 1                       # cublasOperation_t
DEFAULT_MATH, TF32_TENSOR_OP_MATH = 0, 3    # cublasMath_t: float32 products, or on TF32 tensor
                                            # cores (inputs rounded to TF32, float32 sums)
_SUCCESS = 0
_p, _i = ctypes.c_void_p, ctypes.c_int


@functools.lru_cache(maxsize=None)
def library() -> ctypes.CDLL:
    """libcublas, as CuPy's [ctk] extra or a CUDA toolkit installs it, with the signatures of
    the calls made here."""
    from cuda.pathfinder import load_nvidia_dynamic_lib
    lib = ctypes.CDLL(load_nvidia_dynamic_lib("cublas").abs_path)
    lib.cublasCreate_v2.argtypes = [ctypes.POINTER(_p)]
    lib.cublasSetStream_v2.argtypes = [_p, _p]
    lib.cublasSetMathMode.argtypes = [_p, _i]
    lib.cublasSgemm_v2.argtypes = [_p, _i, _i, _i, _i, _i, _p, _p, _i, _p, _i, _p, _p, _i]
    lib.cublasGetStatusName.argtypes = [_i]
    lib.cublasGetStatusName.restype = ctypes.c_char_p
    for name in ("cublasCreate_v2", "cublasSetStream_v2", "cublasSetMathMode", "cublasSgemm_v2"):
        getattr(lib, name).restype = _i
    return lib


def _check(status: int, call: str) -> None:
    if status != _SUCCESS:
        name = library().cublasGetStatusName(status).decode()
        raise RuntimeError(f"{call} failed: {name} ({status})")


class Handle:
    """A cuBLAS handle on the current CUDA device (created once; it lives as long as the
    process: cuBLAS handles are few and cheap to keep)."""

    def __init__(self):
        self.handle = _p()
        _check(library().cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        # alpha and beta are read from host memory (the default pointer mode): captured as values
        self._one, self._zero = ctypes.c_float(1.0), ctypes.c_float(0.0)

    def sgemm(self, stream: int, trans_a: int, trans_b: int, m: int, n: int, k: int,
              a: int, lda: int, b: int, ldb: int, c: int, ldc: int, accumulate: bool,
              tf32: bool = False) -> None:
        """Column-major c (m, n) = op(a) (m, k) @ op(b) (k, n) (+ c where accumulate), on
        `stream`; a, b and c are device pointers. tf32: on TF32 tensor cores where the GPU has
        them (Ampere and later; cuBLAS keeps to float32 where not)."""
        lib = library()
        _check(lib.cublasSetStream_v2(self.handle, stream), "cublasSetStream")
        # the handle's math mode is read when the call is made (and captured with it)
        _check(lib.cublasSetMathMode(self.handle, TF32_TENSOR_OP_MATH if tf32 else DEFAULT_MATH),
               "cublasSetMathMode")
        beta = self._one if accumulate else self._zero
        _check(lib.cublasSgemm_v2(self.handle, trans_a, trans_b, m, n, k,
                                  ctypes.byref(self._one), a, lda, b, ldb, ctypes.byref(beta),
                                  c, ldc), "cublasSgemm")
