"""The models NCAE is compared with on implicit feedback, each fit on a users x items matrix X of
ones and scoring every item for given users:

- EASE (Steck, WWW 2019): the item-item weights B = argmin ||X - XB||² + λ||B||² with
  diag(B) = 0, in closed form: P = (XᵀX + λI)⁻¹, B = I - P diag(1/diag(P)); a user's scores are
  their row of XB. Solved in float64 in the smaller of the item and user spaces (`ease`): where
  users are fewer than items, through users x users and users x items matrices alone. Settings
  λ, and recency_boost and recency_halflife: with a boost > 0 the row that multiplies B holds
  the user's recency weights (ncae_cuda.data.recency), as NCAE scores from them; B is still fit
  on X.
- iALS (Hu, Koren, Volinsky, ICDM 2008): the `implicit` library's AlternatingLeastSquares, which
  fits user and item factors to 1 at observed entries weighted `alpha` and to 0 at all others
  weighted 1, with L2 `regularization` on both (conjugate-gradient steps); scores u·v.
- BPR (Rendle et al., UAI 2009): the `implicit` library's BayesianPersonalizedRanking, SGD on
  the log-sigmoid of the score gap between an observed and a sampled unobserved item.
- POP: every item scored by its number of interactions in X, for every user alike.
- item-kNN (cosine with shrinkage; settings k, shrink) and RP3beta (a popularity-penalised
  random walk; settings alpha, beta, k): item-item weights kept sparse, each item's k largest
  (ncae_cuda.baselines.neighbours, scipy alone); a user's scores are their row of X times them,
  or with recency_boost > 0 (as EASE) their row of recency weights.

iALS and BPR need the optional extra (pip install -e ".[baselines]"); they fit on the GPU where
the `implicit` build has CUDA and the caller asks for it. A fit takes the training part's
Interactions (X: its matrix of ones, `ones`) and hands `check` the Scores, users (B,) ->
(B, n_items) float32 on the host, at each point of its `along` settings: those one fit is
scored at every value of, so it is not repeated for each (iALS's and BPR's iteration counts,
checked as the fit passes them; EASE's recency weights, which change the rows that multiply B
and not B; item-kNN's and RP3beta's k, each the first k of the largest k's neighbours).
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ..data.interactions import Interactions
from ..model import metrics
from ..model.config import DEFAULTS, UNREAD, Config, without_unread
from ..model.estimator import OutOfMemory
from ..model.fitdata import scored_rows
from ..ops import BackendUnavailable
from . import neighbours

Scores = Callable[[np.ndarray], np.ndarray]          # (B,) users -> (B, n_items) float32
Check = Callable[[dict, Scores], None]               # (a point of the along settings, its Scores)
EASE_COPIES = 3                   # items x items float64 arrays alive at once: XᵀX + λI, P, B
EASE_ROWS = 2                     # users x items ones in the user space: K⁻¹X, a batch's scores
# the recency weights a row-scoring model (EASE, item-kNN, RP3beta) may score a user's row by,
# as NCAE does: off in the grids unless an override tries boosts (NCAE's default); a halflife
# changes no score without a boost
RECENCY = {"recency_boost": (DEFAULTS.recency_boost,),
           "recency_halflife": (DEFAULTS.recency_halflife,)}
RECENCY_ONLY_WITH = tuple((name, rule.other) for rule in UNREAD for name in rule.names
                          if name in RECENCY)


@dataclass(frozen=True)
class Baseline:
    name: str                               # as tables print it
    grid: dict                              # each setting chosen on validation: its values
    fit: Callable                           # fit(part, settings, points, check, seed, gpu)
    along: tuple[str, ...] = ()             # settings of the grid scored along one fit
    # (setting, other): the setting changes no score where the other is 0 (config.UNREAD's:
    # EASE's recency halflife without a boost); a --grid of it needs the other's
    only_with: tuple[tuple[str, str], ...] = ()
    library: str | None = None              # the module it is fit with, where an extra brings it

    def relevant(self, settings: dict) -> dict:
        """settings less those that change no score (config.unread's, by the rules whose other
        the point holds: a halflife where its boost is 0): two points of a grid are
        equivalent, and scored once, where this is the same for both."""
        return without_unread(settings, among=settings)


def ones(part: Interactions) -> sp.csr_matrix:
    """(users, items) float32 X: 1 at every interaction of `part`, what the baselines fit on."""
    return part.to_csr("user", implicit=True)


def fit_ease(part: Interactions, settings: dict, points: list[dict], check: Check,
             seed: int = 0, gpu: bool = False) -> None:
    """EASE (the module's docstring): solved once, then at each point (recency_boost,
    recency_halflife) a user's scores are their row of its weights times B; seed and gpu are
    unused. DataError where a boost is > 0 and the part has no timestamps."""
    times_b = ease(ones(part), settings["l2"])
    for point in points:
        rows = weighted_rows(part, point)                                 # (users, items)
        check(point, lambda users, rows=rows: times_b(rows[users]).astype(np.float32))


def weighted_rows(part: Interactions, point: dict) -> sp.csr_matrix:
    """(users, items) the rows a user's scores are taken from at `point`: ones, or with its
    recency_boost > 0 the recency weights (DataError where the part has no timestamps)."""
    recency = {k: v for k, v in point.items() if k in RECENCY}
    return scored_rows(part, Config(feedback="implicit", **recency).resolved(),
                       "the training part")


def ease(X: sp.csr_matrix, l2: float, space: str | None = None) -> EaseSolution:
    """EASE's weights B for X, solved in float64 in the smaller of the user and item spaces
    (or `space`, "users" or "items"): with fewer users than items, by the push-through identity
    P = (I - Xᵀ K⁻¹ X) / λ, K = XXᵀ + λI (users x users), so that B = offdiag(A) diag(1 / (1 -
    diag A)) with A = Xᵀ (K⁻¹ X), and no items x items matrix is formed. OutOfMemory, naming
    the sizes, where the chosen space's matrices would not fit in the memory there is."""
    users, items = X.shape
    if (space or ("users" if users < items else "items")) == "items":
        return EaseSolution(X, {"B": ease_weights(X, l2)})
    _fits(f"1 users x users and {EASE_ROWS} users x items matrices: {users:,} x ({users:,} + "
          f"{EASE_ROWS} x {items:,}) float64", 8 * users * (users + EASE_ROWS * items))
    # scipy.linalg here, not with the package: only this solve needs it, and it is a large
    # share of a process's start
    import scipy.linalg
    X64 = X.astype(np.float64)
    K = (X64 @ X64.T).toarray()                                           # (users, users)
    K[np.diag_indices(users)] += l2
    Q = scipy.linalg.cho_solve(scipy.linalg.cho_factor(K, overwrite_a=True), X64.toarray(),
                               overwrite_b=True)                          # (users, items) K⁻¹X
    a = np.asarray(X64.multiply(Q).sum(axis=0)).ravel()                   # (items,) diag A < 1
    return EaseSolution(X, {"Q": Q, "a": a})


