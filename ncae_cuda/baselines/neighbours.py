"""Item-item neighbourhood weights of the two neighbourhood baselines, from a users x items
matrix X of ones, each kept sparse: a row's k largest positive entries, the diagonal zero.

- item-kNN, cosine with shrinkage (Sarwar et al. 2001; the shrink term as Dacrema et al.,
  RecSys 2019, tune it): sim(i, j) = x_i·x_j / (|x_i| |x_j| + shrink), x_i item i's column of
  X. `cosine` keeps each item j's k most similar items i (row j); a user's score for j is the
  sum of sim(i, j) over the items i of theirs among j's neighbours: X @ Sᵀ.
- RP3beta (Paudel et al. 2017, after P3alpha of Cooper et al. 2014): a two-step random walk
  item -> user -> item, each step's probabilities raised to alpha, the arrival item's
  popularity to the power beta dividing it: W = (P_iu^α P_ui^α) diag(pop^-β), P_ui X
  row-normalised, P_iu Xᵀ row-normalised. `rp3beta` keeps each row i's k largest (the items a
  walk from i reaches most); a user's scores are X @ W.

The `implicit` library's nearest_neighbours has neither: its similarity has no shrink term,
and it picks the top k before any such term could apply. Both are computed here a block of
rows at a time, so that no items x items matrix is held dense: a block's dense rows and the
kept entries alone.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp

BLOCK_ENTRIES = 2**24              # of one block's dense rows: 128 MiB in float64

Rows = Callable[[int, int], np.ndarray]      # (start, stop) -> (stop - start, items) float64


def cosine(X: sp.csr_matrix, shrink: float, k: int) -> sp.csr_matrix:
    """(items, items) float64: row j holds the k items i most similar to item j, by cosine
    with shrinkage (the module's docstring), sorted largest first; scores are X @ Sᵀ."""
    columns = X.T.tocsr().astype(np.float64)                              # (items, users)
    norms = np.sqrt(columns.multiply(columns).sum(axis=1).A1)             # (items,)
    X = X.astype(np.float64)

    def rows(start: int, stop: int) -> np.ndarray:
        dots = (columns[start:stop] @ X).toarray()                       # (b, items)
        scale = np.outer(norms[start:stop], norms) + shrink              # (b, items)
        # an item no user holds has no dot above 0: 0, not 0/0, where shrink is 0
        return np.divide(dots, scale, out=np.zeros_like(dots), where=dots > 0)
    return top_k_rows(X.shape[1], rows, k)


def rp3beta(X: sp.csr_matrix, alpha: float, beta: float, k: int) -> sp.csr_matrix:
    """(items, items) float64 W of RP3beta (the module's docstring): row i holds its k largest
    entries, sorted largest first; scores are X @ W."""
    X = X.astype(np.float64)
    popularity = X.sum(axis=0).A1                                         # (items,)
    walk_to_item = _row_normalised(X).power(alpha)                       # (users, items)
    walk_to_user = _row_normalised(X.T.tocsr()).power(alpha)             # (items, users)
    # an item no user holds is reached by no walk: its column is 0, not 0^-β
    penalty = np.zeros_like(popularity)                                   # (items,)
    np.power(popularity, -beta, out=penalty, where=popularity > 0)

    def rows(start: int, stop: int) -> np.ndarray:
        return (walk_to_user[start:stop] @ walk_to_item).toarray() * penalty   # (b, items)
    return top_k_rows(X.shape[1], rows, k)


def _row_normalised(A: sp.csr_matrix) -> sp.csr_matrix:
    """A with each row divided by its sum (an empty row stays empty)."""
    sums = A.sum(axis=1).A1
    return sp.csr_matrix(sp.diags(1 / np.where(sums > 0, sums, 1)) @ A)


def top_k_rows(n: int, rows: Rows, k: int) -> sp.csr_matrix:
    """(n, n) csr: of each row of the (n, n) matrix `rows` gives in blocks, its k largest
    positive entries off the diagonal, in descending order (on a tie, the lower column first,
    so that a fit is the same on every machine): the order first_k relies on."""
    block = max(1, BLOCK_ENTRIES // max(n, 1))
    counts, columns, values = np.zeros(n, np.int64), [], []
    for start in range(0, n, block):
        stop = min(start + block, n)
        dense = rows(start, stop)                                         # (b, n)
        dense[np.arange(stop - start), np.arange(start, stop)] = 0.0
        keep = dense > 0
        if k < n:                  # the k-th largest of each row; ties with it are candidates
            kth = -np.partition(-dense, k - 1, axis=1)[:, k - 1]         # (b,)
            keep &= dense >= kth[:, None]
        row, col = np.nonzero(keep)
        value = dense[row, col]
        order = np.lexsort((col, -value, row))
        row, col, value = row[order], col[order], value[order]
        first = np.arange(len(row)) - np.searchsorted(row, row) < k       # past ties dropped
        counts[start:stop] = np.bincount(row[first], minlength=stop - start)
        columns.append(col[first])
        values.append(value[first])
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_matrix((np.concatenate(values), np.concatenate(columns), indptr), shape=(n, n))


def first_k(S: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """S (each row sorted largest first, as `cosine` and `rp3beta` give it) with each row's
    first k entries: what the same fit gives at a smaller k."""
    counts = np.minimum(np.diff(S.indptr), k)                             # (rows,)
    position = np.arange(S.nnz) - np.repeat(S.indptr[:-1], np.diff(S.indptr))
    kept = position < k
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_matrix((S.data[kept], S.indices[kept], indptr), shape=S.shape)
