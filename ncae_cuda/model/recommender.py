"""What a fitted NCAE answers: predicted ratings, the figures of held-out data, the best items of
known users and of new users folded in from their interactions, similar items, and the fit
data's ids.

`Recommender` is NCAE's query half, as implicit's RecommenderBase is its models': NCAE (model/
estimator.py) fits, saves and loads, and sets what these methods read: `data` (the fit data,
FitData), `_net` (the network), `ops`, `config` and `comm` (a column shard's collectives, or
None).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.interactions import DataError, Interactions, from_matrix, lookup_ids
from .ann import INDEXES, ItemIndex, user_queries
from .cold_means import cold_at, cold_ratings
from .evaluate import (constant_scorer, excluded_entries, model_scorer, predict_ratings,
                       rating_report, row_codes, top_m)
from .fitdata import scored_rows


class Recommender:
    """The queries of a fitted model (NCAE's): predict, evaluate, recommend, recommend_new,
    similar_items, and the fit data's ids."""

    source: Path | None = None         # the file load() read: the index is kept beside it
    _index: ItemIndex | None = None    # built on recommend(index='approximate')'s first call

    def predict(self, users, items) -> np.ndarray:
        """The model's output at each (users[i], items[i]).

        Parameters
        ----------
        users, items : array-like
            Ids of the fit data, as many of each; users are encoded from the fit data.

        Returns
        -------
        numpy.ndarray
            (n,) float32: the predicted rating (explicit) or the preference tanh(out) in
            (-1, 1) (implicit). Explicit: where the user or the item has no fit rating (a cold
            entry), the fit data's shrunk means instead (ncae_cuda.model.cold_means: the
            item's for a new user, the user's for a new item, the overall mean where both
            are new): the network has learnt nothing there.

        Raises
        ------
        UnknownIds
            Ids the model was not fit on, named.
        """
        self._check_fitted()
        u = lookup_ids(self.user_ids, users, "user")
        i = lookup_ids(self.item_ids, items, "item")
        if len(u) != len(i):
            raise ValueError(f"predict needs as many users as items; got {len(u)}, {len(i)}")
        return self._ratings_at(u, i)

    def _ratings_at(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """(n,) float32 predict's output at (users[i], items[i]), indices of the fit data."""
        rows, cols = (users, items) if self.config.based == "user" else (items, users)
        with self.ops.session():
            yhat = predict_ratings(self._net, self.data.inputs(), rows, cols)
        return self._with_cold_ratings(users, items, yhat)

    def _with_cold_ratings(self, users: np.ndarray, items: np.ndarray, yhat: np.ndarray
                           ) -> np.ndarray:
        """(n,) yhat, the model's output at (users[i], items[i]), with an explicit model's cold
        entries given the fit data's shrunk means (cold_means.py)."""
        if self.config.implicit:
            return yhat
        cold = cold_at(self.data.seen, users, items)                         # (n,) bool
        yhat[cold] = cold_ratings(self.data.seen, users[cold], items[cold])
        return yhat

    def recommend(self, users, n: int = 10, filter_seen: bool = True, items=None,
                  index: str = "exact") -> tuple[np.ndarray, np.ndarray]:
        """The n best items of each user, best first.

        Parameters
        ----------
        users : array-like
            User ids of the fit data.
        n : int
            Items a user, capped at the number of candidate items.
        filter_seen : bool
            Leave out the items a user interacted with in the fit data.
        items : array-like, optional
            Item ids: the candidates (default: every item).
        index : {'exact', 'approximate'}
            'exact': every item scored. 'approximate': an inner-product index of the items
            (item_index(); the [ann] extra, CPU only), searched n deep, the user's seen items
            left out by the search itself; a user for whom it finds fewer than n, and every
            user where `items` is given, gets the exact top-k.

        Returns
        -------
        item_ids, scores : numpy.ndarray
            Each (len(users), n). Scores are predicted ratings (explicit) or the output logits
            (implicit: the order of tanh(out) without float32 saturation ties). Ties go to the
            item earlier in item_ids. A user with fewer than n candidates ends in score -inf,
            id -1 (integer ids) or "" (text ids).

        Raises
        ------
        UnknownIds
            Ids the model was not fit on, named.
        IndexUnavailable
            index='approximate' for a model or device it does not apply to, or without the
            [ann] extra.
        """
        self._check_fitted()
        if index not in INDEXES:
            raise ValueError(f"index must be one of {', '.join(INDEXES)}; got {index!r}")
        u = lookup_ids(self.user_ids, users, "user")
        n, candidates = self.data.candidates(n, items)
        searched = self.item_index() if index == "approximate" else None
        if searched is None or candidates is not None:
            return self._item_results(*self._exact_top(u, n, filter_seen, candidates),
                                      ratings=not self.config.implicit)
        idx, vals, short = searched.top(user_queries(self, u), u, n,
                                        self.data.seen if filter_seen else None)
        if short.any():
            idx[short], vals[short] = self._exact_top(u[short], n, filter_seen, None)
        return self._item_results(idx, vals, ratings=not self.config.implicit)

    def _exact_top(self, u: np.ndarray, n: int, filter_seen: bool, candidates
                   ) -> tuple[np.ndarray, np.ndarray]:
        """(idx, logits) each (len(u), n): the n best columns of users u, every item scored."""
        excluded = excluded_entries(self.ops, self.data.seen_items()) if filter_seen else None
        with self.ops.session():
            return top_m(self.ops, self._user_scorer(), u, n, excluded, candidates,
                         self.data.item_columns, self.comm)

    def item_index(self) -> ItemIndex:
        """The approximate index of this model's items (model/ann.py), built once: read from
        beside the file load() read where it was built from this model, else built and saved
        there.

        Raises
        ------
        IndexUnavailable
            A model it does not apply to (a blend, a sharded one, one on the GPU), or no
            [ann] extra.
        """
        self._check_fitted()
        if self._index is None or not self._index.fresh_for(self):
            self._index = ItemIndex.for_model(self, self.source)
        return self._index

    def recommend_new(self, X_new, n: int = 10, filter_seen: bool = True, items=None,
                      times=None) -> tuple[np.ndarray, np.ndarray]:
        """recommend() for users the model was not fit on, folded in from their interactions
        without retraining.

        The autoencoder encodes any row, so this needs a user-based model; an item-based
        model's users are its columns, each with an embedding learned in training.

        Parameters
        ----------
        X_new : scipy.sparse matrix
            New users x items, whose column j is item_ids[j], read as fit reads X: every
            stored entry is an interaction, its value the rating (explicit: on the model's
            rating scale, so a stored 0 is refused unless the scale starts at 0; implicit: the
            value is not read, a stored 0 is an interaction too). A row with no entry is a
            user with no history yet, scored from the empty row.
        n, filter_seen, items
            As recommend's; filter_seen leaves out the items of X_new's rows.
        times : scipy.sparse matrix, optional
            A model with recency_boost weighs each new user's interactions by their times: a
            matrix of X_new's shape holding each interaction's time at its place (any numbers
            that grow with time, e.g. seconds).

        Returns
        -------
        item_ids, scores : numpy.ndarray
            Each (X_new.shape[0], n), as recommend's.

        Raises
        ------
        ValueError
            An item-based model, or a model with recency_boost given no times.
        DataError
            X_new with another number of columns than the model has items, a rating off the
            model's rating scale (naming its item id and value), or times that do not match
            it.
        """
        self._check_fitted()
        if self.config.based != "user":
            raise ValueError("recommend_new folds new users in as new rows of the autoencoder: "
                             "it needs a user-based model (based='user'); an item-based model "
                             "must be refit to learn a new user's embedding")
        new = from_matrix(X_new, "X_new", item_ids=self.item_ids)
        self.data.check_ratings(new, "X_new")
        if self.config.recency_boost and times is None:
            raise ValueError("the model scores from rows weighted by recency (recency_boost): "
                             "give times=, each interaction's time at its place in X_new")
        if times is not None:
            new = replace(new, timestamps=_times_at(times, new))
        csr = self.data.part(self.data.network_values(scored_rows(new, self.config, "X_new")))
        n, candidates = self.data.candidates(n, items)
        excluded = excluded_entries(self.ops, csr) if filter_seen else None
        with self.ops.session():
            idx, vals = top_m(self.ops, model_scorer(self._net, csr, "user"),
                              np.arange(new.n_users), n, excluded, candidates,
                              self.data.item_columns, self.comm)
        return self._item_results(idx, vals, ratings=not self.config.implicit)

    def similar_items(self, items, n: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """The n items most similar to each given item, the item itself left out.

        Items are compared by their output embedding: the rows of V in a user-based model; in
        an item-based one (whose V rows are users) by their code, the last hidden layer of the
        item's row.

        Parameters
        ----------
        items : array-like
            Item ids of the fit data.
        n : int
            Similar items an item.

        Returns
        -------
        item_ids, similarities : numpy.ndarray
            Each (len(items), n), by cosine similarity, the most similar first.
        """
        self._check_fitted()
        xp, ops, held = self.ops.xp, self.ops, self.data.item_columns
        idx = lookup_ids(self.item_ids, items, "item")
        with ops.session():
            emb = (self._net.p["V"] if self.config.based == "user"
                   else row_codes(self._net, self.data.inputs()))          # (items held, K)
            norms = xp.sqrt((emb * emb).sum(axis=1, keepdims=True))
            unit = emb / xp.maximum(norms, xp.float32(1e-30))

            def similarity(chunk: np.ndarray):
                if held.whole:
                    return unit[ops.to_device(chunk)] @ unit.T                  # (B, n_items)
                query = xp.zeros((len(chunk), unit.shape[1]), unit.dtype)      # from its owner
                mine = np.flatnonzero(held.owns(chunk))
                query[ops.to_device(mine)] = unit[ops.to_device(chunk[mine] - held.lo)]
                self.comm.sum(query, "query items")
                return query @ unit.T                                           # (B, items held)

            def itself(chunk: np.ndarray) -> tuple:
                mine = held.owns(chunk)
                indptr = np.concatenate([[0], np.cumsum(mine)]).astype(np.int32)
                return ops.to_device(indptr), ops.to_device(chunk[mine] - held.lo)
            m = min(self.data.candidates(n, None)[0], max(len(self.item_ids) - 1, 1))
            found, sims = top_m(ops, similarity, idx, m, itself, None, held, self.comm)
        return self._item_results(found, sims, ratings=False)

    # -----------------------------------------------------------------------------------------
    # scoring held-out data

    def evaluator(self, held, exclude=None, popularity: bool = False):
        """A function that scores `held`, its device arrays built once, here.

        Parameters
        ----------
        held : scipy.sparse matrix or Interactions
            Interactions held out from the fit data, of the same users and items.
        exclude : scipy.sparse matrix or Interactions, optional
            Implicit: items left out of each user's candidates besides those of the fit data
            (e.g. the validation part when scoring test).
        popularity : bool
            Rank by the POP baseline instead, every item scored by its number of interactions
            in the fit data, on the same candidates (implicit only).

        Returns
        -------
        callable
            score(per_user=False) -> dict: RMSE of the predicted ratings (explicit), or HR@M of
            each held-out item ranked among the items the user has no interaction with in the
            fit data nor in `exclude`, and Recall@M and NDCG@M of each user's held-out items as
            a set (implicit: ncae_cuda.model.metrics). per_user adds the table of users grouped
            by their number of fit interactions. These are the figures of the warm entries;
            cold ones (whose user or item has no fit interaction: explicit models predict them
            from the fit data's means, ncae_cuda.model.cold_means) are scored apart, their
            figures under 'cold', where `held` has any.

        Raises
        ------
        DataError
            Held-out ratings missing for an explicit model, or ids the model does not know.
        """
        self._check_fitted()
        if popularity and not self.config.implicit:
            raise ValueError("the POP baseline ranks items: it is for implicit feedback")
        held = self.data.held_out(held, "held-out data")
        if not self.config.implicit:
            if held.ratings is None:
                raise DataError("held-out data for an explicit model needs ratings")
            self.data.check_ratings(held, "held-out data")
        cold = cold_at(self.data.seen, held.users, held.items)               # (nnz,) bool
        warm_score = self._part_scorer(held.subset(~cold), exclude, popularity)
        if not cold.any():
            return warm_score
        cold_score = self._part_scorer(held.subset(cold), exclude, popularity)

        def score(per_user: bool = False) -> dict:
            return {**warm_score(per_user), "cold": cold_score()}
        return score

    def _part_scorer(self, held: Interactions, exclude, popularity: bool):
        """evaluator()'s score of the held-out entries `held` (of the fit data's ids)."""
        c, ops, data = self.config, self.ops, self.data
        if c.implicit:
            pop = data.popularity() if popularity else None
            return data.ranker(held, exclude, c.cutoffs, lambda: self._user_scorer() if pop is None
                               else constant_scorer(ops, pop), self.comm)
        counts = data.user_counts                                       # (n_users,)

        def score(per_user: bool = False) -> dict:
            return rating_report(self._ratings_at(held.users, held.items), held.ratings,
                                 held.users, counts if per_user else None)
        return score

    def evaluate(self, held, exclude=None, per_user: bool = False,
                 popularity: bool = False) -> dict:
        """The figures of `held` once: evaluator(held, exclude, popularity)(per_user).

        Returns
        -------
        dict
            Explicit: 'rmse' and the number of entries scored ('entries'). Implicit: HR@M,
            Recall@M and NDCG@M at each cutoff ('hr@10', 'recall@10', 'ndcg@10', ...) and the
            number of users scored ('rows'); with per_user, the table of users grouped by their
            number of fit interactions. Where `held` has cold entries (user or item with no fit
            interaction), the figures are the warm entries', and 'cold' holds the cold ones'.
        """
        return self.evaluator(held, exclude, popularity)(per_user)

    def _item_results(self, idx: np.ndarray, vals: np.ndarray, ratings: bool):
        """Column indices -> item ids (padding -1 or ""), logits -> ratings where asked."""
        if ratings:
            real = idx >= 0
            vals[real] = self._net.objective.rating(vals[real])
        return self.data.item_ids_of(idx), vals

    def _user_scorer(self):
        return model_scorer(self._net, self.data.inputs(), self.config.based)

    # -----------------------------------------------------------------------------------------
    # data

    @property
    def user_ids(self) -> np.ndarray | None:
        """(n_users,) the fit data's user ids (None before a fit)."""
        return None if self.data is None else self.data.user_ids

    @property
    def item_ids(self) -> np.ndarray | None:
        """(n_items,) the fit data's item ids (None before a fit)."""
        return None if self.data is None else self.data.item_ids

    @property
    def rating_scale(self) -> tuple[float, float] | None:
        """Explicit: the (lowest, highest) rating the model predicts on."""
        return None if self.data is None else self.data.rating_scale

    def _check_fitted(self) -> None:
        if self._net is None:
            raise RuntimeError("the model is not trained: call fit() or NCAE.load() first")


def _times_at(times, new: Interactions) -> np.ndarray:
    """(nnz,) float64 the time at each of new's entries, read from `times` (a matrix of X_new's
    shape); DataError where it has another shape or a time is not a finite number."""
    m = sp.csr_matrix(times)
    if m.shape != (new.n_users, new.n_items):
        raise DataError(f"times is {m.shape[0]} x {m.shape[1]}; X_new is {new.n_users} x "
                        f"{new.n_items}")
    picked = m[new.users, new.items]     # (1, nnz) np.matrix; a sparse (1, 0) where nnz is 0
    at = np.asarray(picked.todense() if sp.issparse(picked) else picked, np.float64).ravel()
    if not np.isfinite(at).all():
        raise DataError(f"times: {int((~np.isfinite(at)).sum())} entries of X_new have no finite "
                        "time")
    return at
