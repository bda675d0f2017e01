"""A warm start: a fit that starts from a fitted model's parameters instead of a fresh draw.

Data grows: a model of yesterday's interactions meets today's, with new users and items. The
network's rows carry no parameters (they are encoded from their entries), its columns do (the
rows of E, V and c: items of a user-based model, users of an item-based one) and the hidden
layers are shared. So a warm start takes the hidden layers whole, and each column of the new
data whose id the model knows takes that column's rows; a column the model does not know keeps
what a fresh fit of the new data draws for it (Layout.xavier_init, the same seed), and a column
the model knows but the new data lacks is left behind. What depends on the data is the new
data's: the column weights, augmentation's rows, the rating scale.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.interactions import DataError
from ..ops.layout import SHARDED, NCAELayout
from .config import Config, SettingError

# The settings that make the network's shape (or what its outputs mean: explicit, a scaled tanh
# or the identity; implicit, a weighted square's tanh or a softmax's logits): a warm start keeps
# them.
SHAPE_SETTINGS = ("hidden", "feedback", "based", "output", "loss")


@dataclass(frozen=True)
class WarmStart:
    """What a fit starts from: the model's settings, its whole parameters (on the host) and the
    ids of its network's columns."""
    config: Config
    params: np.ndarray          # (P,) float32 of NCAELayout(len(column_ids), config.hidden)
    column_ids: np.ndarray      # (model's columns,) source ids, int64 or str

    def check(self, config: Config) -> None:
        """SettingError naming the settings of the shape where `config` is not the model's."""
        differ = [name for name in SHAPE_SETTINGS
                  if getattr(config, name) != getattr(self.config, name)]
        if differ:
            values = "; ".join(f"{name} {_shown(getattr(self.config, name))} there, "
                               f"{_shown(getattr(config, name))} here" for name in differ)
            names = " and ".join(filter(None, [", ".join(differ[:-1]), differ[-1]]))
            raise SettingError(names, f"must be the warm start's model's ({values}): a warm "
                               "start keeps the network's shape; fit from scratch to change it")

    def start(self, layout: NCAELayout, column_ids: np.ndarray, fresh: np.ndarray
              ) -> np.ndarray:
        """(P,) the parameters a fit of `layout` starts from: `fresh` (the layout's fresh draw)
        with the model's hidden layers, and the model's rows of each column it knows by id.
        column_ids: the ids of all the fit's columns, of which a shard's layout holds
        layout.columns."""
        params = fresh.copy()
        new = layout.views(params)
        old = NCAELayout(len(self.column_ids), self.config.hidden).views(self.params)
        lo, hi, _ = layout.columns
        at, known = matching(column_ids[lo:hi], self.column_ids)     # (known,) each, indices
        for key, view in new.items():
            if key in SHARDED:
                view[at] = old[key][known]
            else:
                view[...] = old[key]
        return params

    def known(self, column_ids: np.ndarray, based: str) -> str:
        """How many of a fit's columns (of `column_ids`) the model knows, in words; DataError
        where it knows none: the fit would start from the hidden layers alone, a fit from
        scratch in all but name (before, it ran as one, with a note)."""
        kind = "items" if based == "user" else "users"
        known = len(matching(column_ids, self.column_ids)[0])
        if not known:
            raise DataError(f"warm start: the model knows none of the data's {len(column_ids)} "
                            f"{kind} (its {len(self.column_ids)} {kind} have other ids): it "
                            "would be a fit from scratch; warm-start from a model of this "
                            "data's ids, or fit without one")
        return (f"{known} of {len(column_ids)} {kind} from the model, "
                f"{len(column_ids) - known} new")


def matching(ids: np.ndarray, known_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in ids, positions in known_ids) of the ids in both (each list unique); where
    one side's ids are text and the other's integers, they meet as text (integer ids print as
    their files wrote them: ncae_cuda.data.interactions)."""
    if (ids.dtype.kind in "iu") != (known_ids.dtype.kind in "iu"):
        ids, known_ids = ids.astype(str), known_ids.astype(str)
    _, at, known = np.intersect1d(ids, known_ids, assume_unique=True, return_indices=True)
    return at, known


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
