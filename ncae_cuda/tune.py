"""Search the model's settings for a data set with Optuna, scored on validation only.

    python -m ncae_cuda.tune --dataset ml-100k --split u1 --config recipes/ml-100k-explicit.toml \\
        --trials 30 --budget 60 --jobs 2 --out runs/tune-u1
    python -m ncae_cuda.tune ... --storage postgresql://USER@HOST/DB --study u1   # on each machine

Each trial is a trainer run (python -m ncae_cuda.train --validation-only: the epoch chosen on
validation, the test part never scored) in --out/trials/NNNN/, with the recipe's settings
(--config) and the trial's values of the space's (--space, ncae_cuda/space.py; by default the
package's space of the run's feedback, ncae_cuda/spaces/) over them, the data flags given here
and --seed; with --split-seeds, a run on each of these splits and the mean of their validation
scores. The space's settings that weigh a user's interactions by their time (space.TIMED) are
left out, at the recipe's values, where the data has no timestamps or the model cannot weigh
its rows; a recipe that weighs by time on data without timestamps is refused. The first trial
is the recipe's own values of the space's settings (so the best is never behind the recipe);
then Optuna's TPE sampler, seeded, draws the values. A trial that falls behind the others at
the same epoch stops there (--pruner: the median of the earlier trials, or successive halving),
heard after every epoch through the trainer's callback.

The study lives in a storage: by default a journal file in --out (workers on one machine);
--storage sqlite:///FILE, or postgresql://... for workers on many machines, each running the same
command against one study (its own --out: its trials' folders). --jobs N runs N worker
processes (ncae_cuda.pool's slots: the cores shared out, --gpus one each), each taking trials
until the study has --trials of them finished (complete or pruned), or until --budget minutes
of this command's wall time have passed: then no worker starts another trial (each starts at
least one), the trials running finish, and the outputs are written of the study so far (the
same command again continues it, with a budget of its own). A worker prints a line a trial: its
settings, its score, the best so far, the time since the command started and the time left,
against --trials and --budget. A trial whose worker dies is marked failed (on this machine at
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
import contextlib
import csv
import errno
import io
import json
import math
import os
import shutil
import signal
import socket
import sys
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from . import datasets, pool, protocol, rundir, runflags, space
from .cli import Parser
from .config import DEFAULTS, Config, SettingError, read_recipe, recipe_text
from .data import DataError
from .errors import NcaeError
from .estimator import OutOfMemory
from .loop import Diverged
from .modelfile import atomic_write, json_ready
from .ops import BackendUnavailable
from .session import differences

HEARTBEAT, GRACE = 60, 180       # seconds: a running trial's heartbeat in a database storage,
                                 # and how old it is when another machine marks it failed
POLL = 2.0                       # seconds between looks at a study whose last trials run elsewhere
OPEN_TRIES = 5                   # at opening a database storage that others are making too
CONNECT_TIMEOUT = 10             # seconds a PostgreSQL server has to answer at opening
PRUNE_AFTER_TRIALS = 5           # the pruners compare a trial with at least this many earlier
PRUNE_AFTER_EPOCHS = 10          # ones, and never before this epoch
FAILS_IN_A_ROW = 10              # a worker whose trials all fail this often stops
JOURNAL, MARKER, TRIALS, WORKERS, ASK = "study.journal", "tune.json", "trials", "workers", ".ask"
BEST, TABLE, FIGURE = "best.toml", "trials.csv", "tune.png"
# what a trial's run can fail of, its settings' fault: the trial fails, the study goes on
TRIAL_ERRORS = (SettingError, DataError, rundir.RunFolderError, BackendUnavailable, Diverged,
                OutOfMemory)
# ...but a full disk is no trial's fault: it stops the study (errno.EDQUOT: a quota's)
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
HOST = socket.gethostname()


class TuneError(NcaeError):
    """A study that cannot go on: the message says why, in one line."""


def _optuna():
    try:
        import optuna
    except ImportError:
        raise TuneError("tuning runs on Optuna: pip install -e '.[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)     # the workers print their own lines
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


# ---------------------------------------------------------------------------------------------
# what a command tunes: the recipe, the space, the data, the score and the study

@dataclass
class Setup:
    recipe: dict                   # the settings the space leaves
    dimensions: list               # the space (space.Dimension)
    metric: str                    # the validation figure, e.g. rmse or ndcg@100
    higher: bool                   # whether more is better
    data: dict                     # the data flags given (not their defaults, nor folders)
    split_seeds: tuple             # a trial's score: the mean over these splits' validation
    storage: str                   # how the storage is shown (no password)
    study: str
    feedback: str = DEFAULTS.feedback   # the trials' (the recipe's, or else the data's)

    def identity(self, seed: int) -> dict:
        """What makes two commands one study: their trials are comparable."""
        return json_ready({"metric": self.metric, "data": self.data, "recipe": self.recipe,
                           "space": [asdict(d) for d in self.dimensions], "seed": seed,
                           "split_seeds": self.split_seeds})

    def data_text(self) -> str:
        """The data flags given, as a command line has them."""
        return " ".join(runflags.data_argv(self.data))


def setup(parser, args) -> Setup:
    """What this command tunes, each part checked; parser.error names what is wrong."""
    try:
        recipe = read_recipe(args.config) if args.config else {}
    except ValueError as e:
        parser.error(f"--config {args.config}: {e}")
    probe = trainer_args(parser, args, recipe, {}, args.out / TRIALS)
    named = (f"--space {args.space}" if args.space else
             f"the default space (ncae_cuda/spaces/{probe.feedback}.toml)")
    try:
        tables = space.read_tables(args.space or space.default(probe.feedback))
        timed = [name for name in space.TIMED if name in tables]
        unweighted = _unweighted(parser, args, probe) if timed or probe.recency_boost else None
        if timed and unweighted:
            tables = {k: v for k, v in tables.items() if k not in timed}
            if args.worker is None:
                fixed = ", ".join(f"{name} {getattr(probe, name):g}" for name in timed)
                print(f"{', '.join(timed)}: not searched ({unweighted}): each trial has the "
                      f"recipe's {fixed}", flush=True)
        dimensions = space.dimensions(tables, {**recipe, "feedback": probe.feedback})
    except ValueError as e:
        parser.error(f"{named}: {e}")
    metric, higher = Config(**runflags.model_settings(probe)).resolved().selection_metric
    if args.split_seeds and min(args.split_seeds) < 0:
        parser.error(f"--split-seeds must be >= 0; got {','.join(map(str, args.split_seeds))}")
    if args.split_seeds and len(set(args.split_seeds)) < len(args.split_seeds):
        parser.error("--split-seeds: each split once")
    data = runflags.given_data(args)
    if args.split_seeds and "split_seed" in data:
        parser.error("--split-seed and --split-seeds: give one")
    return Setup(recipe, dimensions, metric, higher, data, args.split_seeds or (probe.split_seed,),
                 _shown(args), args.study, probe.feedback)


def _unweighted(parser, args, probe) -> str | None:
    """Why the trials' model cannot weigh a user's interactions by their time (recency_boost):
    its settings, or data without timestamps (read as a trial reads them); None where it can.
    parser.error where the recipe weighs by time and the data has no timestamps: every trial
    would fail."""
    try:
        replace(Config(**runflags.model_settings(probe)), recency_boost=1.0).resolved()
    except SettingError as e:
        return f"{e.setting} {e.reason}"
    with contextlib.redirect_stdout(io.StringIO()):          # each trial says how it was read
        _, split = protocol.prepare(probe, args.device)
    if split.train.timestamps is not None:
        return None
    if probe.recency_boost:
        parser.error(f"--config {args.config}: recency_boost {probe.recency_boost:g} weighs a "
                     "user's interactions by their time, and the data has no timestamps: set "
                     "recency_boost = 0 (e.g. recipes/ml-100k-implicit-no-time.toml)")
    return "the data has no timestamps"


def trainer_args(parser, args, recipe: dict, settings: dict, out: Path,
                 split_seed: int | None = None):
    """The trainer's flags of a trial: the recipe, the trial's settings over it, the data flags
    given here (split_seed, where given, for --split-seed's), --seed and --device, its folder;
    validation only. parser.error names a data flag that is wrong."""
    targs = runflags.build_parser().parse_args([])
    for name, value in {**recipe, **settings, **runflags.data_flags(args)}.items():
        setattr(targs, name, value)
    if split_seed is not None:
        targs.split_seed = split_seed
    targs.seed, targs.device, targs.out, targs.validation_only = args.seed, args.device, out, True
    runflags.resolve_defaults(parser, targs)
    return targs


def _shown(args) -> str:
    """The storage as messages and files name it: without its password."""
    if args.storage is None:
        return str(args.out / JOURNAL)
    _optuna()
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError
    try:
        return make_url(args.storage).render_as_string(hide_password=True)
    except ArgumentError:
        raise TuneError(f"--storage {args.storage}: not a database URL (sqlite:///FILE, "
                        "postgresql://USER@HOST/DB)") from None


def open_storage(args):
    """The study's storage, opened: the journal file in --out (made, and checked: TuneError
    names a damaged line), or the database; TuneError says why it cannot be opened."""
    optuna = _optuna()
    if args.storage is None:
        from optuna.storages.journal import (JournalFileBackend, JournalFileSymlinkLock,
                                             JournalStorage)
        _make_out(args)
        path = str(args.out / JOURNAL)
        lock = JournalFileSymlinkLock(path)           # Optuna's own, that its writers hold
        _check_journal(Path(path), lock)
        return JournalStorage(JournalFileBackend(path, lock_obj=lock))
    import sqlalchemy.exc
    url, engine = args.storage, {}
    if url.startswith("postgresql://"):          # the driver the [tune] extra installs, whatever
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")   # SQLAlchemy's own
    if url.startswith("postgresql"):
        # a server that takes the connection and never answers: refused after this, not hung
        engine = {"connect_args": {"connect_timeout": CONNECT_TIMEOUT}}
        if args.worker is None:
            print(f"connecting to {_shown(args)} (waiting up to {CONNECT_TIMEOUT} s for its "
                  "answer) ...", flush=True)
    try:
        for attempt in range(OPEN_TRIES):
            try:
                return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT,
                                                  grace_period=GRACE, engine_kwargs=engine)
            except sqlalchemy.exc.IntegrityError:
                # PostgreSQL: another process made the tables at the same moment (a duplicate
                # in pg_type); they are there now, and the next try finds them
                if attempt == OPEN_TRIES - 1:
                    raise
                time.sleep(POLL / 4)
    except (ImportError, sqlalchemy.exc.SQLAlchemyError, ValueError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TuneError(f"--storage {_shown(args)}: cannot open it ({reason})") from None


def _make_out(args) -> None:
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TuneError(f"--out {args.out}: cannot write there ({e.strerror or e})",
                        errno=e.errno) from None


def _check_journal(path: Path, lock) -> None:
    """A journal whose last line a crash cut short loses that line (Optuna's reader skips it,
    but its next record would be written onto it); TuneError names a line that is not one of
    Optuna's records."""
    if not path.exists():
        return
    lock.acquire()                    # no writer is midway through a line while it is held
    try:
        text = path.read_bytes()
        if text and not text.endswith(b"\n"):
            kept = text[:text.rfind(b"\n") + 1]
            with open(path, "r+b") as f:
                f.truncate(len(kept))
            print(f"note: {path}: its last line was cut short (a write that never ended): "
                  "removed", file=sys.stderr, flush=True)
            text = kept
    finally:
        lock.release()
    for number, line in enumerate(text.splitlines(), start=1):
        record = _parsed(line)
        if not (isinstance(record, dict) and isinstance(record.get("op_code"), int)):
            raise TuneError(f"{path}:{number}: damaged, not a record of Optuna's journal: "
                            "restore the file from a copy, or start over with --overwrite "
                            "(its trials are lost)")


