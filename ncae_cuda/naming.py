"""How a setting is named on the command line: the one rule that both the flags (cli.py wires
them) and the library's messages and command lines (a SpecError naming the flag, the argv of a
command another command starts) follow. It imports nothing of the package, so every layer may
use it.
"""
from __future__ import annotations


def flag(name: str) -> str:
    """A field's flag: 'split_seed' -> '--split-seed'."""
    return "--" + name.replace("_", "-")


def as_written(value) -> str:
    """A flag's value as a command line writes it: (8, 16) as 8,16, (5.0, 1.0) as 5,1."""
    return ",".join(map(_one_written, value)) if isinstance(value, tuple) else _one_written(value)


def _one_written(value) -> str:
    """One value as a command line writes it: a float as the shortest text that reads back as
    it (0.5, 1e-05), less the '.0' a whole one has, which the user typing 5 never wrote (the
    flag's parse made 5.0 of it)."""
    text = str(value)
    return text.removesuffix(".0") if isinstance(value, float) else text


def as_keyword(name: str, value) -> str:
    """A setting's value as a Python call gives it: index='exact'."""
    return f"{name}={value!r}"


def as_flag(name: str, value) -> str:
    """A setting's value as a command line gives it: --index exact."""
    return f"{flag(name)} {value}"
