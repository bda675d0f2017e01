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

Writes under --out: checkpoint.npz after every epoch (what --resume continues from), model.npz
and metrics.json at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from . import datasets, loop, metrics, splits
from .augment import column_counts, popularity_weights, sparse_row_copies, uniform_weights
from .data import DataError, Interactions
from .evaluate import constant_scorer, heldout_ranks, model_scorer, predict_ratings
from .layout import AdamConfig, NCAELayout
from .loop import Schedule, trainable_rows
from .model import Network, Objective
from .ops import BackendUnavailable, get_backend
from .ops.common import CSR
from .pretrain import VARIANTS, Stage, pretrain

FILE_SPLITS = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")
CHECKPOINT_VERSION = 2


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

    g = p.add_argument_group("evaluation and output")
    g.add_argument("--cutoffs", type=_int_list, default=(10, 100),
                   help="implicit: M of HR@M and NDCG@M; early stopping uses NDCG at the last")
    g.add_argument("--curves", action="store_true",
                   help="also score the training (explicit) and test parts after every epoch, "
                        "for learning curves; never used to choose anything")
    g.add_argument("--out", type=Path, default=Path("runs/ncae"),
                   help="folder for checkpoint.npz, model.npz, metrics.json")
    g.add_argument("--resume", action="store_true",
                   help="continue the run whose checkpoint is in --out")
    return p


# ---------------------------------------------------------------------------------------------
# the experiment: data, split and the feedback-specific evaluation

