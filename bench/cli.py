"""What the benches' command lines share: the devices they run on, refused in one line before any
work where one cannot run here; the epochs a timing takes (start-up's and one more at least);
the types of their comma-separated flags; --quick's values,
which only replace defaults; the folder their results go to, made before any work (a long
run must not find at its end that it cannot write), or refused in one line; the pair of
files each writes there, <name>.json and <name>.md; and how a Ctrl-C ends one: a line saying
what the pair keeps, exit 130."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from ncae_cuda import cli, ops
from ncae_cuda.data.atomic_file import atomic_write
from ncae_cuda.errors import NcaeError


def check_devices(parser: argparse.ArgumentParser, devices) -> None:
    """Each of `devices` (get_backend's names) refused by the parser's error where it cannot run
    here (gpu without a CUDA GPU: the reason said), before any work and holding no GPU memory."""
    for device in devices:
        cli.refused(parser, ops.backend_name, device)


def check_timed_epochs(parser: argparse.ArgumentParser, epochs: int | None) -> None:
    """--epochs of a bench that times the epochs after the first (which holds start-up: Numba's
    cache loaded, CUDA compiled) refused by the parser's error below 2: one epoch's figure
    would be that start-up's."""
    if epochs is not None and epochs < 2:
        parser.error(f"--epochs must be >= 2, the first being start-up; got {epochs}")


def add_quick(parser: argparse.ArgumentParser, what: str, quick: dict) -> None:
    """The --quick flag: `what` it does ("tiny data: a smoke test"), and `quick`'s values of the
    flags not given ({dest: value}, parse's)."""
    given = ", ".join(f"--{dest.replace('_', '-')} {value}" for dest, value in quick.items())
    parser.add_argument("--quick", action="store_true",
                        help=f"{what}; where not given, {given}")


def parse(parser: argparse.ArgumentParser, argv: list[str] | None,
          quick: dict) -> argparse.Namespace:
    """The flags; with --quick, `quick`'s values ({dest: value}, a string parsed by the flag's
    type) in place of the defaults, so that a flag given on the command line still wins."""
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**quick)
        args = parser.parse_args(argv)
    return args


def out_folder(parser: argparse.ArgumentParser, path: Path) -> Path:
    """`path` made a folder (with its parents), or the parser's error saying why it cannot be."""
    why = unwritable_folder(path)
    if why:
        parser.error(f"--out {path}: {why}")
    return path


def unwritable_folder(path: Path) -> str | None:
    """Why `path` cannot be made a folder (with its parents), or None once it is one."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"cannot write there ({e.strerror or e})"
    return None


def write_results(out: Path, name: str, result: dict, markdown: str,
                  progress: tuple[int, int, str] | None = None) -> None:
    """<name>.json (the result) and <name>.md (the markdown) under out, each replaced whole.

    A bench writes them again after every part it measures, so that a time limit that stops it
    (a device's window) keeps the parts it finished, and a kill mid-write keeps the previous
    pair. progress (done, planned, what: "runs measured") says in both files, while done is
    below planned, that parts are missing ("unfinished": "2 of 3 runs measured"). Where a file
    cannot be written (the disk full), the command ends with exit 2 saying so in a line.
    """
    if progress and progress[0] < progress[1]:
        unfinished = "{} of {} {}".format(*progress)
        result = {"unfinished": unfinished, **result}
        markdown = (f"> unfinished: {unfinished} (the command stopped before the rest, or is "
                    f"still at work)\n\n{markdown}")
    for path, text in ((out / f"{name}.json", json.dumps(result, indent=2, default=float)),
                       (out / f"{name}.md", markdown)):
        try:
            atomic_write(path, lambda f, text=text: f.write((text.rstrip("\n") + "\n").encode()))
        except NcaeError as e:                       # atomic_write's DataError: errno and why
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(2) from None


@contextlib.contextmanager
def said_when_interrupted(out: Path, name: str):
    """Within it, a Ctrl-C (KeyboardInterrupt) ends the command with exit 130 (the shell's for
    SIGINT, as the package's commands end) and one line, no traceback, saying what
    <name>.json and .md under `out` keep: the parts finished (write_results' "unfinished"), the
    whole result, or nothing of this run (files there from before are an earlier run's)."""
    first = out / f"{name}.json"
    before = _version(first)
    try:
        yield
    except KeyboardInterrupt:
        if _version(first) == before:                   # not written since the with began
            earlier = f" ({name}.json and .md there are an earlier run's)" if before else ""
            kept = f"nothing written to {out}{earlier}"
        else:
            said = json.loads(first.read_text()).get("unfinished")
            kept = f"{said or 'the whole result'}, kept in {first} and .md"
        print(f"\ninterrupted: {kept}", file=sys.stderr)
        raise SystemExit(130) from None


def _version(path: Path) -> tuple | None:
    """Which file stands at `path` (atomic_write's each a new one), or None where none does."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_mtime_ns


# ---------------------------------------------------------------------------------------------
# argparse types of the benches' comma-separated flags, refused by the parser before any work

def listed(parse, what: str):
    """The argparse type of comma-separated values, each parse(value) and each once (a value
    twice would be measured twice, or name one run's folder twice): a ValueError or a value
    repeated refuses the whole, as not `what` ("integers >= 1")."""
    def parsed(text: str) -> list:
        try:
            values = [parse(value) for value in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what}, got {text!r}") from None
        if len(set(values)) < len(values):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what}, each once, got {text!r}")
        return values
    return parsed


def integers(least: int):
    """An argparse type: comma-separated integers >= least."""
    return numbers(int, least)


def numbers(kind: type, least):
    """An argparse type: comma-separated numbers of `kind` (int, float) >= least."""
    return listed(_at_least(kind, least), f"{'integers' if kind is int else 'numbers'} >= {least}")


def number(least: float):
    """An argparse type: one number >= least (an integer's is ncae_cuda.cli.count)."""
    check = _at_least(float, least)

    def parsed(text: str) -> float:
        try:
            return check(text)
        except ValueError:
            message = f"expected a number >= {least}, got {text!r}"
            raise argparse.ArgumentTypeError(message) from None
    return parsed


def _at_least(kind: type, least):
    def value(text: str):
        if not kind(text) >= least:             # NaN too
            raise ValueError(text)
        return kind(text)
    return value


def _share(text: str) -> float:
    if not 0 < float(text) <= 1:
        raise ValueError(text)
    return float(text)


shares = listed(_share, "shares in (0, 1]")


def names(choices):
    """An argparse type: comma-separated names, each one of `choices`."""
    def name(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text
    return listed(name, "names of: " + ", ".join(choices))