def _parsed(text: bytes):
    """The JSON value of `text`, None where it is not JSON in UTF-8 (a file a crash cut)."""
    try:
        return json.loads(text.decode())
    except ValueError:                         # UnicodeDecodeError and JSONDecodeError among them
        return None


def open_study(args, found: Setup, storage):
    """The study, made where it is not; TuneError where it holds another command's trials."""
    optuna = _optuna()
    study = optuna.create_study(storage=storage, study_name=found.study, load_if_exists=True,
                                direction="maximize" if found.higher else "minimize",
                                pruner=_pruner(optuna, args.pruner))
    identity = found.identity(args.seed)
    made = study.user_attrs.get("ncae_cuda")
    if made is None:
        study.set_user_attr("ncae_cuda", identity)
        study.enqueue_trial(space.recipe_point(found.dimensions, found.recipe),
                            skip_if_exists=True)      # (two machines may both make the study)
    elif made != identity:
        changed = "; ".join(differences(made, identity)[:3])
        raise TuneError(f"study {found.study} in {found.storage} tunes other settings "
                        f"({changed}): tune with those, choose another --study, or start over "
                        "with --overwrite")
    return study


def _pruner(optuna, name: str):
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=PRUNE_AFTER_TRIALS,
                                           n_warmup_steps=PRUNE_AFTER_EPOCHS)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=PRUNE_AFTER_EPOCHS)
    return optuna.pruners.NopPruner()


