"""item-kNN's and RP3beta's weights (ncae_cuda.baselines.neighbours) and their fits' scores
against a dense float64 computation of the same formulas, and a hand-worked case."""
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda.baselines import models, neighbours
from ncae_cuda.data.interactions import from_matrix


def dense_cosine(D: np.ndarray, shrink: float) -> np.ndarray:
    """(items, items) x_i·x_j / (|x_i||x_j| + shrink), 0 where no user holds both, diagonal 0."""
    dots = D.T @ D
    norms = np.sqrt(np.diag(dots))
    sim = np.divide(dots, np.outer(norms, norms) + shrink, out=np.zeros_like(dots),
                    where=dots > 0)
    np.fill_diagonal(sim, 0.0)
    return sim


def dense_rp3beta(D: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """(items, items) (P_iu^α P_ui^α) diag(pop^-β), empty rows and columns 0, diagonal 0."""
    def row_normalised(A):
        sums = A.sum(axis=1, keepdims=True)
        return np.divide(A, sums, out=np.zeros_like(A), where=sums > 0)
    popularity = D.sum(axis=0)
    penalty = np.array([p ** -beta if p > 0 else 0.0 for p in popularity])
    W = (row_normalised(D.T) ** alpha) @ (row_normalised(D) ** alpha) * penalty
    np.fill_diagonal(W, 0.0)
    return W


def dense_top_k(M: np.ndarray, k: int) -> np.ndarray:
    """M with each row's k largest positive entries alone (ties: the lower column)."""
    kept = np.zeros_like(M)
    for i, row in enumerate(M):
        top = np.argsort(-row, kind="stable")[:k]
        top = top[row[top] > 0]
        kept[i, top] = row[top]
    return kept


def random_ones(seed: int, users: int = 30, items: int = 14) -> np.ndarray:
    """(users, items) float64 ones, with an empty user row and two empty item columns."""
    D = (np.random.default_rng(seed).random((users, items)) < 0.3).astype(np.float64)
    D[users // 3] = 0
    D[:, [2, items - 1]] = 0
    return D


def assert_a_top_k_of(S: sp.csr_matrix, full: np.ndarray, k: int) -> None:
    """S holds, of each row of `full`, k of its largest positive entries (any of equals): its
    values where S keeps them, min(k, positives) of them, none below an entry left out."""
    for i, row in enumerate(full):
        kept = S.indices[S.indptr[i]:S.indptr[i + 1]]
        values = S.data[S.indptr[i]:S.indptr[i + 1]]
        np.testing.assert_allclose(values, row[kept], rtol=1e-12)
        assert len(kept) == min(k, (row > 0).sum())
        assert list(values) == sorted(values, reverse=True)          # first_k's order
        left = np.delete(row, kept)
        if len(kept) and len(left):
            assert values.min() >= left.max() * (1 - 1e-12)


@pytest.mark.parametrize("block_rows", [1, 4, 1000])
@pytest.mark.parametrize("k", [1, 3, 13, 14, 50])          # 14 items: k up to past them all
@pytest.mark.parametrize("shrink", [0.0, 10.0])
def test_cosine_neighbours_are_the_dense_reference_s_top_k(k, shrink, block_rows,
                                                           monkeypatch):
    D = random_ones(int(k + shrink))
    monkeypatch.setattr(neighbours, "BLOCK_ENTRIES", block_rows * D.shape[1])
    S = neighbours.cosine(sp.csr_matrix(D.astype(np.float32)), shrink, k)
    full = dense_cosine(D, shrink)
    assert_a_top_k_of(S, full, k)
    # the same float64 operations as the reference: the same values, so the same tie rule
    np.testing.assert_array_equal(S.toarray(), dense_top_k(full, k))
    for smaller in sorted({1, min(2, k), k}):               # first_k of fewer than k
        np.testing.assert_array_equal(neighbours.first_k(S, smaller).toarray(),
                                      dense_top_k(full, smaller))


@pytest.mark.parametrize("block_rows", [1, 4, 1000])
@pytest.mark.parametrize("k", [1, 3, 13, 14, 50])     # 13: the k-th largest an empty item's 0
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (0.5, 0.3), (1.5, 1.0)])
def test_rp3beta_weights_are_the_dense_reference_s_top_k(k, alpha, beta, block_rows,
                                                         monkeypatch):
    D = random_ones(k)
    monkeypatch.setattr(neighbours, "BLOCK_ENTRIES", block_rows * D.shape[1])
    W = neighbours.rp3beta(sp.csr_matrix(D.astype(np.float32)), alpha, beta, k)
    full = dense_rp3beta(D, alpha, beta)
    assert_a_top_k_of(W, full, k)
    for smaller in sorted({1, min(2, k)}):
        assert_a_top_k_of(neighbours.first_k(W, smaller), full, smaller)


