"""NCAE against brute-force numpy: ranking, fold-in, save and load, bad input, NaN, resume."""
import contextlib
import dataclasses
import os
import signal

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import BACKENDS, backend_named
from numba.core import event as numba_event
from test_cold_entries import shrunk_means_by_hand

from ncae_cuda import NCAE
from ncae_cuda.data.interactions import DataError, Interactions, UnknownIds, from_matrix
from ncae_cuda.model import evaluate, loop, modelfile, stopping, trainer
from ncae_cuda.model.cold_means import SHRINK
from ncae_cuda.model.config import SettingError
from ncae_cuda.model.network import Network
from ncae_cuda.ops import cpu

N_USERS, N_ITEMS = 40, 30
EMPTY_USER, FULL_USER, EMPTY_ITEM = 0, 1, 25
UNSEEN_BY_FULL_USER = [3, 17, 25]          # the only items FULL_USER has no interaction with
S, M_OFF = 2.0, 3.0                        # ratings 1..5: yhat = 2 tanh(out) + 3
STEPS = -(-(N_USERS - 1) // 16)            # batches of 16 users but EMPTY_USER, per epoch


def with_backends(cases, emulated_cases):
    """(backend, *case) parameters: every case on cpu and gpu, the emulated GPU (slow) only on
    emulated_cases."""
    params = []
    for backend in BACKENDS:
        name, marks = (backend, ()) if isinstance(backend, str) else (backend.values[0],
                                                                       backend.marks)
        params += [pytest.param(name, *case, marks=marks) for case in cases
                   if name != "gpu-emulated" or case in emulated_cases]
    return params


def matrix(seed=0) -> sp.csr_matrix:
    """40 users x 30 items, ~300 ratings 1..5: user 0 has none, user 1 all items but three, item
    25 no user."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((N_USERS, N_ITEMS), np.float32)
    dense.flat[rng.choice(dense.size, 300, replace=False)] = rng.integers(1, 6, 300)
    dense[EMPTY_USER] = 0
    dense[FULL_USER] = rng.integers(1, 6, N_ITEMS)
    dense[FULL_USER, UNSEEN_BY_FULL_USER] = 0
    dense[:, EMPTY_ITEM] = 0
    return sp.csr_matrix(dense)


def split(X: sp.csr_matrix, seed=5) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(training, validation): one random interaction of each user with two or more held out."""
    coo = X.tocoo()
    rng = np.random.default_rng(seed)
    held = np.zeros(coo.nnz, bool)
    for u in range(N_USERS):
        mine = np.flatnonzero(coo.row == u)
        if len(mine) >= 2:
            held[rng.choice(mine)] = True

    def part(keep):
        return sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=X.shape)
    return part(~held), part(held)


SETTINGS = {"hidden": (8, 6), "batch_size": 16}


def new_model(feedback="implicit", backend="cpu", request=None, **settings):
    device = backend if backend == "cpu" else backend_named(backend, request)
    return NCAE(device=device, feedback=feedback, **{**SETTINGS, **settings})


def fit(X, feedback="implicit", epochs=2, backend="cpu", request=None, **settings):
    """A fitted model; on the emulated GPU (slow) one epoch only."""
    epochs = 1 if backend == "gpu-emulated" else epochs
    return new_model(feedback, backend, request, **settings).fit(X, epochs=epochs, verbose=False)


def params(model) -> np.ndarray:
    return np.array(model.ops.to_host(model._net.params))


def params64(model) -> dict:
    return {k: np.asarray(model.ops.to_host(v), np.float64) for k, v in model._net.p.items()}


def codes(p: dict, X: np.ndarray) -> np.ndarray:
    """The last hidden layer of every row of the dense input X, no dropout."""
    a = np.tanh(X @ p["E"] + p["b1"])
    layer = 2
    while f"W{layer}" in p:
        a = np.tanh(a @ p[f"W{layer}"].T + p[f"b{layer}"])
        layer += 1
    return a


def reference_logits(model, X: sp.csr_matrix) -> np.ndarray:
    """(users, items) float64 output of the model at every user and item, users encoded from X
    (ratings, or 1 per interaction for implicit feedback)."""
    inputs = X.toarray().astype(np.float64)
    if model.config.implicit:
        inputs = (inputs != 0).astype(np.float64)
    p = params64(model)
    if model.config.based == "user":
        return codes(p, inputs) @ p["V"].T + p["c"]
    return (codes(p, inputs.T) @ p["V"].T + p["c"]).T          # out[item, user], transposed


def check_ranking(ids, vals, scores, allowed, n, shown=lambda s: s, tol=1e-4) -> int:
    """ids, vals (U, n) against the brute-force ranking of the float64 `scores` (U, N) over the
    `allowed` (U, N) candidates, ties to the lower index. Where two reference scores are closer
    than tol (float32 rounding can swap them) the item may be either, but its reference score
    must be the one of its rank. Returns the number of ranks whose item is checked exactly."""
    assert ids.shape == vals.shape == (len(scores), n)
    exact = 0
    for u in range(len(scores)):
        cols = np.flatnonzero(allowed[u])
        order = cols[np.lexsort((cols, -scores[u, cols]))]
        ranked = scores[u, order]
        k = min(n, len(order))
        np.testing.assert_array_equal(ids[u, k:], -1)
        np.testing.assert_array_equal(vals[u, k:], -np.inf)
        got = ids[u, :k]
        assert len(set(got.tolist())) == k and allowed[u, got].all()
        np.testing.assert_allclose(scores[u, got], ranked[:k], rtol=0, atol=tol)
        np.testing.assert_allclose(vals[u, :k], shown(ranked[:k]), rtol=0, atol=2e-5)
        gaps = np.abs(np.diff(ranked))
        clear = (np.r_[np.inf, gaps][:k] > tol) & (np.r_[gaps, np.inf][:k] > tol)
        np.testing.assert_array_equal(got[clear], order[:k][clear])
        exact += int(clear.sum())
    return exact


