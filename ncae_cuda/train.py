"""Train and evaluate NCAE.

    python -m ncae_cuda.train                          # built-in synthetic ratings, explicit
    python -m ncae_cuda.train --dataset ml-100k --split u1         # data: --data-dir or
    python -m ncae_cuda.train --dataset ml-100k --feedback implicit   # $NCAE_CUDA_DATA
    python -m ncae_cuda.train --dataset ratings.csv    # a file: user,item[,rating[,timestamp]]
    python -m ncae_cuda.train --train u1.base --test u1.test --sep tab   # your own split
    python -m ncae_cuda.train --config recipes/ml-100k-explicit.toml --dataset ml-100k --split u1
    python -m ncae_cuda.train --out runs/a --resume    # continue an interrupted run
    torchrun --nproc-per-node 2 -m ncae_cuda.train --shard columns ...  # one model, 2 processes

Protocol (docs/design.md): train on the training part and score the validation part after
every epoch, keeping the best epoch (early stopping after --patience epochs without
improvement); then retrain from scratch on training + validation for that many epochs and score
the test part once (--no-refit scores the best-validation model instead). Without a validation
part it trains --epochs epochs. Explicit feedback is scored by RMSE over held-out ratings,
implicit by HR@M and NDCG@M of each user's held-out item ranked against every item the user has
not interacted with, next to the POP baseline.

Each run has its own folder, --out (default runs/<data set>-<date>-<time>): run.json (the
run's settings; a run never writes into another run's folder), checkpoint-select.npz and
checkpoint-refit.npz (what --resume continues from, saved at the end of an epoch once
--checkpoint-every seconds have passed), model.npz
(ncae_cuda.NCAE.load reads it; so does python -m ncae_cuda.recommend) and metrics.json at the
end. The CLI is a thin layer over ncae_cuda.NCAE: the flags of the model are its settings
(ncae_cuda.config.Config), generated from them. --config reads them from a recipe (a TOML file
of the same names, recipes/); a flag on the command line overrides the recipe.

--shard columns trains one model across the processes of a torch.distributed job (torchrun;
pip install -e ".[distributed]"), each holding a share of the columns (ncae_cuda/shard.py):
rank 0 prints and writes the run's files, each rank its checkpoint files beside them (--out
shared by the machines, or the same path on each); --resume needs as many processes.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import signal
import statistics
import sys
import time
import warnings
from dataclasses import fields
from pathlib import Path

from . import datasets, metrics, rundir, splits, stopping
from .baseline_models import beside_ncae
from .cli import Parser
from .config import Config, SettingError, read_recipe
from .data import DataError, Interactions, read_table
from .errors import NcaeError
from .estimator import NCAE, SHARDS
from .modelfile import atomic_write
from .ops import HAS_CUDA, BackendUnavailable
from .session import CHECKPOINT_EVERY

# Model settings whose CLI default comes from the data: (help of the default).
FROM_THE_DATA = {"feedback": "the data set's own: explicit where it has ratings, implicit for "
                             "HetRec data and files without a rating column"}
# The flags that steer a run but not its result: left out of the run's identity (run.json).
# (A recipe's settings are recorded one by one, not its file's name.)
DEVICES = ("auto", "cpu", "gpu")      # --device: auto is the GPU where there is one
NOT_THE_RESULT = ("out", "resume", "overwrite", "data_dir", "cache_dir", "curves",
                  "cuda_graphs", "config", "checkpoint_every")


# ---------------------------------------------------------------------------------------------
# command line

def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def _float_pair(text: str) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH, got {text!r}")
    return low, high


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return seconds


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def add_settings(p: argparse.ArgumentParser) -> None:
    """A flag for every model setting (Config), its help and default taken from the field."""
    groups = {name: p.add_argument_group(name) for name in ("model", "training", "evaluation")}
    for f in fields(Config):
        meta = f.metadata
        kind = {"ints": int_list, "range": _float_pair}.get(meta["kind"])
        if kind is None and not meta["choices"]:
            kind = float if "float" in str(f.type) else int
        default = None if f.name in FROM_THE_DATA else f.default
        shown = FROM_THE_DATA.get(f.name, None if default is None else _shown(default))
        help_ = meta["help"] + ("" if shown is None else f" (default: {shown})")
        groups[meta["group"]].add_argument(
            _flag(f.name), type=kind, choices=meta["choices"], default=default, help=help_,
            metavar={"ints": "K1,K2,...", "range": "LOW,HIGH"}.get(meta["kind"]))


def add_data_flags(p: argparse.ArgumentParser) -> None:
    """The flags that say what a run trains and scores on (the data set, or files, and the
    split): the trainer's, and those of the commands that start trainer runs or score the
    baselines (the same split by construction)."""
    g = p.add_argument_group("data")
    g.add_argument("--dataset",
                   help="a named data set (see below), or a CSV/TSV file of user,item[,rating"
                        f"[,timestamp]] (default: {datasets.DEFAULT})")
    g.add_argument("--train", type=Path, metavar="FILE",
                   help="your own split instead of --dataset: train on this file, score --test "
                        "(a validation part is --valid, or carved from it by --valid-ratio)")
    g.add_argument("--test", type=Path, metavar="FILE", help="the test part of --train's split")
    g.add_argument("--valid", type=Path, metavar="FILE",
                   help="the validation part of --train's split")
    datasets.add_file_flags(g)
    g.add_argument("--data-dir", type=Path,
                   help="folder with an extracted copy of a published data set (default: "
                        f"${datasets.DATA_ENV}; else the download cache)")
    g.add_argument("--cache-dir", type=Path, help="download cache (default: $NCAE_CUDA_CACHE, "
                   "else ~/.cache/ncae_cuda)")
    g.add_argument("--split", choices=(*splits.KINDS, *datasets.split_names()),
                   help="random hold-out, leave-one-out by time, or a data set's own split "
                        "files (ml-100k's u1..u5, ua, ub) (default: random for explicit, loo "
                        "for implicit feedback)")
    g.add_argument("--test-ratio", type=float, default=0.1,
                   help="random split: the share of all entries held out for test (default: "
                        "%(default)g)")
    g.add_argument("--valid-ratio", type=float, default=0.1,
                   help="the share held out for validation: of all entries (random split) or "
                        "of the training file (u1..ub, --train); 0 = no validation, train "
                        "--epochs (default: %(default)g)")
    g.add_argument("--valid-item", choices=splits.VALID_ITEMS, default="random",
                   help="leave-one-out: the validation item is a random other interaction, or "
                        "the latest other one (by time: the test item is the latest, so "
                        "validation then asks for the next item as test does) (default: "
                        "%(default)s)")
    g.add_argument("--data-ratio", type=float, default=1.0,
                   help="the paper's D: keep this share of each row's training entries "
                        "(default: %(default)g)")
    g.add_argument("--split-seed", type=int, default=0,
                   help="seed of the split and the D-sample (default: %(default)s)")


def data_defaults() -> dict:
    """The data flags (add_data_flags) with their defaults, by name."""
    p = argparse.ArgumentParser()
    add_data_flags(p)
    return vars(p.parse_args([]))


def data_flags(args) -> dict:
    """The values of args' data flags (add_data_flags), by name."""
    return {name: getattr(args, name) for name in data_defaults()}


