"""Evaluation figures from predictions and ranks: RMSE, HR@M, Recall@M, NDCG@M, per-cluster
tables.

The model computes predictions and each held-out entry's rank (the rank_heldout op); this module
only does the arithmetic on plain numpy arrays, in float64. The definitions (docs/design.md,
"Evaluation"): rank = number of candidate columns scoring >= the held-out column (ties
count against it; the held-out column itself is not counted, the user's other held-out columns
are), HR@M = [rank < M], averaged over held-out entries. A user's held-out set S is scored as a
whole: an entry of S is in the user's top M where its rank is below M, so

    Recall@M = |{i in S: rank_i < M}| / min(M, |S|)
    NDCG@M   = sum_{i in S, rank_i < M} 1/log2(rank_i + 2)  /  sum_{p < min(M, |S|)} 1/log2(p + 2)

both averaged over users (ties among S count against each of them, so NDCG <= 1). With one
held-out entry a user (leave-one-out) Recall@M is HR@M and NDCG@M is 1/log2(rank + 2) if
rank < M else 0.

Empty inputs give nan (without numpy's empty-mean warning) rather than an error, so a run without
a validation part still prints its table; a nan in a table means "nothing to average".
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def rmse(pred: np.ndarray, target: np.ndarray) -> float:
    """Root mean squared error, accumulated in float64; nan for no entries."""
    err = _errors(pred, target)
    return float(np.sqrt(_mean(err * err)))


def pooled_rmse(*reports: dict) -> dict:
    """{'rmse', 'entries'} of the entries of rating reports ({'rmse', 'entries'} each) taken
    together: the RMSE over all of them, from each report's mean squared error and count."""
    entries = sum(r["entries"] for r in reports)
    squares = sum(r["rmse"] ** 2 * r["entries"] for r in reports if r["entries"])
    return {"rmse": float(np.sqrt(squares / entries)) if entries else float("nan"),
            "entries": entries}


def row_squared_errors(rows: np.ndarray, pred: np.ndarray, target: np.ndarray,
                       n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-row (sum of squared errors (n_rows,) float64, number of entries (n_rows,) int64).

    The input of per-cluster RMSE: a cluster's RMSE is sqrt(sum / count) over its rows, which
    is not the mean of per-row RMSEs.
    """
    err = _errors(pred, target)
    return (np.bincount(rows, weights=err * err, minlength=n_rows),
            np.bincount(rows, minlength=n_rows).astype(np.int64))


def hit_rate(ranks: np.ndarray, m: int) -> np.ndarray:
    """(rows,) float64: 1 where the held-out column ranks in the top m, else 0."""
    return (_check_ranks(ranks, m) < m).astype(np.float64)


def ndcg(ranks: np.ndarray, m: int) -> np.ndarray:
    """(rows,) float64: 1/log2(rank + 2) for ranks in the top m, else 0 (one relevant column)."""
    ranks = _check_ranks(ranks, m)
    gain = np.zeros(len(ranks))
    top = ranks < m
    gain[top] = 1.0 / np.log2(ranks[top] + 2.0)
    return gain


def recall(ranks: np.ndarray, users: np.ndarray, m: int) -> np.ndarray:
    """(evaluated users,) float64 Recall@m of each user's held-out set, users in ascending
    order: ranks[i] is the rank of the held-out entry of users[i] (the module's docstring)."""
    return _recall(ranks, *_held_sets(_check_ranks(ranks, m), users), m)


def set_ndcg(ranks: np.ndarray, users: np.ndarray, m: int) -> np.ndarray:
    """(evaluated users,) float64 NDCG@m of each user's held-out set, users in ascending order,
    against the ideal DCG of a set of its size (the module's docstring)."""
    return _set_ndcg(ranks, *_held_sets(_check_ranks(ranks, m), users), m)


def per_user_figures(ranks: np.ndarray, users: np.ndarray, cutoffs: tuple[int, ...]
                     ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(the evaluated users (U,) ascending, {'hr@M': .., 'recall@M': .., 'ndcg@M': .., each
    (U,) float64}): each user's share of held-out entries in the top M, Recall@M and NDCG@M."""
    ranks = np.asarray(ranks).reshape(-1)
    held, count = _held_sets(ranks, users)
    figures = {}
    for m in cutoffs:
        figures[f"hr@{m}"] = np.bincount(held, weights=hit_rate(ranks, m),
                                         minlength=len(count)) / count
        figures[f"recall@{m}"] = _recall(ranks, held, count, m)
        figures[f"ndcg@{m}"] = _set_ndcg(ranks, held, count, m)
    return np.unique(users), figures


def ranking_summary(ranks: np.ndarray, cutoffs: tuple[int, ...] = (10, 100),
                    users: np.ndarray | None = None) -> dict:
    """{'hr@10': .., 'recall@10': .., 'ndcg@10': .., 'hr@100': .., .., 'rows': n}: HR@M the
    mean over the n held-out entries (rows), Recall@M and NDCG@M over the users (ranks[i] is
    of users[i]'s held-out entry; without users, each entry is its own user's only one)."""
    ranks = np.asarray(ranks).reshape(-1)
    held, count = ((np.arange(len(ranks)), np.ones(len(ranks), np.int64)) if users is None
                   else _held_sets(ranks, users))
    summary = {}
    for m in cutoffs:
        summary[f"hr@{m}"] = _mean(hit_rate(ranks, m))
        summary[f"recall@{m}"] = _mean(_recall(ranks, held, count, m))
        summary[f"ndcg@{m}"] = _mean(_set_ndcg(ranks, held, count, m))
    summary["rows"] = len(ranks)
    return summary


def _recall(ranks: np.ndarray, held: np.ndarray, count: np.ndarray, m: int) -> np.ndarray:
    """(U,) Recall@m of the held-out sets of _held_sets."""
    hits = np.bincount(held, weights=hit_rate(ranks, m), minlength=len(count))
    return hits / np.minimum(m, count)


def _set_ndcg(ranks: np.ndarray, held: np.ndarray, count: np.ndarray, m: int) -> np.ndarray:
    """(U,) NDCG@m of the held-out sets of _held_sets."""
    ideal = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(m) + 2.0))])  # (m + 1,)
    dcg = np.bincount(held, weights=ndcg(ranks, m), minlength=len(count))
    return dcg / ideal[np.minimum(m, count)]


