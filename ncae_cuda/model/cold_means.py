"""What an explicit model predicts at a cold entry: one whose user or item has no rating in the
fit data, where the network has learnt nothing (an empty row encodes to a constant, an unseen
column keeps its random draw).

A new user's rating of a known item is the item's mean rating, a known user's of a new item the
user's mean, each shrunk toward the fit data's mean as if SHRINK more ratings at that mean were
there; where both are new, the fit data's mean. On MovieLens 100K cut by time this beats the
plain means and the fit data's mean (docs/growing-data.md, Cold entries).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

SHRINK = 5      # ratings at the fit data's mean a user's or item's mean is shrunk with


def cold_at(user_counts: np.ndarray, item_counts: np.ndarray, users: np.ndarray,
            items: np.ndarray) -> np.ndarray:
    """(n,) bool: whether (users[i], items[i]) is cold, its user or item with no entry in the
    fit data, of its entries a user and an item (user_counts, item_counts)."""
    return (user_counts[users] == 0) | (item_counts[items] == 0)


def shrunk_means(seen: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """((n_users,), (n_items,)) float64 each user's and item's mean rating in `seen` (the fit
    data's users x items ratings) shrunk toward the fit data's mean (see the module's
    docstring); one with no entry is the fit data's mean itself (its SHRINK ratings' alone)."""
    ratings = seen.data.astype(np.float64)
    mean = ratings.mean()
    user_counts = np.diff(seen.indptr)                                       # (n_users,)
    item_counts = np.bincount(seen.indices, minlength=seen.shape[1])         # (n_items,)
    entry_users = np.repeat(np.arange(seen.shape[0]), user_counts)          # (nnz,)
    user_sums = np.bincount(entry_users, ratings, minlength=seen.shape[0])
    item_sums = np.bincount(seen.indices, ratings, minlength=seen.shape[1])
    return ((user_sums + SHRINK * mean) / (user_counts + SHRINK),
            (item_sums + SHRINK * mean) / (item_counts + SHRINK))


def new_user_ratings(means: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """(n_items,) float32 what a user with no entry in the fit data is predicted at each item,
    of `means` (shrunk_means' of the fit data: each item's shrunk mean, the fit data's mean at
    an item with none): cold_ratings' of such a user, which recommend ranks the items by."""
    return means[1].astype(np.float32)


def cold_ratings(means: tuple[np.ndarray, np.ndarray], user_counts: np.ndarray,
                 users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """(n,) float32 the shrunk means (see the module's docstring) at cold entries (users[i],
    items[i]) of the fit data, of `means` (its shrunk_means') and `user_counts` (its entries a
    user): a new user's the item's (the fit data's mean where the item is new too), a known
    user's the user's."""
    user_means, item_means = means
    new_user = user_counts[users] == 0
    return np.where(new_user, item_means[items], user_means[users]).astype(np.float32)
