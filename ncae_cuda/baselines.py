"""EASE, iALS, BPR and POP on the trainer's own split, chosen on validation, scored once on test.

    python -m ncae_cuda.baselines --dataset ml-100k --out runs/baselines
    python -m ncae_cuda.baselines --dataset ml-100k --models ease,ials --split-seed 1
    python -m ncae_cuda.baselines --dataset ml-100k --models ials --grid ials.factors=64,128
    python -m ncae_cuda.baselines --dataset ml-100k --models ease --valid-item latest \
        --grid ease.recency_boost=0,5,10,20,50 --grid ease.recency_halflife=1,2,3,5,8
    python -m ncae_cuda.train --dataset ml-100k --feedback implicit --baselines ease,ials

Each model (ncae_cuda.baseline_models) goes through the trainer's protocol on the split the
trainer makes of the same data flags (leave-one-out by time): every point of its grid is fit
on the training part and scores the validation part (iALS and BPR after each of their
iteration counts, along one fit; EASE at each of its recency points, from one B; points that
cannot differ once: a recency halflife where the boost is 0 is left out of the point); the best
NDCG at the last cutoff chooses (on a tie, the first in grid order); the chosen settings are
refit on training + validation, and the test part is scored once. The figures are NCAE's
evaluator's (FitData.ranker): the same candidates (every item the user has no training or
validation interaction with), exclusions and tie rule (ties count against the held-out item).
Under --out: baselines.json (every validation figure, the choice, the test figures, the
seconds) and baselines.md.
"""
from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

from . import rundir, train
from .baseline_models import BASELINES, Baseline, implicit_has_gpu, installed, model_list
from .cli import Parser
from .config import DEFAULTS, Config
from .data import Interactions
from .errors import NcaeError
from .fitdata import FitData
from .metrics import format_table
from .modelfile import atomic_write
from .ops import get_backend
from .pool import duration
from .splits import Split

IMPLICIT = Config(feedback="implicit").resolved()     # the evaluator's view: users x items
DEFAULT_MODELS = ("ease", "ials", "bpr", "pop")
say = functools.partial(print, flush=True)   # a line the moment it is known, through a pipe too


def compare(split: Split, models, cutoffs: tuple[int, ...], ops, seed: int = 0,
            grids: dict | None = None, log=say) -> dict:
    """{model key: select_and_test's result} for each key of BASELINES in `models`, on `split`;
    grids: {key: {setting: values}} in place of a model's own (ncae_cuda.baseline_models)."""
    gpu = ops.name == "gpu" and implicit_has_gpu()
    if ops.name == "gpu" and not gpu and {"ials", "bpr"} & set(models):
        log("note: the implicit library here has no CUDA build: iALS and BPR fit on the CPU")
    return {key: select_and_test(BASELINES[key], split, cutoffs, ops, seed,
                                 {**BASELINES[key].grid, **(grids or {}).get(key, {})}, gpu, log)
            for key in models}


def select_and_test(model: Baseline, split: Split, cutoffs: tuple[int, ...], ops, seed: int,
                    grid: dict, gpu: bool = False, log=say) -> dict:
    """The protocol of the module's docstring for one model: every validation figure, the
    settings chosen, the test figures, and the seconds the selection and the final fit took.
    log hears a line per point scored on validation, with the time the grid has left."""
    metric = f"ndcg@{cutoffs[-1]}"
    fits = distinct_points(model, grid)
    seen = FitData.of(split.train, IMPLICIT, ops)
    runs, start = [], time.perf_counter()
    total = sum(len(points) for _, points in fits)
    for settings, points in fits:
        fit_start = time.perf_counter()

        def check(point, scores, settings=settings):
            runs.append({"settings": {**settings, **point},
                         "valid": _ranked(ops, seen, split.valid, None, cutoffs, scores),
                         "seconds": time.perf_counter() - fit_start})
            took = time.perf_counter() - start
            log(f"{model.name} {len(runs)}/{total}: {_shown(runs[-1]['settings'])}: valid "
                f"{metric} {runs[-1]['valid'][metric]:.4f} | {duration(took)}, about "
                f"{duration(took / len(runs) * (total - len(runs)))} left")
        model.fit(split.train, settings, points, check, seed, gpu)
    best = max(runs, key=lambda run: run["valid"][metric])        # the first of equals
    selected = time.perf_counter() - start
    fold = split.fold_validation().train
    fit_start = time.perf_counter()
    fit_settings = {k: v for k, v in best["settings"].items() if k not in model.along}
    point = {k: v for k, v in best["settings"].items() if k in model.along}
    final = []                                          # the refit's Scores, at its one point
    model.fit(fold, fit_settings, [point], lambda _, scores: final.append(scores), seed, gpu)
    fit_seconds = time.perf_counter() - fit_start
    test = _ranked(ops, FitData.of(fold, IMPLICIT, ops), split.test, split.valid, cutoffs,
                   final[0])
    log(f"{model.name}: {len(runs)} settings scored on validation ({selected:.1f} s), chose "
        f"{_shown(best['settings'])} ({metric} {best['valid'][metric]:.4f}); refit on "
        f"training + validation in {fit_seconds:.2f} s: test {metric} {test[metric]:.4f}")
    return {"name": model.name, "grid": grid, "validation": runs,
            "chosen": best["settings"], "valid": best["valid"], "test": test,
            "seconds_select": selected, "seconds_fit": fit_seconds}


