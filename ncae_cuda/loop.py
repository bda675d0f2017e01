"""One pass over the training rows, shared by fine-tuning and every pre-training stage: a shuffle
seeded by (seed, epoch), batches cut on the backend's device, input dropout masks keyed by
(seed, epoch, entry), and one step per batch. Nothing depends on what ran before, so any epoch
can be re-run, or resumed after, with the same result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from tqdm import tqdm

from .ops.common import CSR


@dataclass(frozen=True)
class Schedule:
    seed: int
    batch_size: int
    dropout: float                    # input dropout rate q


# step(batch, keep (nnz,) uint8, scale = 1/(1-q)) -> the batch's mean loss as a 0-d device array
Step = Callable[[object, object, float], object]


def run_epoch(step: Step, ops, csr: CSR, rows: np.ndarray, schedule: Schedule, epoch: int,
              label: str) -> float:
    """step() over `rows` of `csr` in batches; returns the mean loss per row."""
    order = np.random.default_rng([schedule.seed, epoch]).permutation(rows).astype(np.int32)
    scale = 1.0 / (1.0 - schedule.dropout)
    starts = range(0, len(order), schedule.batch_size)
    losses = ops.xp.empty(len(starts), np.float64)   # (steps,) on the device: read once, at the end
    for step_index, start in enumerate(tqdm(starts, desc=label, leave=False, disable=None,
                                            unit="batch")):
        chunk = order[start:start + schedule.batch_size]
        batch = ops.cut_batch(csr, chunk, schedule.batch_size)
        keep = ops.xp.empty(len(batch.cols), np.uint8)
        ops.dropout_keep(keep, batch.entry_ids, schedule.seed, epoch, schedule.dropout)
        losses[step_index] = step(batch, keep, scale)
    losses = ops.to_host(losses)
    bad = np.flatnonzero(~np.isfinite(losses))
    if len(bad):
        raise FloatingPointError(
            f"the training loss became {losses[bad[0]]} at step {bad[0] + 1} of {len(losses)} "
            f"in {label}: lower the learning rate (lr, --lr)")
    sizes = np.minimum(schedule.batch_size, len(order) - np.asarray(starts))   # (steps,) rows
    return float(losses @ sizes) / len(order)


def trainable_rows(csr: CSR) -> np.ndarray:
    """Rows with at least one training entry: an empty row has no input to encode."""
    return np.flatnonzero(np.diff(csr.host_indptr) > 0)
