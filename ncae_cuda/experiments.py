"""The paper's experiments on any data set: tables (markdown, CSV) and figures (PNG).

    python -m ncae_cuda.experiments configurations --dataset ml-100k --data-dir ../shared/data \\
        --out runs/exp -- --split u1 --weight-decay 3e-3
    python -m ncae_cuda.experiments factors --dataset ml-100k --data-dir ../shared/data --repeats 3
    python -m ncae_cuda.experiments topm --jobs 2                        # two runs at once

    python -m ncae_cuda.experiments recipes --recipes recipes/ml-100k-explicit*.toml \\
        --dataset ml-100k --data-dir ../shared/data --repeats 3 -- --split u1

Experiments: configurations (Table 4), pretraining (Fig. 5), augmentation (Fig. 6), factors,
topm, robustness (Table 6), clusters (Table 3), and recipes (the README's result tables, from
recipes/*.toml); `--help` describes each. Every cell trains NCAE through python -m
ncae_cuda.train, once per seed (--repeats: seeds 0..R-1, mean and standard deviation), with the
trainer's defaults; flags after `--` go to every run, e.g. the settings chosen on validation,
and --variant-flags "NCAE-=--weight-decay 1e-2" to the runs of one implicit variant (each
variant's own chosen settings). Under --out: NAME.md, NAME.csv, NAME.png where the paper has a
figure, and runs/NAME/ with each run's folder (its log.txt and metrics.json).

An experiment lists its runs, runs them (ncae_cuda.pool: --jobs at once, each a process; the
same command again skips the finished runs and resumes the others; --task I --tasks T shares
them out; --collect writes the tables from the folders), then builds its tables from the runs'
metrics.json in the order it listed them, so that they are the same however the runs ran.
"""
from __future__ import annotations

import argparse
import csv
import inspect
import io
import json
import sys
import textwrap
from pathlib import Path

import numpy as np

from . import pool, runflags
from .baseline_models import BASELINES, beside_ncae, installed
from .cli import Parser
from .config import DEFAULTS, VARIANT_SETTINGS, read_recipe
from .datasets import DATA_ENV
from .metrics import format_table
from .modelfile import atomic_write
from .pretrain import VARIANTS

GRIDS = ("ks", "factor_ks", "eps", "ps", "ms", "ratios")       # the comma-separated flags
BESIDE = ("ease", "ials", "bpr")        # --baselines' default, of those installed


def _numbers(values: str) -> list:
    """'100,300' -> [100, 300]; '0.2,1e-3' -> floats. ValueError on anything else."""
    return [float(v) if "." in v or "e" in v else int(v) for v in values.split(",")]