def given_data(args) -> dict:
    """args' data flags that differ from their defaults, by name, as text, but the folders
    (where the data is kept is not what a run is): what another command hands on to the runs
    it starts."""
    return {k: str(getattr(args, k)) for k, default in data_defaults().items()
            if getattr(args, k) != default and k not in ("data_dir", "cache_dir")}


def data_argv(given: dict) -> list[str]:
    """given_data()'s flags as a command line has them."""
    return [x for k, v in given.items() for x in (f"--{k.replace('_', '-')}", v)]


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m ncae_cuda.train", description=__doc__.split("\n\n")[0],
        epilog="Data sets: " + ", ".join(datasets.names()) + ". Defaults follow the paper "
               "where it states them.")
    p.add_argument("--config", type=Path, metavar="RECIPE",
                   help="read the model's settings from this TOML file (recipes/ has the ones "
                        "behind the README's results); flags given here override it")
    add_data_flags(p)
    add_settings(p)
    g = p.add_argument_group("run")
    g.add_argument("--device", choices=DEVICES, default="auto",
                   help="auto: the GPU when there is one (default: %(default)s)")
    g.add_argument("--shard", choices=[str(s).lower() for s in SHARDS], default="none",
                   help="columns: one model across the processes of a torch.distributed job "
                        "(launched by torchrun --nproc-per-node R -m ncae_cuda.train ...), each "
                        "holding a share of the columns; on GPUs over NCCL, on CPUs over gloo "
                        "(default: %(default)s: one process)")
    g.add_argument("--cuda-graphs", choices=("on", "off"),
                   help="GPU: replay each training step from a CUDA graph captured once, instead "
                        "of launching its kernels one by one (default: off, until a GPU "
                        "measurement shows it pays)")
    g.add_argument("--baselines", type=beside_ncae, default=(), metavar="M1,M2,...",
                   help="implicit feedback: also these of ease, ials, bpr on the same split, "
                        "each chosen on validation by its grid, refit and scored on test as "
                        "python -m ncae_cuda.baselines does (POP is always there; default: "
                        "none)")
    g.add_argument("--no-refit", dest="refit", action="store_false",
                   help="score test with the best-validation model instead of retraining on "
                        "training + validation")
    g.add_argument("--validation-only", action="store_true",
                   help="select the epoch on validation and stop there: no refit, and the test "
                        "part is never scored (python -m ncae_cuda.tune's trials); metrics.json "
                        "holds the best epoch's validation figures")
    g.add_argument("--curves", action="store_true",
                   help="also score the training (explicit) and test parts after every epoch, "
                        "for learning curves; never used to choose anything")
    g.add_argument("--out", type=Path,
                   help="the run's folder (default: runs/<data set>-<date>-<time>)")
    rundir.add_flags(g, resume="continue the run in --out where it stopped")
    g.add_argument("--checkpoint-every", type=_seconds, default=CHECKPOINT_EVERY,
                   metavar="SECONDS",
                   help="save the run's checkpoint at the end of an epoch once this many seconds "
                        "have passed since the last (and after pre-training and the last epoch): "
                        "the most training a kill costs (default: %(default)g; 0: every epoch)")
    return p


