"""The baselines: EASE against a hand-worked case and its closed form, the grid choosing on
validation, the figures of NCAE's evaluator against an independent count, iALS and BPR through
the implicit library, and the command lines."""
import csv
import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ncae_cuda.baselines import estimators, models
from ncae_cuda.baselines.models import Baseline, ease, ease_weights
from ncae_cuda.commands import baselines, experiments, train
from ncae_cuda.data import datasets, splits
from ncae_cuda.data.interactions import DataError, from_matrix
from ncae_cuda.model.estimator import OutOfMemory
from ncae_cuda.ops import get_backend
from ncae_cuda.runs import comparison

CPU = get_backend("cpu")
NO_RECENCY = {"recency_boost": 0.0, "recency_halflife": 2.0}
# an experiment's runs two at once (CI's 2 cores): these tests read its tables, not its pool
TWO_AT_ONCE = ["--jobs", "2"]


def scored(fit, part, settings, point):
    """The Scores a baseline's fit hands its check at one point of its along settings."""
    got = []
    fit(part, settings, [point], lambda _, scores: got.append(scores))
    return got[0]


@pytest.fixture(scope="module")
def split():
    return splits.leave_one_out(datasets.load("synthetic-tiny"), seed=1)


def test_ease_on_a_hand_worked_4x4_case():
    # items 0 and 1 always together (co-count 2, counts 2); item 2 (count 2) with item 3
    # (count 1) once. lambda 1: the 2 x 2 blocks of G + I are [[3, 2], [2, 3]] and
    # [[3, 1], [1, 2]], inverses [[3, -2], [-2, 3]] / 5 and [[2, -1], [-1, 3]] / 5, and
    # B_ij = -P_ij / P_jj: 2/3 both ways, 1/3 from item 2 to 3, 1/2 from 3 to 2.
    X = sp.csr_matrix(np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 0]],
                               np.float32))
    expected = np.array([[0, 2 / 3, 0, 0], [2 / 3, 0, 0, 0], [0, 0, 0, 1 / 3], [0, 0, 1 / 2, 0]])
    np.testing.assert_allclose(ease_weights(X, 1.0), expected, atol=1e-12)
    scores = scored(models.fit_ease, from_matrix(X), {"l2": 1.0}, NO_RECENCY)(
        np.array([3, 0]))
    np.testing.assert_allclose(scores, [[0, 0, 0, 1 / 3], [2 / 3, 2 / 3, 0, 0]], rtol=1e-6)


def test_ease_is_each_columns_least_squares_solution_on_random_data():
    # EASE's column j is argmin_b ||X_j - X_{-j} b||^2 + l2 ||b||^2 (b_j = 0): a ridge
    # regression of item j on the others, solved here one column at a time
    rng = np.random.default_rng(0)
    X = sp.csr_matrix((rng.random((40, 12)) < 0.3).astype(np.float32))
    l2 = 3.7
    B = ease_weights(X, l2)
    G = (X.T @ X).toarray().astype(np.float64)
    for j in range(12):
        others = np.delete(np.arange(12), j)
        column = np.linalg.solve(G[np.ix_(others, others)] + l2 * np.eye(11), G[others, j])
        np.testing.assert_allclose(B[others, j], column, rtol=1e-9, atol=1e-12)
        assert B[j, j] == 0


def test_ease_with_recency_scores_weighted_rows_through_b_fit_on_ones():
    # a user's scores: their row of weights 1 + boost * 2^(-r / halflife), r counted by brute
    # force, times the B of the 0/1 matrix; without timestamps a boost is refused
    rng = np.random.default_rng(4)
    dense = (rng.random((30, 15)) < 0.3).astype(np.float32)
    dense[3] = 0                                             # a user with no interactions
    X = sp.csr_matrix(dense)
    part = from_matrix(X, "X")
    part = replace(part, timestamps=rng.integers(0, 5, part.nnz))        # ties among them
    later = np.array([np.count_nonzero((part.users == u) & (part.timestamps > t))
                      for u, t in zip(part.users, part.timestamps)])
    rows = np.zeros((30, 15))
    rows[part.users, part.items] = 1 + 6.0 * 0.5 ** (later / 1.5)
    want = rows @ ease_weights(X, 2.0)
    point = {"recency_boost": 6.0, "recency_halflife": 1.5}
    users = np.arange(30)
    np.testing.assert_allclose(scored(models.fit_ease, part, {"l2": 2.0}, point)(users),
                               want, rtol=1e-5, atol=1e-6)
    with pytest.raises(DataError, match="the training part has no timestamps"):
        scored(models.fit_ease, from_matrix(X, "X"), {"l2": 2.0}, point)


def brute_force_ease(X: sp.csr_matrix, l2: float) -> np.ndarray:
    """(items, items) B of EASE from the explicit float64 inverse of XᵀX + λI."""
    X = X.toarray().astype(np.float64)
    P = np.linalg.inv(X.T @ X + l2 * np.eye(X.shape[1]))
    B = np.eye(X.shape[1]) - P / np.diag(P)
    np.fill_diagonal(B, 0.0)
    return B


@pytest.mark.parametrize("users, items, empty", [
    (12, 40, "user"), (40, 12, "user"), (12, 40, "item"), (40, 12, "item"), (1, 9, None),
    (9, 9, None)])