def popularity_scores(train: sp.sparray | sp.spmatrix | np.ndarray) -> np.ndarray:
    """The POP baseline: each column's score is its number of training interactions.

    `train` is the rows x columns training matrix (stored entries count, whatever their values)
    or already a (n_columns,) count array. Returns (n_columns,) float32, the dtype the rank code
    takes; counts below 2**24 are exact in it.
    """
    if sp.issparse(train):
        csr = sp.csr_matrix(train)   # no copy for CSR input
        counts = np.bincount(csr.indices, minlength=csr.shape[1])
    else:
        counts = np.asarray(train)
    if counts.ndim != 1:
        raise ValueError(f"expected a sparse matrix or a 1-d count array, got shape {counts.shape}")
    return counts.astype(np.float32)


def cluster_edges(counts: np.ndarray, n_clusters: int = 5) -> np.ndarray:
    """Lower bounds (ascending int64) of up to n_clusters count ranges of about equal row numbers.

    Edges are the counts at the k/n_clusters quantiles (k = 0..n_clusters-1) of the rows'
    counts, deduplicated: the first is the smallest count, so the ranges cover every row.
    """
    counts = np.sort(np.asarray(counts, np.int64))
    if len(counts) == 0 or n_clusters < 1:
        raise ValueError(f"need rows and n_clusters >= 1, got {len(counts)} rows, {n_clusters}")
    return np.unique(counts[np.arange(n_clusters) * len(counts) // n_clusters])


def cluster_table(counts: np.ndarray, edges: np.ndarray,
                  means: dict[str, np.ndarray] | None = None,
                  rmse: tuple[np.ndarray, np.ndarray] | None = None) -> list[dict]:
    """One dict per cluster of rows grouped by their training count (the paper's Table 3).

    counts: (n_rows,) training entries per row; edges: cluster lower bounds (`cluster_edges`).
    means: per-row metrics, each (n_rows,), averaged within the cluster (e.g. hr@10).
    rmse: (squared-error sum, entry count) per row (`row_squared_errors`), pooled into
    sqrt(sum / count) per cluster. Each dict: {'cluster': '10-24', 'rows': n, <means>.., 'rmse'}.
    """
    counts = np.asarray(counts, np.int64)
    edges = np.asarray(edges, np.int64)
    if len(edges) == 0 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"edges must be non-empty and strictly increasing, got {edges}")
    if len(counts) and counts.min() < edges[0]:
        raise ValueError(f"a row has {counts.min()} entries, below the first edge {edges[0]}")
    cluster = np.searchsorted(edges, counts, side="right") - 1   # (n_rows,) cluster index

    def per_cluster_sum(values):
        return np.bincount(cluster, weights=values, minlength=len(edges))

    rows = np.bincount(cluster, minlength=len(edges))     # (n_clusters,) int64
    columns = {name: _ratio(per_cluster_sum(_as_f64(v)), rows) for name, v in (means or {}).items()}
    if rmse is not None:
        sq_sum, n = rmse
        columns["rmse"] = np.sqrt(_ratio(per_cluster_sum(sq_sum), per_cluster_sum(n)))
    table = []
    for k, label in enumerate(_range_labels(edges)):
        table.append({"cluster": label, "rows": int(rows[k]),
                      **{name: float(column[k]) for name, column in columns.items()}})
    return table


def format_table(rows: list[dict], digits: int = 4) -> str:
    """A markdown table of dicts (columns in first-seen key order); numbers right-aligned.

    Floats get `digits` decimals, nan and missing keys print as 'n/a'; no rows give ''.
    """
    if not rows:
        return ""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[_format_cell(row.get(col), digits) for col in columns] for row in rows]
    numeric = [all(isinstance(row.get(col), (int, float, np.number)) for row in rows)
               for col in columns]
    # At least 3 wide: a markdown rule needs three dashes.
    widths = [max(len(col), 3, *(len(cell_row[i]) for cell_row in cells))
              for i, col in enumerate(columns)]

    def line(values):
        return "| " + " | ".join(v.rjust(w) if right else v.ljust(w)
                                 for v, w, right in zip(values, widths, numeric)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" if right else "-" * (w + 2)
                          for w, right in zip(widths, numeric)) + "|"
    return "\n".join([line(columns), rule, *(line(c) for c in cells)])


