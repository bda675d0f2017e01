"""One pass over the training rows, shared by fine-tuning and every pre-training stage: the
epoch's plan (plan.py) goes to the device once, then per step the batch is cut into the step
memory and the step runs; the steps' losses stay on the device until the epoch's end. Nothing
depends on what ran before, so any epoch can be re-run, or resumed after, with the same result.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from tqdm import tqdm

from ..errors import NcaeError
from ..ops.common import CSR
from ..ops.memory import StepMemory
from ..ops.plan import EpochPlan
from . import stopping

# step(batch, scale = 1/(1-q)) -> the batch's row_loss (B,) on the device
Step = Callable[[object, float], object]


class Diverged(NcaeError, FloatingPointError):
    """The fit's training loss or validation score became NaN or infinite: the message says
    where, and to lower the learning rate."""


def run_epoch(step: Step, memory: StepMemory, csr: CSR, plan: EpochPlan, label: str,
              graph: bool = False, done: list[float] = ()) -> float:
    """step() over the plan's batches of `csr`, cut into `memory`; returns the mean loss per
    row. Inside the epoch the host waits for the device once: for the losses, at the end.

    done: the losses of the epoch's first steps, taken before a stop (stopping.Stopped, raised
    at the end of a step where a signal asked to stop): the epoch goes on from the next step.

    graph: replay a step captured as a CUDA graph instead of launching each step's kernels
    (where the backend can capture). It is captured in the second epoch asked to replay, after
    one that ran the same step uncaptured (which compiled and loaded its kernels and let cuBLAS
    make its plans: none of that may happen while capturing), and kept in `memory`: `step` must
    be the same in every epoch that asks for a graph.
    """
    ops = memory.ops

    def take(s: int) -> None:
        batch = ops.cut_batch(memory, csr, plan, s)
        ops.step_loss(memory.losses, memory.step, step(batch, plan.scale), batch.row_weight)

    ops.load_plan(memory, plan)
    if len(done):
        memory.losses[:len(done)] = ops.to_device(np.asarray(done, np.float32))
        memory.step[...] = len(done)
    if graph and memory.graph is None and memory.warm:
        memory.graph = ops.capture(lambda: take(0))
    replay = memory.graph if graph else None
    for s in tqdm(range(len(done), plan.steps), desc=label, leave=False, disable=None,
                  unit="batch"):
        replay() if replay else take(s)
        if stopping.asked():
            taken = ops.to_host(memory.losses[:s + 1]).astype(np.float64)
            raise stopping.Stopped(stopping.asked(), taken.tolist())
    memory.warm |= graph
    losses = ops.to_host(memory.losses[:plan.steps]).astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(losses))
    if len(bad):
        raise Diverged(
            f"the training loss became {losses[bad[0]]} at step {bad[0] + 1} of {len(losses)} "
            f"in {label}: lower the learning rate (lr, --lr)")
    sizes = np.array([plan.rows(s) for s in range(plan.steps)])          # (steps,) real rows
    return float(losses @ sizes / sizes.sum())
