"""The baselines as models of the package's contract (ncae_cuda/model/base.py): fit, refit,
evaluate, recommend, save and load (ncae_cuda.load_model) as NCAE, on the maths of models.py
and neighbours.py (the module docstring of models.py has each model's).

    from ncae_cuda import make_model
    model = make_model({"model": "ease", "l2": 200.0}).fit(split.train, validation=split.valid)
    model.evaluate(split.test, exclude=split.valid)
    model.save("ease.npz")                  # python -m ncae_cuda.recommend ease.npz --users 1

Every baseline scores implicit feedback, users x items, on the CPU (iALS and BPR on the GPU
where the `implicit` build has CUDA and the model's device is the GPU); the top-n and the
evaluator run on the model's device. A model file holds the settings, the fit interactions
(seen items are filtered by them; EASE's, item-kNN's and RP3beta's scores are a user's row of
them times the weights) and what the fit solved, as the model scores with it, so a loaded
model scores bit for bit as the fitted one:

- EASE: its solution in the smaller of the user and item spaces (models.EaseSolution): with
  fewer items than users B, items x items float64; otherwise K⁻¹X, users x items float64, and
  diag A (items,), so that a data set of 17,632 items and fewer users stores no 2.5 GB B.
- item-kNN, RP3beta: the sparse item-item weights, k entries an item.
- iALS, BPR: the user and item factors (float32), and the iteration count chosen on
  validation.
- POP: nothing beyond the fit interactions, whose counts are its scores.

recommend_new folds a new user in where the model does so naturally: EASE, item-kNN and RP3beta
score the new row times their weights, POP scores everyone alike, iALS solves the new user's
factors against the item factors (implicit's recalculate_user). BPR has no such step
(Unsupported). similar_items: the cosine of the item factors (iALS, BPR), item-kNN's
similarities. Every baseline but POP scores a user (an item) from their interactions alone, so
a user (an item) with none is answered no items (Model.ranks_without_history).
"""
from __future__ import annotations

import abc
import math
import numbers
import time

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ..data.interactions import Interactions
from ..model.base import Model, check_callback, cosine_of
from ..model.config import Config, SettingError
from ..model.fitdata import FitData, as_interactions, binary, new_rows
from ..ops import as_backend
from . import neighbours
from .models import (BASELINES, RECENCY, EaseSolution, bpr_model, ease, factors, fit_factors,
                     ials_model, implicit_has_gpu)

RECENCY_DEFAULTS = {name: values[0] for name, values in RECENCY.items()}


