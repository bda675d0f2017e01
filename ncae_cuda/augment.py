"""Column popularity and the implicit loss's weights c_j on unobserved entries.

Popularity weighting (the paper's NCAE): c_j = c0 * f_j^w / sum_k f_k^w, f_j = column j's share
of the training interactions, so a popular item the user did not touch is stronger evidence of
dislike than an obscure one. Uniform weighting (the paper's NCAE-) gives every column one c.
"""
from __future__ import annotations

import numpy as np


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
