"""What a fitted NCAE answers beyond the contract every model keeps (model/base.py): predicted
ratings, its scores from the network, new users folded in from their interactions, similar
items.

`RatingModel` is what NCAE and BlendedNCAE (model/blend.py) share: models of NCAE's settings
(Config), which predict ratings (explicit) and are scored by RMSE. `Recommender` is NCAE's query
half, as implicit's RecommenderBase is its models': NCAE (model/estimator.py) fits, saves and
loads, and sets what these methods read: `data` (the fit data, FitData), `_net` (the network),
`ops`, `config` and `comm` (a column shard's collectives, or None).
"""
from __future__ import annotations

import abc
from typing import Callable

import numpy as np

from ..data.interactions import DataError, Interactions
from .ann import ItemIndex, check_applies
from .base import Model, Unsupported, cosine_of
from .config import SettingError
from .cold_means import cold_ratings, new_user_ratings
from .evaluate import (Scorer, constant_scorer, merged_top, model_scorer, predict_ratings,
                       rating_report, row_codes, top_m)
from .fitdata import new_rows

NAME = "ncae"          # NCAE's and BlendedNCAE's key in the factory (based='both': the blend)


class RatingModel(Model):
    """A model of NCAE's settings (Config): its settings' record, predict, and the explicit
    evaluator's RMSE of predicted ratings."""

    name = NAME
    _index: ItemIndex | None = None    # built on recommend(index='approximate')'s first call
    # a patience named where the model was made (NCAE(patience=5)), which a fit without
    # validation would leave unread; a whole record's is kept (of_settings)
    _patience_named = False

    @classmethod
    def of_settings(cls, settings: dict, **where) -> RatingModel:
        """The model of a whole record of settings (a recipe's, a model file's, a fitted
        model's), made where `where` says (device, shard): its patience is kept by a fit
        without validation, as the trainer keeps a recipe's, where one named is refused."""
        model = cls(**where, **settings)
        model._patience_named = False
        return model

    def _check_patience_read(self, validation) -> None:
        """SettingError where a fit without `validation` would leave a patience named where
        the model was made unread: nothing stops it early (as the trainer's --patience)."""
        if validation is None and self._patience_named:
            raise SettingError("patience", f"stops a fit on its validation score, and this "
                               f"fit has no validation: give validation=, or leave "
                               f"patience={self.config.patience} out of {self.title}(...)")

    @property
    def settings(self) -> dict:
        """{'model': 'ncae', **the Config's fields}: what save() writes and make_model reads."""
        return {"model": NAME, **self.config.as_dict()}

    @property
    def based(self) -> str:
        return self.config.based

    def predict(self, users, items) -> np.ndarray:
        """The model's output at each (users[i], items[i]).

        Parameters
        ----------
        users, items : array-like
            Ids of the fit data, as many of each; users are encoded from the fit data.

        Returns
        -------
        numpy.ndarray
            (n,) float32: the predicted rating (explicit) or, implicit, the preference
            tanh(out) in (-1, 1) (loss weighted_square) or the item's probability under the
            softmax over all items (loss multinomial). Explicit: where the user or the item
            has no fit rating (a cold entry), the fit data's shrunk means instead
            (ncae_cuda.model.cold_means: the item's for a new user, the user's for a new
            item, the overall mean where both are new): the network has learnt nothing there.

        Raises
        ------
        UnknownIds
            Ids the model was not fit on, named.
        DataError
            Not as many users as items, or ids in a container of no order (a set, a dict, a
            generator).
        NotFitted
            A model not fitted yet.
        """
        self._check_fitted()
        u = self.data.user_lookup(users)
        i = self.data.item_lookup(items)
        if len(u) != len(i):
            raise DataError(f"predict needs as many users as items; got {len(u)}, {len(i)}")
        return self._ratings_at(u, i)

    @abc.abstractmethod
    def _ratings_at(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """(n,) float32 predict's output at (users[i], items[i]), indices of the fit data."""

    def _with_cold_ratings(self, users: np.ndarray, items: np.ndarray, yhat: np.ndarray
                           ) -> np.ndarray:
        """(n,) yhat, the model's output at (users[i], items[i]), with an explicit model's cold
        entries given the fit data's shrunk means (cold_means.py)."""
        if self.config.implicit:
            return yhat
        cold = self.data.cold_at(users, items)                               # (n,) bool
        yhat[cold] = cold_ratings(self.data.shrunk_means, self.data.user_counts, users[cold],
                                  items[cold])
        return yhat

    def _scorer(self) -> Scorer:
        """recommend's scores of the fit data's users: _model_scorer's, an explicit model's
        items of no fit rating at the user's shrunk mean (_with_cold_items)."""
        return self._with_cold_items(self._model_scorer(), lambda: self.data.shrunk_means.users)

    @abc.abstractmethod
    def _model_scorer(self) -> Scorer:
        """The model's own scores of every item (held here) for a batch of the fit data's
        users, in the units of _scores_of."""

    def _scores_of(self, ratings: np.ndarray) -> np.ndarray:
        """(n,) the scores _model_scorer would give predicted `ratings`: the ratings
        themselves, where a model scores by them."""
        return ratings

    def _with_cold_items(self, scorer: Scorer, user_means: Callable[[], np.ndarray]
                         ) -> Scorer:
        """`scorer` (of a batch of rows, each a user) with an explicit model's items of no fit
        rating scored at the row's user's shrunk mean, user_means()[row] (cold_means.py): what
        predict gives a known user there, where the network has learnt nothing (the item's
        output column, or row, an untrained draw). The other items keep their scores, and so
        their order and ties; such items tie among themselves, the earlier first."""
        cold = self._cold_items()
        if not len(cold):
            return scorer
        means, cold = user_means(), self.ops.to_device(cold)

        def score(rows: np.ndarray):
            scores = scorer(rows)                                            # (B, items held)
            at_mean = self._scores_of(means[rows]).astype(np.float32)        # (B,)
            scores[:, cold] = self.ops.to_device(at_mean)[:, None]
            return scores
        return score

    def _searched_top(self, searched: ItemIndex, u: np.ndarray, n: int, filter_seen: bool
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Model's, an explicit model's items of no fit rating (which the index leaves out:
        their vectors are untrained, ItemIndex.for_model) ranked among what it finds at the
        user's shrunk mean, as the exact top-k ranks them (_with_cold_items); they tie, so the
        first n of them are all that can rank."""
        cold = self._cold_items()
        idx, vals, short = super()._searched_top(searched, u, n, filter_seen)
        if not len(cold):
            return idx, vals, short
        first = cold[:n]
        cold_idx, cold_vals = np.full_like(idx, -1), np.full_like(vals, -np.inf)
        cold_idx[:, :len(first)] = first
        cold_vals[:, :len(first)] = self._scores_of(self.data.shrunk_means.users[u])[:, None]
        idx, vals = merged_top(np.stack([idx, cold_idx]), np.stack([vals, cold_vals]), self.ops,
                               n)
        return idx, vals, short

    def _cold_items(self) -> np.ndarray:
        """(k,) the items held here (indices among them) that an explicit model scores at a
        user's shrunk mean, those of no fit rating; none for an implicit model."""
        if self.config.implicit:
            return np.zeros(0, np.int64)
        held = self.data.item_columns
        return np.flatnonzero(self.data.item_counts[held.lo:held.hi] == 0)

    def _results(self, idx: np.ndarray, vals: np.ndarray, without_history: np.ndarray,
                 candidates) -> tuple[np.ndarray, np.ndarray]:
        """recommend's results with an explicit model's users without history ranked by what
        predict gives them, the items' shrunk means (cold_means.new_user_ratings): the network
        has learnt nothing of such a user. All of them have the same candidates (nothing seen
        to leave out), so one row is ranked, through top_m as every other row is."""
        if not self.config.implicit and without_history.any():
            held = self.data.item_columns
            means = new_user_ratings(self.data.shrunk_means)[held.lo:held.hi]  # (items held,)
            with self.ops.session():
                idx[without_history], vals[without_history] = top_m(
                    self.ops, constant_scorer(self.ops, means), np.zeros(1, np.int32),
                    idx.shape[1], None, candidates, held, self.comm)
        return super()._results(idx, vals, without_history, candidates)

    def item_index(self) -> ItemIndex:
        """The approximate index of this model's items (model/ann.py), built once: read from
        beside the file load() read where it was built from this model, else built and saved
        there.

        Raises
        ------
        IndexUnavailable
            A model it does not apply to (a blend, a sharded one, one on the GPU), or no
            [ann] extra.
        NotFitted
            A model not fitted yet.
        """
        self._check_fitted()
        if self._index is None or not self._index.fresh_for(self):
            self._index = ItemIndex.for_model(self, self.source)
        return self._index

    def _check_index(self) -> None:
        check_applies(self)

    def _held_out(self, held) -> Interactions:
        """Held-out data of the fit data's ids; an explicit model's with ratings on its
        scale (DataError where not)."""
        held = super()._held_out(held)
        if not self.config.implicit:
            if held.ratings is None:
                raise DataError("held-out data for an explicit model needs ratings")
            self.data.check_ratings(held, "held-out data")
        return held

    def _part_scorer(self, held: Interactions, exclude, popularity: bool):
        """evaluator()'s score of the held-out entries `held`: the ranker (implicit), the RMSE
        of the predicted ratings (explicit)."""
        if self.config.implicit:
            return super()._part_scorer(held, exclude, popularity)
        counts = self.data.user_counts                                  # (n_users,)

        def score(per_user: bool = False) -> dict:
            return rating_report(self._ratings_at(held.users, held.items), held.ratings,
                                 held.users, counts if per_user else None)
        return score

    @property
    def rating_scale(self) -> tuple[float, float] | None:
        """Explicit: the (lowest, highest) rating the model predicts on."""
        return None if self.data is None else self.data.rating_scale


class Recommender(RatingModel):
    """NCAE's queries from its network: predict, recommend, recommend_new (a user-based model),
    similar_items (see the module's docstring)."""

    def _ratings_at(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        rows, cols = (users, items) if self.config.based == "user" else (items, users)
        with self.ops.session():
            yhat = predict_ratings(self._net, self.data.inputs(), rows, cols)
        return self._with_cold_ratings(users, items, yhat)

    def _model_scorer(self) -> Scorer:
        """The network's logits."""
        return model_scorer(self._net, self.data.inputs(), self.config.based)

    def _scores_of(self, ratings: np.ndarray) -> np.ndarray:
        """The logits the network would put out for `ratings` (Objective.logit)."""
        return self._net.objective.logit(ratings)

    def _results(self, idx: np.ndarray, vals: np.ndarray, without_history: np.ndarray,
                 candidates) -> tuple[np.ndarray, np.ndarray]:
        """Column indices -> item ids (padding -1 or ""); an explicit model's logits ->
        ratings."""
        if not self.config.implicit:
            real = idx >= 0
            vals[real] = self._net.objective.rating(vals[real])
        return super()._results(idx, vals, without_history, candidates)

    def _new_user_scorer(self, new: Interactions, times):
        """The autoencoder encodes any row, so this needs a user-based model (an item-based
        model's users are its columns, each with an embedding learned in training): new's rows
        as fit reads X (explicit ratings on the model's scale; with recency_boost, weighted by
        `times`, a matrix of X_new's shape holding each interaction's time at its place). An
        explicit model's items of no fit rating are scored at a new user's mean, shrunk as a
        fit user's is (_with_cold_items)."""
        if self.config.based != "user":
            raise Unsupported("NCAE folds new users in as new rows of the autoencoder: "
                              "recommend_new needs a user-based model (based='user'); an "
                              "item-based model must be refit to learn a new user's embedding")
        self.data.check_ratings(new, "X_new")
        csr = self.data.part(self.data.network_values(new_rows(new, self.config, times)))
        return lambda: self._with_cold_items(model_scorer(self._net, csr, "user"), lambda: (
            self.data.shrunk_means.of_new_users(new.users, new.ratings, new.n_users)))

    def similar_items(self, items, n: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """The n items most similar to each given item by the cosine of their output
        embeddings: the rows of V in a user-based model; in an item-based one (whose V rows are
        users) their code, the last hidden layer of the item's row. The item itself is left
        out; returns (item_ids, similarities), each (len(items), n), the most similar first."""
        self._check_fitted()
        return self._most_similar(items, n, lambda: cosine_of(self, (
            self._net.p["V"] if self.config.based == "user"
            else row_codes(self._net, self.data.inputs()))))

