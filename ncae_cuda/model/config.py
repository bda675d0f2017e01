"""The settings of an NCAE model: one frozen record with the paper's defaults, resolved and
checked in one place. `NCAE(**settings)` takes them as keywords and `python -m ncae_cuda.train`
as flags of the same names, generated from this record (each field's help is its flag's help),
so the API and the CLI cannot drift apart.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import math
import numbers
from collections.abc import Mapping, Set
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

try:
    import tomllib
except ImportError:                   # Python 3.10
    import tomli as tomllib

from ..errors import RecipeError, SettingError

# The paper's implicit models: (weighting of unobserved entries, sparsity-aware augmentation).
VARIANT_SETTINGS = {"NCAE-": ("uniform", False), "NCAE": ("popularity", False),
                    "NCAE+": ("popularity", True)}
DEFAULT_AUGMENT_EPS = 0.001
FEEDBACK = ("explicit", "implicit")
BASED = ("user", "item", "both")      # both: model/blend.py
WEIGHTING = ("popularity", "uniform")
OUTPUTS = ("tanh", "identity")
# implicit: the output layer's loss (network.Objective): the paper's, or Mult-VAE's
WEIGHTED_SQUARE, MULTINOMIAL = LOSSES = ("weighted_square", "multinomial")
VARIANTS = ("BP", "U+U", "S+S", "U+S", "S+U", "S+U+S")       # pre-training (model/pretrain.py)
# the training step's dense products (network.Network): float32, or on TF32
FLOAT32, TF32 = MATMULS = ("float32", "tf32")
# the settings a variant fills in where they are None (by_variant)
VARIANT_FILLED = ("weighting", "augment_eps")


@dataclass(frozen=True)
class Unread:
    """A rule of UNREAD: settings `names` are unread where setting `other` is `off` (a
    number's 0: they are read where it is above; or one of a choice's values), `why` in a
    refusal's words."""
    names: tuple[str, ...]
    other: str
    off: object
    why: str

    @property
    def where_read(self) -> str:
        """Where the rule leaves its settings read, in words: 'recency_boost > 0'."""
        return f"{self.other} > 0" if self.off == 0 else f"{self.other} is not {self.off}"

    @property
    def reason(self) -> str:
        """Why its settings are unread where its other is off (a number's: what turns them
        on)."""
        return f"{self.why}: {self.where_read} turns it on" if self.off == 0 else self.why


# Which settings others' values leave unread, and why: a setting is read where none of its
# rules has its other off (the first that has says why). Config refuses one given where it is
# unread, a model file's older value of it gives way to the default (without_unread), and a
# search draws it only where a trial reads it (ncae_cuda.runs.space)
UNREAD = (
    Unread(("c0", "omega", "uniform_c"), "feedback", "explicit", "is for implicit feedback"),
    Unread(("alpha", "beta", "output", "row_norm", "rating_scale"), "feedback", "implicit",
           "is for explicit feedback"),
    Unread(("c0", "omega", "uniform_c"), "loss", MULTINOMIAL,
           "weighs the square loss's entries: the multinomial loss has none to weigh"),
    Unread(("c0", "omega"), "weighting", "uniform",
           "is for popularity weighting (these settings weigh uniformly, by uniform_c)"),
    Unread(("uniform_c",), "weighting", "popularity",
           "is for uniform weighting (these settings weigh by popularity, by c0 and omega)"),
    Unread(("augment_p",), "augment_eps", 0, "is for augmentation (implicit feedback, variant "
           "NCAE+)"),
    Unread(("recency_halflife",), "recency_boost", 0, "is for recency weighting"),
    Unread(("pretrain_epochs",), "pretrain", VARIANTS[0],
           "is for pre-training (a pretrain other than BP)"))


def setting(default, help: str, group: str = "model", choices=None, kind=None):
    """A Config field: its default, its help (the CLI flag's), the flag's group, its choices,
    and the kind of value it takes ('ints': comma-separated integers; 'range': two floats)."""
    return field(default=default, metadata={"help": help, "group": group, "choices": choices,
                                            "kind": kind})


