"""EASE, item-kNN, RP3beta, iALS, BPR and POP on the trainer's own split, chosen on
validation, scored once on test.

    python -m ncae_cuda.baselines --dataset ml-100k --out runs/baselines
    python -m ncae_cuda.baselines --dataset ml-100k --models ease,ials --split-seed 1
    python -m ncae_cuda.baselines --dataset ml-100k --models ials --grid ials.factors=64,128
    python -m ncae_cuda.baselines --dataset ml-100k --config runs/tune-ials/best.toml
    python -m ncae_cuda.baselines --dataset ml-100k --models ease --valid-item latest \
        --grid ease.recency_boost=0,5,10,20,50 --grid ease.recency_halflife=1,2,3,5,8
    python -m ncae_cuda.train --dataset ml-100k --feedback implicit --baselines ease,ials

Each model (ncae_cuda.baselines.models) goes through the run protocol
(ncae_cuda.runs.comparison.compare) on the split the trainer makes of the same data flags: its
grid scored on validation, the best refit on training + validation, the test part scored once
by NCAE's evaluator.
Under --out: baselines.json (every validation figure, the choice, the test figures, the
seconds) and baselines.md; a run of one recipe (--config) also writes the trainer's files,
model.npz (python -m ncae_cuda.recommend and serve read it) and metrics.json, of the keys
the trainer's has.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from ..baselines.models import BASELINES, installed, model_list
from .. import cli
from ..data.atomic_file import atomic_write
from ..errors import NcaeError
from ..model.config import DEFAULTS, checked_cutoffs, unread
from ..model.metrics import format_table
from ..ops import get_backend
from ..runs import comparison, effort, protocol, rundir
from ..runs.spec import RunSpec, SpecError, as_recorded, flag_named, identity
from . import flags

DEFAULT_MODELS = ("ease", "item-knn", "rp3beta", "ials", "bpr", "pop")


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
    p = cli.Parser(
        prog="python -m ncae_cuda.baselines", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2] + "\n\nGrids: " + "; ".join(
            f"{m.name}: " + ", ".join(f"{s} {'/'.join(f'{v:g}' for v in vs)}"
                                      for s, vs in m.grid.items())
            for m in BASELINES.values() if m.grid),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    flags.add_data_flags(p)
    g = p.add_argument_group("baselines")
    g.add_argument("--models", type=cli.argument_type(model_list), metavar="M1,M2,...",
                   help=f"which, of {', '.join(BASELINES)} (default: those of "
                        f"{','.join(DEFAULT_MODELS)} installed)")
    g.add_argument("--config", type=Path, metavar="RECIPE",
                   help="a baseline's recipe (model = \"ials\" and its settings, e.g. "
                        "python -m ncae_cuda.tune --model's best.toml): that model at those "
                        "settings, its iteration count (iALS, BPR) chosen on validation up to "
                        "the recipe's, as tune's trials chose it")
    g.add_argument("--grid", type=grid_override, action="append", default=[],
                   metavar="MODEL.SETTING=V1,V2",
                   help="these values of one setting instead of its grid's (repeatable), e.g. "
                        "ials.factors=64,128 or bpr.iterations=50,100")
    g.add_argument("--cutoffs", type=cli.int_list, default=DEFAULTS.cutoffs,
                   metavar="M1,M2,...", help="the M of HR@M and NDCG@M; validation chooses by "
                   f"NDCG at the last (default: {','.join(map(str, DEFAULTS.cutoffs))})")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of iALS's and BPR's initialisation and of BPR's samples "
                        "(default: %(default)s)")
    cli.add_fields(g, RunSpec, ("device", "out", "resume", "overwrite"), helps={
        "device": "where the figures are ranked, and iALS and BPR fit where the implicit "
                  "library has a CUDA build; auto: the GPU when there is one (default: "
                  "%(default)s)",
        "out": "folder for baselines.json and baselines.md (default: "
               "runs/baselines-<data set>-<date>-<time>)",
        "resume": "run again the baselines of --out that did not finish (same settings)"})
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # the flags first (the data may take a while), by the models' rule
    cli.refused(parser, flag_named, checked_cutoffs, args.cutoffs)
    cli.check_seed(parser, args.seed)
    data, feedback = cli.refused(parser, flags.data_spec(args).resolved, "implicit")
    config = replace(DEFAULTS, feedback=feedback, based="user")    # the rows the split samples
    grids, recipes = {}, {}
    if args.config is not None:
        model, recipes[model] = cli.refused(parser, comparison.recipe_settings, args.config)
        if args.models is None:
            args.models = (model,)
        elif model not in args.models:
            parser.error(f"--config {args.config}: a recipe of {model}, which is not in "
                         "--models")
    if args.models is None:
        args.models, left_out = installed(DEFAULT_MODELS)
        if left_out:
            comparison.say(left_out)
    for key, name, values in args.grid:
        if key not in args.models:
            parser.error(f"--grid {key}.{name}: {key} is not in --models")
        if args.config is not None and key == model:
            parser.error(f"--grid {key}.{name}: --config gives {key}'s settings")
        grids.setdefault(key, {})[name] = values
    for key, given in grids.items():
        baseline = BASELINES[key]
        grid = {**baseline.grid, **given}
        for name, other in baseline.only_with:   # (its grid's own values: those of its default)
            if (name in given and set(given[name]) != set(baseline.grid[name])
                    and not any(grid[other])):
                why = unread({other: 0}, among=(other,))[name]
                parser.error(f"--grid {key}.{name}: {why}, and the grid's "
                             f"{other} is 0 alone: give --grid {key}.{other} too, or leave it "
                             "out")
    try:
        spec = RunSpec(data=data, device=args.device, out=args.out, resume=args.resume,
                       overwrite=args.overwrite).with_folder(f"baselines-{data.name}")
    except SpecError as e:
        parser.error(str(e))
    one_recipe = args.config is not None and args.models == (model,)
    # a folder of one run's files, as the trainer's (a pool of them resumes what did not finish)
    settings = json.loads(json.dumps(as_recorded({   # as run.json holds them
        **identity(data), "models": args.models, "grid": grids, "cutoffs": args.cutoffs,
        "seed": args.seed, "feedback": config.feedback, "based": config.based})))
    folder = rundir.RunDirectory(spec.out, {"baselines": settings})
    try:
        folder.open(resume=spec.resume, overwrite=spec.overwrite)
        # from here on, the folder's manifest names the run --resume continues
        with cli.continued_by(f"continue with --resume --out {spec.out}"):
            ops = get_backend(spec.device)
            interactions, split = protocol.prepare(   # its notes of the baselines' cutoffs
                spec, replace(config, cutoffs=tuple(args.cutoffs)), ops.name,
                "baselines " + ", ".join(BASELINES[key].name for key in args.models))
            protocol.refuse_without_validation(data, interactions, split,
                                               "choose the baselines' settings on")
            if one_recipe:                    # a run of one model: the trainer's files too
                fitted, result = comparison.at_recipe(model, recipes[model], split,
                                                      args.cutoffs, ops, args.seed)
                results = {model: {**result, "search": effort.of_study(args.config)}}
                write_run(folder.work, protocol.header(
                    spec, as_recorded({**identity(data), **fitted.settings}), fitted,
                    interactions, split), results[model], fitted)
            else:
                results = comparison.compare(split, args.models, args.cutoffs, ops, args.seed,
                                             grids, recipes)
            write(folder.work, {
                "dataset": data.train and str(data.train) or data.dataset,
                "split_seed": data.split_seed, "seed": args.seed, "device": ops.name,
                "cutoffs": list(args.cutoffs), "notes": split.notes,
                "data": protocol.sizes(interactions, split), "models": results},
                tables(split, results, args.cutoffs, ops.name))
            folder.finish()
    except NcaeError as e:
        folder.abandon()
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename}: cannot write it ({e.strerror or e})", file=sys.stderr)
        return 2
    written = [spec.out / name for name in (("baselines.json", "baselines.md") + (
        (rundir.MODEL, "metrics.json") if one_recipe else ()))]
    print(f"\n{tables(split, results, args.cutoffs, ops.name)}\n\nwrote "
          f"{', '.join(map(str, written[:-1]))} and {written[-1]}")
    return 0


def tables(split, results: dict, cutoffs: tuple[int, ...], device: str) -> str:
    """The test table (a study's minutes run on another backend than `device`, the run's,
    naming it), and where cold test entries were scored apart (a time split's, or items no fit
    has seen, as the trainer's table shows them), theirs apart."""
    cold, rows = protocol.cold_parts(split).get("cold_test"), comparison.cold_table(results)
    table = format_table(comparison.table(results, cutoffs, device))
    if not (cold and cold["entries"]) and not rows:   # as the trainer's: no empty cold part
        return f"test\n{table}"
    text = (f"warm test\n{table}\n\n"
            f"{protocol.cold_heading(cold)}")
    return text + (f"\n{format_table(rows)}" if rows else "")


def write_run(out: Path, header: dict, result: dict, model) -> None:
    """The trainer's files of a run of one model: model.npz (python -m ncae_cuda.recommend and
    serve read it) and metrics.json, of the keys the trainer's has."""
    model.save(out / rundir.MODEL)
    text = json.dumps({**header, **result, **protocol.epoch_seconds(result)}, indent=2,
                      default=float).encode()
    atomic_write(out / "metrics.json", lambda f: f.write(text))


def write(out: Path, summary: dict, shown: str) -> None:
    """baselines.json (the summary) and baselines.md (the tables, `shown`), each whole or not
    at all."""
    text = json.dumps(summary, indent=2).encode()
    atomic_write(out / "baselines.json", lambda f: f.write(text))
    markdown = (f"# Baselines on {summary['dataset']} (split seed {summary['split_seed']}, "
                f"seed {summary['seed']})\n\n{shown}\n").encode()
    atomic_write(out / "baselines.md", lambda f: f.write(markdown))
