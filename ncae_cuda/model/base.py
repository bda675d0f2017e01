"""The contract every model of the package keeps (NCAE, BlendedNCAE and the baselines): fit,
refit, evaluate, recommend, recommend_new and similar_items where the model has them, save, the
fit data's ids and the record of its settings; ncae_cuda.runs.factory makes a model of
settings, or of a file save() wrote.

    model = make_model({"model": "ease", "l2": 200.0}).fit(split.train)
    model.evaluate(split.test, exclude=split.valid)
    items, scores = model.recommend(users, n=10)
    model.save("ease.npz")
    model = load_model("ease.npz")

What every model does alike is here, once: the ids, the top-n of a user with the items of the
fit data left out (evaluate.top_m), the figures of held-out data through the package's one
evaluator (FitData.ranker for implicit feedback; rating_report for explicit). A model supplies
its scorer: users -> (B, n_items) scores on the backend.
"""
from __future__ import annotations

import abc
import contextlib
import difflib
import functools
import inspect
from pathlib import Path

import numpy as np

from .. import __version__
from ..data.interactions import DataError, Interactions, from_matrix
from ..errors import NcaeError
from ..ops import as_backend
from . import modelfile
from .ann import INDEXES, IndexUnavailable, ItemIndex, user_queries
from .config import Config, SettingError
from .evaluate import Scorer, constant_scorer, excluded_entries, top_m


# every public method of a model (a class method such as NCAE.load checked where it is made):
# each refuses a keyword it does not take, an argument past its own by position, one missing or
# given twice, and a flag that is not a bool, by name (entry_points_named), in every model and
# every override of one
ENTRY_POINTS = ("fit", "refit", "partial_fit", "predict", "recommend", "recommend_new",
                "similar_items", "evaluate", "evaluator", "save", "item_index",
                "check_warm_start", "contents", "restore")
FLAG_TYPES = (bool, np.bool_)     # what a flag (an argument annotated bool) takes


class NotFitted(NcaeError, RuntimeError):
    """A query or save of a model not fitted yet: fit it, or load a saved one."""


class Unsupported(NcaeError, ValueError):
    """A query the model does not answer (recommend_new of a model that cannot fold a new user
    in, similar_items of one without item vectors): the message names the model and why."""