def resolve_defaults(parser, args) -> None:
    """Fill the defaults that depend on the data set and feedback; refuse bad combinations
    with the flag's name, before any data is read."""
    resolve_data(parser, args)
    try:
        config = Config(**model_settings(args)).resolved()
    except SettingError as e:
        parser.error(f"{_flag(e.setting)}: {e.reason}")
    for name in ("based", "weighting", "augment_eps"):       # the defaults, as trained
        setattr(args, name, getattr(config, name))
    if args.baselines and args.feedback != "implicit":
        parser.error("--baselines: the baselines rank items: they are for implicit feedback")
    if args.baselines and args.shard != "none":
        parser.error("--baselines run in one process: leave out --shard")
    if args.baselines and args.validation_only:
        parser.error("--baselines are scored on the test part; --validation-only never scores it")
    if args.validation_only and args.curves:
        parser.error("--curves scores the test part after every epoch; --validation-only never "
                     "scores it")
    rundir.check_flags(parser, args)
    args.out = args.out or new_folder(Path(args.train or args.dataset).stem)


def new_folder(name: str) -> Path:
    """runs/<name>-<date>-<time>, with a suffix where that is taken."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{name}-{stamp}"
    return next(folder for folder in (Path(f"{base}{suffix}")
                                      for suffix in ("", *(f"-{k}" for k in range(2, 99))))
                if not folder.exists())


def resolve_data(parser, args) -> None:
    """The data flags' defaults (add_data_flags), the feedback's where args has none; a bad
    combination is refused with the flag's name, before any data is read."""
    if args.train or args.test or args.valid:
        _check_given_split(parser, args)
    else:
        args.dataset = args.dataset or datasets.DEFAULT
        if args.dataset not in datasets.names() and not datasets.is_file(args.dataset):
            parser.error(f"--dataset {args.dataset}: neither a data set's name nor a file "
                         f"(names: {', '.join(datasets.names())})")
    source = "--train" if args.train else "--dataset"
    try:
        args.feedback = args.feedback or datasets.default_feedback(
            str(args.train or args.dataset), args.sep, args.encoding)
    except DataError as e:
        parser.error(f"{source}: {e}")
    if not args.train:
        args.split = args.split or ("random" if args.feedback == "explicit" else "loo")
        if args.feedback == "implicit" and args.split != "loo":
            parser.error("implicit feedback is evaluated by leave-one-out: use --split loo")
        if args.valid_item != "random" and args.split != "loo":
            parser.error(f"--valid-item {args.valid_item} chooses leave-one-out's validation "
                         "item: use it with --split loo")
        if args.split not in splits.KINDS and not datasets.has_split(args.dataset, args.split):
            parser.error(f"--split {args.split}: {args.dataset} has no such split files (they "
                         "ship with ml-100k); use --split random or loo")
    ratios = [("--test-ratio", args.test_ratio, 0 < args.test_ratio < 1, "in (0, 1)"),
              ("--valid-ratio", args.valid_ratio, 0 <= args.valid_ratio < 1, "in [0, 1)"),
              ("--data-ratio", args.data_ratio, 0 < args.data_ratio <= 1, "in (0, 1]")]
    for flag, value, ok, wanted in ratios:
        if not ok:
            parser.error(f"{flag} must be {wanted}; got {value:g}")
    if args.split == "random" and args.test_ratio + args.valid_ratio >= 1:
        parser.error(f"--test-ratio + --valid-ratio must be < 1 to leave training data; got "
                     f"{args.test_ratio:g} + {args.valid_ratio:g}")
    if args.split_seed < 0:
        parser.error(f"--split-seed must be >= 0; got {args.split_seed}")


