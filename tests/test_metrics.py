"""Metrics against hand-computed values and independent loops."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda.model.metrics import (
    cluster_edges,
    cluster_table,
    format_table,
    hit_rate,
    ndcg,
    per_user_figures,
    pooled_rmse,
    popularity_scores,
    ranking_summary,
    recall,
    rmse,
    row_squared_errors,
    set_ndcg,
)


def reference_rank(scores, heldout, train_cols):
    """Candidates (columns without a training entry, not the held-out one) scoring >= it."""
    return sum(1 for j, s in enumerate(scores)
               if j != heldout and j not in train_cols and s >= scores[heldout])


# --- HR / NDCG ------------------------------------------------------------------------------

def test_rank_edges():
    m = 10
    ranks = np.array([0, m - 1, m, 1, 2, 6])
    np.testing.assert_array_equal(hit_rate(ranks, m), [1, 1, 0, 1, 1, 1])
    np.testing.assert_allclose(ndcg(ranks, m),
                               [1.0, 1 / math.log2(m + 1), 0.0, 0.6309297535714575, 0.5, 1 / 3],
                               rtol=1e-15)
    assert hit_rate(ranks, m).dtype == ndcg(ranks, m).dtype == np.float64


def test_constant_model_scores_zero():
    n_cols, m = 50, 10
    train_cols = {1, 5, 7}
    candidates = n_cols - len(train_cols)
    rank = reference_rank(np.full(n_cols, 0.5), heldout=3, train_cols=train_cols)
    assert rank == candidates - 1
    assert hit_rate([rank], m)[0] == ndcg([rank], m)[0] == 0.0
    assert hit_rate([rank], candidates)[0] == 1.0     # M >= candidates: everything is a hit


def test_random_ranks_against_loop():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, (200, 30)).astype(np.float32)   # few levels: many ties
    ranks = []
    for row in scores:
        heldout, *train = rng.choice(30, 4, replace=False)
        ranks.append(reference_rank(row, heldout, set(train)))
    ranks = np.array(ranks)
    for m in (1, 5, 10):
        hr = [1.0 if r < m else 0.0 for r in ranks]
        nd = [1.0 / math.log2(r + 2) if r < m else 0.0 for r in ranks]
        np.testing.assert_array_equal(hit_rate(ranks, m), hr)
        np.testing.assert_allclose(ndcg(ranks, m), nd, rtol=1e-15)
        summary = ranking_summary(ranks, cutoffs=(m,))
        assert summary == pytest.approx({f"hr@{m}": np.mean(hr), f"recall@{m}": np.mean(hr),
                                         f"ndcg@{m}": np.mean(nd), "rows": 200}, rel=1e-12)


def test_ranking_summary_keys_and_empty():
    assert list(ranking_summary(np.array([0, 3]))) == [
        "hr@10", "recall@10", "ndcg@10", "hr@100", "recall@100", "ndcg@100", "rows"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = ranking_summary(np.array([], np.int64))
        by_user = ranking_summary(np.array([], np.int64), users=np.array([], np.int64))
    for figures in (summary, by_user):
        assert figures["rows"] == 0
        assert all(math.isnan(figures[k]) for k in ("hr@10", "recall@10", "ndcg@100"))


# --- Recall / NDCG of held-out sets ---------------------------------------------------------

def test_held_out_sets_by_hand():
    # User 1 holds out 3 items ranked 0, 5, 2; user 4 one ranked 20; user 7 one ranked 3.
    ranks, users = np.array([0, 5, 2, 20, 3]), np.array([1, 1, 1, 4, 7])
    # M = 3: user 1 finds 2 of min(3, 3); DCG 1 + 1/log2(4) = 1.5 against the ideal
    # 1 + 1/log2(3) + 1/2; user 4 misses, user 7 too (rank 3 is the fourth place).
    np.testing.assert_allclose(recall(ranks, users, 3), [2 / 3, 0, 0], rtol=1e-15)
    np.testing.assert_allclose(set_ndcg(ranks, users, 3),
                               [1.5 / (1.5 + 1 / math.log2(3)), 0, 0], rtol=1e-15)
    # M = 10: user 1 finds all 3; DCG 1 + 1/log2(7) + 1/2 against the same ideal; user 7 hits
    # at 1/log2(5) of an ideal 1.
    np.testing.assert_allclose(recall(ranks, users, 10), [1, 0, 1], rtol=1e-15)
    np.testing.assert_allclose(
        set_ndcg(ranks, users, 10),
        [(1.5 + 1 / math.log2(7)) / (1.5 + 1 / math.log2(3)), 0, 1 / math.log2(5)], rtol=1e-15)
    # M = 2 < |S|: recall over min(M, |S|) = 2, the ideal DCG of 2 places.
    np.testing.assert_allclose(recall(ranks, users, 2), [1 / 2, 0, 0], rtol=1e-15)
    np.testing.assert_allclose(set_ndcg(ranks, users, 2), [1 / (1 + 1 / math.log2(3)), 0, 0],
                               rtol=1e-15)
    summary = ranking_summary(ranks, (3,), users)
    assert summary == pytest.approx({"hr@3": 2 / 5, "recall@3": 2 / 9,
                                     "ndcg@3": 1.5 / (1.5 + 1 / math.log2(3)) / 3, "rows": 5},
                                    rel=1e-15)
    evaluated, per_user = per_user_figures(ranks, users, (3,))
    np.testing.assert_array_equal(evaluated, [1, 4, 7])
    np.testing.assert_allclose(per_user["hr@3"], [2 / 3, 0, 0], rtol=1e-15)
    # each user's figures, the hand-computed ones above
    np.testing.assert_allclose(per_user["recall@3"], [2 / 3, 0, 0], rtol=1e-15)
    np.testing.assert_allclose(per_user["ndcg@3"], [1.5 / (1.5 + 1 / math.log2(3)), 0, 0],
                               rtol=1e-15)
    assert list(per_user) == ["hr@3", "recall@3", "ndcg@3"]
    per_user = per_user_figures(ranks, users, (2,))[1]         # user 1: HR 1/3, recall 1/2
    np.testing.assert_allclose(per_user["hr@2"], [1 / 3, 0, 0], rtol=1e-15)
    np.testing.assert_allclose(per_user["recall@2"], [1 / 2, 0, 0], rtol=1e-15)


def test_one_held_out_item_a_user_is_hr_and_the_one_item_ndcg():
    rng = np.random.default_rng(3)
    ranks = rng.integers(0, 150, 500)
    users = rng.permutation(1000)[:500]                   # distinct users, in no order
    order = np.argsort(users)                             # figures come by ascending user
    for m in (1, 10, 100):
        np.testing.assert_array_equal(recall(ranks, users, m), hit_rate(ranks, m)[order])
        np.testing.assert_array_equal(set_ndcg(ranks, users, m), ndcg(ranks, m)[order])
    # the same means, summed in another order
    assert ranking_summary(ranks, (10, 100), users) == pytest.approx(
        ranking_summary(ranks, (10, 100)), rel=1e-14)


def held_out_sets(rng, n_users=120, n_items=40, levels=None):
    """Scores of every (user, item), each user's training items and held-out set: sizes 0
    (empty rows, not evaluated), 1 and up to 15. levels: few score levels (many ties)."""
    scores = (rng.integers(0, levels, (n_users, n_items)).astype(np.float64) if levels
              else rng.standard_normal((n_users, n_items)))
    train, held = [], []
    for _ in range(n_users):
        size = rng.choice([0, 1, 1, 2, 5, 15])
        cols = rng.permutation(n_items)
        held.append(cols[:size].tolist())
        train.append(set(cols[size:size + rng.integers(0, 10)].tolist()))
    return scores, train, held


def entry_ranks(scores, train, held):
    """(ranks, users) of every held-out entry, by reference_rank: the user's other held-out
    items are candidates."""
    ranks, users = [], []
    for u, items in enumerate(held):
        for i in items:
            ranks.append(reference_rank(scores[u], i, train[u]))
            users.append(u)
    return np.array(ranks, np.int64), np.array(users, np.int64)


@pytest.mark.parametrize("seed", [0, 1])
def test_held_out_sets_against_a_sorted_list(seed):
    # Distinct scores: a user's top M is the first M of the candidates sorted by score, and
    # Recall and NDCG are the textbook ones on that list.
    rng = np.random.default_rng(seed)
    scores, train, held = held_out_sets(rng)
    ranks, users = entry_ranks(scores, train, held)
    for m in (1, 3, 10, 40):
        want_recall, want_ndcg = [], []
        for u, items in enumerate(held):
            if not items:
                continue
            candidates = [j for j in range(scores.shape[1]) if j not in train[u]]
            top = sorted(candidates, key=lambda j: -scores[u, j])[:m]
            dcg = sum(1 / math.log2(p + 2) for p, j in enumerate(top) if j in items)
            ideal = sum(1 / math.log2(p + 2) for p in range(min(m, len(items))))
            want_recall.append(len(set(top) & set(items)) / min(m, len(items)))
            want_ndcg.append(dcg / ideal)
        np.testing.assert_allclose(recall(ranks, users, m), want_recall, rtol=1e-13)
        np.testing.assert_allclose(set_ndcg(ranks, users, m), want_ndcg, rtol=1e-13)
        summary = ranking_summary(ranks, (m,), users)
        assert summary[f"recall@{m}"] == pytest.approx(np.mean(want_recall), rel=1e-13)
        assert summary[f"ndcg@{m}"] == pytest.approx(np.mean(want_ndcg), rel=1e-13)


def test_held_out_sets_with_ties_count_them_against():
    # Few score levels: a held-out item tied with others takes the last of their places, each
    # of a user's tied held-out items too; a loop over the definition, and NDCG stays <= 1.
    rng = np.random.default_rng(2)
    scores, train, held = held_out_sets(rng, levels=4)
    ranks, users = entry_ranks(scores, train, held)
    for m in (1, 5, 20):
        want_recall, want_ndcg = [], []
        for u, items in enumerate(held):
            if not items:
                continue
            places = [sum(1 for j in range(scores.shape[1]) if j != i and j not in train[u]
                          and scores[u, j] >= scores[u, i]) for i in items]
            found = [p for p in places if p < m]
            want_recall.append(len(found) / min(m, len(items)))
            want_ndcg.append(sum(1 / math.log2(p + 2) for p in found)
                             / sum(1 / math.log2(p + 2) for p in range(min(m, len(items)))))
        np.testing.assert_allclose(recall(ranks, users, m), want_recall, rtol=1e-13)
        np.testing.assert_allclose(set_ndcg(ranks, users, m), want_ndcg, rtol=1e-13)
        assert set_ndcg(ranks, users, m).max() <= 1.0
    # with this many ties, some user's tied held-out items share a place: counted against both
    assert any(len(set(scores[u, items])) < len(items) for u, items in enumerate(held))


def test_held_out_set_inputs():
    with pytest.raises(ValueError, match="3 ranks but 2 users"):
        recall(np.array([0, 1, 2]), np.array([0, 0]), 10)
    with pytest.raises(ValueError, match="cutoff"):
        set_ndcg(np.array([0]), np.array([0]), 0)


def test_bad_rank_inputs():
    with pytest.raises(ValueError, match="cutoff"):
        hit_rate([1], 0)
    with pytest.raises(ValueError, match=">= 0"):
        ndcg([-1], 10)


# --- RMSE -----------------------------------------------------------------------------------

def test_rmse_against_float64_loop():
    rng = np.random.default_rng(1)
    pred = rng.uniform(0.5, 5, 10_001).astype(np.float32)
    target = rng.integers(1, 6, 10_001).astype(np.float32)
    expected = math.sqrt(sum((float(p) - float(t)) ** 2 for p, t in zip(pred, target))
                         / len(pred))
    assert rmse(pred, target) == pytest.approx(expected, rel=1e-12)
    assert rmse([1.0, 3.0], [2.0, 1.0]) == pytest.approx(math.sqrt(2.5))


def test_rmse_of_exact_predictions_is_zero():
    assert rmse(np.float32([1.5, 4.0, 2.0]), np.float32([1.5, 4.0, 2.0])) == 0.0


def test_rmse_empty_and_shapes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(rmse(np.array([]), np.array([])))
    with pytest.raises(ValueError, match="shapes"):
        rmse([1.0, 2.0], [1.0])


def test_row_squared_errors():
    rows = np.array([2, 0, 2, 2])
    sq, n = row_squared_errors(rows, [1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 1.0, 4.0], n_rows=4)
    np.testing.assert_array_equal(sq, [0.0, 0.0, 5.0, 0.0])
    np.testing.assert_array_equal(n, [1, 0, 3, 0])


# --- POP ------------------------------------------------------------------------------------

def test_popularity_scores():
    train = sp.csr_matrix(np.array([[5, 0, 3, 0], [0, 0, 1, 0], [4, 0, 2, 1]], np.float32))
    scores = popularity_scores(train)
    np.testing.assert_array_equal(scores, [2, 0, 3, 1])
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(popularity_scores(np.array([2, 0, 3])), [2, 0, 3])
    np.testing.assert_array_equal(popularity_scores(sp.csc_array(train)), [2, 0, 3, 1])
    # items after the last one with an interaction score 0: one score an item, whatever X holds
    wide = sp.csr_matrix((train.data, train.indices, train.indptr), shape=(3, 6))
    np.testing.assert_array_equal(popularity_scores(wide), [2, 0, 3, 1, 0, 0])
    # POP through the rank definition: held-out column 3 (1 interaction) among candidates of
    # row 1 (columns 0, 1, 3): column 0 scores higher, so its rank is 1.
    assert reference_rank(scores, heldout=3, train_cols={2}) == 1


# --- clusters -------------------------------------------------------------------------------

def test_cluster_edges():
    np.testing.assert_array_equal(cluster_edges(np.arange(10, 0, -1), 5), [1, 3, 5, 7, 9])
    np.testing.assert_array_equal(cluster_edges(np.ones(7, int), 5), [1])       # deduplicated
    # 7 rows in 5: the sorted counts at floor(k * 7 / 5) = 0, 1, 2, 4, 5
    np.testing.assert_array_equal(cluster_edges(np.array([7, 1, 6, 2, 5, 3, 4]), 5),
                                  [1, 2, 3, 5, 6])
    counts = np.random.default_rng(2).integers(1, 300, 1000)
    edges = cluster_edges(counts, 5)
    assert edges[0] == counts.min() and len(edges) == 5 and np.all(np.diff(edges) > 0)
    # Roughly equal clusters: each holds about a fifth of the rows.
    sizes = [row["rows"] for row in cluster_table(counts, edges)]
    assert sum(sizes) == 1000 and max(sizes) < 230
    with pytest.raises(ValueError):
        cluster_edges(np.array([], int))


def test_cluster_table_by_hand():
    counts = np.array([1, 2, 3, 10, 12, 30])
    hr = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    sq_sum = np.array([1.0, 3.0, 0.0, 4.0, 0.0, 8.0])
    n = np.array([1, 1, 2, 2, 0, 2])
    table = cluster_table(counts, [1, 3, 10], means={"hr@10": hr}, rmse=(sq_sum, n))
    assert [row["cluster"] for row in table] == ["1-2", "3-9", "10+"]
    assert [row["rows"] for row in table] == [2, 1, 3]
    assert [row["hr@10"] for row in table] == pytest.approx([0.5, 1.0, 2 / 3])
    # Pooled: sqrt((4 + 0 + 8) / (2 + 0 + 2)), not the mean of per-row RMSEs (sqrt 2 and 2).
    assert [row["rmse"] for row in table] == pytest.approx([math.sqrt(2), 0.0, math.sqrt(3)])


def test_cluster_table_empty_cluster_and_labels():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = cluster_table(np.array([1, 6, 7]), [1, 2, 5], means={"ndcg@10": [0.5, 1, 0]},
                              rmse=(np.zeros(3), np.zeros(3)))
    assert [row["cluster"] for row in table] == ["1", "2-4", "5+"]
    assert table[1]["rows"] == 0 and math.isnan(table[1]["ndcg@10"])
    assert all(math.isnan(row["rmse"]) for row in table)   # no held-out entries anywhere
    with pytest.raises(ValueError, match="below the first edge"):
        cluster_table(np.array([0, 3]), [1, 2])
    with pytest.raises(ValueError, match="increasing"):
        cluster_table(np.array([3]), [1, 1])


def test_format_table():
    rows = [{"cluster": "1-9", "rows": 12, "rmse": 0.91234},
            {"cluster": "10+", "rows": 3, "rmse": float("nan")}]
    assert format_table(rows) == (
        "| cluster | rows |   rmse |\n"
        "|---------|-----:|-------:|\n"
        "| 1-9     |   12 | 0.9123 |\n"
        "| 10+     |    3 |    n/a |")
    assert format_table([]) == ""


def test_pooled_rmse_is_the_rmse_over_every_report_s_entries():
    """Reports of parts (one empty) pooled against a float64 RMSE over all their entries."""
    rng = np.random.default_rng(3)
    pred, target = rng.uniform(1, 5, 101), rng.uniform(1, 5, 101)
    cuts = (0, 0, 37, 101)                                   # the first part is empty
    reports = [{"rmse": rmse(pred[a:b], target[a:b]), "entries": b - a}
               for a, b in zip(cuts, cuts[1:])]
    whole = np.sqrt(np.mean((pred - target) ** 2))
    assert pooled_rmse(*reports) == {"rmse": pytest.approx(whole, rel=1e-12),
                                             "entries": 101}
    assert np.isnan(pooled_rmse(reports[0])["rmse"])
