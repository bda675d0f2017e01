"""NCAE as a Python object: fit, predict, recommend, fold in new users, similar items, save, load.

    from ncae_cuda import NCAE, datasets
    data = datasets.load("synthetic-tiny")                # or any users x items scipy.sparse
    model = NCAE(feedback="implicit", hidden=(32,)).fit(data, epochs=5)
    items, scores = model.recommend(data.user_ids[:3], n=10)
    model.save("model.npz")
    model = NCAE.load("model.npz", device="cpu")

The data is users x items: users are who `recommend` ranks for, items what it ranks. `based`
chooses which of the two the autoencoder encodes (its rows); the other are its columns. Ids are
the data set's own (Interactions.user_ids / item_ids) or, for a scipy matrix, its row and
column numbers. A saved model holds its settings, id maps, parameters and the interactions it
was fit on (users are encoded from them, and seen items filtered by them), so it recommends
without the training data at hand.
"""
from __future__ import annotations

import numbers
from dataclasses import asdict

import numpy as np
import scipy.sparse as sp

from . import __version__, metrics, modelfile
from .augment import column_weights, sparse_row_copies
from .config import Config
from .data import DataError, Interactions, check_values, from_matrix, lookup_ids
from .evaluate import (constant_scorer, excluded_entries, model_scorer, predict_ratings,
                       ranking_report, rating_report, row_codes, top_m)
from .layout import AdamConfig, NCAELayout
from .loop import trainable_rows
from .model import Network, Objective
from .ops import get_backend
from .ops.common import CSR
from .plan import Planner, Schedule
from .session import CHECKPOINT_EVERY, Checkpoint, Session, fingerprint


class OutOfMemory(RuntimeError):
    """The device ran out of memory: the message names what needed it and what lowers it."""


