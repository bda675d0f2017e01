"""Search the model's settings for a data set with Optuna, scored on validation only.

    python -m ncae_cuda.tune --dataset ml-100k --split u1 --config recipes/ml-100k-explicit.toml \\
        --trials 30 --budget 60 --jobs 2 --out runs/tune-u1
    python -m ncae_cuda.tune ... --storage postgresql://USER@HOST/DB --study u1   # on each machine
    python -m ncae_cuda.tune --model ials --dataset lastfm-2k --trials 40 --out runs/tune-ials

--model tunes a baseline (EASE, iALS, BPR, item-kNN, RP3beta) by the same sampler, pruner,
budget and split seeds: a trial fits it on the training part and scores the validation part by
NCAE's evaluator (iALS and BPR after each iteration, keeping the best, the pruner hearing each
as it hears NCAE's epochs); its best.toml is a recipe for python -m ncae_cuda.baselines
--config. For NCAE, each trial is a trainer run (python -m ncae_cuda.train --validation-only:
the epoch chosen on validation, the test part never scored) in --out/trials/NNNN/, with the
recipe's settings (--config) and the trial's values of the space's (--space,
ncae_cuda/runs/space.py; by default the package's space of the run's feedback,
ncae_cuda/runs/spaces/) over them, the data flags given here and --seed; with --split-seeds, a
run on each of these splits and the mean of their validation scores. A trial's score is the
validation figure its early stopping follows (RMSE, or NDCG at the last cutoff), or for implicit
feedback Recall at the last cutoff with --metric recall (at the epoch of the best NDCG). The
space's settings that weigh a user's interactions by their time (space.TIMED) are left out, at
the recipe's values, where the data has no timestamps or the model cannot weigh its rows; a
recipe that weighs by time on data without timestamps is refused. The package's space leaves
out, in a line, the settings the recipe leaves unread or holds at one value (NCAE-'s c0, omega
and augment_eps); a --space naming one is refused. The first trial is the recipe's own values of
the space's settings (so the best is never behind the recipe); then Optuna's TPE sampler,
seeded, draws the values. A trial that falls behind the others at the same epoch stops there
(--pruner: the median of the earlier trials, or successive halving), heard after every epoch
through the trainer's callback.

The study lives in a storage: by default a journal file in --out (workers on one machine);
--storage sqlite:///FILE, or postgresql://... for workers on many machines, each running the same
command against one study (its own --out: its trials' folders; the study's --jobs, --device
and --pruner, as its --seed and space, are its own: a command with others is refused).
--jobs N runs N worker
processes (ncae_cuda.runs.pool's slots: the cores shared out, --gpus one each), each taking trials
until the study has --trials of them finished (complete or pruned), or until --budget minutes
of this command's wall time have passed: then no worker starts another trial (each starts at
least one), the trials running finish, and the outputs are written of the study so far (the
same command again continues it, with a budget of its own); Ctrl-C (SIGINT) or SIGTERM stops
the workers within moments, each where a stop cuts no write to the study's storage short: a
trial under way ends at its fit's next step (NCAE's training step, iALS's or BPR's iteration),
marked failed, or finishes (a model fit in one go; a second signal stops them at once), and
the outputs are written of the trials finished. A worker prints a line a trial: its
settings, its score, the best so far, the time since the command started and the time left,
against --trials and --budget; Numba's compile of the kernels (a fresh install's first trial)
is left out of a trial's seconds and of the budget, and said apart, so that every model's
study is clocked alike. A trial whose worker dies is marked failed (on this machine at
once, by its worker's lock; elsewhere once its heartbeat is GRACE seconds old) and the study
goes on; the same command again continues the study (its recipe's trial again, where that
failed), and refuses a storage that has lost trials run in --out (a journal emptied or
replaced) rather than start over on top of them; a full disk stops the study. At the end, in
--out: best.toml, a recipe for train --config whose comment names the study, the trial and its
validation score (tune.json records that trial: only the study that holds it replaces it, with
a best no worse); trials.csv, every trial; tune.png, the score against the trial and each
setting's effect. Needs the [tune] extra (Optuna, and
psycopg for PostgreSQL).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from .. import cli
from ..data import datasets
from ..errors import NcaeError
from ..model.config import DEFAULTS
from ..runs import pool, space, tune_study
from ..runs.spec import RunSpec, SpecError
from ..runs.study_storage import JOURNAL
from ..runs.tune_spec import TuneSpec
from ..runs.tuning import (
    DISK_FULL,
    PRUNE_AFTER_EPOCHS,
    PRUNE_AFTER_TRIALS,
    RANKING_FIGURES,
    disk_full,
    setup,
)
from . import flags


def build_parser() -> argparse.ArgumentParser:
    p = cli.Parser(
        prog="python -m ncae_cuda.tune", description=__doc__.split("\n\n")[0],
        epilog="Data sets: " + ", ".join(datasets.names()) + ". The study, "
        "its storage, workers and outputs: see the module's docstring (pydoc ncae_cuda.tune).")
    g = p.add_argument_group("the search")
    g.add_argument("--model", choices=space.TUNED,
                   help="the model the trials fit: NCAE, or a baseline scored by the same "
                        "evaluator on the same validation part, its iteration count (iALS, "
                        "BPR) chosen as NCAE's epoch is (default: the recipe's, or else ncae)")
    g.add_argument("--config", type=Path, metavar="RECIPE",
                   help="the settings the space does not search (a recipe, recipes/; a "
                        "baseline's names it: model = \"ials\") (default: the model's "
                        "defaults)")
    g.add_argument("--space", type=Path, metavar="SPACE.toml",
                   help="the settings to search, their ranges and choices (default: the "
                        "package's space of the model (NCAE's of the run's feedback), "
                        "ncae_cuda/runs/spaces/explicit.toml, implicit.toml, ials.toml, ...; "
                        "the settings that weigh by time are searched only where the data has "
                        "timestamps)")
    g.add_argument("--trials", type=cli.count, default=30,
                   help="finished trials (complete or pruned) the study ends with, over every "
                        "worker and rerun (default: %(default)s)")
    g.add_argument("--budget", type=_minutes, metavar="MINUTES",
                   help="this command's wall time: once it has passed no worker starts a trial "
                        "(each starts at least one; those running finish) and the study so far "
                        "is written; with --trials, whichever comes first; the same command "
                        "again continues the study with a budget of its own (default: none)")
    g.add_argument("--pruner", choices=("median", "halving", "none"), default="median",
                   help=f"stop a trial at an epoch where it falls behind: median of the earlier "
                        f"trials there, or successive halving; from epoch {PRUNE_AFTER_EPOCHS} "
                        f"and {PRUNE_AFTER_TRIALS} trials on; the study's own, as its --seed "
                        "and space are (default: %(default)s)")
    g.add_argument("--metric", choices=RANKING_FIGURES,
                   help="implicit feedback: the validation figure at the last cutoff a trial is "
                        "scored by, NDCG@M or Recall@M of each user's held-out items (a trial's "
                        "epoch is still the one of the best NDCG, as the trainer chooses it) "
                        f"(default: {RANKING_FIGURES[0]})")
    g.add_argument("--cutoffs", type=cli.int_list, metavar="M1,M2,...",
                   help="a baseline's study: the M of HR@M and NDCG@M, the last the one a "
                        "trial is scored by, as NCAE's recipe's cutoffs are NCAE's (train "
                        "--baselines gives NCAE's) (default: "
                        f"{','.join(map(str, DEFAULTS.cutoffs))})")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of the sampler and of every trial's training (default: "
                        "%(default)s)")
    g.add_argument("--split-seeds", type=cli.int_list, metavar="S1,S2,...",
                   help="score a trial by the mean of its validation score over these splits "
                        "(a fit each; the pruner hears the first's epochs): where one split's "
                        "validation part is small, e.g. one item a user (default: --split-seed "
                        "alone)")
    flags.add_data_flags(p)
    g = p.add_argument_group("the study and its workers")
    g.add_argument("--out", type=Path, required=True,
                   help="folder of the trials' runs, the outputs and the default storage")
    g.add_argument("--storage", metavar="URL",
                   help="sqlite:///FILE (one machine) or postgresql://USER[:PASSWORD]@HOST[:PORT]"
                        "/DB (many machines, each running this command) (default: a journal "
                        f"file, --out/{JOURNAL})")
    g.add_argument("--study", help="the study's name in the storage (default: --out's name)")
    cli.add_slot_flags(g)
    cli.add_fields(g, RunSpec, ("device",),
                   helps={"device": "the trials' device, the study's own as its --jobs "
                                    "and --pruner are (default: %(default)s)"})
    g.add_argument("--overwrite", action="store_true",
                   help="start over: remove the study from the storage and its trials from "
                        "--out")
    g.add_argument("--worker", type=int, help=argparse.SUPPRESS)     # a worker process's number
    g.add_argument("--started", type=float, help=argparse.SUPPRESS)  # the command's start
    return p                                                          # (time.monotonic)


def _minutes(text: str) -> float:
    """An argparse type: a number of minutes > 0."""
    try:
        minutes = float(text)
    except ValueError:
        minutes = math.nan
    if not 0 < minutes < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number of minutes > 0, got {text!r}")
    return minutes


def tune_spec(args: argparse.Namespace) -> TuneSpec:
    """The study the parsed flags describe."""
    cli.check_slots(args)
    return TuneSpec(
        out=args.out, data=flags.data_spec(args), recipe=args.config, space=args.space,
        metric=args.metric, seed=args.seed, split_seeds=args.split_seeds or (),
        trials=args.trials, budget=args.budget, pruner=args.pruner, storage=args.storage,
        study=args.study or args.out.resolve().name, jobs=args.jobs, gpus=tuple(args.gpus),
        device=args.device, overwrite=args.overwrite,
        started=args.started or time.monotonic(), worker=args.worker, model=args.model,
        cutoffs=args.cutoffs)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    spec = tune_spec(parser.parse_args(argv))
    if spec.out.exists() and not spec.out.is_dir():
        parser.error(f"--out {spec.out}: a file, not a folder")
    cli.refused(parser, pool.check_gpus, spec.gpus, spec.device, "the trials")

    def worker_command(i: int) -> list[str]:
        """Worker i's process: this command's flags but --overwrite (this command has started
        over, once), its start and the worker's number."""
        return [sys.executable, "-m", "ncae_cuda.tune", *(a for a in argv if a != "--overwrite"),
                "--started", repr(spec.started), "--worker", str(i)]
    try:
        # the data read, before any worker starts (the study's run then takes the signals); a
        # worker's stop here is the command's to say (it hands its signal on as SIGTERM)
        with cli.continued_by("the same command continues the study" if spec.worker is None
                              else None):
            found = setup(spec)
        if spec.worker is not None:
            return tune_study.work_on(spec, found)
        return tune_study.run(spec, found, worker_command)
    except SpecError as e:
        parser.error(str(e))
    except NcaeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:               # the storage's own write (a journal in --out) included
        if e.errno not in DISK_FULL:
            raise
        print(f"error: {disk_full(f'{e.filename or spec.out}: cannot write it ({e.strerror})')}",
              file=sys.stderr)
        return 2
