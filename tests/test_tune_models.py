"""python -m ncae_cuda.tune --model: a baseline tuned by the same study as NCAE (sampler,
pruner, split, evaluator), and its best.toml scored again by python -m ncae_cuda.baselines
--config through the run protocol's select-refit-test."""
import json

import pytest
from helpers import missing_extra

from ncae_cuda import load_model
from ncae_cuda.baselines.estimators import MODELS
from ncae_cuda.commands import baselines, tune
from ncae_cuda.data import datasets, splits
from ncae_cuda.runs import factory, space, study_storage

pytestmark = pytest.mark.extra("tune")
optuna = pytest.importorskip("optuna", reason=missing_extra("tune"))
from optuna.storages import JournalStorage  # noqa: E402
from optuna.storages.journal import JournalFileBackend  # noqa: E402
from optuna.trial import TrialState  # noqa: E402
from test_user_errors import refused  # noqa: E402

DATA = ["--dataset", "synthetic-tiny", "--device", "cpu"]
TUNED_BASELINES = [name for name in space.TUNED if name in MODELS]


def study(out):
    return optuna.load_study(study_name=out.name, storage=JournalStorage(
        JournalFileBackend(str(out / study_storage.JOURNAL))))


@pytest.mark.parametrize("model", TUNED_BASELINES)
def test_each_baseline_space_starts_at_the_models_defaults(model):
    """Every shipped baseline space reads (its values checked by the model), and each setting
    it searches over a range holds the model's default: the first trial is the model as it
    ships. POP, which has no setting, has no space and is not tuned."""
    dims = space.read_space(space.default("implicit", model), {}, model)
    defaults = MODELS[model].defaults
    ranged = [d for d in dims if d.choices is None]
    assert ranged and all(d.low <= defaults[d.name] <= d.high for d in ranged)
    # (a default recency_boost 0 reads no halflife: the first trial draws none)
    assert space.recipe_point(dims, {}, model) == {d.name: defaults[d.name] for d in ranged
                                                   if d.name != "recency_halflife"}
    assert all(d.integer == isinstance(defaults[d.name], int) for d in ranged)
    assert "pop" not in space.TUNED


@pytest.mark.parametrize("model", [
    "item-knn", pytest.param("ials", marks=pytest.mark.extra("baselines"))])
def test_a_baseline_study_scores_validation_as_its_recipe_scores_it_again(tmp_path, model):
    """tune --model: each trial fits the baseline on the training part and is scored by the
    validation figure; iALS's trial hears each iteration (the pruner's steps) and keeps the
    best. best.toml names the model and the best trial's settings, and baselines --config
    scores it on validation as the trial did, refits and tests it."""
    out = tmp_path / "study"
    assert tune.main(["--model", model, *DATA, "--trials", "3", "--out", str(out)]) == 0
    trials = study(out).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    best = max(trials, key=lambda t: t.value)
    recipe = factory.read_recipe(out / "best.toml")
    assert recipe == {"model": model, **best.params}
    if model == "ials":             # a step an iteration, the best of them the trial's score
        for t in trials:
            steps = t.intermediate_values
            assert sorted(steps) == list(range(1, t.params["iterations"] + 1))
            assert max(steps.values()) == t.value
            assert str(max(steps, key=steps.get)) == t.user_attrs["best_epoch"]
    again = tmp_path / "again"
    assert baselines.main(["--config", str(out / "best.toml"), *DATA, "--out", str(again)]) == 0
    result = json.loads((again / "baselines.json").read_text())["models"][model]
    assert result["best_validation"]["ndcg@100"] == pytest.approx(best.value, abs=1e-6)
    if model == "ials":             # the iteration count chosen again, as the trial chose it,
        assert result["best_epoch"] == int(best.user_attrs["best_epoch"])     # and run
        assert result["chosen"] == {**best.params, "iterations": result["best_epoch"]}
    else:
        assert result["chosen"] == best.params
    assert set(result["test"]) >= {"hr@10", "ndcg@100"}
    # a run of one recipe writes the trainer's files: metrics.json of its keys, model.npz
    metrics = json.loads((again / "metrics.json").read_text())
    assert {"config", "data", "best_epoch", "best_validation", "history", "test",
            "seconds_fit"} <= set(metrics) and metrics["test"] == result["test"]
    assert metrics["config"]["model"] == model and metrics["config"]["dataset"] == DATA[1]
    fitted = load_model(again / "model.npz")
    assert fitted.settings == {**recipe, **({"seed": 0, "iterations": result["best_epoch"]}
                                            if model == "ials" else {})}


