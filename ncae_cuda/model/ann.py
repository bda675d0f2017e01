"""An approximate top-k: a faiss inner-product index over the items' vectors ([ann] extra).

A user's logit of item i is an inner product, so a user's best items are a maximum-inner-
product search. User-based: item i's vector is (V[i], c[i]) and the user's query (h, 1), h the
user's last hidden layer. Item-based: item i's vector is (code_i, 1), the last hidden layer of
its row, and user u's query (V[u], c[u]).

The index searches the items on a sphere: each item vector x gains one coordinate,
sqrt(R^2 - |x|^2) with R the largest item norm, and is divided by R; each query q is divided
by its norm and gains a 0. Every item is then of norm 1, so the inner product ranks them as
the distance does, and x'.q' = x.q / (R |q|) ranks them as the model does (the reduction of
Bachrach et al., RecSys 2014). Clustered as they came, the items of large norm drew most of
the others into a few lists, which every query then scanned, and the 4-bit codes lost the
items of small norm; on the sphere the lists are even and fewer of them find the same items
(bench/results/2026-11-28-cpu-ann-sphere). The index is faiss's inverted file (the items
clustered into `lists` by k-means; a query scans the `probes` lists nearest to it) of each
coordinate quantized to 4 bits, scanned in registers (faiss's "fast scan"), whose best
`refine` x k are scored again exactly on the stored float32 vectors; the logits returned are
the k found items' inner products with the query as given. bench/ann.py chose the settings
(docs/serving.md, "An approximate index") on generated item vectors; a trained model's cluster
less evenly and need more lists scanned, as many as its own data says: built for a model, the
index is calibrated on a sample of its users, the probes doubled until the index finds
`recall_target` of their exact top CALIBRATION_K (bench/results/2026-11-29-cpu-ann-trained-recall
found 16 probes finding 54-92% of three trained models' top 10).

A blend (based='both') scores a weighted sum of two models' ratings, not one inner product; a
sharded model's items live in several processes; the GPU's batched exact top-k is the GPU's
path: those refuse an index. similar_items stays exact: it ranks by cosine, not by this inner
product.

The index is saved beside the model's file (model.npz -> model.ann), keyed by the SHA-256 of
the item vectors and the settings, so that a changed model never searches a stale index: one
that does not match is rebuilt and saved again. A file there that is no index (a user's own) is
kept: the index is searched unsaved.
"""
from __future__ import annotations

import hashlib
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..data.atomic_file import atomic_write
from ..errors import NamingSettings, NcaeError
from ..machine import cores
from .evaluate import EVAL_BATCH, row_codes
from .modelfile import UNREADABLE, ZIP

log = logging.getLogger("ncae_cuda.ann")
INDEXES = ("exact", "approximate")           # recommend(index=...), --index
MISSING_EXTRA = "the approximate index needs the [ann] extra: pip install -e '.[ann]'"
SUFFIX = ".ann"                              # model.npz -> model.ann
BITS = 4                                     # a coordinate's code: 2^BITS centroids
LAYOUT = f"(x, sqrt(R^2 - |x|^2)) / R, IVF,PQx{BITS}fs,RFlat"  # in the digest: a saved index
                                             # of another layout is rebuilt
FIRST_ENTRY = b"digest.npy"                  # the first entry of the file save() writes
FIRST_NAME_AT = 30                           # where a zip names its first entry (after its
                                             # local header's fixed fields)
PARALLEL_QUERIES = 16                        # a search of as many queries runs on every core
CALIBRATION_K = 10                           # the top-k whose recall calibrates the probes
EXACT_FLOATS = 1 << 24                       # scores the calibration's exact top-k holds at once
CORES = cores()


class IndexUnavailable(NamingSettings, ValueError):
    """index='approximate' asked of a model or a machine it does not apply to; the settings
    its message names are spelled as the caller gives them (a command's flags, Python's
    keywords)."""


