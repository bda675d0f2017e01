"""What the machine lends this process: the cores it may run on. A base module (beside errors.py
and cli.py): the data, model and runs layers all size their thread pools by it.
"""
from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS keeps one (Linux), else
    every core the OS counts (1 where it cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