class Plan:
    """The runs of an experiment, listed before any is run: each cell once per seed
    (--repeats), with the shared flags (--quick's, those after --), then the cell's own."""

    def __init__(self, args, extra: list[str]):
        self.args, self.extra = args, extra
        self.quick = ["--epochs", "2", "--pretrain-epochs", "1"] if args.quick else []
        self.folder = args.out / "runs" / args.name        # one folder an experiment: two never
        self.runs: list[pool.Run] = []                      # share their runs

    def grid(self, values: str, quick_take: int = 2) -> list:
        parsed = _numbers(values)
        return parsed[:quick_take] if self.args.quick else parsed

    def width(self, k: int) -> int:
        return min(k, 16) if self.args.quick else k

    def variant(self, name: str) -> list[str]:
        """Flags of an implicit variant's runs: --variant NAME and its --variant-flags."""
        own = [f.split("=", 1)[1].split() for f in self.args.variant_flags
               if f.split("=", 1)[0] == name]
        return ["--feedback", "implicit", "--variant", name, *(x for f in own for x in f)]

    def cell(self, cell: str, flags: list[str]) -> None:
        """A cell's training runs, one per seed, with `flags` after the shared ones."""
        for seed in range(self.args.repeats):
            self.runs.append(pool.Run(f"{cell}-seed{seed}", "ncae_cuda.train", (
                "--dataset", self.args.dataset, *self.quick, *self.extra, *flags,
                "--seed", str(seed))))

    def results(self, cell: str, file: str = "metrics.json") -> list[dict]:
        """`file` of the cell's run for each seed (a trainer's metrics.json by default)."""
        return [json.loads((self.folder / f"{cell}-seed{seed}" / file).read_text())
                for seed in range(self.args.repeats)]

    def baselines(self, cell: str, flags: list[str], own: list[str] = ()) -> None:
        """A cell of --baselines' runs (python -m ncae_cuda.baselines), one per seed, each on
        the split the trainer's runs of `flags` make (their data flags), with `own` flags of
        its own; --quick: each grid's first values."""
        if not self.args.baselines:
            return
        parser = runflags.build_parser()
        trainer = runflags.parse(parser, ["--dataset", self.args.dataset, *self.extra, *flags])
        firsts = [f"--grid={key}.{name}={values[0]}" for key in self.args.baselines
                  for name, values in BASELINES[key].grid.items()] if self.args.quick else []
        shared = (*runflags.data_argv(runflags.given_data(trainer)),
                  "--models", ",".join(self.args.baselines),
                  "--cutoffs", ",".join(map(str, trainer.cutoffs)), *firsts, *own)
        for seed in range(self.args.repeats):
            self.runs.append(pool.Run(f"{cell}-seed{seed}", "ncae_cuda.baselines",
                                      (*shared, "--seed", str(seed))))

    def baseline_results(self, cell: str) -> list[dict]:
        """Each seed's {model key: its figures} of a cell of baselines (empty without them)."""
        return ([r["models"] for r in self.results(cell, "baselines.json")]
                if self.args.baselines else [])


def stat(results: list[dict], value) -> tuple[float, float | None]:
    """(mean, standard deviation over seeds) of value(metrics) over the runs; one run has no
    standard deviation (None)."""
    values = np.array([value(r) for r in results], np.float64)
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else None


def _test(key):
    return lambda result: result["test"][key]


def _pop(key):
    return lambda result: result["pop"][key]


def _baseline_cells(runs: list[dict], m: int, suffix: str = "") -> dict:
    """'<baseline> HR@<m or suffix>' and '... NDCG@...' of each baseline's test figures, the
    mean and spread over the seeds' runs (Plan.baseline_results)."""
    cells = {}
    for key, first in (runs[0] if runs else {}).items():
        for figure in ("HR", "NDCG"):
            cells[f"{first['name']} {figure}@{suffix or m}"] = stat(
                runs, lambda x, key=key, name=f"{figure.lower()}@{m}": x[key]["test"][name])
    return cells


# ---------------------------------------------------------------------------------------------
# the experiments: each lists its cells (Plan.cell) and returns its table: a function of no
# arguments that reads the runs' results (Plan.results) and returns (rows, figures or None)

def configurations(r: Plan):
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


def pretraining(r: Plan):
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


def augmentation(r: Plan):
    """NDCG@M (the largest --cutoffs M) of NCAE+ over augmentation's eps and p (eps 0: no
    augmentation), and HR@M after every epoch without and with augmentation (Fig. 6)."""
    m = _cutoff(r)
    epss, ps = r.grid(r.args.eps), r.grid(r.args.ps)
    for eps in epss:
        for p in ps:
            r.cell(f"eps{eps}-p{p}", [*r.variant("NCAE+"), "--augment-eps", str(eps),
                                      "--augment-p", str(p)])
    curve_eps = {"NCAE": "0", "NCAE+": str(r.args.curve_eps)}
    for name, eps in curve_eps.items():
        r.cell(f"curve-{name}", [*r.variant("NCAE+"), "--augment-eps", eps, "--patience", "0",
                                 "--no-refit", "--curves"])

    def table():
        rows = [{"eps": eps, **{f"p={p}": stat(r.results(f"eps{eps}-p{p}"), _test(f"ndcg@{m}"))
                                for p in ps}} for eps in epss]
        curves = {}
        for name in curve_eps:
            results = r.results(f"curve-{name}")
            history = results[0]["history"]
            curves[name] = ([h["epoch"] for h in history],
                            [stat(results, lambda x, i=i: x["history"][i]["test"][f"hr@{m}"])[0]
                             for i in range(len(history))])

        def grid_figure(ax):
            for p in ps:
                ax.plot([row["eps"] for row in rows], [row[f"p={p}"][0] for row in rows], "o-",
                        label=f"p = {p}")
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