@dataclass
class Experiment:
    args: argparse.Namespace
    ops: object
    data: Interactions
    split: splits.Split

    @property
    def implicit(self) -> bool:
        return self.args.feedback == "implicit"

    @property
    def n_cols(self) -> int:
        return self.data.n_items if self.args.based == "user" else self.data.n_users

    def oriented(self, part: Interactions) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of the part's entries in the network's rows x columns view."""
        return (part.users, part.items) if self.args.based == "user" else (part.items, part.users)

    def matrix(self, part: Interactions):
        """The part as the network's rows x columns CSR on the device."""
        return CSR.from_scipy(self.ops, part.to_csr(self.args.based, implicit=self.implicit))

    def training_matrix(self, part: Interactions) -> CSR:
        """The part as the network trains on it: with augmentation's extra rows after the
        real ones (implicit feedback, --augment-eps > 0)."""
        m = part.to_csr(self.args.based, implicit=self.implicit)
        if self.implicit and self.args.augment_eps > 0:
            extra = sparse_row_copies(m, self.args.augment_eps, self.args.augment_p)
            print(f"note: augmentation: {extra.shape[0]} extra training rows (rows with "
                  f"|R|/N < {self.args.augment_eps:g}, {self.args.augment_p:g} of their most "
                  "popular items dropped)")
            m = sp.vstack([m, extra], format="csr")
        return CSR.from_scipy(self.ops, m)

    def objective(self) -> Objective:
        if self.implicit:
            return Objective.implicit()
        return Objective.explicit(*self.data.rating_scale, self.args.alpha, self.args.beta)

    def col_weights(self, part: Interactions) -> np.ndarray | None:
        if not self.implicit:
            return None
        if self.args.weighting == "uniform":
            return uniform_weights(self.n_cols, self.args.uniform_c)
        counts = column_counts(self.oriented(part)[1], self.n_cols)
        return popularity_weights(counts, self.args.c0, self.args.omega)

    def new_network(self, part: Interactions) -> Network:
        layout = NCAELayout(self.n_cols, self.args.hidden)
        params = layout.xavier_init(np.random.default_rng(self.args.seed))
        return Network(layout, self.ops, self.objective(), params, self.col_weights(part))

    def selection_metric(self) -> tuple[str, bool]:
        """(name, higher is better) of the validation figure that early stopping follows."""
        return (f"ndcg@{self.args.cutoffs[-1]}", True) if self.implicit else ("rmse", False)

    def evaluator(self, inputs: Interactions, held: Interactions, seen: Interactions):
        """score(net, per_user=False) -> metrics of `held`, each row encoded from `inputs`;
        implicit candidates exclude `seen`. The device matrices are built once, here.

        per_user adds the per-cluster table (users grouped by their number of inputs)."""
        inputs_csr = self.matrix(inputs)
        user_counts = np.bincount(inputs.users, minlength=self.data.n_users)
        if self.implicit:
            ranking = self._ranking(held, seen, user_counts)
            return lambda net, per_user=False: ranking(
                model_scorer(net, inputs_csr, self.args.based), per_user)
        rows, cols = self.oriented(held)

        def score(net: Network, per_user: bool = False) -> dict:
            yhat = predict_ratings(net, inputs_csr, rows, cols)
            result = {"rmse": metrics.rmse(yhat, held.ratings), "entries": held.nnz}
            if per_user:
                sq_sum, n = metrics.row_squared_errors(held.users, yhat, held.ratings,
                                                       self.data.n_users)
                rated = n > 0
                counts = user_counts[rated]
                result["clusters"] = metrics.cluster_table(
                    counts, metrics.cluster_edges(counts), rmse=(sq_sum[rated], n[rated]))
            return result
        return score

    def evaluate_pop(self, inputs: Interactions, held: Interactions, seen: Interactions) -> dict:
        """The POP baseline through the same ranking code."""
        pop = metrics.popularity_scores(np.bincount(inputs.items, minlength=self.data.n_items))
        return self._ranking(held, seen, None)(constant_scorer(self.ops, pop), False)

    def out_of_memory(self, error: MemoryError) -> str:
        """What needed the memory, with the sizes, and the flag that lowers each."""
        mib = 4 / 2**20                                         # float32 MiB
        size = NCAELayout(self.n_cols, self.args.hidden).size
        lines = [f"out of memory on the {self.ops.name} backend ({error})",
                 f"  parameters, gradients and Adam's m, v: 4 x {size:,} floats = "
                 f"{4 * size * mib:,.0f} MiB (lower --hidden)"]
        if self.implicit:
            B, N = self.args.batch_size, self.n_cols
            lines.append(f"  dense output of a batch: about 3 x {B} x {N:,} floats = "
                         f"{3 * B * N * mib:,.0f} MiB (lower --batch-size)")
            if self.args.based == "item":
                lines.append(f"  item-based evaluation scores: {self.data.n_users:,} x "
                             f"{self.data.n_items:,} floats = "
                             f"{self.data.n_users * self.data.n_items * mib:,.0f} MiB "
                             f"(use --based user)")
        return "\n".join(lines + ["  or train with --device cpu"])

    def _ranking(self, held: Interactions, seen: Interactions, user_counts):
        """rank(scorer, per_user) -> HR/NDCG of each user's held-out item."""
        exclude = CSR.from_scipy(self.ops, seen.to_csr("user", implicit=True))

        def rank(scorer, per_user: bool) -> dict:
            ranks = heldout_ranks(self.ops, scorer, exclude, held.users, held.items)
            result = metrics.ranking_summary(ranks, self.args.cutoffs)
            if per_user:
                per_row = {}
                for m in self.args.cutoffs:
                    per_row[f"hr@{m}"] = metrics.hit_rate(ranks, m)
                    per_row[f"ndcg@{m}"] = metrics.ndcg(ranks, m)
                counts = user_counts[held.users]
                result["clusters"] = metrics.cluster_table(
                    counts, metrics.cluster_edges(counts), means=per_row)
            return result
        return rank


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


def resolve_defaults(parser, args) -> None:
    """Fill the defaults that depend on the data set and feedback; refuse bad combinations."""
    if args.dataset not in datasets.names():
        parser.error(f"unknown --dataset {args.dataset!r}; "
                     f"choose from {', '.join(datasets.names())}")
    args.feedback = args.feedback or datasets.default_feedback(args.dataset)
    args.based = args.based or ("item" if args.feedback == "explicit" else "user")
    args.split = args.split or ("random" if args.feedback == "explicit" else "loo")
    if args.feedback == "implicit" and args.split != "loo":
        parser.error("implicit feedback is evaluated by leave-one-out: use --split loo")
    resolve_variant(parser, args)
    if args.patience < 0:
        parser.error("--patience must be >= 0")


VARIANT_SETTINGS = {"NCAE-": ("uniform", False), "NCAE": ("popularity", False),
                    "NCAE+": ("popularity", True)}   # weighting, augmentation
DEFAULT_AUGMENT_EPS = 0.001


