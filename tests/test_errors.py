"""The package's one error family (ncae_cuda.errors): every error it raises for a user's
mistake or a machine's fault is an NcaeError, each command answers one in a line with exit
status 2, and anything else still shows its traceback."""
import errno
import importlib
import inspect
import os
import pkgutil
from pathlib import Path

import pytest
from helpers import read_only

import ncae_cuda
from ncae_cuda import cli, interrupts, naming
from ncae_cuda.commands import baselines, datasets, experiments, recommend, train, tune
from ncae_cuda.data import atomic_file
from ncae_cuda.errors import NamingSettings, NcaeError, SettingError
from ncae_cuda.model import stopping
from ncae_cuda.ops import emulator
from ncae_cuda.runs import pool, rundir

# Exceptions the package uses for its own control flow, never shown to a user as an error:
INTERNAL = {
    stopping.Stopped,      # a signal asked a fit to stop: the command says how to resume
    pool.Stopped,          # ...and a pool of runs: the same
    rundir.Held,           # a lock another process holds: its takers raise their own error
    cli.Interrupted,       # a Ctrl-C in work a command can continue: exit_with says how
    interrupts.Signalled,  # a SIGTERM, or a second signal in a fit: ended at as a Ctrl-C
}
# ...and a bug's, shown with its traceback, as a GPU's illegal memory access is:
BUGS = {
    emulator.KernelFault,  # a thread of an emulated kernel faulted: the kernel's or its launcher's
}


def defined_exceptions() -> set[type]:
    """Every exception class a module of the package defines (warnings are not errors)."""
    found = set()
    for info in pkgutil.walk_packages(ncae_cuda.__path__, "ncae_cuda."):
        module = importlib.import_module(info.name)
        found |= {c for _, c in inspect.getmembers(module, inspect.isclass)
                  if c.__module__ == info.name and issubclass(c, BaseException)
                  and not issubclass(c, Warning)}
    return found


def test_every_error_the_package_defines_is_an_ncae_error():
    found = defined_exceptions()
    assert INTERNAL | BUGS <= found                 # the allow-lists name no class that is gone
    assert len(found) >= 12                         # the walk reached the package's modules
    strays = sorted(c.__qualname__ for c in found - INTERNAL - BUGS
                    if not issubclass(c, NcaeError))
    assert not strays, f"not NcaeErrors: {strays}"


def test_each_error_keeps_its_built_in_base():
    from ncae_cuda.data.interactions import DataError, UnknownIds
    from ncae_cuda.model.base import NotFitted
    from ncae_cuda.model.config import SettingError
    from ncae_cuda.model.distributed import ShardLost
    from ncae_cuda.model.estimator import OutOfMemory
    from ncae_cuda.model.loop import Diverged
    from ncae_cuda.ops import BackendUnavailable
    for error, base in [(DataError, ValueError), (UnknownIds, KeyError),
                        (SettingError, ValueError), (BackendUnavailable, RuntimeError),
                        (OutOfMemory, RuntimeError), (ShardLost, RuntimeError),
                        (Diverged, FloatingPointError), (NotFitted, RuntimeError)]:
        assert issubclass(error, NcaeError) and issubclass(error, base), error


def test_a_wrapped_oserror_keeps_its_errno(tmp_path, monkeypatch):
    # tune tells a full disk by this attribute, not by the message's text
    with monkeypatch.context() as m:
        read_only(m)
        with pytest.raises(NcaeError) as caught:
            atomic_file.atomic_write(tmp_path / "f", lambda f: f.write(b"x"))
    assert caught.value.errno == errno.EROFS

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(Path, "mkdir", full)
    with pytest.raises(rundir.RunFolderError, match="cannot write there") as caught:
        rundir.RunDirectory(tmp_path / "run", {}).join()
    assert caught.value.errno == errno.ENOSPC
    assert NcaeError("not the system's").errno is None


def test_a_run_folder_error_is_no_data_error(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(rundir.RunFolderError, match="a file, not a folder") as caught:
        rundir.RunDirectory(file, {}).open()
    assert not isinstance(caught.value, ValueError)


def fails(error: BaseException):
    """A stand-in for a command's work that raises `error`, whatever it is called with."""
    def fail(*args, **kwargs):
        raise error
    return fail


# each command: its argv, and the work inside its try (module, name) that the test makes fail
COMMANDS = {
    "train": (train.main, lambda d: ["--dataset", "synthetic-tiny", "--device", "cpu", "--out",
                                     str(d / "run")], (train, "run")),
    "baselines": (baselines.main, lambda d: ["--dataset", "synthetic-tiny", "--models", "pop",
                                             "--out", str(d / "run")],
                  (baselines, "get_backend")),
    "tune": (tune.main, lambda d: ["--out", str(d / "study")], (tune, "setup")),
    "recommend": (recommend.main, lambda d: [str(d / "model.npz"), "--users", "1"],
                  (recommend, "load_model")),
    "experiments": (experiments.main, lambda d: ["configurations", "--dataset", "synthetic-tiny",
                                                 "--quick", "--out", str(d / "runs")],
                    (pool, "run_share")),
    "datasets": (datasets.main, lambda d: ["describe", "synthetic-tiny"], (datasets, "load")),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_prints_an_ncae_error_in_one_line(tmp_path, monkeypatch, capsys, name):
    main, argv, (owner, work) = COMMANDS[name]
    monkeypatch.setattr(owner, work, fails(NcaeError("what went wrong: what to do")))
    assert main(argv(tmp_path)) == 2
    assert capsys.readouterr().err.splitlines() == ["error: what went wrong: what to do"]


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_lets_a_bug_show_its_traceback(tmp_path, monkeypatch, name):
    main, argv, (owner, work) = COMMANDS[name]
    monkeypatch.setattr(owner, work, fails(ZeroDivisionError("a bug")))
    with pytest.raises(ZeroDivisionError, match="a bug"):
        main(argv(tmp_path))


@pytest.mark.parametrize("value, written", [
    (5.0, "5"), (-1.0, "-1"), (0.0, "0"), (0.5, "0.5"), (1e-05, "1e-05"), (1e-3, "0.001"),
    (2.5e16, "2.5e+16"), (float("inf"), "inf"), (7, "7"), ("exact", "exact"),
    ((5.0, 1.0), "5,1"), ((0.5, 4.5), "0.5,4.5"), ((10, 100), "10,100")])
def test_a_value_is_written_as_a_command_line_types_it(value, written):
    # a float as typed (5, not Python's 5.0), and read back by the flag's parse as the value
    assert naming.as_written(value) == written
    parts = value if isinstance(value, tuple) else (value,)
    assert tuple(type(v)(w) for v, w in zip(parts, written.split(","))) == parts


def test_a_message_of_no_values_is_its_text_whichever_error_says_it():
    # one rule fills both kinds' templates: without values, braces are text (before, a
    # NamingSettings formatted its text anyway and raised KeyError in its own constructor)
    text = "give settings as a dict, {name: value}"
    assert str(NamingSettings(text)) == NamingSettings(text).on_command_line() == text
    assert str(SettingError("hidden", text)) == f"hidden {text}"
    # ...and with values, each kind spells them as its reader writes them
    named = NamingSettings("use the exact top-k ({index})", index="exact")
    assert (str(named), named.on_command_line()) == ("use the exact top-k (index='exact')",
                                                     "use the exact top-k (--index exact)")
    setting = SettingError("rating_scale", "must be (low, high); got {value}", value=(5.0, 1.0))
    assert (str(setting), setting.reason_as_written()) == (
        "rating_scale must be (low, high); got (5.0, 1.0)", "must be (low, high); got 5,1")
