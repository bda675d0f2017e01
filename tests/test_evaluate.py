"""Evaluation against a dense float64 forward pass written out here and brute-force ranking."""
import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda.model import evaluate
from ncae_cuda.model.evaluate import constant_scorer, heldout_ranks, model_scorer, predict_ratings
from ncae_cuda.model.network import Network, Objective
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.layout import NCAELayout


def dense_logits(params: dict, X: np.ndarray, n_layers: int) -> np.ndarray:
    """out = V a_last + c with every row of the dense input X encoded, no dropout."""
    a = np.tanh(X @ params["E"] + params["b1"])
    for layer in range(2, n_layers + 1):
        a = np.tanh(a @ params[f"W{layer}"].T + params[f"b{layer}"])
    return a @ params["V"].T + params["c"]


def make(backend, feedback, n_rows=30, n_cols=20, hidden=(6, 5), seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n_rows, n_cols, density=0.25, random_state=rng, format="csr",
                  data_rvs=lambda n: rng.integers(1, 6, n).astype(np.float32))
    X.data[:] = np.where(rng.random(X.nnz) < 0.5, X.data, 0)   # some empty rows and zeros
    X.eliminate_zeros()
    layout = NCAELayout(n_cols, hidden)
    params = layout.xavier_init(rng) + rng.normal(0, 0.2, layout.size).astype(np.float32)
    objective = (Objective.explicit(1, 5, 1, 1) if feedback == "explicit"
                 else Objective.implicit())
    weights = rng.random(n_cols).astype(np.float32) if feedback == "implicit" else None
    net = Network(layout, backend, objective, params, weights)
    host = {k: v.astype(np.float64) for k, v in layout.views(params).items()}
    return net, CSR.from_scipy(backend, X), X.toarray().astype(np.float64), host, rng


@pytest.fixture
def small_batches(monkeypatch):
    """Evaluation in batches of 7 rows: the last one short, as on real data (1024 a batch)."""
    monkeypatch.setattr(evaluate, "EVAL_BATCH", 7)


def test_predict_ratings_in_query_order(backend, small_batches):
    net, inputs, X, host, rng = make(backend, "explicit")
    rows = rng.integers(0, X.shape[0], 200)                # unsorted, repeated rows
    cols = rng.integers(0, X.shape[1], 200)
    expect = 2 * np.tanh(dense_logits(host, X, 2)[rows, cols]) + 3
    got = predict_ratings(net, inputs, rows, cols)
    np.testing.assert_allclose(got, expect, atol=1e-5)


def brute_force_ranks(scores, seen, users, items):
    ranks = []
    for u, i in zip(users, items):
        candidates = [j for j in range(scores.shape[1]) if not seen[u, j] and j != i]
        ranks.append(sum(scores[u, j] >= scores[u, i] for j in candidates))
    return np.array(ranks)


@pytest.mark.parametrize("based", ["user", "item"])
def test_model_ranks_match_brute_force(backend, based, small_batches):
    net, inputs, X, host, rng = make(backend, "implicit", n_rows=30 if based == "user" else 20,
                                     n_cols=20 if based == "user" else 30)
    logits = dense_logits(host, X, 2)
    user_scores = logits if based == "user" else logits.T                  # (users, items)
    seen = (X if based == "user" else X.T) > 0
    n_users, n_items = user_scores.shape
    users = rng.permutation(n_users)[:15]
    items = np.array([rng.choice(np.flatnonzero(~seen[u])) for u in users])
    exclude = CSR.from_scipy(net.ops, sp.csr_matrix(seen.astype(np.float32)))
    ranks = heldout_ranks(net.ops, model_scorer(net, inputs, based), exclude, users, items)
    np.testing.assert_array_equal(ranks, brute_force_ranks(user_scores, seen, users, items))


