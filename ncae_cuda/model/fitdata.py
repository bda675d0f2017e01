"""What a model derives from the data it is fit on, built once per fit (or read back from a model
file) and held in one place: the id maps and the rating scale, the fit interactions (users x
items), and, as the network sees them (rows x columns), the training matrix with augmentation's
extra rows, the implicit loss's column weights and the evaluator's matrices, each copied to the
device once, when first asked for.

    data = FitData.of(interactions, config, ops)      # checks the data against the settings
    data.shard(rank, world)                           # a column shard's process: its columns
    csr, rows = data.training()                       # what the network trains on
    held = data.held_out(validation, "validation")    # other data, of the same ids

A column shard (ncae_cuda/ops/shard.py) reads the whole data, as every rank does, and keeps its
columns: of the training and input matrices, of the column weights and, where the columns are
items (a user-based model), of what ranks and recommends items. Its columns are balanced by the
training matrix's entries.
"""
from __future__ import annotations

import functools
import numbers
from dataclasses import replace
from typing import Callable

import numpy as np
import scipy.sparse as sp

from ..data import recency
from ..data.interactions import (DataError, IdLookup, Interactions, check_entries, from_matrix,
                                 shown_id)
from ..ops.common import CSR
from ..ops.shard import Columns, column_part, split_columns
from . import cold_means, metrics
from .augment import column_weights, sparse_row_copies
from .config import Config, SettingError
from .evaluate import Scorer, ranking_report
from .network import to_network_scale