def distinct_points(model: Baseline, grid: dict) -> list[tuple[dict, list[dict]]]:
    """[(the settings of one fit, the points of model.along scored along it)], every point of
    `grid` in its order, less those equivalent to one before (Baseline.relevant: a setting that
    changes no score where another is 0 is left out of the point)."""
    fits: dict[tuple, list[dict]] = {}
    along = [name for name in grid if name in model.along]
    for values in itertools.product(*grid.values()):
        point = model.relevant(dict(zip(grid, values)))
        points = fits.setdefault(tuple((k, v) for k, v in point.items() if k not in along), [])
        point = {k: v for k, v in point.items() if k in along}
        if point not in points:
            points.append(point)
    return [(dict(settings), points) for settings, points in fits.items()]


def _ranked(ops, fit: FitData, held: Interactions, exclude, cutoffs, scores) -> dict:
    """HR@M and NDCG@M of `held` by `scores` through NCAE's evaluator (FitData.ranker)."""
    def scorer():
        return lambda users: ops.to_device(np.ascontiguousarray(scores(users), np.float32))
    return fit.ranker(held, exclude, cutoffs, scorer)()


def _shown(settings: dict) -> str:
    return ", ".join(f"{name} {value:g}" for name, value in settings.items()) or "no settings"


def table(results: dict, cutoffs: tuple[int, ...]) -> list[dict]:
    """One row per model: its test figures, the settings chosen, validation's NDCG at the last
    cutoff, the seconds of the final fit and of the whole selection."""
    metric = f"ndcg@{cutoffs[-1]}"
    return [{"model": r["name"], **{k: v for k, v in r["test"].items() if k != "rows"},
             f"valid {metric}": r["valid"][metric], "fit s": r["seconds_fit"],
             "select s": r["seconds_select"], "chosen": _shown(r["chosen"])}
            for r in results.values()]


# ---------------------------------------------------------------------------------------------
# command line