# ---------------------------------------------------------------------------------------------
# the study's trials

@dataclass
class Census:
    finished: int                  # complete or pruned
    running: int
    failed: int
    total: int
    seconds: list                  # of the finished trials


def census(study) -> Census:
    """The study's trials by state, once those whose worker died are marked failed."""
    from optuna.trial import TrialState
    fail_dead_trials(study)
    trials = study.get_trials(deepcopy=False)
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    return Census(len(finished), sum(t.state == TrialState.RUNNING for t in trials),
                  sum(t.state == TrialState.FAIL for t in trials), len(trials),
                  [(t.datetime_complete - t.datetime_start).total_seconds() for t in finished])


def fail_dead_trials(study) -> None:
    """Mark failed the running trials whose worker has died: on this machine, those whose
    worker's lock is free; elsewhere (a database storage), those whose heartbeat is stale."""
    optuna = _optuna()
    from optuna.trial import TrialState
    optuna.storages.fail_stale_trials(study)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get("worker")
        if worker and worker["host"] == HOST and not _alive(Path(worker["lock"])):
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)


def _alive(lock: Path) -> bool:
    """Whether the worker process holding `lock` still runs."""
    if not lock.exists():
        return False
    try:
        rundir.lock(lock).close()
    except rundir.Held:
        return True
    return False


