"""Column popularity, the implicit loss's weights c_j, and sparsity-aware data augmentation.

Popularity weighting (the paper's NCAE): c_j = c0 * f_j^w / sum_k f_k^w, f_j = column j's share
of the training interactions, so a popular item the user did not touch is stronger evidence of
dislike than an obscure one. Uniform weighting (the paper's NCAE-) gives every column one c.

Augmentation (the paper's NCAE+): a sparse row, |R_i| / N < eps, gets one extra training row
with its floor(|R_i| * p) most popular columns removed, so the model also learns to recover a
sparse user's taste from their less popular items. Extra rows train; they are never evaluated.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def column_counts(indices: np.ndarray, n_cols: int) -> np.ndarray:
    """(n_cols,) int64 number of training entries in each column of a CSR's `indices`."""
    return np.bincount(indices, minlength=n_cols)


def popularity_weights(counts: np.ndarray, c0: float = 512.0, omega: float = 0.5) -> np.ndarray:
    """(N,) float32 c_j = c0 * f_j^omega / sum_k f_k^omega from per-column counts."""
    if counts.sum() == 0:
        raise ValueError("popularity weights need at least one training interaction")
    share = counts / counts.sum()
    powered = share ** omega
    return (c0 * powered / powered.sum()).astype(np.float32)


def uniform_weights(n_cols: int, c: float = 0.05) -> np.ndarray:
    """(N,) float32 one weight c for every column."""
    return np.full(n_cols, c, np.float32)


def column_weights(cols: np.ndarray, n_cols: int, weighting: str, c0: float, omega: float,
                   uniform_c: float) -> np.ndarray:
    """(n_cols,) float32 implicit weights c_j: popularity weighting from the column of every
    training entry (`cols`), or one uniform c."""
    if weighting == "uniform":
        return uniform_weights(n_cols, uniform_c)
    return popularity_weights(column_counts(cols, n_cols), c0, omega)


def sparse_row_copies(m: sp.csr_matrix, eps: float, p: float) -> sp.csr_matrix:
    """The extra rows of augmentation for the rows x columns training matrix m.

    Popularity is m's column counts; ties are broken towards the lower column index. A copy is
    made only where it drops at least one entry and keeps at least one, so p = 1 (drop all)
    and eps = 0 (no row is sparse) add nothing. Values of kept entries are copied.
    """
    n_rows, n_cols = m.shape
    counts = column_counts(m.indices, n_cols)
    lengths = np.diff(m.indptr)                                     # (rows,)
    drop = np.floor(lengths * p).astype(np.int64)                   # (rows,)
    sparse = (lengths < eps * n_cols) & (drop >= 1) & (drop < lengths)
    indices, data, indptr = [], [], [0]
    for row in np.flatnonzero(sparse):
        cols = m.indices[m.indptr[row]:m.indptr[row + 1]]
        vals = m.data[m.indptr[row]:m.indptr[row + 1]]
        by_popularity = np.lexsort((cols, -counts[cols]))           # most popular first
        kept = np.sort(by_popularity[drop[row]:])                   # back in column order
        indices.append(cols[kept])
        data.append(vals[kept])
        indptr.append(indptr[-1] + len(kept))
    return sp.csr_matrix((np.concatenate(data or [np.zeros(0, m.dtype)]),
                          np.concatenate(indices or [np.zeros(0, np.int32)]), indptr),
                         shape=(len(indptr) - 1, n_cols), dtype=m.dtype)
