"""The package's one error family: what a command answers in a line, not a traceback.

Each error the package raises for a user's mistake or a machine's fault derives from NcaeError:
bad data (data.DataError), a setting (SettingError, below: a model's, a split's or a device's),
a run folder (rundir.RunFolderError), a backend (ops.BackendUnavailable), the device's memory
(estimator.OutOfMemory), a fit that diverged (loop.Diverged), a sharded job's lost process
(distributed.ShardLost), a study (study_storage.TuneError), a pool of runs (pool.PoolError),
an approximate index that does not apply (ann.IndexUnavailable), a query a model does not
answer (base.Unsupported) or a model not fitted yet (base.NotFitted).
Each keeps the built-in base it had (ValueError, RuntimeError, ...), so `except ValueError`
still catches a DataError.
"""
from __future__ import annotations


class NcaeError(Exception):
    """A user's mistake or a machine's fault.

    A command prints it as one line, `error: ...`, and exits 2; anything else is a bug and
    keeps its traceback. The message says what was wrong and what to do.

    Attributes
    ----------
    errno : int or None
        The errno of the OSError the error wraps (a write that found the disk full: ENOSPC),
        else None, so a caller tells the system's errors apart without reading the text.
    """

    def __init__(self, *args, errno: int | None = None):
        super().__init__(*args)
        self.errno = errno


class SettingError(NcaeError, ValueError):
    """A setting out of range, of the wrong kind, or contradicting another; `setting` names it."""

    def __init__(self, setting: str, message: str):
        super().__init__(f"{setting} {message}")
        self.setting, self.reason = setting, message
