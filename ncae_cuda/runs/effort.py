"""What a model's search cost, as a comparison prints it beside the figures: the trials of a
tune study (its trials.csv, beside its best.toml) and their minutes, or a grid's points; and
how the study scored them (its tune.json), for the studies tuned alike beside it.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

TABLE = "trials.csv"                     # a study's trials, in its folder beside best.toml
MARKER = "tune.json"                     # the study's record there (study_outputs writes it)
FINISHED = ("COMPLETE", "PRUNED")        # the trials a study's --trials counts


def of_study(recipe: Path | None) -> dict | None:
    """{'by': 'study', 'trials', 'minutes', 'jobs', 'device'}: the finished trials of the
    study whose best.toml is `recipe` and their own wall time, Numba's compile left out (as
    the study's trials.csv has it), read from the trials.csv beside it, the --jobs its workers
    shared the cores by and the backend its trials ran on (its tune.json's; each absent from a
    record before it held them); None where there is none (a recipe written by hand)."""
    table = None if recipe is None else Path(recipe).parent / TABLE
    if table is None or not table.is_file():
        return None
    with open(table, newline="") as f:
        finished = [row for row in csv.DictReader(f) if row["state"] in FINISHED]
    scored = scoring(recipe) or {}
    return {"by": "study", "trials": len(finished),
            "minutes": sum(float(row["seconds"]) for row in finished) / 60,
            **{key: scored[key] for key in ("jobs", "device") if key in scored}}


def scoring(recipe: Path | None) -> dict | None:
    """{'metric', 'split_seeds', 'data', 'pruner', 'seed', 'jobs', 'device'}: the validation
    figure (e.g. 'recall@100'), the split seeds and the data flags (spec.as_used's) by which
    the study whose best.toml is `recipe` scored its trials, its --pruner, its --seed, its
    --jobs (the workers that shared the cores) and the backend its trials ran on ('cpu',
    'gpu'), from the tune.json beside it ('data', 'pruner', 'seed', 'jobs' and 'device' absent
    from a record before it held them); None where there is none (a recipe written by hand, a
    study's record before it held them)."""
    try:
        held = json.loads((Path(recipe).parent / MARKER).read_text())
    except (TypeError, OSError, ValueError):
        return None
    return held.get("scored") if isinstance(held, dict) else None


def of_grid(points: int, seconds: float) -> dict:
    """{'by': 'grid', 'trials', 'minutes'}: a grid's points scored and the search's time."""
    return {"by": "grid", "trials": points, "minutes": seconds / 60}


def columns(effort: dict | None, device: str | None = None) -> dict:
    """A table row's 'trials' and 'minutes' cells ('-' where nothing was searched), the
    minutes of a study run by more than one worker saying how many (each trial had its
    worker's share of the cores, not all of them), and those of a study run on another
    backend than `device` (the run's, where given) naming it: a GPU's minutes are not a
    CPU's."""
    if effort is None:
        return {"trials": "-", "minutes": "-"}
    jobs, ran_on = effort.get("jobs", 1), effort.get("device", device)
    said = [*([f"{jobs} jobs"] if jobs > 1 else []),
            *([f"on {ran_on}"] if device is not None and ran_on != device else [])]
    return {"trials": f"{effort['trials']} ({effort['by']})",
            "minutes": f"{effort['minutes']:.1f}" + (f" ({', '.join(said)})" if said else "")}