class AskLock:
    """Held by one worker of this --out at a time, from its look at the study to the values of
    its next trial drawn: the workers of a machine neither run more than --trials nor draw
    from one state of the sampler."""

    def __init__(self, folder: Path):
        self.file = open(folder / ASK, "a")

    def __enter__(self) -> AskLock:
        rundir.exclusive(self.file)
        return self

    def release(self) -> None:
        rundir.unlock(self.file)

    def __exit__(self, *error) -> None:
        self.release()


def work(parser, args, found: Setup, study) -> None:
    """A worker: trials until the study has --trials finished ones, or --budget has passed
    (after its first)."""
    optuna = _optuna()
    (args.out / WORKERS).mkdir(parents=True, exist_ok=True)
    held = rundir.lock(args.out / WORKERS / f"{HOST}-{os.getpid()}.lock")
    me = {"host": HOST, "pid": os.getpid(), "lock": str(Path(held.name).resolve())}
    asking, fails, started = AskLock(args.out), 0, 0
    while True:
        with asking:
            now = census(study)
            if now.finished >= args.trials or started and _budget_left(args) <= 0:
                return
            if now.finished + now.running < args.trials:
                started += 1
                # seeded by the trials so far: one worker draws the same each time, and two
                # never from one state
                study.sampler = optuna.samplers.TPESampler(seed=args.seed + now.total,
                                                           constant_liar=True)
                outcome = []
                study.optimize(lambda trial: objective(parser, args, found, study, trial, me,
                                                       asking, outcome),
                               n_trials=1, catch=())
                fails = fails + 1 if outcome == ["failed"] else 0
                if fails >= FAILS_IN_A_ROW:
                    raise TuneError(f"{fails} trials in a row failed (see their log.txt under "
                                    f"{args.out / TRIALS}): is the space's range too wide?")
                continue
        if _budget_left(args) <= 0:   # the trials left run in other workers: none to start
            return
        time.sleep(POLL)              # ... or wait for them, in case they fail


def objective(parser, args, found: Setup, study, trial, me: dict, asking: AskLock,
              outcome: list) -> float:
    """A trial's validation score: its trainer run (one a split, their mean), pruned where it
    falls behind."""
    optuna = _optuna()
    trial.set_user_attr("worker", me)
    settings = {d.name: d.suggest(trial) for d in found.dimensions}
    asking.release()
    folder = args.out / TRIALS / f"{trial.number:04d}"
    folder.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    def heard(record: dict) -> None:
        trial.report(record["valid"][found.metric], record["epoch"])
        if trial.should_prune():
            raise optuna.TrialPruned(f"epoch {record['epoch']}")
    several = len(found.split_seeds) > 1
    try:
        Config(**{**found.recipe, "feedback": found.feedback, **settings}).resolved()
        summaries = []
        for split_seed in found.split_seeds:     # the pruner hears the first split's epochs
            targs = trainer_args(parser, args, found.recipe, settings,
                                 folder / f"split{split_seed}" if several else folder,
                                 split_seed)
            with open(folder / pool.LOG, "a") as log, contextlib.redirect_stdout(log):
                summaries.append(protocol.run(targs, on_epoch=None if summaries else heard))
    except optuna.TrialPruned as e:
        _said(args, trial, f"pruned at {e}", start, study, found, True)
        raise
    except OSError as e:
        if e.errno not in DISK_FULL:
            raise
        _stop_full(trial, f"{e.filename or folder}: cannot write it ({e.strerror})")
    except TRIAL_ERRORS as e:
        if e.errno in DISK_FULL:         # a write's (a file's, the run folder's) OSError
            _stop_full(trial, str(e))
        trial.set_user_attr("error", str(e))
        outcome.append("failed")
        _said(args, trial, f"failed: {e}", start, study, found, False)
        return math.nan                # Optuna marks the trial failed
    epochs = "/".join(str(summary["best_epoch"]) for summary in summaries)
    trial.set_user_attr("best_epoch", epochs)
    values = [summary["valid"][found.metric] for summary in summaries]
    trial.set_user_attr("valid_by_split", values)
    value = sum(values) / len(values)
    _said(args, trial, f"{found.metric} {value:.4f} (epoch {epochs})", start, study, found,
          True, value)
    return value


