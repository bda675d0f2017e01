"""Every experiment end to end in --quick form on synthetic data: its table, CSV and figure."""
import contextlib
import csv
import json
from pathlib import Path

import numpy as np
import pytest

from ncae_cuda.baselines.models import BASELINES
from ncae_cuda.commands import experiments
from ncae_cuda.commands.flags import trainer_run
from ncae_cuda.model.config import DEFAULTS
from ncae_cuda.runs import paper_tables, pool
from ncae_cuda.runs.spec import SpecError, resolved

FIGURES = {"pretraining", "augmentation", "factors", "topm"}
RECIPES = Path(__file__).resolve().parents[1] / "recipes"
# what an experiment needs beside the shared flags; augmentation over one p: its table and grid
# figure keep their two eps (rows, points), a second p column ran the same cells again
OWN_FLAGS = {"recipes": ["--recipes", str(RECIPES / "ml-100k-implicit-ncae.toml"),
                         str(RECIPES / "ml-100k-implicit-ncae-minus.toml")],
             "augmentation": ["--ps", "0.5"]}


# factors draws iALS and BPR beside NCAE where the [baselines] extra is installed
BESIDE_BASELINES = pytest.mark.extra("baselines", optional=True)
# one experiment repeated (a table's spread over seeds, seed 1's runs): the same code aggregates
# every experiment's, which each run once
REPEATED = "clusters"


@pytest.mark.parametrize("name", [pytest.param(name, marks=BESIDE_BASELINES)
                                  if name == "factors" else name
                                  for name in paper_tables.EXPERIMENTS])
def test_experiment_runs_and_writes_its_outputs(tmp_path, name):
    repeats = 2 if name == REPEATED else 1
    code = experiments.main([name, "--dataset", "synthetic-tiny", "--quick", "--repeats",
                             str(repeats), "--jobs", "2", *OWN_FLAGS.get(name, []), "--out",
                             str(tmp_path), "--", "--batch-size", "16"])
    assert code == 0
    table = (tmp_path / f"{name}.md").read_text()
    assert table.startswith(f"# {name}") and ("±" in table) == (repeats == 2)
    with open(tmp_path / f"{name}.csv") as f:
        rows = list(csv.reader(f))
    assert len(rows) >= 2 and all(len(row) == len(rows[0]) for row in rows)
    values = np.array([float(v) for row in rows[1:] for v in row if _is_number(v)])
    assert np.isfinite(values).any()
    assert (tmp_path / f"{name}.png").exists() == (name in FIGURES)
    seeds = {folder.name.rsplit("-seed", 1)[1] for folder in (tmp_path / "runs" / name).iterdir()
             if folder.is_dir()}
    assert seeds == {str(seed) for seed in range(repeats)}


def test_variant_flags_reach_only_their_variant(tmp_path):
    code = experiments.main(["clusters", "--dataset", "synthetic-tiny", "--quick", "--jobs", "2",
                             "--out", str(tmp_path), "--variant-flags",
                             "NCAE+=--augment-eps 0.3 --augment-p 0.5"])
    assert code == 0
    plus = (tmp_path / "runs" / "clusters" / "NCAE+-seed0" / "log.txt").read_text()
    plain = (tmp_path / "runs" / "clusters" / "NCAE-seed0" / "log.txt").read_text()
    assert "augmentation:" in plus and "augmentation:" not in plain
    # one seed has no spread: before, every cell said "± 0.0000"
    table = (tmp_path / "clusters.md").read_text()
    assert "±" not in table and "| 0." in table
    with open(tmp_path / "clusters.csv") as f:
        header, first = list(csv.reader(f))[:2]
    assert [v for k, v in zip(header, first) if k.endswith(" std")] == ["", "", "", ""]


def test_repeats_give_mean_and_spread():
    results = [{"test": {"rmse": 1.0}}, {"test": {"rmse": 3.0}}]
    assert paper_tables.stat(results, lambda m: m["test"]["rmse"]) == (2.0, np.sqrt(2.0))
    assert paper_tables.stat(results[:1], lambda m: m["test"]["rmse"]) == (1.0, None)


