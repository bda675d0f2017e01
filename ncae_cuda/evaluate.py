"""Running a trained network, or the POP baseline, over held-out data: predicted ratings at given
entries, and each evaluated user's rank of their held-out item among all candidate items.

Both go through the backend's ops in batches of rows; metrics.py turns the results into figures.
Ranking is always users x items (the protocol's view), whichever way the model is oriented.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp

from .model import Network
from .ops.common import CSR

EVAL_BATCH = 1024   # rows per evaluation batch: large enough to amortize, small enough for (B, N)


def _query_csr(ops, rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int):
    """The query entries as a rows x cols CSR, and the permutation that sorted them into it."""
    order = np.lexsort((cols, rows))                                   # (nq,)
    m = sp.csr_matrix((np.zeros(len(rows), np.float32), cols[order],
                       np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_rows))])),
                      shape=(n_rows, n_cols))
    return CSR.from_scipy(ops, m), order


def predict_ratings(net: Network, inputs: CSR, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """yhat (nq,) at entries (rows[i], cols[i]) of the model's rows x columns view, each row
    encoded from its `inputs` row without dropout."""
    ops = net.ops
    query, order = _query_csr(ops, rows, cols, *inputs.shape)
    targets = np.unique(rows).astype(np.int32)                         # rows with a query
    parts = []
    for start in range(0, len(targets), EVAL_BATCH):
        chunk = targets[start:start + EVAL_BATCH]
        batch = ops.cut_batch(inputs, chunk, len(chunk))
        wanted = ops.cut_batch(query, chunk, len(chunk))
        parts.append(ops.to_host(net.predict_entries(batch, wanted)))
    yhat = np.empty(len(rows), np.float32)
    yhat[order] = np.concatenate(parts) if parts else []   # chunks list entries in sorted order
    return yhat


Scorer = Callable[[np.ndarray], object]   # (B,) user indices -> device (B, n_items) scores


def heldout_ranks(ops, score_users: Scorer, exclude: CSR, users: np.ndarray,
                  items: np.ndarray) -> np.ndarray:
    """(n,) int32 rank of items[i] for users[i] among the items not in `exclude` (users x items)."""
    ranks = np.empty(len(users), np.int32)
    for start in range(0, len(users), EVAL_BATCH):
        chunk = users[start:start + EVAL_BATCH].astype(np.int32)
        n = len(chunk)
        excluded = ops.cut_batch(exclude, chunk, n)
        out = ops.xp.empty(n, np.int32)
        ops.rank_heldout(out, score_users(chunk),
                         ops.to_device(items[start:start + n].astype(np.int32)),
                         excluded.indptr, excluded.cols)
        ranks[start:start + n] = ops.to_host(out)
    return ranks


def model_scorer(net: Network, inputs: CSR, based: str) -> Scorer:
    """Scores of a network whose rows are users (based='user') or items ('item').

    Item-based: a user's scores are one column of the items x users output, so the whole output
    is computed once (n_items x n_users float32 on the device) and read by user.
    """
    ops = net.ops
    if based == "user":
        return lambda users: net.logits(ops.cut_batch(inputs, users, len(users)))
    n_items = inputs.shape[0]
    full = ops.xp.empty((inputs.shape[1], n_items), net.params.dtype)  # (n_users, n_items)
    for start in range(0, n_items, EVAL_BATCH):
        chunk = np.arange(start, min(start + EVAL_BATCH, n_items), dtype=np.int32)
        batch = ops.cut_batch(inputs, chunk, len(chunk))
        full[:, start:start + len(chunk)] = net.logits(batch).T
    return lambda users: full[ops.to_device(users)]


def constant_scorer(ops, scores: np.ndarray) -> Scorer:
    """The same (n_items,) scores for every user: the POP baseline."""
    scores = ops.to_device(scores.astype(np.float32))
    return lambda users: ops.xp.tile(scores, (len(users), 1))
