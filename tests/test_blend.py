"""based='both' (ncae_cuda.model.blend): the stack's weights against float64 least squares, the
blend's predictions and rankings against a recomputation from its members, on every backend;
save and load, the protocol's refit, the CLI run, and what it refuses."""
import functools
import json

import numpy as np
import pytest
from test_train import TINY
from test_user_errors import refused

from ncae_cuda import NCAE, BlendedNCAE, Unsupported, load_model, make_model
from ncae_cuda.commands import train
from ncae_cuda.data import datasets, splits
from ncae_cuda.data.interactions import DataError
from ncae_cuda.model import blend
from ncae_cuda.model.config import SettingError
from test_cold_entries import shrunk_means_by_hand

SETTINGS = {"hidden": (8, 6), "batch_size": 16}


def fitted(device="cpu", epochs=3, **settings) -> tuple:
    data = datasets.load("synthetic-tiny")
    split = splits.random_split(data, 0.2, 0.2, seed=0)
    model = BlendedNCAE(device=device, **{**SETTINGS, **settings}).fit(
        split.train, validation=split.valid, epochs=epochs, verbose=False)
    return model, split


@functools.cache
def fitted_once(device="cpu") -> tuple:
    """fitted() with its defaults, fit once a backend: for the tests that only read the model
    (predict, recommend, evaluate, save)."""
    return fitted(device)


def log_counts(part) -> tuple:
    """(items,), (users,) float64 log(1 + each one's entries in `part`), counted here."""
    return (np.log1p(np.bincount(part.items, minlength=part.n_items)),
            np.log1p(np.bincount(part.users, minlength=part.n_users)))


def by_hand(weights, ratings, li, lu, scale) -> np.ndarray:
    """The module docstring's formula, term by term in float64."""
    (a1, b1, c1), (a2, b2, c2), (d, e, f) = weights
    r1, r2 = (np.asarray(r, np.float64) for r in ratings)
    out = (a1 + b1 * li + c1 * lu) * r1 + (a2 + b2 * li + c2 * lu) * r2 + d + e * li + f * lu
    return np.clip(out, *scale)


def test_the_weights_are_the_least_squares_fit():
    rng = np.random.default_rng(0)
    n = 500
    ratings = rng.uniform(1, 5, (2, n))
    li, lu = rng.uniform(0, 5, n), rng.uniform(0, 5, n)
    true = rng.normal(size=(3, 3))
    exact = by_hand(true, ratings, li, lu, (-np.inf, np.inf))
    np.testing.assert_allclose(blend.fit_weights(ratings, exact, li, lu), true, atol=1e-8)
    # with noise: the normal equations' solution, from the 9 features built another way
    noisy = exact + rng.normal(scale=0.3, size=n)
    features = np.column_stack([ratings[0], ratings[0] * li, ratings[0] * lu,
                                ratings[1], ratings[1] * li, ratings[1] * lu,
                                np.ones(n), li, lu])
    solution = np.linalg.solve(features.T @ features, features.T @ noisy)
    np.testing.assert_allclose(blend.fit_weights(ratings, noisy, li, lu).ravel(), solution,
                               atol=1e-8)


def test_a_hand_computed_blend():
    weights = np.array([[0.5, 0.1, 0.0], [0.25, 0.0, -0.05], [0.2, 0.0, 0.0]])
    # r = (0.5 + 0.1*2) 4 + (0.25 - 0.05*1) 3 + 0.2 = 2.8 + 0.6 + 0.2 = 3.6; and one clipped
    got = blend.blend(weights, [np.array([4.0, 5.0]), np.array([3.0, 5.0])],
                      np.array([2.0, 2.0]), np.array([1.0, 1.0]), (1.0, 5.0))
    np.testing.assert_allclose(got, [3.6, 4.7], rtol=1e-6)
    assert got.dtype == np.float32


