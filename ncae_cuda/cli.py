"""The command line's argparse, for every command of the package: the parser they read it with,
the flags generated from the fields of the records the library declares (a run's RunSpec and
DataSpec, the model's Config: each field carries its flag's default, help and a plain parse
function raising ValueError), the argparse types and flags several commands share (a pool's),
and a library's error turned into the parser's one line. The library layers never import
argparse, nor this module (tests/test_layers.py): they declare, and this module and
ncae_cuda.commands wire.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from dataclasses import fields
from pathlib import Path

from .errors import NcaeError
from .interrupts import Signalled, signal_name
from .naming import as_written, flag

FIRST_TASK = 0                  # --task's default: a pool's first share (the only one of one)


def exit_with(main) -> None:
    """sys.exit(main()) for a command's __main__, where a reader that stops reading (the
    output piped into head) ends the command as it ends a Unix tool: quietly, exit status 141
    (128 + SIGPIPE), no BrokenPipeError traceback; and a Ctrl-C (KeyboardInterrupt) ends it
    with exit status 130 (128 + SIGINT, as the shell's for a process the signal killed) and
    one line, `interrupted`, saying how to continue where the command said (continued_by),
    no traceback. A SIGTERM (a launcher's or a pool's way to stop a command) ends it alike,
    raised as Signalled where the command's work has no handler of its own: exit status 143
    (128 + SIGTERM), its line `SIGTERM: stopped` (before, killed by it: -15, nothing said)."""
    before = signal.signal(signal.SIGTERM, _terminated)
    try:
        try:
            code = main()
        finally:            # what is still buffered meets the closed pipe here (--help's too)
            sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout once more at exit: pointed at /dev/null, that flush says nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + signal.SIGPIPE
    except KeyboardInterrupt as e:
        name = signal_name(e)
        how = e.how if isinstance(e, Interrupted) else ""
        if how is not None:         # (None: another process of the job says it)
            said = "interrupted" if name == "SIGINT" else f"{name}: stopped"
            # (on a line of its own: the terminal's ^C, or a progress line, may end the one
            # above)
            print(f"\n{said}{how and f': {how}'}", file=sys.stderr)
        code = 128 + signal.Signals[name]
    if signal.getsignal(signal.SIGTERM) is _terminated:     # (not a job's, left as it is)
        signal.signal(signal.SIGTERM, before)
    sys.exit(code)


def _terminated(number, frame) -> None:
    """exit_with's SIGTERM handler: a command's work ends at it as at a Ctrl-C."""
    raise Signalled("SIGTERM")


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C (or SIGTERM: signal_name) in work a command can continue: `how` says how
    ("continue with --resume --out runs/a"), in exit_with's line; None where another process
    of the job says it, for all."""

    def __init__(self, how: str | None, signal_name: str):
        super().__init__(how)
        self.how, self.signal_name = how, signal_name


@contextlib.contextmanager
def continued_by(how: str | None):
    """Within it, a Ctrl-C ends the command (exit_with) with a line saying `how` to continue
    the work it began: from where that work has left something the continuation takes up (a
    run folder's manifest, a study's storage). how=None: with no line, where another process
    of the job says it (torchrun hands a Ctrl-C to every rank of a job: rank 0 says it)."""
    try:
        yield
    except Interrupted:         # an inner continued_by's, which knows more
        raise
    except KeyboardInterrupt as e:
        raise Interrupted(how, signal_name(e)) from None


class Parser(argparse.ArgumentParser):
    """A command's parser: no abbreviated flags (a flag added later would change what one
    means), and a mistake answered by its one line, naming --help, with exit status 2: the
    whole usage printed before it buried the line. --help prints everything."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def refused(parser: argparse.ArgumentParser, call, *args):
    """call(*args); a user's mistake it raises (an NcaeError: a flag's value out of range, two
    flags that contradict each other) refused by parser.error, in its one line."""
    try:
        return call(*args)
    except NcaeError as e:
        parser.error(str(e))


def check_seed(parser: argparse.ArgumentParser, seed: int) -> None:
    """A --seed below 0 refused by parser.error: numpy's generators take none."""
    if seed < 0:
        parser.error(f"--seed must be >= 0; got {seed}")


def check_file_to_write(parser: argparse.ArgumentParser, flag: str, path: Path | None,
                        kind: str, reads: dict[str, Path | None] | None = None) -> None:
    """The file a command writes at its end (`flag`'s value, None where not given; `kind` its
    format, e.g. CSV) refused by parser.error where it cannot be written: no folder holds it,
    or a folder stands in its place, or it is one of the files the command reads (`reads`,
    {what it is: its path or None}), which the output would replace. Called before the
    command's work, which a refusal at the end would waste."""
    if path is None:
        return
    if not path.parent.is_dir():
        parser.error(f"{flag} {path}: there is no folder {path.parent}")
    if path.is_dir():
        parser.error(f"{flag} {path}: a folder; name the {kind} file to write")
    for what, read in (reads or {}).items():
        if read is not None and path.exists() and read.exists() and os.path.samefile(path, read):
            parser.error(f"{flag} {path}: {what} this command reads; name another file")


# ---------------------------------------------------------------------------------------------
# argparse types