def resolve_variant(parser, args) -> None:
    """--variant, --weighting and --augment-eps: implicit settings that must agree."""
    if args.feedback == "explicit":
        for flag, value in (("--variant", args.variant), ("--weighting", args.weighting),
                            ("--augment-eps", args.augment_eps)):
            if value:
                parser.error(f"{flag} is for implicit feedback")
        args.augment_eps = 0.0
        args.weighting = "popularity"       # unused, recorded as the default
        return
    weighting, augmented = VARIANT_SETTINGS[args.variant or "NCAE+"]
    if args.variant and args.weighting not in (None, weighting):
        parser.error(f"--variant {args.variant} uses --weighting {weighting}")
    if args.variant and not augmented and args.augment_eps:
        parser.error(f"--variant {args.variant} has no augmentation: drop --augment-eps")
    args.weighting = args.weighting or weighting
    if args.augment_eps is None:
        args.augment_eps = DEFAULT_AUGMENT_EPS if augmented else 0.0


# ---------------------------------------------------------------------------------------------
# training

@dataclass
class Progress:
    """Everything a run needs to continue after an interruption; saved after every epoch."""
    phase: str = "select"             # 'select' (train, score validation), 'refit', 'done'
    epoch: int = 0                    # epochs finished in this phase
    pretrained: bool = False          # the phase's pre-training (if any) is done
    finished: bool = False            # the phase is over (early stop or last epoch)
    best_epoch: int = 0
    best_value: float | None = None
    bad_epochs: int = 0
    history: list = field(default_factory=list)


def run_phase(exp: Experiment, net: Network, part: Interactions, progress: Progress,
              epochs: int, valid: Interactions | None, checkpoint, curves: dict) -> Network:
    """Pre-train `net` (if asked), then train it on `part` up to `epochs` epochs, scoring
    `valid` (if any) and the `curves` evaluators after each; epoch 0 is the pre-trained net."""
    args, ops = exp.args, exp.ops
    adam = AdamConfig(args.lr, weight_decay=args.weight_decay)
    schedule = Schedule(args.seed, args.batch_size, args.dropout)
    csr = exp.training_matrix(part)
    rows = trainable_rows(csr)
    scorers = dict(curves)
    if valid is not None:
        scorers["valid"] = exp.evaluator(part, valid, seen=part)
    if not progress.pretrained:
        checkpoint.save(net, progress)                   # resume re-runs pre-training from here
        if args.pretrain != "BP":
            start = time.perf_counter()
            losses = pretrain(net, Stage(ops, csr, rows, schedule, adam, args.pretrain_epochs),
                              args.pretrain)
            record = {"phase": progress.phase, "epoch": 0, "pretrain": losses,
                      "seconds": time.perf_counter() - start}
            line = f"{progress.phase} epoch   0 | pre-trained {args.pretrain}"
            print(_score(exp, net, progress, record, line, scorers, checkpoint), flush=True)
            progress.history.append(record)
        progress.pretrained = True
        checkpoint.save(net, progress)
    while progress.epoch < epochs and not progress.finished:
        epoch = progress.epoch + 1
        start = time.perf_counter()
        loss = loop.run_epoch(lambda batch, keep, scale: net.train_step(batch, keep, scale, adam),
                              ops, csr, rows, schedule, epoch, f"{progress.phase} {epoch}")
        seconds = time.perf_counter() - start
        record = {"phase": progress.phase, "epoch": epoch, "loss": loss,
                  "l2": net.l2_penalty(args.weight_decay), "seconds": seconds}
        line = f"{progress.phase} epoch {epoch:3d} | loss {loss:.4f}"
        line = _score(exp, net, progress, record, line, scorers, checkpoint)
        print(f"{line} | {seconds:.2f} s", flush=True)
        progress.history.append(record)
        progress.epoch = epoch
        progress.finished = (epoch == epochs or (valid is not None and args.patience > 0
                                                 and progress.bad_epochs >= args.patience))
        checkpoint.save(net, progress)
    return net