def ratings(out):
    return S * np.tanh(out) + M_OFF


# ---------------------------------------------------------------------------------------------
# recommend, predict, similar items

@pytest.mark.parametrize("backend, feedback, based", with_backends(
    [("implicit", "user"), ("explicit", "user"), ("implicit", "item"), ("explicit", "item")],
    emulated_cases=[("implicit", "user"), ("explicit", "item")]))
def test_recommend_equals_brute_force_ranking(request, backend, feedback, based, monkeypatch):
    X = matrix()
    model = fit(X, feedback, backend=backend, request=request, based=based)
    monkeypatch.setattr(evaluate, "EVAL_BATCH", 7)     # batches of 7 users, the last one short
    users = np.random.default_rng(1).permutation(N_USERS)
    ids, vals = model.recommend(users, n=8)
    assert ids.dtype.kind == "i" and vals.dtype == np.float32
    if feedback == "explicit":
        assert model.rating_scale == (1.0, 5.0)
    out = reference_logits(model, X)[users]
    seen = X.toarray()[users] != 0
    # an explicit model ranks EMPTY_USER by predict's shrunk means, not the network
    # (test_cold_entries checks them against float64), and EMPTY_ITEM, which no rating trained,
    # at each user's (SHRINK ratings at the mean beside theirs), in logits; implicit, by the
    # network as any user and item
    if feedback == "explicit":
        means = (X.sum(axis=1).A1 + SHRINK * X.data.mean()) / (X.getnnz(axis=1) + SHRINK)
        out[:, EMPTY_ITEM] = np.arctanh((means[users] - M_OFF) / S)
    network = (users != EMPTY_USER) if feedback == "explicit" else np.ones(len(users), bool)
    exact = check_ranking(ids[network], vals[network], out[network], ~seen[network], 8,
                          shown=ratings if feedback == "explicit" else lambda s: s)
    assert exact >= 0.8 * ids[network].size
    if feedback == "explicit":
        cold = users == EMPTY_USER
        np.testing.assert_array_equal(vals[cold][0], model.predict(np.zeros(8, int), ids[cold][0]))
    assert (ids[users == FULL_USER, 3:] == -1).all()       # 3 candidates, 5 pads


