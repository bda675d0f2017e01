"""based='both': an item-based and a user-based NCAE of one data set, their predicted ratings
blended by weights chosen on validation (explicit feedback).

    from ncae_cuda import BlendedNCAE
    model = BlendedNCAE(hidden=(300, 300)).fit(split.train, validation=split.valid)
    model.recommend(users, n=10)           # as NCAE's; ncae_cuda.load_model reads its file

The two see a rating from two sides: the item-based one encodes the item's ratings and predicts
well where an item has many, the user-based one encodes the user's. The blend is feature-
weighted linear stacking (Sill et al., 2009): each member's weight, and an offset, move with
the item's and the user's number of fit ratings, so the better informed side counts for more:

    r = sum_k (a_k + b_k li + c_k lu) r_k + (d + e li + f lu),  li, lu = log(1 + n_i), log(1 + n_u)

r_k the members' predictions (item first), clipped to the rating scale. The nine weights are
least squares on the validation entries in float64: a fit without validation blends the plain
mean (and says so), and a refit (the run protocol's, on training + validation) keeps the
weights its selection fit chose. The blend's validation figure is cross-fitted: each half of
the validation entries (a draw of the seed) is blended by the weights fit on the other half, so
the figure that chooses a blend (the tuner's) is not that of weights fit on it. Validation of
fewer warm entries than two halves of nine leaves the weights undetermined: the plain mean
then, and its figure, as a note says. Cold entries
(a user or item with no fit rating) take the fit data's means (cold_means.py), not the
blend (docs/results.md has what it gives on MovieLens 100K).
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from ..data.interactions import DataError
from .config import Config, SettingError
from .estimator import NCAE, refuse_epochs
from .evaluate import rating_report
from .fitdata import as_interactions
from .recommender import RatingModel
from .trainer import CHECKPOINT_EVERY

MEMBERS = ("item", "user")                   # the members' `based`, in the weights' order
MEAN = np.array([[0.5, 0.0, 0.0],            # (members + offset, [1, li, lu]): the plain mean
                 [0.5, 0.0, 0.0],
                 [0.0, 0.0, 0.0]])


class BlendedNCAE(RatingModel):
    """An item-based and a user-based NCAE, blended (see the module's docstring).

    Parameters
    ----------
    device : str or ops backend
        As NCAE's; both members run on it.
    **settings
        NCAE's settings (ncae_cuda.model.config.Config), explicit feedback; each member takes
        them all, with its own `based`.

    Attributes
    ----------
    members : dict
        {'item': NCAE, 'user': NCAE}.
    weights : numpy.ndarray
        (3, 3) float64: rows the item member, the user member and the offset; columns the
        weight's constant, its factor of log(1 + n_i) and of log(1 + n_u).
    """

    def __init__(self, device="auto", **settings):
        if settings.get("based", "both") != "both":
            raise SettingError("based", f"is both in a blend, of an item- and a user-based NCAE; "
                                        f"got {settings['based']!r}: NCAE(based=...) is one of "
                                        f"them")
        self.config = Config.from_dict({**settings, "based": "both"}).resolved()
        self._patience_named = "patience" in settings
        first = NCAE.of_settings(asdict(self._member_config(MEMBERS[0])), device=device)
        self.members = {MEMBERS[0]: first}
        for name in MEMBERS[1:]:                                    # one backend for both
            self.members[name] = NCAE.of_settings(asdict(self._member_config(name)),
                                                  device=first.ops)
        self.ops = first.ops
        self.weights = MEAN.copy()
        self.data = None                 # the user-based member's FitData: users x items
        self.history, self.best_epoch, self.still_improving = [], {}, False
        self.best_validation = None      # the blend's figures on validation, where it had one

    def __repr__(self) -> str:
        inner = repr(self.members["user"])[len("NCAE("):]
        return f"BlendedNCAE({inner.replace(', based=' + repr('user'), '')}"

    def _member_config(self, name: str) -> Config:
        return replace(self.config, based=name)

    # -----------------------------------------------------------------------------------------
    # training

    def fit(self, X, validation=None, epochs=None, callback=None, checkpoint=None,
            resume: bool = False, checkpoint_every: float = CHECKPOINT_EVERY,
            verbose: bool = True, warm_start=None) -> BlendedNCAE:
        """Fit each member on X (NCAE.fit), then the blend's weights on `validation`.

        Parameters
        ----------
        X, validation, callback, resume, checkpoint_every, verbose
            As NCAE.fit's; callback(member, record) hears each member's epochs, the record's
            'member' naming it.
        epochs : int or dict, optional
            Most epochs of each member, or {'item': e, 'user': e} (what best_epoch holds).
        checkpoint : str or os.PathLike, optional
            The checkpoint's path; each member's file puts its name before the suffix
            (checkpoint-select.item.npz).
        warm_start : BlendedNCAE, optional
            A fitted blend (this one: partial_fit): each member starts from its own (NCAE.fit's
            warm_start); an item- or user-based model is refused.

        Returns
        -------
        BlendedNCAE
            The model, fitted: best_epoch and still_improving per member, history of both,
            best_validation the blend's cross-fitted figures on validation.
        """
        self._check_patience_read(validation)
        if isinstance(epochs, dict) and set(epochs) != set(MEMBERS):
            raise SettingError("epochs", f"must be an integer, or a dict of each member's "
                                         f"({{'item': e, 'user': e}}); got {epochs!r}")
        if warm_start is not None:
            self.check_warm_start(warm_start)
        if validation is None and verbose and np.array_equal(self.weights, MEAN):
            print("note: no validation part to fit the blend's weights on: its members are "
                  "blended by their plain mean", flush=True)
        fit = as_interactions(X, "X")
        history = []
        with contextlib.ExitStack() as kept:
            # a stop in the second member leaves the first as it was too: a stopped
            # partial_fit's resume starts each member from what its checkpoint names
            for member in self.members.values():
                kept.enter_context(member._as_it_was_unless_fitted())
            for name, member in self.members.items():
                if verbose:
                    print(f"{name}-based member", flush=True)

                def heard(fitted, record, name=name):
                    record["member"] = name
                    if callback is not None:
                        callback(fitted, record)
                member.fit(fit, validation, epochs[name] if isinstance(epochs, dict) else epochs,
                           heard, member_checkpoint(checkpoint, name), resume, checkpoint_every,
                           verbose, None if warm_start is None else warm_start.members[name])
                history += member.history
        self.data = self.members["user"].data
        self.history, self.best_validation = history, None
        self.best_epoch = {name: m.best_epoch for name, m in self.members.items()}
        self.still_improving = any(m.still_improving for m in self.members.values())
        if validation is not None:
            held = self.data.held_out(validation, "validation")
            if held.ratings is None:
                raise DataError("validation for an explicit model needs ratings")
            self.best_validation, how = self._fit_weights(held)
            if verbose:
                members = ", ".join(f"{name} {m.best_validation['rmse']:.4f}"
                                    for name, m in self.members.items())
                print(f"blend: validation rmse {self.best_validation['rmse']:.4f}, {how}; the "
                      f"members' best: {members})", flush=True)
        return self

    def _fit_weights(self, held) -> tuple[dict, str]:
        """Fit the weights on the warm entries of `held` (validation, of the fit data's ids);
        return their cross-fitted figures (evaluate()'s keys; the cold entries', which take the
        fit data's means, under 'cold') and how they were had, as the fit's log says it. Too
        few warm entries to fit the weights on each half: the plain mean's weights and
        figures."""
        cold = self.data.cold_at(held.users, held.items)                    # (nnz,) bool
        warm = held.subset(~cold)
        li, lu = self._log_counts()
        ratings, li, lu = (self._member_ratings(warm.users, warm.items), li[warm.items],
                           lu[warm.users])
        if warm.nnz // 2 < MEAN.size:
            # (before, the weights of so few entries: a half of none fit all-zero weights, its
            # figure the scale's floor)
            self.weights = MEAN.copy()
            crossed = blend(MEAN, ratings, li, lu, self.rating_scale)       # (warm nnz,)
            how = (f"the plain mean's (only {warm.nnz} warm entries: too few to fit the "
                   f"{MEAN.size} weights on each half")
        else:
            self.weights = fit_weights(ratings, warm.ratings, li, lu)
            half = np.random.default_rng(self.config.seed).permutation(warm.nnz) < warm.nnz // 2
            crossed = np.empty(warm.nnz, np.float32)                        # (warm nnz,)
            for scored in (half, ~half):
                weights = fit_weights(ratings[:, ~scored], warm.ratings[~scored], li[~scored],
                                      lu[~scored])
                crossed[scored] = blend(weights, ratings[:, scored], li[scored], lu[scored],
                                        self.rating_scale)
            how = "cross-fitted (each half by the weights fit on the other"
        figures = rating_report(crossed, warm.ratings, warm.users)
        if cold.any():
            figures["cold"] = self.evaluate(held.subset(cold))["cold"]
        return figures, how

    def check_warm_start(self, model) -> None:
        """SettingError where a fit can not start from `model`: a blend's members start from
        a blend's, each from its own (NCAE.check_warm_start)."""
        if not isinstance(model, BlendedNCAE):
            raise SettingError("based", f"must be the warm start's model's "
                               f"({model.config.based} there, both here): a blend starts from "
                               "a blend, each member from its own")
        model._check_fitted()               # (said of the blend, not of a member)
        for name, member in self.members.items():
            member.check_warm_start(model.members[name])

    partial_fit = NCAE.partial_fit

    def refit(self, X, **fitting) -> BlendedNCAE:
        """A new blend of the same settings and weights fit on X for the epochs of each member's
        best_epoch (the run protocol's refit on training + validation); NotFitted before a
        fit, which has chosen no epochs yet."""
        self._check_fitted()
        refuse_epochs(fitting, self.best_epoch)
        model = BlendedNCAE.of_settings(asdict(self.config), device=self.ops)
        model.weights = self.weights.copy()
        return model.fit(X, epochs=dict(self.best_epoch), **fitting)

    # -----------------------------------------------------------------------------------------
    # scoring

    def similar_items(self, items, n: int = 10):
        """NCAE.similar_items of the user-based member: items by their output embeddings."""
        self._check_fitted()                # (said of the blend, not of a member)
        return self.members["user"].similar_items(items, n)

    def _ratings_at(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """(n,) float32 the blend at (users[i], items[i]) (predict's, evaluate's)."""
        li, lu = self._log_counts()
        return self._with_cold_ratings(users, items, blend(
            self.weights, self._member_ratings(users, items), li[items], lu[users],
            self.rating_scale))

    def _member_ratings(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """(members, n) each member's predicted rating at (users[i], items[i])."""
        return np.stack([member._ratings_at(users, items) for member in self.members.values()])

    def _log_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(n_items,), (n_users,) float32 log(1 + n): each item's and user's fit ratings (a
        blend is never sharded: the fit data holds every item)."""
        return tuple(np.log1p(counts.astype(np.float64)).astype(np.float32)
                     for counts in (self.data.popularity(), self.data.user_counts))

    def _model_scorer(self):
        """Scores of every item for a batch of users (recommend's): the blend on the device."""
        xp, ops = self.ops.xp, self.ops
        scorers = [(m._model_scorer(), m._net.objective) for m in self.members.values()]
        item_log, user_log = self._log_counts()
        li = ops.to_device(item_log)[None, :]                           # (1, n_items)

        def score(users: np.ndarray):
            lu = ops.to_device(user_log[users])[:, None]                 # (B, 1)
            ratings = [objective.rating(scorer(users), xp) for scorer, objective in scorers]
            return blend(self.weights, ratings, li, lu, self.rating_scale, xp)  # (B, items)
        return score

    # -----------------------------------------------------------------------------------------
    # saving and loading

    def contents(self) -> tuple[dict, dict]:
        """(meta, arrays): what save() writes beside the settings: the weights, the validation
        figures, each member's parameters and, once, the fit interactions."""
        meta = {"rating_scale": list(self.rating_scale), "weights": self.weights.tolist(),
                "history": self.history, "best_epoch": self.best_epoch,
                "best_validation": self.best_validation, "members": {}}
        arrays = dict(self.data.arrays())
        for name, member in self.members.items():
            member_meta, member_arrays = member.contents()
            meta["members"][name] = {k: member_meta[k] for k in ("history", "best_epoch",
                                                                 "steps")}
            arrays[f"{name}.params"] = member_arrays["params"]
        return meta, arrays

    def restore(self, meta: dict, arrays: dict) -> None:
        """Take the fitted state of contents()' (meta, arrays); KeyError, ValueError or
        TypeError where its parts do not fit together."""
        data = {k: v for k, v in arrays.items() if "." not in k}
        for name, member in self.members.items():
            member.restore({**meta["members"][name], "rating_scale": meta["rating_scale"]},
                           {**data, "params": arrays[f"{name}.params"]})
        weights = np.asarray(meta["weights"], np.float64)
        if weights.shape != MEAN.shape:
            raise ValueError(f"weights of shape {weights.shape}; a blend has {MEAN.shape}")
        self.weights, self.data = weights, self.members["user"].data
        self.history, self.best_epoch = meta["history"], meta["best_epoch"]
        self.best_validation = meta.get("best_validation")      # (None: a file before them)


def member_checkpoint(path, name: str) -> Path | None:
    """A member's checkpoint file: `path` with the member's name before its suffix."""
    return None if path is None else Path(path).with_suffix(f".{name}{Path(path).suffix}")


def fit_weights(ratings: np.ndarray, target: np.ndarray, li: np.ndarray, lu: np.ndarray
                ) -> np.ndarray:
    """(3, 3) the weights of blend() that fit `target` best in least squares (float64), from
    the members' (members, n) ratings and each entry's log counts (n,)."""
    terms = [np.ones_like(li), li, lu]
    sources = [*ratings, np.ones_like(li)]
    features = np.stack([np.asarray(s, np.float64) * t for s in sources for t in terms], 1)
    solution = np.linalg.lstsq(features, np.asarray(target, np.float64), rcond=None)[0]
    return solution.reshape(MEAN.shape)


def blend(weights: np.ndarray, ratings, li, lu, scale: tuple[float, float], xp=np):
    """The blended rating from the members' `ratings` (item first) and the log counts li, lu
    (arrays that broadcast against them), clipped to the rating scale."""
    def weight(row):
        a, b, c = (float(w) for w in weights[row])
        return a + b * li + c * lu
    out = weight(len(ratings))
    for k, r in enumerate(ratings):
        out = out + weight(k) * r
    return xp.clip(out, *scale).astype(np.float32)
