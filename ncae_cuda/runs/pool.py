"""A pool of runs: the processes behind a table, N at once, each in a folder of its own, and
resumable as a whole.

A run is one process (`python -m ncae_cuda.train`, or a bench's cell) that takes --out FOLDER,
marks the run finished in the folder's run.json (rundir.RunDirectory) and, given --resume,
continues what a killed one began there. A pool lists its runs before it starts any, in a
folder of its own whose runs.json names each run and its command, and the sha256 of each data
file and recipe the runs read (a run's result is of the file's contents as much as of its
flags):
- the same listing again skips the finished runs and resumes the others; a folder that holds
  another listing (other settings, or a data file or recipe changed since) is refused, never
  overwritten; `overwrite` starts over;
- `jobs` runs at once, each a subprocess in a slot of its own: slot i sees the i-th of `gpus`
  (round robin) as CUDA_VISIBLE_DEVICES and an equal share of this machine's cores as Numba's
  and BLAS's threads (each unless the environment sets it), so that the runs do not
  oversubscribe;
- task I of T runs every T-th run from the I-th (a SLURM array, or any scheduler), the other
  tasks the rest; the tables are built once every run of the listing is finished. The tasks
  share the folder's lock, which a process running all the runs holds alone: while one of
  either runs them, the other is refused; so is a task of another T while those of a share
  run (the two shares overlap), and `collect`, which holds the lock alone too (it builds the
  tables of finished runs: no run may be under way);
- a line at each start and end of a run: runs done, running and left, and the time left;
- Ctrl-C or SIGTERM reaches every run as one SIGTERM each (a second asks again, which stops a
  trainer at once, as it stops a tuning worker that Processes runs): a trainer stops at the
  end of its step with a checkpoint, and the same command resumes it. On Linux a run also
  gets SIGTERM when the pool's process dies (a kill).
"""
from __future__ import annotations

import contextlib
import ctypes
import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..data import datasets
from ..data.atomic_file import atomic_write
from ..data.digest import file_sha256
from ..errors import NcaeError
from ..machine import cores
from ..ops import backend_name
from . import rundir

LISTING = "runs.json"            # the pool's manifest: its runs and their commands
LOG = "log.txt"                  # a run's output, in its folder
POLL = 0.2                       # seconds between looks at the running processes
PR_SET_PDEATHSIG = 1             # prctl(2): the signal a process gets when its parent dies
# the files a run reads, where a file: its data, and its recipe (the recipes experiment's
# cells are named by the file, so an edited one is not told apart by the flags)
FILE_FLAGS = ("--dataset", "--train", "--valid", "--test", "--config")
# task I of a share of T's own lock: its name records T, which a task of another T is refused
SHARE_LOCK = rundir.LOCK + "-task{task}-of-{tasks}"
SHARE_LOCK_NAME = re.compile(re.escape(rundir.LOCK) + r"-task(\d+)-of-(\d+)")


class PoolError(NcaeError):
    """A pool that cannot run, or whose runs failed: the message says why, in one line each."""