@pytest.mark.parametrize("backend", BACKENDS)
def test_recommend_ties_seen_candidates_and_short_rows(request, backend):
    X = matrix()
    model = fit(X, backend=backend, request=request)
    p = model._net.p
    # items 2, 7 and 29 score the same for every user, whatever order a BLAS adds in: item 7's
    # output row made 0 (its score c[7], set to mid-ranking), copied into items 2 and 29
    p["c"][7] = float(np.median(reference_logits(model, X)))
    p["V"][7] = 0
    for j in (2, 29):
        p["V"][j] = p["V"][7]
        p["c"][j] = p["c"][7]
    out = reference_logits(model, X)
    # the emulator is slow: fewer users, and only the n that cut through the tie
    users = (np.arange(N_USERS) if backend != "gpu-emulated"
             else np.array([EMPTY_USER, FULL_USER, 3, 5, 11, 28]))
    out, seen = out[users], X.toarray()[users] != 0

    everything, scores = model.recommend(users, n=N_ITEMS, filter_seen=False)
    check_ranking(everything, scores, out, np.ones_like(seen), N_ITEMS)
    cuts = set()
    for u in range(len(users)):        # seen items stay; the tied ones in index order
        assert sorted(everything[u]) == list(range(N_ITEMS))
        first = list(everything[u]).index(2)
        np.testing.assert_array_equal(everything[u, first:first + 3], [2, 7, 29])
        assert scores[u, first] == scores[u, first + 1] == scores[u, first + 2]
        cuts |= {first + 1, first + 2}
    for n in range(1, N_ITEMS) if backend != "gpu-emulated" else sorted(cuts):
        # the n best are the first n of the full ranking: cuts through the tie keep lower ids
        cut, cut_scores = model.recommend(users, n=n, filter_seen=False)
        np.testing.assert_array_equal(cut, everything[:, :n])
        np.testing.assert_array_equal(cut_scores, scores[:, :n])

    candidates = [3, 5, 11, 20, 25, 2, 7]
    ids, vals = model.recommend(users, n=10, items=candidates)
    assert ids.shape == (len(users), len(candidates))          # n capped at the candidates
    allowed = ~seen & np.isin(np.arange(N_ITEMS), candidates)
    check_ranking(ids, vals, out, allowed, len(candidates))
    full = list(users).index(FULL_USER)
    assert sorted(ids[full, :2]) == [3, 25] and (ids[full, 2:] == -1).all()

    ids, vals = model.recommend(users, n=100)
    assert ids.shape == vals.shape == (len(users), N_ITEMS)
    check_ranking(ids, vals, out, ~seen, N_ITEMS)
    assert sorted(ids[full, :3]) == UNSEEN_BY_FULL_USER
    assert (ids[full, 3:] == -1).all() and (vals[full, 3:] == -np.inf).all()
    assert (ids[list(users).index(EMPTY_USER)] >= 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_recommend_among_no_candidates_is_empty_on_every_backend(request, backend):
    model = fit(matrix(), backend=backend, request=request)
    ids, vals = model.recommend([2, 3], n=5, items=[])     # n capped at 0 candidates
    assert ids.shape == vals.shape == (2, 0)


@pytest.mark.parametrize("feedback", ["implicit", "explicit"])
@pytest.mark.parametrize("filter_seen", [True, False])
def test_recommend_new_equals_recommend_for_training_rows(feedback, filter_seen):
    X = matrix()
    model = fit(X, feedback, based="user")
    rows = np.array([5, EMPTY_USER, FULL_USER, 33, 9])
    for items in (None, [0, 3, 4, 17, 25, 28]):
        want = model.recommend(rows, n=12, filter_seen=filter_seen, items=items)
        got = model.recommend_new(X[rows], n=12, filter_seen=filter_seen, items=items)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_recommend_new_refusals():
    X = matrix()
    with pytest.raises(ValueError, match="based='user'"):
        fit(X, "explicit", based="item").recommend_new(X[:2])
    with pytest.raises(DataError, match="X_new has 29 columns; the model has 30 items"):
        fit(X).recommend_new(X[:2, :29])


def test_recommend_new_reads_x_new_as_fit_reads_x():
    """Explicit: a rating off the model's scale (1 to 5) is refused, naming its item id and
    value, a stored 0 as fit refuses one; a negative value names the item, not its column.
    Implicit: every stored entry is an interaction whatever its value (0 too), as fit reads X.
    An empty row is a user with no history, scored as such."""
    X = matrix()
    ids = np.arange(100, 100 + N_ITEMS)                     # item ids that are not columns
    data = from_matrix(X, item_ids=ids)
    explicit = fit(data, "explicit", based="user")
    for value, says in ((10.0, "e.g. 10 of item 103$"), (1e38, "e.g. 1e\\+38 of item 103"),
                        (0.0, "e.g. 0 of item 103 .a stored 0")):
        row = sp.csr_matrix(([4.0, value], ([0, 0], [1, 3])), shape=(1, N_ITEMS))
        with pytest.raises(DataError, match=f"X_new: 1 ratings outside the rating scale 1 to 5, "
                                            f"{says}"):
            explicit.recommend_new(row)
    negative = sp.csr_matrix(([-1.0], ([0], [3])), shape=(1, N_ITEMS))
    with pytest.raises(DataError, match="at row 0, item 103:"):
        explicit.recommend_new(negative)
    implicit = fit(data, "implicit", based="user")
    at = ([0, 0, 0], [1, 3, 7])
    as_ones = sp.csr_matrix(([1.0, 1.0, 1.0], at), shape=(1, N_ITEMS))
    valued = sp.csr_matrix(([0.0, 7.0, 0.5], at), shape=(1, N_ITEMS))
    got, want = implicit.recommend_new(valued, n=9), implicit.recommend_new(as_ones, n=9)
    for got_part, want_part in zip(got, want):
        np.testing.assert_array_equal(got_part, want_part)
    for model in (explicit, implicit):
        empty = sp.csr_matrix((1, N_ITEMS))
        items, scores = model.recommend_new(empty, n=5)
        # the empty row: the user of the fit data with no interaction (EMPTY_USER)
        want_items, want_scores = model.recommend([EMPTY_USER], n=5)
        np.testing.assert_array_equal(items, want_items)
        np.testing.assert_allclose(scores, want_scores, rtol=1e-6)


def test_evaluate_refuses_held_out_ratings_off_the_scale():
    """A held-out rating of 10 on a 1-5 model was scored (RMSE rose, no note)."""
    X = matrix()
    model = fit(X, "explicit")
    held = sp.csr_matrix(([3.0, 10.0], ([2, 3], [4, 5])), shape=X.shape)
    with pytest.raises(DataError, match="held-out data: 1 ratings outside the rating scale 1 to "
                                        "5, e.g. 10 of item 5"):
        model.evaluate(held)


@pytest.mark.parametrize("based", ["user", "item"])
def test_the_rows_trained_on_are_those_with_an_entry(based):
    # an empty row (EMPTY_USER, EMPTY_ITEM) has nothing to reconstruct: training on it would
    # pull every output toward 0 (implicit) and take steps
    X = matrix()
    rows = (X if based == "user" else X.T.tocsr()).getnnz(axis=1)
    _, trained = fit(X, "implicit", epochs=1, based=based).data.training()
    np.testing.assert_array_equal(trained, np.flatnonzero(rows > 0))
    assert (rows == 0).any()


def test_evaluate_ranks_each_held_out_item_among_items_of_neither_the_fit_data_nor_exclude():
    # exclude: the protocol's test of a model not refit on validation (exclude=train + valid).
    # The POP baseline's scores are the fit data's item counts, so the ranks are counted here.
    X = matrix()
    model = fit(X, "implicit", cutoffs=(2, 5, 10))
    seen = X.toarray() > 0
    popularity = seen.sum(axis=0)
    rng = np.random.default_rng(3)
    users, held, excluded = [], [], []
    for u in range(N_USERS):
        unseen = np.flatnonzero(~seen[u] & (popularity > 0))       # warm items only
        if seen[u].any() and len(unseen) >= 3:
            i, *others = rng.choice(unseen, 3, replace=False)
            users.append(u)
            held.append(i)
            excluded.append(others)
    ranks = []
    for u, i, others in zip(users, held, excluded):
        candidates = ~seen[u]
        candidates[[i, *others]] = False
        ranks.append(int((popularity[candidates] >= popularity[i]).sum()))
    exclude = sp.csr_matrix((np.ones(2 * len(users)), (np.repeat(users, 2),
                                                        np.ravel(excluded))), shape=X.shape)
    figures = model.evaluate(sp.csr_matrix((np.ones(len(users)), (users, held)), shape=X.shape),
                             exclude=exclude, popularity=True)
    assert figures["rows"] == len(users)
    for m in (2, 5, 10):
        assert figures[f"hr@{m}"] == pytest.approx(np.mean(np.array(ranks) < m), abs=1e-6)


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
@pytest.mark.parametrize("based", ["user", "item"])
def test_predict_equals_float64_forward(feedback, based):
    X = matrix()
    model = fit(X, feedback, based=based)
    rng = np.random.default_rng(2)
    users = np.r_[rng.integers(0, N_USERS, 60), EMPTY_USER, FULL_USER, 7]
    items = np.r_[rng.integers(0, N_ITEMS, 60), 4, 3, EMPTY_ITEM]
    out = reference_logits(model, X)[users, items]
    got = model.predict(users, items)
    assert got.dtype == np.float32 and got.shape == (63,)
    want = ratings(out) if feedback == "explicit" else np.tanh(out)
    if feedback == "explicit":     # cold entries: the fit data's shrunk means, not the network
        cold, means = shrunk_means_by_hand(from_matrix(X, "X"), Interactions(
            users, items, np.ones(63), None, np.arange(N_USERS), np.arange(N_ITEMS)))
        assert cold.sum() == np.isin(users, EMPTY_USER).sum() + np.isin(items, EMPTY_ITEM).sum()
        want[cold] = means[cold]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("backend, based", with_backends([("user",), ("item",)],
                                                        emulated_cases=[("user",)]))
def test_similar_items_equals_brute_force_cosine(request, backend, based):
    X = matrix()
    model = fit(X, backend=backend, request=request, based=based)
    p = params64(model)
    # user-based: each item's output embedding; item-based: its code, from its column of X
    emb = p["V"] if based == "user" else codes(p, (X.toarray().T != 0).astype(np.float64))
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    cosine = unit @ unit.T
    items = np.array([0, 7, EMPTY_ITEM, 29, 13, 4])
    # neither the item itself nor EMPTY_ITEM, which no fit entry trained: its row is padding
    offered = ~np.eye(N_ITEMS, dtype=bool)[items] & (np.arange(N_ITEMS) != EMPTY_ITEM)
    offered[items == EMPTY_ITEM] = False
    ids, sims = model.similar_items(items, n=6)
    assert check_ranking(ids, sims, cosine[items], offered, 6) >= 0.8 * (ids.size - 6)
    ids, sims = model.similar_items(items, n=100)       # every item it may offer
    check_ranking(ids, sims, cosine[items], offered, N_ITEMS - 1)


# ---------------------------------------------------------------------------------------------
# ids and refused inputs

def test_unknown_ids_are_named_and_text_ids_find_integer_ids():
    model = fit(matrix(), epochs=1)
    with pytest.raises(UnknownIds, match=r"^2 user id\(s\) unknown to the model: 40, 99$") as e:
        model.recommend([3, 40, 99])
    assert isinstance(e.value, DataError) and isinstance(e.value, KeyError)
    with pytest.raises(UnknownIds, match=r"^1 item id\(s\) unknown to the model: 30$"):
        model.predict([3, 4], [5, 30])
    with pytest.raises(UnknownIds, match=r"^1 user id\(s\) unknown to the model: -1$"):
        model.predict([-1, 4], [5, 6])
    with pytest.raises(UnknownIds, match=r"^1 item id\(s\) unknown to the model: 77$"):
        model.recommend([3], items=[1, 77])
    with pytest.raises(UnknownIds, match=r"^1 item id\(s\) unknown to the model: 31$"):
        model.similar_items([2, 31])
    with pytest.raises(UnknownIds, match=r"unknown to the model: 3\.5$"):
        model.recommend([3.5])

    for a, b in zip(model.recommend(["3", "7"]), model.recommend([3, 7])):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.predict(["3", "0"], ["4", "25"]),
                                  model.predict([3, 0], [4, 25]))
    for a, b in zip(model.similar_items(["4"]), model.similar_items([4])):
        np.testing.assert_array_equal(a, b)


