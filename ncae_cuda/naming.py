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
    """A flag's value as a command line writes it: (8, 16) as 8,16."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def as_keyword(name: str, value) -> str:
    """A setting's value as a Python call gives it: index='exact'."""
    return f"{name}={value!r}"


def as_flag(name: str, value) -> str:
    """A setting's value as a command line gives it: --index exact."""
    return f"{flag(name)} {value}"
