"""Every model keeps one contract (ncae_cuda/model/base.py), one set of tests run over them all,
as implicit's test mixin runs over its models: fit on small random data with an empty user row
and an empty item column, evaluate's figures, recommend against the model's own scores (a
float64 numpy reference of a baseline's, computed here from the fit matrix), save and load
through the factory bit for bit, unknown ids, recommend_new and similar_items working or
Unsupported, and the model file through python -m ncae_cuda.recommend."""
import csv
import inspect
import io
import re
from contextlib import redirect_stdout
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda import NCAE, BlendedNCAE, NotFitted, Unsupported, load_model, make_model
from ncae_cuda.commands import recommend as recommend_command
from ncae_cuda.data import splits
from ncae_cuda.data.interactions import DataError, UnknownIds, from_matrix
from ncae_cuda.baselines.estimators import EASE
from ncae_cuda.errors import NcaeError
from ncae_cuda.model.base import ENTRY_POINTS, Model
from ncae_cuda.model.config import Config, SettingError
from ncae_cuda.model.recommender import RatingModel
from ncae_cuda.runs import rundir
from ncae_cuda.runs.select_test import select_refit_test

USERS, ITEMS = 40, 30
EMPTY_USER, EMPTY_ITEM = 3, 7
N = 5
NCAE_SETTINGS = {"hidden": (8,), "epochs": 2, "batch_size": 16}


@dataclass(frozen=True)
class Case:
    settings: dict
    implicit: bool = True
    new_users: str = "same"          # recommend_new: "same" as recommend's, "folded", "no"
    similar: bool = True             # similar_items
    from_history: bool = False       # scores a user (an item) from their interactions alone
    marks: tuple = field(default_factory=tuple)


CASES = {
    "ncae-implicit": Case({"feedback": "implicit", **NCAE_SETTINGS}),
    "ncae-multinomial": Case({"feedback": "implicit", "loss": "multinomial", **NCAE_SETTINGS}),
    "ncae-explicit": Case({"feedback": "explicit", **NCAE_SETTINGS}, implicit=False,
                          new_users="no"),             # item-based: no encoder of a new user
    "blend": Case({"based": "both", **NCAE_SETTINGS}, implicit=False, new_users="no"),
    "ease": Case({"model": "ease", "l2": 3.0}, similar=False, from_history=True),
    "ials": Case({"model": "ials", "factors": 4, "iterations": 3}, new_users="folded",
                 from_history=True, marks=(pytest.mark.extra("baselines"),)),
    "bpr": Case({"model": "bpr", "factors": 4, "iterations": 3}, new_users="no",
                from_history=True, marks=(pytest.mark.extra("baselines"),)),
    "pop": Case({"model": "pop"}, similar=False),
    "item-knn": Case({"model": "item-knn", "k": 6, "shrink": 2.0}, from_history=True),
    "rp3beta": Case({"model": "rp3beta", "alpha": 0.8, "beta": 0.3, "k": 6}, similar=False,
                    from_history=True),
}
PARAMS = [pytest.param(name, marks=case.marks, id=name) for name, case in CASES.items()]


def parts() -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """(train, valid, test) users x items ratings 1..5: one entry of each user with three or
    more held out for test and one for validation; user EMPTY_USER and item EMPTY_ITEM have
    none anywhere."""
    rng = np.random.default_rng(7)
    R = (rng.random((USERS, ITEMS)) < 0.3) * rng.integers(1, 6, (USERS, ITEMS))
    R[EMPTY_USER], R[:, EMPTY_ITEM] = 0, 0
    held = {"valid": np.zeros_like(R), "test": np.zeros_like(R)}
    for u in range(USERS):
        entries = np.flatnonzero(R[u])
        if len(entries) >= 3:
            for part, item in zip(held.values(), rng.choice(entries, 2, replace=False)):
                part[u, item], R[u, item] = R[u, item], 0
    return tuple(sp.csr_matrix(m.astype(np.float32)) for m in (R, held["valid"], held["test"]))


TRAIN, VALID, TEST = parts()
SEEN = TRAIN.toarray() > 0                                                  # (users, items)


@pytest.fixture(scope="module", params=PARAMS)
def fitted(request):
    """(name, Case, the model fit on TRAIN with VALID)."""
    case = CASES[request.param]
    model = make_model(case.settings, device="cpu")
    return request.param, case, model.fit(TRAIN, validation=VALID)


# ---------------------------------------------------------------------------------------------
# float64 references of the baselines' scores, from the fit matrix

def ones() -> np.ndarray:
    return SEEN.astype(np.float64)                                          # (users, items)


def kept_largest(W: np.ndarray, k: int) -> np.ndarray:
    """Each row of W with its k largest positive entries off the diagonal, the lower column
    first among equals; the rest 0."""
    W = W.copy()
    np.fill_diagonal(W, 0)
    out = np.zeros_like(W)
    for i, row in enumerate(W):
        order = np.lexsort((np.arange(len(row)), -row))
        keep = [j for j in order[:k] if row[j] > 0]
        out[i, keep] = row[keep]
    return out


def reference_scores(name: str, model) -> np.ndarray:
    """(users, items) float64: the model's scores of every user and item, computed here."""
    X, s = ones(), CASES[name].settings
    if name == "ease":
        P = np.linalg.inv(X.T @ X + s["l2"] * np.eye(ITEMS))
        B = np.eye(ITEMS) - P / np.diag(P)
        return X @ B
    if name == "pop":
        return np.tile(X.sum(axis=0), (USERS, 1))
    if name == "item-knn":
        norms = np.sqrt(X.sum(axis=0))
        S = (X.T @ X) / (np.outer(norms, norms) + s["shrink"])
        return X @ kept_largest(S, s["k"]).T
    if name == "rp3beta":
        def normalised(A):
            sums = A.sum(axis=1, keepdims=True)
            return np.divide(A, sums, out=np.zeros_like(A), where=sums > 0)
        popularity = X.sum(axis=0)
        penalty = np.divide(1, popularity ** s["beta"], out=np.zeros_like(popularity),
                            where=popularity > 0)
        W = (normalised(X.T) ** s["alpha"]) @ (normalised(X) ** s["alpha"]) * penalty
        return X @ kept_largest(W, s["k"])
    if name in ("ials", "bpr"):                           # the library's fit: its factors
        users, items = model._users.astype(np.float64), model._items.astype(np.float64)
        return users @ items.T
    every = np.repeat(np.arange(USERS), ITEMS), np.tile(np.arange(ITEMS), USERS)
    return model.predict(*every).astype(np.float64).reshape(USERS, ITEMS)


def shown(name: str, scores: np.ndarray, first: float) -> np.ndarray:
    """recommend's scores (a user's, best first) on the reference's scale: NCAE's implicit
    logits as predict's tanh, or, with the multinomial loss, as predict's softmax, which the
    logits give up to its normaliser: `first`, the reference's score of the first item, fixes
    it."""
    if name == "ncae-multinomial":
        return first * np.exp(scores - scores[0])
    return np.tanh(scores) if name == "ncae-implicit" else scores