def test_ease_in_the_user_and_the_item_space_is_the_brute_force_inverse(users, items, empty,
                                                                         monkeypatch):
    # plain rows (X) and recency-like rows (X's entries weighted 1..7) through B, each space
    # against the explicit items x items inverse; the default space is the smaller one
    rng = np.random.default_rng(users * items)
    dense = (rng.random((users, items)) < 0.3).astype(np.float32)
    dense[:, 0] = 1                                        # no user without interactions...
    if empty == "user":
        dense[users // 2] = 0                              # ...but this one
    elif empty == "item":
        dense[:, items // 2] = 0
    X = sp.csr_matrix(dense)
    weighted = X.multiply(1 + 6 * rng.random(X.shape)).tocsr()
    B = brute_force_ease(X, 2.5)
    picked = []
    real = models.ease_weights
    monkeypatch.setattr(models, "ease_weights",
                        lambda X, l2: picked.append("items") or real(X, l2))
    chosen = ease(X, 2.5)
    monkeypatch.undo()
    assert picked == ([] if users < items else ["items"])
    for rows in (X, weighted):
        want = rows.toarray() @ B                                         # (users, items)
        for times_b in (ease(X, 2.5, "users"), ease(X, 2.5, "items"), chosen):
            got = times_b(rows)
            assert got.dtype == np.float64 and got.shape == (users, items)
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-8 * np.abs(want).max())
        some = rng.permutation(users)[:max(1, users // 3)]              # a batch of users
        np.testing.assert_allclose(ease(X, 2.5, "users")(rows[some]), want[some], rtol=1e-8,
                                   atol=1e-8 * np.abs(want).max())


def test_ease_scores_a_users_own_item_from_the_others_alone():
    # a row holding only item i scores i by B_ii = 0, in either space; items never seen score 0
    rng = np.random.default_rng(2)
    X = sp.csr_matrix((rng.random((5, 30)) < 0.4).astype(np.float32))
    for space in ("users", "items"):
        times_b = ease(X, 1.0, space)
        for i in np.flatnonzero(X.getnnz(axis=0)):
            row = sp.csr_matrix(([3.0], ([0], [i])), shape=(1, 30))
            assert abs(times_b(row)[0, i]) < 1e-12
        assert not times_b(X)[:, X.getnnz(axis=0) == 0].any()


def test_ease_refuses_what_memory_cannot_hold_naming_the_sizes(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(models, "available_memory", lambda: 2**30)
    X = sp.csr_matrix((20001, 20000), dtype=np.float32)
    with pytest.raises(OutOfMemory, match=r"3 x 20,000 x 20,000 float64 = 8.9 GiB.*1.0 GiB"):
        ease(X, 1.0)
    # fewer users than items: users x users and users x items, never items x items
    X = sp.csr_matrix((2000, 200000), dtype=np.float32)
    with pytest.raises(OutOfMemory, match=r"1 users x users and 2 users x items matrices: "
                                          r"2,000 x \(2,000 \+ 2 x 200,000\) float64 = 6.0 GiB"):
        ease(X, 1.0)
    monkeypatch.setattr(models, "available_memory", lambda: 7 * 2**30)
    assert ease(sp.csr_matrix((3, 300000), dtype=np.float32), 1.0)   # 14 MiB, not 670 GiB
    monkeypatch.setattr(models, "available_memory", lambda: 100)
    code = baselines.main(["--dataset", "synthetic-tiny", "--models", "ease", "--out",
                           str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: EASE needs 3 items x items matrices: 3 x 50 x 50")
    assert len(err.strip().splitlines()) == 1


def test_the_grid_chooses_on_validation_where_test_would_choose_otherwise(split):
    # x = 1 scores each user's validation item 1 and every other 0, x = 2 their test item:
    # validation prefers x = 1, test would prefer x = 2
    n_items = split.train.n_items
    favoured = {}
    for x, part in ((1, split.valid), (2, split.test)):
        favoured[x] = np.full(split.train.n_users, -1)
        favoured[x][part.users] = part.items

    def fit(part, settings, points, check, seed=0, gpu=False):
        items = favoured[settings["x"]]

        def scores(users):
            s = np.zeros((len(users), n_items), np.float32)
            has = items[users] >= 0
            s[np.flatnonzero(has), items[users][has]] = 1
            return s
        check(points[0], scores)
    model = Baseline("fake", {"x": (2, 1)}, fit)
    result = comparison.grid_search(model, split, (10,), CPU, 0, model.grid, log=lambda _: 0)
    assert result["chosen"] == {"x": 1}
    by_x = {run["settings"]["x"]: run["valid"]["ndcg@10"] for run in result["validation"]}
    assert by_x[1] == 1.0 > by_x[2]


def independent_figures(scores: np.ndarray, seen: sp.csr_matrix, held, m: int) -> tuple:
    """(HR@m, NDCG@m) of each held (user, item) ranked by a count in numpy: the candidates
    scoring at least the held item's score, among the items the user has not seen."""
    hits, gains = [], []
    seen = seen.toarray() > 0
    for u, i in zip(held.users, held.items):
        candidates = ~seen[u]
        candidates[i] = False
        rank = int(np.sum(scores[u, candidates] >= scores[u, i]))
        hits.append(rank < m)
        gains.append(1 / np.log2(rank + 2) if rank < m else 0.0)
    return np.mean(hits), np.mean(gains)


def test_baselines_through_ncae_evaluator_match_an_independent_count(split):
    results = comparison.compare(split, ("ease", "pop"), (5, 20), CPU,
                                grids={"ease": {"l2": (10.0,)}}, log=lambda _: 0)
    fold = split.fold_validation().train.to_csr("user", implicit=True)
    ease = np.asarray(fold @ ease_weights(fold, 10.0), np.float32)
    pop = np.tile(np.bincount(fold.indices, minlength=fold.shape[1]).astype(np.float32),
                  (fold.shape[0], 1))
    for key, scores in (("ease", ease), ("pop", pop)):
        for m in (5, 20):
            hr, ndcg = independent_figures(scores, fold, split.test, m)
            assert results[key]["test"][f"hr@{m}"] == pytest.approx(hr, abs=1e-12)
            assert results[key]["test"][f"ndcg@{m}"] == pytest.approx(ndcg, abs=1e-12)


def test_a_grid_points_validation_figures_are_of_the_model_fit_on_the_training_ones(split):
    # the split's entries are ratings 1-5: a baseline fits the interactions, ones
    grid = {"l2": (10.0,), **{name: (value,) for name, value in NO_RECENCY.items()}}
    result = comparison.grid_search(models.BASELINES["ease"], split, (5, 20), CPU, 0, grid,
                                    log=lambda _: 0)
    train = split.train.to_csr("user", implicit=True)
    scores = np.asarray(train @ ease_weights(train, 10.0), np.float32)
    warm = split.valid.subset(train.getnnz(axis=0)[split.valid.items] > 0)
    assert split.train.ratings.max() > 1 and warm.nnz
    for m in (5, 20):
        hr, ndcg = independent_figures(scores, train, warm, m)
        assert result["validation"][0]["valid"][f"hr@{m}"] == pytest.approx(hr, abs=1e-12)
        assert result["validation"][0]["valid"][f"ndcg@{m}"] == pytest.approx(ndcg, abs=1e-12)


@pytest.mark.extra("baselines")
def test_ials_and_bpr_score_each_iteration_count_along_one_fit_and_repeat(split):
    grids = {"ials": {"factors": (8,), "regularization": (1.0,), "alpha": (1.0, 4.0),
                      "iterations": (2, 5)},
             "bpr": {"factors": (8,), "learning_rate": (0.05,), "regularization": (0.01,),
                     "iterations": (3, 10)}}
    one = comparison.compare(split, ("ials", "bpr"), (10,), CPU, seed=3, grids=grids,
                            log=lambda _: 0)
    again = comparison.compare(split, ("ials", "bpr"), (10,), CPU, seed=3, grids=grids,
                              log=lambda _: 0)
    for key in ("ials", "bpr"):
        assert one[key]["test"] == again[key]["test"]
        assert one[key]["chosen"] == max(one[key]["validation"],
                                         key=lambda r: r["valid"]["ndcg@10"])["settings"]
    assert [r["settings"]["iterations"] for r in one["ials"]["validation"]] == [2, 5, 2, 5]
    # the figure after 2 of 5 iterations is that of a fit of 2
    short = comparison.compare(split, ("ials",), (10,), CPU, seed=3, grids={"ials": {
        **grids["ials"], "alpha": (1.0,), "iterations": (2,)}}, log=lambda _: 0)
    assert short["ials"]["validation"][0]["valid"] == one["ials"]["validation"][0]["valid"]


def fit_factor_model(model, part) -> tuple:
    """(user factors, item factors) float64 of an unfit `implicit` model fit on `part`'s ones."""
    with threadpool_limits(1, "blas"):
        models.fit_factors(model, models.ones(part), [{"iterations": model.iterations}],
                           lambda point, scores: None)
    return tuple(a.astype(np.float64) for a in models.factors(model))


@pytest.mark.extra("baselines")
def test_ials_item_factors_solve_the_weighted_ridge_given_the_user_factors(split):
    # Hu et al.'s update, the items' the last of each iteration: y_i = (UᵀU + λI + (α - 1)
    # U_iᵀU_i)⁻¹ α U_iᵀ1, U_i the factors of item i's users (weight α at an interaction, 1
    # elsewhere). Conjugate gradient's 3 steps solve 3 factors' equations exactly.
    alpha, l2 = 4.0, 0.5
    users, items = fit_factor_model(models.ials_model(
        {"factors": 3, "regularization": l2, "alpha": alpha}, 3, seed=3), split.train)
    interacted = split.train.to_csr("user", implicit=True).toarray() > 0
    for i in range(split.train.n_items):
        own = users[interacted[:, i]]
        gram = users.T @ users + l2 * np.eye(3) + (alpha - 1) * own.T @ own
        np.testing.assert_allclose(items[i], np.linalg.solve(gram, alpha * own.sum(axis=0)),
                                   rtol=1e-4, atol=1e-6)


@pytest.mark.extra("baselines")
def test_bpr_takes_its_settings():
    model = models.bpr_model({"factors": 8, "learning_rate": 0.05, "regularization": 0.01}, 7,
                             seed=3)
    assert (model.factors, model.learning_rate, model.regularization, model.iterations,
            model.random_state) == (8, 0.05, 0.01, 7, 3)


@pytest.mark.extra("baselines")
@pytest.mark.parametrize("make, settings", [
    (models.ials_model, {"factors": 8, "regularization": 1.0, "alpha": 4.0}),
    (models.bpr_model, {"factors": 8, "learning_rate": 0.05, "regularization": 0.01})])
def test_ials_and_bpr_draw_from_their_seed(split, make, settings):
    by_seed = [fit_factor_model(make(settings, 2, seed), split.train)[1] for seed in (3, 3, 4)]
    np.testing.assert_array_equal(by_seed[0], by_seed[1])
    assert not np.allclose(by_seed[0], by_seed[2])


@pytest.mark.extra("baselines")
def test_a_recipes_chosen_settings_are_those_the_tested_model_ran_at(split):
    """iALS and BPR at a recipe choose their iteration count on validation up to the recipe's:
    'chosen' (the table's column) holds the count chosen, the other settings as given (before,
    the recipe's 30 beside a model tested after fewer)."""
    for key, settings in (("ials", {"factors": 8, "regularization": 1.0, "alpha": 4.0}),
                          ("bpr", {"factors": 8, "learning_rate": 0.05,
                                   "regularization": 0.01})):
        _, result = comparison.at_recipe(key, {**settings, "iterations": 30}, split, (10,), CPU,
                                         seed=3)
        assert result["best_epoch"] < 30
        assert result["chosen"] == {**settings, "iterations": result["best_epoch"]}


def test_the_command_writes_its_table_and_json(tmp_path, capsys):
    code = baselines.main(["--dataset", "synthetic-tiny", "--models", "ease,pop", "--grid",
                           "ease.l2=5,50", "--cutoffs", "5,20", "--out", str(tmp_path)])
    assert code == 0
    summary = json.loads((tmp_path / "baselines.json").read_text())
    assert set(summary["models"]) == {"ease", "pop"}
    assert [r["settings"]["l2"] for r in summary["models"]["ease"]["validation"]] == [5, 50]
    table = (tmp_path / "baselines.md").read_text()
    assert "| EASE" in table and "| POP" in table and "ndcg@20" in table
    printed = capsys.readouterr().out
    assert "EASE: 2 settings scored on validation" in printed
    assert "cutoff @" not in printed    # of 50 items (before: the defaults' @100 noted)


def test_the_command_runs_the_neighbourhood_baselines_choosing_k_along_one_fit(tmp_path,
                                                                             capsys):
    code = baselines.main(["--dataset", "synthetic-tiny", "--models", "item-knn,rp3beta,ease",
                           "--grid", "item-knn.shrink=0,20", "--grid", "item-knn.k=5,1000",
                           "--grid", "rp3beta.alpha=0.5,1", "--grid", "rp3beta.beta=0,0.4",
                           "--grid", "rp3beta.k=5,50", "--grid", "ease.l2=50",
                           "--out", str(tmp_path)])
    assert code == 0
    summary = json.loads((tmp_path / "baselines.json").read_text())["models"]
    # (the recency boost their grid holds at 0, the halflife left out without one)
    for key, settings, n in (("item-knn", {"shrink", "k", "recency_boost"}, 4),
                             ("rp3beta", {"alpha", "beta", "k", "recency_boost"}, 8)):
        runs = summary[key]["validation"]
        assert len(runs) == n and all(set(run["settings"]) == settings for run in runs)
        best = max(runs, key=lambda run: run["valid"]["ndcg@100"])
        assert summary[key]["chosen"] == best["settings"]
        assert 0 < summary[key]["test"]["ndcg@100"] <= 1
    table = (tmp_path / "baselines.md").read_text()
    assert "| item-kNN" in table and "| RP3beta" in table and "| EASE" in table
    assert "RP3beta: 8 settings scored on validation" in capsys.readouterr().out


def test_the_command_chooses_eases_recency_boost_on_validation(tmp_path, monkeypatch):
    # B depends on λ alone: one a λ for the grid, then the protocol's fit and refit
    inverses = []
    real = models.ease
    for module in (models, estimators):
        monkeypatch.setattr(module, "ease", lambda X, l2: inverses.append(l2) or real(X, l2))
    code = baselines.main(["--dataset", "synthetic-tiny", "--models", "ease", "--valid-item",
                           "latest", "--grid", "ease.l2=5", "--grid", "ease.recency_boost=0,8",
                           "--out", str(tmp_path)])
    assert code == 0
    ease = json.loads((tmp_path / "baselines.json").read_text())["models"]["ease"]
    runs = {run["settings"]["recency_boost"]: run["valid"] for run in ease["validation"]}
    assert set(runs) == {0, 8} and runs[0] != runs[8]
    assert ease["chosen"]["recency_boost"] == max(runs, key=lambda b: runs[b]["ndcg@100"])
    assert inverses == [5, 5, 5]


def test_the_command_keeps_a_run_folder_another_run_never_overwrites(tmp_path, capsys):
    """An --out holds one run's results: another is refused, --overwrite starts over, --resume
    runs again only the same settings (a pool's killed cell)."""
    def command(l2, *more):
        return baselines.main(["--dataset", "synthetic-tiny", "--models", "ease", "--grid",
                               f"ease.l2={l2}", "--out", str(tmp_path), *more])
    assert command(5) == 0
    before = (tmp_path / "baselines.json").read_bytes()
    assert command(50) == 2
    assert "holds another run's files" in capsys.readouterr().err
    assert (tmp_path / "baselines.json").read_bytes() == before
    assert command(50, "--resume") == 2
    assert "grid.ease.l2: [5.0] -> [50.0]" in capsys.readouterr().err  # what differs, named
    assert command(5, "--resume") == 0
    assert json.loads((tmp_path / "run.json").read_text())["finished"]
    assert command(50, "--overwrite") == 0
    chosen = json.loads((tmp_path / "baselines.json").read_text())["models"]["ease"]["chosen"]
    assert chosen == {"l2": 50, "recency_boost": 0}      # a halflife without a boost is none


@pytest.mark.parametrize("flags, message", [
    (["--models", "ease,knn"], "'knn' is not a baseline"),
    (["--grid", "ease.alpha=1"], "MODEL.SETTING one of"),
    (["--grid", "ials.factors=0"], "factors takes numbers > 0"),
    (["--grid", "ease.recency_boost=-1"], "recency_boost takes numbers >= 0"),
    (["--models", "ease", "--grid", "ials.factors=8"], "ials is not in --models"),
    (["--split", "random"], "use --split loo"),
    # before, accepted and scored once at boost 0, which reads no halflife
    (["--models", "ease", "--grid", "ease.recency_halflife=1,3"],
     "--grid ease.recency_halflife: is for recency weighting: recency_boost > 0 turns it on, "
     "and the grid's recency_boost is 0 alone: give --grid ease.recency_boost too, or leave it "
     "out"),
])
def test_the_command_refuses_mistakes_in_a_line(flags, message, capsys):
    with pytest.raises(SystemExit) as e:
        baselines.main(["--dataset", "synthetic-tiny", *flags])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "Traceback" not in err


@pytest.mark.extra("tune")
def test_the_trainer_tunes_each_baseline_with_the_trials_of_ncaes_study(tmp_path, capsys):
    """train --config STUDY/best.toml --baselines ease,item-knn: each baseline is tuned by tune
    --model with as many trials as NCAE's study finished, in the run's folder, and run at its
    best recipe; the table prints each model's trials and minutes (--baseline-trials sets
    them; without --baselines it is refused in a line). Their trials are scored as NCAE's
    were: at its recipe's cutoffs, by its --metric, over its --split-seeds (before: NDCG@100 on
    the run's split, whatever NCAE's study was scored by)."""
    from ncae_cuda.commands import tune
    recipe, space = tmp_path / "recipe.toml", tmp_path / "space.toml"
    recipe.write_text('feedback = "implicit"\nhidden = [8]\nepochs = 2\ncutoffs = [5, 20]\n')
    space.write_text("[dropout]\nlow = 0.1\nhigh = 0.5\n")
    data = ["--dataset", "synthetic-tiny"]
    assert tune.main([*data, "--config", str(recipe), "--space", str(space), "--trials", "2",
                      "--metric", "recall", "--split-seeds", "0,1", "--seed", "4",
                      "--out", str(tmp_path / "tune-ncae")]) == 0
    capsys.readouterr()
    out = tmp_path / "run"
    # the run's own split seed and seed give way to the study's: the baselines' samplers and
    # fits are seeded as NCAE's were (before: by the run's --seed 3, so studies of NCAE at two
    # seeds tuned the baselines alike)
    assert train.main([*data, "--config", str(tmp_path / "tune-ncae" / "best.toml"),
                       "--baselines", "ease,item-knn", "--split-seed", "1", "--seed", "3",
                       "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for name in ("ease", "item-knn"):
        assert re.search(rf"^{name}: tuned as the NCAE .* --metric recall --split-seeds 0,1 "
                         r"--pruner median --jobs 1 --cutoffs 5,20 --trials 2 --seed 4 ", printed,
                         re.M)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["search"]["trials"] == 2 and metrics["search"]["by"] == "study"
    for name in ("ease", "item-knn"):
        with open(out / f"tune-{name}" / "trials.csv", newline="") as f:
            assert [row["state"] for row in csv.DictReader(f)] == ["COMPLETE"] * 2
        result = metrics["baselines"][name]
        assert result["search"]["trials"] == 2 and "validation" not in result    # no grid
        best = comparison.recipe_settings(out / f"tune-{name}" / "best.toml", name)[1]
        assert result["chosen"] == best
        said = (out / f"tune-{name}" / "best.toml").read_text()
        assert "validation recall@20 " in said and "(the mean over split seeds 0,1)" in said
    table = printed.split("\ntest\n")[1]
    assert table.count("| 2 (study) ") == 3
    # --overwrite starts the studies over, and they are the run's: swapped in with its files
    assert train.main([*data, "--config", str(tmp_path / "tune-ncae" / "best.toml"),
                       "--baselines", "ease", "--baseline-trials", "1", "--out", str(out),
                       "--overwrite"]) == 0
    assert sorted(p.name for p in out.glob("tune-*")) == ["tune-ease"]
    with open(out / "tune-ease" / "trials.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 1
    with pytest.raises(SystemExit):
        train.main([*data, "--config", str(recipe), "--baseline-trials", "3"])
    assert "--baseline-trials: the trials of the --baselines' studies" in capsys.readouterr().err


@pytest.mark.extra("tune")
def test_the_baselines_are_tuned_on_the_data_and_figure_of_ncaes_study(tmp_path, capsys):
    """train --config STUDY/best.toml --baselines: a run that reads other data than NCAE's
    study did (here without its --valid-item latest) is refused in a line before NCAE trains
    (before, the baselines' studies scored this run's validation part, another than NCAE's
    study scored, and the table said all were tuned alike); a run of other --cutoffs tunes them
    by the study's figure, NDCG@20 (before: NDCG at the run's last cutoff, 10), and by its
    pruner (before: the median pruner, whatever NCAE's study had)."""
    from ncae_cuda.commands import tune
    recipe, space = tmp_path / "recipe.toml", tmp_path / "space.toml"
    recipe.write_text('feedback = "implicit"\nhidden = [8]\nepochs = 2\ncutoffs = [5, 20]\n')
    space.write_text("[dropout]\nlow = 0.1\nhigh = 0.5\n")
    data = ["--dataset", "synthetic-tiny", "--valid-item", "latest"]
    assert tune.main([*data, "--config", str(recipe), "--space", str(space), "--trials", "1",
                      "--pruner", "none", "--out", str(tmp_path / "tune-ncae")]) == 0
    best, out = str(tmp_path / "tune-ncae" / "best.toml"), tmp_path / "run"
    capsys.readouterr()
    with pytest.raises(SystemExit):
        train.main([*data[:2], "--config", best, "--baselines", "ease", "--out", str(out)])
    err = capsys.readouterr().err
    assert ("--baselines: --config's study tuned NCAE on --dataset synthetic-tiny --valid-item "
            "latest, and this run reads --dataset synthetic-tiny") in err
    assert "Traceback" not in err and not out.exists()
    assert train.main([*data, "--config", best, "--cutoffs", "5,10", "--baselines", "ease",
                       "--out", str(out)]) == 0
    assert "validation ndcg@20 " in (out / "tune-ease" / "best.toml").read_text()
    [command] = [line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("ease: tuned as the NCAE")]
    assert " --pruner none " in command


def ncae_study(tmp_path: Path, *flags: str) -> Path:
    """The folder of a tune study of NCAE on synthetic-tiny run with `flags` (its recipe: 2
    epochs of hidden [8], cutoffs 5 and 20; its space: dropout)."""
    from ncae_cuda.commands import tune
    recipe, space = tmp_path / "recipe.toml", tmp_path / "space.toml"
    recipe.write_text('feedback = "implicit"\nhidden = [8]\nepochs = 2\ncutoffs = [5, 20]\n')
    space.write_text("[dropout]\nlow = 0.1\nhigh = 0.5\n")
    study = tmp_path / "tune-ncae"
    assert tune.main(["--dataset", "synthetic-tiny", "--config", str(recipe), "--space",
                      str(space), *flags, "--out", str(study)]) == 0
    return study


@pytest.mark.extra("tune")
def test_the_baselines_are_tuned_with_the_workers_of_ncaes_study(tmp_path, capsys):
    """train --config STUDY/best.toml --baselines ease, the study run with --jobs 2: EASE's
    study runs 2 workers too, and the table says the jobs beside each study's minutes (before:
    EASE's study ran 1 worker on all the cores, NCAE's trials on half each, and the minutes
    were tabled as if alike); a study's record without its --jobs is said, its baselines
    tuned by 1 worker as before."""
    data, study = ["--dataset", "synthetic-tiny"], ncae_study(tmp_path, "--trials", "2",
                                                              "--jobs", "2")
    assert json.loads((study / "tune.json").read_text())["scored"]["jobs"] == 2
    capsys.readouterr()
    run = [*data, "--config", str(study / "best.toml"), "--baselines", "ease",
           "--out", str(tmp_path / "run")]
    assert train.main(run) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^ease: tuned as the NCAE .* --pruner median --jobs 2 ", printed, re.M)
    ease = tmp_path / "run" / "tune-ease" / "tune.json"
    assert json.loads(ease.read_text())["scored"]["jobs"] == 2
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["search"]["jobs"] == metrics["baselines"]["ease"]["search"]["jobs"] == 2
    table = printed.split("\nwarm test\n" if "\nwarm test\n" in printed else "\ntest\n")[1]
    assert len(re.findall(r"\| 2 \(study\) +\| \d+\.\d \(2 jobs\) +\|", table)) == 2
    # a record of a study before it held its --jobs: said, and tuned by one worker
    record = json.loads((study / "tune.json").read_text())
    del record["scored"]["jobs"]
    (study / "tune.json").write_text(json.dumps(record))
    assert train.main([*run, "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert ("note: --config's study records no --jobs (its tune.json is older): ease's "
            "study runs 1 worker") in printed
    assert json.loads(ease.read_text())["scored"]["jobs"] == 1
    assert not re.search(r"^ease: tuned as .* --jobs ", printed, re.M)


@pytest.mark.extra("tune")
def test_a_study_run_on_another_device_than_the_run_is_said(tmp_path, capsys):
    """train --config STUDY/best.toml --baselines ease --device cpu, NCAE's study run on a GPU
    (its tune.json says so, written here by hand: this machine has none): a note says the
    baselines' studies run on the run's CPU, and NCAE's minutes cell names the GPU its
    trials ran on (before: nothing recorded where a study ran, and the table compared CPU
    minutes with GPU minutes as if alike)."""
    data, study = ["--dataset", "synthetic-tiny"], ncae_study(tmp_path, "--trials", "1",
                                                              "--device", "cpu")
    record = json.loads((study / "tune.json").read_text())
    assert record["scored"]["device"] == "cpu"
    record["scored"]["device"] = "gpu"
    (study / "tune.json").write_text(json.dumps(record))
    capsys.readouterr()
    out = tmp_path / "run"
    assert train.main([*data, "--config", str(study / "best.toml"), "--baselines", "ease",
                       "--device", "cpu", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert ("note: --config's study ran NCAE's trials on the gpu, and this run tunes the "
            "baselines' on the cpu (--device cpu): the minutes columns compare the two, and "
            "the table names a study's device where it is not the run's") in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["search"]["device"] == "gpu"
    assert metrics["baselines"]["ease"]["search"]["device"] == "cpu"
    table = printed.split("\nwarm test\n" if "\nwarm test\n" in printed else "\ntest\n")[1]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]
            if line.startswith("|")}
    assert re.search(r"\| 1 \(study\) +\| \d+\.\d \(on gpu\) +\|", rows["NCAE+"])
    assert re.search(r"\| 1 \(study\) +\| \d+\.\d +\|", rows["EASE"])


@pytest.mark.extra("tune")
def test_the_baselines_command_names_the_device_a_study_ran_on(tmp_path, capsys):
    """baselines --config tune-ease/best.toml --device cpu, the study run on a GPU (its
    tune.json says so, written by hand): EASE's minutes cell names the GPU, as the trainer's
    table does (before, the command's table said nothing of it)."""
    from ncae_cuda.commands import tune
    study, data = tmp_path / "tune-ease", ["--dataset", "synthetic-tiny"]
    assert tune.main(["--model", "ease", *data, "--trials", "1", "--out", str(study)]) == 0
    record = json.loads((study / "tune.json").read_text())
    record["scored"]["device"] = "gpu"
    (study / "tune.json").write_text(json.dumps(record))
    capsys.readouterr()
    assert baselines.main([*data, "--config", str(study / "best.toml"), "--device", "cpu",
                           "--out", str(tmp_path / "run")]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"\| 1 \(study\) +\| \d+\.\d \(on gpu\) +\|", printed), printed
    assert "(on gpu)" in (tmp_path / "run" / "baselines.md").read_text()


@pytest.mark.extra("tune")
def test_a_studys_data_file_spelled_another_way_is_the_same_data(tmp_path, monkeypatch):
    """tune --dataset clicks.csv run in the file's folder, then train --dataset with its
    absolute path from elsewhere: the same file (before: refused as other data, the two
    spellings side by side)."""
    from test_user_errors import tiny_rows, write_table
    from ncae_cuda.commands import tune
    write_table(tmp_path / "clicks.csv", "user,item,timestamp", tiny_rows())
    (tmp_path / "recipe.toml").write_text('feedback = "implicit"\nhidden = [8]\nepochs = 2\n')
    (tmp_path / "space.toml").write_text("[dropout]\nlow = 0.1\nhigh = 0.5\n")
    monkeypatch.chdir(tmp_path)
    assert tune.main(["--dataset", "clicks.csv", "--config", "recipe.toml", "--space",
                      "space.toml", "--trials", "1", "--out", "tune-ncae"]) == 0
    monkeypatch.chdir(tmp_path.parent)
    assert train.main(["--dataset", str(tmp_path / "clicks.csv"), "--config",
                       str(tmp_path / "tune-ncae" / "best.toml"), "--baselines", "ease",
                       "--out", str(tmp_path / "run")]) == 0


def test_without_the_refit_the_baselines_beside_ncae_are_tested_unrefit(tmp_path):
    """train --no-refit --baselines: NCAE is tested as fit on the training part, and so is each
    baseline, by its grid or at a recipe (before, they were refit on training + validation,
    learning from more data than the NCAE they are compared with)."""
    recipe = tmp_path / "knn.toml"
    recipe.write_text('model = "item-knn"\nk = 7\nshrink = 3.5\n')
    out = tmp_path / "run"
    assert train.main(["--dataset", "synthetic-tiny", "--feedback", "implicit", "--hidden", "8",
                       "--epochs", "2", "--no-refit", "--baselines", f"ease,item-knn={recipe}",
                       "--device", "cpu", "--out", str(out)]) == 0
    results = json.loads((out / "metrics.json").read_text())["baselines"]
    split = splits.leave_one_out(datasets.load("synthetic-tiny"))
    seen = split.fold_validation().train
    for name, result in results.items():
        fit = estimators.MODELS[name](device="cpu", **result["chosen"]).fit(split.train)
        refit = estimators.MODELS[name](device="cpu", **result["chosen"]).fit(seen)
        unrefit, refit = (model.evaluate(split.test, exclude=seen)["ndcg@100"]
                          for model in (fit, refit))
        assert unrefit != refit
        assert result["test"]["ndcg@100"] == pytest.approx(unrefit)
        assert result["seconds_fit"] == result["seconds_select"]


def test_the_trainer_puts_the_baselines_beside_ncae(tmp_path, capsys):
    """--baselines ease,item-knn=RECIPE: EASE chosen by its grid, item-kNN at the recipe's
    settings (a tuned one's), each row beside NCAE's on the same test users; a recipe of
    another model, or none, is refused in a line."""
    out = tmp_path / "run"
    recipe = tmp_path / "knn.toml"
    recipe.write_text('model = "item-knn"\nk = 7\nshrink = 3.5\n')
    code = train.main(["--dataset", "synthetic-tiny", "--feedback", "implicit", "--hidden", "8",
                       "--epochs", "2", "--baselines", f"ease,item-knn={recipe}",
                       "--out", str(out)])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["baselines"]["ease"]["test"]["rows"] == metrics["test"]["rows"]
    assert len(metrics["baselines"]["ease"]["validation"]) > 1            # its grid
    knn = metrics["baselines"]["item-knn"]
    assert knn["chosen"] == {"shrink": 3.5, "k": 7} and "validation" not in knn
    assert knn["test"]["rows"] == metrics["test"]["rows"]
    assert metrics["seconds_fit"] > 0 and metrics["seconds_select"] > 0
    # one protocol: every model's result has its keys (select_test.select_refit_test's)
    protocol = {"best_epoch", "best_validation", "still_improving", "history", "test", "pop",
                "seconds_select", "seconds_fit"}
    for result in (metrics, *metrics["baselines"].values()):
        assert protocol <= set(result)
    assert "| EASE " in capsys.readouterr().out
    for baselines_flag, message in ((f"ease={recipe}", f"--baselines ease={recipe}: a recipe "
                                     "of item-knn"),
                                    (f"ease={tmp_path / 'none.toml'}", "cannot read it")):
        with pytest.raises(SystemExit):
            train.main(["--dataset", "synthetic-tiny", "--feedback", "implicit",
                        "--baselines", baselines_flag])
        assert message in capsys.readouterr().err
    for flags, message in ((["--feedback", "explicit"], "for implicit feedback"),
                           (["--feedback", "implicit", "--baselines", "pop"], "POP is in every")):
        with pytest.raises(SystemExit):
            train.main(["--dataset", "synthetic-tiny", "--baselines", "ease", *flags])
        assert message in capsys.readouterr().err


def test_experiments_draw_the_baselines_beside_ncae(tmp_path):
    code = experiments.main(["topm", "--dataset", "synthetic-tiny", "--quick", "--baselines",
                             "ease", *TWO_AT_ONCE, "--out", str(tmp_path), "--",
                             "--batch-size", "16"])
    assert code == 0
    header = (tmp_path / "topm.csv").read_text().splitlines()[0]
    assert "EASE ndcg@M mean" in header and "POP ndcg@M mean" in header
    run = json.loads((tmp_path / "runs" / "topm" / "baselines-seed0" / "baselines.json")
                     .read_text())
    with open(tmp_path / "topm.csv") as f:
        rows = list(csv.DictReader(f))
    for row in rows:                         # the table's figures are the run's, cutoff by cutoff
        m = row["M"]
        assert float(row["EASE ndcg@M mean"]) == pytest.approx(
            run["models"]["ease"]["test"][f"ndcg@{m}"], abs=1e-4)


@pytest.fixture
def no_implicit_library(monkeypatch):
    """Python as on a machine without the [baselines] extra: `implicit` neither found nor
    imported (a None in sys.modules is how Python marks a module that is not there)."""
    monkeypatch.setitem(sys.modules, "implicit", None)


def test_a_default_list_draws_only_the_installed_baselines_and_says_which_it_left_out(
        tmp_path, capsys, no_implicit_library):
    note = 'left out iALS, BPR: their library is not installed (pip install -e ".[baselines]")'
    assert experiments.main(["topm", "--dataset", "synthetic-tiny", "--quick", *TWO_AT_ONCE,
                             "--out", str(tmp_path / "exp"), "--", "--batch-size", "16"]) == 0
    assert capsys.readouterr().out.count(note) == 1
    run = json.loads((tmp_path / "exp" / "runs" / "topm" / "baselines-seed0" / "baselines.json")
                     .read_text())
    assert set(run["models"]) == {"ease"}
    assert baselines.main(["--dataset", "synthetic-tiny", "--grid", "ease.l2=10",
                           "--out", str(tmp_path / "b")]) == 0
    assert note in capsys.readouterr().out
    run = json.loads((tmp_path / "b" / "baselines.json").read_text())
    assert set(run["models"]) == {"ease", "item-knn", "rp3beta", "pop"}
    # asked for by name, a model without its library is an error, not left out
    assert baselines.main(["--dataset", "synthetic-tiny", "--models", "bpr",
                           "--out", str(tmp_path / "c")]) == 2
    assert "pip install -e \".[baselines]\"" in capsys.readouterr().err


def test_a_line_per_point_scored_with_the_time_left():
    split = splits.leave_one_out(datasets.load("synthetic-tiny"))
    lines = []
    ease = models.BASELINES["ease"]
    result = comparison.select_and_test("ease", split, (10,), CPU, 0,
                                        {**ease.grid, "l2": (10.0, 100.0)}, log=lines.append)
    runs = result["validation"]
    assert len(runs) == 2 and len(lines) == 4     # a line a point, the choice, the test
    for k, (line, run) in enumerate(zip(lines, runs), 1):
        assert line.startswith(f"EASE {k}/2: l2 {run['settings']['l2']:g}, recency_boost 0: "
                               f"valid ndcg@10 {run['valid']['ndcg@10']:.4f} | "), line
        assert re.search(r"\| \d+ s, about \d+ s left$", line), line
    assert lines[1].endswith("about 0 s left")


def test_points_that_cannot_differ_are_scored_once():
    # a halflife changes no score without a boost: boosts 0, 8 x halflives 1, 2, 3 are 4 points
    # (boost 0 once, without a halflife), each scored as its own one-point grid scores it
    split = splits.leave_one_out(datasets.load("synthetic-tiny"), valid_item="latest")
    ease_model = models.BASELINES["ease"]
    grid = {"l2": (10.0, 100.0), "recency_boost": (0.0, 8.0), "recency_halflife": (1.0, 2.0, 3.0)}
    lines = []
    result = comparison.grid_search(ease_model, split, (10,), CPU, 0, grid, log=lines.append)
    got = [run["settings"] for run in result["validation"]]
    assert got == [point for l2 in (10.0, 100.0) for point in (
        {"l2": l2, "recency_boost": 0.0},
        *({"l2": l2, "recency_boost": 8.0, "recency_halflife": h} for h in (1.0, 2.0, 3.0)))]
    assert [line.split(":")[0] for line in lines[:-1]] == [f"EASE {k}/8" for k in range(1, 9)]
    for run in result["validation"]:
        alone = comparison.grid_search(
            ease_model, split, (10,), CPU, 0, {name: (run["settings"].get(name, 2.0),)
                                               for name in grid}, log=lambda _: 0)
        assert alone["validation"][0]["valid"] == run["valid"]
    assert comparison.distinct_points(ease_model, {**grid, "recency_boost": (8.0,)}) == [
        ({"l2": l2}, [{"recency_boost": 8.0, "recency_halflife": h} for h in (1.0, 2.0, 3.0)])
        for l2 in (10.0, 100.0)]


def test_a_grid_of_factors_is_capped_at_the_fewer_of_users_and_items(split):
    lines = []
    bpr = models.BASELINES["bpr"]
    assert comparison.rank_capped(bpr, {"factors": (64, 8, 1024, 50), "learning_rate": (0.1,)},
                                  split.train, lines.append) == {"factors": (50, 8),
                                                                 "learning_rate": (0.1,)}
    assert lines == ["note: BPR: factors above 50 (the fewer of the users and items) reach the "
                     "same optimum as 50: scored once, at 50"]
    ease = models.BASELINES["ease"]
    assert comparison.rank_capped(ease, {"l2": (1.0,)}, split.train, lines.append) == {
        "l2": (1.0,)} and len(lines) == 1


@pytest.mark.extra("baselines")
def test_factors_past_the_fewer_of_users_and_items_are_scored_once_at_that_count(split):
    """synthetic-tiny has 50 items: factors 8, 64 and 1024 are fit at 8 and 50, once each, and
    the note says so; a grid under the cap is left as it is, without a note."""
    ials = models.BASELINES["ials"]
    grid = {"factors": (8, 64, 1024), "regularization": (1.0,), "alpha": (1.0,),
            "iterations": (2,)}
    lines = []
    result = comparison.grid_search(ials, split, (10,), CPU, 3, grid, log=lines.append)
    cap = min(split.train.n_users, split.train.n_items)
    assert cap == 50
    assert [run["settings"]["factors"] for run in result["validation"]] == [8, 50]
    assert lines[0] == (f"note: iALS: factors above {cap} (the fewer of the users and items) "
                        f"reach the same optimum as {cap}: scored once, at {cap}")
    assert comparison.rank_capped(ials, {"factors": (8, 16)}, split.train, lines.append) == {
        "factors": (8, 16)} and len(lines) == len(result["validation"]) + 2


def cold_item_split() -> tuple[splits.Split, np.ndarray]:
    """(a leave-one-out split, (test entries,) whether each is of an item with no training nor
    validation entry): some of them are, not all."""
    rng = np.random.default_rng(0)
    X = sp.random(60, 40, density=0.2, format="lil", random_state=rng, dtype=np.float32)
    X[:, 30:] = 0
    X[:10] = 0
    for k in range(10):             # ten items of one interaction each, of a user of two
        X[k, 30 + k] = X[k, k] = 1
    data = from_matrix(sp.csr_matrix(X))
    split = splits.leave_one_out(data, seed=0)
    fold = split.fold_validation().train
    cold_items = np.bincount(fold.items, minlength=data.n_items)[split.test.items] == 0
    assert cold_items.any() and not cold_items.all()
    return split, cold_items


def test_the_comparison_sets_cold_entries_apart_as_ncaes_evaluator_does():
    """A held-out item with no training entry is cold: the comparison's test figures are the
    warm entries', the cold ones under cold_test, as Model.evaluate scores NCAE (before, a
    baseline's cold entries were ranked among the rest, each a miss, while NCAE's were set
    apart). The same EASE through the model contract gives the same figures."""
    split, cold_items = cold_item_split()
    fold = split.fold_validation().train
    result = comparison.select_and_test("ease", split, (5, 20), CPU, 0,
                                        {"l2": (50.0,), **{k: (v,) for k, v in
                                                           NO_RECENCY.items()}}, log=print)
    model = estimators.EASE(CPU, cutoffs=(5, 20), l2=50.0).fit(fold)
    expected = model.evaluate(split.test, exclude=split.valid)
    cold = expected.pop("cold")
    for key, value in expected.items():
        assert result["test"][key] == pytest.approx(value, abs=1e-6), key
    assert result["cold_test"]["rows"] == cold["rows"] == cold_items.sum()
    assert result["test"]["rows"] == len(split.test.items) - cold_items.sum()


def test_the_commands_table_shows_cold_test_entries_apart_as_the_trainers_does():
    """Leave-one-out whose test holds items no fit has seen: the table is the warm entries',
    titled so, and the cold ones' follows, their figures the model's own evaluate's (before,
    only a time split's were shown: the table said 'test' of the warm entries alone, and the
    cold ones were in baselines.json only)."""
    split, _ = cold_item_split()
    results = comparison.compare(split, ("ease",), (5, 20), CPU,
                                 grids={"ease": {"l2": (50.0,), "recency_boost": (0.0,)}},
                                 log=print)
    expected = estimators.EASE(CPU, cutoffs=(5, 20), l2=50.0).fit(
        split.fold_validation().train).evaluate(split.test, exclude=split.valid)["cold"]
    shown = baselines.tables(split, results, (5, 20), CPU.name)
    # (before, "with no training entry", where a refit on training + validation had seen some
    # of those the split's note counted so)
    warm, cold = shown.split("cold test, scored apart: entries of users or items with no "
                             "entry in the data the model was fit on\n")
    assert warm.startswith("warm test\n") and "| EASE" in warm
    header, _, row = ([cell.strip() for cell in line.split("|")[1:-1]]
                      for line in cold.splitlines()[:3])
    assert row[0] == "EASE" and len(header) == len(expected)               # less rows, + model
    assert {name: float(cell) for name, cell in zip(header[1:], row[1:])} == {
        name: pytest.approx(value, abs=5e-5) for name, value in expected.items()
        if name != "rows"}