@dataclass(frozen=True)
class Config:
    """The settings of an NCAE model, with the paper's defaults.

    Each field is a keyword of `NCAE(...)` and a flag of `python -m ncae_cuda.train` (the
    underscores dashes), whose help is the field's. `resolved()` fills in the defaults that
    follow from others (`based` and the variant's from `feedback`) and checks every setting,
    raising SettingError with its name.

    Examples
    --------
    >>> from ncae_cuda.model.config import Config
    >>> Config(feedback="implicit").resolved().based
    'user'
    """

    feedback: str = setting("explicit", "what the model learns from: ratings (explicit, scored "
                            "by RMSE) or interactions (implicit, scored by HR and NDCG)",
                            choices=FEEDBACK)
    based: str | None = setting(None, "rows the autoencoder encodes: items (item-based, the "
                                "default for explicit feedback) or users (the default for "
                                "implicit), the paper's best of each; explicit: both, an "
                                "item- and a user-based NCAE blended by weights chosen on "
                                "validation (ncae_cuda.model.blend)", choices=BASED)
    hidden: tuple = setting((500, 500), "width of each hidden layer, K1,K2,...", kind="ints")
    dropout: float = setting(0.5, "input dropout rate q")
    alpha: float = setting(1.0, "explicit: weight of the errors on dropped inputs")
    beta: float = setting(0.5, "explicit: weight of the errors on kept inputs")
    output: str = setting("tanh", "explicit: the output layer: tanh (the paper's: s*tanh(out) "
                          "+ the scale's middle) or identity (out + the scale's middle, "
                          "clipped to the scale when predicting)", choices=OUTPUTS)
    row_norm: float = setting(1.0, "explicit: a row's errors weigh 1/|R|^row_norm, |R| its "
                              "number of ratings (the paper's: 1)")
    variant: str | None = setting(None, "implicit: the paper's models: NCAE- uniform weighting, "
                                  "NCAE popularity weighting, NCAE+ popularity weighting and "
                                  "augmentation (the default); sets weighting and augmentation",
                                  choices=tuple(VARIANT_SETTINGS))
    loss: str = setting(WEIGHTED_SQUARE, "implicit: the output layer's loss: weighted_square "
                        "(the paper's: tanh(out) against 1 at a row's items, 0 elsewhere, "
                        "weighted c_j) or multinomial (Mult-VAE's: the log-likelihood of the "
                        "row's items under a softmax over all items; no weights c_j)",
                        choices=LOSSES)
    weighting: str | None = setting(None, "implicit: weights c_j of unobserved entries: "
                                    "popularity (the default) or uniform (NCAE-)",
                                    choices=WEIGHTING)
    c0: float = setting(512.0, "popularity weighting: c0, the weights' sum")
    omega: float = setting(0.5, "popularity weighting: the exponent w of item popularity")
    uniform_c: float = setting(0.05, "uniform weighting: the one weight c")
    augment_eps: float | None = setting(None, "implicit: rows with |R|/N below this get an "
                                        "extra, sparser training row (default 0.001 for NCAE+, "
                                        "0 = off)")
    augment_p: float = setting(0.8, "augmentation: the extra row drops this share of the row's "
                               "most popular items")
    recency_boost: float = setting(0.0, "implicit, user-based: score items from a user's row "
                                   "weighted 1 + boost * 2^(-r/recency_halflife) at each "
                                   "interaction, r = how many of theirs are later (needs "
                                   "timestamps; training rows stay 0/1; 0 = off, the paper's)")
    recency_halflife: float = setting(2.0, "recency weighting: interactions this many places "
                                      "before the latest have half its boost")
    pretrain: str = setting("BP", "greedy layer-wise pre-training before fine-tuning: BP = none, "
                            "S+U+S = the paper's three stages (see ncae_cuda.model.pretrain)",
                            choices=VARIANTS)
    pretrain_epochs: int = setting(10, "epochs of each pre-training stage")
    epochs: int = setting(100, "most epochs to train", group="training")
    patience: int = setting(10, "stop after this many epochs without a better validation score "
                            "(0: never stop early)", group="training")
    batch_size: int = setting(128, "rows a training batch", group="training")
    lr: float = setting(1e-3, "Adam's learning rate", group="training")
    lr_decay: float = setting(1.0, "fine-tuning multiplies the learning rate by this each "
                              "epoch (1: constant)", group="training")
    weight_decay: float = setting(1e-3, "lambda: L2 on every weight and bias", group="training")
    seed: int = setting(0, "seed of the initialisation, the shuffles and input dropout",
                        group="training")
    matmul: str = setting(FLOAT32, "the training step's dense products: float32, or tf32 "
                          "(inputs rounded to TF32's 10 mantissa bits, float32 sums: on a GPU's "
                          "tensor cores, Ampere and later; the CPU backends round the same way, "
                          "to mirror it); prediction stays float32", group="training",
                          choices=MATMULS)
    cutoffs: tuple = setting((10, 100), "implicit: the M of HR@M and NDCG@M; early stopping "
                             "follows NDCG at the last", group="evaluation", kind="ints")
    rating_scale: tuple | None = setting(None, "explicit: the lowest and highest rating, "
                                         "LOW,HIGH (default: the data set's, or its ratings' "
                                         "range)", group="evaluation", kind="range")

    def resolved(self) -> Config:
        """The settings with every data-independent default filled in; SettingError names a
        setting that is out of range, of the wrong kind, or contradicts another."""
        c = replace(self, hidden=_widths("hidden", self.hidden),
                    cutoffs=checked_cutoffs(self.cutoffs),
                    rating_scale=None if self.rating_scale is None
                    else _pair("rating_scale", self.rating_scale))
        for f in fields(Config):
            choices = f.metadata["choices"]
            value = getattr(c, f.name)
            if choices and value is not None and value not in choices:
                raise SettingError(f.name, f"must be one of {', '.join(choices)}; got {{value}}",
                                   value=value)
            if isinstance(f.default, float) or f.name == "augment_eps" and value is not None:
                c = replace(c, **{f.name: _number(f.name, value)})
        if c.based is None:
            c = replace(c, based="item" if c.feedback == "explicit" else "user")
        _check_range(c)
        c = _resolved_variant(c)
        _refuse_unused(c)
        return c

    def as_dict(self) -> dict:
        """JSON-ready: tuples as lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict) -> Config:
        """The Config of `values`, as given (resolved() makes a file's lists tuples, and a
        refusal shows the value the caller gave: [0, 10], not (0, 10)); SettingError naming
        the first that is not a setting."""
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise SettingError(unknown[0], "is not a setting of NCAE (the settings page lists "
                                           "them)")
        return cls(**values)

    @property
    def implicit(self) -> bool:
        return self.feedback == "implicit"

    @property
    def selection_metric(self) -> tuple[str, bool]:
        """(name, higher is better) of the validation figure that chooses: early stopping's
        epoch, and a tuner's settings."""
        return (f"ndcg@{self.cutoffs[-1]}", True) if self.implicit else ("rmse", False)

    @property
    def model_name(self) -> str:
        """The paper's name of the model: NCAE-, NCAE or NCAE+ (implicit), NCAE (explicit);
        with the multinomial loss, which has no weights, NCAE or NCAE+ (augmented) and the
        loss's name."""
        if not self.implicit:
            return "NCAE"
        if self.loss == MULTINOMIAL:
            return f"NCAE{'+' if self.augment_eps > 0 else ''} (multinomial)"
        for name, (weighting, augmented) in VARIANT_SETTINGS.items():
            if self.weighting == weighting and (self.augment_eps > 0) == augmented:
                return name
        return f"NCAE ({self.weighting} weighting, augmented)"