# ---------------------------------------------------------------------------------------------
# the contract

def test_evaluate_gives_the_same_figures_for_every_model_of_a_feedback(fitted):
    name, case, model = fitted
    figures = model.evaluate(TEST, exclude=VALID)
    cutoffs = Config().cutoffs
    if case.implicit:
        want = {f"{metric}@{m}" for metric in ("hr", "recall", "ndcg") for m in cutoffs}
        assert set(figures) - {"cold"} == want | {"rows"}
        assert all(0 <= figures[key] <= 1 for key in want)
    else:
        assert set(figures) - {"cold"} == {"rmse", "entries"} and figures["rmse"] > 0


def test_recommend_leaves_out_seen_items_and_ranks_by_the_models_own_scores(fitted):
    name, case, model = fitted
    # explicit: predict gives a cold user or item (no fit rating) the fit data's means, not the
    # network's output: the candidates and users compared are the warm ones
    candidates = SEEN.any(axis=0) | case.implicit                           # (items,)
    # a model that ranks from a user's interactions alone gives one with none no items (below)
    warm = SEEN.any(axis=1) | (case.implicit and not case.from_history)     # (users,)
    items, scores = model.recommend(np.arange(USERS), n=N,
                                    items=None if case.implicit else np.flatnonzero(candidates))
    reference = reference_scores(name, model)
    for u in np.flatnonzero(warm):
        assert not SEEN[u, items[u]].any()
        assert np.all(np.diff(scores[u]) <= 0)
        unseen = reference[u, ~SEEN[u] & candidates]
        np.testing.assert_allclose(reference[u, items[u]], np.sort(unseen)[::-1][:N],
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(shown(name, scores[u], reference[u, items[u][0]]),
                                   reference[u, items[u]], rtol=1e-4, atol=1e-5)
    kept, _ = model.recommend(np.arange(USERS), n=N, filter_seen=False)
    assert SEEN[np.arange(USERS)[:, None], kept].any()     # the seen items come back


def test_evaluate_of_a_part_of_no_entries_is_nan_of_none(fitted):
    """The documented empty result (metrics' for no inputs: a split whose test entries are
    all cold, scored apart, leaves such a test part): every figure NaN, its count 0, no
    clusters."""
    _, case, model = fitted
    figures = model.evaluate(sp.csr_matrix(TRAIN.shape), per_user=True)
    count = "rows" if case.implicit else "entries"
    assert figures.pop(count) == 0 and figures.pop("clusters") == []
    assert figures and all(np.isnan(value) for value in figures.values())


def test_save_and_load_give_the_same_recommendations_and_settings(fitted, tmp_path):
    name, case, model = fitted
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = load_model(path, device="cpu")
    assert type(loaded) is type(model) and loaded.settings == model.settings
    # before: a baseline's file lost them (None), NCAE's kept them
    assert loaded.best_validation == model.best_validation is not None
    for got, want in zip(loaded.recommend(np.arange(USERS), n=N),
                         model.recommend(np.arange(USERS), n=N)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(loaded.user_ids, model.user_ids)
    np.testing.assert_array_equal(loaded.item_ids, model.item_ids)
    again = make_model(model.settings, device="cpu")
    assert type(again) is type(model) and again.settings == model.settings
    if type(model) is not NCAE:
        with pytest.raises(DataError, match="load_model"):
            NCAE.load(path, device="cpu")


def test_unknown_ids_are_refused_naming_them(fitted):
    _, _, model = fitted
    with pytest.raises(UnknownIds, match=str(USERS + 5)):
        model.recommend([0, USERS + 5], n=N)
    with pytest.raises(UnknownIds, match=str(ITEMS + 2)):
        model.recommend([0], n=N, items=[1, ITEMS + 2])


def test_a_misused_query_is_the_packages_error_saying_what(fitted):
    """Before: ValueErrors, not NcaeErrors, which a caller catching the package's cannot tell
    from a bug."""
    _, case, model = fitted
    mistakes = [(lambda: model.recommend([0], n=0), SettingError, "n must be an integer >= 1"),
                (lambda: model.recommend([0], n=2.5), SettingError, "got 2.5"),
                (lambda: model.recommend([[0, 1]], n=N), DataError, "user ids: expected a 1-d"),
                (lambda: model.recommend([0], n=N, index="fast"), SettingError,
                 "index must be one of exact, approximate; got 'fast'")]
    # a keyword a query does not take: before, TypeError "unexpected keyword argument"
    mistakes += [(lambda: model.recommend([0], N=3), SettingError,
                  f"N is not an argument of {model.title}'s recommend (it takes users, n, "
                  "filter_seen, items and index); did you mean n?"),
                 (lambda: model.evaluate(TEST, excluded=VALID), SettingError,
                  f"excluded is not an argument of {model.title}'s evaluate"),
                 (lambda: model.recommend_new(TRAIN[:1], number=3), SettingError,
                  f"number is not an argument of {model.title}'s recommend_new")]
    # a keyword of a method that takes none: before, TypeError "unexpected keyword argument",
    # and where one was named, IndexError from the list of none it takes
    mistakes += [(lambda: model.item_index(rebuild=True), SettingError,
                  f"rebuild is not an argument of {model.title}'s item_index (it takes none)")]
    # a flag given a value that is not a bool: before, read by its truth, "no" as True
    mistakes += [(lambda: model.recommend([0], n=N, filter_seen="no"), SettingError,
                  "filter_seen must be True or False; got 'no'"),
                 (lambda: model.recommend([0], N, 0), SettingError,
                  "filter_seen must be True or False; got 0"),
                 (lambda: model.recommend_new(TRAIN[:1], filter_seen="no"), SettingError,
                  "filter_seen must be True or False; got 'no'"),
                 (lambda: model.evaluate(TEST, per_user="yes"), SettingError,
                  "per_user must be True or False; got 'yes'"),
                 (lambda: model.evaluator(TEST, popularity=1), SettingError,
                  "popularity must be True or False; got 1"),
                 (lambda: model.evaluator(TEST)(per_user="yes"), SettingError,
                  "per_user must be True or False; got 'yes'"),
                 (lambda: model.evaluator(TEST)(per_users=True), SettingError,
                  "per_users is not an argument of Model.evaluator's score (it takes per_user); "
                  "did you mean per_user?")]
    # ids in a container of no order: before, taken for one id, UnknownIds "{0, 1}"
    mistakes += [(lambda: model.recommend({0, 1}, n=N), DataError, "user ids must be an "
                  "ordered sequence (a list, tuple or numpy array); got a set"),
                 (lambda: model.recommend([0], n=N, items=(i for i in [1, 2])), DataError,
                  "item ids must be an ordered sequence (a list, tuple or numpy array); got a "
                  "generator"),
                 (lambda: model.recommend({0: "a"}.keys(), n=N), DataError, "got a dict_keys"),
                 # a mask for the ids: before, True and False taken for ids 1 and 0
                 (lambda: model.recommend(np.arange(USERS) < 2, n=N), DataError,
                  "user ids are booleans (a mask?): give the ids, e.g. model.user_ids[mask]")]
    if case.similar:
        mistakes.append((lambda: model.similar_items({1, 2}, n=N), DataError,
                         "item ids must be an ordered sequence"))
        mistakes.append((lambda: model.similar_items([0], top=3), SettingError,
                         f"top is not an argument of {model.title}'s similar_items"))
    if not case.settings.get("model"):                         # NCAE's and a blend's
        mistakes.append((lambda: model.predict(iter([0]), [0]), DataError,
                         "user ids must be an ordered sequence"))
        mistakes.append((lambda: model.predict([0], [0], user=[0]), SettingError,
                         f"user is not an argument of {model.title}'s predict (it takes "
                         "users and items); did you mean users?"))
    if not case.implicit:
        mistakes.append((lambda: model.predict([0, 1], [0]), DataError,
                         "predict needs as many users as items; got 2, 1"))
    for call, error, says in mistakes:
        with pytest.raises(error, match=re.escape(says)):
            call()


def test_every_public_method_names_a_keyword_it_does_not_take(fitted):
    """Each public method of a model that names its arguments refuses another by name, as the
    contract's entry points do (one of **keywords passes them on, to the one that names them:
    MAKING's refit and partial_fit). Before, item_index, check_warm_start, contents and
    restore raised Python's TypeError "got an unexpected keyword argument"."""
    _, _, model = fitted
    for name in dir(model):
        method = getattr(model, name)
        if name.startswith("_") or not inspect.ismethod(method) or any(
                p.kind is p.VAR_KEYWORD for p in inspect.signature(method).parameters.values()):
            continue
        with pytest.raises(SettingError, match=re.escape("unheard is not an argument of")
                           + f".*{name}"):
            method(unheard=1)


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_every_entry_point_refuses_an_argument_past_its_own_by_position(fitted, entry_point):
    """An argument given by position past those an entry point takes is the package's
    SettingError, as a keyword it does not take is. Before, Python's TypeError, counting the
    model itself: "Model.item_index() takes 1 positional argument but 2 were given"."""
    _, _, model = fitted
    method = getattr(model, entry_point, None)
    if method is None:
        return                                        # (restore: NCAE's and a blend's alone)
    taken = sum(p.kind is p.POSITIONAL_OR_KEYWORD
                for p in inspect.signature(method).parameters.values())
    with pytest.raises(SettingError) as refused:
        method(*[None] * (taken + 1))
    says = str(refused.value)
    assert says.startswith(f"{model.title}'s {entry_point} takes ") and says.endswith(
        f"; got {taken + 1}"), says


def test_an_argument_past_its_own_is_named_in_one_line(fitted):
    """The refusal says what the function takes and how many it was given, a model's method
    by the model's name; the factory's and NCAE.load alike."""
    _, _, model = fitted
    for call, says in [
            (lambda: model.item_index(True), f"{model.title}'s item_index takes no arguments; "
                                             "got 1"),
            (lambda: model.recommend([0], N, True, None, "exact", 1), f"{model.title}'s "
             "recommend takes at most 5 arguments by position (users, n, filter_seen, items "
             "and index); got 6"),
            (lambda: make_model({"model": "pop"}, "cpu", None, 1), "make_model takes at most 3 "
             "arguments by position (settings, device and shard); got 4"),
            (lambda: load_model("model.npz", "cpu", 1), "load_model takes at most 2 arguments "
             "by position (path and device); got 3"),
            (lambda: NCAE.load("model.npz", "cpu", 1), "NCAE.load takes at most 2 arguments by "
             "position (path and device); got 3"),
            (lambda: model.evaluator(TEST)(True, 1), "Model.evaluator's score takes at most 1 "
             "argument by position (per_user); got 2")]:
        with pytest.raises(SettingError) as refused:
            call()
        assert str(refused.value) == says


def needed(method) -> list[str]:
    """The arguments `method` (a bound entry point) has no default for."""
    return [p.name for p in inspect.signature(method).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_every_entry_point_names_an_argument_it_needs_and_was_not_given(fitted, entry_point):
    """An entry point called without an argument it has no default for is the package's
    SettingError naming it, as a keyword it does not take is. Before, Python's TypeError:
    "recommend() missing 1 required positional argument: 'users'"."""
    _, _, model = fitted
    method = getattr(model, entry_point, None)
    if method is None or not needed(method):
        return                                  # (restore: NCAE's and a blend's; item_index)
    with pytest.raises(SettingError) as refused:
        method()
    says = str(refused.value)
    assert refused.value.setting == needed(method)[0], says
    assert says.startswith(f"{needed(method)[0]} is missing: {model.title}'s {entry_point} "
                           "needs it (it takes "), says


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_every_entry_point_names_an_argument_given_twice(fitted, entry_point):
    """An argument given by position and again as a keyword is the package's SettingError
    naming it. Before, Python's TypeError: "recommend() got multiple values for argument
    'users'"."""
    _, _, model = fitted
    method = getattr(model, entry_point, None)
    if method is None or not needed(method):
        return
    first = needed(method)[0]
    with pytest.raises(SettingError) as refused:
        method(None, **{first: None})
    assert str(refused.value) == (f"{first} is given twice to {model.title}'s {entry_point}, "
                                  "by position and as a keyword: give it once")


def test_a_missing_or_twice_given_argument_is_named_in_one_line(fitted):
    """Each says which argument, of which function, and what it takes; the factory's, NCAE.load
    and a query's own functions alike."""
    _, _, model = fitted
    for call, says in [
            (lambda: model.recommend(), f"users is missing: {model.title}'s recommend needs "
             "it (it takes users, n, filter_seen, items and index)"),
            (lambda: model.recommend([0], users=[0]), f"users is given twice to "
             f"{model.title}'s recommend, by position and as a keyword: give it once"),
            (lambda: model.recommend([0], 3, n=4), f"n is given twice to {model.title}'s "
             "recommend, by position and as a keyword: give it once"),
            (lambda: model.refit(TRAIN, X=TRAIN), f"X is given twice to {model.title}'s "
             "refit, by position and as a keyword: give it once"),
            (lambda: load_model(device="cpu"), "path is missing: load_model needs it (it "
             "takes path and device)"),
            (lambda: NCAE.load(), "path is missing: NCAE.load needs it (it takes path and "
             "device)"),
            (lambda: make_model({}, settings={}), "settings is given twice to make_model, by "
             "position and as a keyword: give it once"),
            (lambda: model.evaluator(TEST)(True, per_user=True), "per_user is given twice to "
             "Model.evaluator's score, by position and as a keyword: give it once")]:
        with pytest.raises(SettingError) as refused:
            call()
        assert str(refused.value) == says


@pytest.mark.parametrize("name", PARAMS)
def test_a_model_not_fitted_says_so(name, tmp_path):
    """Before: a RuntimeError, not an NcaeError; refit, which repeats what a fit chose: iALS's
    and BPR's an AttributeError (best_iteration), a blend's a KeyError ('item'), NCAE's
    'epochs must be an integer >= 1 ... got 0'."""
    case = CASES[name]
    model = make_model(case.settings, device="cpu")
    assert model.best_epoch in (None, 0, {})                    # nothing chosen, no error
    calls = {"recommend": lambda: model.recommend([0], n=N),
             "recommend_new": lambda: model.recommend_new(TRAIN[:1], n=N),
             "evaluate": lambda: model.evaluate(TEST), "save": lambda: model.save(tmp_path / "m"),
             "refit": lambda: model.refit(TRAIN)}
    if case.similar:
        calls["similar_items"] = lambda: model.similar_items([0], n=N)
    if not case.settings.get("model"):                         # NCAE's and a blend's
        calls.update(predict=lambda: model.predict([0], [0]),
                     partial_fit=lambda: model.partial_fit(TRAIN, verbose=False))
    # the model asked, by its title: a blend's similar_items and partial_fit named its NCAE
    for method, call in calls.items():
        with pytest.raises(NotFitted) as raised:
            call()
        assert str(raised.value).startswith(f"the {model.title} model is not fitted: call fit"
                                            ), method


MAKING = {   # a mistake in making or fitting a model: (call, what the SettingError says)
    "unknown setting": (lambda: NCAE(foo=1), "foo is not a setting of NCAE"),
    "blend's unknown setting": (lambda: BlendedNCAE(foo=1), "foo is not a setting of NCAE"),
    "blend of one side": (lambda: BlendedNCAE(based="item"), "based is both in a blend"),
    "settings not a dict": (lambda: make_model("ease"),
                            "settings must be a dict such as {'model': 'ease'}; got str"),
    # a setting read only where another is on, given where it is off: before, accepted unread
    "augmentation's p": (lambda: NCAE(feedback="implicit", variant="NCAE", augment_p=0.5),
                         "augment_p is for augmentation (implicit feedback, variant NCAE+): "
                         "augment_eps > 0 turns it on"),
    "baseline's halflife": (lambda: make_model({"model": "ease", "recency_halflife": 4.0}),
                            "recency_halflife is for recency weighting: recency_boost > 0 "
                            "turns it on"),
    "device": (lambda: NCAE(device="tpu"), "device must be one of auto, "),
    # before, taken for a backend: AttributeError "'NoneType' object has no attribute 'session'"
    # at the fit
    "device None": (lambda: NCAE(device=None), "device must be one of auto, reference, cpu, "
                    "gpu, or a backend; got None"),
    "baseline's device None": (lambda: make_model({"model": "ease"}, device=None),
                               "or a backend; got None"),
    "baseline's device": (lambda: make_model({"model": "ease"}, device="tpu"),
                          "device must be one of auto, "),
    "shard": (lambda: NCAE(shard="rows"), "shard must be None or 'columns'; got 'rows'"),
    "callback": (lambda: NCAE(**NCAE_SETTINGS).fit(TRAIN, callback=3),
                 "callback must be callable as callback(model, record); got int"),
    "baseline's callback": (lambda: make_model({"model": "pop"}).fit(TRAIN, callback="x"),
                            "callback must be callable"),
    "warm start": (lambda: NCAE(**NCAE_SETTINGS).fit(TRAIN, warm_start="model.npz"),
                   "warm_start must be a fitted NCAE; got str"),
    "epochs": (lambda: NCAE(**NCAE_SETTINGS).fit(TRAIN, epochs=0), "epochs must be an integer"),
    # NCAE's fit arguments given a baseline's: before, TypeError "unexpected keyword argument"
    "baseline's epochs": (lambda: make_model({"model": "ease"}).fit(TRAIN, epochs=5),
                          "epochs is not an argument of EASE's fit (it takes X, validation and "
                          "callback)"),
    "iALS's epochs": (lambda: make_model({"model": "ials"}).fit(TRAIN, epochs=5),
                      "epochs is not an argument of iALS's fit (it takes X, validation and "
                      "callback); its iterations are its setting 'iterations'"),
    "baseline's refit": (lambda: make_model({"model": "pop"}).fit(TRAIN).refit(
        TRAIN, verbose=False), "verbose is not an argument of POP's fit"),
    # a misspelt keyword of NCAE's or a blend's: before, TypeError "unexpected keyword argument"
    "fit's misspelt epochs": (lambda: NCAE(**NCAE_SETTINGS).fit(TRAIN, epoch=5),
                              "epoch is not an argument of NCAE's fit (it takes X, validation, "
                              "epochs, callback, checkpoint, resume, checkpoint_every, verbose "
                              "and warm_start); did you mean epochs?"),
    "fit's setting": (lambda: NCAE(**NCAE_SETTINGS).fit(TRAIN, lr=0.1),
                      "lr is not an argument of NCAE's fit (it takes X, validation, epochs, "
                      "callback, checkpoint, resume, checkpoint_every, verbose and "
                      "warm_start); lr is a setting of NCAE: give it where the model is made"),
    "blend's fit": (lambda: BlendedNCAE(**NCAE_SETTINGS).fit(TRAIN, verbos=False),
                    "verbos is not an argument of BlendedNCAE's fit"),
    # a patience named, which a fit without validation stops on nothing by: before, unread
    "patience without validation": (
        lambda: NCAE(**NCAE_SETTINGS, patience=5).fit(TRAIN, verbose=False),
        "patience stops a fit on its validation score, and this fit has no validation: give "
        "validation=, or leave patience=5 out of NCAE(...)"),
    "blend's patience without validation": (
        lambda: BlendedNCAE(**NCAE_SETTINGS, patience=0).fit(TRAIN, verbose=False),
        "leave patience=0 out of BlendedNCAE(...)"),
    # a flag given a value that is not a bool: before, read by its truth ("no" as True)
    "fit's resume": (lambda: NCAE(**NCAE_SETTINGS).fit(TRAIN, resume="no"),
                     "resume must be True or False; got 'no'"),
    "fit's verbose": (lambda: NCAE(**NCAE_SETTINGS).fit(TRAIN, verbose="x"),
                      "verbose must be True or False; got 'x'"),
    "blend's verbose": (lambda: BlendedNCAE(**NCAE_SETTINGS).fit(TRAIN, verbose=None),
                        "verbose must be True or False; got None"),
    "partial fit's verbose": (lambda: NCAE(**NCAE_SETTINGS).partial_fit(TRAIN, verbose=[]),
                              "verbose must be True or False; got []"),
    "partial fit's keyword": (lambda: NCAE(**NCAE_SETTINGS).partial_fit(TRAIN, epoch=1),
                              "epoch is not an argument of NCAE's fit"),
    # refit trains the epochs the fit chose: before, TypeError "got multiple values for
    # keyword argument 'epochs'"
    "refit's epochs": (lambda: NCAE(**NCAE_SETTINGS).fit(TRAIN, verbose=False).refit(
        TRAIN, epochs=5), "epochs is refit's own: it trains the 2 epochs the fit chose "
                          "(best_epoch); fit() trains a number given"),
    "blend's refit epochs": (lambda: BlendedNCAE(**NCAE_SETTINGS).fit(
        TRAIN, verbose=False).refit(TRAIN, epochs=5), "epochs is refit's own"),
    # before, TypeError "'float' object is not iterable"
    "baseline's cutoffs": (lambda: type(make_model({"model": "pop"}))(cutoffs=2.5),
                           "cutoffs must be positive integers, e.g. (10, 100); got 2.5"),
    # a cutoff given twice: before, accepted, and metrics.json recorded (10, 10)
    "repeated cutoff": (lambda: NCAE(cutoffs=(10, 10)),
                        "cutoffs must each be given once; 10 is repeated"),
    "baseline's repeated cutoff": (lambda: type(make_model({"model": "pop"}))(cutoffs=(5, 20, 5)),
                                   "cutoffs must each be given once; 5 is repeated"),
    # before, KeyError 'user'; a key of no member was ignored
    "blend's epochs of one member": (
        lambda: BlendedNCAE(**NCAE_SETTINGS).fit(TRAIN, epochs={"item": 1}, verbose=False),
        "epochs must be an integer, or a dict of each member's ({'item': e, 'user': e}); got "
        "{'item': 1}"),
    "blend's epochs of no member": (
        lambda: BlendedNCAE(**NCAE_SETTINGS).fit(TRAIN, epochs={"item": 1, "user": 1, "both": 2},
                                                 verbose=False), "got {'item': 1, 'user': 1, "),
    "partial fit's warm start": (
        lambda: NCAE(**NCAE_SETTINGS).partial_fit(TRAIN, warm_start=NCAE(**NCAE_SETTINGS)),
        "warm_start is this model itself in partial_fit"),
    "warm start of another output": (
        lambda: NCAE(**NCAE_SETTINGS, output="identity").fit(TRAIN, warm_start=NCAE(
            **NCAE_SETTINGS).fit(TRAIN, verbose=False)), "output must be the warm start's"),
}


@pytest.mark.parametrize("call, says", MAKING.values(), ids=MAKING.keys())
def test_a_mistake_in_making_or_fitting_a_model_is_a_setting_error(call, says):
    """Before: TypeErrors and ValueErrors (make_model("ease"): 'dictionary update sequence
    element #0 has length 1'; fit(callback=3): 'int' object is not callable, after an epoch)."""
    with pytest.raises(SettingError, match=re.escape(says)):
        call()


def test_cutoffs_in_descending_order_are_kept_as_given():
    """Early stopping reads NDCG at the last cutoff as given (topm puts its choice last): a
    descending order is no mistake, unlike a repeated cutoff (MAKING)."""
    assert NCAE(cutoffs=(100, 10)).config.cutoffs == (100, 10)
    assert type(make_model({"model": "pop"}))(cutoffs=(20, 5)).config.cutoffs == (20, 5)


@pytest.mark.parametrize("settings, unread", [
    ({"feedback": "implicit", "variant": "NCAE", **NCAE_SETTINGS}, {"augment_p": 0.5}),
    ({**NCAE_SETTINGS}, {"pretrain_epochs": 1}),      # experiments --quick gave every run one
    ({"feedback": "implicit", "variant": "NCAE-", **NCAE_SETTINGS}, {"c0": 300.0}),
    ({"feedback": "implicit", "loss": "multinomial", **NCAE_SETTINGS}, {"uniform_c": 0.1}),
    ({"model": "ease", "l2": 3.0}, {"recency_halflife": 4.0})])
def test_a_file_saved_with_a_setting_its_others_leave_unread_loads(tmp_path, settings, unread):
    """A file of a model made before such a setting was refused (augment_p without
    augmentation, pretrain_epochs without pre-training, a recency halflife without a boost, c0
    with uniform weighting, uniform_c with the multinomial loss) loads with the default in its
    place: the value changed nothing (before, 'a damaged ncae_cuda model file ... train it
    again')."""
    model = make_model(settings, device="cpu").fit(TRAIN, validation=VALID)
    saved = model.settings
    if type(model) is NCAE:
        model.config = replace(model.config, **unread)          # as an older version held it
    else:
        model.values = {**model.values, **unread}
    assert model.settings != saved
    path = tmp_path / "model.npz"
    model.save(path)
    for load in (load_model, *((NCAE.load,) if type(model) is NCAE else ())):
        loaded = load(path, device="cpu")
        assert loaded.settings == saved
        for got, want in zip(loaded.recommend(np.arange(USERS), n=N),
                             model.recommend(np.arange(USERS), n=N)):
            np.testing.assert_array_equal(got, want)


def test_loading_onto_a_device_that_is_none_blames_the_device_not_the_file(tmp_path):
    """Before: 'a damaged ncae_cuda model file ...: train it again', of a sound file."""
    path = tmp_path / "model.npz"
    NCAE(**NCAE_SETTINGS, feedback="implicit", device="cpu").fit(TRAIN, verbose=False).save(path)
    for load in (load_model, NCAE.load):
        with pytest.raises(SettingError, match="^device must be one of auto, .*got 'tpu'$"):
            load(path, device="tpu")


def test_load_model_takes_a_run_folder_for_its_model_as_the_commands_do(tmp_path):
    """Before: load_model("runs/demo") was "a folder, not an ncae_cuda model file", where
    python -m ncae_cuda.recommend and serve read the folder's model.npz."""
    path = tmp_path / "run" / rundir.MODEL
    path.parent.mkdir()
    model = NCAE(**NCAE_SETTINGS, feedback="implicit", device="cpu").fit(TRAIN, verbose=False)
    model.save(path)
    by_folder = load_model(path.parent, device="cpu")
    assert by_folder.source == path               # its index is kept beside the file it read
    for got, want in zip(by_folder.recommend(np.arange(USERS), n=N),
                         model.recommend(np.arange(USERS), n=N)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(DataError, match=f"^{re.escape(str(tmp_path / rundir.MODEL))}: no such"):
        load_model(tmp_path, device="cpu")


@pytest.fixture(scope="module")
def queried() -> dict:
    """Models whose queries raise each error the contract's docstrings list: NCAE of each
    feedback (an explicit one, item-based, folds no new user in), EASE (compares no items)
    and POP (no index), fitted; an NCAE not fitted."""
    fit = {"implicit": NCAE(**NCAE_SETTINGS, feedback="implicit", device="cpu"),
           "explicit": NCAE(**NCAE_SETTINGS, feedback="explicit", device="cpu"),
           "ease": make_model({"model": "ease"}, device="cpu"),
           "pop": make_model({"model": "pop"}, device="cpu")}
    for model in fit.values():
        model.fit(TRAIN, **({"verbose": False} if isinstance(model, NCAE) else {}))
    return {**fit, "unfit": NCAE(**NCAE_SETTINGS, device="cpu")}


NEW_USER = sp.csr_matrix(np.ones((1, ITEMS), np.float32))
RAISING = {        # a call that raises, and the function whose docstring must list its error
    "recommend n": (Model.recommend, lambda q: q["implicit"].recommend([0], n=0)),
    "recommend index": (Model.recommend, lambda q: q["implicit"].recommend([0], index="x")),
    "recommend flag": (Model.recommend, lambda q: q["implicit"].recommend([0],
                                                                          filter_seen="no")),
    "recommend unknown": (Model.recommend, lambda q: q["implicit"].recommend([USERS + 5])),
    "recommend a set": (Model.recommend, lambda q: q["implicit"].recommend({0})),
    "recommend unfit": (Model.recommend, lambda q: q["unfit"].recommend([0])),
    "recommend no index": (Model.recommend, lambda q: q["pop"].recommend(
        [0], index="approximate")),
    "recommend_new n": (Model.recommend_new, lambda q: q["implicit"].recommend_new(NEW_USER,
                                                                                   n=0)),
    "recommend_new flag": (Model.recommend_new, lambda q: q["implicit"].recommend_new(
        NEW_USER, filter_seen="no")),
    "recommend_new unknown": (Model.recommend_new, lambda q: q["implicit"].recommend_new(
        NEW_USER, items=[ITEMS + 2])),
    "recommend_new shape": (Model.recommend_new, lambda q: q["implicit"].recommend_new(
        NEW_USER[:, 1:])),
    "recommend_new unfit": (Model.recommend_new, lambda q: q["unfit"].recommend_new(NEW_USER)),
    "recommend_new unsupported": (Model.recommend_new, lambda q: q["explicit"].recommend_new(
        NEW_USER)),
    "similar_items n": (Model.similar_items, lambda q: q["implicit"].similar_items([0], n=0)),
    "similar_items unknown": (Model.similar_items, lambda q: q["implicit"].similar_items(
        [ITEMS + 2])),
    "similar_items a set": (Model.similar_items, lambda q: q["implicit"].similar_items({0})),
    "similar_items unfit": (Model.similar_items, lambda q: q["unfit"].similar_items([0])),
    "similar_items unsupported": (Model.similar_items, lambda q: q["ease"].similar_items([0])),
    "evaluate flag": (Model.evaluate, lambda q: q["implicit"].evaluate(TEST, per_user="no")),
    "evaluate shape": (Model.evaluate, lambda q: q["implicit"].evaluate(TEST[1:])),
    "evaluate unfit": (Model.evaluate, lambda q: q["unfit"].evaluate(TEST)),
    "evaluate popularity": (Model.evaluate, lambda q: q["explicit"].evaluate(
        TEST, popularity=True)),
    "evaluator flag": (Model.evaluator, lambda q: q["implicit"].evaluator(TEST,
                                                                          popularity="no")),
    "evaluator shape": (Model.evaluator, lambda q: q["implicit"].evaluator(TEST[1:])),
    "evaluator unfit": (Model.evaluator, lambda q: q["unfit"].evaluator(TEST)),
    "evaluator popularity": (Model.evaluator, lambda q: q["explicit"].evaluator(
        TEST, popularity=True)),
    "save unfit": (Model.save, lambda q: q["unfit"].save("model.npz")),
    "save nowhere": (Model.save, lambda q: q["implicit"].save("/no/such/folder/model.npz")),
    "predict unknown": (RatingModel.predict, lambda q: q["implicit"].predict([USERS + 5], [0])),
    "predict lengths": (RatingModel.predict, lambda q: q["implicit"].predict([0, 1], [0])),
    "predict unfit": (RatingModel.predict, lambda q: q["unfit"].predict([0], [0])),
    "item_index unfit": (RatingModel.item_index, lambda q: q["unfit"].item_index()),
    "load_model missing": (load_model, lambda q: load_model("/no/such/model.npz")),
    "load_model device": (load_model, lambda q: load_model("model.npz", device="tpu")),
    "NCAE.load device": (NCAE.load, lambda q: NCAE.load("model.npz", device="tpu")),
}


def listed_under_raises(function) -> list[str]:
    """The errors a numpydoc docstring's Raises section names."""
    doc = inspect.getdoc(function)
    section = doc.partition("\nRaises\n------\n")[2]
    section = re.split(r"\n\n(?=\w+\n-+\n)", section)[0]          # up to the next section
    return [line for line in section.splitlines() if line and not line.startswith(" ")]


@pytest.mark.parametrize("call", RAISING)
def test_what_a_public_method_raises_is_listed_under_its_raises(call, queried, tmp_path,
                                                                 monkeypatch):
    """Before: recommend's Raises named no SettingError (a bad n, index or filter_seen) nor
    NotFitted, similar_items and evaluate had no Raises at all, load_model's no SettingError
    (a device that is none), ..."""
    function, raising = RAISING[call]
    monkeypatch.chdir(tmp_path)
    queried["implicit"].save("model.npz")
    with pytest.raises(NcaeError) as raised:
        raising(queried)
    assert type(raised.value).__name__ in listed_under_raises(function)


def test_the_ids_cannot_change_under_the_lookups_sorted_from_them(fitted, tmp_path):
    """A model's ids, fit or loaded, are read-only: its lookups sort them once."""
    _, _, model = fitted
    model.save(tmp_path / "model.npz")
    loaded = load_model(tmp_path / "model.npz", device="cpu")
    for ids in (model.user_ids, model.item_ids, loaded.user_ids, loaded.item_ids):
        with pytest.raises(ValueError, match="read-only"):
            ids[0] = ids[1]
    assert model.recommend([USERS - 1, 0], n=N)[0].shape == (2, N)


def best_first(scores: np.ndarray) -> bool:
    """Whether a row's scores fall from the first, its padding (-inf) last."""
    real = scores > -np.inf
    return bool(real[:real.sum()].all() and np.all(np.diff(scores[real]) <= 0))


def answered(model, supported: bool, query):
    """query()'s answer where the model has the query; else None, once query() raised
    Unsupported naming the model."""
    if supported:
        return query()
    with pytest.raises(Unsupported, match=type(model).__name__):
        query()
    return None


def test_a_user_or_item_without_interactions_is_ranked_or_given_no_items(fitted):
    """A model that scores a user from their interactions alone has nothing to rank one with
    none by: its row is padding, no items. Before: EASE, item-kNN, RP3beta and iALS gave the
    first item ids at a score of 0, BPR a user's untrained factors' random items. NCAE ranks
    them from its empty row's code, POP by popularity. No model compares an item with none
    (NCAE's vector of it is untrained, or an empty row's code): its row is padding, and it is
    no other item's neighbour."""
    name, case, model = fitted
    asked = {"recommend": lambda: model.recommend([EMPTY_USER, 0], n=N)}
    if case.new_users != "no":
        empty_row = sp.csr_matrix((1, ITEMS))
        asked["recommend_new"] = lambda: model.recommend_new(sp.vstack([empty_row, TRAIN[0]]),
                                                             n=N)
    if case.similar:
        asked["similar_items"] = lambda: model.similar_items([EMPTY_ITEM, 0], n=N)
    for query, ask in asked.items():
        items, scores = ask()
        assert np.isfinite(scores[1]).all() and (items[1] >= 0).all(), query
        if case.from_history or query == "similar_items":
            assert (items[0] == -1).all() and (scores[0] == -np.inf).all(), query
            assert query != "similar_items" or EMPTY_ITEM not in items[1]
        else:
            assert np.isfinite(scores[0]).all() and (items[0] >= 0).all(), query
    if name == "pop":            # by hand: the most interactions first, ties to the lower id
        want = np.lexsort((np.arange(ITEMS), -SEEN.sum(axis=0)))[:N]
        np.testing.assert_array_equal(model.recommend([EMPTY_USER], n=N)[0][0], want)


def test_recommend_new_works_or_is_unsupported(fitted):
    name, case, model = fitted
    users = np.array([0, 1, EMPTY_USER, 5])
    answer = answered(model, case.new_users != "no", lambda: model.recommend_new(TRAIN[users],
                                                                                 n=N))
    if answer is None:
        return
    items, scores = answer
    assert items.shape == scores.shape == (len(users), N)
    for row, u in enumerate(users):
        assert not SEEN[u, items[row]].any() and best_first(scores[row])
    if case.new_users == "same":         # the row of a fit user is that user
        want_items, want_scores = model.recommend(users, n=N)
        np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(items[:, 0], want_items[:, 0])


def test_times_for_a_model_without_recency_are_refused_not_ignored(fitted):
    """Before: recommend_new read times= and ranked as without them (or raised scipy's
    ValueError on times it could not read)."""
    _, case, model = fitted
    if case.new_users == "no":
        return
    for times in (TRAIN[:2], "2024-03-01"):
        with pytest.raises(DataError, match="does not weigh a user's interactions by recency"):
            model.recommend_new(TRAIN[:2], n=N, times=times)


def test_similar_items_work_or_are_unsupported(fitted):
    name, case, model = fitted
    asked = np.array([0, 2, EMPTY_ITEM])
    answer = answered(model, case.similar, lambda: model.similar_items(asked, n=N))
    if answer is None:
        return
    items, similarities = answer
    assert items.shape == similarities.shape == (len(asked), N)
    for row, item in enumerate(asked):
        assert item not in items[row] and best_first(similarities[row])
    with pytest.raises(UnknownIds):
        model.similar_items([ITEMS + 1], n=N)


def test_refit_makes_a_model_of_the_same_settings(fitted):
    name, case, model = fitted
    refit = model.refit(TRAIN + VALID)
    assert type(refit) is type(model)
    if hasattr(model, "best_iteration"):            # iALS, BPR: the count chosen on VALID
        assert 1 <= model.best_iteration <= model.settings["iterations"]
        assert refit.settings["iterations"] == model.best_iteration
    chosen = {k: v for k, v in refit.settings.items() if k not in ("iterations", "epochs")}
    assert chosen == {k: v for k, v in model.settings.items() if k not in ("iterations",
                                                                           "epochs")}


@pytest.mark.parametrize("name", PARAMS)
def test_a_fit_without_validation_refits_the_count_it_ran(name):
    """Nothing chosen: best_epoch is the epochs (iterations) run, and refit runs as many.
    Before: NCAE's was 0, and its refit refused 'epochs must be an integer >= 1'."""
    settings = CASES[name].settings
    model = make_model(settings, device="cpu").fit(TRAIN)
    ran = settings.get("epochs", settings.get("iterations"))             # None: solved at once
    expected = {"item": ran, "user": ran} if settings.get("based") == "both" else ran
    assert model.best_epoch == expected and model.best_validation is None
    assert model.refit(TRAIN + VALID).best_epoch == expected


@pytest.mark.parametrize("settings", [{}, {"based": "both"}], ids=["ncae", "blend"])
def test_a_records_patience_is_kept_by_a_fit_without_validation(settings, tmp_path):
    """A whole record's patience (make_model's, as the trainer keeps a recipe's), a refit's
    and a loaded file's train every epoch without validation, as before; only a patience named
    in NCAE(...) or BlendedNCAE(...) is refused there."""
    record = {**NCAE_SETTINGS, **settings, "patience": 1}
    model = make_model(record, device="cpu").fit(TRAIN, verbose=False)
    assert len(model.history) == NCAE_SETTINGS["epochs"] * (1 + bool(settings))
    named = (BlendedNCAE if settings else NCAE)(device="cpu", **NCAE_SETTINGS, patience=1)
    refit = named.fit(TRAIN, validation=VALID, verbose=False).refit(TRAIN + VALID,
                                                                     verbose=False)
    assert refit.settings == model.settings
    refit.save(tmp_path / "model.npz")
    loaded = load_model(tmp_path / "model.npz", device="cpu")
    assert loaded.partial_fit(TRAIN, epochs=1, verbose=False).settings == model.settings


@pytest.mark.parametrize("name", PARAMS)
def test_a_validation_part_with_nothing_to_score_is_refused(name):
    """No entry, or only cold ones (scored apart): before, NCAE refused them, but iALS and BPR
    kept iteration 1 (every figure NaN, none better) and the others' best_validation was NaN."""
    model = make_model(CASES[name].settings, device="cpu")
    use = {"ials": "choose the iteration count on", "bpr": "choose the iteration count on"}.get(
        name, "choose the epoch on" if "model" not in CASES[name].settings else "score")
    cold = sp.csr_matrix(([3.0], ([EMPTY_USER], [0])), shape=TRAIN.shape)    # no fit entry
    for validation, says in ((sp.csr_matrix(TRAIN.shape), f"validation has no entries: nothing "
                              f"to {use}; leave it out (validation=None)"),
                             (cold, f"validation: all 1 entries are of users or items with no "
                              f"training entry (cold, scored apart): none is left to {use}")):
        with pytest.raises(DataError, match=re.escape(says)):
            model.fit(TRAIN, validation=validation)
        assert model.data is None                   # as it was: not fitted


class Stop(Exception):
    """What a callback raises to end a fit (tune's pruner raises its own)."""


def stop_at_the_second(model, record: dict) -> None:
    if record["epoch"] == 2:
        raise Stop


@pytest.mark.parametrize("name", [p for p in PARAMS if {"epochs", "iterations"} & set(
    CASES[p.values[0]].settings)])
def test_a_fit_its_callback_stops_leaves_the_model_as_it_was(name):
    """Before: a baseline's stopped fit kept the new fit data and the stopped iteration's
    factors beside the last fit's best_epoch and figures (a model never fitted answered
    recommend with them); NCAE's put the model back as it was."""
    settings = CASES[name].settings
    model = make_model(settings, device="cpu")
    with pytest.raises(Stop):
        model.fit(TRAIN, validation=VALID, callback=stop_at_the_second)
    with pytest.raises(NotFitted):
        model.recommend([0], n=N)
    model.fit(TRAIN, validation=VALID)
    users = np.arange(USERS)
    before = (model.recommend(users, n=N), model.best_epoch, model.best_validation)
    with pytest.raises(Stop):
        model.fit(TRAIN[:20], validation=VALID[:20], callback=stop_at_the_second)
    assert len(model.user_ids) == USERS
    after = (model.recommend(users, n=N), model.best_epoch, model.best_validation)
    for got, want in zip(after[0], before[0]):
        np.testing.assert_array_equal(got, want)
    assert after[1:] == before[1:]


def test_ease_keeps_its_solution_in_the_smaller_space(tmp_path):
    """Fewer users than items: the file holds K⁻¹X and diag A, no items x items B; the scores
    are still X B's, and load back bit for bit."""
    few = TRAIN[:20]                                                         # (20, 30)
    model = make_model({"model": "ease", "l2": 3.0}, device="cpu").fit(few)
    _, arrays = model.contents()
    assert {"Q", "a"} <= set(arrays) and "B" not in arrays
    X = (few.toarray() > 0).astype(np.float64)
    P = np.linalg.inv(X.T @ X + 3.0 * np.eye(ITEMS))
    users = np.arange(20)
    np.testing.assert_allclose(model._scores(users), X @ (np.eye(ITEMS) - P / np.diag(P)),
                               rtol=1e-6, atol=1e-9)
    model.save(tmp_path / "ease.npz")
    for got, want in zip(load_model(tmp_path / "ease.npz").recommend(users, n=N),
                         model.recommend(users, n=N)):
        np.testing.assert_array_equal(got, want)


def test_every_model_file_recommends_through_the_command(fitted, tmp_path):
    name, case, model = fitted
    path = tmp_path / "model.npz"
    model.save(path)
    out = io.StringIO()
    with redirect_stdout(out):
        assert recommend_command.main([str(path), "--users", "0,1", "-n", "3",
                                       "--device", "cpu"]) == 0
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    items, _ = model.recommend([0, 1], n=3)
    assert [row[2] for row in rows[1:]] == [str(i) for i in items.ravel()]


def test_a_numpy_bool_is_taken_for_a_flag(fitted):
    """A flag refuses what is not a bool (test_a_misused_query...), and takes numpy's bool as
    Python's: the same recommendations, per_user's table."""
    _, _, model = fitted
    for flag in (False, True):
        as_python = model.recommend([0, 1], n=N, filter_seen=flag)[0]
        as_numpy = model.recommend([0, 1], n=N, filter_seen=np.bool_(flag))[0]
        np.testing.assert_array_equal(as_numpy, as_python)
    assert "clusters" in model.evaluate(TEST, per_user=np.True_)


@pytest.mark.parametrize("call, method", [
    (lambda: EASE.recommend(x=1), "recommend"), (lambda: EASE.recommend(), "recommend"),
    (lambda: NCAE.fit(), "fit"),
    # the users given where the model goes: before, AttributeError "'list' object has no
    # attribute '_named'"
    (lambda: EASE.recommend([0, 1], n=N), "recommend")],
    ids=["a keyword", "nothing", "NCAE's fit", "the users first"])
def test_a_method_called_on_its_class_says_to_call_it_on_a_model(call, method):
    """A model's method called on its class, not on a model, is the package's SettingError
    saying so: before, IndexError from inside arguments_checked, which named the model in its
    refusal by the first argument, where there was none."""
    with pytest.raises(SettingError, match=re.escape(
            f"{method} is a method of a model: call it on one, model.{method}(...), not on "
            "its class")):
        call()


def test_the_factory_refuses_what_it_cannot_make():
    # a keyword the factory does not take: before, TypeError "unexpected keyword argument"
    with pytest.raises(SettingError, match=re.escape(
            "devic is not an argument of make_model (it takes settings, device and shard); "
            "did you mean device?")):
        make_model({"model": "ease"}, devic="cpu")
    with pytest.raises(SettingError, match=re.escape(
            "devic is not an argument of load_model (it takes path and device); did you mean "
            "device?")):
        load_model("model.npz", devic="cpu")
    with pytest.raises(SettingError, match=re.escape(
            "devic is not an argument of NCAE.load (it takes path and device); did you mean "
            "device?")):
        NCAE.load("model.npz", devic="cpu")
    with pytest.raises(SettingError, match="model must be one of ncae, ease"):
        make_model({"model": "svd"})
    with pytest.raises(SettingError, match="factors is not a setting of EASE"):
        make_model({"model": "ease", "factors": 3})
    with pytest.raises(SettingError, match="k must be an integer >= 1"):
        make_model({"model": "item-knn", "k": 2.5})
    with pytest.raises(SettingError, match="shard is for an item- or user-based NCAE"):
        make_model({"model": "pop"}, shard="columns")
    with pytest.raises(SettingError, match="loss multinomial's softmax spans every column"):
        make_model({"feedback": "implicit", "loss": "multinomial"}, shard="columns")
    with pytest.raises(SettingError, match="loss is for implicit feedback"):
        make_model({"loss": "multinomial"})
    with pytest.raises(SettingError, match="BlendedNCAE"):
        NCAE(based="both")
    assert isinstance(make_model({"based": "both"}, device="cpu"), BlendedNCAE)


PROTOCOL_KEYS = {"best_epoch", "best_validation", "still_improving", "history",
                 "seconds_select", "seconds_fit", "test"}


@pytest.mark.parametrize("name", PARAMS)
def test_every_model_goes_through_the_one_protocol_with_the_same_keys(name):
    """select_refit_test, the one protocol function: for every model the same result keys
    (POP beside the implicit ones), the epoch or iteration count chosen on validation, the
    refit model of the same settings, and test figures that are the refit model's evaluate of
    the test part, excluding training + validation; the history of both fits."""
    case = CASES[name]
    _, split = splits.given_split(from_matrix(TRAIN, "train"), from_matrix(TEST, "test"),
                                  from_matrix(VALID, "valid"))
    selected = make_model(case.settings, device="cpu")
    with redirect_stdout(io.StringIO()) as said:
        model, result = select_refit_test(selected, split)
    assert PROTOCOL_KEYS <= set(result) and ("pop" in result) == case.implicit
    assert model is not selected and result["history"] == selected.history + model.history
    assert result["best_validation"] is not None
    counted = "epochs" in case.settings or "iterations" in case.settings
    # iALS and BPR count iterations, a model fit in one go nothing (before: "scoring
    # validation after every epoch" of each)
    unit = next((unit for unit in ("epoch", "iteration") if f"{unit}s" in case.settings), None)
    scored = f"after every {unit}" if unit else "once fit"
    assert f"select: training on the training part, scoring validation {scored}\n" in (
        said.getvalue()), said.getvalue()
    assert (result["best_epoch"] is not None) == counted
    assert {k: v for k, v in model.settings.items() if k not in ("epochs", "iterations")} == {
        k: v for k, v in make_model(case.settings).settings.items()
        if k not in ("epochs", "iterations")}
    again = model.evaluate(split.test, exclude=split.fold_validation().train, per_user=True)
    for key, value in again.items():
        if key != "clusters":
            assert result["test"][key] == pytest.approx(value), key


@pytest.mark.parametrize("name", ["ncae-implicit", "ease"])
def test_without_validation_the_protocol_tests_the_model_it_fit(name):
    """No validation part chose a count to refit with: the model fit on training is the one
    tested, its history that fit's alone, and no refit is said."""
    _, split = splits.given_split(from_matrix(TRAIN, "train"), from_matrix(TEST, "test"))
    selected = make_model(CASES[name].settings, device="cpu")
    with redirect_stdout(io.StringIO()) as said:
        model, result = select_refit_test(selected, split)
    assert model is selected and result["history"] == selected.history
    assert "refit" not in said.getvalue()