class BaselineModel(Model):
    """A baseline of the contract: its settings checked, its fit data, its scorer on the host.

    Parameters
    ----------
    device : str or ops backend
        Where the top-n and the evaluator run: 'auto', 'cpu', 'gpu', or an ops backend.
    cutoffs : tuple of int, optional
        The M of the HR@M, Recall@M and NDCG@M evaluate reports, and NDCG at the last chooses
        iALS's and BPR's iteration count (default: NCAE's); an evaluation's choice, not a
        setting: a model file keeps none.
    **settings
        The model's settings (`defaults` names them, with their defaults).

    Raises
    ------
    SettingError
        A setting the model does not have, or a value of the wrong kind or out of range.
    """

    defaults: dict = {}                  # each setting and its default
    ranks_without_history = False        # its scores of a user come from their interactions
    validation_use = "score"             # (best_validation's figures) it chooses nothing on it
    step = None                          # ...nor counts anything (iALS, BPR: FactorModel)

    def __init__(self, device="auto", cutoffs: tuple[int, ...] | None = None, **settings):
        unknown = sorted(set(settings) - set(self.defaults))
        if unknown:
            raise SettingError(unknown[0], f"is not a setting of {self.title} (its settings: "
                                           f"{', '.join(self.defaults) or 'none'})")
        self.values = {name: _checked(name, settings.get(name, default), default)
                       for name, default in self.defaults.items()}
        self.ops = as_backend(device)
        self.config = Config(feedback="implicit", **self._scoring(),
                             **({} if cutoffs is None else {"cutoffs": cutoffs})).resolved()
        self.data, self.best_validation, self._arrays = None, None, {}
        self.history, self.still_improving = [], False     # (the iterations' records)

    @property
    def title(self) -> str:
        return BASELINES[self.name].name

    def _scoring(self) -> dict:
        """The Config settings of the rows the model scores: the recency weights of those that
        take them (EASE, item-kNN, RP3beta)."""
        return {k: v for k, v in self.values.items() if k in RECENCY}

    def __repr__(self) -> str:
        settings = "".join(f"{k}={v!r}, " for k, v in self.values.items())
        return f"{type(self).__name__}({settings}device={self.ops.name!r})"

    @property
    def settings(self) -> dict:
        return {"model": self.name, **self.values}

    def fit(self, X, validation=None, callback=None) -> BaselineModel:
        """Fit on X, a users x items scipy.sparse matrix or Interactions (every stored entry an
        interaction); with `validation` (of the same ids), its figures (best_validation) and,
        for iALS and BPR, the iteration count chosen on them, each iteration's figures heard
        by callback(model, {"epoch": iteration, "valid": figures}) as NCAE's callback hears
        an epoch's (tune's pruner: what it raises ends the fit, the model left as it was);
        a validation of no entries, or of cold ones alone, is refused (FitData.validation).
        Another model's fit arguments (NCAE's epochs, verbose, ...) are refused, a
        SettingError naming the first (Model's arguments_checked). Returns the model."""
        check_callback(callback)
        data = FitData.of(as_interactions(X, "X"), self.config, self.ops)
        valid = None if validation is None else data.validation(validation, self.validation_use)
        with self._as_it_was_unless_fitted():
            self.data, self.history = data, []
            last = [time.perf_counter()]

            def heard(model: BaselineModel, record: dict) -> None:
                now = time.perf_counter()
                self.history.append({**record, "seconds": now - last[0]})
                last[0] = now
                if callback is not None:
                    callback(model, record)
            self._take(self._solve(binary(data.seen), valid, heard))
            self.best_validation = None if valid is None else self.evaluate(valid)
        return self

    def _not_an_argument(self, name: str, method: str, taken: list[str]) -> str:
        """Model's, and for NCAE's epochs given iALS or BPR, where their count is."""
        counted = ("; its iterations are its setting 'iterations'"
                   if name == "epochs" and "iterations" in self.defaults else "")
        return super()._not_an_argument(name, method, taken) + counted

    @property
    def best_epoch(self) -> int | None:
        """What the fit chose on validation: None for a model solved at once."""
        return None

    def refit(self, X, **fitting) -> BaselineModel:
        """A new model of these settings (iALS's and BPR's iterations those chosen on
        validation) fit on X; NotFitted before a fit, which has chosen nothing yet."""
        self._check_fitted()
        return type(self)(device=self.ops, cutoffs=self.config.cutoffs,
                          **self._chosen()).fit(X, **fitting)

    def _chosen(self) -> dict:
        return self.values

    @abc.abstractmethod
    def _solve(self, X: sp.csr_matrix, valid: Interactions | None, callback) -> dict:
        """The arrays of the fit of X (users x items, float32 ones), which _take uses; a model
        that iterates tells callback each iteration's validation figures (fit's)."""

    def _take(self, arrays: dict) -> None:
        """Score with `arrays` (of _solve, or of a model file)."""
        self._arrays = arrays

    @abc.abstractmethod
    def _scores(self, users: np.ndarray) -> np.ndarray:
        """(B, n_items) the scores of users (indices of the fit data), on the host."""

    def _scorer(self):
        return lambda users: self._on_device(self._scores(users))

    def _on_device(self, scores: np.ndarray):
        return self.ops.to_device(np.ascontiguousarray(scores, np.float32))

    def contents(self) -> tuple[dict, dict]:
        # the validation figures too, as NCAE's file keeps them (its history's)
        return ({"best_validation": self.best_validation},
                {**self.data.arrays(), **self._arrays})

    def restore(self, meta: dict, arrays: dict) -> None:
        self.best_validation = meta.get("best_validation")      # (None: a file before them)
        self.data = FitData.from_arrays(self.config, self.ops, arrays, None)
        self._take({k: v for k, v in arrays.items() if k not in self.data.arrays()})