def argument_type(parse):
    """The argparse type of a library's plain parse function: its ValueError's message is the
    line the parser prints. A class (int, float, Path) is argparse's own type, whose line
    ('invalid int value') stays."""
    if parse is None or isinstance(parse, type):
        return parse

    def parsed(text: str):
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parsed.__name__ = parse.__name__
    return parsed


def int_list(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated integers."""
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def float_pair(text: str) -> tuple[float, float]:
    """An argparse type: LOW,HIGH."""
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH, got {text!r}")
    return low, high


def count(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def gpu_ids(text: str) -> list[str]:
    """An argparse type: comma-separated GPU numbers."""
    ids = text.split(",")
    if not all(i.strip().isdigit() for i in ids):
        raise argparse.ArgumentTypeError(f"expected comma-separated GPU numbers, got {text!r}")
    return [i.strip() for i in ids]


# ---------------------------------------------------------------------------------------------
# the flags generated from a record's fields

def add_settings(p: argparse.ArgumentParser, settings: type, from_the_data: dict) -> None:
    """A flag for every model setting (a field of `settings`, Config), its help and default
    taken from the field; from_the_data: {setting: help of its default} for the settings whose
    default the data gives (the flag's default None)."""
    groups = {name: p.add_argument_group(name) for name in ("model", "training", "evaluation")}
    for f in fields(settings):
        meta = f.metadata
        kind = {"ints": int_list, "range": float_pair}.get(meta["kind"])
        if kind is None and not meta["choices"]:
            kind = float if "float" in str(f.type) else int
        default = None if f.name in from_the_data else f.default
        shown = from_the_data.get(f.name, None if default is None else as_written(default))
        help_ = meta["help"] + ("" if shown is None else f" (default: {shown})")
        groups[meta["group"]].add_argument(
            flag(f.name), type=kind, choices=meta["choices"], default=default, help=help_,
            metavar={"ints": "K1,K2,...", "range": "LOW,HIGH"}.get(meta["kind"]))


def add_fields(group, record: type, names=None, helps: dict | None = None) -> None:
    """A flag for each field of `record` (DataSpec, RunSpec) in `names` (default: every field
    with a flag), in `group`, generated from the field: its default, help, parse function,
    choices, metavar and action. helps: {name: help} where a command's flag says more than the
    field's (its own device, its own folder)."""
    for f in fields(record):
        meta = f.metadata
        if not meta or names is not None and f.name not in names:
            continue
        kwargs = {"default": f.default, "help": (helps or {}).get(f.name, meta["help"])}
        if meta["action"]:
            kwargs.update(action=meta["action"], dest=f.name)
        else:
            kwargs.update(type=argument_type(meta["parse"]), choices=meta["choices"],
                          metavar=meta["metavar"])
        group.add_argument(meta["flag"] or flag(f.name), **kwargs)


def values(args: argparse.Namespace, record: type) -> dict:
    """The parsed flags of `record`'s fields, by name (the fields without a flag, without
    metadata, left out)."""
    return {f.name: getattr(args, f.name) for f in fields(record) if f.metadata}


# ---------------------------------------------------------------------------------------------
# a pool's flags (ncae_cuda.runs.pool)

def add_slot_flags(g) -> None:
    """--jobs and --gpus: how many processes at once, and the GPUs they share."""
    g.add_argument("--jobs", type=count, metavar="N",
                   help="processes at once, each in a slot of its own, the cores shared out "
                        "among them (default: 1, or one per GPU of --gpus)")
    g.add_argument("--gpus", type=gpu_ids, default=[], metavar="0,1,...",
                   help="GPUs to share out: slot i sees the i-th (round robin) as "
                        "CUDA_VISIBLE_DEVICES (default: none named)")


def add_pool_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a command that runs a pool."""
    g = p.add_argument_group("running the runs")
    add_slot_flags(g)
    g.add_argument("--task", type=int, metavar="I",
                   help="with --tasks T: run the I-th share of the runs (0 <= I < T; on a SLURM "
                        "array, $SLURM_ARRAY_TASK_ID with --array=0-(T-1)) (default: "
                        f"{FIRST_TASK}; not with --collect)")
    g.add_argument("--tasks", type=count, default=1, metavar="T",
                   help="share the runs out among T tasks, each its own command, on one machine "
                        "or many sharing --out; the task that finds every run finished writes "
                        "the tables (default: %(default)s)")
    g.add_argument("--collect", action="store_true",
                   help="run nothing: write the tables from the runs' folders, once every task "
                        "has ended")
    g.add_argument("--overwrite", action="store_true",
                   help="start over: remove the runs of this table under --out first")


def check_slots(args: argparse.Namespace) -> None:
    """Fill --jobs' default: one per GPU named, else one."""
    if args.jobs is None:
        args.jobs = len(args.gpus) or 1


def check_pool_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse the pool flags that do not go together; fill --jobs' and --task's defaults."""
    check_slots(args)
    if args.collect and args.task is not None:
        # (before, accepted and unread: the tables are every task's, whichever it named)
        parser.error(f"--task {args.task}: --collect writes the tables of every task's runs, "
                     "and runs none: leave --task out")
    if args.task is None:
        args.task = FIRST_TASK
    if not 0 <= args.task < args.tasks:
        parser.error(f"--task {args.task}: must be in 0..{args.tasks - 1} (--tasks {args.tasks})")
    if args.overwrite and (args.tasks > 1 or args.collect):
        parser.error("--overwrite: start over with one command (no --tasks, no --collect), "
                     "then share the runs out")