class Stopped(Exception):
    """The pool stopped at a signal; the runs it had started stopped too, resumable."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


@dataclass(frozen=True)
class Run:
    name: str                    # its folder in the pool's folder; how the progress names it
    module: str                  # it runs as python -m MODULE
    flags: tuple[str, ...]       # every flag but --out and --resume: what the run is

    def command(self, folder: Path, resume: bool) -> list[str]:
        return [sys.executable, "-m", self.module, *self.flags, "--out", str(folder),
                *(["--resume"] if resume else [])]


# ---------------------------------------------------------------------------------------------
# processes in slots

# what sets a process's threads: Numba's, and BLAS's (NumPy's and SciPy's products and solves:
# EASE's, the dense layers on the CPU), each of which would otherwise take every core
THREADS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def slot_env(slot: int, jobs: int, gpus: list[str]) -> dict[str, str]:
    """What the process in slot `slot` of `jobs` sees beside this process's environment: its
    GPU, and its share of the cores."""
    env = {}
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
    for name in THREADS:
        if name not in os.environ:
            env[name] = str(max(1, cores() // jobs))
    return env


def check_gpus(gpus: list[str], device: str, what: str) -> None:
    """PoolError where `gpus` (--gpus) would be shared out unused, `what` (the runs, the
    trials) running on `device`'s backend, not the GPU; get_backend's errors for a device that
    is none, or a GPU that is not here."""
    if gpus and backend_name(device) != "gpu":
        raise PoolError(f"--gpus {','.join(gpus)}: {what} run on the CPU (--device {device}): "
                        "leave out --gpus, or use --device gpu")


def _dies_with(parent: int):
    """preexec_fn of a child: SIGTERM when `parent` dies, however it dies (Linux's prctl)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl          # looked up before the fork

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:                           # it died before prctl
            os.kill(os.getpid(), signal.SIGTERM)
    return preexec


class Processes:
    """Processes started in `jobs` slots, each in a session of its own: a terminal's Ctrl-C
    reaches this process only, and within `with` each signal it gets (SIGINT, SIGTERM) is handed
    on to every process as one SIGTERM; `stopped` names the first. A second is handed on too,
    and stops at once a process that takes the first as a request (stopping.py): a trainer, or
    a tuning worker (tune_study.work_on). Leaving `with` on an error stops the processes still
    running (SIGTERM) and waits for them."""

    def __init__(self, jobs: int, gpus: list[str]):
        self.jobs, self.gpus = jobs, gpus
        self.free = list(range(jobs))
        self.running: dict[subprocess.Popen, tuple[object, int, float]] = {}
        self.stopped: str | None = None

    def start(self, key, argv: list[str], env: dict[str, str] | None = None,
              log: Path | None = None) -> None:
        """argv in a free slot, its output appended to `log` (default: this process's)."""
        slot = self.free.pop(0)
        out = open(log, "a") if log is not None else None
        try:
            process = subprocess.Popen(
                argv, env={**os.environ, **(env or {}), **slot_env(slot, self.jobs, self.gpus)},
                stdout=out, stderr=subprocess.STDOUT if out else None, start_new_session=True,
                preexec_fn=_dies_with(os.getpid()))
        finally:
            if out is not None:
                out.close()
        self.running[process] = (key, slot, time.monotonic())

    def ended(self) -> list[tuple[object, int, float]]:
        """(key, exit code, seconds) of each process that has ended since the last call; their
        slots are free again."""
        done = []
        for process, (key, slot, started) in list(self.running.items()):
            if process.poll() is not None:
                del self.running[process]
                self.free.append(slot)
                done.append((key, process.returncode, time.monotonic() - started))
        return done

    def wait(self) -> list[tuple[object, int, float]]:
        """Every process's (key, exit code, seconds), once all have ended."""
        done = []
        while self.running:
            time.sleep(POLL)
            done += self.ended()
        return done

    def _signal(self, number, frame) -> None:
        self.stopped = self.stopped or signal.Signals(number).name
        for process in self.running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)

    def __enter__(self) -> Processes:
        self._previous = {n: signal.signal(n, self._signal)
                          for n in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is not None and self.running:
                self._signal(signal.SIGTERM, None)
                self.wait()
        finally:
            for number, handler in self._previous.items():
                signal.signal(number, handler)


# ---------------------------------------------------------------------------------------------
# the pool

class Pool:
    """The runs of one table (`what`, e.g. 'configurations') in `folder`, each in
    folder/<run name>; `env`: what every run sees beside the slot's environment; `outputs`:
    the files made of the runs' results (the tables), which an overwrite removes with them."""

    def __init__(self, folder: Path, what: str, runs: list[Run], env: dict | None = None,
                 outputs: tuple[Path, ...] = ()):
        self.folder, self.what, self.runs, self.env = Path(folder), what, runs, env or {}
        self.outputs = outputs
        names = [run.name for run in runs]
        assert len(set(names)) == len(names), "two runs of a pool share a folder"

    def folder_of(self, run: Run) -> Path:
        return self.folder / run.name

    def listing(self) -> dict:
        """What the runs are: their commands, and the sha256 of each file they read (data,
        recipes)."""
        return {"what": self.what,
                "runs": {run.name: " ".join([run.module, *run.flags]) for run in self.runs},
                "data": {path: _sha256(path) for path in data_paths(self.runs)}}

    def take(self, overwrite: bool = False, task: tuple[int, int] | None = None):
        """The folder, for this listing: made, locked against a second pool process on the same
        runs, and refused where it holds another listing's runs (or with `overwrite`, emptied
        of them first). Returns the held lock (close() lets go of it). The folder's one lock
        is held by the process running all its runs (or collecting them), or shared by the
        tasks of a share (task (I, T): the I-th of T), each also holding a lock of its own
        against a second task I and a task of another T."""
        if self.folder.exists() and not self.folder.is_dir():
            raise PoolError(f"{self.folder}: a file, not a folder: choose another --out")
        held = contextlib.ExitStack()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            held.enter_context(rundir.lock(self.folder / rundir.LOCK, shared=task is not None))
            if task is not None:
                index, tasks = task
                held.enter_context(rundir.lock(
                    self.folder / SHARE_LOCK.format(task=index, tasks=tasks)))
                self._refuse_other_shares(tasks)
        except PoolError:
            held.close()
            raise
        except rundir.Held as e:
            held.close()
            if e.shared:
                raise PoolError(f"{self.folder}: tasks of a --tasks share are running these "
                                "runs: wait for them to end") from None
            raise PoolError(f"{self.folder}: another process ({e.holder}) is running these runs: "
                            "wait for it to end") from None
        except OSError as e:
            held.close()
            raise PoolError(f"{self.folder}: cannot write there ({e.strerror or e})",
                            errno=e.errno) from None
        path, listing = self.folder / LISTING, self.listing()
        # a listing written before the data files (or the recipes) were recorded is taken as
        # of these files
        listed = json.loads(path.read_text()) if path.exists() else None
        if listed is not None:
            listed["data"] = {**listing["data"], **listed.get("data", {})}
        if listed is not None and listed != listing and not overwrite:
            held.close()
            rerun = "rerun it with those, " if listed["runs"] != listing["runs"] else ""
            raise PoolError(f"{self.folder} holds runs of {self.what} with other settings "
                            f"({_changes(listed, listing)}): {rerun}start over with "
                            "--overwrite, or choose another --out")
        if listed is not None and overwrite:
            self._remove(listed["runs"])
        if overwrite:
            self._remove_outputs()
        text = json.dumps(listing, indent=2).encode()
        atomic_write(path, lambda f: f.write(text))
        return held

    def _refuse_other_shares(self, tasks: int) -> None:
        """PoolError where a task of a share of another number of tasks than `tasks` holds its
        lock: every T-th run from I and every T'-th from I' overlap. (Each task takes its own
        lock before it looks at the others': of two that start together, one at least is
        refused.)"""
        for path in sorted(self.folder.iterdir()):
            named = SHARE_LOCK_NAME.fullmatch(path.name)
            if named is None or int(named[2]) == tasks:
                continue
            try:
                rundir.lock(path).close()
            except rundir.Held as e:
                raise PoolError(f"{self.folder}: --tasks {tasks}: task {named[1]} of a --tasks "
                                f"{named[2]} share ({e.holder}) is running these runs, which "
                                f"--tasks {tasks} shares out otherwise: give --tasks "
                                f"{named[2]}, or wait for it to end") from None

    def _remove(self, names) -> None:
        """The listed runs' folders, once no process is using any of them: where one is in
        use, none is removed."""
        folders = [self.folder / name for name in names if (self.folder / name).is_dir()]
        for folder in folders:
            try:
                rundir.lock(folder / rundir.LOCK).close()
            except rundir.Held as e:
                raise PoolError(f"--overwrite: {folder} is in use ({e.holder}): stop it "
                                "first") from None
        for folder in folders:
            shutil.rmtree(folder)
        (self.folder / LISTING).unlink()

    def _remove_outputs(self) -> None:
        """The outputs of the runs an overwrite starts over, said: where the new runs then
        fail or are stopped, no table of the old ones stays beside them, looking current."""
        removed = [path for path in self.outputs if path.exists()]
        for path in removed:
            path.unlink()
        if removed:
            print(f"{self.what}: --overwrite: removed {', '.join(map(str, removed))}, the tables "
                  "of the runs it starts over", flush=True)

    def state(self, run: Run) -> str:
        """rundir.state of the run's folder: 'finished', 'unfinished' or 'new'."""
        return rundir.state(self.folder_of(run))

    def unfinished(self) -> list[Run]:
        return [run for run in self.runs if self.state(run) != "finished"]

    def run(self, share: list[Run], jobs: int, gpus: list[str]) -> None:
        """Every run of `share` finished: skipped where it is, resumed where it began, started
        where it did not; `jobs` at once. PoolError names the runs that failed, with the last
        line each wrote or the signal that killed it; Stopped where a signal stopped the
        pool."""
        states = {run.name: self.state(run) for run in share}
        todo = [run for run in share if states[run.name] != "finished"]
        counts = {s: sum(v == s for v in states.values()) for s in ("finished", "unfinished")}
        print(f"{self.what}: {len(share)} runs in {self.folder}: {counts['finished']} finished "
              f"before (skipped), {counts['unfinished']} to resume, "
              f"{len(todo) - counts['unfinished']} to start; {jobs} at once", flush=True)
        seconds, failed, codes = [], [], {}
        with Processes(jobs, gpus) as processes:
            while processes.running or todo and not failed and not processes.stopped:
                while todo and processes.free and not failed and not processes.stopped:
                    run = todo.pop(0)
                    folder = self.folder_of(run)
                    folder.mkdir(exist_ok=True)
                    processes.start(run, run.command(folder, states[run.name] == "unfinished"),
                                    self.env, folder / LOG)
                    self._progress(share, processes, todo, seconds, failed,
                                   [f"{run.name} started"])
                time.sleep(POLL)
                events = []
                for run, code, took in processes.ended():
                    if code == 0 and self.state(run) == "finished":
                        seconds.append(took)
                        events.append(f"{run.name} finished in {took:.1f} s")
                    else:
                        failed.append(run)
                        codes[run.name] = code
                        events.append(f"{run.name} {'stopped' if processes.stopped else 'failed'}")
                if events:
                    self._progress(share, processes, todo, seconds, failed, events)
        if processes.stopped:
            raise Stopped(processes.stopped)
        if failed:
            raise PoolError("\n".join(
                f"{run.name} failed: {_why(codes[run.name], self.folder_of(run) / LOG)} (see "
                f"{self.folder_of(run) / LOG})" for run in failed)
                + "\nthe same command reruns the failed runs; the finished ones are kept")

    def _progress(self, share, processes: Processes, todo, seconds, failed,
                  events: list[str]) -> None:
        """The progress line: runs done, failed (or stopped), running and left of `share`, the
        time left at the mean of the runs finished so far (the slots working in parallel), and
        what happened."""
        running, left = len(processes.running), len(todo)
        done = len(share) - len(failed) - running - left
        ended = f"{len(failed)} {'stopped' if processes.stopped else 'failed'}, " if failed else ""
        if not running + left:
            eta = "nothing left"
        elif seconds:
            mean, now = sum(seconds) / len(seconds), time.monotonic()
            work = left * mean + sum(max(mean - (now - started), 0.0)
                                     for _, _, started in processes.running.values())
            eta = f"about {duration(work / processes.jobs)} left"
        else:
            eta = "time left: once a run has finished"
        print(f"{self.what}: {done} done, {ended}{running} running, {left} left, {eta} | "
              f"{'; '.join(events)}", flush=True)


def data_paths(runs: list[Run]) -> list[str]:
    """The files the runs read, as their flags name them: each value of FILE_FLAGS (as
    `--flag value` or `--flag=value`) that is not a data set's name."""
    named = set()
    for run in runs:
        for flag, following in zip(run.flags, (*run.flags[1:], None)):
            name, equals, value = flag.partition("=")
            if name in FILE_FLAGS:
                named.add(value if equals else following)
    return sorted(path for path in named if path is not None and path not in datasets.names())


def _sha256(path: str) -> str | None:
    """The file's sha256; None where there is no such file (its run then refuses it)."""
    if not datasets.is_file(path):
        return None
    return file_sha256(path)


def _changes(listed: dict, listing: dict) -> str:
    """What differs between two listings, in a few words: the files changed since (data,
    recipes), the runs gone and new, and the first changed run's flags."""
    said = [f"{path}: changed since they ran" for path in sorted(listing["data"])
            if listed["data"].get(path, listing["data"][path]) != listing["data"][path]]
    before, now = listed["runs"], listing["runs"]
    for names, what in (([n for n in before if n not in now], "no longer listed"),
                        ([n for n in now if n not in before], "new")):
        if names:
            said.append(f"{_runs(len(names))} {what}: {', '.join(names[:2])}"
                        f"{', ...' if len(names) > 2 else ''}")
    changed = [n for n in now if n in before and before[n] != now[n]]
    if changed:
        old, new = before[changed[0]].split(), now[changed[0]].split()
        said_ops = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new).get_opcodes():
            if tag != "equal":
                if i1 and old[i1 - 1].startswith("--"):       # the flag whose value changed
                    i1, j1 = i1 - 1, j1 - 1
                said_ops.append(f"{' '.join(old[i1:i2]) or '(none)'} -> "
                                f"{' '.join(new[j1:j2]) or '(none)'}")
        ran = ", ".join(said_ops)
        said.append(f"{changed[0]}: {ran}"
                    + (f"; {_runs(len(changed) - 1)} more changed" if len(changed) > 1 else ""))
    return "; ".join(said)


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours} h {m:02d} min" if hours else f"{m} min {s:02d} s" if m else f"{s} s"


