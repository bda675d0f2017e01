"""python -m ncae_cuda.tune for real: Optuna's study in a journal file shared by two worker
processes, and in a PostgreSQL server this test starts, shared by two commands (as two
machines would run them); a worker killed mid-trial; the best recipe retrained to its score;
and a user's mistakes in one line each."""
import argparse
import contextlib
import csv
import dataclasses
import datetime
import errno
import glob
import io
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import pytest
from helpers import missing_extra

from ncae_cuda import cli
from ncae_cuda.commands import train, tune
from ncae_cuda.data import atomic_file, datasets
from ncae_cuda.model import stopping
from ncae_cuda.model.config import DEFAULTS, read_recipe
from ncae_cuda.runs import (effort, protocol, rundir, space, study_outputs, study_storage,
                            tune_study, tuning)

pytestmark = pytest.mark.extra("tune")
optuna = pytest.importorskip("optuna", reason=missing_extra("tune"))
from optuna.storages import RDBStorage  # noqa: E402
from optuna.storages.journal import JournalFileBackend, JournalStorage  # noqa: E402
from optuna.trial import TrialState  # noqa: E402
from test_user_errors import refused  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SPACE = """
[hidden]
choices = [[4], [8, 4]]
[dropout]
low = 0.0
high = 0.6
[weight_decay]
low = 1e-4
high = 1e-1
log = true
"""


def files(tmp_path, epochs: int) -> list[str]:
    """A recipe of `epochs` epochs (no early stopping) and a small space over it, as flags."""
    (tmp_path / "recipe.toml").write_text(f"epochs = {epochs}\npatience = 0\nbatch_size = 16\n")
    (tmp_path / "space.toml").write_text(SPACE)
    return ["--dataset", "synthetic-tiny", "--config", str(tmp_path / "recipe.toml"),
            "--space", str(tmp_path / "space.toml"), "--device", "cpu", "--pruner", "none"]


def command(*flags) -> list[str]:
    return [sys.executable, "-m", "ncae_cuda.tune", *map(str, flags)]


@contextlib.contextmanager
def started(*flags):
    """The command of `flags` running, its output piped; killed at the end, if it still runs."""
    running = subprocess.Popen(command(*flags), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=REPO)
    try:
        yield running
    finally:
        running.kill()


def interrupted(running) -> tuple[int, str]:
    """The exit status and error output of a command `started`, sent SIGINT (a Ctrl-C)."""
    running.send_signal(signal.SIGINT)
    return running.wait(120), running.stderr.read()


def journal(out: Path):
    storage = JournalStorage(JournalFileBackend(str(out / study_storage.JOURNAL)))
    return optuna.load_study(study_name=out.name, storage=storage)


def by_state(study) -> dict:
    trials = study.get_trials()
    return {state: [t for t in trials if t.state == state] for state in TrialState}


def workers(trials) -> set:
    return {t.user_attrs["worker"]["pid"] for t in trials}


