"""What a tuning study is, as a record: what it tunes (the model, the recipe, the space, the
data, the score) and how it runs (trials, budget, storage, workers). python -m ncae_cuda.tune
builds one from its flags, as the trainer builds a RunSpec from its own; the study's machinery
(tuning.py, tune_study.py) takes it and never sees a command line.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .spec import DataSpec

NCAE = "ncae"                   # the model a study tunes where none is named


@dataclass(frozen=True)
class TuneSpec:
    """A study's settings: python -m ncae_cuda.tune's flags (their defaults are the flags')."""
    out: Path                      # the trials' runs, the outputs and the default storage
    data: DataSpec                 # the data and split every trial trains on, as given
    recipe: Path | None            # the settings the space does not search (None: defaults)
    space: Path | None             # the settings searched (None: the feedback's own space)
    metric: str | None             # implicit feedback: a ranking figure (None: the model's)
    seed: int                      # the sampler's and every trial's training
    split_seeds: tuple[int, ...]   # a trial's score: the mean over these splits (): data's
    trials: int                    # finished trials the study ends with
    budget: float | None           # minutes of this command's wall time (None: no limit)
    pruner: str                    # median, halving or none
    storage: str | None            # a database's URL (None: a journal file in out)
    study: str                     # the study's name in the storage
    jobs: int                      # worker processes
    gpus: tuple[str, ...]          # shared out among the workers, one each
    device: str                    # the trials' (spec.DEVICES)
    overwrite: bool                # start over: the study and its trials removed first
    started: float                 # time.monotonic() when the command started (a worker's:
                                   # its command's)
    worker: int | None = None      # this process's number among the workers (None: the command)
    model: str | None = None       # what the trials fit (space.TUNED; None: the recipe's, or
                                   # else NCAE)
    cutoffs: tuple[int, ...] | None = None  # a baseline's M of HR@M and NDCG@M, the last
                                   # scoring a trial (None: NCAE's default; NCAE's: its recipe's)