def test_unknown_text_id_among_known_ones_is_the_only_one_named():
    model = fit(matrix(), epochs=1)
    with pytest.raises(UnknownIds) as e:
        model.recommend(["3", "abc"])               # "3" is the model's user 3
    assert str(e.value) == "1 user id(s) unknown to the model: abc"


def _bad(dense):
    return sp.csr_matrix(np.array(dense, np.float64))


@pytest.mark.parametrize("X, message", [
    (sp.coo_matrix((np.ones(4), ([0, 2, 3, 2], [1, 3, 0, 3])), shape=(4, 5)),   # apart
     r"X: 1 duplicate entries, e\.g\. \(2, 3\)"),
    (_bad([[1, 0, -2], [0, 1, 0]]), r"X: 1 negative values, e\.g\. -2\.0 at \(0, 2\)"),
    (_bad([[1, 0, 0], [0, np.nan, 1]]), r"X: 1 NaN or infinite values, e\.g\. nan at \(1, 1\)"),
    (_bad([[1, np.inf, 0], [0, 1, 1]]), r"X: 1 NaN or infinite values, e\.g\. inf at \(0, 1\)"),
    (np.ones((4, 5)), r"X: expected a scipy\.sparse matrix \(users x items\), got ndarray"),
    (sp.csr_matrix((4, 5)), r"X has no interactions"),
])
@pytest.mark.parametrize("feedback", ["implicit", "explicit"])
def test_fit_refuses_bad_matrices(X, message, feedback):
    with pytest.raises(DataError, match=message):
        new_model(feedback).fit(X, epochs=1, verbose=False)