class NCAE:
    """The Neural Collaborative Autoencoder recommender. Settings: see ncae_cuda.config.Config
    (the same names and defaults as the flags of python -m ncae_cuda.train); device is 'auto'
    (the GPU when there is one), 'cpu', 'gpu', or an ops backend (ncae_cuda.ops.get_backend)."""

    def __init__(self, device="auto", **settings):
        self.config = Config(**settings).resolved()
        self.device = device
        self.ops = get_backend(device) if isinstance(device, str) else device
        self.user_ids = self.item_ids = None          # (n_users,), (n_items,) source ids
        self.rating_scale = None                      # explicit: (r_min, r_max)
        self.history, self.best_epoch = [], 0
        self._net = None
        self._seen = None                             # (n_users, n_items) scipy CSR: fit data
        self._device_csr = {}                         # device copies, built on first use
        self._best = None                             # the best validation params, on device

    def __repr__(self) -> str:
        defaults = asdict(Config(feedback=self.config.feedback).resolved())
        changed = {k: v for k, v in asdict(self.config).items() if v != defaults[k]}
        settings = "".join(f", {k}={v!r}" for k, v in changed.items())
        return f"NCAE(feedback={self.config.feedback!r}{settings}, device={self.ops.name!r})"

    # -----------------------------------------------------------------------------------------
    # training

    def fit(self, X, validation=None, epochs: int | None = None, callback=None,
            checkpoint=None, resume: bool = False, checkpoint_every: float = CHECKPOINT_EVERY,
            verbose: bool = True) -> NCAE:
        """Train on X: a users x items scipy.sparse matrix or an Interactions (ncae_cuda.datasets,
        ncae_cuda.splits). Returns the model.

        validation: held-out interactions of the same users and items, scored after every
            epoch (RMSE, or NDCG at the last cutoff); training stops after `patience` epochs
            without a better score, and the model keeps its best epoch's parameters.
        epochs: most epochs (default: the model's `epochs` setting; 0: pre-training only).
        callback(model, record): after every epoch, with the epoch's record (loss, seconds,
            validation figures) before it is logged; what it adds to the record is kept in
            model.history.
        checkpoint: a file to save the fit in (after pre-training, at the end of an epoch
            once checkpoint_every seconds have passed since the last save, and after the last
            epoch); resume=True continues the fit saved there instead of starting over, and ends
            exactly where an uninterrupted fit does. It must be this fit's: the same settings,
            epochs, data and backend; another's is refused, naming what differs.
        checkpoint_every: seconds between checkpoints, the most training a kill can cost
            (0: after every epoch).
        verbose: print one line per epoch.
        """
        c = self.config
        data = self._as_interactions(X, "X")
        valid = (None if validation is None
                 else self._as_interactions(validation, "validation",
                                            (data.user_ids, data.item_ids)))
        epochs = c.epochs if epochs is None else epochs
        if not isinstance(epochs, numbers.Integral) or epochs < 0:
            raise ValueError(f"epochs must be an integer >= 0 (0: pre-training only); got "
                             f"{epochs!r}")
        if isinstance(checkpoint_every, bool) or not (isinstance(checkpoint_every, numbers.Real)
                                                      and checkpoint_every >= 0):
            raise ValueError(f"checkpoint_every must be a number of seconds >= 0 (0: after every "
                             f"epoch); got {checkpoint_every!r}")
        self._adopt(data)
        with self.ops.session():
            try:
                self._net = self._new_network(data)
                csr = self._training_matrix(data, verbose)
                planner = Planner(csr, trainable_rows(csr),
                                  Schedule(c.seed, c.batch_size, c.dropout))
                self._net.prepare(planner.geometry)
                identity = {"settings": {**c.as_dict(), "epochs": int(epochs)},
                            "data": fingerprint(*_entries(data), *_entries(valid)),
                            "backend": self.ops.name}
                session = Session(
                    self._net, csr, planner, AdamConfig(c.lr, weight_decay=c.weight_decay,
                                                         lr_decay=c.lr_decay),
                    c.pretrain, c.pretrain_epochs, c.patience, self.selection_metric,
                    score=None if valid is None else self.evaluator(valid),
                    on_epoch=None if callback is None else lambda record: callback(self, record),
                    checkpoint=None if checkpoint is None else Checkpoint(checkpoint, identity),
                    checkpoint_every=checkpoint_every, verbose=verbose)
                progress = session.run(int(epochs), resume)
            except MemoryError as e:      # CuPy's OutOfMemoryError is a MemoryError too
                raise OutOfMemory(self._out_of_memory(e)) from None
        self.history, self.best_epoch = progress.history, progress.best_epoch
        return self

    @property
    def selection_metric(self) -> tuple[str, bool]:
        """(name, higher is better) of the validation figure early stopping follows."""
        return (f"ndcg@{self.config.cutoffs[-1]}", True) if self.config.implicit else ("rmse",
                                                                                      False)

    def _training_matrix(self, data: Interactions, verbose: bool) -> CSR:
        """The network's rows x columns as it trains on them: with augmentation's sparser
        copies of sparse rows after the real ones (implicit, augment_eps > 0)."""
        c = self.config
        m = data.to_csr(c.based, implicit=c.implicit)
        if c.implicit and c.augment_eps > 0:
            extra = sparse_row_copies(m, c.augment_eps, c.augment_p)
            if verbose:
                print(f"note: augmentation: {extra.shape[0]} extra training rows (rows with "
                      f"|R|/N < {c.augment_eps:g}, {c.augment_p:g} of their most popular "
                      "items dropped)")
            m = sp.vstack([m, extra], format="csr")
        return CSR.from_scipy(self.ops, m)

    def _new_network(self, data: Interactions) -> Network:
        c = self.config
        layout = NCAELayout(self._n_cols, c.hidden)
        params = layout.xavier_init(np.random.default_rng(c.seed))
        weights = None
        if c.implicit:
            weights = column_weights(data.items if c.based == "user" else data.users,
                                     self._n_cols, c.weighting, c.c0, c.omega, c.uniform_c)
        return Network(layout, self.ops, self._objective(), params, weights)

    def _objective(self) -> Objective:
        c = self.config
        if c.implicit:
            return Objective.implicit()
        return Objective.explicit(*self.rating_scale, c.alpha, c.beta,
                                  identity=c.output == "identity", row_norm=c.row_norm)

    def _out_of_memory(self, error: MemoryError) -> str:
        """What needed the memory, with the sizes, and the setting that lowers each."""
        c, mib = self.config, 4 / 2**20                                 # float32 MiB
        size = NCAELayout(self._n_cols, c.hidden).size
        lines = [f"out of memory on the {self.ops.name} backend ({error})",
                 f"  parameters, gradients and Adam's m, v: 4 x {size:,} floats = "
                 f"{4 * size * mib:,.0f} MiB (lower --hidden)"]
        if c.implicit:
            B, N = c.batch_size, self._n_cols
            lines.append(f"  dense output of a batch: about 3 x {B} x {N:,} floats = "
                         f"{3 * B * N * mib:,.0f} MiB (lower --batch-size)")
        if self.ops.name != "cpu":
            lines.append("  or train with --device cpu")
        return "\n".join(lines)

    # -----------------------------------------------------------------------------------------
    # scoring held-out data

    def evaluator(self, held, exclude=None, popularity: bool = False):
        """score(per_user=False) -> the figures of `held` (interactions held out from the fit
        data, the same users and items): RMSE of the predicted ratings (explicit), or HR@M and
        NDCG@M of each held-out item ranked among the items the user has no interaction with in
        the fit data nor in `exclude` (implicit). per_user adds the table of users grouped by
        their number of fit interactions. Device arrays are built once, here.

        popularity: rank by the POP baseline instead, every item scored by its number of
        interactions in the fit data, on the same candidates (implicit only)."""
        self._check_fitted()
        if popularity and not self.config.implicit:
            raise ValueError("the POP baseline ranks items: it is for implicit feedback")
        c, ops = self.config, self.ops
        ids = (self.user_ids, self.item_ids)
        held = self._as_interactions(held, "held-out data", ids)
        counts = np.diff(self._seen.indptr)                             # (n_users,)
        if c.implicit:
            seen = self._seen if exclude is None else _union(
                self._seen, self._as_interactions(exclude, "exclude", ids).to_csr("user"))
            clash = np.asarray(seen[held.users, held.items]).ravel() != 0
            if clash.any():
                raise DataError(f"{int(clash.sum())} held-out interactions are also in the fit "
                                "data or in exclude: a held-out item must be a candidate")
            exclude_csr = CSR.from_scipy(ops, _binary(seen))
            pop = metrics.popularity_scores(self._seen) if popularity else None

            def score(per_user: bool = False) -> dict:
                with ops.session():
                    scorer = self._user_scorer() if pop is None else constant_scorer(ops, pop)
                    return ranking_report(ops, scorer, exclude_csr, held.users, held.items,
                                          c.cutoffs, counts if per_user else None)
            return score
        if held.ratings is None:
            raise DataError("held-out data for an explicit model needs ratings")
        rows, cols = (held.users, held.items) if c.based == "user" else (held.items, held.users)

        def score(per_user: bool = False) -> dict:
            with ops.session():
                yhat = predict_ratings(self._net, self._csr("inputs"), rows, cols)
            return rating_report(yhat, held.ratings, held.users, counts if per_user else None)
        return score

    def evaluate(self, held, exclude=None, per_user: bool = False,
                 popularity: bool = False) -> dict:
        """The figures of `held` once: see evaluator()."""
        return self.evaluator(held, exclude, popularity)(per_user)

    # -----------------------------------------------------------------------------------------
    # using the model

    def predict(self, users, items) -> np.ndarray:
        """(n,) float32 output at each (users[i], items[i]): the predicted rating (explicit) or
        the preference tanh(out) in (-1, 1) (implicit); users encoded from the fit data."""
        self._check_fitted()
        u = lookup_ids(self.user_ids, users, "user")
        i = lookup_ids(self.item_ids, items, "item")
        if len(u) != len(i):
            raise ValueError(f"predict needs as many users as items; got {len(u)}, {len(i)}")
        rows, cols = (u, i) if self.config.based == "user" else (i, u)
        with self.ops.session():
            return predict_ratings(self._net, self._csr("inputs"), rows, cols)

    def recommend(self, users, n: int = 10, filter_seen: bool = True, items=None
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The n best items of each user, best first: (item ids, scores), each (len(users), n).

        filter_seen leaves out the items a user interacted with in the fit data; items (ids)
        restricts the candidates. Scores are predicted ratings (explicit) or the output logits
        (implicit: the order of tanh(out) without float32 saturation ties). Ties go to the
        item earlier in item_ids. n is capped at the number of candidate items; a user with
        fewer candidates ends in score -inf, id -1 (integer ids) or "" (text ids).
        """
        self._check_fitted()
        u = lookup_ids(self.user_ids, users, "user")
        n, candidates = self._candidates(n, items)
        excluded = excluded_entries(self.ops, self._csr("seen")) if filter_seen else None
        with self.ops.session():
            idx, vals = top_m(self.ops, self._user_scorer(), u, n, excluded, candidates)
        return self._item_results(idx, vals, ratings=not self.config.implicit)

    def recommend_new(self, X_new, n: int = 10, filter_seen: bool = True, items=None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """recommend() for users the model was not fit on, folded in from their interactions
        without retraining: X_new is a scipy.sparse (new users x items) matrix whose column j
        is item_ids[j]. The autoencoder encodes any row, so this needs a user-based model; an
        item-based model's users are its columns, each with an embedding learned in training.
        """
        self._check_fitted()
        if self.config.based != "user":
            raise ValueError("recommend_new folds new users in as new rows of the autoencoder: "
                             "it needs a user-based model (based='user'); an item-based model "
                             "must be refit to learn a new user's embedding")
        new = from_matrix(X_new, "X_new")
        if new.n_items != len(self.item_ids):
            raise DataError(f"X_new has {new.n_items} columns; the model has "
                            f"{len(self.item_ids)} items (column j is item_ids[j])")
        csr = CSR.from_scipy(self.ops, new.to_csr("user", implicit=self.config.implicit))
        n, candidates = self._candidates(n, items)
        excluded = excluded_entries(self.ops, csr) if filter_seen else None
        with self.ops.session():
            idx, vals = top_m(self.ops, model_scorer(self._net, csr, "user"),
                              np.arange(new.n_users), n, excluded, candidates)
        return self._item_results(idx, vals, ratings=not self.config.implicit)

    def similar_items(self, items, n: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """The n items most similar to each given item, the item itself left out: (item ids,
        cosine similarities), each (len(items), n). Items are compared by their output
        embedding: the rows of V in a user-based model; in an item-based one (whose V rows are
        users) by their code, the last hidden layer of the item's row."""
        self._check_fitted()
        xp, ops = self.ops.xp, self.ops
        idx = lookup_ids(self.item_ids, items, "item")
        with ops.session():
            emb = (self._net.p["V"] if self.config.based == "user"
                   else row_codes(self._net, self._csr("inputs")))               # (n_items, K)
            norms = xp.sqrt((emb * emb).sum(axis=1, keepdims=True))
            unit = emb / xp.maximum(norms, xp.float32(1e-30))

            def similarity(chunk: np.ndarray):
                return unit[ops.to_device(chunk)] @ unit.T                      # (B, n_items)

            def itself(chunk: np.ndarray) -> tuple:
                return (ops.to_device(np.arange(len(chunk) + 1, dtype=np.int32)),
                        ops.to_device(chunk))
            m = min(self._candidates(n, None)[0], max(len(self.item_ids) - 1, 1))
            found, sims = top_m(ops, similarity, idx, m, itself)
        return self._item_results(found, sims, ratings=False)

    def _candidates(self, n: int, items) -> tuple[int, object]:
        """(n capped at the number of candidates, device (n_items,) bool mask or None)."""
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be an integer >= 1; got {n!r}")
        if items is None:
            return min(int(n), len(self.item_ids)), None
        mask = np.zeros(len(self.item_ids), bool)
        mask[lookup_ids(self.item_ids, items, "item")] = True
        return min(int(n), int(mask.sum())), self.ops.to_device(mask)

    def _item_results(self, idx: np.ndarray, vals: np.ndarray, ratings: bool):
        """Column indices -> item ids (padding -1 or ""), logits -> ratings where asked."""
        ids = self.item_ids[np.maximum(idx, 0)]
        ids[idx < 0] = "" if ids.dtype.kind == "U" else -1
        if ratings:
            real = idx >= 0
            vals[real] = self._net.objective.rating(vals[real])
        return ids, vals

    def _user_scorer(self):
        return model_scorer(self._net, self._csr("inputs"), self.config.based)

    # -----------------------------------------------------------------------------------------
    # saving and loading

    def save(self, path) -> None:
        """One file with settings, id maps, parameters and the fit interactions (no pickle)."""
        self._check_fitted()
        net = self._net
        meta = {"ncae_cuda": __version__, "config": self.config.as_dict(),
                "rating_scale": self.rating_scale and list(self.rating_scale),
                "history": self.history, "best_epoch": self.best_epoch, "steps": net.steps}
        arrays = {"params": self.ops.to_host(net.params),
                  "user_ids": self.user_ids, "item_ids": self.item_ids,
                  "seen_indptr": self._seen.indptr, "seen_indices": self._seen.indices,
                  "seen_data": self._seen.data}
        if net.col_weights is not None:
            arrays["col_weights"] = self.ops.to_host(net.col_weights)
        modelfile.write(path, "model", meta, arrays)

    @classmethod
    def load(cls, path, device: str = "auto") -> NCAE:
        """A model saved by save(), on `device` (any: a GPU model loads on the CPU and back)."""
        meta, a = modelfile.read(path, "model")
        try:
            model = cls(device=device, **asdict(Config.from_dict(meta["config"])))
            model.user_ids, model.item_ids = a["user_ids"], a["item_ids"]
            model.rating_scale = meta["rating_scale"] and tuple(meta["rating_scale"])
            model._seen = sp.csr_matrix((a["seen_data"], a["seen_indices"], a["seen_indptr"]),
                                        shape=(len(model.user_ids), len(model.item_ids)))
            model._seen.check_format(full_check=True)   # indices in range, pointers in order
            layout = NCAELayout(model._n_cols, model.config.hidden)
            if a["params"].shape != (layout.size,):
                raise ValueError(f"{a['params'].shape[0]} parameters where the settings need "
                                 f"{layout.size}")
            for side in ("user", "item"):
                ids = a[f"{side}_ids"]
                unique, counts = np.unique(ids, return_counts=True)
                if len(unique) < len(ids):
                    raise ValueError(f"{len(ids) - len(unique)} duplicate {side} ids, e.g. "
                                     f"{unique[counts > 1][0].item()!r}")
            model._net = Network(layout, model.ops, model._objective(), a["params"],
                                 a.get("col_weights"))
            model._net.counter[0] = meta["steps"]
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"{path}: a damaged model file ({type(e).__name__}: {e})") from None
        model.history, model.best_epoch = meta["history"], meta["best_epoch"]
        return model

    # -----------------------------------------------------------------------------------------
    # data

    @property
    def _n_cols(self) -> int:
        return len(self.item_ids if self.config.based == "user" else self.user_ids)

    def _check_fitted(self) -> None:
        if self._net is None:
            raise RuntimeError("the model is not trained: call fit() or NCAE.load() first")

    def _as_interactions(self, X, name: str, ids: tuple | None = None) -> Interactions:
        """X as Interactions; with ids = (user_ids, item_ids), of those ids: a scipy matrix is
        indexed by them, an Interactions must carry the same id maps."""
        if isinstance(X, Interactions):
            data = X
            if data.ratings is not None:          # from_matrix checks a matrix's values
                check_values(name, data.ratings, data.users, data.items)
        else:
            data = from_matrix(X, name)
        if ids is None:
            if data.nnz == 0:
                raise DataError(f"{name} has no interactions")
            return data
        user_ids, item_ids = ids
        if (data.n_users, data.n_items) != (len(user_ids), len(item_ids)):
            raise DataError(f"{name} is {data.n_users} users x {data.n_items} items; the model's "
                            f"data is {len(user_ids)} x {len(item_ids)}")
        if isinstance(X, Interactions):
            if not (np.array_equal(data.user_ids, user_ids)
                    and np.array_equal(data.item_ids, item_ids)):
                raise DataError(f"{name} has other user or item ids than the model's data "
                                "(parts of one data set share its id maps)")
            return data
        return Interactions(data.users, data.items, data.ratings, None, user_ids, item_ids,
                            name=name)

    def _adopt(self, data: Interactions) -> None:
        """Take the fit data's ids, rating scale and interactions."""
        c = self.config
        if not c.implicit:
            if data.ratings is None:
                raise DataError(f"{data.name} has no ratings: use feedback='implicit'")
            declared = c.rating_scale or data.rating_scale
            zeros = int((data.ratings == 0).sum())
            if zeros and (declared is None or declared[0] > 0):
                raise DataError(f"{data.name}: {zeros} stored zeros: a sparse matrix stores only "
                                "the ratings there are, so a stored 0 would be taken for a "
                                "rating of 0. Remove them (X.eliminate_zeros()), or give a "
                                "rating_scale that starts at 0")
            scale = declared or (float(data.ratings.min()), float(data.ratings.max()))
            if not scale[0] < scale[1]:
                raise DataError(f"{data.name}: every rating is {scale[0]}: give rating_scale")
            outside = (data.ratings < scale[0]) | (data.ratings > scale[1])
            if outside.any():
                raise DataError(f"{data.name}: {int(outside.sum())} ratings outside the rating "
                                f"scale {scale}")
            self.rating_scale = tuple(float(r) for r in scale)
        self.user_ids, self.item_ids = _storable(data.user_ids), _storable(data.item_ids)
        self._seen = data.to_csr("user", implicit=c.implicit)
        self._device_csr = {}

    def _csr(self, key: str) -> CSR:
        """'inputs': the fit data as the network's rows x columns; 'seen': users x items."""
        if key not in self._device_csr:
            m = self._seen if key == "seen" or self.config.based == "user" else self._seen.T
            self._device_csr[key] = CSR.from_scipy(self.ops, m.tocsr())
        return self._device_csr[key]


def _entries(part: Interactions | None) -> tuple:
    """What a fit trains or validates on, for its checkpoint's fingerprint."""
    return (None, None, None) if part is None else (part.users, part.items, part.ratings)


def _binary(m: sp.csr_matrix) -> sp.csr_matrix:
    m = m.tocsr(copy=True)
    m.data[:] = 1
    return m


def _union(a: sp.csr_matrix, b: sp.csr_matrix) -> sp.csr_matrix:
    return _binary(_binary(a) + _binary(b))


def _storable(ids: np.ndarray) -> np.ndarray:
    """Ids as an array numpy saves without pickle: numbers, or text."""
    return ids.astype(str) if ids.dtype == object else ids