def _checked(name: str, value, default):
    """`value` of setting `name` as its default's kind: an integer >= 1 (a seed >= 0), or a
    finite number >= 0; SettingError where it is not."""
    if isinstance(default, int):
        least = 0 if name == "seed" else 1
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            raise SettingError(name, f"must be an integer >= {least}; got {value!r}")
        return int(value)
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or value < 0):
        raise SettingError(name, f"must be a number >= 0; got {value!r}")
    return float(value)


class RowModel(BaselineModel):
    """A baseline whose scores of a user are a function of their row of interactions alone: a
    new user folds in as a new row."""

    @abc.abstractmethod
    def _row_scores(self, rows: sp.csr_matrix) -> np.ndarray:
        """(B, n_items) the scores of users of these rows (B, n_items), on the host."""

    def _scores(self, users: np.ndarray) -> np.ndarray:
        return self._row_scores(self.data.seen[users])

    def _new_user_scorer(self, new: Interactions, times):
        rows = new_rows(new, self.config, times)                            # (new users, items)
        return lambda: lambda users: self._on_device(self._row_scores(rows[users]))


class EASE(RowModel):
    """EASE (Steck 2019): item-item weights in closed form; with recency_boost > 0 a user's
    row that multiplies them holds their recency weights (the model file stores the solution
    in the smaller space: the module's docstring)."""

    name = "ease"
    defaults = {"l2": 200.0, **RECENCY_DEFAULTS}

    def _solve(self, X, valid, callback) -> dict:
        return ease(X, self.values["l2"]).arrays()

    def _take(self, arrays: dict) -> None:
        super()._take(arrays)
        self._solution = EaseSolution(binary(self.data.seen), arrays)

    def _row_scores(self, rows):
        return self._solution(rows)


class POP(RowModel):
    """Every item scored by its number of fit interactions, for every user alike."""

    name = "pop"
    ranks_without_history = True

    def _solve(self, X, valid, callback) -> dict:
        return {}

    def _take(self, arrays: dict) -> None:
        super()._take(arrays)
        self._counts = self.data.popularity()                               # (n_items,)

    def _row_scores(self, rows):
        return np.broadcast_to(self._counts, (rows.shape[0], len(self._counts)))


class NeighbourModel(RowModel):
    """A user's scores: their row (ones, or with recency_boost > 0 their recency weights)
    times sparse item-item weights W (items, items), fit on ones, stored as `weights_*` csr
    arrays."""

    def _take(self, arrays: dict) -> None:
        super()._take(arrays)
        self._weights = sp.csr_matrix((arrays["weights_data"], arrays["weights_indices"],
                                       arrays["weights_indptr"]),
                                      shape=(len(self.item_ids),) * 2, dtype=np.float32)

    @staticmethod
    def _stored(W: sp.csr_matrix) -> dict:
        W = sp.csr_matrix(W)
        return {"weights_data": W.data, "weights_indices": W.indices,
                "weights_indptr": W.indptr}

    def _row_scores(self, rows):
        return (sp.csr_matrix(rows, dtype=np.float32) @ self._weights).toarray()


class ItemKNN(NeighbourModel):
    """item-kNN, cosine with shrinkage: each item's k most similar items (neighbours.cosine);
    similar_items gives them."""

    name = "item-knn"
    defaults = {"k": 100, "shrink": 10.0, **RECENCY_DEFAULTS}

    def _solve(self, X, valid, callback) -> dict:
        S = neighbours.cosine(X, self.values["shrink"], self.values["k"])   # (items, items)
        return self._stored(S.T)

    def similar_items(self, items, n: int = 10):
        """The n items of the largest cosine similarity with shrinkage to each item, itself
        left out, among its k neighbours (the others at 0)."""
        return self._most_similar(items, n, lambda: lambda chunk: self._on_device(
            self._weights[:, chunk].T.toarray()))


class RP3beta(NeighbourModel):
    """RP3beta: a popularity-penalised two-step random walk item -> user -> item, each row's
    k largest weights kept (neighbours.rp3beta)."""

    name = "rp3beta"
    defaults = {"alpha": 1.0, "beta": 0.6, "k": 100, **RECENCY_DEFAULTS}

    def _solve(self, X, valid, callback) -> dict:
        v = self.values
        return self._stored(neighbours.rp3beta(X, v["alpha"], v["beta"], v["k"]))