DEFAULTS = Config()
# What a recipe leaves to the command line, so one recipe runs on any data, fold and seed.
NOT_IN_A_RECIPE = ("seed", "dataset", "data_dir", "split", "split_seed", "test_ratio",
                   "valid_ratio", "data_ratio")


def read_recipe(path: Path) -> dict:
    """The settings of a recipe file, as keywords of NCAE.

    Parameters
    ----------
    path : pathlib.Path
        A TOML file of Config's names and values, e.g. `hidden = [300, 300]` (recipes/); it
        holds no data, split or seed, so one recipe runs on any data.

    Returns
    -------
    dict
        {setting: value}, lists as tuples: `make_model(read_recipe(path))`
        (ncae_cuda.make_model: a BlendedNCAE where based is both).

    Raises
    ------
    RecipeError
        A ValueError naming the file and an unknown or misplaced key, a value of the wrong
        kind, or that the file cannot be read or is not TOML.
    """
    with refused_as_a_recipe(path):
        return recipe_of(read_toml(path))


@contextlib.contextmanager
def refused_as_a_recipe(path):
    """Within it, a ValueError (what read_toml, recipe_of and the checks of a recipe's values
    raise) raised as the RecipeError of the recipe at `path`."""
    try:
        yield
    except ValueError as e:
        raise RecipeError(path, str(e)) from None