def _disk_full(what: str) -> TuneError:
    """The error that stops a study whose disk is full."""
    return TuneError(f"{what}: the disk is full: free some space and run the same command "
                     "again (the study goes on)")


def _stop_full(trial, what: str) -> None:
    """The trial under way fails, and the study stops: a full disk is no fault of the space's
    values (the trial's note may itself not be written, where the storage is on that disk)."""
    full = _disk_full(what)
    trial.set_user_attr("error", str(full))
    raise full from None


def _said(args, trial, what: str, start: float, study, found: Setup, finished: bool,
          value: float | None = None) -> None:
    """A worker's line at the end of a trial (`finished`: complete or pruned, not failed;
    `value`: its score, where complete): its settings, what it scored, the best so far, the
    study's progress, the time since the command started, and the time left: at the mean
    trial's pace over the workers running, for the trials left, or --budget's where less."""
    now = census(study)                      # this trial still runs: Optuna files it after
    done, others = now.finished + finished, now.running - 1
    best = [(t.value, t.number) for t in study.get_trials(deepcopy=False)
            if t.state.name == "COMPLETE"] + ([(value, trial.number)] if value is not None else [])
    best = (max if found.higher else min)(best, default=None)
    left = max(args.trials - done - others, 0)
    budget, eta = _budget_left(args), ""
    if left and budget <= 0:
        eta = ", --budget passed: no trial starts"
    elif left:
        seconds = (sum(now.seconds) / len(now.seconds) * left / (others + 1) if now.seconds
                   else math.inf)
        if seconds < math.inf and seconds <= budget:
            eta = f", about {pool.duration(seconds)} left"
        elif budget < math.inf:
            eta = f", about {pool.duration(budget)} left (--budget)"
    print(f"worker {args.worker}: trial {trial.number} "
          f"[{space.shown(space.settings(found.dimensions, trial.params))}] {what} "
          f"in {time.monotonic() - start:.1f} s"
          + (f" | best {found.metric} {best[0]:.4f} (trial {best[1]})" if best else "")
          + f" | {done} of {args.trials} finished, {others} running | "
          f"{pool.duration(time.monotonic() - args.started)} elapsed{eta}", flush=True)


# ---------------------------------------------------------------------------------------------
# the outputs: best.toml, trials.csv, tune.png

def write_outputs(args, found: Setup, study) -> None:
    from optuna.trial import TrialState
    trials = study.get_trials()
    try:
        best = study.best_trial
    except ValueError:
        raise TuneError(f"no trial of study {found.study} completed: see the trials' log.txt "
                        f"under {args.out / TRIALS}") from None
    finished = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    command = f"python -m ncae_cuda.train --config {args.out / BEST} {found.data_text()}"
    over = (f" (the mean over split seeds {','.join(map(str, found.split_seeds))})"
            if len(found.split_seeds) > 1 else "")
    comment = (f"Tuned by python -m ncae_cuda.tune: study {found.study} ({found.storage}), "
               f"trial {best.number}, the best of {finished} finished trials:\n"
               f"validation {found.metric} {best.value:.4f} at epoch "
               f"{best.user_attrs['best_epoch']}, seed {args.seed}{over}"
               f"{', on ' + found.data_text() if found.data else ''}.\n"
               f"  {command.rstrip()}")
    settings = {**found.recipe, "feedback": found.feedback,      # the data's, where not given
                **space.settings(found.dimensions, best.params)}
    files = {BEST: recipe_text(settings, comment).encode(), TABLE: _table(found, trials),
             FIGURE: _figure(found, trials)}
    for name, content in files.items():
        atomic_write(args.out / name, lambda f, content=content: f.write(content))
    # what a later command checks its storage against (_check_kept): the study that holds
    # this trial, with this score, is the one best.toml came from, and its best is no worse
    _write_marker(args, {"study": found.study, "storage": found.storage,
                         "best": {"trial": best.number, "value": best.value}})
    print(f"best: trial {best.number}, validation {found.metric} {best.value:.4f}: "
          + ", ".join(f"{k} {v}" for k, v in space.settings(found.dimensions,
                                                              best.params).items()))
    print(f"wrote {', '.join(str(args.out / name) for name in files)}\ntrain it: "
          f"{command.rstrip()}")


