"""Train and evaluate NCAE.

    python -m ncae_cuda.train                          # built-in synthetic ratings, explicit
    python -m ncae_cuda.train --dataset ml-100k --data-dir ../shared/data --split u1
    python -m ncae_cuda.train --dataset ml-100k --data-dir ../shared/data --feedback implicit
    python -m ncae_cuda.train --out runs/a --resume    # continue an interrupted run

Protocol (DESIGN.md): train on the training part and score the validation part after every
epoch, keeping the best epoch (early stopping after --patience epochs without improvement);
then retrain from scratch on training + validation for that many epochs and score the test part
once (--no-refit scores the best-validation model instead). Without a validation part it trains
--epochs epochs. Explicit feedback is scored by RMSE over held-out ratings, implicit by HR@M and
NDCG@M of each user's held-out item ranked against every item the user has not interacted with,
next to the POP baseline.

Writes under --out: checkpoint-select.npz and checkpoint-refit.npz after every epoch of each
phase (what --resume continues from), model.npz (ncae_cuda.NCAE.load reads it; so does
python -m ncae_cuda.recommend) and metrics.json at the end. The CLI is a thin layer over
ncae_cuda.NCAE: the flags of the model are its settings, of the same names.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np

from . import datasets, metrics, splits
from .config import Config
from .data import DataError, Interactions
from .estimator import NCAE, OutOfMemory
from .evaluate import constant_scorer, ranking_report
from .ops import BackendUnavailable
from .ops.common import CSR
from .pretrain import VARIANTS

FILE_SPLITS = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")


# ---------------------------------------------------------------------------------------------
# command line

def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _fraction(low_open: bool, high_open: bool):
    def parse(text: str) -> float:
        value = float(text)
        above = 0 < value if low_open else 0 <= value
        below = value < 1 if high_open else value <= 1
        if not (above and below):
            bounds = f"{'(' if low_open else '['}0, 1{')' if high_open else ']'}"
            raise argparse.ArgumentTypeError(f"must be in {bounds}, got {text}")
        return value
    return parse


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ncae_cuda.train", description=__doc__.split("\n\n")[0],
        epilog="Data sets: " + ", ".join(datasets.names()) + ". Defaults follow the paper "
               "where it states them.", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--dataset", default="synthetic", help="named data set (see epilog)")
    g.add_argument("--data-dir", type=Path, help="folder with an extracted copy of the data set")
    g.add_argument("--cache-dir", type=Path, help="download cache (default $NCAE_CUDA_CACHE "
                   "or ~/.cache/ncae_cuda)")
    g.add_argument("--feedback", choices=("explicit", "implicit"),
                   help="default: the data set's own (ratings: explicit, HetRec: implicit)")
    g.add_argument("--split", choices=("random", "loo", *FILE_SPLITS),
                   help="random hold-out, leave-one-out by time, or ML-100K's u1..u5/ua/ub "
                        "files (default: random for explicit, loo for implicit)")
    g.add_argument("--test-ratio", type=_fraction(True, True), default=0.1,
                   help="random split: share of all entries held out for test")
    g.add_argument("--valid-ratio", type=_fraction(False, True), default=0.1,
                   help="share held out for validation: of all entries (random split) or of "
                        "the training file (u1..ub); 0 = no validation, train --epochs")
    g.add_argument("--data-ratio", type=_fraction(True, False), default=1.0,
                   help="the paper's D: keep this share of each row's training entries")
    g.add_argument("--split-seed", type=int, default=0, help="seed of the split and D-sample")

    g = p.add_argument_group("model")
    g.add_argument("--based", choices=("user", "item"),
                   help="rows the autoencoder encodes (default: item for explicit, user for "
                        "implicit, the paper's best)")
    g.add_argument("--hidden", type=_int_list, default=(500, 500),
                   help="hidden widths K1,K2,...: one number per hidden layer")
    g.add_argument("--dropout", type=_fraction(False, True), default=0.5,
                   help="input dropout rate q")
    g.add_argument("--alpha", type=_non_negative, default=1.0,
                   help="explicit: weight of errors on dropped inputs")
    g.add_argument("--beta", type=_non_negative, default=0.5,
                   help="explicit: weight of errors on kept inputs")
    g.add_argument("--variant", choices=("NCAE-", "NCAE", "NCAE+"),
                   help="implicit: the paper's named models, setting --weighting and "
                        "augmentation: NCAE- uniform weighting, NCAE popularity weighting, "
                        "NCAE+ popularity weighting and augmentation (the default)")
    g.add_argument("--weighting", choices=("popularity", "uniform"),
                   help="implicit: weights c_j of unobserved entries (default popularity; "
                        "uniform = NCAE-)")
    g.add_argument("--c0", type=_non_negative, default=512.0, help="popularity weighting: c0")
    g.add_argument("--omega", type=_non_negative, default=0.5, help="popularity weighting: w")
    g.add_argument("--uniform-c", type=_non_negative, default=0.05,
                   help="uniform weighting: the one c")
    g.add_argument("--augment-eps", type=_non_negative,
                   help="implicit: rows with |R_i|/N below this get an extra, sparser training "
                        "row (default 0.001; 0 = off)")
    g.add_argument("--augment-p", type=_fraction(True, False), default=0.8,
                   help="augmentation: the extra row drops this share of the row's most "
                        "popular items (1 = off)")
    g.add_argument("--pretrain", choices=VARIANTS, default="BP",
                   help="greedy layer-wise pre-training before fine-tuning: BP = none, "
                        "S+U+S = the paper's three stages (see ncae_cuda.pretrain)")
    g.add_argument("--pretrain-epochs", type=_positive_int, default=10,
                   help="epochs of each pre-training stage")

    g = p.add_argument_group("training")
    g.add_argument("--epochs", type=_positive_int, default=100, help="most epochs to train")
    g.add_argument("--patience", type=int, default=10,
                   help="stop after this many epochs without a better validation score (0: never)")
    g.add_argument("--no-refit", dest="refit", action="store_false",
                   help="score test with the best-validation model instead of retraining on "
                        "training + validation")
    g.add_argument("--batch-size", type=_positive_int, default=128)
    g.add_argument("--lr", type=_positive, default=1e-3, help="Adam learning rate")
    g.add_argument("--weight-decay", type=_non_negative, default=1e-3,
                   help="lambda: L2 on all weights and biases")
    g.add_argument("--seed", type=int, default=0, help="seed of init, shuffling and dropout")
    g.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    g.add_argument("--cuda-graphs", choices=("on", "off"),
                   help="GPU: replay each training step from a CUDA graph captured once, instead "
                        "of launching its kernels one by one (default: off, until a GPU "
                        "measurement shows it pays)")

    g = p.add_argument_group("evaluation and output")
    g.add_argument("--cutoffs", type=_int_list, default=(10, 100),
                   help="implicit: M of HR@M and NDCG@M; early stopping uses NDCG at the last")
    g.add_argument("--curves", action="store_true",
                   help="also score the training (explicit) and test parts after every epoch, "
                        "for learning curves; never used to choose anything")
    g.add_argument("--out", type=Path, default=Path("runs/ncae"),
                   help="folder for checkpoint-select.npz, checkpoint-refit.npz, model.npz, "
                        "metrics.json")
    g.add_argument("--resume", action="store_true",
                   help="continue the run whose checkpoint is in --out")
    return p


# ---------------------------------------------------------------------------------------------
# data

def resolve_defaults(parser, args) -> None:
    """Fill the defaults that depend on the data set and feedback; refuse bad combinations."""
    if args.dataset not in datasets.names():
        parser.error(f"unknown --dataset {args.dataset!r}; "
                     f"choose from {', '.join(datasets.names())}")
    args.feedback = args.feedback or datasets.default_feedback(args.dataset)
    args.split = args.split or ("random" if args.feedback == "explicit" else "loo")
    if args.feedback == "implicit" and args.split != "loo":
        parser.error("implicit feedback is evaluated by leave-one-out: use --split loo")
    try:
        config = Config(**model_settings(args)).resolved()
    except ValueError as e:
        parser.error(str(e))
    for name in ("based", "weighting", "augment_eps"):       # the defaults, as trained
        setattr(args, name, getattr(config, name))


def model_settings(args) -> dict:
    """The flags that are settings of the model (ncae_cuda.config.Config)."""
    return {f.name: getattr(args, f.name) for f in fields(Config) if hasattr(args, f.name)}


def recorded(args) -> dict:
    """Every setting of the run, for metrics.json: what another run needs to repeat it."""
    skip = ("out", "resume", "device", "data_dir", "cache_dir", "cuda_graphs")
    return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(args).items()
            if k not in skip}


def prepare(args, device: str) -> tuple[Interactions, splits.Split]:
    """Load and split the data, and say what will be trained on what."""
    data = datasets.load(args.dataset, data_dir=args.data_dir, cache_dir=args.cache_dir)
    if args.feedback == "explicit" and data.ratings is None:
        raise DataError(f"{args.dataset} has no ratings: use --feedback implicit")
    split = make_split(args, data)
    print(f"{data.name}: {data.n_users} users x {data.n_items} items, {data.nnz} interactions | "
          f"train {split.train.nnz}, valid {split.valid.nnz}, test {split.test.nnz} | "
          f"{args.feedback}, {args.based}-based, hidden {list(args.hidden)}, device {device}")
    if data.n_duplicates_merged:
        print(f"note: {data.n_duplicates_merged} duplicate (user, item) records merged into "
              "others (rule: ncae_cuda.data)")
    for note in split.notes:
        print(f"note: {note}")
    return data, split


def make_split(args, data: Interactions) -> splits.Split:
    if args.split == "loo":
        split = splits.leave_one_out(data, seed=args.split_seed)
    elif args.split == "random":
        split = splits.random_split(data, args.test_ratio, args.valid_ratio, seed=args.split_seed)
    else:
        base, test = datasets.load_split(args.dataset, args.split, args.data_dir, args.cache_dir)
        split = splits.file_split(data, base, test)
        if args.valid_ratio > 0:
            split = splits.carve_validation(split, args.valid_ratio, seed=args.split_seed)
    if args.data_ratio < 1:
        train = splits.subsample(split.train, args.data_ratio, seed=args.split_seed,
                                 based=args.based)
        split = splits.Split(train, split.valid, split.test, split.notes + [
            f"D = {args.data_ratio:g}: trained on {train.nnz} of {split.train.nnz} entries"])
    return split


# ---------------------------------------------------------------------------------------------
# the protocol: select the epoch on validation, refit, test once

def run(args) -> dict:
    model = NCAE(device=args.device, **model_settings(args))
    if args.cuda_graphs is not None:
        if model.ops.name != "gpu":
            raise BackendUnavailable(f"--cuda-graphs is for the GPU backend; this run is on the "
                                     f"{model.ops.name} backend")
        model.ops.graphs = args.cuda_graphs == "on"
    with model.ops.session():
        data, split = prepare(args, model.ops.name)
    return train_and_test(args, model, data, split)


def train_and_test(args, model: NCAE, data: Interactions, split: splits.Split) -> dict:
    args.out.mkdir(parents=True, exist_ok=True)
    select_checkpoint = args.out / "checkpoint-select.npz"
    if args.resume and not select_checkpoint.exists():
        raise DataError(f"--resume: no checkpoint at {select_checkpoint}")
    has_valid = split.valid.nnz > 0
    seen = split.fold_validation().train         # train + validation: never the test item
    held_back = split.valid if has_valid else None

    def logged(phase: str, part: Interactions):
        """callback of a fit: the phase in each record; with --curves, test (and explicit:
        training) figures after every epoch, never used to choose anything."""
        scorers = {}

        def callback(fitted: NCAE, record: dict) -> None:
            record["phase"] = phase
            if args.curves and not scorers:
                scorers["test"] = fitted.evaluator(split.test, exclude=held_back)
                if not fitted.config.implicit:
                    scorers["train"] = fitted.evaluator(part)
            for name, score in scorers.items():
                record[name] = score()
        return callback

    print("select: training on the training part" + (", scoring validation after every epoch"
                                                     if has_valid else ""))
    model.fit(split.train, validation=held_back, epochs=args.epochs,
              callback=logged("select", split.train), checkpoint=select_checkpoint,
              resume=args.resume)
    history, best_epoch = list(model.history), model.best_epoch
    trained_on = split.train
    if has_valid and args.refit:
        print(f"refit: best validation epoch {best_epoch}: retraining on training + "
              f"validation for {best_epoch} epochs")
        trained_on = seen
        model = NCAE(device=model.ops, **model_settings(args))
        model.fit(trained_on, epochs=best_epoch, callback=logged("refit", seen),
                  checkpoint=args.out / "checkpoint-refit.npz", resume=args.resume)
        history += model.history

    result = {"test": model.evaluate(split.test, exclude=held_back, per_user=True)}
    if model.config.implicit:
        pop = metrics.popularity_scores(np.bincount(trained_on.items, minlength=data.n_items))
        exclude = CSR.from_scipy(model.ops, seen.to_csr("user", implicit=True))
        with model.ops.session():
            result["pop"] = ranking_report(model.ops, constant_scorer(model.ops, pop), exclude,
                                           split.test.users, split.test.items, args.cutoffs)
    report(model, result)
    model.save(args.out / "model.npz")
    trained = [h["seconds"] for h in history if h["epoch"] > 0]
    summary = {
        "dataset": args.dataset, "device": model.ops.name, "config": recorded(args),
        "data": {"users": data.n_users, "items": data.n_items, "interactions": data.nnz,
                 "train": split.train.nnz, "valid": split.valid.nnz, "test": split.test.nnz},
        "notes": split.notes, "best_epoch": best_epoch,
        "history": history, "seconds_per_epoch": float(np.mean(trained)) if trained else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **result}
    (args.out / "metrics.json").write_text(json.dumps(summary, indent=2, default=float))
    return summary


def report(model: NCAE, result: dict) -> None:
    test = result["test"]
    if model.config.implicit:
        rows = [{"model": model.config.model_name,
                 **{k: v for k, v in test.items() if k != "clusters"}},
                {"model": "POP", **result["pop"]}]
    else:
        rows = [{"model": "NCAE", "rmse": test["rmse"], "entries": test["entries"]}]
    print("\ntest\n" + metrics.format_table(rows))
    print("\ntest by user's number of training entries\n"
          + metrics.format_table(test["clusters"]))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    resolve_defaults(parser, args)
    try:
        run(args)
    except (DataError, BackendUnavailable, FloatingPointError, OutOfMemory) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: continue with --resume --out {args.out}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