def factors(r: Plan):
    """HR@M and NDCG@M of NCAE-, NCAE, NCAE+ and POP over the hidden width K (one layer)."""
    m = _cutoff(r)
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
                row[f"{variant} HR@{m}"] = stat(results, _test(f"hr@{m}"))
                row[f"{variant} NDCG@{m}"] = stat(results, _test(f"ndcg@{m}"))
            row[f"POP HR@{m}"] = stat(results, _pop(f"hr@{m}"))
            row[f"POP NDCG@{m}"] = stat(results, _pop(f"ndcg@{m}"))
            row.update(_baseline_cells(r.baseline_results(f"K{k}-baselines"), m))
            rows.append(row)
        return rows, [_lines(rows, "K", f"NDCG@{m}", log_x=True)]
    return table


def topm(r: Plan):
    """HR@M and NDCG@M for M in --ms, NCAE-, NCAE, NCAE+ and POP."""
    ms = r.grid(r.args.ms, 5)
    cutoffs = ["--cutoffs", ",".join(map(str, ms))]
    for variant in VARIANT_SETTINGS:
        r.cell(variant, [*r.variant(variant), *cutoffs])
    r.baselines("baselines", [*r.variant("NCAE"), *cutoffs])

    def table():
        results = {v: r.results(v) for v in VARIANT_SETTINGS}
        base = r.baseline_results("baselines")
        rows = []
        for m in ms:
            row = {"M": m}
            for variant, runs in results.items():
                row[f"{variant} HR@M"] = stat(runs, _test(f"hr@{m}"))
                row[f"{variant} NDCG@M"] = stat(runs, _test(f"ndcg@{m}"))
            row["POP HR@M"] = stat(runs, _pop(f"hr@{m}"))
            row["POP NDCG@M"] = stat(runs, _pop(f"ndcg@{m}"))
            row.update(_baseline_cells(base, m, "M"))
            rows.append(row)
        return rows, [_lines(rows, "M", "NDCG@M")]
    return table


def robustness(r: Plan):
    """The metrics when each row keeps only a share D of its training entries (Table 6)."""
    ratios = r.grid(r.args.ratios)
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
                m = _cutoff(r)
                row[f"POP hr@{m}"] = stat(results, _pop(f"hr@{m}"))
                row[f"POP ndcg@{m}"] = stat(results, _pop(f"ndcg@{m}"))
            rows.append(row)
        return rows, None
    return table


def clusters(r: Plan):
    """HR@M and NDCG@M of NCAE and NCAE+ for users grouped by their number of training
    entries (Table 3): augmentation is for the sparse users."""
    m = _cutoff(r)
    variants = ("NCAE", "NCAE+")
    for variant in variants:
        r.cell(variant, r.variant(variant))

    def table():
        results = {v: r.results(v) for v in variants}
        rows = []
        for i, cluster in enumerate(results["NCAE"][0]["test"]["clusters"]):
            row = {"training entries": cluster["cluster"], "users": cluster["rows"]}
            for variant, runs in results.items():
                for key in (f"hr@{m}", f"ndcg@{m}"):
                    row[f"{variant} {key}"] = stat(
                        runs, lambda x, key=key: x["test"]["clusters"][i][key])
            rows.append(row)
        return rows, None
    return table


