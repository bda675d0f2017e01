"""A study from start to end, below python -m ncae_cuda.tune: started (over, where asked), its
folder checked against its storage (a folder of one study's trials is never another's, and a
storage that lost trials run there is refused), its worker processes run (each a tuning.work
loop), and its outputs written (study_outputs.py), also where a signal stops it.
"""
from __future__ import annotations

import contextlib
import shutil
import signal
import sys

from ..interrupts import signal_name
from ..model import stopping
from . import pool
from .effort import MARKER, TABLE
from .study_outputs import BEST, FIGURE, write_marker, write_outputs
from .study_storage import JOURNAL, TuneError, import_optuna, make_out, open_storage, parsed_json
from .tune_spec import TuneSpec
from .tuning import (
    ASK,
    TRIALS,
    WORKERS,
    Setup,
    alive,
    census,
    open_study,
    retry_recipe,
    work,
)


def run(spec: TuneSpec, found: Setup, worker_command) -> int:
    """The study: started (over, with spec.overwrite), spec.jobs worker processes run
    (worker_command(i): the command line of worker i, which calls work_on), its outputs
    written; the exit status. TuneError says why it cannot go on. Outside the workers' run,
    where this process writes (the study's storage, its outputs), a signal only asks it to
    stop (stopping.recorded), once the write under way is done: before the workers start, they
    are not started; after, the outputs are written whole (before, a Ctrl-C there cut them
    short: a best.toml of 3 finished trials beside a trials.csv of 2). A second signal stops
    it at once."""
    with stopping.recorded():
        try:
            return _run(spec, found, worker_command)
        except KeyboardInterrupt:
            if stopping.asked() is None:          # not a signal's (stopping._record's)
                raise
            print(f"{stopping.asked()}: stopped at once by a second signal, a write under way "
                  "perhaps cut short: the same command continues the study", file=sys.stderr)
            return 128 + signal.Signals[stopping.asked()]


def _run(spec: TuneSpec, found: Setup, worker_command) -> int:
    if spec.overwrite:
        _start_over(spec, found)
    held = _held(spec, found)
    storage = open_storage(spec)
    make_out(spec)
    _check_kept(spec, found, storage, held)
    study = open_study(spec, found, storage)
    if held is None:                  # --out is bound to the study once its storage has opened
        write_marker(spec.out, {"study": found.study, "storage": found.storage})
    now = census(study)
    print(f"study {found.study} in {found.storage}: validation {found.metric}, "
          f"{now.finished} of {spec.trials} trials finished; workers: {spec.jobs}", flush=True)
    failed = retry_recipe(study, found) if now.finished < spec.trials else None
    if failed is not None:
        print(f"trial {failed}, the recipe's own values, failed: they run again", flush=True)
    if stopping.asked():                                        # no worker started
        return _stopped(spec, found, study, stopping.asked(), now.finished)
    before = now.finished
    with pool.Processes(spec.jobs, spec.gpus) as processes:
        for i in range(spec.jobs):
            processes.start(i, worker_command(i))
        ended = processes.wait()
    now = census(study)
    stopped = processes.stopped or stopping.asked()
    if now.finished < spec.trials:
        if stopped:
            return _stopped(spec, found, study, stopped, now.finished)
        if spec.budget is None or any(code for _, code, _ in ended):
            raise TuneError(f"{now.finished} of {spec.trials} trials finished; "
                            + "; ".join(f"worker {i} ended with exit {code}"
                                        for i, code, _ in ended if code))
        print(f"--budget {spec.budget:g} min: {now.finished - before} trials finished within "
              f"it (and those under way then), {now.finished} of {spec.trials} in the study: "
              "the same command continues it", flush=True)
    for i, code, _ in ended:
        if code:
            print(f"note: worker {i} ended with exit {code}; the others finished the study",
                  file=sys.stderr)
    write_outputs(spec, found, study)
    if stopping.asked():                        # while the outputs were written: they are whole
        print(f"{stopping.asked()}: stopped once the outputs were written", file=sys.stderr)
        return 128 + signal.Signals[stopping.asked()]
    return 0


