"""A study's outputs in its folder: best.toml (a recipe of the best trial, for train --config),
trials.csv (every trial), tune.png (the score against the trial and each setting's effect), and
tune.json, the record of the study they came from.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from ..data.atomic_file import atomic_write
from ..model.config import DEFAULTS
from . import space
from .effort import MARKER, TABLE
from .factory import recipe_text
from .spec import as_used, located
from .study_storage import TuneError
from .tune_spec import NCAE, TuneSpec
from .tuning import COMPILED, TRIALS, Setup, own_seconds, run_by

BEST, FIGURE = "best.toml", "tune.png"      # the study's outputs in --out, beside TABLE

def write_outputs(spec: TuneSpec, found: Setup, study) -> None:
    """best.toml, trials.csv and tune.png of the study's trials so far in spec.out, tune.json
    naming its best, and lines that say so; TuneError where no trial has completed."""
    from optuna.trial import TrialState
    trials = study.get_trials()
    try:
        best = study.best_trial
    except ValueError:
        raise TuneError(f"no trial of study {found.study} completed: see the trials' log.txt "
                        f"under {spec.out / TRIALS}") from None
    finished = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    trains = "train" if found.model == NCAE else "baselines"
    scored = ("" if found.model == NCAE or found.cutoffs == DEFAULTS.cutoffs   # (NCAE's: its
              else f"--cutoffs {','.join(map(str, found.cutoffs))} ")        # recipe's)
    command = (f"python -m ncae_cuda.{trains} --config {spec.out / BEST} {scored}"
               f"{found.data_text()}")
    over = (f" (the mean over split seeds {','.join(map(str, found.split_seeds))})"
            if len(found.split_seeds) > 1 else "")
    step = f" at {found.step} {best.user_attrs['best_epoch']}" if found.step else ""
    comment = (f"Tuned by python -m ncae_cuda.tune: study {found.study} ({found.storage}), "
               f"trial {best.number}, the best of {finished} finished trials:\n"
               f"validation {found.metric} {best.value:.4f}{step}, seed {spec.seed}{over}"
               f"{', on ' + found.data_text() if found.data else ''}.\n"
               f"  {command.rstrip()}")
    kept = ({"feedback": found.feedback} if found.model == NCAE    # the data's, where not given
            else {"model": found.model})
    settings = space.trial_point({**found.recipe, **kept},
                                 space.settings(found.dimensions, best.params), found.model)
    files = {BEST: recipe_text(settings, comment).encode(), TABLE: _table(found, trials),
             FIGURE: _figure(found, trials)}
    for name, content in files.items():
        atomic_write(spec.out / name, lambda f, content=content: f.write(content))
    # what a later command checks its storage against (tune_study's check): the study that holds
    # this trial, with this score, is the one best.toml came from, and its best is no worse;
    # and how it scored, pruned and seeded its trials, the workers that shared the cores
    # among them and the backend they ran on (auto's, resolved), which the baselines tuned
    # beside it follow or, the device, name (effort.scoring)
    write_marker(spec.out, {"study": found.study, "storage": found.storage,
                         "best": {"trial": best.number, "value": best.value},
                         "scored": {"metric": found.metric,
                                    "split_seeds": list(found.split_seeds),
                                    "data": located(as_used(found.data, found.feedback)),
                                    "seed": spec.seed, **run_by(spec)}})
    print(f"best: trial {best.number}, validation {found.metric} {best.value:.4f}: "
          + ", ".join(f"{k} {v}" for k, v in space.settings(found.dimensions,
                                                              best.params).items()))
    print(f"wrote {', '.join(str(spec.out / name) for name in files)}\ntrain it: "
          f"{command.rstrip()}")


def _table(found: Setup, trials) -> bytes:
    names = [d.name for d in found.dimensions]
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["trial", "state", f"valid {found.metric}", "best epoch", "last epoch",
                     "seconds", "compile seconds", "worker", *names, "error"])
    for t in trials:
        seconds = own_seconds(t) if t.datetime_complete else ""
        worker = t.user_attrs.get("worker", {})
        error = t.user_attrs.get("error", "")
        if t.state.name == "FAIL" and not error:          # (a stop says so: tuning.objective)
            error = "its worker died with it under way"
        writer.writerow([t.number, t.state.name, "" if t.value is None else t.value,
                         t.user_attrs.get("best_epoch", ""), t.last_step if t.last_step
                         is not None else "", seconds, t.user_attrs.get(COMPILED, ""),
                         f"{worker.get('host', '')}:{worker.get('pid', '')}",
                         *(t.params.get(n, "") for n in names), error])
    return text.getvalue().encode()


def _figure(found: Setup, trials) -> bytes:
    """The score against the trial (pruned: where they stopped; the line: the best so far),
    and a panel a setting: the completed trials' score against its value."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    done = [t for t in trials if t.state.name == "COMPLETE"]
    pruned = [t for t in trials if t.state.name == "PRUNED" and t.intermediate_values]
    panels = 1 + len(found.dimensions)
    columns = min(panels, 4)
    rows = math.ceil(panels / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    axes = axes.ravel()
    label = f"validation {found.metric}"
    ax = axes[0]
    ax.plot([t.number for t in done], [t.value for t in done], "o", label="complete")
    ax.plot([t.number for t in pruned], [t.intermediate_values[t.last_step] for t in pruned],
            "x", color="gray", label="pruned (where it stopped)")
    pick = max if found.higher else min
    best, line = None, []
    for t in sorted(done, key=lambda t: t.number):
        best = t.value if best is None else pick(best, t.value)
        line.append((t.number, best))
    if line:
        ax.step(*zip(*line), where="post", color="black", label="best so far")
    ax.set(xlabel="trial", ylabel=label, title=found.study)
    ax.legend(fontsize=7)
    for ax, d in zip(axes[1:], found.dimensions):
        drew = [t for t in done if d.name in t.params]      # (a conditional setting: where on)
        values = [t.params[d.name] for t in drew]
        if d.choices is not None:                      # a choice's place, under its name
            shown = [space.to_optuna(c) for c in d.choices]
            ax.set_xticks(range(len(shown)), [str(c) for c in shown], fontsize=7)
            ax.set_xlim(-0.5, len(shown) - 0.5)
            values = [shown.index(v) for v in values]
        elif d.log:                     # labels at the decades only: the others overlap
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.plot(values, [t.value for t in drew], "o", alpha=0.7)
        ax.set(xlabel=d.name, ylabel=label)
    for ax in axes[panels:]:
        ax.axis("off")
    # fixed margins, in inches, where tight_layout took as long as drawing the figure
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.15 / width, bottom=0.6 / height,
                        top=1 - 0.35 / height, wspace=0.35, hspace=0.45)
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    return image.getvalue()


def write_marker(out: Path, held: dict) -> None:
    """tune.json in `out`: the study whose trials the folder holds (and, once written, the
    trial best.toml holds)."""
    text = json.dumps(held, indent=2).encode()
    atomic_write(out / MARKER, lambda f: f.write(text))