def arguments_checked(function):
    """`function` refusing with a SettingError, where Python would raise a TypeError or read a
    value by its truth: more arguments by position than it takes (too_many_by_position), a
    keyword it does not take (naming it, what the function takes, and what it likely meant:
    not_an_argument, a model's method Model._not_an_argument), an argument it needs and was not
    given, one given twice (by position and as a keyword), and a flag (an argument annotated
    bool) given anything but True or False, which would turn filter_seen="no" into filtering;
    a model's method called on its class (EASE.recommend(users)) is told to be called on a
    model. A function of **keywords passes them on, to the one that names them. A method is
    one whose first argument is self, a class method's (checked beneath its classmethod) cls:
    neither is an argument a caller gives."""
    signature = inspect.signature(function)
    parameters = signature.parameters.values()
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    method = named[:1] == ["self"]                  # a model's: refused in its own words
    bound = named[:1] in (["self"], ["cls"])        # (self, cls: no caller gives them)
    taken = named[bound:]
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    needed = [p.name for p in parameters if p.default is p.empty
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    flags = [p.name for p in parameters if p.annotation in ("bool", bool)]
    open_keywords = any(p.kind is p.VAR_KEYWORD for p in parameters)
    open_positions = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    if open_keywords and open_positions and not flags:
        return function
    where = function.__qualname__.replace(".<locals>.", "'s ")    # NCAE.load, a method's score

    def refusal(args: tuple, keywords: dict) -> SettingError:
        """The SettingError saying why Signature.bind refused a call of `args` and
        `keywords`."""
        if method and not (args and isinstance(args[0], Model)):
            # called on the class (EASE.recommend(...)): no model to name the call by
            return SettingError(function.__name__, "is a method of a model: call it on one, "
                                f"model.{function.__name__}(...), not on its class")
        named_as = args[0]._named(function.__name__) if method else where
        if not open_positions and len(args) > len(positional):
            return SettingError(named_as, too_many_by_position(positional[bound:],
                                                               len(args) - bound))
        unknown = [] if open_keywords else [name for name in keywords if name not in taken]
        if unknown:
            name = unknown[0]
            return SettingError(name, args[0]._not_an_argument(name, function.__name__, taken)
                                if method else not_an_argument(where, taken, name))
        by_position = positional[:len(args)]
        twice = [name for name in by_position if name in keywords]
        if twice:
            return SettingError(twice[0], f"is given twice to {named_as}, by position and as "
                                          "a keyword: give it once")
        missing = [name for name in needed if name not in by_position and name not in keywords]
        return SettingError(missing[0], f"is missing: {named_as} needs it (it takes "
                                        f"{listed(taken)})")

    @functools.wraps(function)
    def checked(*args, **keywords):
        try:
            given = signature.bind(*args, **keywords).arguments
        except TypeError:
            raise refusal(args, keywords) from None
        for name in flags:
            if name in given and not isinstance(given[name], FLAG_TYPES):
                raise SettingError(name, f"must be True or False; got {given[name]!r}")
        return function(*args, **keywords)
    return checked


def too_many_by_position(positional: list[str], given: int) -> str:
    """Why `given` arguments by position are refused by a function that takes `positional`
    so (before, Python's TypeError counted a method's self among them)."""
    if not positional:
        return f"takes no arguments; got {given}"
    plural = "s" if len(positional) > 1 else ""
    return (f"takes at most {len(positional)} argument{plural} by position "
            f"({listed(positional)}); got {given}")


def not_an_argument(where: str, taken: list[str], name: str, hint: str = "") -> str:
    """Why keyword `name` of `where` (a function taking `taken`) is refused, and `hint`, or
    else the argument spelt alike it likely meant."""
    if not hint and (close := difflib.get_close_matches(name.lower(), taken, n=1)):
        hint = f"did you mean {close[0]}?"
    return f"is not an argument of {where} (it takes {listed(taken)})" + (hint and f"; {hint}")


def listed(names: list[str]) -> str:
    """'a, b and c'; 'none' of no names (a method of no arguments takes none)."""
    if not names:
        return "none"
    return " and ".join(filter(None, [", ".join(names[:-1]), names[-1]]))


def entry_points_named(cls: type) -> type:
    """`cls` with each entry point it defines (ENTRY_POINTS) refusing a keyword it does not
    take, an argument past its own by position, one missing or given twice, and a flag that is
    not a bool with a SettingError (arguments_checked); what it inherits is checked where it
    is defined, so that the method is the same object there and in every subclass."""
    for name in ENTRY_POINTS:
        method = vars(cls).get(name)
        if method is not None and not hasattr(method, "__wrapped__"):
            setattr(cls, name, arguments_checked(method))
    return cls


@entry_points_named
class Model(abc.ABC):
    """A fitted recommender's contract (see the module's docstring).

    Attributes
    ----------
    name : str
        The model's key in the factory (settings' 'model', a file's record).
    config : Config
        What its fit data and evaluator follow: feedback, based (the network's rows for NCAE;
        users for every baseline), cutoffs, recency weights of the rows scored.
    data : FitData or None
        The fit data: ids, the fit interactions (seen items), the evaluator's matrices; None
        before a fit.
    ops
        The backend the scores, the top-n and the evaluator run on.
    comm
        A column shard's collectives, or None.
    source : pathlib.Path or None
        The file the model was loaded from (an NCAE's: None once fit again, no longer the file's).
    best_epoch : int, dict or None
        What the last fit chose on validation: NCAE's epoch count (a blend's per member),
        iALS's and BPR's iteration count (a fit without validation: the count it ran); None
        for a model solved at once.
    best_validation : dict or None
        The validation figures of that choice (None: fit without validation).
    history : list of dict
        A record per epoch or iteration of the last fit: 'epoch', 'seconds', 'valid', ...
    still_improving : bool
        Whether the fit ran out of epochs with its best among the last few.
    ranks_without_history : bool
        Whether the model ranks items for a user with no interaction (NCAE from its empty row's
        code, POP by popularity); a model that scores a user from their interactions alone has
        nothing to rank them by, and gives them a row of padding, no items. (An item with no
        interaction no model compares: similar_items.)
    """

    name: str
    config: Config
    # what best_epoch counts, as lines name it (iALS: iteration); None: a model fit in one go
    step: str | None = "epoch"
    validation_use = "choose the epoch on"     # what a fit does with validation, as said
    data = None
    comm = None
    source: Path | None = None
    ranks_without_history = True

    def __init_subclass__(cls, **kwargs):
        """A model's own entry points named as Model's are (entry_points_named)."""
        super().__init_subclass__(**kwargs)
        entry_points_named(cls)

    def _not_an_argument(self, name: str, method: str, taken: list[str]) -> str:
        """Why keyword `name` of `method` (which takes `taken`) is refused, and what it likely
        meant: a setting of the model, given where the model is made, or an argument spelt
        alike."""
        hint = (f"{name} is a setting of {self.title}: give it where the model is made"
                if name != "model" and name in self.settings else "")
        return not_an_argument(self._named(method), taken, name, hint)

    def _named(self, method: str) -> str:
        """The model's `method` as a message names it: "EASE's recommend"."""
        return f"{self.title}'s {method}"

    # -----------------------------------------------------------------------------------------
    # what each model supplies

    @abc.abstractmethod
    def fit(self, X, validation=None, **fitting) -> Model:
        """Fit on X (a users x items scipy.sparse matrix or Interactions); `validation`, where
        the model chooses something on it (an epoch or iteration count); returns the model."""

    @abc.abstractmethod
    def refit(self, X, **fitting) -> Model:
        """A new model of the same settings fit on X (training + validation) with what the
        last fit chose on validation (its epoch or iteration count)."""

    @property
    @abc.abstractmethod
    def settings(self) -> dict:
        """The record of the model's settings, JSON-ready: what save() writes and the factory
        (ncae_cuda.runs.factory.make_model) makes the same model of, 'model' naming it."""

    @abc.abstractmethod
    def _scorer(self) -> Scorer:
        """(B,) user indices -> device (B, items held) scores of every item (higher first),
        made inside the backend's session."""

    @abc.abstractmethod
    def contents(self) -> tuple[dict, dict]:
        """(meta, arrays) of the fitted state save() writes, beside the settings."""

    @abc.abstractmethod
    def restore(self, meta: dict, arrays: dict) -> None:
        """Take the fitted state of contents()' (meta, arrays); KeyError, ValueError or
        TypeError where they do not fit together or the settings."""

    # -----------------------------------------------------------------------------------------
    # the queries, the same for every model

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
            (item_index(); NCAE's, the [ann] extra, CPU only), searched n deep, the user's seen
            items left out by the search itself; a user for whom it finds fewer than n, and
            every user where `items` is given (no index built for them), gets the exact
            top-k.

        Returns
        -------
        item_ids, scores : numpy.ndarray
            Each (len(users), n). Scores are the model's own: predicted ratings (explicit:
            predict's, a user with no fit rating's the items' shrunk means), the output
            logits (implicit NCAE: the order of tanh(out) without float32 saturation ties), a
            baseline's scores. Ties go to the item earlier in item_ids. A user with
            fewer than n candidates ends in score -inf, id -1 (integer ids) or "" (text ids);
            a user with no interaction in the fit data is all such padding where the model
            scores a user from their interactions alone (not ranks_without_history).

        Raises
        ------
        UnknownIds
            Ids the model was not fit on, named.
        DataError
            Ids in a container of no order (a set, a dict, a generator): give a list, tuple or
            numpy array.
        SettingError
            An n that is not an integer >= 1, an index not 'exact' or 'approximate', or a
            filter_seen that is not True or False, named.
        IndexUnavailable
            index='approximate' for a model or device it does not apply to, or without the
            [ann] extra.
        NotFitted
            A model not fitted yet.
        """
        self._check_fitted()
        if index not in INDEXES:
            raise SettingError("index", f"must be one of {', '.join(INDEXES)}; got {index!r}")
        u = self.data.user_lookup(users)
        n, candidates = self.data.candidates(n, items)
        searched = None
        if index == "approximate" and candidates is None:
            searched = self.item_index()
        elif index == "approximate":       # candidates are ranked exactly: no index built
            self._check_index()
        without_history = self.data.user_counts[u] == 0                     # (len(u),)
        if searched is None:
            return self._results(*self._exact_top(u, n, filter_seen, candidates),
                                 without_history, candidates)
        idx, vals, short = self._searched_top(searched, u, n, filter_seen)
        if short.any():
            idx[short], vals[short] = self._exact_top(u[short], n, filter_seen, None)
        return self._results(idx, vals, without_history, None)

    def _searched_top(self, searched: ItemIndex, u: np.ndarray, n: int, filter_seen: bool
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(idx, scores, short) each of len(u) rows: the n best columns of users u the index
        `searched` finds, and which users it found too few for (ItemIndex.top)."""
        return searched.top(user_queries(self, u), u, n, self.data.seen if filter_seen else None)

    def _exact_top(self, u: np.ndarray, n: int, filter_seen: bool, candidates
                   ) -> tuple[np.ndarray, np.ndarray]:
        """(idx, scores) each (len(u), n): the n best columns of users u, every item scored."""
        excluded = excluded_entries(self.ops, self.data.seen_items()) if filter_seen else None
        with self.ops.session():
            return top_m(self.ops, self._scorer(), u, n, excluded, candidates,
                         self.data.item_columns, self.comm)

    def _results(self, idx: np.ndarray, vals: np.ndarray, without_history: np.ndarray,
                 candidates) -> tuple[np.ndarray, np.ndarray]:
        """(item ids, scores) of recommend's column indices and scores, chosen among
        `candidates` (data.candidates' mask, or None) for rows `without_history` ((rows,) bool:
        a user with no interaction) and the others: _ranked_ids'."""
        return self._ranked_ids(idx, vals, without_history)

    def _ranked_ids(self, idx: np.ndarray, vals: np.ndarray, without_history: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """(item ids, values) of column indices (padding -1 or "") and their values, a row of
        `without_history` ((rows,) bool: a user with no interaction) all padding where the
        model has nothing to rank it by (not ranks_without_history)."""
        if not self.ranks_without_history:
            idx[without_history], vals[without_history] = -1, -np.inf
        return self.data.item_ids_of(idx), vals

    def item_index(self) -> ItemIndex:
        """The approximate index of the model's items: IndexUnavailable, as a model without
        one inner product of a user's and an item's vectors has none."""
        raise IndexUnavailable(f"{self.title} scores no inner product of item vectors: use the "
                               "exact top-k ({index})", index=INDEXES[0])

    def _check_index(self) -> None:
        """IndexUnavailable where index='approximate' does not apply to the model, said
        without building the index (recommend's candidate items are ranked exactly): here
        item_index's refusal; a model that has an index checks it without the build."""
        self.item_index()

    def recommend_new(self, X_new, n: int = 10, filter_seen: bool = True, items=None,
                      times=None) -> tuple[np.ndarray, np.ndarray]:
        """recommend() for users the model was not fit on, folded in from their interactions
        without refitting, where the model has a way to (Unsupported where not).

        Parameters
        ----------
        X_new : scipy.sparse matrix
            New users x items, whose column j is item_ids[j]: every stored entry is an
            interaction, its value the rating (an explicit model's, on its rating scale;
            implicit models read it as an interaction whatever its value). A row with no entry
            is a user with no history yet, answered as recommend answers a user with no
            interaction.
        n, filter_seen, items
            As recommend's; filter_seen leaves out the items of X_new's rows.
        times : scipy.sparse matrix, optional
            For a model that weighs a user's interactions by recency (recency_boost): each
            interaction's time at its place in X_new; refused for any other model.

        Returns
        -------
        item_ids, scores : numpy.ndarray
            Each (X_new.shape[0], n), as recommend's.

        Raises
        ------
        Unsupported
            A model that folds no new user in, naming it.
        DataError
            X_new with another number of columns than the model has items, ratings off an
            explicit model's scale, or times for a model that reads none.
        UnknownIds
            Candidate items the model was not fit on, named.
        SettingError
            An n or filter_seen as recommend refuses them.
        NotFitted
            A model not fitted yet.
        """
        self._check_fitted()
        if times is not None and not self.config.recency_boost:
            raise DataError(f"the {self.title} model does not weigh a user's interactions by "
                            "recency (no recency_boost): leave out times=")
        new = from_matrix(X_new, "X_new", item_ids=self.item_ids)
        scorer = self._new_user_scorer(new, times)
        n, candidates = self.data.candidates(n, items)
        rows = new.to_csr("user", implicit=True)                            # (new users, items)
        seen = self.data.part(rows, self.data.item_columns)
        with self.ops.session():
            idx, vals = top_m(self.ops, scorer(), np.arange(new.n_users), n,
                              excluded_entries(self.ops, seen) if filter_seen else None,
                              candidates, self.data.item_columns, self.comm)
        return self._results(idx, vals, np.diff(rows.indptr) == 0, candidates)

    def _new_user_scorer(self, new: Interactions, times):
        """() -> Scorer of the rows of `new` (new users, of the model's items), made inside the
        backend's session; Unsupported where the model folds no new user in."""
        raise Unsupported(f"{self.title} does not fold new users in: refit it with them")

    def similar_items(self, items, n: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """The n items most similar to each given item, the item itself left out, where the
        model compares items (Unsupported where not).

        Parameters
        ----------
        items : array-like
            Item ids of the fit data.
        n : int
            Similar items an item.

        Returns
        -------
        item_ids, similarities : numpy.ndarray
            Each (len(items), n), the most similar first. An item with no interaction in the
            fit data has nothing to compare it by (NCAE's vector of it is an untrained draw, or
            the code of an empty row, the same for every such item): its row is padding
            (similarity -inf, id -1 or ""), and it is no other item's neighbour; a row with
            fewer than n items to offer ends in such padding.

        Raises
        ------
        Unsupported
            A model that compares no items, naming it.
        UnknownIds
            Ids the model was not fit on, named.
        DataError
            Ids in a container of no order, as recommend refuses them.
        SettingError
            An n that is not an integer >= 1.
        NotFitted
            A model not fitted yet.
        """
        raise Unsupported(f"{self.title} has no similarity of items")

    def _most_similar(self, items, n: int, similarity) -> tuple[np.ndarray, np.ndarray]:
        """similar_items' (item ids, similarities): the n items of the largest similarity to
        each item, itself and the items of no fit interaction left out (a row of padding for
        such an item: see similar_items), similarity() (made inside the backend's session)
        giving (B,) item indices -> device (B, items held) similarities."""
        self._check_fitted()
        ops, held, counts = self.ops, self.data.item_columns, self.data.item_counts
        idx = self.data.item_lookup(items)

        def itself(chunk: np.ndarray) -> tuple:
            mine = held.owns(chunk)
            indptr = np.concatenate([[0], np.cumsum(mine)]).astype(np.int32)
            return ops.to_device(indptr), ops.to_device(chunk[mine] - held.lo)
        with ops.session():
            m = min(self.data.candidates(n, None)[0], max(len(self.item_ids) - 1, 1))
            found, sims = top_m(ops, similarity(), idx, m, itself,
                                ops.to_device(counts[held.lo:held.hi] > 0), held, self.comm)
        cold = counts[idx] == 0                                            # (len(idx),)
        found[cold], sims[cold] = -1, -np.inf
        return self.data.item_ids_of(found), sims

    def evaluate(self, held, exclude=None, per_user: bool = False,
                 popularity: bool = False) -> dict:
        """The figures of `held` once: evaluator(held, exclude, popularity)(per_user).

        Returns
        -------
        dict
            Explicit: 'rmse' and the number of entries scored ('entries'). Implicit: HR@M,
            Recall@M and NDCG@M at each cutoff ('hr@10', 'recall@10', 'ndcg@10', ...) and the
            number of held-out entries scored ('rows': a user's each, where a user has several);
            with per_user, the table of users grouped by their number of fit interactions (its
            'rows' are users). Where `held` has cold entries (user or item with no fit
            interaction), the figures are the warm entries', and 'cold' holds the cold ones'.
            `held` of no entries (or of no warm ones) gives every figure NaN, the count 0 and
            no clusters, as metrics.py's figures of no inputs: a split whose test entries are
            all cold, scored apart, leaves such a test part.

        Raises
        ------
        DataError
            As evaluator's: held-out data of other ids or shape, or without an explicit
            model's ratings.
        Unsupported
            popularity=True for explicit feedback.
        SettingError
            A per_user or popularity that is not True or False.
        NotFitted
            A model not fitted yet.
        """
        return self.evaluator(held, exclude, popularity)(per_user)

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
            cold ones (whose user or item has no fit interaction) are scored apart, their
            figures under 'cold', where `held` has any.

        Raises
        ------
        DataError
            Held-out ratings missing for an explicit model, or ids the model does not know.
        Unsupported
            popularity=True for explicit feedback: the POP baseline ranks items.
        SettingError
            A popularity that is not True or False.
        NotFitted
            A model not fitted yet.
        """
        self._check_fitted()
        if popularity and not self.config.implicit:
            raise Unsupported("the POP baseline ranks items: it is for implicit feedback")
        warm, cold = self.data.cold_apart(self._held_out(held))
        warm_score = self._part_scorer(warm, exclude, popularity)
        cold_score = None if cold is None else self._part_scorer(cold, exclude, popularity)

        @arguments_checked          # (its flag too: per_user="no" is no table)
        def score(per_user: bool = False) -> dict:
            figures = warm_score(per_user)
            return figures if cold_score is None else {**figures, "cold": cold_score()}
        return score

    def _held_out(self, held) -> Interactions:
        """Held-out data as Interactions of the fit data's ids, checked."""
        return self.data.held_out(held, "held-out data")

    def _part_scorer(self, held: Interactions, exclude, popularity: bool):
        """evaluator()'s score of the held-out entries `held`: the ranker of implicit
        feedback, by the model's scores or by popularity."""
        data = self.data
        if popularity:
            pop = data.popularity()
            return data.ranker(held, exclude, self.config.cutoffs,
                               lambda: constant_scorer(self.ops, pop), self.comm)
        return data.ranker(held, exclude, self.config.cutoffs, self._scorer, self.comm)

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
    def title(self) -> str:
        """The model's name as a message or a table says it."""
        return type(self).__name__

    @property
    def based(self) -> str | None:
        """The rows an NCAE's autoencoder encodes ('item', 'user'; a blend's 'both'); None for
        a model without them, whose config holds the fit data's layout (users: a baseline)."""
        return None

    @property
    def leader(self) -> bool:
        """Whether this process speaks and writes for the model: rank 0 of a sharded one."""
        return self.comm is None or self.comm.rank == 0

    def _check_fitted(self) -> None:
        if self.data is None:
            raise NotFitted(f"the {self.title} model is not fitted: call fit(), or load a "
                            "saved one (ncae_cuda.load_model)")

    @contextlib.contextmanager
    def _as_it_was_unless_fitted(self):
        """Within it, a fit replaces the model's fitted state (data, parameters, history);
        where it raises (a stop, a failing callback, a divergence, a refusal of the data), the
        model is put back as it was: a stopped partial_fit resumes from the model it started
        from, which its checkpoint names, and a fitted model is never left half fit. A fit
        assigns its state's attributes anew, never changes one in place, so the attributes as
        they were are the model as it was."""
        before = dict(vars(self))
        try:
            yield
        except BaseException:
            vars(self).clear()
            vars(self).update(before)
            raise

    # -----------------------------------------------------------------------------------------
    # saving

    def save(self, path) -> None:
        """Save the model in one file, no pickle: its settings, its fitted state and the fit
        interactions (seen items are filtered by them), so it recommends without the training
        data at hand; ncae_cuda.load_model reads it back.

        Parameters
        ----------
        path : str or os.PathLike
            The .npz to write, atomically: a crash leaves the old file or the new one.

        Raises
        ------
        DataError
            The file cannot be written, naming why.
        NotFitted
            A model not fitted yet.
        """
        self._check_fitted()
        meta, arrays = self.contents()
        if self.leader:
            modelfile.write(path, "model", {"ncae_cuda": __version__, "model": self.name,
                                            "settings": self.settings, **meta}, arrays)



def cosine_of(model: Model, vectors) -> Scorer:
    """(B,) item indices -> device (B, items held) cosine similarities of the rows of
    `vectors`, device (items held, K): each query item's row taken from the process that holds
    it where a shard holds a part of the items."""
    xp, ops, held = model.ops.xp, model.ops, model.data.item_columns
    norms = xp.sqrt((vectors * vectors).sum(axis=1, keepdims=True))
    unit = vectors / xp.maximum(norms, xp.float32(1e-30))     # (items held, K)

    def similarity(chunk: np.ndarray):
        if held.whole:
            return unit[ops.to_device(chunk)] @ unit.T                       # (B, n_items)
        query = xp.zeros((len(chunk), unit.shape[1]), unit.dtype)           # from its owner
        mine = np.flatnonzero(held.owns(chunk))
        query[ops.to_device(mine)] = unit[ops.to_device(chunk[mine] - held.lo)]
        model.comm.sum(query, "query items")
        return query @ unit.T                                                # (B, items held)
    return similarity


def check_callback(callback) -> None:
    """SettingError where a fit's callback is neither None nor callable: said before the
    fit, not at its first epoch's end."""
    if callback is not None and not callable(callback):
        raise SettingError("callback", f"must be callable as callback(model, record); got "
                                       f"{type(callback).__name__}")


def restored(path, meta: dict, arrays: dict, make, device) -> Model:
    """The model make(ops) makes of a model file's settings on `device` (a name or a
    backend), with the fitted state of its (meta, arrays); a DataError naming the file where
    they do not fit together (a device that is none is the caller's mistake, not the file's)."""
    ops = as_backend(device)
    try:
        model = make(ops)
        model.restore(meta, arrays)
    except (KeyError, ValueError, TypeError) as e:
        raise modelfile.inconsistent(path, "model", e) from None
    model.source = Path(path)
    return model
