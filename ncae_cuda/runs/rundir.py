"""A run's folder (python -m ncae_cuda.train --out): the files of one training run, never mixed
with another's.

- run.json, the manifest, names the run the files belong to (its settings and backend) and
  whether it finished. A fresh run into a folder holding another run's files is refused;
  --resume continues only the run the manifest names, and says what differs otherwise.
- With overwrite, the new run writes its files in the folder's .overwrite/ (STAGING), and they
  replace the old run's only once it has finished: a refusal of its input, an interruption or
  a crash leaves the old run whole (before, its files were removed first, and a refused input
  left the folder holding only .lock); --resume continues the staged run. The swap removes the
  old files, its manifest last, then moves the new ones in, their manifest last, so a process
  killed part way is finished by the next one that takes the folder.
- .lock is held (flock) while a process uses the folder, so a second run on it refuses at
  start instead of both writing the same files; the system drops the lock when the process
  ends, however it ends. The process that takes the folder removes the temporary files a
  killed writer of the run's files left there.
- A folder that is a file, cannot be created or is not writable is refused before any data is
  loaded.
- A folder the run made is removed again, with the folders made above it, where the run is
  refused (its input, or the folder: --resume where there is no run) before it wrote anything
  there; one that was there before stays, as it was.
- A sharded run's rank 0 takes the folder; the other ranks join it (on a machine of their own,
  a folder of the same path), each writing its checkpoint files there.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
from pathlib import Path

from ..data.atomic_file import atomic_write, remove_temporaries
from ..errors import NcaeError
from ..model.blend import MEMBERS, member_checkpoint
from ..model.modelfile import differences

MANIFEST = "run.json"
STAGING = ".overwrite"                # an overwriting run's files, until it finishes
MODEL = "model.npz"                   # a run's model: load_model, recommend and serve read it
LOCK = ".lock"
FILES = (MANIFEST, "checkpoint-select.npz", "checkpoint-refit.npz", MODEL, "metrics.json",
         "baselines.json", "baselines.md")          # the trainer's, python -m ncae_cuda.baselines's
SHARD_FILES = "checkpoint-*.rank*-of-*.npz"   # a sharded run's (trainer.ShardCheckpoint)
MEMBER_FILES = tuple(str(member_checkpoint("checkpoint-*.npz", name))     # a blend's members'
                     for name in MEMBERS)
STUDIES = "tune-*"                    # folders: the studies of train --baselines' baselines
PATTERNS = (SHARD_FILES, *MEMBER_FILES, STUDIES)


def model_file(path: Path) -> Path:
    """A model file given by its path, or by the run folder that holds it (its MODEL)."""
    return path / MODEL if path.is_dir() else path


class RunFolderError(NcaeError):
    """A run folder this run cannot use (another run holds it or its files are another run's,
    it cannot be written, its manifest is not one): the message names it and what to do."""


class RunDirectory:
    def __init__(self, path: str | os.PathLike, run: dict):
        self.path, self.run = Path(path), run      # run: JSON-ready settings that identify it
        self.work = self.path         # where the run writes its files: path, or its STAGING
        self._lock = None
        self._wrote_manifest = False               # the work folder's run.json is this run's
        self._made: list[Path] = []   # the folders join made: path, then those above, upward

    def open(self, resume: bool = False, overwrite: bool = False) -> None:
        """Take the folder for this run (see the module's docstring); RunFolderError says why
        not, and a folder made for this run is removed again (abandon)."""
        self.join()
        try:
            self._take(resume, overwrite)
        except RunFolderError:
            self.abandon()
            raise

    def _take(self, resume: bool, overwrite: bool) -> None:
        """open's work in the folder: its lock, a swap left half done, the run's manifest."""
        here = f"--out {self.path}"
        staged = self.path / STAGING
        try:
            self._lock = lock(self.path / LOCK)
            # what a process killed while writing left behind: no other process writes here now
            for folder in (self.path, staged):
                if folder.is_dir():
                    remove_temporaries(folder, (*FILES, *PATTERNS))
            self._swap()
        except Held as e:
            raise RunFolderError(f"{here}: another run ({e.holder}) is using this folder: wait "
                                 "for it to end, or choose another --out") from None
        except OSError as e:
            raise RunFolderError(f"{here}: cannot write there ({e.strerror or e})",
                                 errno=e.errno) from None
        if resume:
            manifest = read_manifest(staged) if staged.is_dir() else None
            if manifest is not None:                # an overwriting run, unfinished
                self.work = staged
            else:
                manifest = read_manifest(self.path)
            if manifest is None:
                raise RunFolderError(f"--resume: {self.path} holds no run to continue (no "
                                     f"{MANIFEST})")
            changed = differences(manifest["run"], self.run)
            if changed:
                raise RunFolderError(f"--resume: {self.path} holds another run "
                                     f"({'; '.join(changed)}): resume with its settings, or "
                                     "choose another --out")
        else:
            present = run_files(self.path) + [f"{STAGING}/{name}" for name in run_files(staged)]
            if present and not overwrite:
                manifest = read_manifest(self.path)
                if manifest is None and not (staged / MANIFEST).exists():
                    # removed by hand: no run --resume could continue
                    raise RunFolderError(f"{here} holds a run's files ({', '.join(present)}) "
                                         f"but not its {MANIFEST}: start over with --overwrite, "
                                         "or choose another --out")
                status = "finished" if manifest and manifest.get("finished") else "unfinished"
                raise RunFolderError(f"{here} holds another run's files ({', '.join(present)}; "
                                     f"{status}): continue it with --resume, start over "
                                     "with --overwrite, or choose another --out")
            if overwrite:
                shutil.rmtree(staged, ignore_errors=True)   # an earlier overwriting run's
                staged.mkdir()
                self.work = staged
        self._write(finished=False)

    def join(self, overwrite: bool = False, resume: bool = False) -> None:
        """The folder made where it is not, and refused (RunFolderError) where it is a file or
        cannot be written: what every process of a run needs of it. A sharded run's other
        ranks join with the run's `overwrite` and `resume`, to write where rank 0 does."""
        here = f"--out {self.path}"
        if self.path.exists() and not self.path.is_dir():
            raise RunFolderError(f"{here}: a file, not a folder: choose another --out")
        try:
            made = [folder for folder in (self.path, *self.path.parents) if not folder.exists()]
            self.path.mkdir(parents=True, exist_ok=True)
            self._made = made
            if overwrite or resume and (self.path / STAGING).is_dir():
                self.work = self.path / STAGING
                self.work.mkdir(exist_ok=True)
        except OSError as e:
            raise RunFolderError(f"{here}: cannot write there ({e.strerror or e})",
                                 errno=e.errno) from None
        if not os.access(self.path, os.W_OK):
            raise RunFolderError(f"{here}: cannot write there (permission denied)")

    def finish(self) -> None:
        """Mark the run finished in its manifest; an overwriting run's files then replace the
        old run's."""
        self._write(finished=True)
        if self.work != self.path:
            self._swap()
            self.work = self.path

    def release(self) -> None:
        """Let another process take the folder (the end of the process does too)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def abandon(self) -> None:
        """A run that failed before it saved anything leaves no manifest behind, so the same
        command can run again as a fresh run (and an overwriting one, the old run as it was).
        Only its own: a run refused the folder (another run holds it, or has files there)
        leaves that run's manifest where it is. A folder this run made and still holds, left
        with nothing in it but its lock, is removed, and so are the folders made above it that
        are then empty (before, a refused input left runs/<name>-<date>-<time>/ holding only
        .lock); a folder that was there before stays, the user's or an old run's."""
        if self._wrote_manifest and run_files(self.work) == [MANIFEST]:
            (self.work / MANIFEST).unlink(missing_ok=True)
            if self.work != self.path:
                shutil.rmtree(self.work, ignore_errors=True)
        if self._lock is not None and self._made and os.listdir(self.path) == [LOCK]:
            # removed while the lock is held, so no other process takes the folder meanwhile;
            # one that a file was put in since stays (so does the lock file, open, on Windows)
            with contextlib.suppress(OSError):
                (self.path / LOCK).unlink()
                for folder in self._made:
                    folder.rmdir()
            self._made = []

    def _swap(self) -> None:
        """Where STAGING holds a finished run, it replaces the folder's: the old files removed,
        their manifest last, then the new ones moved in, theirs last. Done again from where it
        was by a process that finds it half done (the old manifest gone: the old files are)."""
        staged = self.path / STAGING
        manifest = read_manifest(staged) if staged.is_dir() else None
        if not (manifest and manifest.get("finished")):
            return
        if (self.path / MANIFEST).exists():
            for name in run_files(self.path):
                if (self.path / name).is_dir():                  # a baseline's study
                    shutil.rmtree(self.path / name)
                elif name != MANIFEST:
                    (self.path / name).unlink()
            (self.path / MANIFEST).unlink()
        for name in sorted(run_files(staged), key=lambda name: name == MANIFEST):
            os.replace(staged / name, self.path / name)
        shutil.rmtree(staged)

    def _write(self, finished: bool) -> None:
        manifest = {"run": self.run, "finished": finished,
                    "updated": datetime.datetime.now().isoformat(timespec="seconds")}
        text = json.dumps(manifest, indent=2).encode()
        atomic_write(self.work / MANIFEST, lambda f: f.write(text))
        self._wrote_manifest = True


class Held(Exception):
    """Another process holds the lock; `holder` says which, and `shared` whether the holders
    share it (lock(shared=True): one or more, not named)."""

    def __init__(self, holder: str, shared: bool = False):
        super().__init__(holder)
        self.holder, self.shared = holder, shared


def exclusive(f, wait: bool = True) -> None:
    """Lock the open file f for this process (flock; on Windows, msvcrt's lock of its first
    byte), waiting for another holder or else raising BlockingIOError, until unlock(f) or f is
    closed, however the process ends. (Imported here: fcntl is POSIX's, msvcrt Windows'.)"""
    if os.name == "nt":
        import msvcrt
        f.seek(0)
        try:
            msvcrt.locking(f.fileno(), msvcrt.LK_LOCK if wait else msvcrt.LK_NBLCK, 1)
        except OSError as e:      # LK_LOCK gives up after 10 tries: a holder that stays
            raise BlockingIOError(*e.args) from None
        return
    import fcntl
    fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))


def _shared(f) -> None:
    """Lock the open file f for this process and any others that share it, not for one that
    locks it exclusively; BlockingIOError where one does. (msvcrt has no shared lock: on
    Windows it is exclusive, and the sharers take turns.)"""
    if os.name == "nt":
        exclusive(f, wait=False)
        return
    import fcntl
    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)


def unlock(f) -> None:
    """Let go of exclusive(f)'s lock, f staying open."""
    if os.name == "nt":
        import msvcrt
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
        return
    import fcntl
    fcntl.flock(f, fcntl.LOCK_UN)


def lock(path: Path, shared: bool = False):
    """The file at `path` (made where absent), locked for this process and naming it (shared:
    for it and the others that lock it shared, naming none), held until the returned file is
    closed or the process ends, however it ends. Held where another process holds it
    exclusively, or (not shared) at all; OSError where it cannot be made."""
    f = open(path, "a+")
    try:
        _shared(f) if shared else exclusive(f, wait=False)
    except BlockingIOError:
        holder, sharers = _holder(f, shared)
        f.close()
        raise Held(holder, sharers) from None
    f.seek(0)
    f.truncate()             # a sharer names no one: the file may name a holder gone since
    if not shared:
        f.write(f"process {os.getpid()}")
    f.flush()
    return f


def _holder(f, shared: bool) -> tuple[str, bool]:
    """Who holds the lock f was refused: (the process the file names, False) for an exclusive
    holder, ("processes that share it", True) where only sharers hold it."""
    if not shared:
        try:
            _shared(f)                    # granted: the holders only share it
        except BlockingIOError:
            pass
        else:
            unlock(f)
            return "processes that share it", True
    f.seek(0)
    return f.read().strip() or "another process", False


def state(path: Path) -> str:
    """What a run folder holds: 'finished', 'unfinished' (a run began there, and --resume
    continues it) or 'new' (no run's files); RunFolderError where it holds a run's files
    without their manifest (removed by hand: a fresh run would be refused them every time)."""
    manifest = read_manifest(path)
    if manifest is not None:
        return "finished" if manifest.get("finished") else "unfinished"
    # a swap killed part way holds the new files before their manifest: the next run ends it
    orphaned = [] if (path / STAGING / MANIFEST).exists() else run_files(path)
    if orphaned:
        raise RunFolderError(f"{path} holds a run's files ({', '.join(orphaned)}) but not its "
                             f"{MANIFEST}: remove {path} and run the same command again, "
                             "which reruns it")
    return "new"


def run_files(folder: Path) -> list[str]:
    """The run's files in `folder`: its manifest, checkpoints, model and metrics, and the
    folders of its baselines' studies."""
    return ([name for name in FILES if (folder / name).exists()]
            + sorted(p.name for pattern in PATTERNS for p in folder.glob(pattern)))


def read_manifest(folder: Path) -> dict | None:
    """The run manifest in `folder`, or None; RunFolderError where the file is not one."""
    path = folder / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
        # a run that is not an object (an edited file) would fail later, comparing its
        # settings with this run's, as a traceback
        if not (isinstance(manifest, dict) and isinstance(manifest.get("run"), dict)):
            raise ValueError("no run in it")
    except ValueError as e:
        raise RunFolderError(f"{path}: not a run manifest ({e}): remove it, or choose "
                             "another --out") from None
    return manifest
