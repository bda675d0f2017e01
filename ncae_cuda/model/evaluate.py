"""Running a trained network, or the POP baseline, over held-out data: predicted ratings at given
entries, and each evaluated user's rank of their held-out item among all candidate items.

Both go through the backend's ops in batches of rows; metrics.py turns the results into figures.
Ranking is always users x items (the protocol's view), whichever way the model is oriented.

A column shard's network (ncae_cuda/ops/shard.py) does the same in step with the other ranks: every
rank encodes the same rows (their codes are sums the ranks share) and scores its own columns; a
prediction is its owner's, a held-out item's rank the sum of the candidates each rank counts
against its score, and the top M the best of every rank's top M. Where the items are a user-
based shard's columns, `items` names the ones a rank scores and `comm` joins the ranks.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp

from ..ops import reference
from ..ops.common import CSR
from ..ops.shard import Columns
from . import metrics
from .network import Network

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
    encoded from its `inputs` row without dropout (a shard's: the columns it holds)."""
    ops, columns = net.ops, net.layout.columns
    mine = columns.owns(cols)                                          # (nq,) a shard's entries
    query, order = _query_csr(ops, rows[mine], cols[mine] - columns.lo, inputs.shape[0],
                              columns.n)
    targets = np.unique(rows).astype(np.int32)                         # rows with a query
    parts = []
    for start in range(0, len(targets), EVAL_BATCH):
        chunk = targets[start:start + EVAL_BATCH]
        batch = ops.cut_rows(inputs, chunk)
        wanted = ops.cut_rows(query, chunk)
        parts.append(ops.to_host(net.predict_entries(batch, wanted)))
    ours = np.empty(int(mine.sum()), np.float32)
    ours[order] = np.concatenate(parts) if parts else []   # chunks list entries in sorted order
    yhat = np.zeros(len(rows), np.float32)
    yhat[mine] = ours
    return yhat if net.comm is None else net.comm.sum_host(yhat)     # each from its owner


Scorer = Callable[[np.ndarray], object]   # (B,) user indices -> device (B, items) scores of
                                          # every item, or a user-based shard's


def heldout_ranks(ops, score_users: Scorer, exclude: CSR, users: np.ndarray,
                  items: np.ndarray, held: Columns | None = None, comm=None) -> np.ndarray:
    """(n,) int32 rank of items[i] for users[i] among the items not in `exclude` (users x items).

    A shard (held: the items it scores) ranks its items against the held-out item's score,
    which its owner shares, brought in as one more column of the scores, and the ranks add up
    their counts. (The owner counts that column as one of its candidates: it takes it back.)"""
    ranks = np.empty(len(users), np.int32)
    xp = ops.xp
    for start in range(0, len(users), EVAL_BATCH):
        chunk = users[start:start + EVAL_BATCH].astype(np.int32)
        n = len(chunk)
        targets = items[start:start + n].astype(np.int32)
        excluded = ops.cut_rows(exclude, chunk)
        scores = score_users(chunk)                                     # (n, items held)
        if held is not None and not held.whole:
            mine = held.owns(targets)
            targets = np.where(mine, targets - held.lo, held.n).astype(np.int32)
            target = xp.zeros(n, np.float32)                            # the held-out score
            at = ops.to_device(np.flatnonzero(mine))
            target[at] = scores[at, ops.to_device(targets[mine])]
            comm.sum(target, "held-out scores")
            scores = xp.concatenate([scores, target[:, None]], axis=1)  # (n, items held + 1)
        out = ops.xp.empty(n, np.int32)
        ops.rank_heldout(out, scores, ops.to_device(targets), excluded.indptr, excluded.cols)
        if held is not None and not held.whole:
            out -= ops.to_device(mine.astype(np.int32))
            comm.sum(out, "ranks")
        ranks[start:start + n] = ops.to_host(out)
    return ranks


def model_scorer(net: Network, inputs: CSR, based: str) -> Scorer:
    """Scores of a network whose rows are users (based='user') or items ('item').

    Item-based: a user is a column, so a user's scores are every item's output at that column:
    the items' codes (the last hidden layer, computed once here) against the user's output
    embedding, V[users] @ codes^T + c[users]; a shard scores the users it holds and the ranks
    add up the rows (each from its owner), so every rank holds every item's score.
    """
    ops, columns = net.ops, net.layout.columns
    if based == "user":
        return lambda users: net.logits(ops.cut_rows(inputs, users))
    codes = row_codes(net, inputs)                                       # (n_items, K)
    V, c = net.p["V"], net.p["c"]

    def score(users: np.ndarray):
        if net.comm is None:
            users = ops.to_device(users)
            return V[users] @ codes.T + c[users][:, None]                # (B, n_items)
        mine = np.flatnonzero(columns.owns(users))
        scores = ops.xp.zeros((len(users), codes.shape[0]), codes.dtype)
        at, local = ops.to_device(mine), ops.to_device(users[mine] - columns.lo)
        scores[at] = V[local] @ codes.T + c[local][:, None]
        net.comm.sum(scores, "user scores")
        return scores
    return score


def row_codes(net: Network, inputs: CSR):
    """(rows, K_last) last hidden layer of every row of `inputs`, without dropout."""
    n_rows = inputs.shape[0]
    codes = net.ops.xp.empty((n_rows, net.layout.hidden[-1]), net.params.dtype)
    for start in range(0, n_rows, EVAL_BATCH):
        chunk = np.arange(start, min(start + EVAL_BATCH, n_rows), dtype=np.int32)
        codes[start:start + len(chunk)] = net.codes(net.ops.cut_rows(inputs, chunk))
    return codes


