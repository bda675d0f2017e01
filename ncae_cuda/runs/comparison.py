"""The baselines beside NCAE: each at the settings of its recipe (tune --model's best.toml), or
at the point its grid chooses on validation (grid_search: a coarser search than a study, kept
for quick comparisons), then through the protocol every model goes through
(select_test.select_refit_test: refit on training + validation, the test part scored once by
the one evaluator); and their table. `python -m ncae_cuda.baselines` and the trainer's
--baselines run them.
"""
from __future__ import annotations

import functools
import itertools
import time
from pathlib import Path

import numpy as np

from ..baselines import models as baseline_models
from ..baselines.models import BASELINES, Baseline, implicit_has_gpu
from ..data import splits
from ..data.cold import refuse_all_cold
from ..data.interactions import DataError, Interactions
from ..errors import RecipeError
from ..model.config import Config, SettingError
from ..model.base import Model
from ..model.fitdata import FitData
from . import effort, space
from .factory import BASELINES as MODELS
from .factory import read_recipe, seeded
from .pool import duration
from .select_test import select_refit_test

IMPLICIT = Config(feedback="implicit").resolved()     # the evaluator's view: users x items
say = functools.partial(print, flush=True)   # a line the moment it is known, through a pipe too


def compare(split: splits.Split, models, cutoffs: tuple[int, ...], ops, seed: int = 0,
            grids: dict | None = None, recipes: dict | None = None, log=say,
            refit: bool = True) -> dict:
    """{model key: its result} for each key of BASELINES in `models`, on `split`: a model of
    `recipes` ({key: settings}, e.g. tune --model's best.toml) at those settings, the others
    at the settings their grid chooses on validation (select_and_test; grids: {key: {setting:
    values}} in place of a model's own, ncae_cuda.baselines.models). Each then goes through
    the protocol every model does (select_test.select_refit_test): its iteration count (iALS,
    BPR) chosen on validation, refit on training + validation (refit=False: the model fit on
    the training part tested, as the trainer's --no-refit tests NCAE), the test part scored
    once by the one evaluator."""
    needs_validation(split)
    gpu = ops.name == "gpu" and implicit_has_gpu()
    if ops.name == "gpu" and not gpu and {"ials", "bpr"} & set(models):
        log("note: the implicit library here has no CUDA build: iALS and BPR fit on the CPU")
    recipes = recipes or {}
    return {key: (at_recipe(key, recipes[key], split, cutoffs, ops, seed, refit)[1]
                  if key in recipes
                  else select_and_test(key, split, cutoffs, ops, seed,
                                       {**BASELINES[key].grid, **(grids or {}).get(key, {})},
                                       gpu, log, refit))
            for key in models}


def at_recipe(key: str, settings: dict, split: splits.Split, cutoffs: tuple[int, ...], ops,
              seed: int, refit: bool = True) -> tuple[Model, dict]:
    """(the tested model, its result) of model `key` at `settings` through the protocol
    (select_refit_test, refit or not): its iteration count (iALS, BPR) chosen on validation up
    to the settings' own, as a tune trial chose it; 'chosen' holds the settings the tested
    model ran at (that iteration count, not the settings' ceiling)."""
    model = MODELS[key](device=ops, cutoffs=cutoffs, **settings, **seeded(key, seed))
    model, result = select_refit_test(model, split, refit=refit)
    return model, {"name": model.title, "chosen": {name: model.values[name] for name in settings},
                   **result}


def recipe_settings(path, name: str | None = None, flag: str = "--config") -> tuple[str, dict]:
    """(the model, its settings) of a baseline's recipe at `path` (the model's defaults where
    it gives none). SettingError, naming `flag`, where the file is not a baseline's recipe (of
    model `name`, where given) or holds a setting the model does not have."""
    try:
        recipe = read_recipe(path)
    except RecipeError as e:
        raise SettingError(flag, str(e)) from None
    model = recipe.pop("model", None)
    if model is None:
        raise SettingError(flag, f"{path}: an NCAE recipe: python -m ncae_cuda.train --config "
                                 "trains it")
    if name is not None and model != name:
        raise SettingError(flag, f"{name}={path}: a recipe of {model}")
    try:
        MODELS[model](device="cpu", **recipe)                   # its settings checked
    except SettingError as e:
        raise SettingError(flag, f"{path}: {e}") from None
    return model, recipe