def _why(code: int, log: Path) -> str:
    """Why a run failed: the signal that killed it (its last line is then only its progress),
    or else the last line it wrote (a trainer's error message)."""
    if code >= 0:
        return _last_line(log)
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:                      # a signal Python has no name for
        return f"killed by signal {-code}"


def _last_line(path: Path) -> str:
    """The last line a run wrote (a trainer's error message), or what says there was none."""
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1].strip() if lines else "it wrote nothing"


# ---------------------------------------------------------------------------------------------
# what the pool's flags (cli.add_pool_flags) ask

def run_share(pool: Pool, args) -> bool:
    """What the pool's flags ask of `pool`: the task's share of the runs run (nothing with
    --collect); True where every run of the pool is finished and the tables can be written.
    An NcaeError (PoolError; DataError, a write's) and Stopped say why not. --collect holds
    the folder alone, as a process running every run does: the tables are of finished runs,
    none under way, whichever task's it names; of a folder no run was started in, it writes
    nothing (a listing there would refuse the runs of other settings as another's)."""
    if args.collect and not (pool.folder / LISTING).exists():
        raise PoolError(f"--collect: {pool.folder} holds no runs of {pool.what}: run them first "
                        "(the same command without --collect)")
    share = None if args.tasks == 1 or args.collect else (args.task, args.tasks)
    with contextlib.closing(pool.take(args.overwrite, share)):
        if not args.collect:
            pool.run(pool.runs[args.task::args.tasks], args.jobs, args.gpus)
        left = pool.unfinished()
    if left and (args.collect or args.tasks == 1):
        raise PoolError(f"{len(left)} of the {len(pool.runs)} runs are not finished "
                        f"({', '.join(run.name for run in left[:3])}"
                        f"{', ...' if len(left) > 3 else ''}): run them first")
    if left:
        print(f"{pool.what}: task {args.task} of {args.tasks} done; {len(left)} runs of the "
              "other tasks are not finished: --collect writes the tables once they are")
    return not left


def exit_code(error: Exception) -> int:
    """Prints a pool's error or stop for the command line; returns its exit code."""
    if isinstance(error, Stopped):
        print(f"{error.signal_name}: stopped; the runs under way stopped at the end of a step: "
              "the same command resumes them", file=sys.stderr)
        return 128 + signal.Signals[error.signal_name]
    print(f"error: {error}", file=sys.stderr)
    return 2


ERRORS = (NcaeError, Stopped)     # what exit_code reports