def test_fit_refuses_validation_of_other_shape_or_ids():
    X = matrix()
    with pytest.raises(DataError, match="validation is 40 users x 29 items; the model's data is "
                                        "40 x 30"):
        new_model().fit(X, validation=X[:, :29], epochs=1, verbose=False)
    data = from_matrix(X)
    other = dataclasses.replace(data, item_ids=data.item_ids + 100)
    with pytest.raises(DataError, match="validation has other user or item ids"):
        new_model().fit(data, validation=other, epochs=1, verbose=False)
    with pytest.raises(DataError, match=r"validation: 30 negative values, e\.g\. -1\.0 at "
                                        r"\(0, 0\)"):
        new_model().fit(X, validation=_bad(-np.eye(N_USERS, N_ITEMS)), epochs=1, verbose=False)


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_fit_refuses_a_validation_part_of_no_entries(feedback):
    # splits.random_split(data, valid_ratio=0) makes one. Before, the fit ran and stopped after
    # epoch 1 with Diverged: "the validation rmse became nan ...: lower the learning rate"
    X = matrix()
    with pytest.raises(DataError, match=r"validation has no entries: nothing to choose the "
                                        r"epoch on; leave it out \(validation=None\)"):
        new_model(feedback).fit(X, validation=sp.csr_matrix(X.shape), epochs=1, verbose=False)


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_matmul_tf32_rounds_every_product_of_the_step(monkeypatch, tmp_path, feedback):
    """matmul="tf32": every dense product of a training step takes TF32 inputs; the fit ends
    near float32's (TF32's rounding, not a different model) but not on it; a saved model
    keeps the setting."""
    X, _ = split(matrix())
    products = []

    def recording(out, a, b, trans_a=False, trans_b=False, accumulate=False, tf32=False):
        products.append(tf32)
        cpu_gemm(out, a, b, trans_a, trans_b, accumulate, tf32)
    cpu_gemm = cpu.gemm
    monkeypatch.setattr(cpu, "gemm", recording)
    rounded = fit(X, feedback, matmul="tf32")
    assert products and all(products)            # hidden (8, 6): W2's and, implicit, V's
    products.clear()
    plain = fit(X, feedback)
    assert products and not any(products)
    difference = np.abs(params(rounded) - params(plain)).max()
    assert 0 < difference < 1e-2 * np.abs(params(plain)).max()
    rounded.save(tmp_path / "model.npz")
    assert NCAE.load(tmp_path / "model.npz", device="cpu").config.matmul == "tf32"


# ---------------------------------------------------------------------------------------------
# save and load

@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_save_load_round_trip(tmp_path, feedback):
    X, valid = split(matrix())
    model = fit(X, feedback)
    model.save(tmp_path / "model.npz")
    loaded = NCAE.load(tmp_path / "model.npz", device="cpu")
    assert loaded.config == model.config and loaded.rating_scale == model.rating_scale
    assert loaded.history == model.history and loaded._net.steps == model._net.steps
    np.testing.assert_array_equal(params(loaded), params(model))
    rng = np.random.default_rng(3)
    users, items = rng.integers(0, N_USERS, 50), rng.integers(0, N_ITEMS, 50)
    np.testing.assert_array_equal(loaded.predict(users, items), model.predict(users, items))
    for filter_seen in (True, False):
        for a, b in zip(loaded.recommend(np.arange(N_USERS), 10, filter_seen),
                        model.recommend(np.arange(N_USERS), 10, filter_seen)):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(loaded.similar_items([0, 5]), model.similar_items([0, 5])):
        np.testing.assert_array_equal(a, b)
    assert loaded.evaluate(valid) == model.evaluate(valid)


def test_save_load_keeps_text_ids(tmp_path):
    X = matrix()
    rng = np.random.default_rng(4)
    user_ids = np.array([f"user-{k}" for k in rng.permutation(N_USERS)])      # not sorted
    item_ids = np.array([f"item-{k}" for k in rng.permutation(N_ITEMS)])
    data = dataclasses.replace(from_matrix(X), user_ids=user_ids, item_ids=item_ids)
    model = fit(data)
    by_index = fit(X)                  # the same training: ids play no part in it
    ids, vals = model.recommend(user_ids[[5, FULL_USER, 9]], n=10)
    want_idx, want_vals = by_index.recommend([5, FULL_USER, 9], n=10)
    np.testing.assert_array_equal(ids, np.where(want_idx >= 0, item_ids[want_idx], ""))
    np.testing.assert_array_equal(vals, want_vals)

    model.save(tmp_path / "model.npz")
    loaded = NCAE.load(tmp_path / "model.npz", device="cpu")
    np.testing.assert_array_equal(loaded.user_ids, user_ids)
    np.testing.assert_array_equal(loaded.item_ids, item_ids)
    for a, b in zip(loaded.recommend(user_ids[[5, FULL_USER, 9]], n=10), (ids, vals)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.predict(user_ids[:4], item_ids[:4]),
                                  by_index.predict(np.arange(4), np.arange(4)))
    for a, b in zip(loaded.similar_items(item_ids[[2]]), model.similar_items(item_ids[[2]])):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(UnknownIds, match=r"unknown to the model: user-40$"):
        loaded.recommend(["user-3", "user-40"])


def object_id_model():
    """A model of text ids held in object arrays (as from pandas), which save() stores as str."""
    data = dataclasses.replace(
        from_matrix(matrix()), user_ids=np.array([f"user-{k}" for k in range(N_USERS)], object),
        item_ids=np.array([f"item-{k}" for k in range(N_ITEMS)], object))
    return fit(data)


def test_object_text_ids_pad_with_empty_text_before_and_after_save(tmp_path):
    model = object_id_model()
    model.save(tmp_path / "model.npz")
    loaded = NCAE.load(tmp_path / "model.npz", device="cpu")
    for m in (loaded, model):
        ids, vals = m.recommend(["user-1"], n=5)       # 3 candidates, then padding
        assert sorted(ids[0, :3]) == sorted(f"item-{k}" for k in UNSEEN_BY_FULL_USER)
        assert list(ids[0, 3:]) == ["", ""] and (vals[0, 3:] == -np.inf).all()


