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
    """{'by': 'study', 'trials', 'minutes', 'jobs'}: the finished trials of the study whose
    best.toml is `recipe` and their own wall time, Numba's compile left out (as the study's
    trials.csv has it), read from the trials.csv beside it, and the --jobs its workers shared
    the cores by (its tune.json's; absent from a record before it held them); None where there
    is none (a recipe written by hand)."""
    table = None if recipe is None else Path(recipe).parent / TABLE
    if table is None or not table.is_file():
        return None
    with open(table, newline="") as f:
        finished = [row for row in csv.DictReader(f) if row["state"] in FINISHED]
    jobs = (scoring(recipe) or {}).get("jobs")
    return {"by": "study", "trials": len(finished),
            "minutes": sum(float(row["seconds"]) for row in finished) / 60,
            **({} if jobs is None else {"jobs": jobs})}


def scoring(recipe: Path | None) -> dict | None:
    """{'metric', 'split_seeds', 'data', 'pruner', 'seed', 'jobs'}: the validation figure
    (e.g. 'recall@100'), the split seeds and the data flags (spec.as_used's) by which the study
    whose best.toml is `recipe` scored its trials, its --pruner, its --seed and its --jobs
    (the workers that shared the cores), from the tune.json beside it ('data', 'pruner',
    'seed' and 'jobs' absent from a record before it held them); None where there is none (a
    recipe written by hand, a study's record before it held them)."""
    try:
        held = json.loads((Path(recipe).parent / MARKER).read_text())
    except (TypeError, OSError, ValueError):
        return None
    return held.get("scored") if isinstance(held, dict) else None


def of_grid(points: int, seconds: float) -> dict:
    """{'by': 'grid', 'trials', 'minutes'}: a grid's points scored and the search's time."""
    return {"by": "grid", "trials": points, "minutes": seconds / 60}


def columns(effort: dict | None) -> dict:
    """A table row's 'trials' and 'minutes' cells ('-' where nothing was searched), the
    minutes of a study run by more than one worker saying how many: each trial had its
    worker's share of the cores, not all of them."""
    if effort is None:
        return {"trials": "-", "minutes": "-"}
    jobs = effort.get("jobs", 1)
    return {"trials": f"{effort['trials']} ({effort['by']})",
            "minutes": f"{effort['minutes']:.1f}" + (f" ({jobs} jobs)" if jobs > 1 else "")}
