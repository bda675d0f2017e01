"""The signal a KeyboardInterrupt came by. A base module (beside errors.py and cli.py): the
model layer raises it (stopping's second signal), the runs layer and the commands read it, each
saying the signal and ending with its exit status (128 + the signal's number).
"""
from __future__ import annotations


class Signalled(KeyboardInterrupt):
    """A KeyboardInterrupt raised by the package's handler of a signal, naming it: a SIGTERM
    (cli.exit_with's), a second SIGINT or SIGTERM (stopping's). Python's own, of a Ctrl-C,
    names none: it is SIGINT's."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


def signal_name(interrupt: KeyboardInterrupt) -> str:
    """The signal a KeyboardInterrupt came by: SIGINT, unless it names another (signal_name:
    Signalled's, cli.Interrupted's, stopping.Stopped's, pool.Stopped's)."""
    return getattr(interrupt, "signal_name", "SIGINT")