class FitData:
    """The data side of a fitted model (see the module's docstring)."""

    def __init__(self, config: Config, ops, user_ids: np.ndarray, item_ids: np.ndarray,
                 seen: sp.csr_matrix, rating_scale: tuple[float, float] | None):
        self.config, self.ops = config, ops
        # (n_users,), (n_items,) source ids: copies of its own, read-only, so that the lookups
        # sorted from them stay true
        self.user_ids, self.item_ids = _read_only(user_ids), _read_only(item_ids)
        self.seen = seen                      # (n_users, n_items) the fit interactions as
                                              # scored_rows(): users encoded from them, seen
                                              # items filtered by them
        self.rating_scale = rating_scale      # explicit: (r_min, r_max)
        self.columns = Columns(0, self.n_cols, self.n_cols)   # the network's columns held here
        self.bounds = np.array([0, self.n_cols])            # ... and every rank's: (ranks+1,)
        self._matrix = None                   # the network's view of `seen`, made on first use
        self._training = None                 # ... and what it trains on, made on first use
        self._device = {}                     # device copies, made on first use

    @functools.cached_property
    def user_lookup(self) -> IdLookup:
        """The indices of user ids (UnknownIds naming those not fit on), the ids sorted once."""
        return IdLookup(self.user_ids, "user")

    @functools.cached_property
    def item_lookup(self) -> IdLookup:
        """The indices of item ids (UnknownIds naming those not fit on), the ids sorted once."""
        return IdLookup(self.item_ids, "item")

    @classmethod
    def of(cls, data: Interactions, config: Config, ops) -> FitData:
        """The fit data of `data` (of as_interactions()), checked against the settings: ratings
        for explicit feedback, on a rating scale that holds them."""
        rating_scale = None
        if not config.implicit:
            if data.ratings is None:
                raise DataError(f"{data.name} has no ratings: use feedback='implicit'")
            declared = config.rating_scale or data.rating_scale
            zeros = int((data.ratings == 0).sum())
            if zeros and (declared is None or declared[0] > 0):
                raise DataError(f"{data.name}: {zeros} stored zeros: a sparse matrix stores only "
                                "the ratings there are, so a stored 0 would be taken for a "
                                "rating of 0. Remove them (X.eliminate_zeros()), or give a "
                                "rating_scale that starts at 0")
            scale = declared or (float(data.ratings.min()), float(data.ratings.max()))
            if not scale[0] < scale[1]:
                raise DataError(f"{data.name}: every rating is {scale[0]:g}: give the rating "
                                "scale (--rating-scale LOW,HIGH; rating_scale=(low, high) in "
                                "the API), or, where they are interactions rather than "
                                "ratings, --feedback implicit")
            rating_scale = tuple(float(r) for r in scale)
            check_scale(data, rating_scale, data.name)
        return cls(config, ops, _storable(data.user_ids), _storable(data.item_ids),
                   scored_rows(data, config, data.name), rating_scale)

    @classmethod
    def from_arrays(cls, config: Config, ops, arrays: dict,
                    rating_scale: tuple[float, float] | None) -> FitData:
        """The fit data a model file holds (arrays()); ValueError where they do not fit: ids
        that repeat, interactions out of range."""
        user_ids, item_ids = arrays["user_ids"], arrays["item_ids"]
        for side, ids in (("user", user_ids), ("item", item_ids)):
            unique, counts = np.unique(ids, return_counts=True)
            if len(unique) < len(ids):
                raise ValueError(f"{len(ids) - len(unique)} duplicate {side} ids, e.g. "
                                 f"{unique[counts > 1][0].item()!r}")
        seen = sp.csr_matrix((arrays["seen_data"], arrays["seen_indices"],
                              arrays["seen_indptr"]), shape=(len(user_ids), len(item_ids)))
        seen.check_format(full_check=True)        # indices in range, pointers in order
        return cls(config, ops, user_ids, item_ids, seen, rating_scale)

    def arrays(self) -> dict:
        """What a model file keeps of the fit data."""
        return {"user_ids": self.user_ids, "item_ids": self.item_ids,
                "seen_indptr": self.seen.indptr, "seen_indices": self.seen.indices,
                "seen_data": self.seen.data}

    # -----------------------------------------------------------------------------------------
    # the network's view: rows x columns

    @property
    def n_cols(self) -> int:
        """The network's columns: items (user-based) or users (item-based)."""
        return len(self.column_ids)

    @property
    def column_ids(self) -> np.ndarray:
        """(n_cols,) the ids of the network's columns: item ids (user-based) or user ids."""
        return self.item_ids if self.config.based == "user" else self.user_ids

    def shard(self, rank: int, world: int) -> Columns:
        """Hold only rank `rank` of `world`'s share of the network's columns, balanced by the
        training matrix's entries (DataError: fewer columns than ranks); returns it."""
        m = self._training_matrix()
        try:
            self.bounds = split_columns(np.bincount(m.indices, minlength=m.shape[1]), world)
        except ValueError as e:
            kind = "items" if self.config.based == "user" else "users"
            raise DataError(f"the network's columns (the {kind}): {e}") from None
        self.columns = Columns(int(self.bounds[rank]), int(self.bounds[rank + 1]), self.n_cols)
        self._device = {}
        return self.columns

    def matrix(self) -> sp.csr_matrix:
        """The fit interactions as the network's rows x columns (all of them)."""
        if self._matrix is None:
            m = self.network_values(self.seen)
            self._matrix = m if self.config.based == "user" else m.T.tocsr()
        return self._matrix

    def network_values(self, m: sp.csr_matrix) -> sp.csr_matrix:
        """Users x items as scored_rows() gives them, with the values the network reads:
        explicit ratings mapped from the fit's scale onto network.NETWORK_SCALE."""
        if self.config.implicit:
            return m
        m = m.copy()
        m.data = to_network_scale(m.data.astype(np.float64), self.rating_scale).astype(np.float32)
        return m

    def inputs(self) -> CSR:
        """The network's rows as it encodes them (without dropout), on the device."""
        if "inputs" not in self._device:
            self._device["inputs"] = self.part(self.matrix())
        return self._device["inputs"]

    def training(self, verbose: bool = False) -> tuple[CSR, np.ndarray]:
        """(the rows the network trains on, on the device; those of them with an entry):
        the fit data's, then (implicit, augment_eps > 0) augmentation's sparser copies of the
        sparse ones."""
        m = self._training_matrix()
        c, extra = self.config, m.shape[0] - self.matrix().shape[0]
        if verbose and c.implicit and c.augment_eps > 0:
            print(f"note: augmentation: {extra} extra training rows (rows with |R|/N < "
                  f"{c.augment_eps:g}, {c.augment_p:g} of their most popular items dropped)")
        return self.part(m), np.flatnonzero(np.diff(m.indptr) > 0)

    def _training_matrix(self) -> sp.csr_matrix:
        if self._training is None:
            c, m = self.config, self.matrix()
            if c.recency_boost:               # recency weighs the rows scored, not those learned
                m = binary(m)
            if c.implicit and c.augment_eps > 0:
                m = sp.vstack([m, sparse_row_copies(m, c.augment_eps, c.augment_p)],
                              format="csr")
            self._training = m
        return self._training

    def column_weights(self) -> np.ndarray | None:
        """(columns held,) float32 implicit weights c_j of the unobserved entries, those of all
        columns normalised over all of them; None (explicit)."""
        c = self.config
        if not c.implicit:
            return None
        weights = column_weights(self.matrix().indices, self.n_cols, c.weighting, c.c0,
                                 c.omega, c.uniform_c)
        return weights[self.columns.lo:self.columns.hi]

    def part(self, m: sp.csr_matrix, columns: Columns | None = None) -> CSR:
        """The columns held here (the network's, or `columns`) of m, on the device."""
        columns = columns or self.columns
        if columns.whole:
            return CSR.from_scipy(self.ops, m)
        return CSR.from_scipy(self.ops, *column_part(m, columns))

    # -----------------------------------------------------------------------------------------
    # users x items: the evaluator's and recommend's view

    @property
    def item_columns(self) -> Columns:
        """The items this process scores, ranks and recommends: a user-based shard's columns
        (its network's columns are the items), or all of them."""
        n = len(self.item_ids)
        return self.columns if self.config.based == "user" else Columns(0, n, n)

    def seen_items(self) -> CSR:
        """The items each user has in the fit data (users x the items held here), on the
        device."""
        if "seen" not in self._device:
            self._device["seen"] = self.part(self.seen, self.item_columns)
        return self._device["seen"]

    @property
    def user_counts(self) -> np.ndarray:
        """(n_users,) each user's number of fit interactions."""
        return np.diff(self.seen.indptr)

    @functools.cached_property
    def item_counts(self) -> np.ndarray:
        """(n_items,) each item's number of fit interactions (counted once: similar_items,
        predict and evaluate ask for some of them a call)."""
        return np.bincount(self.seen.indices, minlength=len(self.item_ids))

    @functools.cached_property
    def shrunk_means(self) -> cold_means.ShrunkMeans:
        """cold_means.shrunk_means of the fit data, computed once: an explicit model's
        recommend and predict read them at each call with a cold entry, and they are a pass
        over every fit rating (a new fit or load has a FitData of its own)."""
        return cold_means.shrunk_means(self.seen)

    def cold_at(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """(n,) bool: whether (users[i], items[i]) is cold, its user or item with no entry
        here (cold_means.cold_at, of the counts held here)."""
        return cold_means.cold_at(self.user_counts, self.item_counts, users, items)

    def popularity(self) -> np.ndarray:
        """(items held,) the POP baseline's scores: each item's fit interactions."""
        lo, hi, _ = self.item_columns
        return metrics.popularity_scores(self.seen)[lo:hi]

    def excluded(self, held: Interactions, exclude=None) -> CSR:
        """The items no held-out item is ranked against (users x the items held here, on the
        device): the fit data's and `exclude`'s; DataError where a held-out item is one of
        them."""
        seen = self.seen if exclude is None else _union(
            self.seen, self.held_out(exclude, "exclude").to_csr("user"))
        clash = held.to_csr("user", implicit=True).multiply(seen).count_nonzero()
        if clash:
            raise DataError(f"{clash} held-out interactions are also in the fit "
                            "data or in exclude: a held-out item must be a candidate")
        return self.part(binary(seen), self.item_columns)

    def ranker(self, held, exclude, cutoffs: tuple[int, ...], scorer: Callable[[], Scorer],
               comm=None) -> Callable[..., dict]:
        """score(per_user=False) -> HR@M, and Recall@M and NDCG@M of each user's held-out set (M
        in cutoffs: evaluate.ranking_report), each `held` item ranked among the items its user
        has no interaction with here nor in `exclude`, by the scores of scorer() (made when
        scoring, inside the backend's session); per_user adds the table of users grouped by
        their number of interactions here. NCAE and every baseline are scored
        by it: one set of candidates, exclusions and ties."""
        held = self.held_out(held, "held-out data")
        exclude_csr = self.excluded(held, exclude)
        counts = self.user_counts

        def score(per_user: bool = False) -> dict:
            with self.ops.session():
                return ranking_report(self.ops, scorer(), exclude_csr, held.users, held.items,
                                      cutoffs, counts if per_user else None, self.item_columns,
                                      comm)
        return score

    def cold_apart(self, held: Interactions) -> tuple[Interactions, Interactions | None]:
        """(the warm entries of `held`, its cold ones or None where it has none): a cold entry's
        user or item has no interaction here, so no model has scores it learnt for it. Every
        model's figures are the warm entries', the cold ones scored apart: one rule for NCAE
        (Model.evaluate) and the baselines' comparison."""
        cold = self.cold_at(held.users, held.items)                         # (nnz,) bool
        return held.subset(~cold), held.subset(cold) if cold.any() else None

    def held_out(self, X, name: str) -> Interactions:
        """X (a users x items scipy matrix or an Interactions) as Interactions of the fit data's
        users and items: a matrix is indexed by them, an Interactions must carry the same id
        maps."""
        data = as_interactions(X, name, empty_ok=True)
        if (data.n_users, data.n_items) != (len(self.user_ids), len(self.item_ids)):
            raise DataError(f"{name} is {data.n_users} users x {data.n_items} items; the model's "
                            f"data is {len(self.user_ids)} x {len(self.item_ids)}")
        if isinstance(X, Interactions):
            if not (np.array_equal(data.user_ids, self.user_ids)
                    and np.array_equal(data.item_ids, self.item_ids)):
                raise DataError(f"{name} has other user or item ids than the model's data "
                                "(parts of one data set share its id maps)")
            return data
        return Interactions(data.users, data.items, data.ratings, None, self.user_ids,
                            self.item_ids, name=name)

    def validation(self, X, use: str) -> Interactions:
        """X as a fit's validation part (held_out), refused where nothing of it is left to
        `use` ('choose the epoch on': what the fit does with it, as a message says): no entry
        (splits' valid_ratio=0 makes such a part), or only cold ones, scored apart (a file of
        one user: every held-out item is new). Its figure would be NaN: the trainer's "lower
        the learning rate" would mislead, and an iteration count be chosen on nothing."""
        valid = self.held_out(X, "validation")
        if not valid.nnz:
            raise DataError(f"validation has no entries: nothing to {use}; leave it out "
                            "(validation=None)")
        if not self.cold_apart(valid)[0].nnz:
            raise DataError(f"validation: all {valid.nnz} entries are of users or items with no "
                            f"training entry (cold, scored apart): none is left to {use}; hold "
                            "out entries of users and items the training data has")
        return valid

    def check_ratings(self, data: Interactions, name: str) -> None:
        """Refuse `data` (users x items of the model's items) where an explicit model reads
        ratings off its rating scale: check_scale's DataError naming the first one's item."""
        if not self.config.implicit:
            check_scale(data, self.rating_scale, name)

    def candidates(self, n: int, items) -> tuple[int, object]:
        """(n capped at the number of candidate items, device (n_items,) bool mask of the
        candidates `items` (ids), or None for every item)."""
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise SettingError("n", f"must be an integer >= 1; got {n!r}")
        if items is None:
            return min(int(n), len(self.item_ids)), None
        mask = np.zeros(len(self.item_ids), bool)
        mask[self.item_lookup(items)] = True
        lo, hi, _ = self.item_columns
        return min(int(n), int(mask.sum())), self.ops.to_device(mask[lo:hi])

    def item_ids_of(self, idx: np.ndarray) -> np.ndarray:
        """Item ids of column indices; padding (-1) as -1 (integer ids) or "" (text ids)."""
        ids = self.item_ids[np.maximum(idx, 0)]
        ids[idx < 0] = "" if ids.dtype.kind == "U" else -1
        return ids


def scored_rows(data: Interactions, config: Config, name: str) -> sp.csr_matrix:
    """Users x items as the network reads them to score items: the ratings (explicit), ones
    (implicit), or with recency_boost each user's recency weights (recency.py; DataError where
    data, named `name`, has no timestamps)."""
    if config.recency_boost:
        w = recency.weights(data, config.recency_boost, config.recency_halflife, name)
        return replace(data, ratings=w).to_csr("user")
    return data.to_csr("user", implicit=config.implicit)


def new_rows(new: Interactions, config: Config, times) -> sp.csr_matrix:
    """scored_rows() of new users (recommend_new's X_new): with recency_boost, weighted by
    `times`, a matrix of X_new's shape holding each interaction's time at its place (any numbers
    that grow with time, e.g. seconds); DataError where such a model is given none."""
    if config.recency_boost and times is None:
        raise DataError("the model scores from rows weighted by recency (recency_boost): "
                        "give times=, each interaction's time at its place in X_new")
    if times is not None:
        new = replace(new, timestamps=_times_at(times, new))
    return scored_rows(new, config, "X_new")


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


def check_scale(data: Interactions, scale: tuple[float, float], name: str) -> None:
    """DataError where a rating of `data` is off `scale`, naming the first one's value and item
    id. A stored 0 off the scale is a sparse matrix's zero, taken for a rating of 0."""
    outside = (data.ratings < scale[0]) | (data.ratings > scale[1])                # (nnz,)
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        zero = (" (a stored 0 is read as a rating of 0: remove stored zeros with "
                "X.eliminate_zeros())") if data.ratings[k] == 0 else ""
        raise DataError(f"{name}: {int(outside.sum())} ratings outside the rating scale "
                        f"{scale[0]:g} to {scale[1]:g}, e.g. {data.ratings[k]:g} of item "
                        f"{shown_id(data.item_ids[data.items[k]])}{zero}")


def as_interactions(X, name: str, empty_ok: bool = False) -> Interactions:
    """X, a users x items scipy.sparse matrix or an Interactions, as Interactions checked: its
    entries (check_entries: each pair once, of indices among its ids) and values (no NaN,
    infinite or negative ones)."""
    if isinstance(X, Interactions):
        check_entries(X, name)                # from_matrix checks a matrix's
        data = X
    else:
        data = from_matrix(X, name)
    if data.nnz == 0 and not empty_ok:
        raise DataError(f"{name} has no interactions")
    return data


def binary(m: sp.csr_matrix) -> sp.csr_matrix:
    """A copy of m with 1 at each stored entry."""
    m = m.tocsr(copy=True)
    m.data[:] = 1
    return m


def _union(a: sp.csr_matrix, b: sp.csr_matrix) -> sp.csr_matrix:
    return binary(binary(a) + binary(b))


def _read_only(ids: np.ndarray) -> np.ndarray:
    """A read-only copy of `ids`."""
    ids = np.array(ids)
    ids.flags.writeable = False
    return ids


def _storable(ids: np.ndarray) -> np.ndarray:
    """Ids as an array numpy saves without pickle: numbers, or text."""
    return ids.astype(str) if ids.dtype == object else ids
