"""The parser every command of the package reads its command line with."""
from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """A command's parser: no abbreviated flags (a flag added later would change what one
    means), and a mistake answered by its one line, naming --help, with exit status 2: the
    whole usage printed before it buried the line. --help prints everything."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
