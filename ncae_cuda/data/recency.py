"""Recency weights: a user's rows as the network reads them to score items, latest entries first.

Leave-one-out by time holds out each user's latest interaction, and the items a user took just
before it are the best clue to it. With recency_boost > 0 the row a user-based model encodes to
score items (validation, test, recommend) weighs entry p

    w_p = 1 + recency_boost * 2^(-r_p / recency_halflife),   r_p = the user's entries later than p,

so the latest weighs 1 + boost and an entry halflife places earlier half as much above 1; entries
of equal time share r (their number of strictly later ones), and undated ones (data.NO_TIME)
count as the earliest. Training rows stay the paper's 0/1: the weights steer what is scored, not
what is learned (trained on weighted rows, the model scored lower on validation).
"""
from __future__ import annotations

import numpy as np

from .interactions import DataError, Interactions


def later_counts(users: np.ndarray, timestamps: np.ndarray, n_users: int) -> np.ndarray:
    """(nnz,) int64: for each entry, how many entries of its user have a strictly later time."""
    nnz = len(users)
    order = np.lexsort((timestamps, users))            # by user, then time (no negation:
    users_sorted = users[order]                        # NO_TIME is int64's least)
    times_sorted = timestamps[order]
    starts_run = np.ones(nnz, bool)                    # a run: one user's entries of one time
    starts_run[1:] = ((users_sorted[1:] != users_sorted[:-1])
                      | (times_sorted[1:] != times_sorted[:-1]))
    run_starts = np.flatnonzero(starts_run)
    run_end = np.append(run_starts[1:], nnz)[np.cumsum(starts_run) - 1]     # (nnz,) sorted
    user_end = np.cumsum(np.bincount(users, minlength=n_users))             # (n_users,)
    later = np.empty(nnz, np.int64)
    later[order] = user_end[users_sorted] - run_end   # the user's entries after the run
    return later


def weights(data: Interactions, boost: float, halflife: float, name: str) -> np.ndarray:
    """(nnz,) float32 w_p of data's entries (the module's docstring); DataError where data has
    no timestamps, naming it as `name`."""
    if data.timestamps is None:
        raise DataError(f"{name} has no timestamps: recency_boost weighs each user's "
                        "interactions by how recent they are")
    later = later_counts(data.users, data.timestamps, data.n_users)
    return (1.0 + boost * np.exp2(-later / halflife)).astype(np.float32)
