"""Random test inputs and the float32-vs-float64 comparison shared by the test files."""
import numpy as np
import scipy.sparse as sp

from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR

F32_RTOL = 2e-5   # float32 against float64: a few ulps of accumulated rounding


def random_matrix(rng, n_rows, n_cols, density=0.15, empty_share=0.2) -> sp.csr_matrix:
    """Ratings 1..5 at random entries, a share of the rows left empty."""
    m = sp.random(n_rows, n_cols, density=density, random_state=rng, format="csr",
                  data_rvs=lambda n: rng.integers(1, 6, n).astype(np.float32))
    m = sp.csr_matrix(sp.diags((rng.random(n_rows) >= empty_share).astype(np.float32)) @ m,
                      dtype=np.float32)
    m.eliminate_zeros()
    m.sort_indices()
    return m


def random_rows(rng, n_rows, n_cols, n_batch) -> tuple[sp.csr_matrix, np.ndarray]:
    """A random matrix and n_batch distinct random rows of it, (n_batch,) int32."""
    m = random_matrix(rng, n_rows, n_cols)
    return m, rng.choice(n_rows, n_batch, replace=False).astype(np.int32)


def random_batch(rng, n_rows, n_cols, n_batch, batch_size):
    """A reference Batch of n_batch random rows of a random matrix, padded to batch_size."""
    m, rows = random_rows(rng, n_rows, n_cols, n_batch)
    return ref.cut_batch(CSR.from_scipy(ref, m), rows, batch_size)


def on(backend, batch):
    """The batch's arrays moved to the backend."""
    return type(batch)(*(backend.to_device(x) for x in batch))


def host(backend, x):
    return np.asarray(backend.to_host(x), dtype=np.float64)


def assert_close(actual, expected, rtol=F32_RTOL):
    expected = np.asarray(expected, np.float64)
    scale = max(np.abs(expected).max(initial=0.0), 1.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * scale)
