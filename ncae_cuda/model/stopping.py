"""Stopping a fit at a signal (Ctrl-C's SIGINT, or SIGTERM) where it can be resumed exactly.

While a fit's trainer runs (`deferred`), the first SIGINT or SIGTERM only asks to stop: the
epoch loop (loop.py) ends the training step under way and raises `Stopped`, which carries the
losses of the epoch's steps taken so far, and the trainer saves its checkpoint with them before
passing it on. A resumed fit starts that epoch at the next step, so it ends exactly where an
uninterrupted one does. (Stopped in pre-training, a fit resumes from the checkpoint saved before
it, as after a kill.) A signal that comes after the last step (while the last epoch is
scored) stops the process as the fit ends, with no step left to take. A second signal stops at
once, as a KeyboardInterrupt, without a checkpoint; outside a fit, signals are as Python has
them.

A process that writes where a raise or a death could cut a write short (a tuning worker, in a
study's storage) takes a signal as a request (`recorded`): nothing raises, the fit ends at the
end of its step as above (and at once where the request came before it), and the process looks
at asked() between its own steps; a second signal raises there too.

Within `compiles_whole` (every command's, ncae_cuda.commands.run_command: outside a fit, and
in a sharded job's, signals raise), a signal that comes while Numba compiles in the main
thread is held, and goes to its handler as the compile ends: raised in the compile, it could
be raised inside llvmlite's ctypes callback, where Python prints "Exception ignored" and drops
it, and the compile, cut short, then fails with an error of its own (Numba's RuntimeError, "no
compiled object yet"), or the process goes on as if no signal had come.

still_improving() tells a fit that ran out of epochs while validation was still improving.
"""
from __future__ import annotations

import contextlib
import signal
import threading

from numba.core import event as numba_event

from ..interrupts import Signalled

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_asked: list[str] = []            # the name of the signal that asked to stop, while one has
_compiles_held: list[bool] = []   # [True] within compiles_whole (in the main thread)


class Stopped(KeyboardInterrupt):
    """Training stopped at a signal at the end of a step; `losses` are those of the steps of
    the epoch taken so far. after_last_step: the signal came once the fit had taken its last
    step (as its last epoch was scored): no step was left to stop at."""

    def __init__(self, signal_name: str, losses: list[float], after_last_step: bool = False):
        super().__init__(signal_name)
        self.signal_name, self.losses = signal_name, losses
        self.after_last_step = after_last_step


def asked() -> str | None:
    """The name of the signal that asked to stop, or None."""
    return _asked[0] if _asked else None


def _record(number, frame) -> None:
    """recorded()'s handler, and deferred()'s: the first signal's name, and nothing raised; a
    second signal raises (a user who asks twice is not kept waiting on a long step or trial,
    at the risk of a write cut short that the first request avoids), naming itself (before, a
    plain KeyboardInterrupt: a second SIGTERM was said as a Ctrl-C, exit 130)."""
    if _asked:
        raise Signalled(signal.Signals(number).name)
    _asked.append(signal.Signals(number).name)


@contextlib.contextmanager
def recorded():
    """Within it, a signal only asks to stop (asked()), and raises nothing, in a fit or out
    of one (see the module's docstring); the caller stops where asked() says so. A second
    signal raises Signalled, a KeyboardInterrupt (_record). Only the main thread can take signals:
    elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        with _handled_by(_record):
            yield
    finally:
        _asked.clear()


@contextlib.contextmanager
def deferred():
    """Within it, a signal asks the fit to stop at the end of its step (see the module's
    docstring). Only the main thread can take signals: elsewhere this does nothing; nor does
    it where _record takes them already (within recorded(), whose requests the fit's steps
    hear as they are)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is _record):
        yield
        return
    try:
        with _handled_by(_record):
            yield
    finally:
        late = asked()
        _asked.clear()
    if late is not None:        # asked after the last step (in the last epoch's validation):
        # the fit is whole and saved, and the process still stops
        raise Stopped(late, [], after_last_step=True)


@contextlib.contextmanager
def _handled_by(handler):
    """Within it, SIGINT and SIGTERM go to `handler`; after it, to those they went to before."""
    previous = {number: signal.signal(number, handler) for number in SIGNALS}
    try:
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)


@contextlib.contextmanager
def compiles_whole():
    """Within it, a SIGINT or SIGTERM that comes while Numba compiles in the main thread (or
    loads from its cache: both hold its compiler lock) goes to its handler once the compile
    ends (see the module's docstring). Only the main thread takes signals: elsewhere this does
    nothing; nor within another compiles_whole (a command's, around a sharded job's), whose
    listener holds them already (two would restore each other's handlers out of order: Numba
    tells its listeners of a compile's end in the order they came, not the reverse)."""
    if threading.current_thread() is not threading.main_thread() or _compiles_held:
        yield
        return
    held: list[int] = []
    holding = contextlib.ExitStack()

    def hold(number, frame) -> None:
        held.append(number)

    class Compiling(numba_event.Listener):
        depth = 0                       # the main thread's compiles under way (they nest)

        def on_start(self, event) -> None:
            if threading.current_thread() is threading.main_thread():
                if self.depth == 0:
                    holding.enter_context(_handled_by(hold))
                self.depth += 1

        def on_end(self, event) -> None:
            if threading.current_thread() is not threading.main_thread():
                return
            self.depth -= 1
            if self.depth == 0:
                holding.close()
                came, held[:] = held.copy(), []
                for number in came:     # to the handlers they have outside a compile
                    signal.raise_signal(number)
    _compiles_held.append(True)
    try:
        with numba_event.install_listener("numba:compiler_lock", Compiling()):
            yield
    finally:
        holding.close()
        _compiles_held.clear()


# A fit that ran its whole budget ended still improving when its best validation epoch is among
# the last few: with patience p, the last p (early stopping had not given up on it: a best epoch
# further back would have stopped it); without patience, the last 5% (15 of 300: a curve that
# has levelled off sets its best further back than that).
STILL_IMPROVING_SHARE = 0.05


def still_improving(history: list, best_epoch: int, epochs: int, patience: int) -> bool:
    """Whether a fit of `epochs` epochs with this history (its records, by epoch) and best
    validation epoch ran them all and was still improving at the end: more epochs may help."""
    validated = any("valid" in record for record in history)
    ran_out = bool(history) and history[-1]["epoch"] == epochs
    few = patience or max(1, round(STILL_IMPROVING_SHARE * epochs))
    return validated and ran_out and best_epoch > epochs - few