def test_a_failing_cell_is_reported(tmp_path, capsys):
    code = experiments.main(["robustness", "--dataset", "synthetic-tiny", "--quick",
                             "--out", str(tmp_path), "--", "--rating-scale", "4,5"])
    # a scale the data's ratings fall outside: the flags resolve, the run fails on the data
    assert code == 2 and "failed" in capsys.readouterr().err


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_an_out_that_cannot_be_written_is_named(tmp_path, capsys):
    # Before: FileExistsError and NotADirectoryError tracebacks.
    file = tmp_path / "file"
    file.write_text("x")
    for out, message in ((file, f"--out {file}: a file, not a folder"),
                         (file / "x", f"error: {file / 'x'}: cannot write it (Not a directory)")):
        try:
            code = experiments.main(["robustness", "--quick", "--out", str(out)])
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err, err


def test_help_lists_each_experiment_in_whole_sentences(capsys):
    with pytest.raises(SystemExit):
        experiments.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name, f in paper_tables.EXPERIMENTS.items():
        # before, only the docstring's first line: "... with (*) S+U+S pre-training,"
        assert f"{name}: {' '.join(f.__doc__.split(chr(10) * 2)[0].split())}" in out


def test_a_table_reads_the_rmse_over_every_test_entry_where_cold_ones_were_apart():
    """u1..u5 hold their cold test entries apart: the tables compare with published figures,
    which score every entry (all_test), and read test's figures where there is no such part."""
    pooled = {"test": {"rmse": 0.9, "entries": 3}, "all_test": {"rmse": 1.0, "entries": 4}}
    assert paper_tables._test("rmse")(pooled) == 1.0
    assert paper_tables._test("hr@10")({"test": {"hr@10": 0.5}}) == 0.5


@pytest.mark.parametrize("given", [["--", "--cutoffs=5,20"],
                                   ["--variant-flags", "NCAE=--cutoffs 5,20",
                                    "--variant-flags", "NCAE+=--cutoffs 5,20"]])
def test_the_table_reports_the_cutoff_the_runs_scored_at(tmp_path, given):
    # Before: the M was read from "--cutoffs M" after -- alone, so the table asked the runs
    # for hr@100 and stopped on a KeyError once every run had finished.
    code = experiments.main(["clusters", "--dataset", "synthetic-tiny", "--quick", "--out",
                             str(tmp_path), *given])
    assert code == 0
    assert "NCAE ndcg@20" in (tmp_path / "clusters.md").read_text()