def _table(found: Setup, trials) -> bytes:
    names = [d.name for d in found.dimensions]
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["trial", "state", f"valid {found.metric}", "best epoch", "last epoch",
                     "seconds", "worker", *names, "error"])
    for t in trials:
        seconds = ((t.datetime_complete - t.datetime_start).total_seconds()
                   if t.datetime_complete else "")
        worker = t.user_attrs.get("worker", {})
        error = t.user_attrs.get("error", "")
        if t.state.name == "FAIL" and not error:
            error = "stopped or killed with its worker"
        writer.writerow([t.number, t.state.name, "" if t.value is None else t.value,
                         t.user_attrs.get("best_epoch", ""), t.last_step if t.last_step
                         is not None else "", seconds,
                         f"{worker.get('host', '')}:{worker.get('pid', '')}",
                         *(t.params.get(n, "") for n in names), error])
    return text.getvalue().encode()


def _figure(found: Setup, trials) -> bytes:
    """The score against the trial (pruned: where they stopped; the line: the best so far),
    and a panel a setting: the completed trials' score against its value."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    done = [t for t in trials if t.state.name == "COMPLETE"]
    pruned = [t for t in trials if t.state.name == "PRUNED" and t.intermediate_values]
    panels = 1 + len(found.dimensions)
    columns = min(panels, 4)
    rows = math.ceil(panels / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    axes = axes.ravel()
    label = f"validation {found.metric}"
    ax = axes[0]
    ax.plot([t.number for t in done], [t.value for t in done], "o", label="complete")
    ax.plot([t.number for t in pruned], [t.intermediate_values[t.last_step] for t in pruned],
            "x", color="gray", label="pruned (where it stopped)")
    pick = max if found.higher else min
    best, line = None, []
    for t in sorted(done, key=lambda t: t.number):
        best = t.value if best is None else pick(best, t.value)
        line.append((t.number, best))
    if line:
        ax.step(*zip(*line), where="post", color="black", label="best so far")
    ax.set(xlabel="trial", ylabel=label, title=found.study)
    ax.legend(fontsize=7)
    for ax, d in zip(axes[1:], found.dimensions):
        values = [t.params[d.name] for t in done]
        if d.choices is not None:                      # a choice's place, under its name
            shown = [space.to_optuna(c) for c in d.choices]
            ax.set_xticks(range(len(shown)), [str(c) for c in shown], fontsize=7)
            ax.set_xlim(-0.5, len(shown) - 0.5)
            values = [shown.index(v) for v in values]
        elif d.log:                     # labels at the decades only: the others overlap
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.plot(values, [t.value for t in done], "o", alpha=0.7)
        ax.set(xlabel=d.name, ylabel=label)
    for ax in axes[panels:]:
        ax.axis("off")
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    return image.getvalue()


# ---------------------------------------------------------------------------------------------
# the command

def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m ncae_cuda.tune", description=__doc__.split("\n\n")[0],
        epilog="Data sets: " + ", ".join(datasets.names()) + ". The study, "
        "its storage, workers and outputs: see the module's docstring (pydoc ncae_cuda.tune).")
    g = p.add_argument_group("the search")
    g.add_argument("--config", type=Path, metavar="RECIPE",
                   help="the settings the space does not search (a recipe, recipes/) "
                        "(default: the trainer's defaults)")
    g.add_argument("--space", type=Path, metavar="SPACE.toml",
                   help="the settings to search, their ranges and choices (default: the "
                        "package's space of the run's feedback, ncae_cuda/spaces/explicit.toml "
                        "or implicit.toml; the settings that weigh by time are searched only "
                        "where the data has timestamps)")
    g.add_argument("--trials", type=pool.count, default=30,
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
                        f"and {PRUNE_AFTER_TRIALS} trials on (default: %(default)s)")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of the sampler and of every trial's training (default: "
                        "%(default)s)")
    g.add_argument("--split-seeds", type=runflags.int_list, metavar="S1,S2,...",
                   help="score a trial by the mean of its validation score over these splits "
                        "(a fit each; the pruner hears the first's epochs): where one split's "
                        "validation part is small, e.g. one item a user (default: --split-seed "
                        "alone)")
    runflags.add_data_flags(p)
    g = p.add_argument_group("the study and its workers")
    g.add_argument("--out", type=Path, required=True,
                   help="folder of the trials' runs, the outputs and the default storage")
    g.add_argument("--storage", metavar="URL",
                   help="sqlite:///FILE (one machine) or postgresql://USER[:PASSWORD]@HOST[:PORT]"
                        "/DB (many machines, each running this command) (default: a journal "
                        f"file, --out/{JOURNAL})")
    g.add_argument("--study", help="the study's name in the storage (default: --out's name)")
    pool.add_slot_flags(g)
    g.add_argument("--device", choices=runflags.DEVICES, default="auto",
                   help="the trials' device (default: %(default)s)")
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


def _budget_left(args) -> float:
    """Seconds of --budget left to this command (< 0: passed; inf: no budget)."""
    if args.budget is None:
        return math.inf
    return args.started + 60 * args.budget - time.monotonic()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started = args.started or time.monotonic()       # a worker's: its command's
    args.study = args.study or args.out.resolve().name
    pool.check_slots(args)
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: a file, not a folder")
    try:
        found = setup(parser, args)
        if args.worker is not None:
            return _worker(parser, args, found)
        return _command(args, argv, found)
    except NcaeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:               # the storage's own write (a journal in --out) included
        if e.errno not in DISK_FULL:
            raise
        print(f"error: {_disk_full(f'{e.filename or args.out}: cannot write it ({e.strerror})')}",
              file=sys.stderr)
        return 2


def _command(args, argv: list[str], found: Setup) -> int:
    """Start the study (over, with --overwrite), run --jobs workers, write the outputs."""
    if args.overwrite:
        _start_over(args, found)
    held = _held(args, found)
    storage = open_storage(args)
    _make_out(args)
    _check_kept(args, found, storage, held)
    study = open_study(args, found, storage)
    if held is None:                  # --out is bound to the study once its storage has opened
        _write_marker(args, {"study": found.study, "storage": found.storage})
    now = census(study)
    print(f"study {found.study} in {found.storage}: validation {found.metric}, "
          f"{now.finished} of {args.trials} trials finished; workers: {args.jobs}", flush=True)
    failed = retry_recipe(study, found) if now.finished < args.trials else None
    if failed is not None:
        print(f"trial {failed}, the recipe's own values, failed: they run again", flush=True)
    before = now.finished
    workers = [a for a in argv if a != "--overwrite"] + ["--started", repr(args.started)]
    with pool.Processes(args.jobs, args.gpus) as processes:
        for i in range(args.jobs):
            processes.start(i, [sys.executable, "-m", "ncae_cuda.tune", *workers,
                                "--worker", str(i)])
        ended = processes.wait()
    now = census(study)
    if now.finished < args.trials:
        if processes.stopped:
            print(f"{processes.stopped}: stopped with {now.finished} of {args.trials} trials "
                  "finished: the same command continues the study", file=sys.stderr)
            return 128 + signal.Signals[processes.stopped]
        if args.budget is None or any(code for _, code, _ in ended):
            raise TuneError(f"{now.finished} of {args.trials} trials finished; "
                            + "; ".join(f"worker {i} ended with exit {code}"
                                        for i, code, _ in ended if code))
        print(f"--budget {args.budget:g} min: {now.finished - before} trials finished within "
              f"it (and those under way then), {now.finished} of {args.trials} in the study: "
              "the same command continues it", flush=True)
    for i, code, _ in ended:
        if code:
            print(f"note: worker {i} ended with exit {code}; the others finished the study",
                  file=sys.stderr)
    write_outputs(args, found, study)
    return 0


def _worker(parser, args, found: Setup) -> int:
    study = open_study(args, found, open_storage(args))
    try:
        work(parser, args, found, study)
    except KeyboardInterrupt as e:            # a signal: the trial under way is marked failed
        name = getattr(e, "signal_name", "SIGINT")
        print(f"worker {args.worker}: {name}: stopped; its trial failed, the study goes on",
              file=sys.stderr)
        return 128 + signal.Signals[name]
    return 0


def _held(args, found: Setup) -> dict | None:
    """What --out's tune.json records: the study whose trials it holds (a folder of one study's
    trials is never another's), and the trial best.toml holds; None where there is none yet.
    TuneError where it names another study or is damaged."""
    marker = args.out / MARKER
    if not marker.exists():
        return None
    held = _parsed(marker.read_bytes())
    if not _whole(held):
        raise TuneError(f"{marker}: damaged, not the record of a study (its name and storage): "
                        "remove it and run the same command again (the trials in --out are "
                        "checked against that study), or start over with --overwrite")
    if (held["study"], held["storage"]) != (found.study, found.storage):
        raise TuneError(f"--out {args.out} holds the trials of study {held['study']} in "
                        f"{held['storage']}: tune that with its --study and --storage, "
                        "start over with --overwrite, or choose another --out")
    return held


def _whole(held) -> bool:
    """Whether tune.json's content is what _write_marker writes."""
    if not (isinstance(held, dict) and all(isinstance(held.get(k), str)
                                           for k in ("study", "storage"))):
        return False
    best = held.get("best")
    return best is None or (isinstance(best, dict) and isinstance(best.get("trial"), int)
                            and isinstance(best.get("value"), (int, float)))


