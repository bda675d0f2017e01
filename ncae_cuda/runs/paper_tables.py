"""The paper's experiments as runs and tables: each experiment lists its cells (a trainer run, or
a baselines run, per seed) before any is run, and reads their results into its table and
figures once they are done. python -m ncae_cuda.experiments runs them in a pool.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..baselines.models import BASELINES
from ..errors import SettingError
from ..model.config import VARIANT_SETTINGS, VARIANTS, Config, checked_cutoffs
from . import pool
from .spec import RunSpec, data_argv, flag_named, given_data


QUICK_WIDTH = 16                # --quick: the widest hidden layer of any run
PRETRAIN_EPOCHS = "--pretrain-epochs"       # given only to the runs that pre-train
MS = "50,100,150,200,250"       # --ms's default: topm's cutoffs M


def numbers(values: str) -> list:
    """'100,300' -> [100, 300]; '0.2,1e-3' -> floats. ValueError on anything else."""
    return [float(v) if "." in v or "e" in v else int(v) for v in values.split(",")]


class ExperimentRuns:
    """The runs of an experiment, listed before any is run: each cell once per seed
    (--repeats), with the shared flags (--quick's, those after --), then the cell's own.
    args: the experiments command's parsed flags; trainer_run(argv): the RunSpec and Config
    (as given) of a trainer's command line, the command's flags parsed where they are
    declared (ncae_cuda.commands.flags)."""

    def __init__(self, args, extra: list[str],
                 trainer_run: Callable[[list[str]], tuple[RunSpec, Config]]):
        self.args, self.extra, self.trainer_run = args, extra, trainer_run
        # every run's widths tiny; a cell's own --hidden, after these, at most QUICK_WIDTH too
        self.quick = ["--epochs", "2", PRETRAIN_EPOCHS, "1",
                      "--hidden", str(QUICK_WIDTH)] if args.quick else []
        self.folder = args.out / "runs" / args.name        # one folder an experiment: two never
        self.runs: list[pool.Run] = []                      # share their runs
        self.reads: set[str] = set()          # cell(reads=): the user's flags a cell builds on

    def grid(self, values: str, quick_take: int = 2) -> list:
        parsed = numbers(values)
        return parsed[:quick_take] if self.args.quick else parsed

    def width(self, k: int) -> int:
        return min(k, QUICK_WIDTH) if self.args.quick else k

    def variant_flags(self, name: str | None) -> list[str]:
        """--variant-flags' flags for the runs of the implicit variant `name` (None: none)."""
        own = [f.split("=", 1)[1].split() for f in self.args.variant_flags
               if f.split("=", 1)[0] == name]
        return [x for f in own for x in f]

    def variant(self, name: str) -> list[str]:
        """Flags of an implicit variant's runs: --variant NAME and its --variant-flags."""
        return ["--feedback", "implicit", "--variant", name, *self.variant_flags(name)]

    def cell(self, cell: str, flags: list[str], reads: tuple[str, ...] = ()) -> None:
        """A cell's training runs, one per seed, with `flags` after the shared ones. reads:
        the trainer's flags (argparse's destinations) whose value in `flags` the cell built
        from the user's (after --, in --variant-flags), which it overrides on purpose."""
        self.reads.update(reads)
        shared = [*self.quick, *self.extra]
        if self.trainer_run(["--dataset", self.args.dataset, *shared, *flags])[1].pretrain == "BP":
            # --quick's and the user's pre-training epochs are the runs' that pre-train: a run
            # without pre-training refuses them (configurations runs both kinds)
            shared = _without(shared, PRETRAIN_EPOCHS)
        for seed in range(self.args.repeats):
            self.runs.append(pool.Run(f"{cell}-seed{seed}", "ncae_cuda.train", (
                "--dataset", self.args.dataset, *shared, *flags, "--seed", str(seed))))

    def results(self, cell: str, file: str = "metrics.json") -> list[dict]:
        """`file` of the cell's run for each seed (a trainer's metrics.json by default)."""
        return [_read_result(self.folder / f"{cell}-seed{seed}", file)
                for seed in range(self.args.repeats)]

    def baselines(self, cell: str, flags: list[str], own: list[str] = ()) -> None:
        """A cell of --baselines' runs (python -m ncae_cuda.baselines), one per seed, each on
        the split the trainer's runs of `flags` make (their data flags), with `own` flags of
        its own; --quick: each grid's first values."""
        if not self.args.baselines:
            return
        trainer, config = self.trainer_run(["--dataset", self.args.dataset, *self.extra, *flags])
        firsts = [f"--grid={key}.{name}={values[0]}" for key in self.args.baselines
                  for name, values in BASELINES[key].grid.items()] if self.args.quick else []
        shared = (*data_argv(given_data(trainer.data)),
                  "--models", ",".join(self.args.baselines),
                  "--cutoffs", ",".join(map(str, config.cutoffs)), *firsts, *own)
        for seed in range(self.args.repeats):
            self.runs.append(pool.Run(f"{cell}-seed{seed}", "ncae_cuda.baselines",
                                      (*shared, "--seed", str(seed))))

    def baseline_results(self, cell: str) -> list[dict]:
        """Each seed's {model key: its figures} of a cell of baselines (empty without them)."""
        return ([r["models"] for r in self.results(cell, "baselines.json")]
                if self.args.baselines else [])


def _without(argv: list[str], flag: str) -> list[str]:
    """argv less each `flag` and its value (FLAG VALUE or FLAG=VALUE)."""
    kept, value_next = [], False
    for word in argv:
        if not value_next and word != flag and not word.startswith(f"{flag}="):
            kept.append(word)
        value_next = word == flag and not value_next
    return kept


def _read_result(folder: Path, file: str) -> dict:
    """A finished run's `file` (the pool builds tables of finished runs only); PoolError where
    it was since removed or damaged by hand, naming the run to rerun."""
    path = folder / file
    try:
        result = json.loads(path.read_text())
        said = None if isinstance(result, dict) else "not a run's results"
    except FileNotFoundError:
        said = "there is none"
    except ValueError as e:                 # JSONDecodeError, UnicodeDecodeError
        said = f"not JSON ({e})"
    except OSError as e:
        said = f"unreadable ({e.strerror or e})"
    if said is not None:
        # the run's manifest still says finished, so the pool would skip it again and again:
        # without its folder it is a new run
        raise pool.PoolError(f"{path}: {said}, though the run finished: remove {folder} and "
                             "run the same command again, which reruns it")
    return result


def stat(results: list[dict], value) -> tuple[float, float | None]:
    """(mean, standard deviation over seeds) of value(metrics) over the runs; one run has no
    standard deviation (None)."""
    values = np.array([value(r) for r in results], np.float64)
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else None


def _test(key):
    """A run's test figure `key`: over every test entry where the run scored its cold ones
    apart (all_test, what a data set's published figures score), else test's."""
    return lambda result: result.get("all_test", result["test"])[key]


def _pop(key):
    return lambda result: result["pop"][key]


def _ranking(m) -> tuple[str, str]:
    """The ranking figures a table shows at cutoff m, as metrics.json names them ('hr@100',
    'ndcg@100'): each table's columns are named by them (m 'M': over M), one spelling in
    every table."""
    return f"hr@{m}", f"ndcg@{m}"


def _baseline_cells(runs: list[dict], m: int, suffix: str = "") -> dict:
    """'<baseline> hr@<m or suffix>' and '... ndcg@...' of each baseline's test figures, the
    mean and spread over the seeds' runs (ExperimentRuns.baseline_results)."""
    cells = {}
    for key, first in (runs[0] if runs else {}).items():
        for figure, column in zip(_ranking(m), _ranking(suffix or m)):
            cells[f"{first['name']} {column}"] = stat(
                runs, lambda x, key=key, figure=figure: x[key]["test"][figure])
    return cells


# ---------------------------------------------------------------------------------------------
# the experiments: each lists its cells (ExperimentRuns.cell) and returns its table: a function
# of no arguments that reads the runs' results (ExperimentRuns.results) and returns (rows,
# figures or None)

def configurations(r: ExperimentRuns):
    """Test RMSE of 1 and 2 hidden layers of width K, without and with (*) S+U+S pre-training,
    over K (the paper's Table 4). Explicit feedback."""
    ks = [r.width(k) for k in r.grid(r.args.ks, 1)]
    models = {"SINGLE": ("{k}", "BP"), "SINGLE*": ("{k}", "S+U+S"),
              "DOUBLE": ("{k},{k}", "BP"), "DOUBLE*": ("{k},{k}", "S+U+S")}
    def cell(k, name):                   # a folder's name a shell takes as it is: no '*'
        return f"K{k}-{name.rstrip('*')}-{models[name][1]}"
    for k in ks:
        for name, (hidden, variant) in models.items():
            r.cell(cell(k, name), ["--feedback", "explicit", "--hidden", hidden.format(k=k),
                                   "--pretrain", variant])

    def table():
        return [{"K": k, **{name: stat(r.results(cell(k, name)), _test("rmse"))
                            for name in models}} for k in ks], None
    return table


def pretraining(r: ExperimentRuns):
    """Training and test RMSE after every epoch for each pre-training variant, 2 hidden layers
    of width --k, a fixed number of epochs (the paper's Fig. 5). Epoch 0: just pre-trained."""
    k = r.width(r.args.k)
    for variant in VARIANTS:
        r.cell(variant, ["--feedback", "explicit", "--hidden", f"{k},{k}", "--pretrain", variant,
                         "--valid-ratio", "0", "--curves"])

    def table():
        curves = {}
        for variant in VARIANTS:
            results = r.results(variant)
            epochs = [h["epoch"] for h in results[0]["history"]]
            curves[variant] = {part: [stat(results, lambda m, i=i, part=part:
                                           m["history"][i][part]["rmse"])[0]
                                      for i in range(len(epochs))]
                               for part in ("train", "test")}
            curves[variant]["epoch"] = epochs
        rows = []
        for epoch in sorted({e for c in curves.values() for e in c["epoch"]}):
            row = {"epoch": epoch}
            for variant, c in curves.items():
                at = c["epoch"].index(epoch) if epoch in c["epoch"] else None
                for part in ("train", "test"):
                    row[f"{variant} {part}"] = c[part][at] if at is not None else float("nan")
            rows.append(row)

        def figure(ax):
            for variant, c in curves.items():
                line, = ax.plot(c["epoch"], c["test"], label=f"{variant} test")
                ax.plot(c["epoch"], c["train"], "--", color=line.get_color(), alpha=0.6)
            ax.set(xlabel="epoch (0: after pre-training)", ylabel="RMSE (dashed: training)",
                   title="Pre-training variants")
            ax.legend(fontsize=7)
        return rows, [figure]
    return table


def augmentation(r: ExperimentRuns):
    """NDCG@M (the last --cutoffs M) of NCAE+ over augmentation's eps and p (eps 0: no
    augmentation), and HR@M after every epoch without and with augmentation (Fig. 6)."""
    m = _cutoff(r, ("NCAE+",))
    epss, ps = r.grid(r.args.eps), r.grid(r.args.ps)

    def grid_cell(eps, p) -> str:
        # eps 0 is no augmentation, which p does not change: one run, shown under every p
        # (before, one run a p, each the same fit)
        return "eps0" if eps == 0 else f"eps{eps}-p{p}"
    for eps in epss:
        for p in ps[:1] if eps == 0 else ps:
            r.cell(grid_cell(eps, p), [*r.variant("NCAE+"), "--augment-eps", str(eps),
                                       *([] if eps == 0 else ["--augment-p", str(p)])])
    curve_eps = {"NCAE": "0", "NCAE+": str(r.args.curve_eps)}
    for name, eps in curve_eps.items():
        # (every epoch's figures, none stopped early: a user's --patience is the grid's)
        r.cell(f"curve-{name}", [*r.variant("NCAE+"), "--augment-eps", eps, "--patience", "0",
                                 "--no-refit", "--curves"], reads=("patience",))

    def table():
        # eps as text, as short as it is: the table's 4 decimals printed 1e-05 as 0.0000
        rows = [{"eps": f"{eps:g}", **{f"p={p}": stat(r.results(grid_cell(eps, p)),
                                                      _test(f"ndcg@{m}")) for p in ps}}
                for eps in epss]
        curves = {}
        for name in curve_eps:
            results = r.results(f"curve-{name}")
            history = results[0]["history"]
            curves[name] = ([h["epoch"] for h in history],
                            [stat(results, lambda x, i=i: x["history"][i]["test"][f"hr@{m}"])[0]
                             for i in range(len(history))])

        def grid_figure(ax):
            for p in ps:
                ax.plot(epss, [row[f"p={p}"][0] for row in rows], "o-", label=f"p = {p}")
            ax.set(xlabel="eps", ylabel=f"NDCG@{m}", title="Augmentation's eps and p")
            ax.legend(fontsize=7)

        def curve_figure(ax):
            for name, (epochs, values) in curves.items():
                ax.plot(epochs, values, label=name)
            ax.set(xlabel="epoch", ylabel=f"HR@{m} (test)",
                   title=f"With and without augmentation (eps = {r.args.curve_eps})")
            ax.legend(fontsize=7)
        return rows, [grid_figure, curve_figure]
    return table


def factors(r: ExperimentRuns):
    """HR@M and NDCG@M of NCAE-, NCAE, NCAE+ and POP over the hidden width K (one layer)."""
    m = _cutoff(r, tuple(VARIANT_SETTINGS))
    ks = [r.width(k) for k in r.grid(r.args.factor_ks)]
    for k in ks:
        for variant in VARIANT_SETTINGS:
            r.cell(f"K{k}-{variant}", [*r.variant(variant), "--hidden", str(k)])
        # the factor models' K is the row's (a later --grid wins over --quick's)
        r.baselines(f"K{k}-baselines", r.variant("NCAE"),
                    [f"--grid={key}.factors={k}" for key in r.args.baselines
                     if "factors" in BASELINES[key].grid])

    def table():
        rows = []
        for k in ks:
            row = {"K": k}
            for variant in VARIANT_SETTINGS:
                results = r.results(f"K{k}-{variant}")
                row.update({f"{variant} {key}": stat(results, _test(key))
                            for key in _ranking(m)})
            row.update({f"POP {key}": stat(results, _pop(key)) for key in _ranking(m)})
            row.update(_baseline_cells(r.baseline_results(f"K{k}-baselines"), m))
            rows.append(row)
        return rows, [_lines(rows, "K", _ranking(m)[1], log_x=True)]
    return table


def topm(r: ExperimentRuns):
    """HR@M and NDCG@M for M in --ms, NCAE-, NCAE, NCAE+ and POP, each run's epoch chosen by
    NDCG at its last --cutoffs (100 by default), as in the other tables."""
    # the cutoffs' rule on the Ms given, said of --ms, its example --ms's default: the runs'
    # --cutoffs add their own M, and a refusal of those named a list the user never gave
    # (--ms 0,50: "got 0,50,100"), with --cutoffs' default, 10,100, for its example
    flag_named(checked_cutoffs, tuple(numbers(r.args.ms)), tuple(numbers(MS)), given_by="--ms")
    ms = r.grid(r.args.ms, 5)
    # each M scored, the runs' own last cutoff kept last: their epoch is chosen by NDCG at it,
    # as the other tables' runs choose theirs, and not at the largest M
    chosen_at = _cutoff(r, tuple(VARIANT_SETTINGS))
    cutoffs = ["--cutoffs", ",".join(map(str, [m for m in ms if m != chosen_at] + [chosen_at]))]
    for variant in VARIANT_SETTINGS:
        r.cell(variant, [*r.variant(variant), *cutoffs], reads=("cutoffs",))
    r.baselines("baselines", [*r.variant("NCAE"), *cutoffs])

    def table():
        results = {v: r.results(v) for v in VARIANT_SETTINGS}
        base = r.baseline_results("baselines")
        rows = []
        for m in ms:
            row = {"M": m}
            figures = dict(zip(_ranking("M"), _ranking(m)))     # {column: the figure's key}
            for variant, runs in results.items():
                row.update({f"{variant} {column}": stat(runs, _test(key))
                            for column, key in figures.items()})
            row.update({f"POP {column}": stat(runs, _pop(key))
                        for column, key in figures.items()})
            row.update(_baseline_cells(base, m, "M"))
            rows.append(row)
        return rows, [_lines(rows, "M", _ranking("M")[1])]
    return table


def robustness(r: ExperimentRuns):
    """The metrics when each row keeps only a share D of its training entries (Table 6)."""
    ratios = r.grid(r.args.ratios)
    m = _cutoff(r)
    for d in ratios:
        r.cell(f"D{d}", ["--data-ratio", str(d)])

    def table():
        rows = []
        for d in ratios:
            results = r.results(f"D{d}")
            test = results[0]["test"]
            row = {"D": d}
            for key in (k for k in test if k == "rmse" or "@" in k):
                row[key] = stat(results, _test(key))
            if "pop" in results[0]:
                row.update({f"POP {key}": stat(results, _pop(key)) for key in _ranking(m)})
            rows.append(row)
        return rows, None
    return table


def clusters(r: ExperimentRuns):
    """HR@M and NDCG@M of NCAE and NCAE+ for users grouped by their number of training
    entries (Table 3): augmentation is for the sparse users."""
    variants = ("NCAE", "NCAE+")
    m = _cutoff(r, variants)
    for variant in variants:
        r.cell(variant, r.variant(variant))

    def table():
        results = {v: r.results(v) for v in variants}
        rows = []
        for i, cluster in enumerate(results["NCAE"][0]["test"]["clusters"]):
            row = {"training entries": cluster["cluster"], "users": cluster["rows"]}
            for variant, runs in results.items():
                for key in _ranking(m):
                    row[f"{variant} {key}"] = stat(
                        runs, lambda x, key=key: x["test"]["clusters"][i][key])
            rows.append(row)
        return rows, None
    return table


def recipes(r: ExperimentRuns):
    """The test figures of each recipe (--recipes), on the data, split and seeds given, and its
    seconds per epoch (the median epoch of each run, the mean over seeds); implicit: and POP's.
    The README's result tables are these."""
    for path in r.args.recipes:
        r.cell(Path(path).stem, ["--config", path])

    def table():
        rows = []
        for path in r.args.recipes:
            results = r.results(Path(path).stem)
            keys = [k for k in results[0]["test"] if k == "rmse" or "@" in k]
            row = {"recipe": path, **{key: stat(results, _test(key)) for key in keys}}
            # (none where a run trained one epoch: its only one holds start-up, no figure)
            timed = all(x["seconds_per_epoch"] is not None for x in results)
            rows.append({**row, "s/epoch": stat(results, lambda x: x["seconds_per_epoch"])
                         if timed else ""})
        if "pop" in results[0]:
            rows.append({"recipe": "POP", **{key: stat(results, _pop(key)) for key in keys},
                         "s/epoch": ""})
        return rows, None
    return table


def _cutoff(r: ExperimentRuns, variants: tuple[str, ...] = ()) -> int:
    """The M the implicit tables report: the last of the runs' cutoffs (early stopping follows
    NDCG at it), as the runs of each implicit variant read them (after --, in a recipe, in
    --variant-flags); SettingError where the variants' runs end at different M."""
    cells = {variant: r.variant(variant) for variant in variants} or {"the runs": []}
    ms = {name: r.trainer_run(["--dataset", r.args.dataset, *r.extra, *flags])[1].cutoffs[-1]
          for name, flags in cells.items()}
    if len(set(ms.values())) > 1:
        raise SettingError("cutoffs", "of the runs end at different M ("
                           + ", ".join(f"{name} {m}" for name, m in ms.items())
                           + "): one table reports one M; give each variant the same last one")
    return next(iter(ms.values()))


def _lines(rows: list[dict], x: str, suffix: str, log_x: bool = False):
    """A figure of every '<model> <suffix>' column against column x."""
    def figure(ax):
        for key in rows[0]:
            if key.endswith(suffix):
                ax.plot([row[x] for row in rows], [row[key][0] for row in rows], "o-",
                        label=key.removesuffix(suffix).strip())
        if log_x:
            ax.set_xscale("log", base=2)
        ax.set(xlabel=x, ylabel=suffix)
        ax.legend(fontsize=7)
    return figure


EXPERIMENTS = {f.__name__: f for f in (configurations, pretraining, augmentation, factors, topm,
                                       robustness, clusters, recipes)}
