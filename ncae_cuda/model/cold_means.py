"""What an explicit model predicts at a cold entry: one whose user or item has no rating in the
fit data, where the network has learnt nothing (an empty row encodes to a constant, an unseen
column keeps its random draw).

A new user's rating of a known item is the item's mean rating, a known user's of a new item the
user's mean, each shrunk toward the fit data's mean as if SHRINK more ratings at that mean were
there; where both are new, the fit data's mean. On MovieLens 100K cut by time this beats the
plain means and the fit data's mean (docs/growing-data.md, Cold entries).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

SHRINK = 5      # ratings at the fit data's mean a user's or item's mean is shrunk with


def cold_at(user_counts: np.ndarray, item_counts: np.ndarray, users: np.ndarray,
            items: np.ndarray) -> np.ndarray:
    """(n,) bool: whether (users[i], items[i]) is cold, its user or item with no entry in the
    fit data, of its entries a user and an item (user_counts, item_counts)."""
    return (user_counts[users] == 0) | (item_counts[items] == 0)


@dataclass(frozen=True)
class ShrunkMeans:
    """Each user's and item's mean rating of the fit data shrunk toward its mean (see the
    module's docstring); one with no entry the fit data's mean itself (its SHRINK ratings'
    alone)."""
    users: np.ndarray           # (n_users,) float64
    items: np.ndarray           # (n_items,) float64
    mean: float                 # the fit data's mean rating

    def of_new_users(self, users: np.ndarray, ratings: np.ndarray, n_users: int) -> np.ndarray:
        """(n_users,) float64 the shrunk means of users the fit data does not have, of their
        ratings (users[k] gave ratings[k]): what their rows would have had in it."""
        return _shrunk(users, ratings, n_users, self.mean)


def shrunk_means(seen: sp.csr_matrix) -> ShrunkMeans:
    """The ShrunkMeans of `seen` (the fit data's users x items ratings)."""
    ratings = seen.data.astype(np.float64)
    mean = float(ratings.mean())
    entry_users = np.repeat(np.arange(seen.shape[0]), np.diff(seen.indptr))     # (nnz,)
    return ShrunkMeans(_shrunk(entry_users, ratings, seen.shape[0], mean),
                       _shrunk(seen.indices, ratings, seen.shape[1], mean), mean)


def _shrunk(keys: np.ndarray, ratings: np.ndarray, n: int, mean: float) -> np.ndarray:
    """(n,) float64 each key's (0 <= key < n) mean rating with SHRINK ratings at `mean`
    beside its own."""
    ratings = ratings.astype(np.float64)
    return ((np.bincount(keys, ratings, minlength=n) + SHRINK * mean)
            / (np.bincount(keys, minlength=n) + SHRINK))


def new_user_ratings(means: ShrunkMeans) -> np.ndarray:
    """(n_items,) float32 what a user with no entry in the fit data is predicted at each item,
    of `means` (the fit data's: each item's shrunk mean, the fit data's mean at an item with
    none): cold_ratings' of such a user, which recommend ranks the items by."""
    return means.items.astype(np.float32)


def cold_ratings(means: ShrunkMeans, user_counts: np.ndarray, users: np.ndarray,
                 items: np.ndarray) -> np.ndarray:
    """(n,) float32 the shrunk means (see the module's docstring) at cold entries (users[i],
    items[i]) of the fit data, of `means` (its ShrunkMeans) and `user_counts` (its entries a
    user): a new user's the item's (the fit data's mean where the item is new too), a known
    user's the user's; recommend ranks a known user's new items by them too."""
    new_user = user_counts[users] == 0
    return np.where(new_user, means.items[items], means.users[users]).astype(np.float32)