# items 0 (users 0, 1, 2), 1 (users 0, 2) and 2 (users 1, 2)
HAND = np.array([[1, 1, 0], [1, 0, 1], [1, 1, 1]], dtype=np.float32)


def test_cosine_on_a_hand_worked_3x3_case():
    # co-counts 0-1: 2, 0-2: 2, 1-2: 1; norms √3, √2, √2
    a, b = 2 / (np.sqrt(6) + 1), 1 / (2 + 1)                  # shrink 1
    np.testing.assert_allclose(neighbours.cosine(sp.csr_matrix(HAND), 1.0, 5).toarray(),
                               [[0, a, a], [a, 0, b], [a, b, 0]], rtol=1e-12)
    # k 1: item 0's nearest are 1 and 2 alike, the lower kept
    np.testing.assert_allclose(neighbours.cosine(sp.csr_matrix(HAND), 0.0, 1).toarray(),
                               [[0, 2 / np.sqrt(6), 0], [2 / np.sqrt(6), 0, 0],
                                [2 / np.sqrt(6), 0, 0]], rtol=1e-12)
    # user 1 (items 0, 2) scores item 1 by sim(0, 1) + sim(2, 1), items 0 and 2 by sim(2, 0)
    scores = scored(models.fit_item_knn, HAND, {"shrink": 1.0}, {"k": 5})(np.array([1]))
    np.testing.assert_allclose(scores, [[a, a + b, a]], rtol=1e-6)


def test_rp3beta_on_a_hand_worked_3x3_case():
    # alpha 1: a walk from item i to user u (1 / i's users) to item j (1 / u's items); users'
    # counts 2, 2, 3, items' 3, 2, 2; beta 1 divides by j's count
    # 0 -> 1: 1/3 (1/2 + 1/3) = 5/18; 1 -> 0: 1/2 (1/2 + 1/3) = 5/12; 1 -> 2: 1/2 · 1/3 = 1/6
    want = np.array([[0, 5 / 18 / 2, 5 / 18 / 2], [5 / 12 / 3, 0, 1 / 6 / 2],
                     [5 / 12 / 3, 1 / 6 / 2, 0]])
    np.testing.assert_allclose(neighbours.rp3beta(sp.csr_matrix(HAND), 1.0, 1.0, 5).toarray(),
                               want, rtol=1e-12)
    scores = scored(models.fit_rp3beta, HAND, {"alpha": 1.0, "beta": 1.0},
                    {"k": 5})(np.array([0, 2]))
    np.testing.assert_allclose(scores, HAND[[0, 2]] @ want, rtol=1e-6)


def scored(fit, dense, settings, point):
    """The Scores `fit` hands its check at `point`, fit on the interactions of `dense`."""
    got = []
    fit(from_matrix(sp.csr_matrix(dense), "X"), settings, [point],
        lambda _, scores: got.append(scores))
    return got[0]