def _score(exp: Experiment, net: Network, progress: Progress, record: dict, line: str,
           scorers: dict, checkpoint) -> str:
    """Score the epoch's net into `record`, follow the best validation epoch; returns the
    log line with the validation figure added."""
    start = time.perf_counter()
    for part, score in scorers.items():
        record[part] = score(net)
    record["eval_seconds"] = time.perf_counter() - start
    if "valid" not in record:
        return line
    name, higher = exp.selection_metric()
    value = record["valid"][name]
    if progress.best_value is None or (value > progress.best_value if higher
                                       else value < progress.best_value):
        progress.best_value, progress.best_epoch, progress.bad_epochs = value, record["epoch"], 0
        checkpoint.keep_best(net)
    else:
        progress.bad_epochs += 1
    return f"{line} | valid {name} {value:.4f}"


# ---------------------------------------------------------------------------------------------
# checkpoints

RESUMABLE = ("dataset", "feedback", "based", "split", "test_ratio", "valid_ratio",
             "data_ratio", "split_seed", "hidden", "dropout", "alpha", "beta", "variant",
             "weighting", "c0", "omega", "uniform_c", "augment_eps", "augment_p", "pretrain",
             "pretrain_epochs", "patience", "refit", "batch_size", "lr", "weight_decay", "seed",
             "cutoffs", "curves")


def _config(args) -> dict:
    """The settings a resumed run must share with the run it continues."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(args).items()
            if k in RESUMABLE}


class Checkpoint:
    """checkpoint.npz in --out: the (4, P) state, Adam's step, the best parameters, Progress."""

    def __init__(self, out: Path, args):
        self.path, self.args = out / "checkpoint.npz", args
        self.best = None                                   # host copy of the best params

    def keep_best(self, net: Network) -> None:
        self.best = net.ops.to_host(net.params).copy()

    def save(self, net: Network, progress: Progress) -> None:
        meta = {"version": CHECKPOINT_VERSION, "config": _config(self.args), "steps": net.steps,
                "progress": vars(progress)}
        arrays = {"state": net.ops.to_host(net.state), "meta": np.array(json.dumps(meta))}
        if self.best is not None:
            arrays["best"] = self.best
        atomic_savez(self.path, arrays)

    def load(self, net_for) -> tuple[Network | None, Progress]:
        """(network restored from the checkpoint, its Progress); net_for(progress) builds the
        network of the checkpoint's phase for the state to be loaded into."""
        if not self.path.exists():
            raise DataError(f"--resume: no checkpoint at {self.path}")
        with np.load(self.path) as f:
            meta = json.loads(str(f["meta"]))
            if meta.get("version") != CHECKPOINT_VERSION:
                raise DataError(f"{self.path}: checkpoint version {meta.get('version')}, "
                                f"this ncae_cuda writes {CHECKPOINT_VERSION}")
            changed = {k: (v, _config(self.args).get(k)) for k, v in meta["config"].items()
                       if _config(self.args).get(k) != v}
            if changed:
                detail = ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in changed.items())
                raise DataError(f"--resume with other settings than the checkpoint ({detail})")
            progress = Progress(**meta["progress"])
            self.best = f["best"] if "best" in f.files else None
            net = net_for(progress)
            net.state[...] = net.ops.to_device(f["state"])
            net.steps = meta["steps"]
        return net, progress