def ranking_report(ops, score_users: Scorer, exclude: CSR, users: np.ndarray, items: np.ndarray,
                   cutoffs: tuple[int, ...], user_counts: np.ndarray | None = None,
                   held: Columns | None = None, comm=None) -> dict:
    """HR@M of the held-out entries (users[i], items[i]), Recall@M and NDCG@M of each user's
    held-out set (metrics.py); with `user_counts` (each user's number of inputs) also the table
    of users grouped by it, of each user's figures. held, comm: see heldout_ranks."""
    ranks = heldout_ranks(ops, score_users, exclude, users, items, held, comm)
    result = metrics.ranking_summary(ranks, cutoffs, users)
    if user_counts is not None:
        evaluated, per_user = metrics.per_user_figures(ranks, users, cutoffs)
        result["clusters"] = _clusters(user_counts[evaluated], means=per_user)
    return result


def rating_report(yhat: np.ndarray, ratings: np.ndarray, users: np.ndarray,
                  user_counts: np.ndarray | None = None) -> dict:
    """RMSE of predicted ratings; with `user_counts` also the table of users grouped by it."""
    result = {"rmse": metrics.rmse(yhat, ratings), "entries": len(ratings)}
    if user_counts is not None:
        sq_sum, n = metrics.row_squared_errors(users, yhat, ratings, len(user_counts))
        rated = n > 0
        result["clusters"] = _clusters(user_counts[rated], rmse=(sq_sum[rated], n[rated]))
    return result


def _clusters(counts: np.ndarray, **figures) -> list[dict]:
    """metrics.cluster_table of the evaluated users by their counts; no rows for none (an empty
    held-out part, whose figures are nan)."""
    if not len(counts):
        return []
    return metrics.cluster_table(counts, metrics.cluster_edges(counts), **figures)


def constant_scorer(ops, scores: np.ndarray) -> Scorer:
    """The same (n_items,) scores for every user: the POP baseline."""
    scores = ops.to_device(scores.astype(np.float32))
    return lambda users: ops.xp.tile(scores, (len(users), 1))


def merged_top(idx, vals, ops, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The m best of every rank's m best, idx and vals (ranks, rows, m) on the device: (idx,
    vals), each (rows, m) on the host, best first, ties to the lower column, padding last."""
    idx, vals = ops.to_host(idx), ops.to_host(vals)
    ranks, n, _ = idx.shape
    idx = idx.transpose(1, 0, 2).reshape(n, ranks * m)
    vals = vals.transpose(1, 0, 2).reshape(n, ranks * m)
    column = np.where(idx < 0, np.iinfo(np.int64).max, idx)           # padding after any column
    best = np.lexsort((column, -vals), axis=-1)[:, :m]
    return np.take_along_axis(idx, best, -1), np.take_along_axis(vals, best, -1)


# (B,) rows -> (indptr (B+1,), cols) on the device: the columns each row must not be offered
Excluded = Callable[[np.ndarray], tuple]


def excluded_entries(ops, csr: CSR) -> Excluded:
    """Each row's entries in `csr` (e.g. the items a user has seen) as what top_m excludes."""
    def excluded(rows: np.ndarray) -> tuple:
        batch = ops.cut_rows(csr, rows)
        return batch.indptr, batch.cols
    return excluded


def top_m(ops, score_rows: Scorer, rows: np.ndarray, m: int, excluded: Excluded | None = None,
          candidates=None, held: Columns | None = None, comm=None
          ) -> tuple[np.ndarray, np.ndarray]:
    """(idx, scores), each (len(rows), m) on the host: every row's m best columns, best first.

    Columns in the row's `excluded` entries, outside the `candidates` mask (device (N,) bool),
    or scoring NaN are never offered; ties go to the lower column; a row with fewer than m
    candidates ends in -1 and -inf. Rows go through in batches of EVAL_BATCH. A shard (held:
    the columns it scores, comm: the ranks) finds its own top m, and every rank merges all of
    theirs.
    """
    if held is not None and not held.whole:
        idx, vals = top_m(ops, score_rows, rows, m, excluded, candidates)
        idx[idx >= 0] += held.lo
        return merged_top(comm.gather(ops.to_device(idx), "top idx"),
                          comm.gather(ops.to_device(vals), "top scores"), ops, m)
    xp = ops.xp
    idx = np.empty((len(rows), m), np.int32)
    vals = np.empty((len(rows), m), np.float32)
    if m == 0:                                 # no candidates at all
        return idx, vals
    limit = getattr(ops, "max_topk", None)     # the GPU kernel keeps m per thread block
    for start in range(0, len(rows), EVAL_BATCH):
        chunk = rows[start:start + EVAL_BATCH].astype(np.int32)
        scores = score_rows(chunk)                                           # (B, N)
        if candidates is not None:
            scores = xp.where(candidates, scores, xp.float32(np.nan))
        if excluded is None:
            indptr, cols = xp.zeros(len(chunk) + 1, np.int32), xp.zeros(0, np.int32)
        else:
            indptr, cols = excluded(chunk)
        out_idx = np.empty((len(chunk), m), np.int32)
        out_vals = np.empty((len(chunk), m), np.float32)
        if limit is not None and m > limit:           # beyond the kernel's m: on the host
            reference.topk(out_idx, out_vals, ops.to_host(scores), ops.to_host(indptr),
                           ops.to_host(cols))
        else:
            d_idx, d_vals = xp.empty((len(chunk), m), np.int32), xp.empty((len(chunk), m),
                                                                          np.float32)
            ops.topk(d_idx, d_vals, scores, indptr, cols)
            out_idx, out_vals = ops.to_host(d_idx), ops.to_host(d_vals)
        idx[start:start + len(chunk)] = out_idx
        vals[start:start + len(chunk)] = out_vals
    return idx, vals