class FactorModel(BaselineModel):
    """A matrix factorisation of the `implicit` library: scores u·v; fit with validation, the
    iteration count of the best validation figure (NDCG at the last cutoff) is kept, its
    factors the model's."""

    best_iteration: int | None = None     # before a fit: nothing chosen yet
    step = "iteration"
    validation_use = "choose the iteration count on"

    @abc.abstractmethod
    def _unfit(self, iterations: int, gpu: bool):
        """The `implicit` model of these settings, unfit."""

    def _solve(self, X, valid, callback) -> dict:
        iterations = self.values["iterations"]
        best = {}
        metric, _ = self.config.selection_metric
        score = None if valid is None else self.evaluator(valid)

        def check(point: dict, scores) -> None:
            users, items = factors(model)
            if score is None:
                best.update(arrays={"user_factors": users, "item_factors": items},
                            iteration=point["iterations"])
                return
            self._take({"user_factors": users, "item_factors": items})
            figures = score()
            if not best or figures[metric] > best["figure"]:
                best.update(figure=figures[metric], iteration=point["iterations"],
                            arrays=self._arrays)
            if callback is not None:
                callback(self, {"epoch": point["iterations"], "valid": figures})
        points = ([{"iterations": i + 1} for i in range(iterations)] if valid is not None
                  else [{"iterations": iterations}])
        with threadpool_limits(1, "blas"):      # implicit's advice: its own threads
            model = self._unfit(iterations, self.ops.name == "gpu" and implicit_has_gpu())
            fit_factors(model, X, points, check)
        self.best_iteration = best["iteration"]
        return best["arrays"]

    @property
    def best_epoch(self) -> int | None:
        """The iteration count of the best validation figure (the count run, without one;
        None before a fit)."""
        return self.best_iteration

    def _chosen(self) -> dict:
        return {**self.values, "iterations": self.best_iteration}

    def _take(self, arrays: dict) -> None:
        super()._take(arrays)
        self._users, self._items = arrays["user_factors"], arrays["item_factors"]

    def contents(self) -> tuple[dict, dict]:
        meta, arrays = super().contents()
        return {**meta, "best_iteration": self.best_iteration}, arrays

    def restore(self, meta: dict, arrays: dict) -> None:
        super().restore(meta, arrays)
        self.best_iteration = int(meta["best_iteration"])

    def _scores(self, users):
        return self._users[users] @ self._items.T                          # (B, n_items)

    def similar_items(self, items, n: int = 10):
        """The n items of the largest cosine of their item factors to each item, itself left
        out."""
        return self._most_similar(items, n, lambda: cosine_of(
            self, self.ops.to_device(self._items)))


class IALS(FactorModel):
    """iALS (Hu, Koren, Volinsky 2008), the `implicit` library's; recommend_new solves a new
    user's factors against the item factors (implicit's recalculate_user)."""

    name = "ials"
    defaults = {"factors": 128, "regularization": 10.0, "alpha": 1.0, "iterations": 20,
                "seed": 0}

    def _unfit(self, iterations: int, gpu: bool):
        return ials_model(self.values, iterations, self.values["seed"], gpu)

    def _new_user_scorer(self, new: Interactions, times):
        rows = new.to_csr("user", implicit=True)                          # (new users, items)
        with threadpool_limits(1, "blas"):
            solver = self._unfit(self.values["iterations"], gpu=False)
            solver.item_factors = self._items
            users = solver.recalculate_user(np.arange(rows.shape[0]), rows)  # (new, factors)
        return lambda: lambda chunk: self._on_device(users[chunk] @ self._items.T)


class BPR(FactorModel):
    """BPR (Rendle et al. 2009), the `implicit` library's, on one thread."""

    name = "bpr"
    defaults = {"factors": 128, "learning_rate": 0.01, "regularization": 0.01,
                "iterations": 100, "seed": 0}

    def _unfit(self, iterations: int, gpu: bool):
        return bpr_model(self.values, iterations, self.values["seed"], gpu)


MODELS = {cls.name: cls for cls in (EASE, IALS, BPR, POP, ItemKNN, RP3beta)}