def _write_marker(args, held: dict) -> None:
    text = json.dumps(held, indent=2).encode()
    atomic_write(args.out / MARKER, lambda f: f.write(text))


def _check_kept(args, found: Setup, storage, held: dict | None) -> None:
    """TuneError where the storage has lost trials that ran in --out (its study emptied, cut
    short or replaced): a study started over on top of them would find their folders taken
    and replace best.toml by a worse one."""
    folders = args.out / TRIALS
    ran = sorted(int(p.name) for p in folders.iterdir()
                 if p.name.isdigit()) if folders.is_dir() else []
    try:
        trials = {t.number: t for t in storage.get_all_trials(
            storage.get_study_id_from_name(found.study), deepcopy=False)}
    except KeyError:                                      # no such study
        trials = {}
    missing = [f"{n:04d}" for n in ran if n not in trials]
    lost = ([f"{len(missing)} trials that ran in {folders} ({', '.join(missing[:3])}"
             f"{', ...' if len(missing) > 3 else ''})"] if missing else [])
    best = held and held.get("best")
    if best and (best["trial"] not in trials or trials[best["trial"]].value != best["value"]):
        lost.append(f"trial {best['trial']} of {args.out / BEST} ({found.metric} "
                    f"{best['value']:.4f})")
    if lost:
        raise TuneError(f"study {found.study} in {found.storage} has no record of "
                        f"{', '.join(lost)}: its storage was emptied or replaced: restore it "
                        "from a copy, or start over with --overwrite")