def test_unknown_integer_id_among_object_text_ids_is_named():
    model = object_id_model()
    with pytest.raises(UnknownIds, match=r"^1 user id\(s\) unknown to the model: 3$"):
        model.recommend(["user-2", 3])
    with pytest.raises(UnknownIds, match=r"^1 item id\(s\) unknown to the model: 3$"):
        model.similar_items([3])


def test_load_refuses_damaged_and_foreign_files(tmp_path, monkeypatch):
    X = matrix()
    model = fit(X, epochs=1)
    good = tmp_path / "model.npz"
    model.save(good)

    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[:good.stat().st_size // 2])
    with pytest.raises(DataError, match="truncated"):
        NCAE.load(cut, device="cpu")

    with monkeypatch.context() as m:
        m.setattr(modelfile, "VERSION", 2)
        model.save(tmp_path / "old.npz")
    with pytest.raises(DataError, match=rf"format version 2; this ncae_cuda reads version "
                                        rf"{modelfile.VERSION}"):
        NCAE.load(tmp_path / "old.npz", device="cpu")

    new_model().fit(X, epochs=1, checkpoint=tmp_path / "checkpoint.npz", verbose=False)
    with pytest.raises(DataError, match="a ncae_cuda checkpoint file, not an ncae_cuda model"):
        NCAE.load(tmp_path / "checkpoint.npz", device="cpu")

    np.savez(tmp_path / "plain.npz", params=params(model))
    with pytest.raises(DataError, match=r"no header"):
        NCAE.load(tmp_path / "plain.npz", device="cpu")

    with pytest.raises(DataError, match="no such file"):
        NCAE.load(tmp_path / "missing.npz", device="cpu")


# ---------------------------------------------------------------------------------------------
# training: NaN losses, early stopping, resume

def nan_after(monkeypatch, good_steps: int) -> None:
    """Every training step after the first good_steps reports a NaN loss (having stepped)."""
    real, calls = Network.train_step, []

    def step(self, *args, **kwargs):
        loss = real(self, *args, **kwargs)
        calls.append(1)
        return loss * np.nan if len(calls) > good_steps else loss
    monkeypatch.setattr(Network, "train_step", step)


@pytest.mark.parametrize("feedback", ["implicit", "explicit"])
def test_nan_loss_names_epoch_and_step(monkeypatch, feedback):
    nan_after(monkeypatch, 1)
    with pytest.raises(FloatingPointError, match=rf"nan at step 2 of {STEPS} in epoch 1: lower "
                                                 r"the learning rate"):
        fit(matrix(), feedback, epochs=3, based="user")


def test_huge_learning_rate_stops_with_floating_point_error():
    with pytest.raises(FloatingPointError, match=r"at step \d+ of \d+ in epoch \d+: lower the "
                                                 r"learning rate \(lr, --lr\)"):
        fit(matrix(), epochs=3, lr=1e30)


def test_nan_loss_leaves_the_last_good_epoch_in_the_checkpoint(tmp_path, monkeypatch):
    X = matrix()
    path = tmp_path / "checkpoint.npz"
    nan_after(monkeypatch, STEPS)                           # epoch 1 good, epoch 2 NaN
    with pytest.raises(FloatingPointError, match=rf"step 1 of {STEPS} in epoch 2"):
        new_model().fit(X, epochs=3, checkpoint=path, checkpoint_every=0, verbose=False)
    monkeypatch.undo()

    new_model().fit(X, epochs=1, checkpoint=tmp_path / "once.npz", verbose=False)
    with np.load(path) as broken, np.load(tmp_path / "once.npz") as whole:
        np.testing.assert_array_equal(broken["state"], whole["state"])
    resumed = new_model().fit(X, epochs=3, checkpoint=path, resume=True, verbose=False)
    whole = new_model().fit(X, epochs=3, verbose=False)
    np.testing.assert_array_equal(params(resumed), params(whole))
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]


@pytest.mark.parametrize("feedback, lr, cutoffs, metric, best", [
    ("explicit", 0.03, (5, 10), "rmse", np.argmin),
    ("implicit", 0.1, (5, 10), "ndcg@10", np.argmax),
    # the last cutoff as given chooses, not the largest (topm's runs give theirs last)
    ("implicit", 0.1, (10, 5), "ndcg@5", np.argmax)])
def test_early_stopping_keeps_the_best_epoch(feedback, lr, cutoffs, metric, best):
    train, valid = split(matrix())
    snapshots = []
    model = new_model(feedback, lr=lr, patience=2, cutoffs=cutoffs)
    model.fit(train, validation=valid, epochs=10, verbose=False,
              callback=lambda m, record: snapshots.append(params(m).copy()))
    figures = [record["valid"][metric] for record in model.history]
    assert model.selection_metric == (metric, feedback == "implicit")
    assert model.best_epoch == best(figures) + 1
    assert model.best_epoch < len(figures) == model.best_epoch + 2    # stopped by patience
    np.testing.assert_array_equal(params(model), snapshots[model.best_epoch - 1])
    assert model.evaluate(valid)[metric] == pytest.approx(figures[model.best_epoch - 1],
                                                          rel=1e-12)


def test_a_checkpoint_holds_what_resuming_needs_and_no_gradient(tmp_path):
    train, valid = split(matrix())
    model = new_model("explicit", lr=0.03, patience=2)
    model.fit(train, validation=valid, epochs=10, checkpoint=tmp_path / "c.npz", verbose=False)
    meta, arrays = modelfile.read(tmp_path / "c.npz", "checkpoint")
    size = model._net.layout.size
    assert set(arrays) == {"state", "best"}                     # params, m, v; the best params
    assert arrays["state"].shape == (3, size) and meta["steps"] == model._net.steps
    np.testing.assert_array_equal(arrays["best"], params(model))   # restored from the device