class EaseSolution:
    """rows (B, items) -> rows @ B (B, items) float64, B EASE's weights for the fit matrix X,
    from what `ease` solved: B itself (items x items) in the item space; in the user space
    K⁻¹X (users x items) and diag A (items,), B applied as rows Xᵀ K⁻¹X less the diagonal,
    scaled by 1 / (1 - diag A). arrays() is what a model file keeps of it (X is the fit
    interactions, kept beside it)."""

    SPACES = ({"B"}, {"Q", "a"})           # the arrays of the item space's, the user space's

    def __init__(self, X: sp.csr_matrix, arrays: dict):
        if set(arrays) not in self.SPACES:
            raise ValueError(f"EASE's solution holds {sorted(arrays)}; one of "
                             f"{[sorted(s) for s in self.SPACES]} was expected")
        self.X, self._arrays = sp.csr_matrix(X, dtype=np.float64), arrays

    def arrays(self) -> dict:
        return self._arrays

    def __call__(self, rows: sp.csr_matrix) -> np.ndarray:
        if "B" in self._arrays:
            return np.asarray(rows @ self._arrays["B"])
        Q, a = self._arrays["Q"], self._arrays["a"]
        rows = sp.csr_matrix(rows, dtype=np.float64)
        scores = (rows @ self.X.T).toarray() @ Q                          # (B, items) rows A
        own = rows.multiply(a).tocoo()                    # the diagonal of A, which B holds 0
        scores[own.row, own.col] -= own.data
        return scores * (1 / (1 - a))


def ease_weights(X: sp.csr_matrix, l2: float) -> np.ndarray:
    """(n_items, n_items) float64 B of EASE in the item space: P = (XᵀX + λI)⁻¹,
    B = I - P diag(1/diag(P)); OutOfMemory, naming the sizes, where the items x items matrices
    would not fit in the memory there is."""
    n = X.shape[1]
    _fits(f"{EASE_COPIES} items x items matrices: {EASE_COPIES} x {n:,} x {n:,} float64",
          EASE_COPIES * 8 * n * n)
    G = (X.T @ X).toarray().astype(np.float64)
    G[np.diag_indices(n)] += l2
    P = np.linalg.inv(G)
    B = P / -np.diag(P)
    B[np.diag_indices(n)] = 0.0
    return B