def refuse_run_settings(values: dict) -> None:
    """ValueError naming a key of a recipe's `values` that is the run's (data, split, seed),
    not the model's: one recipe runs on any data."""
    for key in values:
        if key in NOT_IN_A_RECIPE:
            raise ValueError(f"{key}: a recipe holds the model's settings, not the data, split "
                             "or seed; give them on the command line")


def recipe_of(values: dict) -> dict:
    """read_recipe's settings of a recipe's TOML values, checked; ValueError as it says."""
    names = {f.name for f in fields(Config)}
    refuse_run_settings(values)
    for key in values:
        if key not in names:
            raise ValueError(f"{key}: no such setting (settings: "
                             f"{', '.join(sorted(names - set(NOT_IN_A_RECIPE)))})")
    recipe = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        replace(DEFAULTS, **recipe).resolved()
    except SettingError as e:
        hint = ("" if "feedback" in recipe or "implicit" not in e.reason else
                " (a recipe for implicit feedback says feedback = \"implicit\")")
        raise ValueError(f"{as_in_a_recipe(e)}{hint}") from None
    return recipe


def as_in_a_recipe(e: SettingError) -> str:
    """`e` as a refusal of a recipe says it, each value as the file writes it: "cutoffs: must
    be positive integers, e.g. [10, 100]; got [0]", not the Python tuple (0,) made of it."""
    return f"{e.setting}: {e.reason_spelled(as_toml)}"


def given_way(recipe: dict, given: dict) -> dict[str, tuple[str, ...]]:
    """The settings of a recipe that settings given over it leave unread or contradict (a
    flag beats its recipe: --variant NCAE- leaves a recipe's augment_eps, c0 and omega out),
    each with the names of the given ones it gives way to: {setting: (given, ...)}.

    The recipe's settings are added to the given ones in Config's order, where a setting
    comes after those that turn it on or off (feedback first, weighting before c0): one that
    breaks settings that resolved gives way. A recipe resolves alone (read_recipe), so where
    nothing is given nothing gives way."""
    taken, way = dict(given), {}
    stands = _resolves(taken)
    for name in (f.name for f in fields(Config)):
        if name not in recipe or name in given:
            continue
        added = {**taken, name: recipe[name]}
        if stands and not _resolves(added):
            # those before it that gave way back too: recency_halflife's recency_boost
            way[name] = _broken_by({**added, **{n: recipe[n] for n in way}}, recipe, given)
        else:
            taken, stands = added, stands or _resolves(added)
    return way


def _broken_by(settings: dict, recipe: dict, given: dict) -> tuple[str, ...]:
    """The given settings that `settings` (theirs and a recipe's) do not resolve for: the
    fewest whose recipe values (or defaults) in their place let them, every such set's."""
    for size in range(1, len(given) + 1):
        found = [names for names in itertools.combinations(given, size) if _resolves(
            {**settings, **{n: recipe.get(n, getattr(DEFAULTS, n)) for n in names}})]
        if found:
            return tuple(dict.fromkeys(n for names in found for n in names))
    return tuple(given)


def _resolves(settings: dict) -> bool:
    try:
        replace(DEFAULTS, **settings).resolved()
    except SettingError:
        return False
    return True


def read_toml(path: Path) -> dict:
    """A TOML file's tables; ValueError where it cannot be read or is not TOML."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ValueError(f"cannot read it ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"not TOML: {e}") from None
    except UnicodeDecodeError as e:          # binary: a model's .npz given for its recipe
        raise ValueError(f"not TOML: not UTF-8 text (byte 0x{e.object[e.start]:02x} at "
                         f"{e.start}): give a TOML text file of settings, not a model's .npz"
                         ) from None


def recipe_text(settings: dict, comment: str, order: tuple[str, ...] | None = None) -> str:
    """A recipe file of `settings` under `comment`'s lines: Config's names and values in
    Config's order (or the names of `order`, in its order), what read_recipe reads back."""
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    lines += [f"{name} = {as_toml(settings[name])}"
              for name in order or [f.name for f in fields(Config)]
              if settings.get(name) is not None]
    return "\n".join(lines) + "\n"