def atomic_savez(path: Path, arrays: dict) -> None:
    """Write to a temporary file and rename: a killed run never leaves a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# main

class OutOfMemory(RuntimeError):
    pass


def run(args) -> dict:
    ops = get_backend(args.device)
    with ops.session():
        exp = prepare(args, ops)
        try:
            return train_and_test(exp)
        except MemoryError as e:          # CuPy's OutOfMemoryError is a MemoryError too
            raise OutOfMemory(exp.out_of_memory(e)) from None


def prepare(args, ops) -> Experiment:
    """Load and split the data, and say what will be trained on what."""
    data = datasets.load(args.dataset, data_dir=args.data_dir, cache_dir=args.cache_dir)
    if args.feedback == "explicit" and data.ratings is None:
        raise DataError(f"{args.dataset} has no ratings: use --feedback implicit")
    split = make_split(args, data)
    print(f"{data.name}: {data.n_users} users x {data.n_items} items, {data.nnz} interactions | "
          f"train {split.train.nnz}, valid {split.valid.nnz}, test {split.test.nnz} | "
          f"{args.feedback}, {args.based}-based, hidden {list(args.hidden)}, device {ops.name}")
    if data.n_duplicates_merged:
        print(f"note: {data.n_duplicates_merged} duplicate (user, item) records merged into "
              "others (rule: ncae_cuda.data)")
    for note in split.notes:
        print(f"note: {note}")
    return Experiment(args, ops, data, split)


def train_and_test(exp: Experiment) -> dict:
    args, ops, data, split = exp.args, exp.ops, exp.data, exp.split
    args.out.mkdir(parents=True, exist_ok=True)
    checkpoint = Checkpoint(args.out, args)
    has_valid = split.valid.nnz > 0
    trained_on = split.fold_validation().train if has_valid and args.refit else split.train
    seen = split.fold_validation().train         # the test item is never among these

    def curves(part: Interactions) -> dict:
        """--curves: the evaluators scored after every epoch beside validation."""
        if not args.curves:
            return {}
        scorers = {"test": exp.evaluator(part, split.test, seen)}
        if not exp.implicit:
            scorers["train"] = exp.evaluator(part, part, part)
        return scorers

    def network_for(progress: Progress) -> Network:
        return exp.new_network(trained_on if progress.phase == "refit" else split.train)

    if args.resume:
        net, progress = checkpoint.load(network_for)
        print(f"resuming {progress.phase} after epoch {progress.epoch}")
    else:
        progress = Progress()
        net = network_for(progress)

    if progress.phase == "select":
        run_phase(exp, net, split.train, progress, args.epochs,
                  split.valid if has_valid else None, checkpoint, curves(split.train))
        if has_valid and args.refit:
            print(f"best validation epoch {progress.best_epoch}: retraining on training + "
                  f"validation for {progress.best_epoch} epochs")
            progress = Progress(phase="refit", best_epoch=progress.best_epoch,
                                best_value=progress.best_value, history=progress.history)
            net = network_for(progress)
    if progress.phase == "refit":
        run_phase(exp, net, trained_on, progress, progress.best_epoch, None, checkpoint,
                  curves(trained_on))
    if has_valid and not args.refit:
        net.params[...] = ops.to_device(checkpoint.best)

    result = {"test": exp.evaluator(trained_on, split.test, seen)(net, per_user=True)}
    if exp.implicit:
        result["pop"] = exp.evaluate_pop(trained_on, split.test, seen)
    report(exp, progress, result, args)
    save_model(args.out / "model.npz", net, exp)
    summary = {
        "dataset": args.dataset, "device": ops.name, "config": _config(args),
        "data": {"users": data.n_users, "items": data.n_items, "interactions": data.nnz,
                 "train": split.train.nnz, "valid": split.valid.nnz, "test": split.test.nnz},
        "notes": split.notes, "best_epoch": progress.best_epoch, "history": progress.history,
        "seconds_per_epoch": float(np.mean([h["seconds"] for h in progress.history
                                            if h["epoch"] > 0])),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **result}
    (args.out / "metrics.json").write_text(json.dumps(summary, indent=2, default=float))
    progress.phase = "done"
    checkpoint.save(net, progress)
    return summary


def model_name(args) -> str:
    """The paper's name of an implicit model: NCAE-, NCAE or NCAE+ (or its settings)."""
    for name, (weighting, augmented) in VARIANT_SETTINGS.items():
        if args.weighting == weighting and (args.augment_eps > 0) == augmented:
            return name
    return f"NCAE ({args.weighting} weighting, augmented)"


def report(exp: Experiment, progress: Progress, result: dict, args) -> None:
    test = result["test"]
    if exp.implicit:
        rows = [{"model": model_name(args), **{k: v for k, v in test.items() if k != "clusters"}},
                {"model": "POP", **result["pop"]}]
    else:
        rows = [{"model": "NCAE", "rmse": test["rmse"], "entries": test["entries"]}]
    print("\ntest\n" + metrics.format_table(rows))
    print("\ntest by user's number of training entries\n"
          + metrics.format_table(test["clusters"]))


def save_model(path: Path, net: Network, exp: Experiment) -> None:
    meta = {"hidden": list(net.layout.hidden), "n_cols": net.layout.n_cols,
            "objective": vars(net.objective), "config": _config(exp.args)}
    arrays = {"params": net.ops.to_host(net.params), "meta": np.array(json.dumps(meta)),
              "user_ids": exp.data.user_ids, "item_ids": exp.data.item_ids}
    if net.col_weights is not None:
        arrays["col_weights"] = net.ops.to_host(net.col_weights)
    atomic_savez(path, arrays)


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