@pytest.mark.parametrize("fit, settings, reference, exact", [
    (models.fit_item_knn, {"shrink": 3.0}, lambda D, k: dense_top_k(dense_cosine(D, 3.0), k).T,
     (4, 50)),
    # RP3beta's values come out of other sums than the reference's, so equals may differ in
    # their last bit: its top 4 is assert_a_top_k_of's to check; all 14 items (50) here
    (models.fit_rp3beta, {"alpha": 0.7, "beta": 0.4},
     lambda D, k: dense_top_k(dense_rp3beta(D, 0.7, 0.4), k), (50,)),
])
def test_a_fit_scores_users_rows_times_the_reference_weights(fit, settings, reference, exact):
    D = random_ones(7)
    users = np.array([0, 10, 5, 29])                          # 10: the empty row, scores 0
    got = {}
    fit(from_matrix(sp.csr_matrix(D), "X"), settings, [{"k": 4}, {"k": 50}],
        lambda point, scores: got.update({point["k"]: scores(users)}))
    assert list(got) == [4, 50]
    for k in exact:
        assert got[k].dtype == np.float32 and got[k].shape == (len(users), D.shape[1])
        np.testing.assert_allclose(got[k], D[users] @ reference(D, k), rtol=1e-6, atol=1e-7)
        assert not got[k][1].any()


def test_a_large_catalogue_never_holds_an_items_x_items_matrix(monkeypatch):
    # 8,000 items: a dense items x items float64 matrix would be 512 MiB; a pass holds one
    # block of rows (here 8 MiB) and the kept entries
    users, items, each = 300, 8_000, 20
    rng = np.random.default_rng(0)
    rows = np.repeat(np.arange(users), each)
    cols = np.concatenate([rng.choice(items, each, replace=False) for _ in range(users)])
    X = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(users, items))
    monkeypatch.setattr(neighbours, "BLOCK_ENTRIES", 2**20)
    for weights in (lambda: neighbours.cosine(X, 5.0, 100),
                    lambda: neighbours.rp3beta(X, 0.5, 0.3, 100)):
        tracemalloc.start()
        W = weights()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert W.shape == (items, items) and 0 < W.nnz <= 100 * items
        assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB"


@pytest.mark.parametrize("name, fit, settings, reference", [
    ("item-knn", models.fit_item_knn, {"shrink": 3.0, "k": 50},
     lambda D: dense_cosine(D, 3.0).T),
    ("rp3beta", models.fit_rp3beta, {"alpha": 0.7, "beta": 0.4, "k": 50},
     lambda D: dense_rp3beta(D, 0.7, 0.4)),
])
def test_recency_scores_weighted_rows_through_weights_fit_on_ones(name, fit, settings,
                                                                  reference):
    # as EASE: a user's row of 1 + boost * 2^(-r / halflife), r (their entries later) counted
    # by brute force, times the weights of the 0/1 matrix; the grid's fit and the contract's
    # model alike, and a boost refused without timestamps
    from dataclasses import replace
    from ncae_cuda import make_model
    from ncae_cuda.data.interactions import DataError
    rng = np.random.default_rng(11)
    D = random_ones(5)                                          # row 10 empty
    part = from_matrix(sp.csr_matrix(D), "X")
    part = replace(part, timestamps=rng.integers(0, 4, part.nnz))        # ties among them
    later = np.array([np.count_nonzero((part.users == u) & (part.timestamps > t))
                      for u, t in zip(part.users, part.timestamps)])
    rows = np.zeros(D.shape)
    rows[part.users, part.items] = 1 + 9.0 * 0.5 ** (later / 2.5)
    want = rows @ reference(D)
    point = {"k": 50, "recency_boost": 9.0, "recency_halflife": 2.5}
    users = np.arange(D.shape[0])
    fit_settings = {k: v for k, v in settings.items() if k != "k"}
    got = []
    fit(part, fit_settings, [point], lambda _, scores: got.append(scores))
    np.testing.assert_allclose(got[0](users), want, rtol=1e-5, atol=1e-6)
    model = make_model({"model": name, **settings, "recency_boost": 9.0,
                        "recency_halflife": 2.5}, "cpu").fit(part)
    np.testing.assert_allclose(model._scores(users), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(DataError, match="has no timestamps"):
        scored(fit, D, fit_settings, point)