def beside_ncae(text: str) -> tuple[str, ...]:
    """The trainer's --baselines: 'ease,ials=runs/tune-ials/best.toml' -> ('ease',
    'ials=runs/tune-ials/best.toml'), each model chosen on validation by its grid, or at the
    settings of its recipe (tune --model's best.toml, as baselines --config runs it);
    ValueError names a model or a recipe that is wrong."""
    entries = tuple(entry.strip() for entry in text.split(","))
    baseline_models.beside_ncae(",".join(entry.partition("=")[0] for entry in entries))
    for entry in entries:
        name, _, path = entry.partition("=")
        if path:
            recipe_settings(path, name, "--baselines")
    return entries


def recipe_paths(entries: tuple[str, ...]) -> tuple[tuple[str, ...], dict]:
    """(the models, {model: its recipe's path} of those given one) of beside_ncae's entries."""
    models, recipes = [], {}
    for entry in entries:
        name, _, path = entry.partition("=")
        models.append(name)
        if path:
            recipes[name] = Path(path)
    return tuple(models), recipes


def tuned_by_study(entries: tuple[str, ...]) -> tuple[str, ...]:
    """The models of beside_ncae's entries given no recipe that a study can tune (POP has no
    setting): those --baseline-trials tunes beside NCAE."""
    models, recipes = recipe_paths(entries)
    return tuple(name for name in models if name not in recipes and name in space.TUNED)


def needs_validation(split: splits.Split) -> None:
    """DataError where `split` has no validation entry to choose the baselines' settings on
    (before, every grid point scored NaN and the first was chosen). The commands refuse such a
    split first, saying why it has none (protocol.refuse_without_validation)."""
    if split.valid.nnz:
        return
    refuse_all_cold(split.cold_valid, "validation", "choose the baselines' settings on")
    raise DataError(f"{split.train.name}: the baselines choose their settings on validation, "
                    "and this split has none")


def select_and_test(key: str, split: splits.Split, cutoffs: tuple[int, ...], ops, seed: int,
                    grid: dict, gpu: bool = False, log=say, refit: bool = True) -> dict:
    """The grid of model `key` searched on validation (grid_search), then the chosen point
    through the protocol (at_recipe, refit or not): the search's record and the protocol's
    result."""
    search = grid_search(BASELINES[key], split, cutoffs, ops, seed, grid, gpu, log)
    result = at_recipe(key, search["chosen"], split, cutoffs, ops, seed, refit)[1]
    metric = f"ndcg@{cutoffs[-1]}"
    fit = (f"refit on training + validation in {result['seconds_fit']:.2f} s" if refit
           else "tested as fit on the training part (--no-refit)")
    log(f"{result['name']}: {fit}: test {metric} {result['test'][metric]:.4f}")
    return {**result, **search,
            "search": effort.of_grid(len(search["validation"]), search["seconds_search"])}


def grid_search(model: Baseline, split: splits.Split, cutoffs: tuple[int, ...], ops, seed: int,
                grid: dict, gpu: bool = False, log=say) -> dict:
    """Every point of `grid` fit on the training part and scored on validation; the best NDCG
    at the last cutoff chooses (on a tie, the first in grid order): {'grid', 'validation' (each
    point's settings, figures and seconds), 'chosen', 'seconds_search'}. log hears a line per
    point scored, with the time the grid has left, and the choice."""
    metric = f"ndcg@{cutoffs[-1]}"
    grid = rank_capped(model, grid, split.train, log)
    fits = distinct_points(model, grid)
    seen = FitData.of(split.train, IMPLICIT, ops)
    runs, start = [], time.perf_counter()
    total = sum(len(points) for _, points in fits)
    for settings, points in fits:
        fit_start = time.perf_counter()

        def check(point, scores, settings=settings):
            runs.append({"settings": {**settings, **point},
                         "valid": _ranked(ops, seen, split.valid, cutoffs, scores),
                         "seconds": time.perf_counter() - fit_start})
            took = time.perf_counter() - start
            log(f"{model.name} {len(runs)}/{total}: {_shown(runs[-1]['settings'])}: valid "
                f"{metric} {runs[-1]['valid'][metric]:.4f} | {duration(took)}, about "
                f"{duration(took / len(runs) * (total - len(runs)))} left")
        model.fit(split.train, settings, points, check, seed, gpu)
    best = max(runs, key=lambda run: run["valid"][metric])        # the first of equals
    searched = time.perf_counter() - start
    log(f"{model.name}: {len(runs)} settings scored on validation ({searched:.1f} s), chose "
        f"{_shown(best['settings'])} ({metric} {best['valid'][metric]:.4f})")
    return {"grid": grid, "validation": runs, "chosen": best["settings"],
            "seconds_search": searched}


