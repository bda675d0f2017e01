"""Cold entries (a user or an item with no fit entry): an explicit model predicts them from the
fit data's shrunk means, checked against a float64 computation entry by entry; evaluate scores
them apart from the warm ones; a run of --train / --test files holds them apart as a time split
does, and says what they were given, explicit and implicit alike."""
import json
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda import BlendedNCAE, NCAE
from ncae_cuda.commands import train
from ncae_cuda.data import datasets, splits
from ncae_cuda.data.interactions import Interactions
from ncae_cuda.model import cold_means
from ncae_cuda.model.cold_means import SHRINK, cold_at, cold_ratings

SETTINGS = {"hidden": (8,), "batch_size": 16, "device": "cpu"}


def shrunk_means_by_hand(fit, held) -> tuple[np.ndarray, np.ndarray]:
    """((n,) bool cold, (n,) float64 the shrunk mean) of each of `held`'s entries, from `fit`'s
    ratings (same id maps), summed entry by entry in Python."""
    by_user, by_item = defaultdict(list), defaultdict(list)
    for u, i, r in zip(fit.users.tolist(), fit.items.tolist(), fit.ratings.tolist()):
        by_user[u].append(r)
        by_item[i].append(r)
    mean = sum(fit.ratings.tolist()) / fit.nnz
    cold, means = [], []
    for u, i in zip(held.users.tolist(), held.items.tolist()):
        new_user, new_item = u not in by_user, i not in by_item
        cold.append(new_user or new_item)
        known = (by_item[i] if new_user and not new_item else
                 by_user[u] if new_item and not new_user else [])
        means.append((sum(known) + SHRINK * mean) / (len(known) + SHRINK) if known else mean)
    return np.array(cold, bool), np.array(means)


