"""bench.autorec_peer: I-AutoRec's analytic gradient against finite differences, a fit that
learns synthetic ratings, and one command scoring it beside NCAE on the same split."""
import json

import numpy as np
import pytest
import scipy.sparse as sp

from bench import autorec_peer

from helpers import provenance_said, random_matrix
from test_user_errors import mixed_rows


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    X = random_matrix(rng, 9, 7, density=0.4).astype(np.float64)
    k, lam = 4, 0.3
    theta = autorec_peer.init(X.shape[1], k, seed=1) + rng.normal(0, 0.1, 2 * k * 7 + k + 7)
    _, analytic = autorec_peer.loss_and_grad(theta, X, k, lam)
    numeric = np.empty_like(theta)
    h = 1e-6
    for i in range(len(theta)):
        step = np.zeros_like(theta)
        step[i] = h
        numeric[i] = (autorec_peer.loss_and_grad(theta + step, X, k, lam)[0]
                      - autorec_peer.loss_and_grad(theta - step, X, k, lam)[0]) / (2 * h)
    assert np.abs(analytic).max() > 1e-2
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-7)


def test_fit_beats_the_mean_on_low_rank_ratings():
    rng = np.random.default_rng(0)
    n_rows, n_cols = 60, 40
    full = np.clip(np.rint(3 + rng.normal(size=(n_rows, 2)) @ rng.normal(size=(2, n_cols))), 1, 5)
    observed = rng.random((n_rows, n_cols)) < 0.5
    held = (rng.random((n_rows, n_cols)) < 0.2) & observed
    X = sp.csr_matrix(np.where(observed & ~held, full, 0.0))
    theta = autorec_peer.fit(X, 8, 1.0, maxiter=300)
    rows, cols = np.nonzero(held)
    pred = autorec_peer.predict(theta, X, 8, rows, cols, (1.0, 5.0))
    rmse = np.sqrt(np.mean((pred - full[rows, cols]) ** 2))
    baseline = np.sqrt(np.mean((X.data.mean() - full[rows, cols]) ** 2))
    assert rmse < 0.8 * baseline


def test_one_command_scores_both_models_on_the_same_split(tmp_path):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('hidden = [8]\noutput = "identity"\nrow_norm = 0.2\nepochs = 3\n')
    out = tmp_path / "cmp"
    assert autorec_peer.main(["--dataset", "synthetic-tiny", "--split", "random", "--config",
                              str(recipe), "--hidden", "6", "--lambdas", "1,10", "--maxiter",
                              "10", "--every", "5", "--seeds", "0,1", "--out", str(out)]) == 0
    result = json.loads((out / "autorec_peer.json").read_text())
    assert len(result["peer"]) == len(result["ncae"]) == 2
    for seed, ncae in enumerate(result["ncae"]):
        metrics = json.loads((out / f"ncae-seed{seed}" / "metrics.json").read_text())
        assert ncae["test_rmse"] == metrics["test"]["rmse"]
        assert metrics["config"]["output"] == "identity" and metrics["config"]["seed"] == seed
        assert metrics["data"]["test"] == 60                  # the peer's split: 10% of 600
    assert {run["lambda"] for run in result["peer"][0]["runs"]} == {1.0, 10.0}
    table = (out / "autorec_peer.md").read_text()
    mean = np.mean([p["test_rmse"] for p in result["peer"]])
    assert "| NCAE |" in table and "| I-AutoRec |" in table and f"{mean:.4f} |" in table
    # before, neither file said the commit, the date or the machine
    assert provenance_said(out / "autorec_peer.json", out / "autorec_peer.md")


def test_without_a_recipe_the_table_names_i_autorec_alone(tmp_path):
    # before, its title said "NCAE and I-AutoRec" over a table without NCAE
    out = tmp_path / "peer"
    assert autorec_peer.main(["--dataset", "synthetic-tiny", "--split", "random", "--hidden",
                              "4", "--lambdas", "1", "--maxiter", "2", "--every", "0",
                              "--out", str(out)]) == 0
    text = (out / "autorec_peer.md").read_text()
    assert text.splitlines()[0] == "# synthetic-tiny, split random: I-AutoRec"
    assert "| I-AutoRec |" in text and "| NCAE |" not in text


def test_both_models_are_scored_on_every_test_entry_cold_ones_too(tmp_path):
    """Split files whose test part holds items the base file lacks (ML-100K's u1: 32 of
    20,000), here a stand-in ml-100k folder: both models are scored over every test entry, as
    docs/results.md's figures are, NCAE by its all_test. Before, both read the warm part alone,
    and the peer's cold entries would have come from weights that never saw them."""
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    rows = mixed_rows()
    base = [row for row in rows[:500] if row[1] != rows[0][1]]      # rows[0]'s item: cold
    test = [row for row in rows if row not in base]
    for name, part in (("u.data", rows), ("u1.base", base), ("u1.test", test)):
        (folder / name).write_text("".join(f"{u}\t{i}\t{r:g}\t{t}\n" for u, i, r, t in part))
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('hidden = [8]\noutput = "identity"\nepochs = 2\n')
    out = tmp_path / "cmp"
    assert autorec_peer.main(["--dataset", "ml-100k", "--data-dir", str(tmp_path), "--split", "u1",
                              "--config", str(recipe), "--hidden", "6", "--lambdas", "1",
                              "--maxiter", "5", "--every", "5", "--out", str(out)]) == 0
    result = json.loads((out / "autorec_peer.json").read_text())
    metrics = json.loads((out / "ncae-seed0" / "metrics.json").read_text())
    assert metrics["cold_test"]["entries"] > 0                      # the case: cold test entries
    assert result["ncae"][0]["test_rmse"] == metrics["all_test"]["rmse"]
    assert [r["test_entries"] for r in result["ncae"] + result["peer"]] == [len(test)] * 2


@pytest.mark.parametrize("argv, message", [
    # before, a DataError's traceback, and load_split's AttributeError
    (["--dataset", "bogus"], "error: unknown data set 'bogus': "),
    (["--dataset", "synthetic-tiny"], "error: synthetic-tiny has no split files (data sets "
                                      "with them: ml-100k)\n"),
    # before, said only once the first seed's I-AutoRec had trained
    (["--dataset", "synthetic-tiny", "--split", "random", "--config", "MISSING"],
     "error: --config MISSING: cannot read it (No such file or directory)"),
    # before, each ran and reported RMSEs
    (["--hidden", "0"], "error: argument --hidden: expected an integer >= 1, got '0'"),
    (["--maxiter", "0"], "error: argument --maxiter: expected an integer >= 1, got '0'"),
    (["--every", "-1"], "error: --every must be >= 0; got -1"),
    (["--seeds", "0,-1"], "error: argument --seeds: expected comma-separated integers >= 0, "
                          "got '0,-1'"),
    (["--lambdas", "10,-5"], "error: argument --lambdas: expected comma-separated numbers >= 0, "
                             "got '10,-5'"),
])
def test_a_mistake_is_refused_in_a_line_before_any_training(tmp_path, monkeypatch, capsys,
                                                             argv, message):
    monkeypatch.setattr(autorec_peer, "fit", None)              # no training may start
    argv = [str(tmp_path / a) if a == "MISSING" else a for a in argv]
    try:
        code = autorec_peer.main([*argv, "--out", str(tmp_path / "out")])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message.replace("MISSING", str(tmp_path / "MISSING")) in err
    assert len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()          # before, made first
