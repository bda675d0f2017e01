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
variant's own chosen settings); there, a flag a cell sets itself to another value (factors'
--hidden, each run's --seed) is refused, and a recipe's setting (--config) a cell sets itself
is named, with the value the runs take, the cell's, as is one a cell's flags leave unread or
contradict (NCAE-'s, the recipe's augment_eps), which its runs leave out. Under --out: NAME.md,
NAME.csv, NAME.png where the paper has a figure, and runs/NAME/ with each run's folder (its
log.txt and metrics.json).

An experiment lists its runs, runs them (ncae_cuda.runs.pool: --jobs at once, each a process; the
same command again skips the finished runs and resumes the others; --task I --tasks T shares
them out; --collect writes the tables from the folders), then builds its tables from the runs'
metrics.json in the order it listed them, so that they are the same however the runs ran.
"""
from __future__ import annotations

import argparse
import csv
import inspect
import io
import sys
import textwrap
from pathlib import Path

from ..baselines.models import BASELINES, beside_ncae, installed
from .. import cli
from ..data.atomic_file import atomic_write
from ..data import datasets
from ..errors import NcaeError, RecipeError
from ..model.config import VARIANT_SETTINGS, as_toml, read_recipe
from ..model.metrics import format_table
from ..runs import pool
from ..runs.paper_tables import (
    EXPERIMENTS,
    MS,
    PRETRAIN_EPOCHS,
    QUICK_WIDTH,
    ExperimentRuns,
    numbers,
)
from ..runs.spec import refuse_unread, resolved
from .flags import CommandLine, from_args, given_flags, read, trainer_run

GRIDS = ("ks", "factor_ks", "eps", "ps", "ms", "ratios")       # the comma-separated flags
OWN_FLAGS = {    # a flag one experiment reads (or two), as argparse names it: the others refuse it
    "ks": ("configurations",), "k": ("pretraining",), "factor_ks": ("factors",),
    "eps": ("augmentation",), "ps": ("augmentation",), "curve_eps": ("augmentation",),
    "ms": ("topm",), "ratios": ("robustness",), "recipes": ("recipes",),
    "baselines": ("factors", "topm")}
BESIDE = ("ease", "ials", "bpr")        # --baselines' default, of those installed
BESIDE_ANY = [key for key in BASELINES if key != "pop"]     # POP: in every implicit table
OUTPUTS = (".md", ".csv", ".png")       # write()'s files: NAME.md, NAME.csv, NAME.png (figures)


# ---------------------------------------------------------------------------------------------
# output

def write(out: Path, name: str, rows: list[dict], figures, repeats: int) -> list[Path]:
    """NAME.md and NAME.csv of the rows ((mean, std) cells as 'mean ± std' and two CSV
    columns), and NAME.png of the figures; returns the paths written. NAME.md says what the
    cells are over: the runs of seeds 0..repeats-1."""
    def cell(value):
        if not isinstance(value, tuple):
            return value
        return f"{value[0]:.4f}" + ("" if value[1] is None else f" ± {value[1]:.4f}")
    shown = [{k: cell(v) for k, v in row.items()} for row in rows]
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    # a column of (mean, std) cells in any row is two, its blank cells filling both
    paired = [any(isinstance(row[key], tuple) for row in rows) for key in rows[0]]
    writer.writerow([name for key, pair in zip(rows[0], paired)
                     for name in ((f"{key} mean", f"{key} std") if pair else (key,))])
    for row in rows:                           # a blank under a (mean, std) column fills both
        writer.writerow([x for v, pair in zip(row.values(), paired)
                         for x in (v if isinstance(v, tuple) else (v, "") if pair else (v,))])
    over = (f"the mean over seeds 0..{repeats - 1} (--repeats {repeats}), ± their standard "
            "deviation (ddof 1)" if repeats > 1 else "one run of seed 0 (--repeats 1)")
    markdown, values, figure = (f"{name}{suffix}" for suffix in OUTPUTS)
    files = {markdown: f"# {name}\n\n{inspect.cleandoc(EXPERIMENTS[name].__doc__)}\n\n"
                       f"Each figure: {over}.\n\n{format_table(shown)}\n".encode(),
             values: table.getvalue().encode()}
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
        files[figure] = image.getvalue()
    for file, content in files.items():       # whole, where tasks that end together both write
        atomic_write(out / file, lambda f, content=content: f.write(content))
    return [out / file for file in files]


def _baseline_list(text: str) -> tuple[str, ...]:
    return () if text == "none" else beside_ncae(text)


def trainer_lines(plan: ExperimentRuns) -> dict[pool.Run, CommandLine]:
    """Each trainer run's command line, read once (flags.read), for the checks of them all."""
    return {run: read(list(run.flags)) for run in plan.runs if run.module == "ncae_cuda.train"}


def _variants_run(trained: dict[pool.Run, CommandLine]) -> list[str]:
    """The implicit variants the trainer runs are, in their order: each run's --variant, as
    the trainer reads it."""
    variants = [line.given.get("variant", (None, None))[1] for line in trained.values()]
    return list(dict.fromkeys(variant for variant in variants if variant))


