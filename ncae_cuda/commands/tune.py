"""Search the model's settings for a data set with Optuna, scored on validation only.

    python -m ncae_cuda.tune --dataset ml-100k --split u1 --config recipes/ml-100k-explicit.toml \\
        --trials 30 --budget 60 --jobs 2 --out runs/tune-u1
    python -m ncae_cuda.tune ... --storage postgresql://USER@HOST/DB --study u1   # on each machine

Each trial is a trainer run (python -m ncae_cuda.train --validation-only: the epoch chosen on
validation, the test part never scored) in --out/trials/NNNN/, with the recipe's settings
(--config) and the trial's values of the space's (--space, ncae_cuda/runs/space.py; by default the
package's space of the run's feedback, ncae_cuda/runs/spaces/) over them, the data flags given here
and --seed; with --split-seeds, a run on each of these splits and the mean of their validation
scores. A trial's score is the validation figure its early stopping follows (RMSE, or NDCG at
the last cutoff), or for implicit feedback Recall at the last cutoff with --metric recall (at
the epoch of the best NDCG). The space's settings that weigh a user's interactions by their
time (space.TIMED) are left out, at the recipe's values, where the data has no timestamps or
the model cannot weigh its rows; a recipe that weighs by time on data without timestamps is
refused. The first trial is the recipe's own values of the space's settings (so the best is
never behind the recipe); then Optuna's TPE sampler, seeded, draws the values. A trial that
falls behind the others at the same epoch stops there (--pruner: the median of the earlier
trials, or successive halving), heard after every epoch through the trainer's callback.

The study lives in a storage: by default a journal file in --out (workers on one machine);
--storage sqlite:///FILE, or postgresql://... for workers on many machines, each running the same
command against one study (its own --out: its trials' folders). --jobs N runs N worker
processes (ncae_cuda.runs.pool's slots: the cores shared out, --gpus one each), each taking trials
until the study has --trials of them finished (complete or pruned), or until --budget minutes
of this command's wall time have passed: then no worker starts another trial (each starts at
least one), the trials running finish, and the outputs are written of the study so far (the
same command again continues it, with a budget of its own); Ctrl-C (SIGINT) or SIGTERM stops
the workers, their trials under way marked failed, and the outputs are written of the trials
finished. A worker prints a line a trial: its
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
import io
import json
import math
import shutil
import signal
import sys
import time
from pathlib import Path

from ..cli import Parser
from ..data import datasets
from ..errors import NcaeError
from ..model.config import recipe_text
from ..model.modelfile import atomic_write
from ..runs import pool, runflags, space
from ..runs.spec import RunSpec
from ..runs.study_storage import (
    JOURNAL,
    TuneError,
    import_optuna,
    make_out,
    open_storage,
    parsed_json,
)
from ..runs.tuning import (
    ASK,
    DISK_FULL,
    MARKER,
    PRUNE_AFTER_EPOCHS,
    PRUNE_AFTER_TRIALS,
    RANKING_FIGURES,
    TRIALS,
    WORKERS,
    Setup,
    alive,
    census,
    disk_full,
    open_study,
    setup,
    work,
)

BEST, TABLE, FIGURE = "best.toml", "trials.csv", "tune.png"      # the study's outputs in --out

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
                        "package's space of the run's feedback, "
                        "ncae_cuda/runs/spaces/explicit.toml or implicit.toml; the settings "
                        "that weigh by time are searched only where the data has timestamps)")
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
    g.add_argument("--metric", choices=RANKING_FIGURES,
                   help="implicit feedback: the validation figure at the last cutoff a trial is "
                        "scored by, NDCG@M or Recall@M of each user's held-out items (a trial's "
                        "epoch is still the one of the best NDCG, as the trainer chooses it) "
                        f"(default: {RANKING_FIGURES[0]})")
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
    runflags.add_fields(g, RunSpec, ("device",),
                        helps={"device": "the trials' device (default: %(default)s)"})
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
        print(f"error: {disk_full(f'{e.filename or args.out}: cannot write it ({e.strerror})')}",
              file=sys.stderr)
        return 2


def _command(args, argv: list[str], found: Setup) -> int:
    """Start the study (over, with --overwrite), run --jobs workers, write the outputs."""
    if args.overwrite:
        _start_over(args, found)
    held = _held(args, found)
    storage = open_storage(args)
    make_out(args)
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
            return _stopped(args, found, study, processes.stopped, now.finished)
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


def _stopped(args, found: Setup, study, name: str, finished: int) -> int:
    """A study stopped by signal `name` (Ctrl-C's SIGINT, SIGTERM): the outputs of the trials
    that finished written, where one completed, and said; the exit status of the signal."""
    try:
        write_outputs(args, found, study)
        kept = f"{BEST} holds the best of them"
    except TuneError:                                           # none completed
        kept = "none completed, so no best.toml"
    print(f"{name}: stopped with {finished} of {args.trials} trials finished ({kept}): the same "
          "command continues the study", file=sys.stderr)
    return 128 + signal.Signals[name]


def _worker(parser, args, found: Setup) -> int:
    study = open_study(args, found, open_storage(args))
    try:
        work(parser, args, found, study)
    except KeyboardInterrupt as e:            # a signal: the trial under way is marked failed
        name = getattr(e, "signal_name", "SIGINT")
        print(f"worker {args.worker}: {name}: stopped; the trial under way is marked failed",
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
    held = parsed_json(marker.read_bytes())
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
        if alive(lock):
            raise TuneError(f"--overwrite: a worker ({lock.read_text().strip()}) is running in "
                            f"{args.out}: stop it first")
    if args.storage is not None:
        optuna = import_optuna()
        with contextlib.suppress(KeyError):              # no such study: nothing to remove
            optuna.delete_study(study_name=found.study, storage=open_storage(args))
    for name in (TRIALS, WORKERS):
        shutil.rmtree(args.out / name, ignore_errors=True)
    for name in (JOURNAL, MARKER, ASK, BEST, TABLE, FIGURE):
        (args.out / name).unlink(missing_ok=True)
