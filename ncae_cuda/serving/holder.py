"""The model that answers, and the one thread that touches it: scoring, and the reload a SIGHUP
asks for, run there one after another, so a batch being scored finishes on the model it began
with (a reload waits for it) and the next batch scores on the new one. The CPU backend's Numba
threads and a GPU's stream are never driven from two threads at once."""
from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..data.digest import file_sha256
from ..errors import NcaeError
from ..model.base import Model
from ..ops import cpu
from ..runs.factory import load_model

log = logging.getLogger("ncae_cuda.serve")


@dataclass(frozen=True)
class Served:
    """A loaded model, the file it came from and how it is searched, as /healthz shows it."""
    model: Model
    path: Path
    sha256: str
    index: str = "exact"

    def facts(self) -> dict:
        model = self.model
        return {"model": str(self.path), "sha256": self.sha256, "kind": model.title,
                "users": len(model.user_ids), "items": len(model.item_ids),
                "feedback": model.config.feedback, "based": model.based,
                "device": model.ops.name, "index": self.index}


def load(path: Path, device, index: str = "exact") -> Served:
    """The model at `path` on `device`, its approximate index read or built where `index`
    asks for it, warmed up; an NcaeError (DataError for a damaged file) if it cannot be."""
    try:
        sha256 = file_sha256(path)
    except OSError as e:
        raise NcaeError(f"{path}: {e.strerror}", errno=e.errno) from None
    model = load_model(path, device=device)
    if index == "approximate":
        model.item_index()
    return Served(warmed(model, index), path, sha256, index)


def warmed(model: Model, index: str) -> Model:
    """The model after one recommend through `index`, so that no request pays for what a
    first one costs: the kernels compiled (the CPU's once an install, the log saying so; a
    GPU's once a process) or read from their cache, the device arrays made. Before the server
    listens, so that /healthz answers once it is done."""
    start = time.perf_counter()
    with cpu.compile_note(log.info):
        model.recommend(model.user_ids[:1], n=1, index=index)
    log.info("warmed up: one user scored in %.1f s", time.perf_counter() - start)
    return model


class ModelHolder:
    """The served model (loaded at once: a model that cannot be loaded stops the command before
    it listens), and its thread."""

    def __init__(self, path: Path, device, index: str = "exact"):
        self.path, self.device, self.index = path, device, index
        self.current = load(path, device, index)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="model")

    async def run(self, work, *args):
        """work(model, *args) on the model's thread, with the model that answers then."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._do, work,
                                                                args)

    def _do(self, work, args: tuple):
        try:
            return work(self.current.model, *args)
        except StopIteration as e:    # an asyncio future cannot hold one: its awaiter would
            # wait for good (PEP 479 turns one leaving a generator into a RuntimeError alike)
            raise RuntimeError(f"StopIteration: {e}") from e

    def reload(self) -> bool:
        """Load the file again and answer with it from the next batch on; a file that fails to
        load keeps the model that answers now, and the log says why. Called on the model's
        thread (reload_soon)."""
        old = self.current
        try:
            self.current = load(self.path, self.device, self.index)
        except NcaeError as e:
            log.error("reload failed, still serving %s (sha256 %s): %s", old.path, old.sha256,
                      e.on_command_line())
            return False
        log.info("reloaded %s (sha256 %s, was %s)", self.path, self.current.sha256, old.sha256)
        return True

    def reload_soon(self) -> asyncio.Future:
        """reload() on the model's thread, after the work queued there (SIGHUP's handler)."""
        return asyncio.get_running_loop().run_in_executor(self._thread, self.reload)

    def close(self) -> None:
        self._thread.shutdown(wait=True)