def overridden(plan: ExperimentRuns, trained: dict[pool.Run, CommandLine]) -> str | None:
    """Why a trainer flag the user gives the runs (after --, in --variant-flags) would not
    reach one of them: its cell sets its own after it (argparse takes the last); None where
    each reaches every run. The same value as the cell's passes: the run is as asked. The
    flags the command and its pool give each run themselves (its data set, its folder, its
    resume) are never the user's to give it."""
    users = given_flags([*plan.extra, *(x for given in plan.args.variant_flags
                                        for x in given.partition("=")[2].split())])
    for dest in ("dataset", "out", "resume", "overwrite"):
        if dest in users:
            # (before, --dataset there beat the command's, checked and named in the tables,
            # and the pool's --out and --resume beat the others)
            return (f"{users[dest][0]}: the experiments command gives each run its own "
                    "(give --dataset, --out and --overwrite before --; it resumes runs "
                    "itself): leave it out")
    for run, line in trained.items():
        ran = line.given
        variant = ran.get("variant", (None, None))[1]
        own = plan.variant_flags(variant)
        from_variant = given_flags(own)
        for dest, (flag, value) in given_flags([*plan.extra, *own]).items():
            # (a flag the run is not given is none it sets: --pretrain-epochs, to a run that
            # does not pre-train)
            if dest not in plan.reads and dest in ran and ran[dest][1] != value:
                given = f"--variant-flags {variant}=" if dest in from_variant else "-- "
                return (f"{given}{flag}: {plan.args.name} sets each run's own ({run.name}: "
                        f"{flag} {cli.as_written(ran[dest][1])}); leave it out")
    return None


def recipe_overridden(plan: ExperimentRuns, trained: dict[pool.Run, CommandLine]) -> list[str]:
    """A line for each setting of a recipe the runs read (--config) that a cell sets itself to
    another value, naming what the runs take: the cell's flag, which beats the recipe as any
    flag does, though no flag of the user's asked it to; and for each set of them a cell's
    flags leave unread or contradict (its --variant NCAE-, the recipe's augment_eps), which its
    runs go without (CommandLine.recipe_given_way, as the trainer's note says). Those the
    user's flags (after --, in --variant-flags) or --quick set for every run, and those a cell
    builds from them, are the user's, not named."""
    said = {}
    for run, line in trained.items():
        ran = line.given
        if "config" not in ran:
            continue
        path = ran["config"][1]
        variant = ran.get("variant", (None, None))[1]
        users = given_flags([*plan.quick, *plan.extra, *plan.variant_flags(variant)])
        for key, value in line.recipe.items():
            if (key in ran and key not in users and key not in plan.reads
                    and ran[key][1] != value and (path, key) not in said):
                flag, taken = ran[key]
                said[path, key] = (f"{plan.args.name}: {path} sets {key} = {as_toml(value)}, "
                                   "which its cells set themselves: the runs take theirs "
                                   f"({run.name}: {flag} {cli.as_written(taken)})")
        for dests, given_way in line.recipe_given_way():
            if given_way not in said and any(dest not in users and dest not in plan.reads
                                             for dest in dests):
                said[given_way] = (f"{plan.args.name}: {given_way}: left out of the runs of "
                                   f"those cells ({run.name})")
    return list(said.values())


def read_by(dest: str) -> str:
    """The experiments that read a flag of OWN_FLAGS, as its help begins."""
    return ", ".join(OWN_FLAGS[dest])