def _as_f64(x) -> np.ndarray:
    return np.asarray(x, np.float64).reshape(-1)


def _errors(pred, target) -> np.ndarray:
    """(n,) float64 pred - target of two equally shaped arrays."""
    if np.shape(pred) != np.shape(target):
        raise ValueError(f"pred and target shapes differ: {np.shape(pred)} vs {np.shape(target)}")
    return _as_f64(pred) - _as_f64(target)


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den elementwise, nan where den is 0 (an empty cluster)."""
    out = np.full(len(num), np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _check_ranks(ranks: np.ndarray, m: int) -> np.ndarray:
    ranks = np.asarray(ranks).reshape(-1)
    if m < 1:
        raise ValueError(f"cutoff M must be >= 1, got {m}")
    if len(ranks) and ranks.min() < 0:
        raise ValueError(f"ranks must be >= 0, got {ranks.min()}")
    return ranks


def _held_sets(ranks: np.ndarray, users) -> tuple[np.ndarray, np.ndarray]:
    """((n,) int64 each entry's user among the evaluated ones (ascending), (U,) int64 each
    evaluated user's held-out entries)."""
    users = np.asarray(users).reshape(-1)
    if len(users) != len(ranks):
        raise ValueError(f"{len(ranks)} ranks but {len(users)} users")
    _, held, count = np.unique(users, return_inverse=True, return_counts=True)
    return held.reshape(-1), count


def _range_labels(edges: np.ndarray) -> list[str]:
    """'lo-hi' per cluster ('lo' when lo == hi), the last one 'lo+'."""
    labels = [f"{lo}-{hi - 1}" if hi - 1 > lo else f"{lo}" for lo, hi in zip(edges, edges[1:])]
    return [*labels, f"{edges[-1]}+"]


def _format_cell(value, digits: int) -> str:
    if value is None or (isinstance(value, (float, np.floating)) and np.isnan(value)):
        return "n/a"
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}f}"
    return str(value)