def _fits(matrices: str, need: int) -> None:
    """OutOfMemory where EASE's `matrices`, `need` bytes, would not fit in the memory there is."""
    have = available_memory()
    if need > have:
        raise OutOfMemory(f"EASE needs {matrices} = {need / 2**30:,.1f} GiB, and "
                          f"{have / 2**30:,.1f} GiB of memory is available: leave EASE out "
                          "(--models)")


def available_memory() -> int:
    """Bytes of memory a new allocation can have now without swapping: the kernel's estimate
    (MemAvailable: free pages and the page cache it can drop), else the free pages alone."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024                    # given in kB
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def fit_pop(part: Interactions, settings: dict, points: list[dict], check: Check,
            seed: int = 0, gpu: bool = False) -> None:
    """Every user's scores are the items' interaction counts in the part."""
    counts = metrics.popularity_scores(ones(part))                       # (items,)
    for point in points:
        check(point, lambda users: np.broadcast_to(counts, (len(users), len(counts))))


def fit_item_knn(part: Interactions, settings: dict, points: list[dict], check: Check,
                 seed: int = 0, gpu: bool = False) -> None:
    """item-kNN (the module's docstring): each item's neighbours found once, at the largest k
    of `points`; seed and gpu are unused."""
    nearest = neighbours.cosine(ones(part), settings["shrink"], _most(points, "k"))
    for point in points:                                        # nearest: (items, items)
        check(point, _times(weighted_rows(part, point), neighbours.first_k(nearest, point["k"]).T))


def fit_rp3beta(part: Interactions, settings: dict, points: list[dict], check: Check,
                seed: int = 0, gpu: bool = False) -> None:
    """RP3beta (the module's docstring): its weights found once, at the largest k of
    `points`; seed and gpu are unused."""
    walks = neighbours.rp3beta(ones(part), settings["alpha"], settings["beta"],
                               _most(points, "k"))
    for point in points:
        check(point, _times(weighted_rows(part, point), neighbours.first_k(walks, point["k"])))


def _times(rows: sp.csr_matrix, W: sp.spmatrix) -> Scores:
    """A user's scores: their row of `rows` (ones, or recency weights) times the (items,
    items) weights W."""
    rows, W = sp.csr_matrix(rows, dtype=np.float32), sp.csr_matrix(W, dtype=np.float32)
    return lambda users: (rows[users] @ W).toarray()


def fit_ials(part: Interactions, settings: dict, points: list[dict], check: Check,
             seed: int = 0, gpu: bool = False) -> None:
    with threadpool_limits(1, "blas"):    # implicit's advice: its own threads, not BLAS's
        model = ials_model(settings, _most(points, "iterations"), seed, gpu)
        fit_factors(model, ones(part), points, check)


def fit_bpr(part: Interactions, settings: dict, points: list[dict], check: Check,
            seed: int = 0, gpu: bool = False) -> None:
    with threadpool_limits(1, "blas"):
        model = bpr_model(settings, _most(points, "iterations"), seed, gpu)
        fit_factors(model, ones(part), points, check)


def ials_model(settings: dict, iterations: int, seed: int, gpu: bool = False):
    """The `implicit` library's iALS of `settings` (factors, regularization, alpha), unfit; to
    be fit and used under threadpool_limits(1, "blas"), as implicit advises."""
    return _implicit().als.AlternatingLeastSquares(
        factors=settings["factors"], regularization=settings["regularization"],
        alpha=settings["alpha"], iterations=iterations, use_gpu=gpu, random_state=seed)


def bpr_model(settings: dict, iterations: int, seed: int, gpu: bool = False):
    """The `implicit` library's BPR of `settings` (factors, learning_rate, regularization),
    unfit, on one thread: implicit's BPR updates factors from several threads at once
    (Hogwild), so two threads give another model every run."""
    return _implicit().bpr.BayesianPersonalizedRanking(
        factors=settings["factors"], learning_rate=settings["learning_rate"],
        regularization=settings["regularization"], iterations=iterations, use_gpu=gpu,
        num_threads=1, random_state=seed)


def _most(points: list[dict], setting: str) -> int:
    """The largest value of `setting` (one of the along settings) in `points`."""
    return max(point[setting] for point in points)


def fit_factors(model, X: sp.csr_matrix, points: list[dict], check: Check) -> None:
    """Fit an `implicit` factor model, handing check the Scores at each point's iteration
    count as the fit passes it."""
    at = {point["iterations"]: point for point in points}

    def callback(iteration, *progress):       # iALS and BPR report other figures after it
        if iteration + 1 in at:
            check(at[iteration + 1], _factor_scores(model))
    model.fit(X.astype(np.float32), show_progress=False, callback=callback)


def _factor_scores(model) -> Scores:
    """u·v of a snapshot of the model's factors (a fit goes on updating them in place)."""
    users, items = factors(model)
    return lambda rows: users[rows] @ items.T


def factors(model) -> tuple[np.ndarray, np.ndarray]:
    """(users, factors), (items, factors): a copy of an `implicit` model's factors, on the
    host."""
    model = model.to_cpu() if hasattr(model, "to_cpu") else model
    return np.array(model.user_factors), np.array(model.item_factors)


INSTALL = 'pip install -e ".[baselines]"'   # what brings each Baseline's library


def _implicit():
    try:
        import implicit.als
        import implicit.bpr
    except ImportError:
        raise BackendUnavailable(
            f"iALS and BPR are fit by the implicit library: {INSTALL}") from None
    return implicit


def implicit_has_gpu() -> bool:
    """Whether the installed `implicit` was built with CUDA (and finds a GPU)."""
    try:
        import implicit.gpu
    except ImportError:
        return False
    return implicit.gpu.HAS_CUDA


# The grids: the values tried on validation, in implicit's parametrisation for iALS and BPR
# (iALS's alpha: an observed entry's weight against an unobserved one's 1). Each is at least as
# wide as NCAE's default search (recipes/spaces/implicit.toml: 128 to 1024 hidden units, its
# regularization over two decades): factors to 1024, each regularization, alpha, learning rate
# and λ over decades around where ML-100K's validation part (split seed 0) chose (EASE's λ 200,
# iALS's regularization 10 and alpha 1, BPR's learning rate 0.001-0.003 over several hundred
# iterations). The default run on ML-100K takes 23 min on 2 CPU cores (iALS 12 min, BPR 10;
# item-kNN and RP3beta 2.2 min more).
# item-kNN's and RP3beta's span the ranges Dacrema et al. (RecSys 2019) search (k from 10 to
# 1000 neighbours, shrink from 0 to 1000, alpha 0-2, beta 0-1), and k past them: at split seed
# 0 Last.fm chose item-kNN's k 1000 and ML-100K RP3beta's beta 0.6, each its grid's edge then.
NEIGHBOURS = (10, 20, 50, 100, 200, 500, 1000, 2000)              # item-kNN's and RP3beta's k
BASELINES = {
    "ease": Baseline("EASE", {"l2": (3.0, 10.0, 30.0, 100.0, 200.0, 400.0, 800.0, 1600.0,
                                     3000.0, 10000.0, 30000.0), **RECENCY},
                     fit_ease, along=tuple(RECENCY), only_with=RECENCY_ONLY_WITH),
    "ials": Baseline("iALS", {"factors": (64, 128, 256, 512, 1024),
                              "regularization": (0.1, 1.0, 10.0, 100.0, 1000.0),
                              "alpha": (0.3, 1.0, 3.0, 10.0), "iterations": (5, 10, 20, 30, 50)},
                     fit_ials, along=("iterations",), library="implicit"),
    "bpr": Baseline("BPR", {"factors": (64, 256, 1024), "learning_rate": (0.001, 0.01, 0.1),
                            "regularization": (0.001, 0.01), "iterations": (50, 100, 200, 400)},
                    fit_bpr, along=("iterations",), library="implicit"),
    "pop": Baseline("POP", {}, fit_pop),
    "item-knn": Baseline("item-kNN", {"shrink": (0.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0,
                                                 500.0, 1000.0),
                                      "k": NEIGHBOURS, **RECENCY},
                         fit_item_knn, along=("k", *RECENCY), only_with=RECENCY_ONLY_WITH),
    "rp3beta": Baseline("RP3beta", {"alpha": (0.25, 0.5, 0.75, 1.0, 1.5),
                                    "beta": (0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0),
                                    "k": NEIGHBOURS, **RECENCY},
                        fit_rp3beta, along=("k", *RECENCY), only_with=RECENCY_ONLY_WITH),
}


def installed(models: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """The keys of `models` whose library is installed, and a line naming the others and what
    installs them ('' where none is left out): a default list draws only what can run."""
    missing = [key for key in models if BASELINES[key].library
               and importlib.util.find_spec(BASELINES[key].library) is None]
    kept = tuple(key for key in models if key not in missing)
    if not missing:
        return kept, ""
    names = ", ".join(BASELINES[key].name for key in missing)
    return kept, f"left out {names}: their library is not installed ({INSTALL})"


def model_list(text: str) -> tuple[str, ...]:
    """'ease,ials' -> ('ease', 'ials'), each a key of BASELINES; ValueError names one that is
    not."""
    names = tuple(dict.fromkeys(name.strip().lower() for name in text.split(",")))
    unknown = [name for name in names if name not in BASELINES]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a baseline (baselines: "
                         f"{', '.join(BASELINES)})")
    return names


def beside_ncae(text: str) -> tuple[str, ...]:
    """model_list's, for a table that has POP already: the trainer's, the experiments'."""
    models = model_list(text)
    if "pop" in models:
        raise ValueError("POP is in every implicit run's table already")
    return models
