"""The fit driver (Trainer): pre-training (if asked), then the epochs, each scored on validation
(early stopping keeps the best epoch's parameters), with a checkpoint at the end of an epoch once
`checkpoint_every` seconds have passed since the last (and always after pre-training and the last
epoch), so a fit killed at any point continues from its last checkpoint and ends exactly where
an uninterrupted one does. A fit stopped by a signal (stopping.py) saves its checkpoint at the
end of the step under way, and continues from the next step.

The facade (estimator.NCAE) hands a Trainer the network, its training matrix and batch planner,
and a scorer of the validation data; the trainer knows nothing of users, items or ids.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from ..data.interactions import DataError
from ..ops.common import CSR
from ..ops.layout import AdamConfig
from ..ops.plan import Planner
from . import loop, modelfile, stopping
from .network import Network
from .pretrain import Stage, pretrain

# Seconds between a fit's checkpoints: what a kill can cost at most. A checkpoint copies the
# parameters, Adam's moments and the best epoch's parameters to the host and syncs them to disk
# (about 1 GB at the ML-10M shape, hidden 500,500): after every epoch, that took longer than the
# epochs themselves.
CHECKPOINT_EVERY = 60.0


@dataclass
class Progress:
    """Where a fit stands: saved with each checkpoint, so a killed fit continues from there."""
    epoch: int = 0                    # epochs finished
    pretrained: bool = False          # pre-training (if any) is done
    stopped_early: bool = False       # validation stopped improving for `patience` epochs
    best_epoch: int = 0               # the best validation epoch so far
    best_value: float | None = None
    bad_epochs: int = 0               # epochs since the best one
    history: list = field(default_factory=list)
    epoch_losses: list = field(default_factory=list)   # of the steps of the next epoch taken
                                                        # before a stop (stopping.Stopped)


def fingerprint(*parts) -> str:
    """A digest of arrays (None: an absent part): what a checkpoint was trained on."""
    h = hashlib.sha256()
    for part in parts:
        if part is not None:
            h.update(np.ascontiguousarray(part).tobytes())
        h.update(b"|")
    return h.hexdigest()[:32]


class Checkpoint:
    """A fit's checkpoint: what resuming needs (the parameters, Adam's moments and step count,
    the best validation parameters, the Progress), for one `identity`: everything that
    determines the fit's result (its settings and epochs, a digest of its training and
    validation data, the backend). A checkpoint of another identity is refused, naming what
    differs: a stale file is never taken for this fit's."""

    kind = "checkpoint"
    processes = None          # a sharded fit's number of processes; None: one, unsharded

    def __init__(self, path: str | Path, identity: dict):
        self.path, self.identity = Path(path), identity

    def exists(self) -> bool:
        return self.path.exists()

    def due(self, due: bool) -> bool:
        """Whether to save now, given this process's view of it."""
        return due

    def save(self, net: Network, progress: Progress, best) -> None:
        self._write(self.path, {}, net, progress, best)

    def load(self, net: Network) -> tuple[Progress, object]:
        """Restore `net` from the file; returns (Progress, best parameters (device) or None)."""
        return self._read(self.path, net)

    def _write(self, path: Path, meta: dict, net: Network, progress: Progress, best) -> None:
        meta = {"identity": self.identity, "processes": self.processes, "steps": net.steps,
                "progress": asdict(progress), **meta}
        arrays = {"state": net.ops.to_host(net.state[[0, 2, 3]])}      # params, m, v
        if best is not None:
            arrays["best"] = net.ops.to_host(best)
        modelfile.write(path, self.kind, meta, arrays)

    def _read(self, path: Path, net: Network) -> tuple[Progress, object]:
        meta, arrays = modelfile.read(path, self.kind)
        self._check(path, meta, self.identity)
        try:
            state, best, steps = arrays["state"], arrays.get("best"), int(meta["steps"])
            size = net.layout.size
            if state.shape != (3, size) or best is not None and best.shape != (size,):
                raise ValueError(f"state {state.shape} and best "
                                 f"{None if best is None else best.shape}; the fit has {size} "
                                 "parameters")
            progress = Progress(**meta["progress"])
        except (KeyError, ValueError, TypeError) as e:
            raise modelfile.inconsistent(path, self.kind, e) from None
        net.restore(*state, steps)
        return progress, None if best is None else net.ops.to_device(best)

    def _check(self, path: Path, meta: dict, identity: dict) -> None:
        """DataError where the file's fit is not this one: other settings, data or backend, or
        another number of processes."""
        saved = meta.get("processes")
        if saved != self.processes:
            def ran(n):
                return "in one process" if n is None else f"sharded over {n} processes"
            raise DataError(f"{path}: the checkpoint of a fit {ran(saved)}; this one runs "
                            f"{ran(self.processes)}: resume it as it ran, or start over")
        changed = modelfile.differences(meta.get("identity", {}), modelfile.json_ready(identity))
        if changed:
            raise DataError(f"{path}: the checkpoint is of another fit ({'; '.join(changed)})"
                            ": resume with what made it, or start over")