@pytest.mark.parametrize("feedback, validated, patience, lr, epochs, stop_in, lr_decay", [
    ("implicit", False, 0, 0.01, 5, 3, 1.0), ("explicit", True, 0, 0.01, 5, 3, 1.0),
    ("implicit", True, 0, 0.01, 5, 3, 1.0),
    ("explicit", True, 0, 0.01, 5, 3, 0.5),      # the schedule goes on from the checkpoint
    ("explicit", True, 2, 0.03, 8, 5, 1.0)])     # stops early after epoch 5 (best 3): cut
                                                 # after a bad one
def test_resume_after_interrupt_equals_uninterrupted(tmp_path, monkeypatch, feedback, validated,
                                                     patience, lr, epochs, stop_in, lr_decay):
    train, valid = split(matrix())
    valid = valid if validated else None
    settings = {"feedback": feedback, "lr": lr, "lr_decay": lr_decay,
                **({"patience": patience} if validated else {})}   # (without: refused, unread)
    whole = new_model(**settings).fit(train, validation=valid, epochs=epochs, verbose=False)

    real, calls = loop.run_epoch, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == stop_in:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    path = tmp_path / "checkpoint.npz"
    monkeypatch.setattr(loop, "run_epoch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        new_model(**settings).fit(train, validation=valid, epochs=epochs, checkpoint=path,
                                  checkpoint_every=0, verbose=False)
    monkeypatch.undo()
    resumed = new_model(**settings).fit(train, validation=valid, epochs=epochs, checkpoint=path,
                                        resume=True, verbose=False)
    np.testing.assert_array_equal(resumed._net.params, whole._net.params)
    n_epochs = 5 if epochs == 5 else whole.best_epoch + patience
    assert len(whole.history) == n_epochs and (patience == 0 or n_epochs < epochs)
    trained_rows = np.unique(train.tocoo().row if feedback == "implicit" else train.tocoo().col)
    assert resumed._net.steps == whole._net.steps == n_epochs * -(-len(trained_rows) // 16)
    assert resumed.best_epoch == whole.best_epoch
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]
    if validated:
        assert [r["valid"] for r in resumed.history] == [r["valid"] for r in whole.history]


def test_checkpoints_follow_the_clock_and_resume_from_the_last(tmp_path, monkeypatch):
    """Each epoch "takes" 10 s on a fake clock; with checkpoint_every=25 the checkpoint is saved
    before and after pre-training (epoch 0), at epoch 3 (30 s on) and at the last, epoch 6. A
    fit interrupted in epoch 6 resumes from epoch 3 and ends where an uninterrupted one does."""
    X, path, now = matrix(), tmp_path / "checkpoint.npz", [0.0]
    monkeypatch.setattr(trainer.time, "monotonic", lambda: now[0])
    saved = []
    real_save = trainer.Checkpoint.save
    monkeypatch.setattr(trainer.Checkpoint, "save", lambda self, net, progress, best: (
        saved.append(progress.epoch), real_save(self, net, progress, best)))

    def ten_seconds(model, record):
        now[0] += 10
    whole = new_model().fit(X, epochs=6, checkpoint=tmp_path / "whole.npz", checkpoint_every=25,
                            callback=ten_seconds, verbose=False)
    assert saved == [0, 0, 3, 6]

    real_epoch, calls = loop.run_epoch, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return real_epoch(*args, **kwargs)
    monkeypatch.setattr(loop, "run_epoch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        new_model().fit(X, epochs=6, checkpoint=path, checkpoint_every=25, callback=ten_seconds,
                        verbose=False)
    monkeypatch.setattr(loop, "run_epoch", real_epoch)
    assert modelfile.read(path, "checkpoint")[0]["progress"]["epoch"] == 3
    resumed = new_model().fit(X, epochs=6, checkpoint=path, resume=True, verbose=False)
    np.testing.assert_array_equal(params(resumed), params(whole))
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]


@pytest.mark.parametrize("backend, feedback, lr_decay", with_backends(
    [("explicit", 1.0), ("implicit", 1.0), ("explicit", 0.5)], [("explicit", 0.5)]))
def test_a_signal_stops_at_the_end_of_a_step_and_the_fit_resumes_from_the_next(
        tmp_path, monkeypatch, request, backend, feedback, lr_decay):
    # Before, a stop saved nothing: the resume restarted from the last checkpoint.
    X, path = matrix(), tmp_path / "checkpoint.npz"
    settings = {"lr": 0.01, "lr_decay": lr_decay, "based": "user"}      # STEPS steps an epoch
    whole = new_model(feedback, backend, request, **settings).fit(X, epochs=3, verbose=False)
    real, calls = Network.train_step, []

    def step(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == STEPS + 1:                  # in epoch 2, as its first step runs
            stopping._asked.append("SIGTERM")
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Network, "train_step", step)
    with pytest.raises(stopping.Stopped):
        new_model(feedback, backend, request, **settings).fit(
            X, epochs=3, checkpoint=path, checkpoint_every=1000, verbose=False)
    monkeypatch.undo()
    assert not stopping.asked()
    progress = modelfile.read(path, "checkpoint")[0]["progress"]
    assert progress["epoch"] == 1 and len(progress["epoch_losses"]) == 1
    resumed = new_model(feedback, backend, request, **settings).fit(
        X, epochs=3, checkpoint=path, resume=True, verbose=False)
    np.testing.assert_array_equal(params(resumed), params(whole))
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]


