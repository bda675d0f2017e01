"""What the benches' command lines share: the folder their results go to, made before any work
(a long run must not find at its end that it cannot write), or refused in one line."""
from __future__ import annotations

import argparse
from pathlib import Path


def out_folder(parser: argparse.ArgumentParser, path: Path) -> Path:
    """`path` made a folder (with its parents), or the parser's error saying why it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        parser.error(f"--out {path}: cannot write there ({e.strerror or e})")
    return path
