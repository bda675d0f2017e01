"""The settings of an NCAE model: one frozen record with the paper's defaults, resolved and
checked in one place. `NCAE(**settings)` takes them as keywords and `python -m ncae_cuda.train`
as flags of the same names, so the API and the CLI cannot drift apart.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from .pretrain import VARIANTS

# The paper's implicit models: (weighting of unobserved entries, sparsity-aware augmentation).
VARIANT_SETTINGS = {"NCAE-": ("uniform", False), "NCAE": ("popularity", False),
                    "NCAE+": ("popularity", True)}
DEFAULT_AUGMENT_EPS = 0.001


@dataclass(frozen=True)
class Config:
    feedback: str = "explicit"        # 'explicit' (ratings, RMSE) or 'implicit' (HR/NDCG)
    based: str | None = None          # rows encoded: 'item' for explicit, 'user' for implicit
    hidden: tuple = (500, 500)        # width of each hidden layer
    dropout: float = 0.5              # input dropout rate q
    alpha: float = 1.0                # explicit: weight of errors on dropped inputs
    beta: float = 0.5                 # explicit: weight of errors on kept inputs
    variant: str | None = None        # implicit: 'NCAE-', 'NCAE' or 'NCAE+' (the default)
    weighting: str | None = None      # implicit: 'popularity' or 'uniform' weights c_j
    c0: float = 512.0                 # popularity weighting: c0
    omega: float = 0.5                # popularity weighting: w
    uniform_c: float = 0.05           # uniform weighting: the one c
    augment_eps: float | None = None  # implicit: rows with |R|/N below it get a sparser copy
    augment_p: float = 0.8            # augmentation: share of a row's most popular items dropped
    pretrain: str = "BP"              # layer-wise pre-training variant (ncae_cuda.pretrain)
    pretrain_epochs: int = 10         # epochs of each pre-training stage
    epochs: int = 100                 # most epochs fit() trains
    patience: int = 10                # early stopping on validation; 0 = never stop early
    batch_size: int = 128
    lr: float = 1e-3                  # Adam's learning rate
    weight_decay: float = 1e-3        # lambda: L2 on all weights and biases
    seed: int = 0                     # init, shuffling and dropout
    cutoffs: tuple = (10, 100)        # implicit: M of HR@M, NDCG@M; early stopping: the last
    rating_scale: tuple | None = None # explicit: (r_min, r_max); default: the data's

    def resolved(self) -> Config:
        """The settings with every data-independent default filled in; ValueError names a
        setting that is out of range or contradicts another."""
        c = replace(self, hidden=tuple(int(h) for h in self.hidden),
                    cutoffs=tuple(int(m) for m in self.cutoffs),
                    rating_scale=None if self.rating_scale is None
                    else tuple(float(r) for r in self.rating_scale))
        _check_choice("feedback", c.feedback, ("explicit", "implicit"))
        _check_choice("pretrain", c.pretrain, VARIANTS)
        if c.based is None:
            c = replace(c, based="item" if c.feedback == "explicit" else "user")
        _check_choice("based", c.based, ("user", "item"))
        _check_range(c)
        return _resolved_variant(c)

    def as_dict(self) -> dict:
        """JSON-ready: tuples as lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict) -> Config:
        names = {f.name for f in fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

    @property
    def implicit(self) -> bool:
        return self.feedback == "implicit"

    @property
    def model_name(self) -> str:
        """The paper's name of the model: NCAE-, NCAE or NCAE+ (implicit), NCAE (explicit)."""
        if not self.implicit:
            return "NCAE"
        for name, (weighting, augmented) in VARIANT_SETTINGS.items():
            if self.weighting == weighting and (self.augment_eps > 0) == augmented:
                return name
        return f"NCAE ({self.weighting} weighting, augmented)"


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")


def _check_range(c: Config) -> None:
    checks = [
        ("hidden", c.hidden, len(c.hidden) > 0 and min(c.hidden) >= 1, "positive widths"),
        ("dropout", c.dropout, 0 <= c.dropout < 1, "in [0, 1)"),
        ("augment_p", c.augment_p, 0 < c.augment_p <= 1, "in (0, 1]"),
        ("lr", c.lr, c.lr > 0, "> 0"),
        ("cutoffs", c.cutoffs, len(c.cutoffs) > 0 and min(c.cutoffs) >= 1, "positive"),
        ("rating_scale", c.rating_scale,
         c.rating_scale is None or (len(c.rating_scale) == 2
                                    and c.rating_scale[0] < c.rating_scale[1]), "(low, high)"),
    ]
    for name in ("epochs", "pretrain_epochs", "batch_size"):
        checks.append((name, getattr(c, name), getattr(c, name) >= 1, ">= 1"))
    for name in ("alpha", "beta", "c0", "omega", "uniform_c", "weight_decay", "patience"):
        checks.append((name, getattr(c, name), getattr(c, name) >= 0, ">= 0"))
    for name, value, ok, wanted in checks:
        if not ok:
            raise ValueError(f"{name} must be {wanted}; got {value!r}")


def _resolved_variant(c: Config) -> Config:
    """variant, weighting and augment_eps: implicit settings that must agree."""
    if not c.implicit:
        for name in ("variant", "weighting", "augment_eps"):
            if getattr(c, name):
                raise ValueError(f"{name} is for implicit feedback")
        return replace(c, augment_eps=0.0)
    if c.variant is not None:
        _check_choice("variant", c.variant, tuple(VARIANT_SETTINGS))
    if c.weighting is not None:
        _check_choice("weighting", c.weighting, ("popularity", "uniform"))
    if c.augment_eps is not None and c.augment_eps < 0:
        raise ValueError(f"augment_eps must be >= 0; got {c.augment_eps!r}")
    weighting, augmented = VARIANT_SETTINGS[c.variant or "NCAE+"]
    if c.variant and c.weighting not in (None, weighting):
        raise ValueError(f"variant {c.variant} uses weighting {weighting}")
    if c.variant and not augmented and c.augment_eps:
        raise ValueError(f"variant {c.variant} has no augmentation: leave augment_eps unset")
    eps = c.augment_eps
    if eps is None:
        eps = DEFAULT_AUGMENT_EPS if augmented else 0.0
    return replace(c, weighting=c.weighting or weighting, augment_eps=float(eps))