def recipes(r: Plan):
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
            rows.append({**row, "s/epoch": stat(results, lambda x: x["seconds_per_epoch"])})
        if "pop" in results[0]:
            rows.append({"recipe": "POP", **{key: stat(results, _pop(key)) for key in keys},
                         "s/epoch": ""})
        return rows, None
    return table


def _cutoff(r: Plan) -> int:
    """The M the implicit tables report: the trainer's last cutoff (100 by default)."""
    if "--cutoffs" in r.extra:
        return int(r.extra[r.extra.index("--cutoffs") + 1].split(",")[-1])
    return DEFAULTS.cutoffs[-1]


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


# ---------------------------------------------------------------------------------------------
# output

def write(out: Path, name: str, rows: list[dict], figures) -> list[Path]:
    """NAME.md and NAME.csv of the rows ((mean, std) cells as 'mean ± std' and two CSV
    columns), and NAME.png of the figures; returns the paths written."""
    def cell(value):
        if not isinstance(value, tuple):
            return value
        return f"{value[0]:.4f}" + ("" if value[1] is None else f" ± {value[1]:.4f}")
    shown = [{k: cell(v) for k, v in row.items()} for row in rows]
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    header = []
    for key, value in rows[0].items():
        header += [f"{key} mean", f"{key} std"] if isinstance(value, tuple) else [key]
    writer.writerow(header)
    paired = [isinstance(value, tuple) for value in rows[0].values()]
    for row in rows:                           # a blank under a (mean, std) column fills both
        writer.writerow([x for v, pair in zip(row.values(), paired)
                         for x in (v if isinstance(v, tuple) else (v, "") if pair else (v,))])
    files = {f"{name}.md": f"# {name}\n\n{inspect.cleandoc(EXPERIMENTS[name].__doc__)}\n\n"
                           f"{format_table(shown)}\n".encode(),
             f"{name}.csv": table.getvalue().encode()}
    if figures:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(figures), figsize=(6 * len(figures), 4.5), squeeze=False)
        for draw, ax in zip(figures, axes[0]):
            draw(ax)
        fig.tight_layout()
        image = io.BytesIO()
        fig.savefig(image, format="png", dpi=120)
        plt.close(fig)
        files[f"{name}.png"] = image.getvalue()
    for file, content in files.items():       # whole, where tasks that end together both write
        atomic_write(out / file, lambda f, content=content: f.write(content))
    return [out / file for file in files]