def test_variants_scored_at_other_cutoffs_are_refused_before_any_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        experiments.main(["clusters", "--dataset", "synthetic-tiny", "--quick", "--out",
                          str(tmp_path), "--variant-flags", "NCAE+=--cutoffs 5,20"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "NCAE 100, NCAE+ 20" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_topm_runs_choose_their_epoch_at_their_own_last_cutoff(tmp_path):
    # Before: topm's --cutoffs 50,100 came after the runs' own, so they chose their epoch by
    # NDCG@100, not NDCG@20 as given after --, and unlike the other tables' runs.
    code = experiments.main(["topm", "--dataset", "synthetic-tiny", "--quick", "--ms", "50,100",
                             "--baselines", "none", "--out", str(tmp_path), "--",
                             "--cutoffs", "10,20"])
    assert code == 0
    run = json.loads((tmp_path / "runs" / "topm" / "NCAE-seed0" / "metrics.json").read_text())
    assert run["config"]["cutoffs"][-1] == 20 and {50, 100} <= set(run["config"]["cutoffs"])
    with open(tmp_path / "topm.csv") as f:
        assert [row[0] for row in csv.reader(f)] == ["M", "50", "100"]


def test_a_table_says_what_its_cells_are_over(tmp_path):
    # Before: "1.4672 ± 0.1252" and nothing in the table saying over which runs, or which
    # standard deviation (the sample's, ddof 1: test_repeats_give_mean_and_spread).
    rows = [{"K": 16, "SINGLE": paper_tables.stat([{"x": 1.0}, {"x": 3.0}], lambda m: m["x"])}]
    experiments.write(tmp_path, "configurations", rows, None, repeats=2)
    assert ("the mean over seeds 0..1 (--repeats 2), ± their standard deviation (ddof 1)"
            in (tmp_path / "configurations.md").read_text())
    experiments.write(tmp_path, "configurations", rows[:1], None, repeats=1)
    assert "one run of seed 0 (--repeats 1)" in (tmp_path / "configurations.md").read_text()


def test_the_baselines_help_names_every_baseline_it_takes(capsys):
    # Before: "these of ease, ials, bpr", though item-knn and rp3beta ran beside NCAE too.
    with pytest.raises(SystemExit):
        experiments.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in (key for key in BASELINES if key != "pop"):
        assert name in out.split("--baselines M1,M2,...|none", 2)[2].split("--ks")[0]


def test_augmentation_rows_name_the_eps_they_ran(tmp_path):
    # Before: eps 1e-05 printed as "0.0000", a second row that read as eps 0.
    code = experiments.main(["augmentation", "--dataset", "synthetic-tiny", "--quick", "--eps",
                             "0,0.00001", "--ps", "0.5", "--out", str(tmp_path)])
    assert code == 0
    table = (tmp_path / "augmentation.md").read_text()
    assert [line.split("|")[1].strip() for line in table.splitlines()[-2:]] == ["0", "1e-05"]


def test_augmentation_runs_eps_0_once_for_every_p():
    """eps 0 is no augmentation, which p does not change: one run, not one a p (before, three
    fits of the same settings at the default --ps)."""
    args = experiments.build_parser().parse_args(
        ["augmentation", "--dataset", "synthetic-tiny", "--quick", "--eps", "0,0.01", "--ps",
         "0.2,0.5"])
    plan = paper_tables.ExperimentRuns(args, [], trainer_run)
    paper_tables.EXPERIMENTS["augmentation"](plan)
    settings = {run.name: resolved(*trainer_run(list(run.flags)))[1] for run in plan.runs}
    grid = {name: (c.augment_eps, c.augment_p) for name, c in settings.items()
            if not name.startswith("curve-")}
    assert grid == {"eps0-seed0": (0.0, DEFAULTS.augment_p), "eps0.01-p0.2-seed0": (0.01, 0.2),
                    "eps0.01-p0.5-seed0": (0.01, 0.5)}, grid


@pytest.mark.parametrize("given, said", [(["configurations", "--ks", "0"], "K0-SINGLE-BP-seed0"),
                                         (["robustness", "--ratios", "2"], "D2-seed0")])
def test_a_grid_value_no_run_takes_is_refused_before_any_run(tmp_path, capsys, given, said):
    # Before: the pool started, the run failed ("the same command reruns the failed runs"),
    # and its listing then refused the corrected command but with --overwrite.
    with pytest.raises(SystemExit) as e:
        experiments.main([*given, "--dataset", "synthetic-tiny", "--quick", "--out",
                          str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and said in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name, variant", [("configurations", "NCAE"), ("augmentation", "NCAE-"),
                                           ("clusters", "NCAE-")])
def test_variant_flags_for_a_variant_the_experiment_does_not_run_are_refused(
        tmp_path, capsys, name, variant):
    # Before: accepted, and reached no run (configurations runs explicit feedback, no variant;
    # augmentation runs NCAE+ alone; clusters NCAE and NCAE+).
    with pytest.raises(SystemExit) as e:
        experiments.main([name, "--dataset", "synthetic-tiny", "--quick", "--out", str(tmp_path),
                          "--variant-flags", f"{variant}=--lr 0.5"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"--variant-flags {variant}=" in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", list(paper_tables.EXPERIMENTS))
def test_quick_runs_are_tiny_in_every_experiment(name):
    # Before: --quick's "tiny widths" were configurations', pretraining's and factors' alone;
    # the others' runs trained the default 500,500 (a recipe's widths in recipes).
    args = experiments.build_parser().parse_args(
        [name, "--dataset", "synthetic-tiny", "--quick", "--baselines", "none",
         *OWN_FLAGS.get(name, [])])
    plan = paper_tables.ExperimentRuns(args, [], trainer_run)
    paper_tables.EXPERIMENTS[name](plan)
    widths = [trainer_run(list(run.flags))[1].hidden for run in plan.runs]
    assert widths and all(max(hidden) <= 16 for hidden in widths), widths


def test_recipes_of_one_epoch_show_no_seconds_per_epoch(tmp_path):
    """A run of one epoch times none after start-up (metrics.json: seconds_per_epoch null):
    its cell is empty (before: "nan")."""
    assert experiments.main(["recipes", "--dataset", "synthetic-tiny", "--quick", "--jobs", "1",
                             *OWN_FLAGS["recipes"][:2], "--out", str(tmp_path), "--",
                             "--epochs", "1", "--no-refit"]) == 0
    with open(tmp_path / "recipes.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["recipe"] for r in rows] == [OWN_FLAGS["recipes"][1], "POP"]
    assert all(r["s/epoch"] == "" for r in rows)
    assert "nan" not in (tmp_path / "recipes.md").read_text()


def test_a_column_of_figures_is_two_whichever_row_comes_first(tmp_path):
    """Before, the first row decided: a blank first cell made the column one, and a later
    (mean, std) row wrote two values under it, every column after shifted."""
    rows = [{"recipe": "a", "s/epoch": "", "rmse": (0.9, 0.01)},
            {"recipe": "b", "s/epoch": (2.5, None), "rmse": (0.8, 0.02)}]
    experiments.write(tmp_path, "recipes", rows, None, 2)
    with open(tmp_path / "recipes.csv", newline="") as f:
        assert list(csv.reader(f)) == [
            ["recipe", "s/epoch mean", "s/epoch std", "rmse mean", "rmse std"],
            ["a", "", "", "0.9", "0.01"], ["b", "2.5", "", "0.8", "0.02"]]


@pytest.mark.parametrize("name, given, said", [
    ("factors", ["--baselines", "none", "--", "--hidden", "64"],
     "-- --hidden: factors sets each run's own (K8-NCAE--seed0: --hidden 8)"),
    ("factors", ["--baselines", "none", "--", "--hidden=64"], "--hidden: factors sets"),
    ("pretraining", ["--", "--valid-ratio", "0.1"], "--valid-ratio: pretraining sets"),
    ("augmentation", ["--variant-flags", "NCAE+=--augment-eps 0.3"],
     "--variant-flags NCAE+=--augment-eps: augmentation sets"),
    ("clusters", ["--repeats", "2", "--", "--seed", "1"], "--seed: clusters sets"),
    # the command's own, for each run (before: the runs read -- --dataset's, the tables named
    # the command's; the pool's --out beat the user's)
    ("clusters", ["--", "--dataset", "synthetic"], "--dataset: the experiments command gives"),
    ("clusters", ["--", "--out", "elsewhere"], "--out: the experiments command gives"),
    ("clusters", ["--variant-flags", "NCAE=--resume"], "--resume: the experiments command")])
def test_a_flag_a_cell_sets_itself_is_refused_before_any_run(tmp_path, capsys, name, given,
                                                              said):
    # Before: accepted, and each run's command had the cell's own after it, which argparse
    # took (runs.json: "... --hidden 64 --feedback implicit --variant NCAE- --hidden 8 ...").
    with pytest.raises(SystemExit) as e:
        experiments.main([name, "--dataset", "synthetic-tiny", "--quick", *OWN_FLAGS.get(name, []),
                          "--out", str(tmp_path), *given])
    err = capsys.readouterr().err
    assert e.value.code == 2 and said in err and "leave it out" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", list(paper_tables.EXPERIMENTS))
def test_a_flag_no_cell_sets_reaches_every_run(tmp_path, name):
    # the same value a cell sets passes too: pretraining's runs take --valid-ratio 0 themselves
    given = ["--lr", "0.005", "--cutoffs=5,20",
             *["--valid-ratio", "0"] * (name == "pretraining"),
             *["--patience", "7"] * (name == "augmentation")]     # its grid's; curves take 0
    args = experiments.build_parser().parse_args(
        [name, "--dataset", "synthetic-tiny", "--quick", "--baselines", "none",
         *OWN_FLAGS.get(name, [])])
    plan = paper_tables.ExperimentRuns(args, given, trainer_run)
    paper_tables.EXPERIMENTS[name](plan)
    assert experiments.overridden(plan, experiments.trainer_lines(plan)) is None
    configs = [trainer_run(list(run.flags))[1] for run in plan.runs]
    assert configs and all(c.lr == 0.005 and c.cutoffs[-1] == 20 for c in configs)


def test_a_recipe_setting_a_cell_sets_itself_is_named_with_what_won(tmp_path, capsys):
    """-- --config RECIPE: where a cell sets a recipe's setting itself (configurations: the
    feedback, the width), the line names the setting and the value each run takes (before,
    nothing said it: the cells' flags silently beat the recipe's); one the runs take as it
    is (lr) and one --quick sets for every run (the width) are not named."""
    recipe = tmp_path / "mine.toml"
    recipe.write_text('feedback = "implicit"\nhidden = [12]\nlr = 0.005\n')
    out = tmp_path / "exp"
    experiments.main(["configurations", "--dataset", "synthetic-tiny", "--quick", "--jobs", "2",
                      "--out", str(out), "--", "--config", str(recipe)])
    said = [line for line in capsys.readouterr().out.splitlines() if str(recipe) in line]
    assert said == [f"configurations: {recipe} sets feedback = \"implicit\", which its "
                    "cells set themselves: the runs take theirs (K16-SINGLE-BP-seed0: --feedback "
                    "explicit)"], said
    listing = json.loads((out / "runs" / "configurations" / "runs.json").read_text())["runs"]
    configs = [trainer_run(command.split()[1:])[1] for command in listing.values()]
    assert {(c.feedback, c.lr, c.hidden[0]) for c in configs} == {("explicit", 0.005, 16)}


@pytest.mark.parametrize("given, epochs", [([], 1), (["--pretrain-epochs", "2"], 2)])
def test_pretrain_epochs_reach_only_the_runs_that_pretrain(given, epochs):
    # before, --quick gave every run --pretrain-epochs 1, read by the S+U+S runs alone
    args = experiments.build_parser().parse_args(
        ["configurations", "--dataset", "synthetic-tiny", "--quick"])
    plan = paper_tables.ExperimentRuns(args, given, trainer_run)
    paper_tables.EXPERIMENTS["configurations"](plan)
    configs = [resolved(*trainer_run(list(run.flags)))[1] for run in plan.runs]
    assert {c.pretrain for c in configs} == {"BP", "S+U+S"}
    assert all(c.pretrain_epochs == (DEFAULTS.pretrain_epochs if c.pretrain == "BP" else epochs)
               for c in configs)


@pytest.mark.parametrize("name, given, message", [
    ("clusters", ["--pretrain-epochs", "2"], "-- --pretrain-epochs: no run of clusters "
     "pre-trains (give --pretrain with it): leave it out"),
    # pretraining's runs hold out no validation part (--valid-ratio 0): before, each run
    # started and failed on the user's --patience (before that, trained ignoring it)
    ("pretraining", ["--patience", "5"], "run BP-seed0: --patience 5: stops on the validation "
     "score, and --valid-ratio 0 holds out no validation part"),
    # before, each run started and failed: "error: based must be 'user' or 'item', not 'both'"
    ("robustness", ["--config", "recipes/ml-100k-explicit-both.toml"], "--data-ratio 0.4: "
     "keeps a share of each row's training entries, and based both blends an item- and a "
     "user-based NCAE, whose rows differ: give --based item or user"),
])
def test_a_flag_no_run_reads_is_refused_before_any_run(tmp_path, capsys, name, given, message):
    with pytest.raises(SystemExit) as e:
        experiments.main([name, "--dataset", "synthetic-tiny", "--quick", "--out",
                          str(tmp_path), "--", *given])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", ["factors", "topm", "robustness", "clusters"])
def test_every_table_spells_a_figure_as_metrics_json_does(name, monkeypatch):
    # before, factors and topm named a column "NCAE HR@100", robustness and clusters "POP
    # hr@100", the baselines' "EASE HR@100"
    args = experiments.build_parser().parse_args(
        [name, "--dataset", "synthetic-tiny", "--quick", "--baselines", "none"])
    plan = paper_tables.ExperimentRuns(args, [], trainer_run)
    table = paper_tables.EXPERIMENTS[name](plan)
    figures = {f"{figure}@{m}": 0.5 for figure in ("hr", "recall", "ndcg")
               for m in (10, 50, 100, 150, 200, 250)}
    result = {"test": {**figures, "clusters": [{"cluster": "1-6", "rows": 3, **figures}]},
              "pop": figures}
    monkeypatch.setattr(plan, "results", lambda cell, file="metrics.json": [result])
    rows, _ = table()
    baselines = paper_tables._baseline_cells([{"ease": {"name": "EASE", "test": figures}}], 100)
    columns = [column for column in [*rows[0], *baselines] if "@" in column]
    assert columns and all(column.split()[-1].partition("@")[0] in ("hr", "recall", "ndcg")
                           for column in columns), columns


RECIPE_FILES = sorted(RECIPES.glob("*.toml"))


@pytest.mark.parametrize("name", [name for name in paper_tables.EXPERIMENTS if name != "recipes"])
def test_every_experiment_runs_every_shipped_recipe(name):
    """-- --config RECIPE: a recipe is a whole, its settings a cell's flags leave unread or
    contradict left out of that cell's runs (before, refused: factors over
    ml-100k-implicit.toml "run K8-NCAE--seed0: --variant: NCAE- has no augmentation: leave
    augment_eps unset", configurations over it "--variant: is for implicit feedback",
    augmentation over ml-100k-explicit.toml "--output: is for explicit feedback")."""
    args = experiments.build_parser().parse_args(
        [name, "--dataset", "synthetic-tiny", "--quick", "--baselines", "none"])
    for path in RECIPE_FILES:
        plan = paper_tables.ExperimentRuns(args, ["--config", str(path)], trainer_run)
        paper_tables.EXPERIMENTS[name](plan)
        assert experiments.overridden(plan, experiments.trainer_lines(plan)) is None
        for run in plan.runs:
            spec, config = trainer_run(list(run.flags))
            # but a share D < 1 of a blend's rows, which are of two kinds: refused before any
            # run (test_user_errors has the line)
            blend_share = config.based == "both" and spec.data.data_ratio < 1
            with pytest.raises(SpecError) if blend_share else contextlib.nullcontext():
                resolved(spec, config)


def test_a_variant_cell_leaves_out_the_recipe_settings_it_does_not_read(tmp_path, capsys,
                                                                       monkeypatch):
    """factors over an NCAE+ recipe: NCAE- runs without its augmentation, c0 and omega (uniform
    weighting), NCAE without its augmentation, NCAE+ with all; a line for each variant says
    so before the runs."""
    recipe = tmp_path / "plus.toml"
    recipe.write_text('feedback = "implicit"\nvariant = "NCAE+"\nc0 = 100.0\nomega = 0.3\n'
                      'augment_eps = 0.02\nlr = 0.005\n')
    planned = []                                        # nothing run: the runs planned only
    monkeypatch.setattr(pool, "run_share", lambda runs, args: planned.append(runs.listing()))
    assert experiments.main(["factors", "--dataset", "synthetic-tiny", "--quick", "--factor-ks",
                             "8", "--baselines", "none", "--out", str(tmp_path / "exp"), "--",
                             "--config", str(recipe)]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if str(recipe) in line]
    assert said == [
        f"factors: {recipe} sets variant = \"NCAE+\", which its cells set themselves: the runs "
        "take theirs (K8-NCAE--seed0: --variant NCAE-)",
        f"factors: {recipe} sets c0 = 100.0, omega = 0.3, augment_eps = 0.02, which --variant "
        "NCAE- leaves unread or contradicts: left out of the runs of those cells (K8-NCAE--seed0)",
        f"factors: {recipe} sets augment_eps = 0.02, which --variant NCAE leaves unread or "
        "contradicts: left out of the runs of those cells (K8-NCAE-seed0)"], said
    configs = {name: resolved(*trainer_run(command.split()[1:]))[1]
               for name, command in planned[0]["runs"].items()}
    taken = {name: (c.weighting, c.c0, c.omega, c.augment_eps, c.lr)
             for name, c in configs.items()}
    assert taken == {"K8-NCAE--seed0": ("uniform", DEFAULTS.c0, DEFAULTS.omega, 0.0, 0.005),
                     "K8-NCAE-seed0": ("popularity", 100.0, 0.3, 0.0, 0.005),
                     "K8-NCAE+-seed0": ("popularity", 100.0, 0.3, 0.02, 0.005)}, taken


def test_two_recipes_of_one_name_are_refused_before_any_run(tmp_path, capsys):
    """Each recipe's runs are in folders of its file's name: two recipes of one name (in other
    folders) would have runs of one folder, which the pool refuses as a bug (a traceback)."""
    for folder, epochs in (("a", 1), ("b", 2)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "explicit.toml").write_text(f"epochs = {epochs}\n")
    with pytest.raises(SystemExit) as e:
        experiments.main(["recipes", "--recipes", str(tmp_path / "a" / "explicit.toml"),
                          str(tmp_path / "b" / "explicit.toml"), "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    assert "--recipes: two recipes of one name; each names its runs' folders" in (
        capsys.readouterr().err)
    assert not (tmp_path / "out").exists()