def rank_capped(model: Baseline, grid: dict, part: Interactions, log=say) -> dict:
    """`grid` with its factor counts at most min(users, items) of `part`, each once: past that
    a fit finds the same optimum (L2 on two factor matrices is the nuclear norm of their
    product once they can hold any rank), so a tiny data set is not fit at 1,024 factors. A
    grid of one count (a recipe's) keeps it: its fit is the recipe's, from the same start."""
    if len(grid.get("factors", ())) < 2:
        return grid
    cap = min(part.n_users, part.n_items)
    factors = tuple(dict.fromkeys(min(int(f), cap) for f in grid["factors"]))
    if factors != tuple(grid["factors"]):
        log(f"note: {model.name}: factors above {cap} (the fewer of the users and items) reach "
            f"the same optimum as {cap}: scored once, at {cap}")
    return {**grid, "factors": factors}


def distinct_points(model: Baseline, grid: dict) -> list[tuple[dict, list[dict]]]:
    """[(the settings of one fit, the points of model.along scored along it)], every point of
    `grid` in its order, less those equivalent to one before (Baseline.relevant: a setting that
    changes no score where another is 0 is left out of the point)."""
    fits: dict[tuple, list[dict]] = {}
    along = [name for name in grid if name in model.along]
    for values in itertools.product(*grid.values()):
        point = model.relevant(dict(zip(grid, values)))
        points = fits.setdefault(tuple((k, v) for k, v in point.items() if k not in along), [])
        point = {k: v for k, v in point.items() if k in along}
        if point not in points:
            points.append(point)
    return [(dict(settings), points) for settings, points in fits.items()]


def _ranked(ops, fit: FitData, held: Interactions, cutoffs, scores) -> dict:
    """HR@M, Recall@M and NDCG@M of `held`'s warm entries by a grid point's `scores`, through
    the one evaluator (FitData.ranker), as Model.evaluate scores them (cold entries apart:
    FitData.cold_apart)."""
    def scorer():
        return lambda users: ops.to_device(np.ascontiguousarray(scores(users), np.float32))
    warm, _ = fit.cold_apart(fit.held_out(held, "held-out data"))
    return fit.ranker(warm, None, cutoffs, scorer)()


def _shown(settings: dict) -> str:
    return ", ".join(f"{name} {value:g}" for name, value in settings.items()) or "no settings"


def cold_table(results: dict) -> list[dict]:
    """One row per model with a cold test part's figures (a time split's): the model's."""
    return [{"model": r["name"], **{k: v for k, v in r["cold_test"].items() if k != "rows"}}
            for r in results.values() if "cold_test" in r]


def table(results: dict, cutoffs: tuple[int, ...], device: str | None = None) -> list[dict]:
    """One row per model: its test figures, validation's NDCG at the last cutoff, the seconds
    of the final fit, what chose its settings (a study's or a grid's trials and minutes, as
    the comparison prints them, a study's run on another backend than `device`, the run's,
    naming it) and the settings chosen."""
    metric = f"ndcg@{cutoffs[-1]}"
    return [{"model": r["name"], **{k: v for k, v in r["test"].items()
                                    if k not in ("rows", "clusters")},
             f"valid {metric}": r["best_validation"][metric], "fit s": r["seconds_fit"],
             **effort.columns(r.get("search"), device), "chosen": _shown(r["chosen"])}
            for r in results.values()]
