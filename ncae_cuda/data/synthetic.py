"""The synthetic data sets: a seeded generator of users, items, ratings and timestamps with
learnable structure, in a few shapes (PRESETS), from a tiny one for tests to the paper's ML-10M
and the HetRec shapes. python -m ncae_cuda.datasets lists them as data sets (synthetic-NAME).
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..machine import cores
from .interactions import DataError, Interactions


@dataclass(frozen=True)
class Preset:
    n_users: int
    n_items: int
    nnz: int                        # interactions aimed at; the result is within a few percent
    zipf: float                     # item popularity: the item ranked r draws like r^-zipf


PRESETS = {
    "tiny": Preset(60, 50, 600, zipf=0.8),                  # for tests
    "small": Preset(1_000, 800, 60_000, zipf=1.1),          # ML-100K-like density
    "ml10m": Preset(69_878, 10_073, 10_000_054, zipf=1.0),  # the paper's ML-10M shape
    "lastfm": Preset(1_892, 17_632, 92_834, zipf=1.0),
    "delicious": Preset(1_867, 69_226, 104_799, zipf=0.7),
    # ML-20M as Mult-VAE is trained on it (ratings >= 4, users with >= 5): the shape of
    # NVIDIA's VAE-CF users/s figures
    "ml20m": Preset(136_677, 20_108, 10_000_000, zipf=1.0),
}

_RANK = 12                      # latent factors behind both choices and ratings
_AFFINITY_WEIGHT = 2.0          # how strongly taste (vs popularity) decides what a user picks
_BLOCK_CELLS = 1 << 22          # user x item scores drawn at once: bounds memory to ~100 MB
_START, _END = 946_684_800, 1_262_304_000      # 2000-01-01 .. 2010-01-01, Unix seconds


def synthetic(preset: str = "small", seed: int = 0) -> Interactions:
    """A seeded synthetic data set with learnable structure, in one of the PRESETS shapes.

    Users and items get `_RANK` latent factors; affinity = user . item factors (about unit
    variance). Item popularity is Zipf-like. Each user's number of interactions is log-normal
    (heavy-tailed), at least 3 (leave-one-out can hold out a test and a validation item). A
    user's items are drawn without replacement with probability proportional to
    popularity * exp(2 * affinity) (Gumbel top-k), so taste, not only popularity, decides them.
    Ratings are 1..5: round(3.55 + 0.9 * centred affinity + user bias + item bias + noise),
    clipped. Timestamps spread each user's interactions over an activity window of a day to
    years within 2000-2009.
    Items and users are ids 1..n; an item nobody drew keeps its column (with no entries).
    """
    if preset not in PRESETS:
        raise DataError(f"unknown synthetic preset {preset!r}; known: {', '.join(PRESETS)}")
    shape = PRESETS[preset]
    rng = np.random.default_rng(seed)
    n_users, n_items = shape.n_users, shape.n_items
    user_factors = (rng.standard_normal((n_users, _RANK)) / np.sqrt(_RANK)).astype(np.float32)
    item_factors = rng.standard_normal((n_items, _RANK)).astype(np.float32)
    popularity_rank = rng.permutation(n_items) + 1                          # (n_items,) 1 = top
    log_popularity = (-shape.zipf * np.log(popularity_rank)).astype(np.float32)
    counts = _activity(shape, rng)                                          # (n_users,)
    users, items, affinity = _draw_items(user_factors, item_factors, log_popularity, counts, rng)
    user_bias = rng.normal(0.0, 0.4, n_users)
    item_bias = rng.normal(0.0, 0.3, n_items)
    noise = rng.normal(0.0, 0.5, len(users))
    # Users pick items they like, so drawn affinities sit above 0: centring them on their mean
    # gives a MovieLens-like spread of stars (mean ~3.5, std ~1.1) instead of mostly 5s.
    taste = 0.9 * (affinity - affinity.mean())
    ratings = np.clip(np.rint(3.55 + taste + user_bias[users] + item_bias[items] + noise), 1, 5)
    timestamps = _timestamps(users, counts, rng)
    order = np.lexsort((timestamps, users))             # each user's history in time order
    return Interactions(
        users=users[order].astype(np.int32), items=items[order].astype(np.int32),
        ratings=ratings[order].astype(np.float32), timestamps=timestamps[order],
        user_ids=np.arange(1, n_users + 1, dtype=np.int64),
        item_ids=np.arange(1, n_items + 1, dtype=np.int64),
        rating_scale=(1.0, 5.0), name=f"synthetic-{preset}")


def _activity(shape: Preset, rng: np.random.Generator) -> np.ndarray:
    """(n_users,) int64 interactions per user: log-normal, >= 3, summing to about shape.nnz."""
    weight = rng.lognormal(0.0, 1.0, shape.n_users)
    share = weight / weight.sum()
    cap = max(3, shape.n_items // 2)
    spread = shape.nnz - 3 * shape.n_users           # interactions beyond everyone's 3
    for _ in range(4):          # clipping at the cap loses some: hand it back to the rest
        counts = np.clip(np.rint(3 + spread * share), 3, cap).astype(np.int64)
        spread += shape.nnz - int(counts.sum())
    return counts


def _draw_items(user_factors: np.ndarray, item_factors: np.ndarray, log_popularity: np.ndarray,
                counts: np.ndarray, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each user's counts[u] distinct items by Gumbel top-k: (users, items, affinity) entries.

    The top k of score + Gumbel noise is a draw of k items without replacement with
    probabilities proportional to exp(score). Users go in blocks of similar count (sorted), so
    the block's largest count wastes little of the partial sort. The noise is drawn here, block
    after block, so that a seed gives the same data however many threads there are; each
    block's scores and partial sort (most of the time, and NumPy lets go of the GIL there) run
    on a pool of threads, a few blocks ahead of the last one collected.
    """
    n_items = len(item_factors)
    block = max(1, _BLOCK_CELLS // n_items)
    by_count = np.argsort(-counts, kind="stable")
    workers = cores()

    def top_k(rows: np.ndarray, exponential: np.ndarray):              # rows (b,) users
        affinity = user_factors[rows] @ item_factors.T                     # (b, n_items)
        keys = log_popularity + _AFFINITY_WEIGHT * affinity
        keys -= np.log(np.maximum(exponential, np.finfo(np.float32).tiny))  # + Gumbel noise
        k = counts[rows]                                                    # (b,)
        k_max = int(k[0])
        top = np.argpartition(keys, n_items - k_max, axis=1)[:, n_items - k_max:]  # (b, k_max)
        # Sort each row's k_max best by key so that its first k[u] are its top k[u].
        top = np.take_along_axis(top, np.argsort(-np.take_along_axis(keys, top, 1), 1), 1)
        taken = np.arange(k_max) < k[:, None]                              # (b, k_max)
        row_index = np.broadcast_to(np.arange(len(rows))[:, None], top.shape)[taken]
        return rows[row_index], top[taken], affinity[row_index, top[taken]]

    parts, pending = [], deque()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for first in range(0, len(by_count), block):
            rows = by_count[first:first + block]
            exponential = rng.standard_exponential((len(rows), n_items), dtype=np.float32)
            pending.append(pool.submit(top_k, rows, exponential))
            if len(pending) > 2 * workers:          # bounds the noise held: ~100 MB a block
                parts.append(pending.popleft().result())
        parts += [future.result() for future in pending]
    users, items, affinity = (np.concatenate(column) for column in zip(*parts))
    return users, items, affinity.astype(np.float64)


def _timestamps(users: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(nnz,) int64 seconds: each user is active over a window whose length grows with their
    activity (a day to years), starting at a random time; their interactions fall in it."""
    day = 86_400
    window = np.exp(rng.normal(np.log(30 * day), 1.5, len(counts))) * np.sqrt(counts / 20)
    window = np.clip(window, day, (_END - _START) / 2)                       # (n_users,)
    start = _START + rng.random(len(counts)) * (_END - _START - window)
    return (start[users] + rng.random(len(users)) * window[users]).astype(np.int64)