def _check_given_split(parser, args) -> None:
    """--train FILE --test FILE [--valid FILE]: the files are there, and no other data source
    or split is named beside them."""
    if not (args.train and args.test):
        parser.error("--train and --test name your own split together (--valid beside them)")
    for flag, other in (("--dataset", args.dataset), ("--split", args.split)):
        if other is not None:
            parser.error(f"{flag} {other}: with --train and --test the data and split are "
                         "those files")
    if args.valid_item != "random":
        parser.error(f"--valid-item {args.valid_item}: with --train and --test the validation "
                     "part is --valid, or carved from --train by --valid-ratio")
    for flag, path in (("--train", args.train), ("--test", args.test), ("--valid", args.valid)):
        if path is not None and not path.is_file():
            parser.error(f"{flag} {path}: no such file")


def model_settings(args) -> dict:
    """The flags that are settings of the model (ncae_cuda.config.Config)."""
    return {f.name: getattr(args, f.name) for f in fields(Config) if hasattr(args, f.name)}


def recorded(args) -> dict:
    """Every setting of the run that bears on its result, for run.json and metrics.json: what
    another run needs to repeat it."""
    return {k: list(v) if isinstance(v, tuple) else (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items() if k not in NOT_THE_RESULT and k != "device"}


# ---------------------------------------------------------------------------------------------
# data

def prepare(args, device: str, trained: str | None = None) -> tuple[Interactions, splits.Split]:
    """Load and split the data, and say what will be trained (default: the NCAE of args) on
    what."""
    data, split = given_split(args) if args.train else dataset_split(args)
    unrated = [part.name for part in (split.train, split.valid, split.test)
               if part.ratings is None]
    if args.feedback == "explicit" and unrated:
        raise DataError(f"{unrated[0]} has no ratings: use --feedback implicit")
    trained = trained or f"{args.feedback}, {args.based}-based, hidden {list(args.hidden)}"
    print(f"{data.name}: {data.n_users} users x {data.n_items} items, {data.nnz} interactions | "
          f"train {split.train.nnz}, valid {split.valid.nnz}, test {split.test.nnz} | "
          f"{trained}, device {device}")
    if data.n_duplicates_merged:
        print(f"note: {data.n_duplicates_merged} duplicate (user, item) records merged into "
              "others (rule: ncae_cuda.data)")
    for note in split.notes:
        print(f"note: {note}")
    return data, split


def dataset_split(args) -> tuple[Interactions, splits.Split]:
    """--dataset, split as --split says."""
    with warnings.catch_warnings(record=True) as caught:
        for kind in (datasets.CatalogueWarning, datasets.NoTimesWarning):
            warnings.simplefilter("always", kind)
        data = datasets.load(args.dataset, data_dir=args.data_dir, cache_dir=args.cache_dir,
                             sep=args.sep, encoding=args.encoding,
                             rating_scale=given_scale(args))
    for warning in caught:
        print(f"warning: {warning.message}")
    if datasets.is_file(args.dataset):
        say_how_it_was_read(args, args.dataset, data)
    return data, make_split(args, data)


def given_scale(args) -> tuple[float, float] | None:
    """--rating-scale where the feedback is explicit (implicit feedback has no scale, and the
    commands that train only on it have no such flag)."""
    return args.rating_scale if args.feedback == "explicit" else None


def say_how_it_was_read(args, path, data: Interactions, scaled: bool = True) -> None:
    """The columns a file was read by, and where `scaled`, the rating scale it was read on."""
    scale = ""
    if scaled and data.ratings is not None:
        origin = ("--rating-scale" if given_scale(args) else
                  "read off the file: give --rating-scale LOW,HIGH if the scale is wider")
        scale = f"; ratings {data.rating_scale[0]:g} to {data.rating_scale[1]:g} ({origin})"
    print(f"{path}: {data.columns}{scale}")


def given_split(args) -> tuple[Interactions, splits.Split]:
    """--train, --test and --valid, each read as a table, on the id maps of all of them; a
    validation part carved from --train where --valid is not given. Explicit feedback reads
    them on one rating scale, --rating-scale or else the training file's: a held-out rating
    outside it is refused with its file and line, and nothing of the held-out files reaches
    the model."""
    scale, parts = given_scale(args), {}
    for name in ("train", "valid", "test"):       # train first: the others read on its scale
        path = getattr(args, name)
        if path is not None:
            parts[name] = read_table(path, args.sep, scale, args.encoding)
            say_how_it_was_read(args, path, parts[name], scaled=name == "train")
            if name == "train" and args.feedback == "explicit":
                scale = parts[name].rating_scale
    data, split = splits.given_split(**parts)
    if not split.valid.nnz and args.valid_ratio > 0:
        split = splits.carve_validation(split, args.valid_ratio, seed=args.split_seed)
    return data, subsampled(args, split)


def make_split(args, data: Interactions) -> splits.Split:
    if args.split == "loo":
        split = splits.leave_one_out(data, seed=args.split_seed, valid_item=args.valid_item)
    elif args.split == "random":
        split = splits.random_split(data, args.test_ratio, args.valid_ratio, seed=args.split_seed)
    else:
        base, test = datasets.load_split(args.dataset, args.split, args.data_dir, args.cache_dir)
        split = splits.file_split(data, base, test)
        if args.valid_ratio > 0:
            split = splits.carve_validation(split, args.valid_ratio, seed=args.split_seed)
    return subsampled(args, split)


def subsampled(args, split: splits.Split) -> splits.Split:
    """The split with --data-ratio of each row's training entries (the paper's D)."""
    if args.data_ratio == 1:
        return split
    train = splits.subsample(split.train, args.data_ratio, seed=args.split_seed,
                             based=args.based)
    return splits.Split(train, split.valid, split.test, split.notes + [
        f"D = {args.data_ratio:g}: trained on {train.nnz} of {split.train.nnz} entries"])


# ---------------------------------------------------------------------------------------------
# the protocol: select the epoch on validation, refit, test once

def new_model(args, ops=None) -> NCAE:
    """The model of the run's settings, on its device (or backend) and shard."""
    return NCAE(device=ops or args.device, shard=None if args.shard == "none" else args.shard,
                **model_settings(args))


def run(args, on_epoch=None) -> dict:
    """The run args describe, in its folder; returns what metrics.json holds. on_epoch(record),
    where given, hears every epoch of the selection fit with its validation figures (tune's
    pruner): what it raises ends the run, resumable."""
    model = new_model(args)
    if args.cuda_graphs is not None:
        if model.ops.name != "gpu":
            raise BackendUnavailable(f"--cuda-graphs is for the GPU backend; this run is on the "
                                     f"{model.ops.name} backend")
        if args.shard != "none" and args.cuda_graphs == "on":
            raise BackendUnavailable("--cuda-graphs on: a sharded step is not captured yet")
        model.ops.graphs = args.cuda_graphs == "on"
    comm = model.comm
    run_id = {"settings": recorded(args), "backend": model.ops.name}
    if comm is not None:
        run_id["processes"] = comm.world
    folder = rundir.RunDirectory(args.out, run_id)
    with contextlib.ExitStack() as stack:
        if not model.leader:                # the other ranks work in step, silently
            stack.enter_context(contextlib.redirect_stdout(open(os.devnull, "w")))
        # before the data is read: rank 0 takes the folder, the others find it (their own, on
        # a machine of their own)
        take = (lambda: folder.open(resume=args.resume, overwrite=args.overwrite)) \
            if model.leader else folder.join
        comm.together(take, "opening the run folder") if comm else take()
        stack.callback(folder.release)          # a process running many runs (tune) lets go
        print(f"run folder: {args.out}" + (" (resumed)" if args.resume else ""))
        try:
            with model.ops.session():
                data, split = prepare(args, model.ops.name)
            summary = train_and_test(args, model, data, split, on_epoch)
        except (DataError, BackendUnavailable):
            if model.leader:
                folder.abandon()
            raise
        if model.leader:
            folder.finish()
        print(f"wrote {args.out / 'model.npz'} and {args.out / 'metrics.json'}")
    return summary


def train_and_test(args, model: NCAE, data: Interactions, split: splits.Split,
                   on_epoch=None) -> dict:
    has_valid = split.valid.nnz > 0
    seen = split.fold_validation().train         # train + validation: never the test item
    held_back = split.valid if has_valid else None
    if args.validation_only and not has_valid:
        raise DataError("--validation-only: this split has no validation part (--valid-ratio "
                        "0)")
    if not split.test.nnz and not args.validation_only:     # (a split's files are never empty)
        why = (f"--test-ratio {args.test_ratio:g} of {data.nnz} entries is none"
               if args.split == "random" else
               "leave-one-out tests the users with 2 or more interactions; there are none")
        raise DataError(f"{data.name}: the split has no test entries ({why}): there is nothing "
                        "to score")

    def logged(phase: str, part: Interactions, then=None):
        """callback of a fit: the phase in each record; with --curves, test (and explicit:
        training) figures after every epoch, never used to choose anything; then `then`."""
        scorers = {}

        def callback(fitted: NCAE, record: dict) -> None:
            record["phase"] = phase
            if args.curves and not scorers:
                scorers["test"] = fitted.evaluator(split.test, exclude=held_back)
                if not fitted.config.implicit:
                    scorers["train"] = fitted.evaluator(part)
            for name, score in scorers.items():
                record[name] = score()
            if then is not None:
                then(record)
        return callback

    print("select: training on the training part" + (", scoring validation after every epoch"
                                                     if has_valid else ""))
    start = time.perf_counter()
    model.fit(split.train, validation=held_back, epochs=args.epochs,
              callback=logged("select", split.train, on_epoch),
              checkpoint=args.out / "checkpoint-select.npz", resume=args.resume,
              checkpoint_every=args.checkpoint_every)
    # seconds of the fit that chose the epoch, and of the one whose model is tested
    seconds = {"seconds_select": time.perf_counter() - start}
    seconds["seconds_fit"] = seconds["seconds_select"]
    history, best_epoch = list(model.history), model.best_epoch
    still_improving = model.still_improving
    if still_improving:
        print(f"note: the best epoch is {best_epoch} of {args.epochs}: validation was still "
              "improving; more --epochs may help", flush=True)
    if args.validation_only:
        best = next(h for h in history if h["epoch"] == best_epoch and "valid" in h)
        result = {"valid": best["valid"]}
    else:
        if has_valid and args.refit:
            print(f"refit: best validation epoch {best_epoch}: retraining on training + "
                  f"validation for {best_epoch} epochs")
            model = new_model(args, model.ops)
            start = time.perf_counter()
            model.fit(seen, epochs=best_epoch, callback=logged("refit", seen),
                      checkpoint=args.out / "checkpoint-refit.npz", resume=args.resume,
                      checkpoint_every=args.checkpoint_every)
            seconds["seconds_fit"] = time.perf_counter() - start
            history += model.history
        result = {"test": model.evaluate(split.test, exclude=held_back, per_user=True)}
        if model.config.implicit:
            test = model.evaluate(split.test, exclude=held_back, popularity=True)
            result["pop"] = {k: v for k, v in test.items() if k != "clusters"}
        if args.baselines:
            from .baselines import compare      # (which imports this module: its data flags)
            result["baselines"] = compare(split, args.baselines, model.config.cutoffs,
                                          model.ops, args.seed)
    report(model, result)
    model.save(args.out / "model.npz")
    trained = [h["seconds"] for h in history if h["epoch"] > 0]
    summary = {
        "dataset": args.dataset, "device": model.ops.name, "config": recorded(args),
        "data": {"users": data.n_users, "items": data.n_items, "interactions": data.nnz,
                 "train": split.train.nnz, "valid": split.valid.nnz, "test": split.test.nnz},
        "notes": split.notes, "best_epoch": best_epoch, "still_improving": still_improving,
        "history": history,
        # the first epoch of a process also compiles the kernels (Numba's, or NVRTC's)
        "seconds_first_epoch": trained[0] if trained else None,
        "seconds_per_epoch": statistics.median(trained[1:]) if len(trained) > 1 else None,
        **seconds, "peak_rss_mb": peak_rss_mb(),
        **result}
    if model.comm is not None:
        comm = model.comm
        summary["shard"] = {"processes": comm.world, "columns": model.data.bounds.tolist(),
                            "collective_bytes_per_step": history[-1].get("collective_bytes")}
    if model.leader:
        text = json.dumps(summary, indent=2, default=float).encode()
        atomic_write(args.out / "metrics.json", lambda f: f.write(text))
    return summary


def peak_rss_mb() -> float | None:
    """This process's peak resident memory in MiB; None where the OS does not say (resource is
    POSIX's: Windows has none)."""
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(model: NCAE, result: dict) -> None:
    if "valid" in result:
        print(f"\nvalidation, best epoch {model.best_epoch}\n"
              + metrics.format_table([{"model": model.config.model_name, **result["valid"]}]))
        return
    test = result["test"]
    if model.config.implicit:
        rows = [{"model": model.config.model_name,
                 **{k: v for k, v in test.items() if k != "clusters"}},
                {"model": "POP", **result["pop"]},
                *({"model": r["name"], **r["test"]} for r in result.get("baselines", {}).values())]
    else:
        rows = [{"model": "NCAE", "rmse": test["rmse"], "entries": test["entries"]}]
    print("\ntest\n" + metrics.format_table(rows))
    print("\ntest by user's number of training entries\n"
          + metrics.format_table(test["clusters"]))


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The flags, over the recipe's settings where --config names one."""
    args = parser.parse_args(argv)
    if args.config is not None:
        try:
            recipe = read_recipe(args.config)
        except ValueError as e:
            parser.error(f"--config {args.config}: {e}")
        parser.set_defaults(**recipe)
        args = parser.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    resolve_defaults(parser, args)
    job = contextlib.nullcontext()
    if args.shard != "none":
        from . import distributed
        job = distributed.joined("gpu" if args.device == "gpu" or args.device == "auto"
                                 and HAS_CUDA else "cpu")
    try:
        with job:
            run(args)
    except NcaeError as e:
        rank = os.environ.get("RANK") if args.shard != "none" else None
        print(f"error{'' if rank is None else f' (rank {rank})'}: {e}", file=sys.stderr)
        return 2
    except stopping.Stopped as stop:
        print(f"\n{stop.signal_name}: stopped at the end of a training step: continue with "
              f"--resume --out {args.out}", file=sys.stderr)
        return 128 + signal.Signals[stop.signal_name]
    except KeyboardInterrupt:
        print(f"\ninterrupted: continue with --resume --out {args.out}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
