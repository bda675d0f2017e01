"""Choices within the rows of a users x items table, seeded and vectorized (no loop over
rows in Python: ML-20M has 138k users): one random entry a row, the latest entries of a row, a
random order within each row. The splits draw their held-out entries with them.
"""
from __future__ import annotations

import numpy as np

from .interactions import Interactions


def latest_in_row(data: Interactions, among: np.ndarray) -> np.ndarray:
    """(nnz,) bool: the entries of `among` whose time is their user's latest among them."""
    latest = np.full(data.n_users, np.iinfo(np.int64).min)
    np.maximum.at(latest, data.users[among], data.timestamps[among])
    return among & (data.timestamps == latest[data.users])


def pick_one_per_row(rows: np.ndarray, n_rows: int, candidate: np.ndarray,
                      rng: np.random.Generator) -> np.ndarray:
    """(nnz,) bool: one uniformly random candidate entry per row that has candidates.

    O(nnz) without sorting: each entry draws a distinct priority (a permutation, so exactly one
    winner per row) and a row's winner is its candidate with the highest priority.
    """
    priority = rng.permutation(len(rows))
    best = np.full(n_rows, -1, np.int64)
    np.maximum.at(best, rows[candidate], priority[candidate])
    return candidate & (priority == best[rows])


def random_order_within_rows(rows: np.ndarray, n_rows: int, rng: np.random.Generator):
    """Entries sorted by row, in uniformly random order within each row.

    Returns order (nnz,) int64 (a permutation of the entries), pos (nnz,) int64 (the position of
    entry order[i] within its row) and counts (n_rows,) int64 entries per row.
    """
    nnz = len(rows)
    # One distinct int64 key per entry (row major, random minor; n_rows * nnz < 2**63 for any
    # data that fits in memory): a single argsort is several times faster than lexsort.
    order = np.argsort(rows.astype(np.int64) * nnz + rng.permutation(nnz))
    counts = np.bincount(rows, minlength=n_rows)
    starts = np.cumsum(counts) - counts
    pos = np.arange(nnz) - starts[rows[order]]
    return order, pos, counts