def test_the_blend_is_its_members_weighted_by_the_fit_counts(backend):
    model, split = fitted_once(backend)
    assert set(model.best_epoch) == {"item", "user"}
    assert {r["member"] for r in model.history} == {"item", "user"}
    held = split.test
    users, items = held.user_ids[held.users], held.item_ids[held.items]
    ratings = [model.members[name].predict(users, items) for name in blend.MEMBERS]
    li, lu = log_counts(split.train)
    expected = by_hand(model.weights, ratings, li[held.items], lu[held.users], (1.0, 5.0))
    # cold entries (a user or an item with no training entry) take the training data's means
    cold, means = shrunk_means_by_hand(split.train, held)
    assert cold.any() and not cold.all()                # this split has both
    expected[cold] = means[cold]
    np.testing.assert_allclose(model.predict(users, items), expected, rtol=1e-5, atol=1e-5)
    figures = model.evaluate(held)
    for got, part in ((figures, ~cold), (figures["cold"], cold)):
        rmse = np.sqrt(np.mean((expected[part] - held.ratings[part]) ** 2))
        assert got["rmse"] == pytest.approx(rmse, rel=1e-5)
        assert got["entries"] == part.sum()


@pytest.mark.parametrize("seed", [0, 3])   # the halves are the seed's draw
def test_the_weights_are_chosen_on_validation_and_scored_cross_fitted_once(seed):
    model, split = fitted_once() if seed == 0 else fitted(epochs=1, seed=seed)
    cold, means = shrunk_means_by_hand(split.train, split.valid)
    # the cold entries take the training data's means, their figures apart
    assert cold.any()
    assert model.best_validation["cold"]["entries"] == cold.sum()
    assert model.best_validation["cold"]["rmse"] == pytest.approx(
        np.sqrt(np.mean((means[cold] - split.valid.ratings[cold]) ** 2)), rel=1e-5)
    valid = split.valid.subset(~cold)                 # the weights are fit on the warm entries
    users, items = valid.user_ids[valid.users], valid.item_ids[valid.items]
    ratings = np.stack([model.members[name].predict(users, items) for name in blend.MEMBERS])
    li, lu = log_counts(split.train)
    li, lu = li[valid.items], lu[valid.users]
    want = blend.fit_weights(ratings, valid.ratings, li, lu)
    np.testing.assert_allclose(model.weights, want, rtol=1e-4, atol=1e-4)
    # the figure printed and recorded: each half (the seed's draw) blended by the weights of
    # the other, never by weights fit on the entries it scores
    n = valid.nnz
    half = np.random.default_rng(model.config.seed).permutation(n) < n // 2
    crossed = np.empty(n)
    for scored in (half, ~half):
        features = np.column_stack([r * t for r in (*ratings[:, ~scored], np.ones(n)[~scored])
                                    for t in (np.ones(n)[~scored], li[~scored], lu[~scored])])
        w = np.linalg.lstsq(features, valid.ratings[~scored], rcond=None)[0].reshape(3, 3)
        crossed[scored] = by_hand(w, ratings[:, scored], li[scored], lu[scored], (1.0, 5.0))
    rmse = np.sqrt(np.mean((crossed - valid.ratings) ** 2))
    assert model.best_validation["rmse"] == pytest.approx(rmse, rel=1e-4)
    assert model.best_validation["entries"] == n
    in_sample = model.evaluate(split.valid)["rmse"]   # weights fit on the entries scored
    assert model.best_validation["rmse"] > in_sample
    # without validation: the plain mean
    plain = BlendedNCAE(device="cpu", **SETTINGS).fit(split.train, epochs=1, verbose=False)
    np.testing.assert_array_equal(plain.weights, blend.MEAN)