def test_a_second_signal_stops_at_once():
    with pytest.raises(stopping.Stopped):       # the stop asked, never taken: at the end
        with stopping.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            assert stopping.asked() == "SIGINT"          # asked, not stopped
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
    assert stopping.asked() is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_within_recorded_a_signal_only_asks_and_a_fit_stops_at_its_first_step():
    """A tuning worker's signals (stopping.recorded): the first raises nothing (a raise could
    cut a write to the study's storage short), and a fit begun after the request stops at the
    end of its first step, with that step's loss, and the request stays; a second signal
    raises, as a fit's does: a user who asks twice is not kept waiting on a long trial."""
    with stopping.recorded():
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopping.asked() == "SIGTERM"
        with pytest.raises(stopping.Stopped) as stopped:
            new_model().fit(matrix(), epochs=3, verbose=False)
        assert len(stopped.value.losses) == 1 and stopping.asked() == "SIGTERM"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert stopping.asked() is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("nested", [False, True])
def test_a_signal_in_a_numba_compile_is_raised_once_the_compile_ends(nested):
    """Within compiles_whole (a command's, and a sharded fit's within it: nested), a SIGINT
    that comes while Numba compiles does not cut the compile short (raised inside llvmlite's
    callback of the object code, Python drops it: tests/test_distributed.py sends one there):
    its KeyboardInterrupt comes as the compile ends, the function whole; after it, SIGINT's
    handler is the one before it. (Nested, before: the inner listener handed the signal to
    the outer's handler, after the outer had let go: it was lost, and the handler left.)"""
    @numba.njit
    def doubled(x):                 # a function no cache holds: compiled in the test
        return 2 * x

    class CtrlC(numba_event.Listener):
        def on_start(self, event) -> None:
            os.kill(os.getpid(), signal.SIGINT)

        def on_end(self, event) -> None:
            pass
    inner = stopping.compiles_whole() if nested else contextlib.nullcontext()
    with stopping.compiles_whole(), inner, numba_event.install_listener("numba:compile", CtrlC()):
        with pytest.raises(KeyboardInterrupt):
            doubled(1.5)
    assert len(doubled.signatures) == 1 and doubled(1.5) == 3.0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("every", [-1, float("nan"), "60", True])
def test_checkpoint_every_must_be_seconds(every):
    with pytest.raises(ValueError, match="checkpoint_every must be a number of seconds >= 0"):
        new_model().fit(matrix(), epochs=1, checkpoint_every=every, verbose=False)


@pytest.mark.parametrize("epochs", [0, -1, 1.0, True])
def test_epochs_must_train_something(epochs):
    # Before, fit(epochs=0) without pre-training returned its random start as a fitted model.
    model = new_model()
    with pytest.raises(ValueError, match=rf"^epochs must be an integer >= 1 \(0: pre-training "
                                         rf"only, where pretrain is not BP\); got {epochs!r}$"):
        model.fit(matrix(), epochs=epochs, verbose=False)
    assert model.data is None


def test_zero_epochs_is_pre_training_only():
    # what train's refit asks for where the pre-trained network scored best on validation
    model = new_model(pretrain="S+U+S", pretrain_epochs=1).fit(matrix(), epochs=0,
                                                                verbose=False)
    assert [r["epoch"] for r in model.history] == [0] and model.history[0]["pretrain"]


def test_learning_rate_decays_by_fine_tuning_epoch(monkeypatch):
    # pre-training's steps at lr; fine-tuning's epoch e at lr * 0.5^(e-1), counted from its start
    lrs = []
    real = cpu.decayed
    monkeypatch.setattr(cpu, "decayed", lambda *args: lrs.append(real(*args)) or lrs[-1])
    fit(matrix(), "explicit", epochs=3, lr=0.01, lr_decay=0.5, pretrain="S+U+S",
        pretrain_epochs=1)
    steps = -(-(N_ITEMS - 1) // 16)                       # item-based: every item but item 25
    tuned = lrs[-3 * steps:]
    assert tuned == [0.01] * steps + [0.005] * steps + [0.0025] * steps
    assert len(lrs) > 3 * steps and set(lrs[:-3 * steps]) == {0.01}


def test_resume_refuses_a_checkpoint_of_another_fit(tmp_path):
    X = matrix()
    path = tmp_path / "checkpoint.npz"
    new_model().fit(X, epochs=2, checkpoint=path, verbose=False)
    another = r"checkpoint\.npz: the checkpoint is of another fit \("
    with pytest.raises(DataError, match=another + r"settings\.lr: 0\.001 -> 0\.01\)"):
        new_model(lr=0.01).fit(X, epochs=2, checkpoint=path, resume=True, verbose=False)
    with pytest.raises(DataError, match=another + r"settings\.hidden: \[8, 6\] -> \[8\]\)"):
        new_model(hidden=(8,)).fit(X, epochs=2, checkpoint=path, resume=True, verbose=False)
    with pytest.raises(DataError, match=another + r"settings\.epochs: 2 -> 4\)"):
        new_model().fit(X, epochs=4, checkpoint=path, resume=True, verbose=False)
    with pytest.raises(DataError, match=another + r"data: \w+ -> \w+\)"):
        new_model().fit(matrix(seed=1), epochs=2, checkpoint=path, resume=True, verbose=False)


def test_resume_without_a_checkpoint_is_refused():
    # before: fit(X, resume=True) trained from scratch, as if resume were not there
    with pytest.raises(SettingError, match=r"resume needs checkpoint=, the file a fit resumes "
                                           r"from"):
        new_model().fit(matrix(), epochs=1, resume=True, verbose=False)


def test_misused_calls_say_what_is_wrong():
    X = matrix()
    model = fit(X)
    with pytest.raises(DataError, match="also in the fit data"):
        model.evaluate(X)                     # held-out items the user already has
    with pytest.raises(ValueError, match="n must be an integer >= 1; got 0"):
        model.similar_items([2], n=0)
    with pytest.raises(RuntimeError, match="call fit"):
        new_model().recommend([2])
