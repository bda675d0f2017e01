"""A search space over a model's settings (NCAE's: ncae_cuda.model.config.Config; a
baseline's: its class's `defaults`, ncae_cuda.baselines.estimators): a TOML file with a table
for each setting it searches, either a range of numbers or choices of values:

    [weight_decay]              # a float setting over [low, high]; log: on a log scale
    low = 1e-3
    high = 1e-1
    log = true

    [epochs]                    # an integer setting: integer ends, an optional step
    low = 50
    high = 300
    step = 50

    [hidden]                    # any setting: one of the choices
    choices = [[300], [500], [300, 300]]

The package holds NCAE's for explicit and for implicit feedback and one for each baseline it
tunes (ncae_cuda/runs/spaces/, package data: tune's default for the model and the feedback).
Every value a space can give is checked as the model checks its settings before a trial runs,
on top of the recipe it searches from; a setting that changes what the score means (feedback,
cutoffs) or that a recipe does not hold (seed) is refused. Optuna draws
the values (suggest); a choice that is a list, e.g. hidden [300, 300], is a string to Optuna
('300,300') and a tuple to the model.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Callable

from ..baselines.estimators import MODELS as BASELINES
from ..model.config import (DEFAULTS, NOT_IN_A_RECIPE, UNREAD, SettingError, as_toml,
                            deciding, given_way, read_toml, unread, value_of, variant_of,
                            without_unread)
from ..model.recommender import NAME as NCAE

# Settings a search cannot move: the score must mean the same thing in every trial.
FIXED = ("feedback", "cutoffs")
RANGE_KEYS = {"low", "high", "log", "step"}
# The models tune searches: NCAE and each baseline that has settings (POP has none)
TUNED = (NCAE, *(name for name, kind in BASELINES.items() if kind.defaults))
# Settings that weigh a user's interactions by their time: a space's are searched only where
# the data has timestamps and the model can weigh its rows (tune leaves them out elsewhere)
TIMED = ("recency_boost", "recency_halflife")
# Settings others' values may leave unread (config.UNREAD: NCAE's, and the baselines' recency
# halflife): a trial draws one only where the recipe and its values drawn so far read it, and
# elsewhere leaves it at its default (Optuna's define-by-run: a trial suggests what it reads);
# those deciding it are drawn first
CONDITIONAL = {name for rule in UNREAD for name in rule.names}


@dataclass(frozen=True)
class Searched:
    """What a space searches: one model's settings, each one's default (whose kind, integer or
    not, a range of it takes), and the check of a point of them, which raises SettingError
    naming a value the model refuses."""
    model: str
    defaults: dict
    check: Callable[[dict], object]


def searched(model: str = NCAE) -> Searched:
    """The settings of `model` (a name of ncae_cuda.runs.factory.MODELS) a space may search:
    NCAE's Config fields less those a recipe does not hold, or a baseline's less its seed (the
    study's --seed)."""
    if model == NCAE:
        defaults = {k: v for k, v in asdict(DEFAULTS).items() if k not in NOT_IN_A_RECIPE}
        return Searched(model, defaults, lambda point: replace(DEFAULTS, **point).resolved())
    kind = BASELINES[model]
    return Searched(model, {k: v for k, v in kind.defaults.items() if k != "seed"},
                    lambda point: kind(device="cpu", **point))


@dataclass(frozen=True)
class Dimension:
    """One setting's part of the space: choices, or a range [low, high] (integers where the
    setting is one), on a log scale or in steps."""
    name: str
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    integer: bool = False

    def suggest(self, trial):
        """The value of this setting in an Optuna trial, as the model takes it."""
        if self.choices is not None:
            return _from_optuna(trial.suggest_categorical(self.name,
                                                          [to_optuna(c) for c in self.choices]))
        if self.integer:
            return trial.suggest_int(self.name, self.low, self.high, step=self.step or 1,
                                     log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def values(self) -> tuple:
        """The values to check: every choice, or the ends of the range."""
        return self.choices if self.choices is not None else (self.low, self.high)


def default(feedback: str, model: str = NCAE,
            loss: str = DEFAULTS.loss) -> resources.abc.Traversable:
    """The space the package holds for `model`: NCAE's for `feedback` (explicit or implicit)
    and its `loss` (implicit-multinomial.toml for the multinomial loss, which has no weights
    c_j to search), a baseline's of its own (every baseline scores implicit feedback)."""
    name = (model if model != NCAE else feedback if loss == DEFAULTS.loss
            else f"{feedback}-{loss}")
    return resources.files(__package__) / "spaces" / f"{name}.toml"


def read_space(path: Path | resources.abc.Traversable, recipe: dict,
               model: str = NCAE) -> list[Dimension]:
    """The dimensions of the space in the TOML file at `path` over `model`'s settings, each
    value checked on top of `recipe`; ValueError names the setting and what is wrong with it."""
    return dimensions(read_tables(path), recipe, model)


def read_tables(path: Path | resources.abc.Traversable) -> dict:
    """The tables of the space's TOML file (a file or the package's); ValueError where it cannot
    be read."""
    with resources.as_file(path) as file:      # a file of its own, where the package is zipped
        return read_toml(file)


def dimensions(tables: dict, recipe: dict, model: str = NCAE) -> list[Dimension]:
    """The dimensions of a space's tables over `model`'s settings, each value checked on top
    of `recipe`; ValueError names the setting and what is wrong with it."""
    if not tables:
        raise ValueError("no setting to search: a table for each, e.g. [dropout] low = 0.1 "
                         "high = 0.8")
    settings = searched(model)
    dimensions = {}
    for name, table in tables.items():
        if name in FIXED or name in NOT_IN_A_RECIPE or name == "seed":
            raise ValueError(f"{name}: not searched: every trial must be scored alike, on the "
                             "same data and seed")
        if name not in settings.defaults:
            raise ValueError(f"{name}: no such setting of {model} (settings: "
                             f"{', '.join(sorted(settings.defaults))})")
        dimensions[name] = _dimension(name, table, settings.defaults[name])
    for name, dimension in dimensions.items():
        # a conditional setting is drawn where it is read: checked there (and refused where
        # neither the space's values nor the recipe's read it: it would never be read)
        reading = _reading(name, dimensions, recipe, model)
        for value in dimension.values():
            point = {**trial_point(recipe, {**reading, name: value}, model), name: value}
            try:
                settings.check(point)
            except SettingError as e:
                # spelled as the space file writes them: [0], not the tuple (0,) made of it
                raise ValueError(f"{name}: {as_toml(value)}: {e.setting} "
                                 f"{e.reason_spelled(as_toml)}") from None
    return list(dimensions.values())


def left_out(tables: dict, recipe: dict) -> dict[str, tuple[str, ...]]:
    """The settings of a space's `tables` over NCAE's that `recipe` (and its feedback) leaves
    unread or holds at one value, at some value the space gives them (config.given_way, the
    recipe given over the space's values: NCAE-'s c0), each with the recipe's settings it
    gives way to: {setting: (recipe's, ...)}. tune leaves them out of the package's spaces,
    which are no user's choice; a space of the user's naming one is refused (dimensions)."""
    defaults = searched().defaults
    found = {name: _dimension(name, table, defaults[name]) for name, table in tables.items()}
    way = {}
    for name, dimension in found.items():
        reading = _reading(name, found, recipe, NCAE)
        for value in dimension.values():
            if gave := given_way({**reading, name: value}, recipe).get(name):
                way[name] = gave
                break
    return way


def _reading(name: str, dimensions: dict, recipe: dict, model: str) -> dict:
    """Values of the space's `dimensions` that decide whether setting `name` is read
    (config.deciding), the first that read it over `recipe` (the first of all where none do:
    `name` is then refused, never read)."""
    deciders = [d for d in dimensions.values() if d.name in deciding(name)]
    points = [{d.name: value for d, value in zip(deciders, values)}
              for values in itertools.product(*(d.values() for d in deciders))]
    return next((drawn for drawn in points
                 if name not in unread({**recipe, **drawn}, searched(model).defaults)),
                points[0])


def _dimension(name: str, table, default) -> Dimension:
    """A dimension from its TOML table, its form checked against the setting's `default` (its
    values are checked by the model)."""
    if not isinstance(table, dict):
        raise ValueError(f"{name}: a table, e.g. [{name}] with choices = [...] or low and high")
    if "choices" in table:
        choices = table["choices"]
        if set(table) != {"choices"} or not isinstance(choices, list) or not choices:
            raise ValueError(f"{name}: choices = [a list of values], and nothing beside them")
        return Dimension(name, choices=tuple(tuple(c) if isinstance(c, list) else c
                                             for c in choices))
    unknown = set(table) - RANGE_KEYS
    if unknown or not {"low", "high"} <= set(table):
        raise ValueError(f"{name}: choices = [...], or low and high (with log = true or step "
                         f"= S){'; unknown: ' + ', '.join(sorted(unknown)) if unknown else ''}")
    if not (isinstance(default, (int, float)) or name == "augment_eps"):   # its default: None
        raise ValueError(f"{name}: not a number: give choices = [...]")
    dimension = Dimension(name, low=table["low"], high=table["high"],
                          log=table.get("log", False), step=table.get("step"),
                          integer=isinstance(default, int))
    numbers = [v for v in (dimension.low, dimension.high, dimension.step) if v is not None]
    kind = int if dimension.integer else (int, float)
    if not all(isinstance(v, kind) and not isinstance(v, bool) for v in numbers):
        raise ValueError(f"{name}: low, high and step must be "
                         f"{'integers' if dimension.integer else 'numbers'}")
    if not dimension.low < dimension.high:
        raise ValueError(f"{name}: low must be below high; got {dimension.low} and "
                         f"{dimension.high}")
    if not isinstance(dimension.log, bool) or dimension.log and (dimension.low <= 0
                                                                 or dimension.step):
        raise ValueError(f"{name}: log = true needs low > 0 and no step")
    if dimension.step is not None and dimension.step <= 0:
        raise ValueError(f"{name}: step must be > 0")
    return dimension


def to_optuna(choice):
    """A choice as Optuna stores it: a list as 'a,b,...'."""
    return ",".join(map(str, choice)) if isinstance(choice, tuple) else choice


def _from_optuna(value):
    """A choice as the model takes it: '300,300' as (300, 300)."""
    if isinstance(value, str) and value.replace(",", "").isdigit():
        return tuple(int(v) for v in value.split(","))
    return value


def recipe_point(dimensions: list[Dimension], base: dict, model: str = NCAE) -> dict:
    """The values of `base` (a recipe, and NCAE's feedback; `model`'s defaults where it has
    none, a variant's weighting and augment_eps, config.value_of, and the variant they make,
    config.variant_of) of the settings the space holds them in, as Optuna stores them: a
    study's first trial, so that a search starts where the recipe stands and its best is never
    behind the recipe on validation."""
    recipe, point = {**searched(model).defaults, **base}, {}
    for d in sorted(dimensions, key=lambda d: d.name in CONDITIONAL):  # the deciding first
        if d.name in unread_in(dimensions, point, base, model):
            continue                                       # not drawn: the point leaves it unread
        # (a recipe without a variant trains as the one its weighting and augmentation make)
        value = variant_of(recipe) if d.name == "variant" else value_of(recipe, d.name)
        value = tuple(value) if isinstance(value, list) else value
        if d.choices is not None and value in d.choices:
            point[d.name] = to_optuna(value)
        elif d.choices is None and value is not None and d.low <= value <= d.high:
            point[d.name] = value
    return point


def shown(settings: dict) -> str:
    """Settings in short, for a line: hidden 300,300 dropout 0.312 lr 0.00112."""
    return " ".join(f"{name} {f'{value:.3g}' if isinstance(value, float) else to_optuna(value)}"
                    for name, value in settings.items())


def settings(dimensions: list[Dimension], params: dict) -> dict:
    """The settings of Optuna's stored params (trial.params), as the model takes them."""
    return {d.name: _from_optuna(params[d.name]) if d.choices is not None else params[d.name]
            for d in dimensions if d.name in params}


def draw(dimensions: list[Dimension], trial, base: dict, model: str = NCAE) -> dict:
    """A trial's settings, drawn by Optuna over `base` (a recipe, and NCAE's feedback): each
    dimension's, but a conditional one's (CONDITIONAL) only where the base and the values
    drawn before it, those deciding it, read it."""
    for d in sorted(dimensions, key=lambda d: d.name in CONDITIONAL):
        if d.name not in unread_in(dimensions, trial.params, base, model):
            d.suggest(trial)
    return settings(dimensions, trial.params)


def unread_in(dimensions: list[Dimension], params: dict, base: dict, model: str = NCAE) -> dict:
    """{setting: why} of those `model`'s settings leave unread at `base` (a recipe, and NCAE's
    feedback) under Optuna's `params` of `dimensions` (config.unread)."""
    return unread({**base, **settings(dimensions, params)}, searched(model).defaults)


def trial_point(base: dict, drawn: dict, model: str = NCAE) -> dict:
    """The settings a trial runs with: `base`'s (a recipe, and NCAE's feedback), those drawn
    over them, less each that they leave unread (at the model's default, which is the only
    value it takes there)."""
    return without_unread({**base, **drawn}, searched(model).defaults)