def test_a_baseline_study_scores_its_trials_at_the_cutoffs_it_is_given(tmp_path, capsys):
    """tune --model --cutoffs 5,20: each trial is scored by NDCG@20 of validation, the same
    figure the recipe's model gives fit on the training part (train --baselines gives NCAE's
    cutoffs: before, a baseline's study was scored at NDCG@100 whatever NCAE's study was
    scored at); best.toml's command scores it at them again. NCAE's come from its recipe."""
    out = tmp_path / "study"
    assert tune.main(["--model", "ease", *DATA, "--cutoffs", "5,20", "--trials", "2",
                      "--out", str(out)]) == 0
    assert "--cutoffs 5,20" in (out / "best.toml").read_text()
    split = splits.leave_one_out(datasets.load(DATA[1]))
    for trial in study(out).get_trials():
        model = MODELS["ease"](device="cpu", cutoffs=(5, 20), **trial.params)
        expected = model.fit(split.train).evaluate(split.valid)["ndcg@20"]
        assert trial.value == pytest.approx(expected, abs=1e-6)
    # the trials' notes are of their cutoffs (before: "cutoff @100 at or above the 50 items")
    assert "cutoff @" not in (out / "trials" / "0000" / "log.txt").read_text()
    refused(tune.main, [*DATA, "--cutoffs", "5,20", "--out", str(tmp_path / "o")], capsys,
            "--cutoffs: an NCAE study's are its recipe's (cutoffs = [10, 100])")
    recipe = tmp_path / "recipe.toml"           # (before: the defaults' cutoffs quoted)
    recipe.write_text('feedback = "implicit"\ncutoffs = [5, 30]\n')
    refused(tune.main, [*DATA, "--config", str(recipe), "--cutoffs", "5,20", "--out",
                        str(tmp_path / "o")], capsys,
            "--cutoffs: an NCAE study's are its recipe's (cutoffs = [5, 30])")


def test_a_recipe_of_another_model_is_refused_in_a_line(tmp_path, capsys):
    """--model and a --config of another model's; baselines --config of NCAE's recipe, or
    beside a --grid of the same model: one line each, before any work."""
    ials = tmp_path / "ials.toml"
    ials.write_text('model = "ials"\nfactors = 8\n')
    ncae = tmp_path / "ncae.toml"
    ncae.write_text("epochs = 2\n")
    refused(tune.main, ["--model", "ease", "--config", str(ials), *DATA, "--out",
                        str(tmp_path / "o")], capsys,
            f"--model ease: --config {ials} is a recipe of ials")
    assert not (tmp_path / "o").exists()
    refused(tune.main, ["--model", "pop", *DATA, "--out", str(tmp_path / "o")], capsys,
            "argument --model: invalid choice: 'pop'")
    (tmp_path / "pop.toml").write_text('model = "pop"\n')     # (before: "--model pop: ...")
    refused(tune.main, ["--config", str(tmp_path / "pop.toml"), *DATA, "--out",
                        str(tmp_path / "o")], capsys,
            f"--config {tmp_path / 'pop.toml'}: a recipe of pop: it has no setting to tune")
    (tmp_path / "bad.toml").write_text('model = "ials"\nfactor = 8\n')
    refused(tune.main, ["--config", str(tmp_path / "bad.toml"), *DATA, "--out",
                        str(tmp_path / "o")], capsys, "factor: is not a setting of iALS")
    refused(baselines.main, ["--config", str(ncae), *DATA], capsys,
            f"--config {ncae}: an NCAE recipe: python -m ncae_cuda.train --config trains it")
    refused(baselines.main, ["--config", str(ials), "--grid", "ials.factors=4", *DATA], capsys,
            "--grid ials.factors: --config gives ials's settings")
    refused(baselines.main, ["--config", str(ials), "--models", "ease", *DATA], capsys,
            f"--config {ials}: a recipe of ials, which is not in --models")


def test_a_tied_best_is_the_same_trial_in_the_lines_and_best_toml(tmp_path, capfd):
    """Two trials of one point score the same: each line's best so far is the first of them,
    the trial best.toml holds (before, the second trial's line named itself the best)."""
    (tmp_path / "space.toml").write_text("[l2]\nchoices = [200.0]\n")
    out = tmp_path / "study"
    assert tune.main(["--model", "ease", *DATA, "--space", str(tmp_path / "space.toml"),
                      "--trials", "2", "--out", str(out)]) == 0
    first, second = study(out).get_trials()
    assert first.value == second.value
    lines = [line for line in capfd.readouterr().out.splitlines() if "worker 0: trial" in line]
    assert len(lines) == 2 and all(f"(trial {first.number})" in line for line in lines)
    assert json.loads((out / "tune.json").read_text())["best"]["trial"] == first.number