def test_two_workers_share_a_journal_study_and_the_best_recipe_retrains_to_its_score(tmp_path):
    out = tmp_path / "study"
    done = subprocess.run(command(*files(tmp_path, 150), "--trials", 6, "--jobs", 2,
                                  "--out", out), capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    study = journal(out)
    complete = by_state(study)[TrialState.COMPLETE]
    assert sorted(t.number for t in complete) == list(range(6))
    assert len(workers(complete)) == 2                    # both worker processes ran trials
    for t in complete:              # each trial is a trainer run scored on validation only
        metrics = json.loads((out / "trials" / f"{t.number:04d}" / "metrics.json").read_text())
        assert metrics["valid"]["rmse"] == t.value and "test" not in metrics
    best = min(complete, key=lambda t: t.value)
    recipe = (out / "best.toml").read_text()
    assert f"study {out.name} ({out / study_storage.JOURNAL}), trial {best.number}," in recipe
    assert f"validation rmse {best.value:.4f} at epoch" in recipe
    settings = read_recipe(out / "best.toml")
    assert settings["hidden"] == tuple(int(k) for k in best.params["hidden"].split(","))
    assert settings["dropout"] == best.params["dropout"] and settings["epochs"] == 150
    lines = (out / "trials.csv").read_text().splitlines()
    assert len(lines) == 7 and lines[0].startswith("trial,state,valid rmse,")
    assert (out / "tune.png").stat().st_size > 0
    # train --config best.toml, on the same data and seed, scores what the study reported
    again = tmp_path / "again"
    assert train.main(["--config", str(out / "best.toml"), "--dataset", "synthetic-tiny",
                       "--device", "cpu", "--validation-only", "--out", str(again)]) == 0
    assert json.loads((again / "metrics.json").read_text())["valid"]["rmse"] == best.value
    assert train.main(["--config", str(out / "best.toml"), "--dataset", "synthetic-tiny",
                       "--device", "cpu", "--out", str(tmp_path / "tested")]) == 0


def test_one_worker_draws_the_same_trials_each_time(tmp_path):
    flags = files(tmp_path, 3)
    params = []
    for name in ("a", "b"):
        assert tune.main([*flags, "--trials", "4", "--out", str(tmp_path / name)]) == 0
        params.append([t.params for t in journal(tmp_path / name).get_trials()])
    assert params[0] == params[1] and len({str(p) for p in params[0]}) == 4
    # the first trial is where the recipe stands: its (default) dropout and L2, both inside the
    # space; its hidden (500, 500) is not among the choices, so the sampler draws that one
    assert params[0][0]["dropout"] == DEFAULTS.dropout == 0.5
    assert params[0][0]["weight_decay"] == DEFAULTS.weight_decay == 1e-3
    assert all(p["dropout"] != 0.5 for p in params[0][1:])


def test_a_trial_over_several_splits_scores_the_mean_of_their_validation(tmp_path, capsys):
    out = tmp_path / "study"
    assert tune.main([*files(tmp_path, 3), "--trials", "2", "--split-seeds", "0,2",
                      "--out", str(out)]) == 0
    complete = by_state(journal(out))[TrialState.COMPLETE]
    assert len(complete) == 2
    for t in complete:              # a trainer run on each split, in a folder of its own
        runs = [json.loads((out / "trials" / f"{t.number:04d}" / f"split{seed}" /
                            "metrics.json").read_text()) for seed in (0, 2)]
        assert [r["config"]["split_seed"] for r in runs] == [0, 2]
        assert t.user_attrs["valid_by_split"] == [r["valid"]["rmse"] for r in runs]
        assert t.value == pytest.approx((runs[0]["valid"]["rmse"] + runs[1]["valid"]["rmse"]) / 2)
    assert "(the mean over split seeds 0,2)" in (out / "best.toml").read_text()
    refused(tune.main, [*files(tmp_path, 3), "--split-seeds", "0,1", "--split-seed", "1",
                        "--out", str(tmp_path / "other")], capsys,
            "--split-seed and --split-seeds: give one")


def test_split_seeds_of_a_split_that_draws_nothing_are_refused_before_a_trial(tmp_path,
                                                                               capsys):
    # before, the study started and its first trial failed on --split-seed 1
    out = tmp_path / "study"
    refused(tune.main, ["--dataset", "synthetic-tiny", "--split", "time", "--device", "cpu",
                        "--split-seeds", "0,1", "--trials", "1", "--out", str(out)], capsys,
            "--split-seeds 0,1: --split time cuts by time, and nothing is drawn at random here "
            "(the seed draws --data-ratio's sample below 1): each seed makes the same split: "
            "leave them out")
    assert not (out / "trials").exists()


@pytest.mark.parametrize("name, recipe", [("explicit", "ml-100k-explicit"),
                                          ("implicit", "ml-100k-implicit")])
def test_each_shipped_space_holds_its_recipe_whole(name, recipe):
    """A study of the README's recipe starts at the recipe itself: every setting the space
    searches has the recipe's value inside it. The spaces are the package's data, read as an
    installed package reads them."""
    settings = read_recipe(REPO / "recipes" / f"{recipe}.toml")
    dims = space.read_space(space.default(name), settings)
    assert set(space.recipe_point(dims, settings)) == {d.name for d in dims}
    shipped = [line.strip() for line in (REPO / "pyproject.toml").read_text().splitlines()]
    assert '"ncae_cuda.runs" = ["spaces/*.toml"]' in " ".join(shipped)


def undated(tmp_path) -> Path:
    """synthetic-tiny's interactions as a file of user,item: implicit, without timestamps."""
    data = datasets.load("synthetic-tiny")
    path = tmp_path / "undated.csv"
    path.write_text("".join(f"{u},{i}\n" for u, i in zip(data.user_ids[data.users],
                                                        data.item_ids[data.items])))
    return path


def test_the_default_space_leaves_out_time_where_the_data_has_none(tmp_path, capsys):
    """Without --space, tune searches the package's space of the data's feedback; on data
    without timestamps its recency settings are left out (at the recipe's 0), so every trial
    completes, and a recipe that weighs by time is refused before any trial."""
    (tmp_path / "recipe.toml").write_text("epochs = 2\npatience = 0\nbatch_size = 16\n")
    flags = ["--dataset", undated(tmp_path), "--config", tmp_path / "recipe.toml", "--device",
             "cpu", "--pruner", "none", "--trials", 3]
    assert tune.main([*map(str, flags), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert ("recency_boost, recency_halflife: not searched (the data has no timestamps): each "
            f"trial has the recipe's recency_boost 0, recency_halflife "
            f"{DEFAULTS.recency_halflife:g}") in out
    trials = journal(tmp_path / "o").get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    searched = set(space.read_tables(space.default("implicit"))) - set(space.TIMED)
    assert all(set(t.params) == searched for t in trials)
    assert "recency_boost" not in read_recipe(tmp_path / "o" / "best.toml")
    # the same space where the data has timestamps: the recency settings are searched
    (tmp_path / "implicit.toml").write_text('feedback = "implicit"\nepochs = 2\n')
    timed = [*map(str, flags), "--dataset", "synthetic-tiny", "--config",
             str(tmp_path / "implicit.toml"), "--trials", "1"]
    assert tune.main([*timed, "--out", str(tmp_path / "dated")]) == 0
    assert "not searched" not in capsys.readouterr().out
    # (the recipe's own trial: its recency_boost 0 leaves the halflife unread, and undrawn)
    assert set(journal(tmp_path / "dated").get_trials()[0].params) == searched | {
        "recency_boost"}
    (tmp_path / "timed.toml").write_text('feedback = "implicit"\nrecency_boost = 10.0\n')
    refused(tune.main, [*map(str, flags), "--config", str(tmp_path / "timed.toml"), "--out",
                        str(tmp_path / "t")], capsys,
            f"--config {tmp_path / 'timed.toml'}: recency_boost 10 weighs a user's interactions "
            "by their time, and the data has no timestamps: set recency_boost = 0")
    assert not (tmp_path / "t").exists()


CONDITIONAL_SPACE = """
[recency_boost]
choices = [0.0, 4.0]
[recency_halflife]
low = 1.0
high = 8.0
[augment_eps]
choices = [0.0, 0.05]
[augment_p]
low = 0.2
high = 0.8
"""


def tuned_implicit(tmp_path, space_text: str, trials: int, recipe: str = "") -> Path:
    """The --out of a study of `trials` trials over a small implicit recipe (recipe.toml, and
    the lines of `recipe`) in the space of `space_text`, on synthetic-tiny."""
    (tmp_path / "recipe.toml").write_text('feedback = "implicit"\nepochs = 2\npatience = 0\n'
                                          "batch_size = 16\nhidden = [8]\n" + recipe)
    (tmp_path / "space.toml").write_text(space_text)
    out = tmp_path / "o"
    assert tune.main([*map(str, ["--dataset", "synthetic-tiny", "--config",
                                 tmp_path / "recipe.toml", "--space", tmp_path / "space.toml",
                                 "--device", "cpu", "--pruner", "none", "--trials", trials,
                                 "--out", out])]) == 0
    return out


def test_a_setting_read_only_with_another_is_drawn_only_where_that_one_is_on(tmp_path,
                                                                            capsys):
    """recency_halflife is read only with recency_boost > 0, augment_p only with augment_eps >
    0: a trial draws each only where its other is on, and runs with the default elsewhere
    (before, every trial drew both, and those off ran with a halflife or p they never read)."""
    out = tuned_implicit(tmp_path, CONDITIONAL_SPACE, 6)
    said = capsys.readouterr().out
    assert ("recency_halflife: drawn only where recency_boost > 0; elsewhere unread, at its "
            f"default {DEFAULTS.recency_halflife:g}") in said
    assert "augment_p: drawn only where augment_eps > 0" in said
    trials = journal(out).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 6
    pairs = [("recency_boost", "recency_halflife"), ("augment_eps", "augment_p")]
    for other, name in pairs:
        assert {other in t.params for t in trials} == {True}
        assert {t.params[other] > 0 for t in trials} == {True, False}      # both are tried
        for t in trials:
            config = json.loads((out / "trials" / f"{t.number:04d}" / "metrics.json")
                                .read_text())["config"]
            assert (name in t.params) == (t.params[other] > 0)
            assert config[name] == t.params.get(name, getattr(DEFAULTS, name))
    best = read_recipe(out / "best.toml")                    # a recipe the trainer takes
    for other, name in pairs:
        assert (name in best) == (best[other] > 0)


def test_pretrain_epochs_is_drawn_only_where_a_trial_pre_trains(tmp_path, capsys):
    """pretrain_epochs is read only where pretrain is not BP: a trial draws it only where it
    pre-trains, as a setting read only with a number > 0 is (before, every trial drew it, and
    the sampler learnt from the values of those that never read it)."""
    (tmp_path / "recipe.toml").write_text("epochs = 2\npatience = 0\nbatch_size = 16\n")
    (tmp_path / "space.toml").write_text('[pretrain]\nchoices = ["BP", "U+U"]\n'
                                         "[pretrain_epochs]\nlow = 1\nhigh = 3\n")
    out = tmp_path / "o"
    assert tune.main([*map(str, ["--dataset", "synthetic-tiny", "--config",
                                 tmp_path / "recipe.toml", "--space", tmp_path / "space.toml",
                                 "--device", "cpu", "--pruner", "none", "--trials", 5,
                                 "--out", out])]) == 0
    assert ("pretrain_epochs: drawn only where pretrain is not BP; elsewhere unread, at its "
            f"default {DEFAULTS.pretrain_epochs}") in capsys.readouterr().out
    trials = journal(out).get_trials()
    assert {t.params["pretrain"] for t in trials} == {"BP", "U+U"}          # both are tried
    for t in trials:
        config = json.loads((out / "trials" / f"{t.number:04d}" / "metrics.json")
                            .read_text())["config"]
        assert ("pretrain_epochs" in t.params) == (t.params["pretrain"] != "BP")
        assert config["pretrain_epochs"] == t.params.get("pretrain_epochs",
                                                         DEFAULTS.pretrain_epochs)


# {a space over a setting that decides whether others are read: (its text, {setting: the
# values of the decider where it is read}, the lines tune says)}
DECIDED = {
    "weighting": ('[weighting]\nchoices = ["popularity", "uniform"]\n[c0]\nlow = 100.0\n'
                  "high = 800.0\n[uniform_c]\nlow = 0.01\nhigh = 0.2\n",
                  {"c0": {"popularity"}, "uniform_c": {"uniform"}},
                  ["c0: drawn only where weighting is not uniform; elsewhere unread, at its "
                   "default 512", "uniform_c: drawn only where weighting is not popularity; "
                   "elsewhere unread, at its default 0.05"]),
    "loss": ('[loss]\nchoices = ["weighted_square", "multinomial"]\n[c0]\nlow = 100.0\n'
             "high = 800.0\n", {"c0": {"weighted_square"}},
             ["c0: drawn only where loss is not multinomial; elsewhere unread, at its default "
              "512"]),
    # (the variant fills in augment_eps, which reads augment_p)
    "variant": ('[variant]\nchoices = ["NCAE", "NCAE+"]\n[augment_p]\nlow = 0.2\nhigh = 0.6\n',
                {"augment_p": {"NCAE+"}},
                ["augment_p: drawn only where augment_eps > 0; elsewhere unread, at its default "
                 "0.8"]),
}


@pytest.mark.parametrize("decider", DECIDED)
def test_a_setting_its_others_leave_unread_is_drawn_only_where_a_trial_reads_it(
        tmp_path, capsys, decider):
    """c0 is read only with popularity weighting and the square loss, uniform_c only with
    uniform weighting, augment_p only with augmentation (a variant's): a trial draws each only
    where it reads it (before, a trial drawing uniform with a c0 failed, "c0 is for popularity
    weighting", and a space of weighting and uniform_c was refused outright)."""
    text, read_with, lines = DECIDED[decider]
    out = tuned_implicit(tmp_path, text, 6)
    said = capsys.readouterr().out
    assert all(line in said for line in lines), said
    trials = journal(out).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 6
    choices = space.read_tables(tmp_path / "space.toml")[decider]["choices"]
    assert {t.params[decider] for t in trials} == set(choices)              # both are tried
    for t in trials:
        config = json.loads((out / "trials" / f"{t.number:04d}" / "metrics.json")
                            .read_text())["config"]
        for name, values in read_with.items():
            assert (name in t.params) == (t.params[decider] in values), (t.number, t.params)
            assert config[name] == t.params.get(name, getattr(DEFAULTS, name))


def test_the_recipe_s_weighting_left_to_its_variant_is_its_first_trial_s(tmp_path, capsys):
    """A recipe that leaves weighting to its variant (NCAE+'s popularity) starts the search
    there (before: "note: the recipe's weighting outside the space", and the first trial drew
    it); a space whose weighting never reads its c0 is refused (before: accepted, and every
    trial that drew a c0 failed)."""
    out = tuned_implicit(tmp_path, DECIDED["weighting"][0], 1)
    assert "outside the space" not in capsys.readouterr().out
    assert journal(out).get_trials()[0].params == {"weighting": "popularity",
                                                   "c0": DEFAULTS.c0}
    # a space whose weighting never reads its c0 is refused (as a recipe's would be)
    (tmp_path / "space.toml").write_text('[weighting]\nchoices = ["uniform"]\n'
                                         "[c0]\nlow = 100.0\nhigh = 800.0\n")
    refused(tune.main, [*map(str, ["--dataset", "synthetic-tiny", "--config",
                                   tmp_path / "recipe.toml", "--space", tmp_path / "space.toml",
                                   "--out", tmp_path / "u"])], capsys,
            f"--space {tmp_path / 'space.toml'}: c0: 100.0: c0 is for popularity weighting")


def test_a_multinomial_recipe_is_searched_in_the_space_of_its_loss(tmp_path, capsys):
    """A recipe of the multinomial loss, which has no weights c_j, is searched in the
    package's implicit-multinomial space (depth among the layers, no c0 or omega), and its
    best.toml keeps the loss."""
    (tmp_path / "recipe.toml").write_text('feedback = "implicit"\nloss = "multinomial"\n'
                                          "epochs = 2\npatience = 0\nbatch_size = 16\n")
    assert tune.main([*map(str, ["--dataset", undated(tmp_path), "--config",
                                 tmp_path / "recipe.toml", "--device", "cpu", "--pruner",
                                 "none", "--trials", 2, "--out", tmp_path / "o"])]) == 0
    tables = space.read_tables(space.default("implicit", loss="multinomial"))
    assert {"c0", "omega"}.isdisjoint(tables) and [600, 200] in tables["hidden"]["choices"]
    assert all(set(t.params) == set(tables) - set(space.TIMED)
               for t in journal(tmp_path / "o").get_trials())
    assert read_recipe(tmp_path / "o" / "best.toml")["loss"] == "multinomial"

def test_a_budget_in_minutes_stops_the_workers_after_a_trial_each(tmp_path, capsys):
    """--budget 0.01 (0.6 s, gone before a worker has started): each of the 2 workers runs one
    trial and the command writes the study so far and says so; a line a trial, with its
    settings, its score, the best so far and the time since the command started. The same
    command again continues the study with a budget of its own."""
    out = tmp_path / "study"
    flags = [*files(tmp_path, 3), "--trials", 10, "--jobs", 2, "--budget", 0.01, "--out", out]
    for run in (1, 2):
        done = subprocess.run(command(*flags), capture_output=True, text=True, cwd=REPO)
        assert done.returncode == 0, done.stderr
        assert ("--budget 0.01 min: 2 trials finished within it (and those under way then), "
                f"{2 * run} of 10 in the study: the same command continues it") in done.stdout
        trials = journal(out).get_trials()
        assert [t.state for t in trials] == [TrialState.COMPLETE] * 2 * run
        assert len(workers(trials[-2:])) == 2                      # one trial each
        lines = [line for line in done.stdout.splitlines() if line.startswith("worker ")]
        assert len(lines) == 2, done.stdout
        for line in lines:
            number = int(line.split(": trial ")[1].split()[0])
            t = trials[number]
            assert f"] rmse {t.value:.4f} (epoch " in line and " | best rmse " in line
            assert f"dropout {t.params['dropout']:.3g} " in line
            assert " elapsed, --budget passed: no trial starts" in line or line.endswith(
                " elapsed")
        assert (out / "best.toml").exists() and len((out / "trials.csv").read_text()
                                                    .splitlines()) == 2 * run + 1
    refused(tune.main, [*map(str, flags[:-4]), "--budget", "0", "--out", str(out)], capsys,
            "--budget: expected a number of minutes > 0, got '0'")


def test_the_kernels_compile_is_left_out_of_the_trials_time_and_the_budget(tmp_path, capsys,
                                                                            monkeypatch):
    """The first trial that compiles Numba's kernels (here a compile of 6 s, stood in for by
    its event) runs as many trials in --budget 0.08 (4.8 s) as one that finds them cached:
    neither its trial's seconds (trials.csv's, the comparison's minutes) nor the budget count
    it (before, NCAE's first trial paid the compile, 10 s on a fresh install, and a baseline's
    hardly any: the models' minutes and budgets were not alike)."""
    from numba.core import event
    out, real = tmp_path / "o", protocol.run
    pause = 6.0

    def compiling_first(spec, config, on_epoch=None):
        if spec.out.name == "0000":
            with event.trigger_event("numba:compile", data={}):
                time.sleep(pause)
        return real(spec, config, on_epoch)
    flags = [*files(tmp_path, 2), "--trials", "3", "--budget", "0.08", "--out", str(out)]
    monkeypatch.setattr(protocol, "run", compiling_first)
    assert tune.main([*flags, "--worker", "0"]) == 0          # the worker, in this process
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("worker 0: trial 0 ")]
    assert len(lines) == 1 and f"(and {pause:.1f} s compiling the kernels, not counted)" in lines[0]
    trials = journal(out).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    monkeypatch.setattr(protocol, "run", real)
    assert tune.main(flags) == 0                        # the outputs of the 3 trials
    with open(out / effort.TABLE, newline="") as f:
        rows = list(csv.DictReader(f))
    for t, row in zip(trials, rows):
        wall = (t.datetime_complete - t.datetime_start).total_seconds()
        compiled = float(row["compile seconds"])
        assert compiled == pytest.approx(pause if t.number == 0 else 0.0, abs=0.05)
        assert float(row["seconds"]) == pytest.approx(wall - compiled, abs=1e-3)
    assert effort.of_study(out / "best.toml")["minutes"] == pytest.approx(
        sum(float(row["seconds"]) for row in rows) / 60)


def test_epochs_is_searched_and_early_stopping_picks_the_best_epoch(tmp_path):
    """A space may hold epochs (the most a trial trains; validation still picks its epoch)."""
    flags = files(tmp_path, 3)
    (tmp_path / "space.toml").write_text("[epochs]\nlow = 2\nhigh = 6\n[dropout]\nlow = 0.0\n"
                                         "high = 0.6\n")
    out = tmp_path / "o"
    assert tune.main([*flags, "--trials", "3", "--out", str(out)]) == 0
    trials = journal(out).get_trials()
    assert trials[0].params["epochs"] == 3                        # the recipe's own
    for t in trials:
        metrics = json.loads((out / "trials" / f"{t.number:04d}" / "metrics.json").read_text())
        assert metrics["config"]["epochs"] == t.params["epochs"] == t.last_step
        assert 1 <= int(t.user_attrs["best_epoch"]) == metrics["best_epoch"] <= t.last_step
    best = min(trials, key=lambda t: t.value)
    assert read_recipe(out / "best.toml")["epochs"] == best.params["epochs"]


@pytest.mark.parametrize("model, unit", [("ncae", "epoch"), ("ials", "iteration")])
def test_a_pruned_trial_s_line_names_its_model_s_unit(tmp_path, monkeypatch, capsys, model,
                                                      unit):
    """A trial pruned at its first validation (a worker run in this process): its line says
    at what, in the model's unit (Model.step). Before, an iALS trial said "pruned at epoch
    1" of its first iteration."""
    monkeypatch.setattr(optuna.trial.Trial, "should_prune", lambda trial: True)
    flags = (files(tmp_path, 3) if model == "ncae" else
             ["--dataset", "synthetic-tiny", "--device", "cpu", "--model", model])
    assert tune.main([*map(str, flags), "--out", str(tmp_path / "study"), "--trials", "1",
                      "--worker", "0"]) == 0
    assert re.search(rf"^worker 0: trial 0 \[.*\] pruned at {unit} 1 in ",
                     capsys.readouterr().out, re.MULTILINE)


def test_the_recipe_point_is_the_recipe_where_the_space_holds_it():
    dims = [space.Dimension("hidden", choices=((4,), (8, 4))),
            space.Dimension("dropout", low=0.0, high=0.6),
            space.Dimension("weight_decay", low=1e-2, high=1e-1, log=True),
            space.Dimension("lr", low=1e-4, high=1e-2, log=True)]
    point = space.recipe_point(dims, {"hidden": [8, 4], "dropout": 0.7, "weight_decay": 0.05})
    # a choice as Optuna stores it; out of range (0.7) left to the sampler; lr: the default's
    assert point == {"hidden": "8,4", "weight_decay": 0.05, "lr": DEFAULTS.lr}


def test_a_killed_worker_fails_its_trial_and_the_study_goes_on(tmp_path):
    out = tmp_path / "study"
    flags = [*files(tmp_path, 200), "--out", out]
    running = subprocess.Popen(command(*flags, "--trials", 3, "--jobs", 2),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        time.sleep(0.2)
        if not (out / study_storage.JOURNAL).exists():
            continue
        for t in journal(out).get_trials(states=(TrialState.RUNNING,)):
            log = out / "trials" / f"{t.number:04d}" / "log.txt"
            if "worker" in t.user_attrs and log.exists() and "epoch  20 " in log.read_text():
                victim = t                                # mid-training
                break
    assert victim is not None, "no trial got under way"
    os.kill(victim.user_attrs["worker"]["pid"], signal.SIGKILL)
    stdout, stderr = running.communicate(timeout=300)
    assert running.returncode == 0, stderr
    assert "ended with exit -9; the others finished the study" in stderr
    states = by_state(journal(out))
    assert [t.number for t in states[TrialState.FAIL]] == [victim.number]
    assert len(states[TrialState.COMPLETE]) == 3 and not states[TrialState.RUNNING]
    row = next(line for line in (out / "trials.csv").read_text().splitlines()
               if line.startswith(f"{victim.number},FAIL,"))
    assert row.endswith("its worker died with it under way")
    # the same command, one more trial: the study goes on from where it is
    assert tune.main([*map(str, flags), "--trials", "4", "--jobs", "2"]) == 0
    states = by_state(journal(out))
    assert len(states[TrialState.COMPLETE]) == 4 and len(states[TrialState.FAIL]) == 1


def test_ctrl_c_stops_the_study_and_writes_the_best_of_its_finished_trials(tmp_path):
    """SIGINT to the command (a terminal's Ctrl-C) once two trials have finished: it stops,
    exit 130, and best.toml is the best of the completed trials. Before, the worker said 'its
    trial failed, the study goes on', and the command stopped writing nothing. (A worker's
    line comes before Optuna files the trial: the third line says the second is filed.)"""
    import queue
    out = tmp_path / "study"
    with started(*files(tmp_path, 40), "--trials", 200, "--out", out) as running:
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in running.stdout],
                         daemon=True).start()
        finished, deadline = 0, time.monotonic() + 120
        while finished < 3 and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                finished += lines.get(timeout=1).startswith("worker 0: trial ")
        assert finished == 3, "no three trials finished"
        code, stderr = interrupted(running)
    assert code == 130 and "the study goes on" not in stderr, stderr
    complete = by_state(journal(out))[TrialState.COMPLETE]
    assert 2 <= len(complete) < 200
    assert (f"SIGINT: stopped with {len(complete)} of 200 trials finished (best.toml holds the "
            "best of them): the same command continues the study") in stderr
    best = min(complete, key=lambda t: t.value)
    assert read_recipe(out / "best.toml")["dropout"] == best.params["dropout"]
    assert f"trial {best.number}, the best of {len(complete)} finished trials" in (
        out / "best.toml").read_text()


def test_ctrl_c_stops_every_worker_at_a_safe_point_and_leaves_no_journal_lock(tmp_path):
    """SIGINT to a command of two workers whose trials are short (most of their time outside
    a fit: Optuna's writes to the journal): each worker stops, saying so, and the journal is
    left whole: no trial running, and no lock of Optuna's left. Before, a worker outside a
    fit died at once on the SIGTERM the command hands on, saying nothing, and could leave
    the journal's lock behind: the other worker and the command waited out Optuna's 30 s
    grace period on it."""
    out = tmp_path / "study"
    with started(*files(tmp_path, 3), "--trials", 500, "--jobs", 2, "--out", out) as running:
        # once both workers have finished trials of their own (their kernels compiled)
        said = {line.split(":")[0] for line, _ in zip(running.stdout, range(12))
                if line.startswith("worker ")}
        assert said == {"worker 0", "worker 1"}, said
        code, stderr = interrupted(running)
    assert code == 130 and "Traceback" not in stderr, stderr
    stops = re.findall(r"^worker (\d): stopped(?:; the trial under way is marked failed|, with "
                       r"no trial under way)$", stderr, re.MULTILINE)
    assert sorted(stops) == ["0", "1"], stderr
    states = by_state(journal(out))
    assert not states[TrialState.RUNNING] and not glob.glob(f"{out}/*.lock")
    finished = len(states[TrialState.COMPLETE])
    assert stderr.endswith(f"SIGINT: stopped with {finished} of 500 trials finished (best.toml "
                           "holds the best of them): the same command continues the study\n")


def test_a_worker_stopped_by_the_command_names_no_signal(monkeypatch, capsys):
    """The command hands a Ctrl-C on to its workers as SIGTERM (pool.Processes), and says
    "SIGINT: stopped ..." itself: a worker's line names no signal (before: "worker 1: SIGTERM:
    stopped" of a Ctrl-C); its exit status is still the signal's."""
    def stopped(*args):
        error = KeyboardInterrupt()
        error.signal_name = "SIGTERM"                   # as stopping.Stopped carries it
        raise error
    monkeypatch.setattr(tune_study, "open_storage", lambda spec: None)
    monkeypatch.setattr(tune_study, "open_study", lambda spec, found, storage: None)
    monkeypatch.setattr(tune_study, "work", stopped)
    assert tune_study.work_on(types.SimpleNamespace(worker=1), None) == 128 + signal.SIGTERM
    assert capsys.readouterr().err == ("worker 1: stopped; the trial under way is marked "
                                       "failed\n")



def test_a_trial_a_signal_stopped_reads_so_in_trials_csv(finished, monkeypatch, capsys):
    """A trial whose fit stopped at a signal (the command's Ctrl-C, handed on as SIGTERM)
    reads so in trials.csv, and how to go on; a killed worker's reads otherwise (the test
    above). Before, both read "stopped or killed with its worker"."""
    flags, restore = finished
    out = restore()

    def stopped(*args, **kwargs):
        raise stopping.Stopped("SIGTERM", [])               # as the epoch loop raises it
    monkeypatch.setattr(protocol, "run", stopped)
    assert tune.main([*flags, "--trials", "3", "--worker", "0"]) == 128 + signal.SIGTERM
    assert tune.main([*flags, "--trials", "2"]) == 0        # its outputs, of the study so far
    with open(out / "trials.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(row["state"], row["error"]) for row in rows[2:]] == [
        ("FAIL", "stopped by Ctrl-C or SIGTERM; the same command continues the study")]

# ---------------------------------------------------------------------------------------------
# PostgreSQL: a server of the OS's packages (CI installs it), started here as its own user

def _postgres_bin() -> Path | None:
    found = shutil.which("initdb")
    places = ([str(Path(found).resolve().parent)] if found else []) + sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    return next((Path(p) for p in places if (Path(p) / "pg_ctl").exists()), None)


@pytest.fixture
def postgres():
    """postgresql://... of a server on a free port, in a temporary folder, stopped after."""
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server is installed (CI installs one: apt-get install "
                    "postgresql)")
    root = Path(tempfile.mkdtemp(prefix="ncae-postgres-"))
    as_user = []
    if os.geteuid() == 0:                          # the server refuses to run as root
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = root / "server.log"

    def run(*argv):
        subprocess.run([*as_user, *map(str, argv)], check=True, capture_output=True, text=True)
    run(bin_dir / "initdb", "-D", root / "data", "-U", "ncae", "--auth=trust", "-E", "UTF8")
    run(bin_dir / "pg_ctl", "-D", root / "data", "-l", log, "-w", "start", "-o",
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1")
    try:
        yield f"postgresql://ncae@127.0.0.1:{port}/postgres", log
    finally:
        run(bin_dir / "pg_ctl", "-D", root / "data", "-m", "fast", "-w", "stop")
        print(f"--- {log}\n{log.read_text()}")
        shutil.rmtree(root, ignore_errors=True)


def _open_at_once(url: str, start, failed) -> None:
    """A worker process of the test below: open the storage once `start` lets every one go."""
    args = argparse.Namespace(storage=url, study="s", worker=0, out=None)
    start.wait()
    try:
        study_storage.open_storage(args)
    except study_storage.TuneError as e:
        failed.append(str(e))


def test_workers_opening_a_new_postgresql_storage_at_once_all_open_it(postgres):
    """The first to open a database makes Optuna's tables; the others, at the same moment, meet
    a table or type made since they looked (DuplicateTable, DuplicateObject, or a duplicate in
    pg_type) and try again, finding it."""
    url, _ = postgres
    context = multiprocessing.get_context("fork")      # started with the package imported
    with context.Manager() as manager:
        start, failed = manager.Barrier(8), manager.list()
        workers = [context.Process(target=_open_at_once, args=(url, start, failed))
                   for _ in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert [w.exitcode for w in workers] == [0] * 8 and not list(failed), list(failed)


def test_two_machines_share_a_postgresql_study(tmp_path, postgres):
    url, log = postgres
    flags = [*files(tmp_path, 300), "--storage", url, "--study", "shared", "--trials", 4]
    machines = [subprocess.Popen(command(*flags, "--out", tmp_path / m), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, cwd=REPO)
                for m in ("a", "b")]
    outputs = [m.communicate(timeout=300)[0] for m in machines]
    for machine, output in zip(("a", "b"), outputs):
        print(f"--- machine {machine}\n{output}")
    assert [m.returncode for m in machines] == [0, 0], outputs
    study = optuna.load_study(study_name="shared", storage=RDBStorage(url))
    complete = by_state(study)[TrialState.COMPLETE]
    assert len(complete) == 4 and len(workers(complete)) == 2
    ran = [{int(p.name) for p in (tmp_path / m / "trials").iterdir()} for m in ("a", "b")]
    assert ran[0] and ran[1] and not ran[0] & ran[1]             # each trial ran once, somewhere
    assert read_recipe(tmp_path / "a" / "best.toml") == read_recipe(tmp_path / "b" / "best.toml")
    version = subprocess.run([str(_postgres_bin() / "postgres"), "--version"],
                             capture_output=True, text=True).stdout.strip()
    by_worker = {pid: [t.number for t in complete if t.user_attrs["worker"]["pid"] == pid]
                 for pid in workers(complete)}
    print(f"{version}; {url}; trials by worker: {by_worker}")


# ---------------------------------------------------------------------------------------------
# the space, and a user's mistakes

def test_a_choice_of_widths_reaches_the_model_as_a_tuple(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text(SPACE)
    dimensions = space.read_space(path, {})
    trial = optuna.trial.FixedTrial({"hidden": "8,4", "dropout": 0.25, "weight_decay": 0.01})
    assert {d.name: d.suggest(trial) for d in dimensions} == {
        "hidden": (8, 4), "dropout": 0.25, "weight_decay": 0.01}
    assert space.settings(dimensions, {"hidden": "4"}) == {"hidden": (4,)}


@pytest.mark.parametrize("text, message", [
    ("[hiden]\nchoices = [[8]]\n", "hiden: no such setting"),
    ("[hidden]\nlow = 4\nhigh = 8\n", "hidden: not a number: give choices"),
    ("[dropout]\nlow = 0.0\nhigh = 1.0\n", "dropout: 1.0: dropout must be in [0, 1)"),
    ("[weight_decay]\nlow = 0.0\nhigh = 0.1\nlog = true\n",
     "weight_decay: log = true needs low > 0"),
    ("[epochs]\nlow = 5.5\nhigh = 10\n", "epochs: low, high and step must be integers"),
    ("[feedback]\nchoices = [\"implicit\"]\n", "feedback: not searched"),
    ("[seed]\nchoices = [1, 2]\n", "seed: not searched"),
    ("[dropout]\nchoices = []\n", "dropout: choices = [a list of values]"),
    # values as the file writes them (before: "hidden: (0,): ... e.g. (500, 500); got (0,)")
    ("[hidden]\nchoices = [[0]]\n",
     "hidden: [0]: hidden must be positive integers, e.g. [500, 500]; got [0]"),
    ("[dropout]\nlow = 0.1\nhigh = 0.5\nlog = 1\n",
     "dropout: log = true needs low > 0 and no step"),
    ("", "no setting to search"),
    # a setting its recipe's other (or the space's) never turns on: never read
    ("[pretrain_epochs]\nlow = 1\nhigh = 3\n", "pretrain_epochs: 1: pretrain_epochs is for "
     "pre-training (a pretrain other than BP)"),
    ('[pretrain]\nchoices = ["BP"]\n[pretrain_epochs]\nlow = 1\nhigh = 3\n',
     "pretrain_epochs: 1: pretrain_epochs is for pre-training"),
    ("[c0]\nlow = 64.0\nhigh = 128.0\n", "c0: 64.0: c0 is for implicit feedback"),
])
def test_a_bad_space_is_refused_in_a_line(tmp_path, capsys, text, message):
    flags = files(tmp_path, 3)
    (tmp_path / "space.toml").write_text(text)
    refused(tune.main, [*flags, "--out", str(tmp_path / "o")], capsys,
            f"--space {tmp_path / 'space.toml'}: {message}")


def test_another_study_in_an_out_or_a_storage_is_refused(tmp_path, capsys):
    flags = [*files(tmp_path, 2), "--trials", "2", "--out", str(tmp_path / "o")]
    assert tune.main(flags) == 0
    refused(tune.main, [*flags, "--seed", "1"], capsys,
            "study o in " + str(tmp_path / "o" / study_storage.JOURNAL)
            + " tunes other settings (seed: 0 -> 1): tune with those, choose another --out, or "
            "start over with --overwrite")
    # another pruner: the study's trials were pruned by one, and tune.json, which the baselines
    # tuned beside it follow, records one (before: continued, tune.json saying the last's)
    refused(tune.main, [*flags, "--pruner", "halving", "--trials", "3"], capsys,
            "tunes other settings (pruner: none -> halving): tune with those")
    assert json.loads((tmp_path / "o" / effort.MARKER).read_text())["scored"]["pruner"] == "none"
    # other workers, or another device: the trials' minutes were taken on one share of the
    # cores, on one backend, as tune.json says and the baselines tuned beside it follow
    # (before: continued, tune.json saying the last command's); a separate study of the same
    # storage, a journal in --out, needs another --out
    refused(tune.main, [*flags, "--jobs", "2", "--trials", "3"], capsys,
            "tunes other settings (jobs: 1 -> 2): tune with those, choose another --out, or "
            "start over with --overwrite")
    assert json.loads((tmp_path / "o" / effort.MARKER).read_text())["scored"]["jobs"] == 1
    # ... and of a database, whose --out holds one study too: both name a separate one
    shared = [*flags[:-1], str(tmp_path / "d"), "--storage", f"sqlite:///{tmp_path / 'd.db'}"]
    assert tune.main(shared) == 0
    refused(tune.main, [*shared, "--jobs", "2", "--trials", "3"], capsys,
            "(jobs: 1 -> 2): tune with those, choose another --study and --out, or start over")
    refused(tune.main, [*flags, "--storage", f"sqlite:///{tmp_path / 's.db'}"], capsys,
            f"--out {tmp_path / 'o'} holds the trials of study o in "
            f"{tmp_path / 'o' / study_storage.JOURNAL}")
    refused(tune.main, [*flags, "--storage", "nonsense"], capsys, "not a database URL")
    # another space, named by what differs (before, both spaces whole, on one line)
    (tmp_path / "space.toml").write_text(SPACE[SPACE.index("[dropout]"):]
                                         .replace("high = 0.6", "high = 0.5"))
    refused(tune.main, flags, capsys, "tunes other settings (space: hidden no longer searched; "
            "space.dropout.high: 0.6 -> 0.5): tune with those")
    last = SPACE.index("[weight_decay]")
    (tmp_path / "space.toml").write_text(SPACE[last:] + SPACE[:last])
    refused(tune.main, flags, capsys, "tunes other settings (space: the same settings in "
            "another order): tune with those")
    assert tune.main([*flags, "--seed", "1", "--overwrite"]) == 0           # starts over
    assert len(journal(tmp_path / "o").get_trials()) == 2


def test_a_default_spelled_out_is_the_same_study(tmp_path, capsys):
    # before: --split random (the default here) was refused as another study (data.split:
    # None -> random)
    flags = [*files(tmp_path, 2), "--trials", "2", "--out", str(tmp_path / "o")]
    assert tune.main(flags) == 0
    assert tune.main([*flags, "--split", "random"]) == 0
    study = journal(tmp_path / "o")              # as a study made before spelled it out
    made = study.user_attrs["ncae_cuda"]
    study.set_user_attr("ncae_cuda", {**made, "data": {**made["data"], "split": "random"}})
    assert tune.main(flags) == 0
    # a study made before its pruner was recorded takes this command's, from then on
    study.set_user_attr("ncae_cuda", {k: v for k, v in made.items() if k != "pruner"})
    assert tune.main([*flags, "--pruner", "halving", "--trials", "3"]) == 0
    assert journal(tmp_path / "o").user_attrs["ncae_cuda"]["pruner"] == "halving"
    refused(tune.main, [*flags, "--trials", "4"], capsys, "(pruner: halving -> none)")
    # ... as its workers and device (before they were recorded, every command's were taken)
    study.set_user_attr("ncae_cuda", {k: v for k, v in made.items() if k not in ("jobs", "device")})
    assert tune.main([*flags, "--jobs", "2", "--trials", "4"]) == 0
    assert {k: journal(tmp_path / "o").user_attrs["ncae_cuda"][k] for k in ("jobs", "device")} == {
        "jobs": 2, "device": "cpu"}
    refused(tune.main, [*flags, "--trials", "5"], capsys, "(jobs: 2 -> 1)")
    study.set_user_attr("ncae_cuda", {**made, "device": "gpu"})       # as if run with --device gpu
    refused(tune.main, [*flags, "--trials", "5"], capsys, "(device: gpu -> cpu)")


# ---------------------------------------------------------------------------------------------
# a damaged or lost study, a full disk, a server that never answers

@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished study of 2 trials (its --out, and a copy of it): restore() puts the copy
    back in place, to be damaged anew."""
    root = tmp_path_factory.mktemp("finished")
    out = root / "o"
    flags = [*files(root, 2), "--trials", "2", "--out", str(out)]
    assert tune.main(flags) == 0
    shutil.copytree(out, root / "copy")

    def restore():
        shutil.rmtree(out)
        shutil.copytree(root / "copy", out)
        return out
    return flags, restore


def test_a_study_whose_storage_lost_its_trials_is_refused_and_best_toml_kept(finished, capsys):
    flags, restore = finished
    out = restore()
    best = min(journal(out).get_trials(), key=lambda t: t.value)
    held = json.loads((out / effort.MARKER).read_text())
    assert held["best"] == {"trial": best.number, "value": best.value}
    recipe = (out / "best.toml").read_bytes()
    (out / study_storage.JOURNAL).write_bytes(b"")                 # the journal emptied
    refused(tune.main, [*flags, "--trials", "3"], capsys,
            f"error: study o in {out / study_storage.JOURNAL} has no record of 2 trials that ran "
            f"in {out / 'trials'} (0000, 0001), trial {best.number} of {out / 'best.toml'} (rmse "
            f"{best.value:.4f}): its storage was emptied or replaced: restore it from a copy, "
            "or start over with --overwrite")
    assert (out / study_storage.JOURNAL).read_bytes() == b""
    assert (out / "best.toml").read_bytes() == recipe
    # without the trials' folders, best.toml's own trial still tells the storage was lost
    shutil.rmtree(out / "trials")
    refused(tune.main, [*flags, "--trials", "3"], capsys,
            f"has no record of trial {best.number} of {out / 'best.toml'}")
    assert (out / "best.toml").read_bytes() == recipe


def test_a_journal_line_cut_short_by_a_crash_is_dropped_and_the_study_goes_on(finished, capsys):
    flags, restore = finished
    out = restore()
    with open(out / study_storage.JOURNAL, "ab") as f:            # a record a crash cut mid-write
        f.write(b'{"op_code":5,"worker_id":"w","trial_id":')
    assert tune.main([*flags, "--trials", "3"]) == 0
    note = f"note: {out / study_storage.JOURNAL}: its last line was cut short"
    assert note in capsys.readouterr().err
    lines = (out / study_storage.JOURNAL).read_bytes().splitlines()
    assert all(isinstance(json.loads(line), dict) for line in lines)
    assert [t.state for t in journal(out).get_trials()] == [TrialState.COMPLETE] * 3


def signalled(monkeypatch, module, name: str, times: int = 1, when=lambda *args: True):
    """module.name, replaced by itself after `times` SIGINTs to this process where when(*its
    arguments): a Ctrl-C that comes as the command starts that call (a write), with no sleep
    to time it."""
    real = getattr(module, name)

    def call(*args, **kwargs):
        for _ in range(times if when(*args) else 0):
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, call)


def uncut(main, flags) -> int:
    """main(flags)'s exit status; a KeyboardInterrupt out of it (a write cut short) fails the
    test rather than stopping the session."""
    try:
        return main(flags)
    except KeyboardInterrupt:
        pytest.fail("a signal raised in the command's write")


def test_a_ctrl_c_as_the_command_marks_dead_trials_waits_and_starts_no_worker(
        finished, monkeypatch, capsys):
    """A Ctrl-C as the command writes to the journal before its workers start (its dead
    workers' trials marked failed): the write ends, and no worker starts. Before, a
    KeyboardInterrupt was raised in the write."""
    flags, restore = finished
    out = restore()
    signalled(monkeypatch, tuning, "fail_dead_trials")
    assert uncut(tune.main, [*flags, "--trials", "3"]) == 130
    assert capsys.readouterr().err == ("SIGINT: stopped with 2 of 3 trials finished (best.toml "
                                       "holds the best of them): the same command continues "
                                       "the study\n")
    assert [t.state for t in journal(out).get_trials()] == [TrialState.COMPLETE] * 2


def test_a_ctrl_c_as_the_command_writes_its_outputs_waits_for_them_all(finished, monkeypatch,
                                                                      capsys):
    """A Ctrl-C as the command writes trials.csv: the outputs are written whole, of one
    moment, and the command then stops with the signal's status. Before, a KeyboardInterrupt
    was raised there: best.toml named 3 finished trials, trials.csv and tune.json held 2."""
    flags, restore = finished
    out = restore()
    signalled(monkeypatch, study_outputs, "atomic_write",
              when=lambda path, fill: path.name == effort.TABLE)
    assert uncut(tune.main, [*flags, "--trials", "3"]) == 130
    assert capsys.readouterr().err.endswith("SIGINT: stopped once the outputs were written\n")
    trials = journal(out).get_trials()
    best = min(trials, key=lambda t: t.value)
    with open(out / "trials.csv", newline="") as f:
        assert [int(row["trial"]) for row in csv.DictReader(f)] == [0, 1, 2]
    assert "the best of 3 finished trials" in (out / "best.toml").read_text()
    assert json.loads((out / effort.MARKER).read_text())["best"] == {"trial": best.number,
                                                                    "value": best.value}


def test_a_second_ctrl_c_as_the_command_writes_stops_it_at_once_in_a_line(finished,
                                                                          monkeypatch, capsys):
    """A user who asks twice is not kept waiting: the command stops at once, in a line, with
    the signal's status (no traceback)."""
    flags, restore = finished
    restore()
    signalled(monkeypatch, study_outputs, "atomic_write", times=2,
              when=lambda path, fill: path.name == effort.TABLE)
    assert uncut(tune.main, [*flags, "--trials", "2"]) == 130
    assert capsys.readouterr().err == ("SIGINT: stopped at once by a second signal, a write "
                                       "under way perhaps cut short: the same command "
                                       "continues the study\n")


@pytest.mark.parametrize("name, damage, message", [
    (study_storage.JOURNAL, lambda b: b + b"\xff\xfe garbage\n", "{path}:{lines}: damaged, not a "
     "record of Optuna's journal: restore the file from a copy, or start over with --overwrite"),
    (study_storage.JOURNAL, lambda b: b"\x00" + b, "{path}:1: damaged"),
    (study_storage.JOURNAL, lambda b: b + b"{}\n", "{path}:{lines}: damaged"),
    (study_storage.JOURNAL, lambda b: b + b"[1, 2]\n" + b, "{path}:{lines}: damaged"),
    # records of Optuna's shape that it cannot replay (before: its AssertionError, KeyError)
    (study_storage.JOURNAL, lambda b: b + b'{"op_code": 999}\n', "{path}: damaged, a record "
     "Optuna cannot replay (AssertionError: Should not reach.): restore the file from a copy, "
     "or start over with --overwrite"),
    (study_storage.JOURNAL, lambda b: b + b'{"op_code": 4, "worker_id": "w"}\n',
     "{path}: damaged, a record Optuna cannot replay (KeyError: 'study_id')"),
    (effort.MARKER, lambda b: b[:20], "{path}: damaged, not the record of a study (its name and "
     "storage): remove it and run the same command again"),
    (effort.MARKER, lambda b: b"[1, 2]", "{path}: damaged"),
    (effort.MARKER, lambda b: b'{"study": "o"}', "{path}: damaged"),
    (effort.MARKER, lambda b: b"\xff\xfe" + b, "{path}: damaged"),
    (effort.MARKER, lambda b: b.replace(b'"trial": ', b'"trial": 0.5, "was": '), "{path}: damaged"),
])
def test_a_damaged_journal_or_tune_json_is_refused_in_a_line(finished, capsys, name, damage,
                                                             message):
    flags, restore = finished
    out = restore()
    path = out / name
    before = path.read_bytes()
    path.write_bytes(damage(before))
    refused(tune.main, flags, capsys,
            message.format(path=path, lines=len(before.splitlines()) + 1))


def test_the_recipes_trial_runs_again_once_where_it_failed(tmp_path, monkeypatch, capsys):
    """Its worker stopped by a full disk (the trial failed, not 10 of them), the recipe's own
    values run again at the next command, once."""
    out = tmp_path / "o"
    flags = [*files(tmp_path, 2), "--out", str(out)]

    def full(spec, config, on_epoch=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(spec.out / "model.npz"))
    with monkeypatch.context() as m:
        m.setattr(protocol, "run", full)
        refused(tune.main, [*flags, "--trials", "2", "--worker", "0"], capsys,
                f"error: {out / 'trials' / '0000' / 'model.npz'}: cannot write it (No space "
                "left on device): the disk is full: free some space and run the same command "
                "again (the study goes on)")
    [trial] = journal(out).get_trials()
    assert trial.state == TrialState.FAIL and "the disk is full" in trial.user_attrs["error"]
    recipe = trial.params
    assert tune.main([*flags, "--trials", "2"]) == 0
    assert "trial 0, the recipe's own values, failed: they run again" in capsys.readouterr().out
    study = journal(out)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL] + [TrialState.COMPLETE] * 2
    assert {k: trials[1].params[k] for k in ("dropout", "weight_decay")} == {
        "dropout": DEFAULTS.dropout, "weight_decay": DEFAULTS.weight_decay} == {
        k: recipe[k] for k in ("dropout", "weight_decay")}
    assert tune.main([*flags, "--trials", "2"]) == 0           # it completed: not again
    assert "run again" not in capsys.readouterr().out and len(journal(out).get_trials()) == 3


@pytest.mark.parametrize("where, message", [
    ("file", "{trial}/model.npz: cannot write it"),
    ("folder", "--out {trial}/run: cannot write there"),
])
def test_a_full_disk_met_in_a_trials_write_stops_the_study(tmp_path, monkeypatch, capsys, where,
                                                           message):
    """A write's error (a file's DataError, the run folder's RunFolderError) carries the
    OSError's errno: ENOSPC stops the study as the OSError itself does."""
    out = tmp_path / "o"

    def refuse(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def full(spec, config, on_epoch=None):
        with monkeypatch.context() as m:
            if where == "file":
                m.setattr(atomic_file, "open", refuse, raising=False)
                atomic_file.atomic_write(spec.out / "model.npz", lambda f: None)
            m.setattr(Path, "mkdir", refuse)
            rundir.RunDirectory(spec.out / "run", {}).join()
    monkeypatch.setattr(protocol, "run", full)
    refused(tune.main, [*files(tmp_path, 2), "--out", str(out), "--trials", "2", "--worker",
                        "0"], capsys,
            f"error: {message.format(trial=out / 'trials' / '0000')} (No space left on "
            "device): the disk is full: free some space")
    [trial] = journal(out).get_trials()
    assert trial.state == TrialState.FAIL and "the disk is full" in trial.user_attrs["error"]


def test_outputs_of_a_study_with_no_completed_trial_are_refused_in_a_line(tmp_path):
    """What a Ctrl-C before any trial completed meets (tune_study._stopped: "none completed,
    so no best.toml"): a TuneError naming the trials' logs, and no file written. Before, the
    trials' folder's name was never imported: a NameError's traceback."""
    study = optuna.create_study(study_name="s", storage=JournalStorage(JournalFileBackend(
        str(tmp_path / "j"))))
    study.tell(study.ask(), state=TrialState.FAIL)
    found = tuning.Setup({}, [space.Dimension("dropout", low=0.0, high=0.6)], "rmse", False, {},
                         (0,), "j", "s")
    spec = types.SimpleNamespace(out=tmp_path / "out")      # all the refusal reads of it
    with pytest.raises(study_storage.TuneError, match=(
            rf"^no trial of study s completed: see the trials' log.txt under "
            rf"{re.escape(str(tmp_path / 'out' / tuning.TRIALS))}$")):
        study_outputs.write_outputs(spec, found, study)
    assert not (tmp_path / "out").exists()


def test_a_recipe_that_always_fails_is_enqueued_once_a_command(tmp_path):
    study = optuna.create_study(storage=JournalStorage(JournalFileBackend(
        str(tmp_path / "j"))))
    found = tuning.Setup({}, [space.Dimension("dropout", low=0.0, high=0.6)], "rmse", False, {},
                       (0,), "j", "s")
    study.enqueue_trial({"dropout": 0.5})
    assert tuning.retry_recipe(study, found) is None            # waiting: not again
    for failed in range(2):                                  # fails each time it runs
        trial = study.ask()
        study.tell(trial, state=TrialState.FAIL)
        assert tuning.retry_recipe(study, found) == trial.number
        assert tuning.retry_recipe(study, found) is None
    assert [t.state for t in study.get_trials()] == [TrialState.FAIL] * 2 + [TrialState.WAITING]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB file system (tmpfs), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_stops_the_study_and_says_so(tmp_path, tiny_disk):
    out = tiny_disk / "o"
    done = subprocess.run(command(*files(tmp_path, 2), "--trials", 3, "--out", out),
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert ": the disk is full: free some space and run the same command again" in done.stderr
    assert "is the space's range too wide" not in done.stderr
    assert len(journal(out).get_trials()) == 1               # one trial, not 10


@pytest.fixture
def silent_server():
    """The port of a server on 127.0.0.1 that takes connections and never answers (for
    20 CONNECT_TIMEOUTs, then it closes them and stops)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    end = time.monotonic() + 20 * study_storage.CONNECT_TIMEOUT

    def serve():
        taken = []
        while time.monotonic() < end:
            with contextlib.suppress(TimeoutError):
                taken.append(listener.accept()[0])
        for connection in taken:
            connection.close()
        listener.close()
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    end = 0
    thread.join()


def test_a_postgresql_server_that_never_answers_is_given_up_on_after_a_while(
        tmp_path, capsys, monkeypatch, silent_server):
    monkeypatch.setattr(study_storage, "CONNECT_TIMEOUT", 2)     # libpq's least: not 10 s a run
    url = f"postgresql://ncae@127.0.0.1:{silent_server}/postgres"
    start = time.monotonic()
    code = tune.main([*files(tmp_path, 2), "--storage", url, "--out", str(tmp_path / "o")])
    seconds = time.monotonic() - start
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err
    waiting = f"(waiting up to {study_storage.CONNECT_TIMEOUT} s for its answer)"
    assert f"connecting to {url} {waiting}" in out
    assert f"error: --storage {url}: cannot open it (" in err and "timeout" in err
    assert study_storage.CONNECT_TIMEOUT <= seconds < study_storage.CONNECT_TIMEOUT + 5


def test_a_storage_that_does_not_open_leaves_out_unbound(tmp_path, capsys):
    with socket.socket() as s:                                   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "o"
    flags = [*files(tmp_path, 2), "--trials", "1", "--out", str(out)]
    refused(tune.main, [*flags, "--storage", f"postgresql://ncae@127.0.0.1:{port}/postgres"],
            capsys, "cannot open it")
    assert not out.exists()
    assert tune.main(flags) == 0                       # the default storage, in the same --out


def test_a_postgres_url_is_refused_naming_postgresql(tmp_path, capsys):
    """libpq's postgres:// is no SQLAlchemy dialect (before: "cannot open it (Can't load
    plugin: sqlalchemy.dialects:postgres)"); the line gives the URL to use, without its
    password, before any data is read."""
    refused(tune.main, [*files(tmp_path, 1), "--storage", "postgres://ncae:secret@db:5433/tune",
                        "--out", str(tmp_path / "o")], capsys,
            "--storage postgres://ncae:***@db:5433/tune: PostgreSQL is postgresql:// to "
            "SQLAlchemy: --storage postgresql://ncae:***@db:5433/tune")
    assert not (tmp_path / "o").exists()


def test_a_recipe_value_outside_the_space_is_noted(tmp_path, capsys):
    """Before: the first trial drew hidden and dropout where the recipe's values (16, 0.7)
    are outside the space, and the docs said the best is never behind the recipe."""
    flags = files(tmp_path, 1)
    (tmp_path / "recipe.toml").write_text("epochs = 1\nhidden = [16]\ndropout = 0.7\n")
    assert tune.main([*flags, "--trials", "1", "--out", str(tmp_path / "study")]) == 0
    assert ("note: the recipe's hidden, dropout outside the space: the first trial draws them, "
            "so the best may fall behind the recipe on validation") in capsys.readouterr().out
    trial = journal(tmp_path / "study").trials[0]
    assert trial.params["hidden"] in ("4", "8,4") and trial.params["dropout"] <= 0.6


def test_without_a_recipe_the_defaults_outside_the_space_are_noted(tmp_path, capsys):
    """No --config: the first trial is the defaults' (hidden 500,500 outside the space's), and
    the note says so (before: "note: the recipe's hidden outside the space", of no recipe)."""
    flags = files(tmp_path, 1)
    at = flags.index("--config")
    del flags[at:at + 2]
    assert tune.main([*flags, "--trials", "1", "--out", str(tmp_path / "study")]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "outside" in line]
    assert said == ["note: the defaults' hidden outside the space: the first trial draws them, "
                    "so the best may fall behind the defaults on validation"], said


# what the package's implicit space leaves out of each shipped recipe's study: the settings
# the recipe's variant never reads (uniform weighting's c0 and omega) or holds at one value
# (an unaugmented variant's augment_eps)
LEFT_OUT = {"ml-100k-implicit-ncae-minus": {"c0", "omega", "augment_eps"},
            "ml-100k-implicit-ncae": {"augment_eps"}}


@pytest.mark.parametrize("recipe", sorted(p.stem for p in (REPO / "recipes").glob("*.toml")))
def test_the_default_space_searches_every_shipped_recipe(recipe):
    """Every shipped recipe has a study of the package's space of its feedback (before, NCAE-'s
    was refused: "c0: 64.0: c0 is for popularity weighting", and NCAE's: "augment_eps: 0.05:
    variant NCAE has no augmentation"): the settings the recipe leaves unread or holds at one
    value are left out of it, the others searched."""
    settings = read_recipe(REPO / "recipes" / f"{recipe}.toml")
    base = {**settings, "feedback": settings.get("feedback", DEFAULTS.feedback)}
    tables = space.read_tables(space.default(base["feedback"], loss=base.get("loss",
                                                                             DEFAULTS.loss)))
    left_out = space.left_out(tables, base)
    assert set(left_out) == LEFT_OUT.get(recipe, set())
    assert all(left_out[name] == ("variant",) for name in left_out)
    dims = space.dimensions({k: v for k, v in tables.items() if k not in left_out}, base)
    assert {d.name for d in dims} == set(tables) - LEFT_OUT.get(recipe, set())


def test_the_default_space_leaves_out_what_the_recipe_never_reads(tmp_path, capsys):
    """tune --config of an NCAE- recipe, without --space: the package's space less c0, omega
    and augment_eps, said in a line, every trial complete; a --space of one's own naming c0
    over it is still refused."""
    (tmp_path / "recipe.toml").write_text('feedback = "implicit"\nvariant = "NCAE-"\n'
                                          "epochs = 2\npatience = 0\nbatch_size = 16\n")
    flags = ["--dataset", undated(tmp_path), "--config", tmp_path / "recipe.toml", "--device",
             "cpu", "--pruner", "none", "--trials", 2]
    assert tune.main([*map(str, flags), "--out", str(tmp_path / "o")]) == 0
    assert ("c0, omega, augment_eps: not searched (the recipe's variant NCAE- leaves them "
            "unread or holds them at one value)") in capsys.readouterr().out
    trials = journal(tmp_path / "o").get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    searched = (set(space.read_tables(space.default("implicit"))) - set(space.TIMED)
                - {"c0", "omega", "augment_eps"})
    assert all(set(t.params) == searched for t in trials)
    (tmp_path / "space.toml").write_text("[c0]\nlow = 100.0\nhigh = 800.0\n")
    refused(tune.main, [*map(str, flags), "--space", str(tmp_path / "space.toml"), "--out",
                        str(tmp_path / "u")], capsys,
            f"--space {tmp_path / 'space.toml'}: c0: 100.0: c0 is for popularity weighting")


@pytest.mark.parametrize("recipe, first", [("", "NCAE+"), ("augment_eps = 0.0\n", "NCAE")])
def test_a_recipe_without_a_variant_starts_at_the_variant_it_trains_as(tmp_path, capsys,
                                                                       recipe, first):
    """A space over variant and a recipe that names none: the first trial is the variant its
    weighting and augmentation make (before: "note: the recipe's variant outside the space",
    and the first trial drew one)."""
    out = tuned_implicit(tmp_path, '[variant]\nchoices = ["NCAE", "NCAE+"]\n', 1, recipe)
    assert "outside the space" not in capsys.readouterr().out
    assert journal(out).get_trials()[0].params == {"variant": first}


# `python -m ncae_cuda.tune ARGS...` with its setup paused once it has said so
PAUSED_IN_SETUP = """
import runpy, signal, sys
from ncae_cuda.commands import tune


def paused(*args):
    print("setting up", flush=True)
    signal.pause()


tune.setup = paused
runpy.run_module("ncae_cuda.tune", run_name="__main__", alter_sys=True)
"""


def test_a_worker_given_the_pools_sigterm_in_its_setup_ends_without_a_line(tmp_path):
    """A worker (its own session: a terminal's Ctrl-C reaches only the command, which hands
    it on as SIGTERM) stopped while it sets up: exit 143, and no line, the command's to say.
    Before, SIGTERM killed it (exit -15) by its default action."""
    script = tmp_path / "paused.py"
    script.write_text(PAUSED_IN_SETUP)
    worker = subprocess.Popen(
        [sys.executable, str(script), *files(tmp_path, 1), "--trials", "1", "--out",
         str(tmp_path / "o"), "--started", "0.0", "--worker", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        assert worker.stdout.readline() == "setting up\n", worker.stderr.read()
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert (worker.returncode, stderr) == (128 + signal.SIGTERM, "")


def test_a_ctrl_c_as_the_command_sets_the_study_up_ends_it_in_a_line(tmp_path, monkeypatch,
                                                                     capsys):
    """A Ctrl-C while the command sets the study up (the data read, before any worker starts):
    exit 130 and a line saying the same command continues the study; before, a
    KeyboardInterrupt traceback from within the data's reader."""
    signalled(monkeypatch, tune, "setup")
    flags = [*files(tmp_path, 2), "--trials", "2", "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as ended:
        uncut(lambda flags: cli.exit_with(lambda: tune.main(flags)), flags)
    assert ended.value.code == 130
    assert capsys.readouterr().err == "\ninterrupted: the same command continues the study\n"


def said_after(value, budget=None):
    """The line a worker says at the end of trial 3 of 8, which scored `value`, the clock
    stopped: trials 0-2 finished (ndcg@10 0.30, 0.50, 0.50, in 10, 20 and 30 s: 20 s on
    average), trial 4 running in another worker, the command started 65 s before."""
    study = optuna.create_study(direction="maximize")
    for score, seconds in ((0.30, 10), (0.50, 20), (0.50, 30)):
        trial = optuna.trial.create_trial(value=score)
        trial.datetime_start = trial.datetime_complete - datetime.timedelta(seconds=seconds)
        study.add_trial(trial)
    current, _ = study.ask(), study.ask()
    spec = types.SimpleNamespace(trials=8, budget=budget, started=1000.0 - 65, worker=1)
    found = types.SimpleNamespace(metric="ndcg@10", higher=True, dimensions=[], step="epoch")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))
        tuning._said(spec, current, "ndcg@10 0.5000", 990.0, study, found, True, value)
    return printed.getvalue()


@pytest.mark.parametrize("value, budget, best, left", [
    # the best is the first trial of equal scores (Optuna's best_trial); 3 trials of 8 to
    # start (4 finished, 1 running) at 20 s each over the 2 workers: 30 s
    (0.5, None, "0.5000 (trial 1)", "about 30 s left"),
    (0.7, None, "0.7000 (trial 3)", "about 30 s left"),
    # a budget of 75 s, 65 of them gone: its 10 s are less than the trials' 30
    (0.5, 1.25, "0.5000 (trial 1)", "about 10 s left (--budget)"),
    (0.5, 1.0, "0.5000 (trial 1)", "--budget passed: no trial starts")])
def test_a_trials_line_says_the_best_trial_and_the_time_left(value, budget, best, left):
    assert said_after(value, budget) == (
        f"worker 1: trial 3 [] ndcg@10 0.5000 in 10.0 s | best ndcg@10 {best} | 4 of 8 "
        f"finished, 1 running | 1 min 05 s elapsed, {left}\n")


@pytest.mark.parametrize("metric, feedback, chosen", [
    (None, "explicit", ("rmse", False)), (None, "implicit", ("ndcg@50", True)),
    ("recall", "implicit", ("recall@50", True)), ("ndcg", "implicit", ("ndcg@50", True))])
def test_a_study_scores_by_its_figure_at_the_last_cutoff(metric, feedback, chosen):
    config = dataclasses.replace(DEFAULTS, feedback=feedback, cutoffs=(10, 50)).resolved()
    assert tuning.selection(metric, config) == chosen


def test_a_metric_of_an_explicit_study_is_refused_in_a_line():
    with pytest.raises(tuning.SpecError, match="--metric recall: explicit feedback is scored "
                                               "by RMSE"):
        tuning.selection("recall", dataclasses.replace(DEFAULTS, feedback="explicit").resolved())


def test_a_worker_is_alive_while_its_lock_is_held_and_dead_without_it(tmp_path):
    """A running trial of a worker whose lock is free, or gone (its folder cleaned), is a dead
    worker's: census marks it failed, and the study does not wait on it for ever."""
    lock = tmp_path / "worker.lock"
    assert not tuning.alive(lock)                                   # no file
    held = rundir.lock(lock)
    assert tuning.alive(lock)
    held.close()
    assert not tuning.alive(lock)                                   # the file, free


@dataclasses.dataclass(frozen=True)
class _WorkerSpec:
    """What a worker's loop (tuning._work) reads of a TuneSpec."""
    out: Path
    trials: int
    started: float
    seed: int = 0
    budget: float | None = None


def worked(tmp_path, monkeypatch, fails):
    """A worker's loop over a study of 6 trials whose trial n fails where fails(n): the
    study's trials, or the TuneError that stopped it."""
    def scored(spec, found, study, trial, me, asking, outcome, compiling):
        asking.release()
        if fails(trial.number):
            outcome.append(f"trial {trial.number} failed")
            return math.nan                          # Optuna marks it failed
        return 1.0
    monkeypatch.setattr(tuning, "objective", scored)
    study = optuna.create_study()
    spec = _WorkerSpec(tmp_path, 6, time.monotonic())
    try:
        tuning._work(spec, None, study, types.SimpleNamespace(seconds=0.0))
    except tuning.TuneError as e:
        return e
    return [t.state for t in study.get_trials()]


def test_a_worker_stops_after_failures_in_a_row_not_in_all(tmp_path, monkeypatch):
    """Two trials of three failing (the space's range partly bad) is no reason to stop: 12 of
    the 18 trials fail, never 10 in a row; 10 failing in a row stops the worker, naming the
    last."""
    states = worked(tmp_path, monkeypatch, lambda n: n % 3 != 2)
    assert states == [TrialState.FAIL, TrialState.FAIL, TrialState.COMPLETE] * 6
    stopped = worked(tmp_path, monkeypatch, lambda n: True)
    assert str(stopped).startswith("10 trials in a row failed, the last: trial 9 failed (see "
                                   "their log.txt under ")