@dataclass(frozen=True)
class IndexSettings:
    """How the index is built and searched (defaults chosen by bench/ann.py).

    lists_per_sqrt : float
        Inverted lists per square root of the number of items (rounded to a power of two).
    probes : int
        Lists a query scans, at least.
    probe_share : float
        Share of the lists a query scans, where that is more than `probes`.
    refine : int
        Candidates scored exactly, as a multiple of the k asked for.
    train_per_list : int
        Items a list's k-means centroid is trained on, at most.
    recall_target : float
        Share of a sample of a model's users' exact top CALIBRATION_K (their seen items left
        out) that its index must find: the probes are doubled until it does, or every list is
        scanned (0: the probes as they are).
    calibration_users : int
        Users of the model (of some history) that sample holds, at most.
    """
    lists_per_sqrt: float = 2.0
    probes: int = 16
    probe_share: float = 1 / 64
    refine: int = 16
    train_per_list: int = 40
    recall_target: float = 0.95
    calibration_users: int = 256

    def lists(self, n_items: int) -> int:
        """Inverted lists for n_items, at least train_per_list items each."""
        wanted = 2 ** round(math.log2(max(self.lists_per_sqrt * math.sqrt(n_items), 1)))
        return int(max(1, min(wanted, n_items // self.train_per_list)))

    def probes_of(self, lists: int) -> int:
        """Lists a query scans, of `lists`."""
        return max(self.probes, round(self.probe_share * lists))


def faiss_module():
    """faiss, or IndexUnavailable naming the extra."""
    try:
        import faiss
    except ImportError:
        raise IndexUnavailable(MISSING_EXTRA) from None
    return faiss


def require(index: str) -> None:
    """IndexUnavailable naming the extra where `index` needs faiss and it is not installed: a
    command's check before it loads anything."""
    if index == "approximate":
        faiss_module()


def check_applies(model) -> None:
    """IndexUnavailable in a line where `model` cannot be searched through an index."""
    config = model.config
    if config.based == "both":
        raise IndexUnavailable("a blend ({based}) scores a weighted sum of two models' "
                               "ratings, not one inner product: use the exact top-k ({index})",
                               based="both", index=INDEXES[0])
    if model.comm is not None:
        raise IndexUnavailable("a sharded model's items live in several processes: use the "
                               "exact top-k ({index})", index=INDEXES[0])
    if model.ops.name != "cpu":
        raise IndexUnavailable(f"the index searches on the CPU; on {model.ops.name} the exact "
                               "batched top-k is the path ({index}, or {device})",
                               index=INDEXES[0], device="cpu")
    faiss_module()


def index_path(model_file: Path) -> Path:
    """Where the index of the model saved at `model_file` is kept: model.npz -> model.ann, a
    model saved as model.ann -> model.ann.ann (its index saved there replaced the model)."""
    model_file = Path(model_file)
    if model_file.suffix == SUFFIX:
        return model_file.with_name(model_file.name + SUFFIX)
    return model_file.with_suffix(SUFFIX)


def not_an_index(path: Path) -> str | None:
    """Why the file at `path` is not one an index may replace (someone's own, which no index
    overwrites), or None: nothing there (no file, or an empty one), or an index save() wrote,
    whole or damaged since (a zip whose first entry, named in its first bytes, is the
    digest)."""
    try:
        with open(path, "rb") as f:
            head = f.read(FIRST_NAME_AT + len(FIRST_ENTRY))
    except FileNotFoundError:
        return None
    except OSError as e:                                        # a folder, a file not readable
        return f"not an index file, or not readable ({e.strerror})"
    if not head or head.startswith(ZIP) and head[FIRST_NAME_AT:] == FIRST_ENTRY:
        return None
    return "not an index file"


class ItemIndex:
    """An index of item vectors (N, d), searched with query vectors (B, d); the items
    `left_out` (indices) are offered to no user (an explicit model's items of no fit rating:
    their vectors are untrained)."""

    def __init__(self, items: np.ndarray, settings: IndexSettings = IndexSettings(),
                 left_out: np.ndarray | None = None):
        self.items, self.settings = items, settings
        self.left_out = np.zeros(0, np.int64) if left_out is None else np.asarray(
            left_out, np.int64)
        self._left_out_selector = None      # their faiss selector, made by prepare_search
        self.digest = _digest(items, settings)
        self.index, self.probes = None, None
        self.built_seconds = None
        self.recall = None          # of the calibration's sample at the probes: calibrate()
        self.network, self.steps = None, None        # of the model it indexes, at its step

    @classmethod
    def for_model(cls, model, model_file: Path | None = None,
                  settings: IndexSettings = IndexSettings()) -> ItemIndex:
        """The model's index: read from beside `model_file` where it was built from these item
        vectors with these settings, else built (and saved there, when it can be); the items
        the model scores without their vectors left out of its searches."""
        check_applies(model)
        found = cls(_item_vectors(model), settings, model._cold_items())
        found.network, found.steps = model._net, int(model._net.counter[0])
        path = None if model_file is None else index_path(model_file)
        if path is not None and (theirs := not_an_index(path)):
            log.warning("%s: %s, kept as it is: the index is searched unsaved, built again at "
                        "each load; move that file to keep the index there", path, theirs)
            path = None
        if path is not None and found._read(path):
            log.info("index %s read (%s)", path, found.digest[:12])
            return found
        found.build()
        found.calibrate(*_calibration_sample(model, settings.calibration_users))
        log.info("index of %d items built in %.1f s (%s): %d of %d lists scanned find %.1f%% of "
                 "the exact top %d", len(found.items), found.built_seconds, found.digest[:12],
                 found.probes, found.lists(), 100 * found.recall, CALIBRATION_K)
        if path is not None:
            try:
                found.save(path)
            except NcaeError as e:             # a folder not writable: the index still serves
                log.warning("index not saved: %s", e)
        return found

    def fresh_for(self, model) -> bool:
        """Whether this is still the index of `model`'s items (a fit since replaces the
        network, or steps it)."""
        return model._net is self.network and int(model._net.counter[0]) == self.steps

    def build(self) -> None:
        faiss, s = faiss_module(), self.settings
        start = time.perf_counter()
        points = _on_sphere(self.items)                                        # (N, d + 1)
        n, d = points.shape
        lists = s.lists(n)
        # a code's k-means needs a point per centroid (faiss raised on fewer), and one item's
        # residual is 0, its 4-bit distance NaN: fewer items are kept as they are, in one list
        codes = f"PQ{d}x{BITS}fs" if n >= 2 ** BITS else "Flat"
        self.index = faiss.index_factory(
            d, f"IVF{lists},{codes},RFlat", faiss.METRIC_INNER_PRODUCT)
        # faiss warns of a k-means of under 39 points a centroid, a line for each coordinate's
        # code (hundreds, on every build of a catalogue under 640 items): the sample is the
        # settings' choice, and the bound is read by that warning alone
        ivf = faiss.downcast_index(faiss.extract_index_ivf(self.index))
        for clustering in (ivf.cp, *([ivf.pq.cp] if hasattr(ivf, "pq") else [])):
            clustering.min_points_per_centroid = 1
        sample = np.random.default_rng(0).permutation(n)[:lists * s.train_per_list]
        self.index.train(points[np.sort(sample)])
        self.index.add(points)
        self.built_seconds = time.perf_counter() - start
        self.prepare_search()

    def lists(self) -> int:
        """The index's inverted lists."""
        return faiss_module().extract_index_ivf(self.index).nlist

    def calibrate(self, queries: np.ndarray, users: np.ndarray, seen) -> None:
        """Scan as many lists as the settings' probes doubled until the index finds
        recall_target of the exact top CALIBRATION_K of `users` (B,), queries (B, d), each
        user's `seen` items (users x items CSR) left out; `recall` what they find. A user the
        index finds too few for counts whole: the exact top-k answers it."""
        exact = self.exact_top(queries, users, CALIBRATION_K, seen)              # (B, K)
        wanted = (exact >= 0).sum(axis=1)                                        # (B,)
        lists = self.lists()
        while True:
            found, _, short = self.top(queries, users, CALIBRATION_K, seen)     # (B, K)
            hits = (found[:, :, None] == exact[:, None, :]).any(axis=1) & (exact >= 0)
            shares = np.where(short, 1.0, hits.sum(axis=1) / np.maximum(wanted, 1))
            self.recall = float(shares[wanted > 0].mean()) if wanted.any() else 1.0
            if self.recall >= self.settings.recall_target or self.probes >= lists:
                return
            self.probes = min(2 * self.probes, lists)

    def exact_top(self, queries: np.ndarray, users: np.ndarray, k: int, seen) -> np.ndarray:
        """(B, k) the k items of the largest inner products with each query (B, d) of `users`,
        in no order, their `seen` items and left_out left out, -1 where none is left: a
        brute-force scan of every item, EXACT_FLOATS scores at a time (a million items: 16
        queries)."""
        n_items = len(self.items)
        k_here = min(k, n_items)
        out = np.full((len(users), k), -1, np.int64)
        batch = max(1, EXACT_FLOATS // max(n_items, 1))
        for start in range(0, len(users), batch):
            rows = slice(start, start + batch)
            scores = queries[rows] @ self.items.T                                # (b, N)
            scores[:, self.left_out] = -np.inf
            part = seen[users[rows]]
            scores[np.repeat(np.arange(part.shape[0]), np.diff(part.indptr)),
                   part.indices] = -np.inf
            best = np.argpartition(-scores, k_here - 1, axis=1)[:, :k_here]     # (b, k_here)
            out[rows, :k_here] = np.where(np.take_along_axis(scores, best, 1) > -np.inf, best, -1)
        return out

    def save(self, path: Path) -> None:
        faiss = faiss_module()
        blob = faiss.serialize_index(self.index)                          # (bytes,) uint8
        atomic_write(path, lambda f: np.savez(f, digest=np.array(self.digest), index=blob,
                                              probes=self.probes,
                                              recall=np.nan if self.recall is None else
                                              self.recall))

    def _read(self, path: Path) -> bool:
        """Take the index saved at `path` if it is this one's; False where it is missing,
        unreadable or another model's."""
        try:
            with np.load(path) as saved:
                if str(saved["digest"]) != self.digest:
                    log.info("index %s is of another model: rebuilding it", path)
                    return False
                self.index = faiss_module().deserialize_index(saved["index"])
                probes, recall = int(saved["probes"]), float(saved["recall"])
        # a damaged file (cut short, a byte changed) raises zipfile's errors, as a model's does
        except (*UNREADABLE, KeyError) as e:
            if path.exists():
                log.warning("index %s unreadable (%s): rebuilding it", path, e)
            return False
        self.prepare_search()
        self.probes, self.recall = probes, None if math.isnan(recall) else recall
        return True

    def prepare_search(self) -> None:
        """Set the index's search to the settings' probes, and make left_out's selector: once,
        shared by every query (each query's own list held them too before, a cost a user
        that grew with their number)."""
        faiss = faiss_module()
        ivf = faiss.extract_index_ivf(self.index)
        self.probes = ivf.nprobe = self.settings.probes_of(ivf.nlist)
        if len(self.left_out):
            self._left_out_selector = faiss.IDSelectorBatch(self.left_out)

    def search(self, queries: np.ndarray, k: int, excluded: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(idx, logits), each (B, k), of the queries (B, d): best first, -1 and -inf where
        none; the items `excluded` (indices) and left_out are left out by the scan itself
        (faiss's ID selectors), so that the refine x k candidates scored exactly are all
        eligible."""
        faiss = faiss_module()
        # a few queries on one thread: OpenMP's idle workers would spin on the cores that the
        # encoder's Numba threads need next
        faiss.omp_set_num_threads(1 if len(queries) < PARALLEL_QUERIES else CORES)
        # the selectors are held here: faiss's parameters point at them without owning them
        own = (None if excluded is None or not len(excluded) else
               faiss.IDSelectorBatch(excluded.astype(np.int64)))
        parts = [s for s in (own, self._left_out_selector) if s is not None]
        not_offered = (faiss.IDSelectorOr(*parts) if len(parts) == 2 else
                       parts[0] if parts else None)
        eligible = None if not_offered is None else faiss.IDSelectorNot(not_offered)
        scan = faiss.SearchParametersIVF(nprobe=self.probes, sel=eligible)
        params = faiss.IndexRefineSearchParameters(k_factor=self.settings.refine,
                                                   base_index_params=scan)
        norms = np.linalg.norm(queries, axis=1, keepdims=True)                  # (B, 1)
        unit = queries / np.where(norms > 0, norms, 1)                          # (B, d)
        _, idx = self.index.search(_with_column(unit, 0.0), k, params=params)   # (B, k)
        found = np.maximum(idx, 0)
        logits = np.einsum("bkd,bd->bk", self.items[found], queries,
                           dtype=np.float32)                                 # (B, k)
        logits[idx < 0] = -np.inf
        return idx.astype(np.int32), logits

    def top(self, queries: np.ndarray, users: np.ndarray, n: int, seen
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(idx, logits, short): the n best items of each user, queries (B, d), not in `seen`
        (users x items CSR, or None: one search of them all) nor left_out (none of them
        seen), each user's seen items left out of its own search; ties go to the earlier
        item, as the exact top-k's; `short` (B,) bool marks the users for whom the index
        found too few (the exact top-k answers those)."""
        users = np.asarray(users, np.int32)
        offered = len(self.items) - len(self.left_out)
        idx = np.full((len(users), n), -1, np.int32)
        logits = np.full((len(users), n), -np.inf, np.float32)
        if seen is None:
            wanted = np.full(len(users), min(n, offered))                      # (B,)
            idx[:], logits[:] = self.search(queries, n)
        else:
            wanted = np.minimum(n, offered - np.diff(seen.indptr)[users])      # what exact offers

            def search_one(r: int) -> None:         # faiss lets go of the GIL while it searches
                u = users[r]
                idx[r], logits[r] = self.search(queries[r:r + 1], n,
                                                seen.indices[seen.indptr[u]:seen.indptr[u + 1]])
            if len(users) < PARALLEL_QUERIES:
                for r in range(len(users)):
                    search_one(r)
            else:
                with ThreadPoolExecutor(CORES) as pool:
                    list(pool.map(search_one, range(len(users))))
        order = np.lexsort((np.where(idx < 0, len(self.items), idx), -logits), axis=-1)
        idx, logits = (np.take_along_axis(a, order, -1) for a in (idx, logits))
        short = (idx >= 0).sum(axis=1) < wanted
        return idx, logits, short


def user_queries(model, users: np.ndarray) -> np.ndarray:
    """(B, d) the users' query vectors of the model's index."""
    net, inputs = model._net, model.data.inputs()
    if model.config.based == "user":
        # no users (recommend([])) is no batch: (0, K) queries, as the exact top-k's (0, n)
        codes = np.empty((0, net.layout.hidden[-1]), net.params.dtype)
        codes = np.concatenate([codes] + [
            net.codes(model.ops.cut_rows(inputs, users[i:i + EVAL_BATCH]))
            for i in range(0, len(users), EVAL_BATCH)])                         # (B, K)
        return _with_column(codes, 1.0)
    return _with_column(net.p["V"][users], net.p["c"][users])


def _calibration_sample(model, count: int) -> tuple[np.ndarray, np.ndarray, object]:
    """(queries (S, d), users (S,), seen) of `count` of the model's users of some history at
    most, drawn by a fixed seed (the same model, the same calibration), and its seen items
    (users x items CSR), for ItemIndex.calibrate."""
    having = np.flatnonzero(model.data.user_counts > 0)
    users = np.sort(np.random.default_rng(0).permutation(having)[:count]).astype(np.int32)
    return user_queries(model, users), users, model.data.seen


def _with_column(vectors: np.ndarray, value) -> np.ndarray:
    """(n, d + 1) float32 the vectors with one more coordinate, `value` (a scalar or (n,))."""
    out = np.empty((len(vectors), vectors.shape[1] + 1), np.float32)
    out[:, :-1] = vectors
    out[:, -1] = value
    return out


def _item_vectors(model) -> np.ndarray:
    """(N, d) every item's vector."""
    net = model._net
    if model.config.based == "user":
        return _with_column(net.p["V"], net.p["c"])
    return _with_column(row_codes(net, model.data.inputs()), 1.0)


def _on_sphere(items: np.ndarray) -> np.ndarray:
    """(N, d + 1) float32 (x, sqrt(R^2 - |x|^2)) / R of each item x (N, d), R the largest
    norm: all of norm 1, in the order of x.q by their inner product with (q / |q|, 0)."""
    squares = np.einsum("nd,nd->n", items, items, dtype=np.float64)           # (N,)
    radius = np.sqrt(squares.max(initial=0.0))
    points = _with_column(items, np.sqrt(np.maximum(radius ** 2 - squares, 0.0)))  # (N, d + 1)
    points /= np.float32(radius or 1)
    return points


def _digest(items: np.ndarray, settings: IndexSettings) -> str:
    h = hashlib.sha256(repr(sorted(asdict(settings).items())).encode())
    h.update(LAYOUT.encode())
    h.update(f"{items.shape}".encode())
    h.update(np.ascontiguousarray(items).data)
    return h.hexdigest()