class ShardCheckpoint(Checkpoint):
    """A column-sharded fit's checkpoint: each rank writes its own file beside `path` (its
    columns, its copy of the replicated layers, Adam's state, the best epoch's parameters), and
    once every rank has, rank 0 names that generation in the manifest at `path`; only then are
    the older files removed. A fit killed while its ranks were writing resumes from the last
    generation they all finished, and only with the same processes, split and settings (the
    identity names them). Every rank's run folder is --out (shared, or the same path on each
    machine, holding that rank's files)."""

    kind = "checkpoint-shard"

    def __init__(self, path: str | Path, identity: dict, comm):
        super().__init__(path, identity)
        self.comm, self.generation = comm, 0
        self.processes = comm.world
        # what the manifest holds: the fit's identity but this rank's part of it
        self.common = {k: v for k, v in identity.items() if k != "shard"}

    def _file(self, generation: int) -> Path:
        c = self.comm
        return self.path.with_name(f"{self.path.stem}.rank{c.rank}-of-{c.world}"
                                   f".g{generation}{self.path.suffix}")

    def exists(self) -> bool:
        """Rank 0's answer (its folder holds the manifest), the same on every rank."""
        return bool(self._from_rank0(int(self.comm.rank == 0 and self.path.exists())))

    def due(self, due: bool) -> bool:
        """Rank 0's decision, so every rank saves the same epochs."""
        return bool(self._from_rank0(int(due)))

    def save(self, net: Network, progress: Progress, best) -> None:
        generation, together = self.generation + 1, self.comm.together
        together(lambda: self._write(self._file(generation), {"generation": generation}, net,
                                     progress, best), "writing their checkpoint")
        together(lambda: self.comm.rank == 0 and modelfile.write(self.path, "checkpoint", {
            "identity": self.common, "processes": self.processes, "generation": generation},
            {}), "writing the checkpoint's manifest")
        for old in self.path.parent.glob(self._file(0).name.replace(".g0", ".g*")):
            if old != self._file(generation):
                old.unlink(missing_ok=True)
        self.generation = generation

    def load(self, net: Network) -> tuple[Progress, object]:
        generation = self.comm.together(lambda: self.comm.rank == 0 and self._generation(),
                                        "reading the checkpoint's manifest")
        self.generation = self._from_rank0(int(generation))
        return self.comm.together(lambda: self._read(self._file(self.generation), net),
                                  "reading their checkpoint")

    def _generation(self) -> int:
        """The generation the manifest names, where it is this fit's (rank 0)."""
        meta, _ = modelfile.read(self.path, "checkpoint")
        self._check(self.path, meta, self.common)
        try:
            return int(meta["generation"])
        except (KeyError, ValueError, TypeError) as e:
            raise modelfile.inconsistent(self.path, "checkpoint", e) from None

    def _from_rank0(self, value: int) -> int:
        mine = np.array([value if self.comm.rank == 0 else 0], np.int64)
        return int(self.comm.sum_host(mine)[0])


def format_record(record: dict, metric: str) -> str:
    """The log line of one epoch's record."""
    if "pretrain" in record:
        line = f"epoch   0 | pre-trained ({', '.join(record['pretrain'])})"
    else:
        line = f"epoch {record['epoch']:3d} | loss {record['loss']:.4f}"
    if "valid" in record:
        line += f" | valid {metric} {record['valid'][metric]:.4f}"
    return f"{line} | {record['seconds']:.2f} s"