def as_toml(value) -> str:
    """A setting's value as a recipe (TOML) writes it: (8, 16) as [8, 16], 'x' as "x"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return f"[{', '.join(as_toml(v) for v in value)}]"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _widths(name: str, value, example: tuple | None = None) -> tuple[int, ...]:
    """Positive integers, from a sequence of them (or one of them: one hidden layer); a
    refusal's example is `example`, or else the setting's default."""
    if isinstance(value, (Set, Mapping)):
        # its order is its hashes': layers stacked, or the cutoff early stopping reads, at random
        raise SettingError(name, "must be an ordered sequence (a list or tuple); got a "
                                 f"{type(value).__name__}")
    values = (value,) if _is_int(value) else value
    try:
        if isinstance(values, (str, bytes)):
            raise TypeError
        widths = tuple(values)
        if widths and all(_is_int(w) and w >= 1 for w in widths):
            return tuple(int(w) for w in widths)
    except TypeError:
        pass
    if example is None:
        example = next(f.default for f in fields(Config) if f.name == name)
    raise SettingError(name, "must be positive integers, e.g. {example}; got {value}",
                       example=example, value=value)


def checked_cutoffs(value, example: tuple | None = None) -> tuple[int, ...]:
    """The cutoffs M, each once, in the order given (early stopping reads NDCG at the last:
    a descending order chooses by the smaller); a repeated one would be reported twice.
    example: a refusal's, where the Ms are another flag's than --cutoffs (topm's --ms)."""
    cutoffs = _widths("cutoffs", value, example)
    repeated = next((m for i, m in enumerate(cutoffs) if m in cutoffs[:i]), None)
    if repeated is not None:
        raise SettingError("cutoffs", f"must each be given once; {repeated} is repeated")
    return cutoffs


def _number(name: str, value) -> float:
    try:
        if isinstance(value, bool):
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise SettingError(name, "must be a number; got {value}", value=value) from None


def _pair(name: str, value) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise SettingError(name, "must be two numbers (low, high); got {value}",
                           value=value) from None
    if not low < high:
        raise SettingError(name, "must be (low, high) with low < high; got {value}",
                           value=value)
    return low, high


def _check_range(c: Config) -> None:
    checks = [("dropout", 0 <= c.dropout < 1, "in [0, 1)"),
              ("augment_p", 0 < c.augment_p <= 1, "in (0, 1]"),
              ("lr", 0 < c.lr < math.inf, "a finite number > 0"),
              ("lr_decay", 0 < c.lr_decay <= 1, "in (0, 1]"),
              ("recency_halflife", 0 < c.recency_halflife < math.inf, "a finite number > 0")]
    for name in ("epochs", "pretrain_epochs", "batch_size"):
        checks.append((name, _is_int(getattr(c, name)) and getattr(c, name) >= 1,
                       "an integer >= 1"))
    for name in ("patience", "seed"):
        checks.append((name, _is_int(getattr(c, name)) and getattr(c, name) >= 0,
                       "an integer >= 0"))
    for name in ("alpha", "beta", "c0", "omega", "uniform_c", "weight_decay", "row_norm",
                 "recency_boost"):
        checks.append((name, 0 <= getattr(c, name) < math.inf, "a finite number >= 0"))
    for name, ok, wanted in checks:
        if not ok:
            raise SettingError(name, f"must be {wanted}; got {{value}}", value=getattr(c, name))


def _refuse_unused(c: Config) -> None:
    """SettingError naming a setting given (not its default) that these settings never read
    (UNREAD): a flag accepted and ignored would say it was used."""
    for name, why in unread(asdict(c)).items():
        if getattr(c, name) != getattr(DEFAULTS, name):
            raise SettingError(name, why)


def unread(settings: dict, among=None) -> dict[str, str]:
    """{setting: why} of those UNREAD says `settings` (a model's, a saved file's, a trial's)
    leave unread: each with a rule whose other they hold off, or leave to a value that is
    (value_of); `among`: the model's settings where it is not NCAE (a baseline's), whose rules
    apply only where their other is one of them (an iALS's alpha is not NCAE's)."""
    found = {}
    for rule in UNREAD:
        if (among is None or rule.other in among) and value_of(settings, rule.other) == rule.off:
            found |= {name: rule.reason for name in rule.names if name not in found}
    return found


def without_unread(settings: dict, among=None) -> dict:
    """`settings` less those they leave unread (unread's), whose value changes nothing: the
    default stands in (a model file saved before such a value was refused loads as it scored;
    a search's trial drawing an other off drops the recipe's)."""
    gone = unread(settings, among)
    return {name: value for name, value in settings.items() if name not in gone}


def deciding(name: str) -> set[str]:
    """The settings whose values decide whether setting `name` is read: the others of its rules
    in UNREAD, and the variant where it fills one in (VARIANT_FILLED)."""
    others = {rule.other for rule in UNREAD if name in rule.names}
    return others | ({"variant"} if others & set(VARIANT_FILLED) else set())


def read_where(name: str, searched) -> str:
    """Where setting `name` is read as settings `searched` decide it, in words ('weighting is
    not uniform and ...'): '' where none of them does."""
    return " and ".join(rule.where_read for rule in UNREAD if name in rule.names and (
        rule.other in searched or rule.other in VARIANT_FILLED and "variant" in searched))


def value_of(settings: dict, name: str):
    """The value setting `name` has under `settings` as resolved() fills it in: their own, or
    else the default; a weighting or augment_eps of None the variant's (by_variant)."""
    value = settings[name] if name in settings else getattr(DEFAULTS, name)
    return by_variant(settings).get(name) if value is None else value


def variant_of(settings: dict) -> str | None:
    """The paper's variant `settings` train as: their own, or where they name none, the one
    whose weighting and augmentation theirs are (value_of's: NCAE+'s where they set neither);
    None without implicit feedback, or where no variant's are theirs."""
    if settings.get("feedback", DEFAULTS.feedback) != "implicit" or settings.get("variant"):
        return settings.get("variant")
    made = (value_of(settings, "weighting"), value_of(settings, "augment_eps") > 0)
    return next((name for name, made_by in VARIANT_SETTINGS.items() if made_by == made), None)


def by_variant(settings: dict) -> dict:
    """The weighting and augment_eps (VARIANT_FILLED) `settings`' variant gives where they
    leave them None (NCAE+'s where they have none): no weighting and no augmentation without
    implicit feedback."""
    if settings.get("feedback", DEFAULTS.feedback) != "implicit":
        return dict(zip(VARIANT_FILLED, (None, 0.0)))
    weighting, augmented = VARIANT_SETTINGS[settings.get("variant") or "NCAE+"]
    return dict(zip(VARIANT_FILLED, (weighting, DEFAULT_AUGMENT_EPS if augmented else 0.0)))


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _resolved_variant(c: Config) -> Config:
    """variant, weighting and augment_eps: implicit settings that must agree; a weighting and
    augment_eps left None filled in (by_variant)."""
    if not c.implicit:
        for name in ("variant", "weighting", "augment_eps", "recency_boost"):
            if getattr(c, name):
                raise SettingError(name, "is for implicit feedback")
        if c.loss != DEFAULTS.loss:
            raise SettingError("loss", "is for implicit feedback")
        return _filled_by_variant(c)
    if c.based == "both":
        raise SettingError("based", "'both' blends predicted ratings: it is for explicit "
                           "feedback")
    if c.recency_boost and c.based != "user":
        raise SettingError("recency_boost", "weighs the rows of users: it needs based='user'")
    if c.augment_eps is not None and not 0 <= c.augment_eps < math.inf:
        raise SettingError("augment_eps", "must be a finite number >= 0; got {value}",
                           value=c.augment_eps)
    if c.variant:
        weighting, augmented = VARIANT_SETTINGS[c.variant]
        if c.weighting not in (None, weighting):
            raise SettingError("variant", f"{c.variant} uses weighting {weighting}")
        if not augmented and c.augment_eps:
            raise SettingError("variant", f"{c.variant} has no augmentation: leave "
                               "augment_eps unset")
    return _filled_by_variant(c)


def _filled_by_variant(c: Config) -> Config:
    """`c` with its weighting and augment_eps of None the variant's (value_of)."""
    settings = asdict(c)
    return replace(c, **{name: value_of(settings, name) for name in VARIANT_FILLED})
