"""The commands, each a thin parser over ncae_cuda.runs: `python -m ncae_cuda.NAME` runs
ncae_cuda/commands/NAME.py (train, tune, baselines, experiments, recommend, check, datasets).
"""
from __future__ import annotations

import importlib

from ..cli import exit_with


def run_command(name: str) -> None:
    """exit_with the main of ncae_cuda/commands/`name`.py, for its `python -m` module: the
    command's import (its libraries': a moment) within exit_with too, stopping's (Numba's)
    with it, so a Ctrl-C as it loads ends the command in a line, as one in its work does; and
    a signal that comes while Numba compiles in the main thread goes to its handler as the
    compile ends (stopping.compiles_whole): raised within, Python could drop it, and the
    command go on."""
    def main():
        from ..model import stopping
        with stopping.compiles_whole():
            return importlib.import_module(f"{__name__}.{name}").main()
    exit_with(main)