def _baseline_list(text: str) -> tuple[str, ...]:
    return () if text == "none" else beside_ncae(text)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m ncae_cuda.experiments", description=__doc__.split("\n\n")[0],
        epilog="\n".join(textwrap.fill(" ".join(f.__doc__.split("\n\n")[0].split()), width=96,
                                       initial_indent=f"{name}: ", subsequent_indent="  ",
                                       break_on_hyphens=False)
                         for name, f in EXPERIMENTS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", choices=list(EXPERIMENTS), help="which experiment")
    p.add_argument("--dataset", default="synthetic",
                   help="a data set's name or a data file (default: %(default)s)")
    p.add_argument("--data-dir", type=Path, help="as ncae_cuda.train's")
    p.add_argument("--repeats", type=int, default=1,
                   help="seeds 0..R-1: mean and std (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="tiny widths, 2 epochs, the first values of each grid (for tests)")
    p.add_argument("--out", type=Path, default=Path("runs/experiments"),
                   help="folder for the tables and figures, and the runs, in runs/NAME/ "
                        "(default: %(default)s)")
    p.add_argument("--variant-flags", action="append", default=[], metavar="NAME=FLAGS",
                   help='trainer flags for one implicit variant\'s runs, e.g. '
                        '"NCAE-=--weight-decay 1e-2" (repeatable)')
    p.add_argument("--baselines", type=_baseline_list, metavar="M1,M2,...|none",
                   help="factors, topm: these of ease, ials, bpr beside NCAE (python -m "
                        "ncae_cuda.baselines; iALS's and BPR's factors are the row's K in "
                        f"factors) (default: those of {','.join(BESIDE)} installed)")
    p.add_argument("--ks", default="100,300,500",
                   help="configurations: hidden widths K (default: %(default)s)")
    p.add_argument("--k", type=int, default=500,
                   help="pretraining: the hidden width (default: %(default)s)")
    p.add_argument("--factor-ks", default="8,16,32,64,128",
                   help="factors: hidden widths K (default: %(default)s)")
    p.add_argument("--eps", default="0,0.001,0.01,0.05",
                   help="augmentation: eps values (default: %(default)s)")
    p.add_argument("--ps", default="0.2,0.5,0.8",
                   help="augmentation: p values (default: %(default)s)")
    p.add_argument("--curve-eps", type=float, default=0.05,
                   help="augmentation: eps of the per-epoch curve with augmentation "
                        "(default: %(default)s)")
    p.add_argument("--ms", default="50,100,150,200,250",
                   help="topm: the cutoffs M (default: %(default)s)")
    p.add_argument("--ratios", default="0.4,0.6,0.8",
                   help="robustness: training ratios D (default: %(default)s)")
    p.add_argument("--recipes", nargs="+", default=[], metavar="RECIPE",
                   help="recipes: the recipe files to run (recipes/*.toml)")
    pool.add_flags(p)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = build_parser()
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    for name in GRIDS:
        try:
            _numbers(getattr(args, name))
        except ValueError:
            parser.error(f"--{name.replace('_', '-')}: expected comma-separated numbers, got "
                         f"{getattr(args, name)!r}")
    if args.name == "recipes" and not args.recipes:
        parser.error("recipes: name the recipe files, e.g. --recipes recipes/ml-100k-*.toml")
    feedback = set()
    for path in args.recipes:
        try:
            feedback.add(read_recipe(Path(path)).get("feedback"))
        except ValueError as e:
            parser.error(f"--recipes {path}: {e}")
    stems = [Path(path).stem for path in args.recipes]
    if len(set(stems)) < len(stems):
        parser.error("--recipes: two recipes of one name; each names its runs' folders")
    if len(feedback) > 1:
        parser.error("--recipes: one table scores one kind of feedback: give explicit and "
                     "implicit recipes to separate runs")
    for given in args.variant_flags:
        name, _, flags = given.partition("=")
        if name not in VARIANT_SETTINGS or not flags:
            parser.error(f"--variant-flags {given!r}: expected NAME=FLAGS with NAME one of "
                         f"{', '.join(VARIANT_SETTINGS)}")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: a file, not a folder")
    pool.check_flags(parser, args)
    left_out = ""
    if args.baselines is None:
        args.baselines, left_out = installed(BESIDE)
    plan = Plan(args, extra)
    table = EXPERIMENTS[args.name](plan)
    if left_out and any(run.module == "ncae_cuda.baselines" for run in plan.runs):
        print(f"{args.name}: {left_out}", flush=True)
    # --data-dir reaches the runs as $NCAE_CUDA_DATA: where the data is kept is not what a run is
    runs = pool.Pool(plan.folder, args.name, plan.runs,
                     env={DATA_ENV: str(args.data_dir.resolve())} if args.data_dir else None)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        if not pool.run_share(runs, args):
            return 0
        rows, figures = table()
        for path in write(args.out, args.name, rows, figures):
            print(f"wrote {path}")
    except OSError as e:
        print(f"error: {e.filename}: cannot write it ({e.strerror or e})", file=sys.stderr)
        return 2
    except pool.ERRORS as e:
        return pool.exit_code(e)
    print((args.out / f"{args.name}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