def retry_recipe(study, found: Setup) -> int | None:
    """Where every trial of the recipe's own values (the one enqueued trial of a study, its
    first) has failed, e.g. its worker died or its disk was full: they are enqueued again, so
    the best is never behind the recipe. Once a command, and only where no trial of them is
    waiting, running or finished: a recipe that always fails costs a trial a rerun, never a
    loop. The failed trial's number, where enqueued."""
    from optuna.trial import TrialState
    recipe = [t for t in study.get_trials(deepcopy=False) if "fixed_params" in t.system_attrs]
    if not recipe or any(t.state != TrialState.FAIL for t in recipe):
        return None
    study.enqueue_trial(space.recipe_point(found.dimensions, found.recipe))
    return recipe[-1].number


def _start_over(args, found: Setup) -> None:
    """The study removed from its storage and its trials from --out, once no worker runs."""
    workers = args.out / WORKERS
    for lock in sorted(workers.glob("*.lock")) if workers.is_dir() else []:
        if _alive(lock):
            raise TuneError(f"--overwrite: a worker ({lock.read_text().strip()}) is running in "
                            f"{args.out}: stop it first")
    if args.storage is not None:
        optuna = _optuna()
        with contextlib.suppress(KeyError):              # no such study: nothing to remove
            optuna.delete_study(study_name=found.study, storage=open_storage(args))
    for name in (TRIALS, WORKERS):
        shutil.rmtree(args.out / name, ignore_errors=True)
    for name in (JOURNAL, MARKER, ASK, BEST, TABLE, FIGURE):
        (args.out / name).unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