def build_parser() -> argparse.ArgumentParser:
    p = cli.Parser(
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
                   help="seeds 0..R-1: mean and standard deviation (ddof 1) (default: "
                        "%(default)s)")
    p.add_argument("--quick", action="store_true",
                   help=f"hidden layers of at most {QUICK_WIDTH}, 2 epochs, the first values of "
                        "each grid (for tests)")
    p.add_argument("--out", type=Path, default=Path("runs/experiments"),
                   help="folder for the tables and figures, and the runs, in runs/NAME/ "
                        "(default: %(default)s)")
    p.add_argument("--variant-flags", action="append", default=[], metavar="NAME=FLAGS",
                   help='trainer flags for one implicit variant\'s runs, e.g. '
                        '"NCAE-=--weight-decay 1e-2" (repeatable)')
    p.add_argument("--baselines", type=cli.argument_type(_baseline_list), metavar="M1,M2,...|none",
                   help=f"{read_by('baselines')}: these of {', '.join(BESIDE_ANY)} beside NCAE "
                        "(python -m ncae_cuda.baselines; iALS's and BPR's factors are the row's K "
                        f"in factors) (default: those of {','.join(BESIDE)} installed)")
    p.add_argument("--ks", default="100,300,500",
                   help=f"{read_by('ks')}: hidden widths K (default: %(default)s)")
    p.add_argument("--k", type=int, default=500,
                   help=f"{read_by('k')}: the hidden width (default: %(default)s)")
    p.add_argument("--factor-ks", default="8,16,32,64,128",
                   help=f"{read_by('factor_ks')}: hidden widths K (default: %(default)s)")
    p.add_argument("--eps", default="0,0.001,0.01,0.05",
                   help=f"{read_by('eps')}: eps values (default: %(default)s)")
    p.add_argument("--ps", default="0.2,0.5,0.8",
                   help=f"{read_by('ps')}: p values (default: %(default)s)")
    p.add_argument("--curve-eps", type=float, default=0.05,
                   help=f"{read_by('curve_eps')}: eps of the per-epoch curve with augmentation "
                        "(default: %(default)s)")
    p.add_argument("--ms", default=MS,
                   help=f"{read_by('ms')}: the cutoffs M (default: %(default)s)")
    p.add_argument("--ratios", default="0.4,0.6,0.8",
                   help=f"{read_by('ratios')}: training ratios D (default: %(default)s)")
    p.add_argument("--recipes", nargs="+", default=[], metavar="RECIPE",
                   help=f"{read_by('recipes')}: the recipe files to run (recipes/*.toml)")
    cli.add_pool_flags(p)
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
            numbers(getattr(args, name))
        except ValueError:
            parser.error(f"--{name.replace('_', '-')}: expected comma-separated numbers, got "
                         f"{getattr(args, name)!r}")
    for dest, readers in OWN_FLAGS.items():     # given to another: not accepted and ignored
        if args.name not in readers and getattr(args, dest) != parser.get_default(dest):
            parser.error(f"--{dest.replace('_', '-')}: is for {read_by(dest)}, not "
                         f"{args.name}: leave it out")
    if args.name == "recipes" and not args.recipes:
        parser.error("recipes: name the recipe files, e.g. --recipes recipes/ml-100k-*.toml")
    feedback = set()
    for path in args.recipes:
        try:
            feedback.add(read_recipe(Path(path)).get("feedback"))
        except RecipeError as e:
            parser.error(f"--recipes {e}")
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
    cli.check_pool_flags(parser, args)
    if why := datasets.unknown(args.dataset):
        # before the runs are listed: each would fail on it, and the corrected name then be
        # refused as other settings than those the folder's runs were listed with
        parser.error(f"--dataset {args.dataset}: {why}")
    # the runs' device is theirs, after --: before, --gpus with --device cpu there went unused
    device = trainer_run(["--dataset", args.dataset, *extra])[0].device
    cli.refused(parser, pool.check_gpus, args.gpus, device, "the runs")
    left_out = ""
    if args.baselines is None:
        args.baselines, left_out = installed(BESIDE)
    plan = ExperimentRuns(args, extra, trainer_run)
    table = cli.refused(parser, EXPERIMENTS[args.name], plan)    # before any run
    trained = trainer_lines(plan)
    ran = _variants_run(trained)
    for given in args.variant_flags:           # flags that would reach no run: not ignored
        if given.partition("=")[0] not in ran:
            parser.error(f"--variant-flags {given}: no run of {args.name} is "
                         f"{given.partition('=')[0]} ("
                         + (f"its variants: {', '.join(ran)}" if ran else "it runs none of "
                            f"{', '.join(VARIANT_SETTINGS)}") + "): leave it out")
    if "pretrain_epochs" in given_flags(extra) and not any("pretrain_epochs" in line.given
                                                           for line in trained.values()):
        parser.error(f"-- {PRETRAIN_EPOCHS}: no run of {args.name} pre-trains (give --pretrain "
                     "with it): leave it out")
    if said := overridden(plan, trained):        # accepted, then each run took its cell's own
        parser.error(said)
    for run, line in trained.items():   # a grid's value no run takes (--ks 0): refused first
        try:
            spec, _ = resolved(*from_args(line.args))
            refuse_unread(spec, line.given)
        except NcaeError as e:
            parser.error(f"run {run.name}: {e}")
    if left_out and any(run.module == "ncae_cuda.baselines" for run in plan.runs):
        print(f"{args.name}: {left_out}", flush=True)
    for said in recipe_overridden(plan, trained):     # a recipe is a whole: a cell's flags win
        print(said, flush=True)
    # --data-dir reaches the runs as $NCAE_CUDA_DATA: where the data is kept is not what a run is
    runs = pool.Pool(plan.folder, args.name, plan.runs, env={
        datasets.DATA_ENV: str(args.data_dir.resolve())} if args.data_dir else None,
        outputs=tuple(args.out / f"{args.name}{suffix}" for suffix in OUTPUTS))
    try:
        # (the runs under way the pool stops itself, saying so: pool.exit_code)
        with cli.continued_by("the same command resumes the runs and writes the tables"):
            if not args.collect:    # (what --collect reads, the runs made: it makes nothing)
                args.out.mkdir(parents=True, exist_ok=True)
            if not pool.run_share(runs, args):
                return 0
            rows, figures = table()
            for path in write(args.out, args.name, rows, figures, args.repeats):
                print(f"wrote {path}")
    except OSError as e:
        print(f"error: {e.filename}: cannot write it ({e.strerror or e})", file=sys.stderr)
        return 2
    except pool.ERRORS as e:
        return pool.exit_code(e)
    print((args.out / f"{args.name}.md").read_text())
    return 0