def _stopped(spec: TuneSpec, found: Setup, study, name: str, finished: int) -> int:
    """A study stopped by signal `name` (Ctrl-C's SIGINT, SIGTERM): the outputs of the trials
    that finished written, where one completed, and said; the exit status of the signal."""
    try:
        write_outputs(spec, found, study)
        kept = f"{BEST} holds the best of them"
    except TuneError:                                           # none completed
        kept = "none completed, so no best.toml"
    print(f"{name}: stopped with {finished} of {spec.trials} trials finished ({kept}): the same "
          "command continues the study", file=sys.stderr)
    return 128 + signal.Signals[name]


def work_on(spec: TuneSpec, found: Setup) -> int:
    """A worker process's part of the study (tuning.work); the exit status. A signal only asks
    it to stop (stopping.recorded): it never dies in a write to the study's storage, holding
    its lock (before, a worker killed outside a fit left Optuna's journal lock behind, and the
    others and the command waited out its 30 s grace period on it)."""
    # no signal named in its lines: the command hands its own on as SIGTERM (pool.Processes),
    # and its line names the one it got (a Ctrl-C's SIGINT)
    with stopping.recorded():
        try:
            work(spec, found, open_study(spec, found, open_storage(spec)))
        except KeyboardInterrupt as e:        # a fit stopped at a step's end, or a second
            # signal: Optuna failed the trial under way
            print(f"worker {spec.worker}: stopped; the trial under way is marked failed",
                  file=sys.stderr)
            return 128 + signal.Signals[signal_name(e)]
        if stopping.asked() is None:
            return 0
        print(f"worker {spec.worker}: stopped, with no trial under way", file=sys.stderr)
        return 128 + signal.Signals[stopping.asked()]


def _held(spec: TuneSpec, found: Setup) -> dict | None:
    """What --out's tune.json records: the study whose trials it holds (a folder of one study's
    trials is never another's), and the trial best.toml holds; None where there is none yet.
    TuneError where it names another study or is damaged."""
    marker = spec.out / MARKER
    if not marker.exists():
        return None
    held = parsed_json(marker.read_bytes())
    if not _whole(held):
        raise TuneError(f"{marker}: damaged, not the record of a study (its name and storage): "
                        "remove it and run the same command again (the trials in --out are "
                        "checked against that study), or start over with --overwrite")
    if (held["study"], held["storage"]) != (found.study, found.storage):
        raise TuneError(f"--out {spec.out} holds the trials of study {held['study']} in "
                        f"{held['storage']}: tune that with its --study and --storage, "
                        "start over with --overwrite, or choose another --out")
    return held


def _whole(held) -> bool:
    """Whether tune.json's content is what study_outputs.write_marker writes."""
    if not (isinstance(held, dict) and all(isinstance(held.get(k), str)
                                           for k in ("study", "storage"))):
        return False
    best = held.get("best")
    return best is None or (isinstance(best, dict) and isinstance(best.get("trial"), int)
                            and isinstance(best.get("value"), (int, float)))


def _check_kept(spec: TuneSpec, found: Setup, storage, held: dict | None) -> None:
    """TuneError where the storage has lost trials that ran in --out (its study emptied, cut
    short or replaced): a study started over on top of them would find their folders taken
    and replace best.toml by a worse one."""
    folders = spec.out / TRIALS
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
        lost.append(f"trial {best['trial']} of {spec.out / BEST} ({found.metric} "
                    f"{best['value']:.4f})")
    if lost:
        raise TuneError(f"study {found.study} in {found.storage} has no record of "
                        f"{', '.join(lost)}: its storage was emptied or replaced: restore it "
                        "from a copy, or start over with --overwrite")


def _start_over(spec: TuneSpec, found: Setup) -> None:
    """The study removed from its storage and its trials from --out, once no worker runs."""
    workers = spec.out / WORKERS
    for lock in sorted(workers.glob("*.lock")) if workers.is_dir() else []:
        if alive(lock):
            raise TuneError(f"--overwrite: a worker ({lock.read_text().strip()}) is running in "
                            f"{spec.out}: stop it first")
    if spec.storage is not None:
        optuna = import_optuna()
        with contextlib.suppress(KeyError):              # no such study: nothing to remove
            optuna.delete_study(study_name=found.study, storage=open_storage(spec))
    for name in (TRIALS, WORKERS):
        shutil.rmtree(spec.out / name, ignore_errors=True)
    for name in (JOURNAL, MARKER, ASK, BEST, TABLE, FIGURE):
        (spec.out / name).unlink(missing_ok=True)