@dataclass
class Trainer:
    """One fit of `net` on the rows of `csr`, batched by `planner`."""
    net: Network
    csr: CSR
    planner: Planner
    adam: AdamConfig
    pretrain: str                     # the pre-training variant (BP: none)
    pretrain_epochs: int
    patience: int                     # epochs without a better validation score before
                                      # stopping (0: never)
    selection: tuple[str, bool]       # the validation figure early stopping follows, and
                                      # whether higher is better
    score: Callable[[], dict] | None = None          # the validation figures, or no validation
    on_epoch: Callable[[dict], None] | None = None   # sees (and may add to) each epoch's record
    checkpoint: Checkpoint | None = None
    checkpoint_every: float = CHECKPOINT_EVERY    # seconds (0: after every epoch)
    verbose: bool = True

    def run(self, epochs: int, resume: bool = False) -> Progress:
        """Train up to `epochs` epochs (after pre-training), from the checkpoint if `resume` and
        there is one; the network ends with the best validation epoch's parameters. A signal
        stops one process at the end of a step, checkpointed (stopping.py); a sharded fit's
        processes could only agree on that step with a collective every step, so a signal ends
        them where they are, and they resume from their last checkpoint."""
        with stopping.deferred() if self.net.comm is None else contextlib.nullcontext():
            return self._run(epochs, resume)

    def _run(self, epochs: int, resume: bool) -> Progress:
        net, ops = self.net, self.net.ops
        progress, best = Progress(), None
        if resume and self.checkpoint is not None and self.checkpoint.exists():
            progress, best = self.checkpoint.load(net)
        metric, higher = self.selection
        saved = time.monotonic()

        def save(always: bool = True) -> None:
            nonlocal saved
            if self.checkpoint is None:
                return
            due = self.checkpoint.due(always or time.monotonic() - saved >= self.checkpoint_every)
            if due:
                self.checkpoint.save(net, progress, best)
                saved = time.monotonic()

        def end_of_epoch(record: dict) -> None:
            nonlocal best
            start = time.perf_counter()
            if self.score is not None:
                record["valid"] = self.score()
                value = record["valid"][metric]
                if not math.isfinite(value):
                    raise loop.Diverged(
                        f"the validation {metric} became {value} after epoch "
                        f"{record['epoch']}: lower the learning rate (lr, --lr)")
                if progress.best_value is None or (value > progress.best_value if higher
                                                   else value < progress.best_value):
                    progress.best_value, progress.best_epoch = value, record["epoch"]
                    progress.bad_epochs = 0
                    if best is None:
                        best = ops.xp.empty_like(net.params)
                    best[...] = net.params
                else:
                    progress.bad_epochs += 1
            if self.on_epoch is not None:
                self.on_epoch(record)
            record["eval_seconds"] = time.perf_counter() - start
            progress.history.append(record)
            if self.verbose:
                print(format_record(record, metric), flush=True)

        if not progress.pretrained:
            save()                                   # a resumed fit re-runs pre-training
            if self.pretrain != "BP":
                start = time.perf_counter()
                stage = Stage(self.csr, self.planner, self.adam, self.pretrain_epochs,
                              self.verbose)
                losses = pretrain(net, stage, self.pretrain)
                end_of_epoch({"epoch": 0, "pretrain": losses,
                              "seconds": time.perf_counter() - start})
            progress.pretrained = True
            save()
        adam = self.fine_tuning_adam(progress.epoch, len(progress.epoch_losses))
        while progress.epoch < epochs and not progress.stopped_early:
            epoch = progress.epoch + 1
            start = time.perf_counter()
            if epoch < epochs:
                self.planner.prefetch(epoch + 1)
            shared = net.comm.bytes if net.comm else 0
            plan = self.planner.plan(epoch)
            try:
                loss = loop.run_epoch(lambda batch, scale: net.train_step(batch, scale, adam),
                                      net.memory, self.csr, plan, f"epoch {epoch}",
                                      # a sharded step is not captured (yet)
                                      graph=getattr(ops, "graphs", False) and net.comm is None,
                                      done=progress.epoch_losses)
            except stopping.Stopped as stop:          # a signal: resumable from this step on
                progress.epoch_losses = stop.losses
                save()
                raise
            progress.epoch_losses = []
            record = {"epoch": epoch, "loss": loss, "seconds": time.perf_counter() - start}
            if net.comm:                  # what a step of a sharded fit shared, this rank's part
                record["collective_bytes"] = (net.comm.bytes - shared) / plan.steps
            end_of_epoch({**record, "l2": net.l2_penalty(self.adam.weight_decay)})
            progress.epoch = epoch
            progress.stopped_early = (self.score is not None and self.patience > 0
                                      and progress.bad_epochs >= self.patience)
            save(always=epoch == epochs or progress.stopped_early)
        if best is not None:
            net.params[...] = best
        return progress

    def fine_tuning_adam(self, epochs_done: int, steps_done: int) -> AdamConfig:
        """Adam's settings for fine-tuning, `epochs_done` epochs and `steps_done` steps of the
        next in: the learning-rate schedule counts its epochs from the end of pre-training
        (whose steps share Adam's count)."""
        if self.adam.lr_decay == 1.0:
            return self.adam
        steps = self.planner.geometry.steps
        return replace(self.adam, steps_per_epoch=steps,
                       decay_start=self.net.steps - epochs_done * steps - steps_done)
