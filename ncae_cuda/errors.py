"""The package's one error family: what a command answers in a line, not a traceback.

Each error the package raises for a user's mistake or a machine's fault derives from NcaeError:
bad data (data.DataError), a setting (SettingError, below: a model's, a split's or a device's),
a recipe file (RecipeError, below),
a run folder (rundir.RunFolderError), a backend (ops.BackendUnavailable), the device's memory
(estimator.OutOfMemory), a fit that diverged (loop.Diverged), a sharded job's lost process
(distributed.ShardLost), a study (study_storage.TuneError), a pool of runs (pool.PoolError),
an approximate index that does not apply (ann.IndexUnavailable), a query a model does not
answer (base.Unsupported) or a model not fitted yet (base.NotFitted).
Each keeps the built-in base it had (ValueError, RuntimeError, ...), so `except ValueError`
still catches a DataError. One whose message names settings (NamingSettings) spells them as
the caller gives them: Python's keywords in str(), a command's flags on_command_line().
"""
from __future__ import annotations

from . import naming


def _filled(template: str, values: dict, spell) -> str:
    """`template`'s {fields} filled from `values` ({name: value}), each as spell(name, value)
    writes it: every error's message that is written once for several readers (Python's, a
    command line's, a recipe's) is filled so. A template of no values is its text as it is:
    any braces in it are text."""
    if not values:
        return template
    return template.format(**{name: spell(name, value) for name, value in values.items()})


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

    def on_command_line(self) -> str:
        """The message as a command's `error:` line says it: an error that names settings
        spells them as flags there (--index exact), as Python's keywords in str()."""
        return str(self)


class NamingSettings(NcaeError):
    """An error whose message names settings: `template`'s {fields} filled from `settings`
    ({name: value}), spelled as Python's keywords (index='exact') in str() and as flags
    (--index exact) on_command_line(), so that each message is written once for both."""

    def __init__(self, template: str, **settings):
        self.template, self.settings = template, settings
        super().__init__(_filled(template, settings, naming.as_keyword))

    def on_command_line(self) -> str:
        return _filled(self.template, self.settings, naming.as_flag)


class SettingError(NcaeError, ValueError):
    """A setting out of range, of the wrong kind, or contradicting another; `setting` names it.
    `values` ({name: value}) fill the message's {fields}: as Python writes them ((0, 10)) in
    str() and reason, which a Python call gives, as a command line writes them (0,10) in
    reason_as_written(), which a command's line naming the flag says, and as a file writes
    them in reason_spelled() (a recipe's TOML: [0, 10])."""

    def __init__(self, setting: str, message: str, **values):
        self.template, self.values = message, values
        self.setting, self.reason = setting, self.reason_spelled(repr)
        super().__init__(f"{setting} {self.reason}")

    def reason_as_written(self) -> str:
        """The reason, each value in it as a command line writes it: --cutoffs 0 is 0, where
        the Python call's (0,) would show a value the flag was never written as."""
        return self.reason_spelled(naming.as_written)

    def reason_spelled(self, spell) -> str:
        """The reason, each value in it spelled by `spell`."""
        return _filled(self.template, self.values, lambda _, value: spell(value))


class RecipeError(NcaeError, ValueError):
    """A recipe file that cannot be read, or that holds what a recipe may not (a setting that
    does not exist, a value its model refuses, the data's or split's); `path` names the file,
    `reason` says why, and str() both: "best.toml: cutoffs: must be positive integers, ...". A
    command says it after the flag that named the file (--config best.toml: ...)."""

    def __init__(self, path, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"{path}: {reason}")