def test_each_member_fits_its_own_epochs_and_the_blend_improves_while_one_does():
    # Steps too small for float32 to see: every epoch scores as the first, the best; without
    # patience the last epoch counts as improving. The item member ran out of epochs on its
    # best, still improving; the user member levelled off.
    model, _ = fitted(epochs={"item": 1, "user": 3}, lr=1e-12, patience=0)
    assert [len(model.members[name].history) for name in blend.MEMBERS] == [1, 3]
    assert model.best_epoch == {"item": 1, "user": 1}
    assert [model.members[name].still_improving for name in blend.MEMBERS] == [True, False]
    assert model.still_improving is True


def test_recommend_ranks_every_unseen_item_by_the_blend(backend):
    model, split = fitted_once(backend)
    train = split.train
    rng = np.random.default_rng(3)
    users = rng.choice(train.user_ids, 6, replace=False)
    n = 7
    items, scores = model.recommend(users, n=n)
    for row, user in enumerate(users):
        every = model.predict(np.full(train.n_items, user), train.item_ids)         # (items,)
        seen = train.items[train.user_ids[train.users] == user]
        every[seen] = -np.inf
        best = np.sort(every)[::-1][:n]
        np.testing.assert_allclose(scores[row], best, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(every[np.searchsorted(train.item_ids, items[row])],
                                   scores[row], rtol=1e-5, atol=1e-5)


def test_save_and_load_give_the_same_model(tmp_path):
    model, split = fitted_once()
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = load_model(path, device="cpu")
    assert isinstance(loaded, BlendedNCAE) and loaded.config == model.config
    assert loaded.settings == model.settings
    np.testing.assert_array_equal(loaded.weights, model.weights)
    assert loaded.best_epoch == model.best_epoch
    users, items = split.test.user_ids[split.test.users], split.test.item_ids[split.test.items]
    np.testing.assert_array_equal(loaded.predict(users, items), model.predict(users, items))
    with pytest.raises(DataError, match="BlendedNCAE model.*load_model"):
        NCAE.load(path, device="cpu")
    single = tmp_path / "item.npz"
    model.members["item"].save(single)
    assert type(load_model(single, device="cpu")) is NCAE


def test_refit_keeps_the_weights_and_trains_each_member_its_best_epochs():
    model, split = fitted(epochs=4, patience=1)
    refit = model.refit(split.fold_validation().train, verbose=False)
    np.testing.assert_array_equal(refit.weights, model.weights)
    for name, member in refit.members.items():
        assert len(member.history) == model.best_epoch[name]


def test_what_a_blend_refuses():
    with pytest.raises(SettingError, match="for explicit feedback"):
        BlendedNCAE(feedback="implicit")
    with pytest.raises(SettingError, match="one process"):
        make_model({"based": "both"}, shard="columns")
    with pytest.raises(SettingError, match="BlendedNCAE"):
        NCAE(based="both")
    assert isinstance(make_model({"based": "both"}, device="cpu"), BlendedNCAE)   # a recipe's
    model, split = fitted(epochs=1)
    with pytest.raises(Unsupported, match="BlendedNCAE does not fold new users in"):
        model.recommend_new(split.train.to_csr("user")[:1])
    with pytest.raises(SettingError, match="a blend starts from a blend"):
        BlendedNCAE(device="cpu", **SETTINGS).fit(split.train, warm_start=model.members["item"])
    with pytest.raises(SettingError, match="a blend starts only a blend"):
        NCAE(device="cpu", based="item", **SETTINGS).fit(split.train, warm_start=model)


def test_a_warm_start_starts_each_member_from_its_own():
    parent, split = fitted(epochs=2)
    child = BlendedNCAE(device="cpu", **SETTINGS).fit(split.train, epochs=1, verbose=False,
                                                      warm_start=parent)
    for name, member in child.members.items():
        alone = NCAE(device="cpu", based=name, **SETTINGS).fit(
            split.train, epochs=1, verbose=False, warm_start=parent.members[name])
        np.testing.assert_array_equal(member._whole_params(), alone._whole_params())
    # partial_fit: from its own members, its weights kept where there is no validation
    weights = parent.weights.copy()
    members = {name: NCAE(device="cpu", based=name, **SETTINGS).fit(
        split.train, epochs=1, verbose=False, warm_start=parent.members[name])
        for name in blend.MEMBERS}
    assert parent.partial_fit(split.train, epochs=1, verbose=False) is parent
    np.testing.assert_array_equal(parent.weights, weights)
    for name, member in parent.members.items():
        np.testing.assert_array_equal(member._whole_params(), members[name]._whole_params())


def test_a_partial_fit_stopped_in_the_second_member_resumes(tmp_path):
    # before, the stop left the first member fitted anew, and the resume, which starts each
    # member from its own, was refused as another fit's checkpoint
    parent, split = fitted(epochs=1)
    whole = BlendedNCAE(device="cpu", **SETTINGS).fit(split.train, split.valid, epochs=1,
                                                      verbose=False)
    whole.partial_fit(split.train, split.valid, epochs=2, verbose=False)

    def stop(member, record):
        if record["member"] == blend.MEMBERS[1] and record["epoch"] == 2:
            raise KeyboardInterrupt
    path = tmp_path / "checkpoint.npz"
    before = {name: m._whole_params() for name, m in parent.members.items()}
    with pytest.raises(KeyboardInterrupt):
        parent.partial_fit(split.train, split.valid, epochs=2, callback=stop, checkpoint=path,
                           checkpoint_every=0, verbose=False)
    for name, member in parent.members.items():
        np.testing.assert_array_equal(member._whole_params(), before[name])
        assert [record["epoch"] for record in member.history] == [1]
    parent.partial_fit(split.train, split.valid, epochs=2, checkpoint=path, resume=True,
                       verbose=False)
    for name, member in parent.members.items():
        np.testing.assert_array_equal(member._whole_params(),
                                      whole.members[name]._whole_params())


def test_without_validation_a_blend_says_it_blends_the_plain_mean(capsys):
    _, split = fitted(epochs=1)
    BlendedNCAE(device="cpu", **SETTINGS).fit(split.train, epochs=1)
    said = capsys.readouterr().out
    assert said.startswith("note: no validation part to fit the blend's weights on: its "
                           "members are blended by their plain mean\n")


@pytest.mark.parametrize("warm", [1, 17])         # fewer than two halves of the nine weights
def test_validation_too_small_to_fit_the_weights_blends_the_plain_mean(warm, capsys):
    """Before: 1 warm entry fit one half's weights on nothing (all zero: its figure the
    scale's floor), 17 fit nine weights on eight entries."""
    model, split = fitted(epochs=1)
    model.weights = model.weights + 1                # an earlier fit's, not to be kept
    cold, _ = shrunk_means_by_hand(split.train, split.valid)
    held = split.valid.subset(np.flatnonzero(~cold)[:warm])
    users, items = held.user_ids[held.users], held.item_ids[held.items]
    model.fit(split.train, validation=held, epochs=1)
    np.testing.assert_array_equal(model.weights, blend.MEAN)
    li, lu = log_counts(split.train)
    ratings = np.stack([model.members[name].predict(users, items) for name in blend.MEMBERS])
    mean = by_hand(blend.MEAN, ratings, li[held.items], lu[held.users], (1.0, 5.0))
    assert model.best_validation["rmse"] == pytest.approx(
        np.sqrt(np.mean((mean - held.ratings) ** 2)), rel=1e-5)
    assert (f"blend: validation rmse {model.best_validation['rmse']:.4f}, the plain mean's "
            f"(only {warm} warm entries: too few to fit the 9 weights on each half; the "
            "members' best: ") in capsys.readouterr().out


def test_validation_of_two_halves_of_nine_warm_entries_fits_the_weights(capsys):
    """18 warm entries, the fewest that give each half as many entries as weights: the
    weights are fit, the float64 least squares of the nine features built here (17 blend the
    plain mean)."""
    model, split = fitted(epochs=1)
    cold, _ = shrunk_means_by_hand(split.train, split.valid)
    held = split.valid.subset(np.flatnonzero(~cold)[:2 * blend.MEAN.size])
    model.fit(split.train, validation=held, epochs=1)
    users, items = held.user_ids[held.users], held.item_ids[held.items]
    ratings = np.stack([model.members[name].predict(users, items) for name in blend.MEMBERS])
    li, lu = (counts[part] for counts, part in zip(log_counts(split.train),
                                                   (held.items, held.users)))
    features = np.column_stack([r * t for r in (*ratings, np.ones(held.nnz))
                                for t in (np.ones(held.nnz), li, lu)])
    want = np.linalg.lstsq(features, held.ratings, rcond=None)[0].reshape(3, 3)
    np.testing.assert_allclose(model.weights, want, rtol=1e-3, atol=1e-3)
    assert "cross-fitted" in capsys.readouterr().out


def test_train_based_both_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main([*TINY, "--based", "both", "--epochs", "3", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "item-based member" in said and "blend: validation rmse" in said
    result = json.loads((out / "metrics.json").read_text())
    assert set(result["best_epoch"]) == {"item", "user"} and 0 < result["test"]["rmse"] < 4
    assert {p.name for p in out.glob("checkpoint-*")} == {
        f"checkpoint-{fit}.{member}.npz" for fit in ("select", "refit")
        for member in blend.MEMBERS}
    model = load_model(out / "model.npz", device="cpu")
    assert isinstance(model, BlendedNCAE)
    users, items = np.meshgrid(model.user_ids[:10], model.item_ids[:10])
    before = model.predict(users.ravel(), items.ravel())
    # resumed, a finished run ends where it was: each member from its own checkpoints
    assert train.main([*TINY, "--based", "both", "--epochs", "3", "--out", str(out),
                       "--resume"]) == 0
    assert "(resumed)" in capsys.readouterr().out
    after = load_model(out / "model.npz", device="cpu").predict(users.ravel(), items.ravel())
    np.testing.assert_array_equal(after, before)


def test_train_says_a_blend_without_validation_is_the_plain_mean(tmp_path, capsys):
    assert train.main([*TINY, "--based", "both", "--epochs", "1", "--valid-ratio", "0",
                       "--out", str(tmp_path / "run")]) == 0
    said = capsys.readouterr().out
    note = said.index("members are blended by their plain mean")
    assert note < said.index("item-based member")       # before training


def test_train_refuses_a_blend_in_shards_in_one_line_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    refused(train.main, [*TINY, "--based", "both", "--shard", "columns", "--out", str(out)],
            capsys, "--based both trains its two NCAEs in one process: leave out --shard")
    assert not out.exists()


def test_train_warm_starts_a_blend_from_a_blend_and_refuses_it_elsewhere(tmp_path, capsys):
    parent = tmp_path / "parent"
    assert train.main([*TINY, "--based", "both", "--epochs", "2", "--out", str(parent)]) == 0
    child = tmp_path / "child"
    assert train.main([*TINY, "--based", "both", "--epochs", "1", "--warm-start", str(parent),
                       "--out", str(child)]) == 0
    assert "note: warm start:" in capsys.readouterr().out
    item = tmp_path / "item"
    refused(train.main, [*TINY, "--based", "item", "--warm-start", str(parent), "--out",
                         str(item)], capsys,
            "based must be the warm start's model's (both there, item here)")
    assert not item.exists()                              # refused before the run's folder
    refused(train.main, [*TINY, "--based", "both", "--warm-start", str(child / "model.npz"),
                         "--hidden", "8", "--out", str(item)], capsys, "hidden must be")
    assert not item.exists()


def test_train_refuses_both_for_implicit_feedback(capsys):
    refused(train.main, [*TINY, "--feedback", "implicit", "--based", "both"], capsys,
            "--based: 'both' blends predicted ratings: it is for explicit feedback")