def test_popularity_baseline_ranks_with_ties(backend):
    pop = np.array([5, 3, 3, 3, 0, 9], np.float32)
    seen = np.zeros((3, 6), bool)
    seen[0, 5] = True                                     # the most popular item is seen
    exclude = CSR.from_scipy(backend, sp.csr_matrix(seen.astype(np.float32)))
    ranks = heldout_ranks(backend, constant_scorer(backend, pop), exclude, np.array([0, 1, 2]),
                          np.array([1, 5, 4]))
    # user 0, item 1 (3): ties with 2 and 3, beaten by 0 -> 3; user 1, item 5: best -> 0;
    # user 2, item 4 (0): every one of the 5 others scores >= -> 5
    np.testing.assert_array_equal(ranks, [3, 0, 5])


def test_rating_report_groups_the_users_with_held_out_ratings_alone():
    # users 0 (3 inputs) and 2 (5) have held-out ratings, users 1 and 3 none: the table holds
    # two clusters of one user each (edges of the counts 3 and 5), each its user's RMSE
    yhat, ratings = np.float32([4.0, 2.0, 3.0]), np.float32([5.0, 2.0, 1.0])
    report = evaluate.rating_report(yhat, ratings, np.array([0, 0, 2]), np.array([3, 1, 5, 2]))
    assert report["entries"] == 3
    assert report["rmse"] == pytest.approx(np.sqrt(5 / 3), rel=1e-12)
    assert report["clusters"] == [
        {"cluster": "3-4", "rows": 1, "rmse": pytest.approx(np.sqrt(0.5), rel=1e-12)},
        {"cluster": "5+", "rows": 1, "rmse": pytest.approx(2.0, rel=1e-12)}]


def test_reports_of_an_empty_part_have_no_clusters():
    # a held-out part of no entries, scored per user: nan figures and an empty table, no error
    counts, none = np.array([3, 1, 5]), np.array([], np.int64)
    rating = evaluate.rating_report(np.float32([]), np.float32([]), none, counts)
    assert np.isnan(rating["rmse"]) and (rating["entries"], rating["clusters"]) == (0, [])
    exclude = CSR.from_scipy(ref, sp.csr_matrix((3, 4), dtype=np.float32))
    ranking = evaluate.ranking_report(ref, constant_scorer(ref, np.arange(4.0)), exclude, none,
                                      none, (2,), counts)
    assert np.isnan(ranking["hr@2"]) and (ranking["rows"], ranking["clusters"]) == (0, [])


def brute_force_top(scores, excluded, m):
    """Each row's m best columns not excluded, best first, ties to the lower column; -1 and
    -inf past a row's candidates."""
    idx, vals = np.full((len(scores), m), -1), np.full((len(scores), m), -np.inf)
    for r, (row, out) in enumerate(zip(scores, excluded)):
        best = sorted((-row[j], j) for j in range(len(row)) if not out[j])[:m]
        idx[r, :len(best)] = [j for _, j in best]
        vals[r, :len(best)] = [-s for s, _ in best]
    return idx, vals


def test_top_m_matches_brute_force_over_several_batches(backend, small_batches):
    """Rows in batches of 7 (unsorted, repeated): each row's top m of its own scores, its own
    seen columns left out (one row with every column seen, one with none), ties included."""
    rng = np.random.default_rng(3)
    n_rows, n_cols, m = 12, 9, 4
    scores = rng.integers(0, 5, (n_rows, n_cols)).astype(np.float32)          # many ties
    seen = rng.random((n_rows, n_cols)) < 0.3
    seen[2], seen[6] = True, False
    rows = rng.integers(0, n_rows, 25)
    assert {2, 6} <= set(rows.tolist()) and len(set(rows.tolist())) < len(rows)
    excluded = CSR.from_scipy(backend, sp.csr_matrix(seen.astype(np.float32)))
    idx, vals = evaluate.top_m(backend, lambda chunk: backend.to_device(scores[chunk]), rows, m,
                               evaluate.excluded_entries(backend, excluded))
    expected_idx, expected_vals = brute_force_top(scores[rows], seen[rows], m)
    np.testing.assert_array_equal(idx, expected_idx)
    np.testing.assert_array_equal(vals, expected_vals)