def grid_override(text: str) -> tuple[str, str, tuple]:
    """'ials.factors=64,128' -> ('ials', 'factors', (64, 128)): values of one setting of a
    model's grid, numbers of the setting's kind, > 0 (>= 0 where its own values hold 0: a
    recency_boost of 0 is none)."""
    target, _, values = text.partition("=")
    key, _, name = target.partition(".")
    model = BASELINES.get(key)
    settings = {} if model is None else model.grid
    if name not in settings:
        known = [f"{k}.{s}" for k, m in BASELINES.items() for s in m.grid]
        raise argparse.ArgumentTypeError(f"{target!r}: expected MODEL.SETTING=V1,V2,... with "
                                         f"MODEL.SETTING one of {', '.join(known)}")
    kind = int if all(isinstance(v, int) for v in settings[name]) else float
    try:
        parsed = tuple(kind(v) for v in values.split(","))
    except ValueError:
        parsed = ()
    zero_ok = min(settings[name]) == 0
    if not parsed or min(parsed) < 0 or (min(parsed) == 0 and not zero_ok):
        raise argparse.ArgumentTypeError(f"{text!r}: {name} takes numbers "
                                         f"{'>= 0' if zero_ok else '> 0'} ({kind.__name__})")
    return key, name, parsed


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m ncae_cuda.baselines", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2] + "\n\nGrids: " + "; ".join(
            f"{m.name}: " + ", ".join(f"{s} {'/'.join(f'{v:g}' for v in vs)}"
                                      for s, vs in m.grid.items())
            for m in BASELINES.values() if m.grid),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_data_flags(p)
    g = p.add_argument_group("baselines")
    g.add_argument("--models", type=model_list, metavar="M1,M2,...",
                   help=f"which, of {', '.join(BASELINES)} (default: those of "
                        f"{','.join(DEFAULT_MODELS)} installed)")
    g.add_argument("--grid", type=grid_override, action="append", default=[],
                   metavar="MODEL.SETTING=V1,V2",
                   help="these values of one setting instead of its grid's (repeatable), e.g. "
                        "ials.factors=64,128 or bpr.iterations=50,100")
    g.add_argument("--cutoffs", type=train.int_list, default=DEFAULTS.cutoffs,
                   metavar="M1,M2,...", help="the M of HR@M and NDCG@M; validation chooses by "
                   f"NDCG at the last (default: {','.join(map(str, DEFAULTS.cutoffs))})")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of iALS's and BPR's initialisation and of BPR's samples "
                        "(default: %(default)s)")
    g.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                   help="where the figures are ranked, and iALS and BPR fit where the implicit "
                        "library has a CUDA build; auto: the GPU when there is one (default: "
                        "%(default)s)")
    g.add_argument("--out", type=Path,
                   help="folder for baselines.json and baselines.md (default: "
                        "runs/baselines-<data set>-<date>-<time>)")
    rundir.add_flags(g, resume="run again the baselines of --out that did not finish (same "
                               "settings)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.feedback, args.based = "implicit", "user"
    train.resolve_data(parser, args)
    if min(args.cutoffs) < 1:
        parser.error(f"--cutoffs must be >= 1; got {','.join(map(str, args.cutoffs))}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0; got {args.seed}")
    if args.models is None:
        args.models, left_out = installed(DEFAULT_MODELS)
        if left_out:
            say(left_out)
    grids = {}
    for key, name, values in args.grid:
        if key not in args.models:
            parser.error(f"--grid {key}.{name}: {key} is not in --models")
        grids.setdefault(key, {})[name] = values
    rundir.check_flags(parser, args)
    args.out = args.out or train.new_folder(f"baselines-{Path(args.train or args.dataset).stem}")
    # a folder of one run's files, as the trainer's (a pool of them resumes what did not finish)
    settings = json.loads(json.dumps({**train.recorded(args), "grid": grids}))  # as run.json
    folder = rundir.RunDirectory(args.out, {"baselines": settings})
    try:
        folder.open(resume=args.resume, overwrite=args.overwrite)
        ops = get_backend(args.device)
        data, split = train.prepare(args, ops.name, "baselines " + ", ".join(
            BASELINES[key].name for key in args.models))
        results = compare(split, args.models, args.cutoffs, ops, args.seed, grids)
        write(args.out, {"dataset": args.train and str(args.train) or args.dataset,
                         "split_seed": args.split_seed, "seed": args.seed, "device": ops.name,
                         "cutoffs": list(args.cutoffs), "notes": split.notes,
                         "data": {"users": data.n_users, "items": data.n_items,
                                  "interactions": data.nnz, "train": split.train.nnz,
                                  "valid": split.valid.nnz, "test": split.test.nnz},
                         "models": results}, table(results, args.cutoffs))
        folder.finish()
    except NcaeError as e:
        folder.abandon()
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename}: cannot write it ({e.strerror or e})", file=sys.stderr)
        return 2
    print(f"\ntest\n{format_table(table(results, args.cutoffs))}\n\nwrote "
          f"{args.out / 'baselines.json'} and {args.out / 'baselines.md'}")
    return 0


def write(out: Path, summary: dict, rows: list[dict]) -> None:
    """baselines.json (the summary) and baselines.md (the table), each whole or not at all."""
    text = json.dumps(summary, indent=2).encode()
    atomic_write(out / "baselines.json", lambda f: f.write(text))
    markdown = (f"# Baselines on {summary['dataset']} (split seed {summary['split_seed']}, "
                f"seed {summary['seed']})\n\n{format_table(rows)}\n").encode()
    atomic_write(out / "baselines.md", lambda f: f.write(markdown))


if __name__ == "__main__":
    sys.exit(main())