def test_the_shrunk_means_against_a_computation_entry_by_entry():
    rng = np.random.default_rng(0)
    n_users, n_items = 30, 25
    users, items = rng.integers(0, n_users - 3, 200), rng.integers(0, n_items - 3, 200)
    keys = np.unique(users * n_items + items)         # one rating a pair
    users, items = (keys // n_items).astype(np.int32), (keys % n_items).astype(np.int32)
    ratings = rng.integers(1, 6, len(keys)).astype(np.float32)
    seen = sp.csr_matrix((ratings, (users, items)), shape=(n_users, n_items))
    # every kind of entry: warm, a new user (the last 3), a new item (the last 3), both new
    q_users = np.array([0, 1, 27, 28, 2, 3, 29, 27], np.int32)
    q_items = np.array([0, 5, 1, 2, 22, 24, 23, 24], np.int32)
    fit = Interactions(users, items, ratings, None, np.arange(n_users),
                              np.arange(n_items))
    held = Interactions(q_users, q_items, np.ones(8, np.float32), None,
                               np.arange(n_users), np.arange(n_items))
    cold, means = shrunk_means_by_hand(fit, held)
    np.testing.assert_array_equal(cold_at(np.diff(seen.indptr), np.bincount(
        items, minlength=n_items), q_users, q_items), cold)
    assert cold.tolist() == [False, False, True, True, True, True, True, True]
    got = cold_ratings(cold_means.shrunk_means(seen), np.diff(seen.indptr), q_users[cold],
                       q_items[cold])
    np.testing.assert_allclose(got, means[cold], rtol=1e-6)
    assert got.dtype == np.float32
    assert got[-1] == pytest.approx(ratings.mean()) == got[-2]        # both new: the mean


def new_users_split(feedback: str = "explicit"):
    """synthetic-tiny with its last 10 users' entries as the test part (they are new there)
    and a random 20% of the rest too, on one id map, as given files are."""
    data = datasets.load("synthetic-tiny")
    new = data.users >= data.n_users - 10
    rest = np.flatnonzero(~new)
    test = np.zeros(data.nnz, bool)
    test[new] = True
    test[np.random.default_rng(1).choice(rest, len(rest) // 5, replace=False)] = True
    if feedback == "implicit":
        data = Interactions(data.users, data.items, None, data.timestamps,
                                   data.user_ids, data.item_ids, name=data.name)
    return splits.given_split(data.subset(~test), data.subset(test))[1]


def test_an_explicit_model_predicts_and_scores_cold_entries_apart():
    split = new_users_split()
    assert split.cold_test.nnz and split.test.nnz           # given files hold them apart
    model = NCAE(feedback="explicit", **SETTINGS).fit(split.train, epochs=2, verbose=False)
    held = split.test.concat(split.cold_test)
    cold, means = shrunk_means_by_hand(split.train, held)
    users, items = held.user_ids[held.users], held.item_ids[held.items]
    predicted = model.predict(users, items)
    np.testing.assert_allclose(predicted[cold], means[cold], rtol=1e-6)
    assert np.std(predicted[cold]) > 0                        # not one constant
    figures = model.evaluate(held)
    for got, part in ((figures, ~cold), (figures["cold"], cold)):
        rmse = np.sqrt(np.mean((predicted[part].astype(np.float64) - held.ratings[part]) ** 2))
        assert got["rmse"] == pytest.approx(rmse, rel=1e-5) and got["entries"] == part.sum()
    assert "cold" not in model.evaluate(split.test)           # only warm entries: no cold part


def test_an_implicit_model_ranks_cold_users_apart():
    split = new_users_split("implicit")
    model = NCAE(feedback="implicit", **SETTINGS).fit(split.train, epochs=1, verbose=False)
    held = split.test.concat(split.cold_test)
    figures = model.evaluate(held)
    assert (figures["rows"], figures["cold"]["rows"]) == (split.test.nnz, split.cold_test.nnz)
    assert figures["cold"] == model.evaluate(split.cold_test)["cold"]


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_train_on_given_files_scores_cold_entries_apart(tmp_path, capsys, feedback):
    split = new_users_split(feedback)
    columns = "user,item,rating\n" if feedback == "explicit" else "user,item\n"
    files = {}
    for name, part in (("train", split.train), ("test", split.test.concat(split.cold_test))):
        rows = [part.user_ids[part.users], part.item_ids[part.items]]
        if feedback == "explicit":
            rows.append(part.ratings.astype(int))
        files[name] = tmp_path / f"{name}.csv"
        files[name].write_text(columns + "".join(",".join(map(str, r)) + "\n"
                                                 for r in zip(*rows)))
    out = tmp_path / "run"
    assert train.main(["--train", str(files["train"]), "--test", str(files["test"]),
                       "--feedback", feedback, "--hidden", "8", "--batch-size", "16",
                       "--epochs", "2", "--device", "cpu", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "\nwarm test\n" in said and "\ncold test, scored apart: " in said
    result = json.loads((out / "metrics.json").read_text())
    assert result["data"]["cold_test"]["new_users"] == 10
    # files have no time cut (before: "... new at the test cut", "no entry before the test cut")
    cold = result["data"]["cold_test"]
    assert (f"cold test, scored apart: {cold['entries']} entries of {cold['users']} users and "
            f"{cold['items']} items, of which {cold['new_users']} users and {cold['new_items']} "
            "items have no training or validation entry") in said
    assert "test cut" not in said, said
    if feedback == "explicit":
        assert "predicted by the training data's means, shrunk by 5 ratings" in said
        assert result["cold_test"]["entries"] == result["data"]["cold_test"]["entries"]
        assert result["test"]["entries"] == result["data"]["test"]
        # every test entry together, against a float64 RMSE of the saved model's predictions
        held = split.test.concat(split.cold_test)
        predicted = NCAE.load(out / "model.npz").predict(held.user_ids[held.users],
                                                         held.item_ids[held.items])
        rmse = np.sqrt(np.mean((predicted.astype(np.float64) - held.ratings) ** 2))
        assert result["all_test"] == {"rmse": pytest.approx(rmse, rel=1e-5),
                                      "entries": held.nnz}
        assert "\nall test entries, warm and cold together" in said
    else:
        assert "POP beside" in said and "cold_pop" in result


@pytest.mark.parametrize("model", ["user", "item", "both"])
def test_an_explicit_model_recommends_to_cold_users_by_the_shrunk_means(model):
    split = new_users_split()
    fit = split.train
    make = BlendedNCAE if model == "both" else lambda **s: NCAE(based=model, **s)
    fitted = make(feedback="explicit", **SETTINGS).fit(fit, epochs=1, verbose=False)
    cold_users = np.flatnonzero(np.bincount(fit.users, minlength=len(fit.user_ids)) == 0)[:2]
    every_item = np.arange(len(fit.item_ids))
    _, means = shrunk_means_by_hand(fit, Interactions(                 # a cold user's, each item
        np.full(len(every_item), cold_users[0]), every_item, None, None, fit.user_ids,
        fit.item_ids))
    candidates = every_item[::3]
    for items, n in ((None, 5), (fit.item_ids[candidates], 4)):
        pool = every_item if items is None else candidates
        best = pool[np.lexsort((pool, -means[pool]))][:n]          # ties to the earlier item
        got_items, got_scores = fitted.recommend(fit.user_ids[cold_users], n=n, items=items)
        for row, scores in zip(got_items, got_scores):
            np.testing.assert_array_equal(row, fit.item_ids[best])
            np.testing.assert_allclose(scores, means[best], rtol=1e-6)
            np.testing.assert_array_equal(scores, fitted.predict(
                np.repeat(fit.user_ids[cold_users[0]], n), row))       # predict's own values
        if model == "user":                      # a new user with no history yet: the same
            new = fitted.recommend_new(sp.csr_matrix((1, len(fit.item_ids))), n=n, items=items)
            np.testing.assert_array_equal(new[0], got_items[:1])
            np.testing.assert_array_equal(new[1], got_scores[:1])


def test_the_shrunk_means_are_computed_once_a_fit_and_again_for_the_next(monkeypatch):
    """They are a pass over every fit rating (0.7 ms on ML-100K, 0.6 to 2 s at 20 million
    ratings), and recommend and predict computed them at every call with a cold user; now
    once a fit or load, and another fit's data gets its own (against the float64 hand count)."""
    split = new_users_split()
    computed = []
    compute = cold_means.shrunk_means
    monkeypatch.setattr(cold_means, "shrunk_means",
                        lambda seen: computed.append(seen.nnz) or compute(seen))
    model = NCAE(feedback="explicit", **SETTINGS)
    for fit in (split.train, split.train.subset(np.arange(split.train.nnz) % 2 == 0)):
        model.fit(fit, epochs=1, verbose=False)
        computed.clear()
        cold_users = np.flatnonzero(np.bincount(fit.users, minlength=len(fit.user_ids)) == 0)
        every_item = np.arange(len(fit.item_ids))
        _, means = shrunk_means_by_hand(fit, Interactions(
            np.full(len(every_item), cold_users[0]), every_item, None, None, fit.user_ids,
            fit.item_ids))
        for _ in range(3):
            _, scores = model.recommend(fit.user_ids[cold_users[:2]], n=len(every_item),
                                        filter_seen=False)
            np.testing.assert_allclose(np.sort(scores[0]), np.sort(means), rtol=1e-6)
            predicted = model.predict(fit.user_ids[cold_users[:1]].repeat(3),
                                      fit.item_ids[:3])
            np.testing.assert_allclose(predicted, means[:3], rtol=1e-6)
        assert computed == [fit.nnz]


def test_cold_entries_are_found_from_the_counts_of_the_fit(monkeypatch):
    """predict and evaluate tell cold entries by the fit data's entries a user and an item,
    which FitData counts once a fit or load: they recounted every item's entries, a pass over
    every fit rating, at each call. Found as the float64 hand count finds them."""
    split = new_users_split()
    model = NCAE(feedback="explicit", **SETTINGS).fit(split.train, epochs=1, verbose=False)
    held = split.test.concat(split.cold_test)
    cold, _ = shrunk_means_by_hand(split.train, held)
    model.data.item_counts, model.data.shrunk_means                 # counted once, beforehand
    passes = []
    count = np.bincount
    monkeypatch.setattr(np, "bincount", lambda keys, *args, **kwargs: passes.append(
        len(keys)) or count(keys, *args, **kwargs))
    for _ in range(3):
        model.predict(held.user_ids[held.users], held.item_ids[held.items])
        warm, cold_part = model.data.cold_apart(held)
        assert (warm.nnz, cold_part.nnz) == ((~cold).sum(), cold.sum())
    assert split.train.nnz not in passes


def emptied_items_data():
    """Random small ratings (40 users x 30 items, 1 to 5) whose items EMPTIED have no rating:
    columns the network never trained, as a user-based model's output columns or an
    item-based model's empty rows. The user and the item of ONE_RATING have one rating each:
    neither is cold."""
    rng = np.random.default_rng(3)
    X = sp.random(40, 30, density=0.3, random_state=4, format="csr")
    X.data = rng.integers(1, 6, X.nnz).astype(np.float32)
    X.data[np.isin(X.indices, EMPTIED)] = 0
    X.data[X.indptr[ONE_RATING[0]] + 1:X.indptr[ONE_RATING[0] + 1]] = 0
    X.data[np.flatnonzero((X.indices == ONE_RATING[1]) & (X.data > 0))[1:]] = 0
    X.eliminate_zeros()
    return X


EMPTIED = [3, 7, 20]
ONE_RATING = (2, 11)                        # (user, item)


@pytest.mark.parametrize("model, output", [("user", "tanh"), ("item", "tanh"), ("both", "tanh"),
                                           ("user", "identity")])
def test_recommend_scores_items_of_no_fit_rating_as_predict_does(model, output):
    """A known user's item with no fit rating is predicted at the user's shrunk mean;
    recommend ranked it by its untrained column (a random draw, decayed) or empty row instead,
    at a score predict never gives. Now every item's score is predict's (float32), the
    emptied items' the hand-computed mean, and the other items keep their order and scores;
    recommend_new of a fit user's row gives recommend's."""
    X = emptied_items_data()
    user, item = ONE_RATING                         # neither cold: scored by the network
    assert X[user].nnz == X[:, item].nnz == 1
    make = BlendedNCAE if model == "both" else lambda **s: NCAE(based=model, **s)
    fitted = make(feedback="explicit", rating_scale=(1, 5), output=output, **SETTINGS).fit(
        X, epochs=2, verbose=False)
    users, every_item = np.arange(8), np.arange(X.shape[1])
    fit = Interactions(*X.nonzero(), X.data, None, np.arange(X.shape[0]), every_item)
    ids, scores = fitted.recommend(users, n=len(every_item), filter_seen=False)
    warm_items = np.setdiff1d(every_item, EMPTIED)
    warm_ids, warm_scores = fitted.recommend(users, n=len(warm_items), filter_seen=False,
                                             items=warm_items)
    for u, row, row_scores, warm_row, warm_row_scores in zip(users, ids, scores, warm_ids,
                                                             warm_scores):
        np.testing.assert_allclose(row_scores, fitted.predict(np.full(len(row), u), row),
                                   rtol=1e-6)
        assert (np.diff(row_scores) <= 0).all()
        _, means = shrunk_means_by_hand(fit, Interactions(
            np.full(len(EMPTIED), u), np.array(EMPTIED), None, None, fit.user_ids,
            fit.item_ids))
        cold = np.isin(row, EMPTIED)
        np.testing.assert_array_equal(row[cold], EMPTIED)             # tied: the earlier first
        np.testing.assert_allclose(row_scores[cold], means, rtol=1e-6)
        np.testing.assert_array_equal(row[~cold], warm_row)           # the others as they were
        np.testing.assert_array_equal(row_scores[~cold], warm_row_scores)
    if model == "user":           # a fit user's row folded in as a new user's: recommend's
        new_ids, new_scores = fitted.recommend_new(X[users], n=len(every_item),
                                                   filter_seen=False)
        np.testing.assert_array_equal(new_ids, ids)
        np.testing.assert_allclose(new_scores, scores, rtol=1e-6)


@pytest.mark.parametrize("model, feedback", [("user", "explicit"), ("item", "explicit"),
                                             ("both", "explicit"), ("user", "implicit"),
                                             ("item", "implicit")])
def test_similar_items_compares_no_item_of_no_fit_entry(model, feedback):
    """An item with no fit entry has nothing to compare it by: its row is padding, and it is
    no other item's neighbour. Before, an item-based model gave each such item its empty row's
    code, so each was every other's most similar at cosine 1.0 (and a warm item's, where its
    code came near), and a user-based one compared their untrained columns (random draws)."""
    X = emptied_items_data()
    make = BlendedNCAE if model == "both" else lambda **s: NCAE(based=model, **s)
    fitted = make(feedback=feedback, **SETTINGS).fit(X, epochs=2, verbose=False)
    ids, sims = fitted.similar_items(EMPTIED, n=4)
    assert (ids == -1).all() and (sims == -np.inf).all()
    warm = np.setdiff1d(np.arange(X.shape[1]), EMPTIED)
    ids, sims = fitted.similar_items(warm, n=X.shape[1])          # every item it may offer
    offered = ids[:, :len(warm) - 1]
    assert (ids[:, len(warm) - 1:] == -1).all() and (sims[:, len(warm) - 1:] == -np.inf).all()
    for item, row in zip(warm, offered):
        np.testing.assert_array_equal(np.sort(row), np.setdiff1d(warm, [item]))
    if model == "user":           # by hand: the cosine of the warm items' output embeddings
        V = np.asarray(fitted._net.p["V"], np.float64)[warm]
        unit = V / np.linalg.norm(V, axis=1, keepdims=True)
        cosine = unit @ unit.T
        np.fill_diagonal(cosine, -np.inf)
        np.testing.assert_allclose(sims[:, :len(warm) - 1], -np.sort(-cosine, axis=1)[:, :-1],
                                   atol=1e-5)
