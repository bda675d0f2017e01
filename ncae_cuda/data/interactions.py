"""Interaction data: the one in-memory form every reader produces and every split consumes.

An `Interactions` holds observed (user, item) pairs with contiguous 0-based indices, optional
ratings and timestamps, and the maps back to the ids of the source file. Splits and subsamples
are `Interactions` too and share their parent's id maps, so every part of one data set has the
same number of users and items.

Ids are the file's own text. A column's ids are int64 only where every one of them is an integer
written as Python prints it (str(int(text)) == text: "7" and "-7", but not "007", "+7", " 7",
"7.0" or "7_000"), so each prints back as the file wrote it; a column with any other id keeps all
its ids as text, and "007" and "7" are two ids. The published formats' ids are such integers,
and their readers refuse any other form, naming its line.

`with_times` dates the pairs of one file by another's (Last.fm's plays by their tag times);
a pair the other file has no time for gets NO_TIME, earlier than any time.
"""
from __future__ import annotations

import re
from collections import abc
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..errors import NcaeError


class DataError(NcaeError, ValueError):
    """Bad input data: the message names the file and line (where there is one) and the fix."""


@dataclass(frozen=True)
class Interactions:
    """Observed (user, item) pairs of one data set, with their ratings and times.

    One built by hand is checked where a model takes it (fit's X and validation, evaluate's
    held-out data and exclude: check_entries): 1-d numpy arrays of one value an entry, integer
    indices within the ids, each (user, item) pair once, each id once, ratings finite and >= 0;
    a DataError names the first entry that is not.

    Attributes
    ----------
    users : numpy.ndarray
        (nnz,) int32: each pair's user index in [0, n_users).
    items : numpy.ndarray
        (nnz,) int32: each pair's item index in [0, n_items).
    ratings : numpy.ndarray or None
        (nnz,) float32 ratings; None for implicit-only data.
    timestamps : numpy.ndarray or None
        (nnz,) int64 seconds, NO_TIME where one is unknown; None where the source has none.
    user_ids : numpy.ndarray
        (n_users,) the users' ids in the source, int64 or str (see the module's docstring).
    item_ids : numpy.ndarray
        (n_items,) the items' ids in the source, int64 or str.
    rating_scale : (float, float) or None
        (lowest, highest) rating, for explicit data.
    name : str
        The data set's name, or the file's.
    n_duplicates_merged : int
        Records of the source the reader merged into others (ratings keep the latest record,
        tag files the earliest time).
    columns : str
        How read_table took the file's columns, for the command line to say.
    """

    users: np.ndarray               # (nnz,) int32
    items: np.ndarray               # (nnz,) int32
    ratings: np.ndarray | None      # (nnz,) float32
    timestamps: np.ndarray | None   # (nnz,) int64
    user_ids: np.ndarray            # (n_users,)
    item_ids: np.ndarray            # (n_items,)
    rating_scale: tuple[float, float] | None = None
    name: str = "data"
    n_duplicates_merged: int = 0
    columns: str = ""

    @property
    def n_users(self) -> int:
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def nnz(self) -> int:
        return len(self.users)

    @property
    def sparsity(self) -> float:
        """Share of the user x item matrix that is unobserved (the paper's Table 2 column)."""
        return 1.0 - self.nnz / (self.n_users * self.n_items)

    def subset(self, index: np.ndarray) -> Interactions:
        """The entries at `index` (an int index or bool mask), with the same id maps."""
        return replace(
            self,
            users=self.users[index],
            items=self.items[index],
            ratings=None if self.ratings is None else self.ratings[index],
            timestamps=None if self.timestamps is None else self.timestamps[index],
        )

    def concat(self, other: Interactions) -> Interactions:
        """Entries of both (which must share id maps), self first: e.g. train + validation."""
        if other.n_users != self.n_users or other.n_items != self.n_items:
            raise ValueError("concat needs two parts of one data set (same id maps)")
        def cat(a, b):
            return None if a is None or b is None else np.concatenate([a, b])
        return replace(
            self,
            users=np.concatenate([self.users, other.users]),
            items=np.concatenate([self.items, other.items]),
            ratings=cat(self.ratings, other.ratings),
            timestamps=cat(self.timestamps, other.timestamps),
        )

    def to_csr(self, based: str = "user", implicit: bool = False) -> sp.csr_matrix:
        """Rows x columns float32 CSR: users x items for based='user', items x users for 'item'.

        Values are the ratings, or 1 where implicit=True or the data has no ratings. Column
        indices are sorted within each row; the entry order defines the entry ids that seed the
        dropout masks, so it must not depend on anything but the data.
        """
        if based not in ("user", "item"):
            raise ValueError(f"based must be 'user' or 'item', not {based!r}")
        rows, cols = (self.users, self.items) if based == "user" else (self.items, self.users)
        shape = (self.n_users, self.n_items) if based == "user" else (self.n_items, self.n_users)
        values = (np.ones(self.nnz, np.float32) if implicit or self.ratings is None
                  else self.ratings.astype(np.float32))
        m = sp.csr_matrix((values, (rows, cols)), shape=shape, dtype=np.float32)
        if m.nnz != self.nnz:
            raise DataError(f"{self.name}: {self.nnz - m.nnz} duplicate (user, item) pairs "
                            "reached to_csr; readers must merge duplicates first")
        m.sort_indices()
        return m


NO_TIME = np.iinfo(np.int64).min     # the timestamp of an interaction of unknown time
FLOAT32_MAX = float(np.finfo(np.float32).max)    # ratings are held as float32
BEYOND_FLOAT32 = f"beyond float32's range (+-{FLOAT32_MAX:.3g})"


def with_times(data: Interactions, times: Interactions) -> Interactions:
    """`data` with each (user, item) pair dated by the same pair in `times` (matched by source
    ids; `times` has one entry per pair, as the tag readers give), NO_TIME where `times` has
    none. Pairs of `times` that `data` lacks are ignored."""
    users = _positions(data.user_ids, times.user_ids[times.users])        # (times.nnz,)
    items = _positions(data.item_ids, times.item_ids[times.items])
    known = (users >= 0) & (items >= 0)
    keys = data.users.astype(np.int64) * data.n_items + data.items        # (nnz,) unique
    order = np.argsort(keys)
    wanted = users[known] * data.n_items + items[known]
    at = np.minimum(np.searchsorted(keys[order], wanted), len(keys) - 1)
    found = keys[order][at] == wanted
    stamps = np.full(data.nnz, NO_TIME, np.int64)
    stamps[order[at[found]]] = times.timestamps[known][found]
    return replace(data, timestamps=stamps)


def _positions(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(len(values),) int64 index of each value in the sorted `ids`, -1 where absent."""
    at = np.minimum(np.searchsorted(ids, values), len(ids) - 1)
    return np.where(ids[at] == values, at, -1).astype(np.int64)


def index_ids(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map source ids to contiguous indices: returns (sorted unique ids, (n,) int32 index)."""
    if raw.dtype.kind in "iu" and len(raw):
        lo, hi = int(raw.min()), int(raw.max())
        if hi - lo < 4 * len(raw) + 1024:
            # Ids from a compact range (all MovieLens/HetRec ids): a presence table does in O(n)
            # what np.unique does with a sort, which is most of the time of reading ML-20M.
            present = np.zeros(hi - lo + 1, bool)
            present[raw - lo] = True
            ids = (np.flatnonzero(present) + lo).astype(raw.dtype)
            rank = np.cumsum(present, dtype=np.int64) - 1      # (hi - lo + 1,) index of each id
            return ids, rank[raw - lo].astype(np.int32)
    ids, index = np.unique(raw, return_inverse=True)
    return ids, index.astype(np.int32).reshape(-1)



class UnknownIds(DataError, KeyError):
    """Ids the model was not trained with: the message names them."""

    def __str__(self) -> str:            # KeyError would print the message in quotes
        return str(self.args[0])


class IdLookup:
    """The index in `ids` (source ids, as Interactions.user_ids) of each id asked for, the ids
    sorted once: a fitted model's users and items are looked up for every request a server
    answers, and a sort of a catalogue's ids each time would cost more than the rest of it.

    Text such as "196" finds the integer id 196 (ids read from a command line or a CSV) where it
    writes it as a file does (the module's docstring: "0196" and "196.0" do not). Ids are
    matched exactly as written: text holding a control character is refused (numpy's text
    would drop a trailing NUL, and "u0\\x00" find "u0"). Ids that are not there raise
    UnknownIds naming them (each cut to ID_SHOWN characters), never drop silently.
    """

    def __init__(self, ids: np.ndarray, what: str):
        self.what = what                                  # "user" or "item", as errors say
        self.ids = ids.astype(str) if ids.dtype == object else ids     # (n,) as compared
        self.order = np.argsort(self.ids, kind="stable")  # (n,) ids[order] ascending

    def __call__(self, wanted) -> np.ndarray:
        """(k,) int32 index in the ids of each wanted id (a 1-d sequence)."""
        index, found = self.find(wanted)
        if not found.all():
            unknown = np.atleast_1d(np.asarray(wanted))[~found]
            shown = (", ".join(map(shown_id, unknown[:10]))
                     + (", ..." if len(unknown) > 10 else ""))
            raise UnknownIds(f"{len(unknown)} {self.what} id(s) unknown to the model: {shown}")
        return index

    def find(self, wanted) -> tuple[np.ndarray, np.ndarray]:
        """(index, found), each (k,), of each wanted id (a 1-d sequence): its int32 index in
        the ids, and whether it is there (where not, its index means nothing)."""
        ids, what = self.ids, self.what
        check_ordered(wanted, f"{what} ids")
        _refuse_control_characters(wanted, what)
        wanted = np.atleast_1d(np.asarray(wanted))
        if wanted.ndim != 1:
            raise DataError(f"{what} ids: expected a 1-d sequence, got shape {wanted.shape}")
        if wanted.dtype == bool:         # (numpy would find ids 1 and 0 for True and False)
            raise DataError(f"{what} ids are booleans (a mask?): give the ids, e.g. "
                            f"model.{what}_ids[mask]")
        key, comparable = wanted, np.ones(len(wanted), bool)
        if ids.dtype.kind in "iu" and wanted.dtype.kind not in "iu":
            parsed = [_integer(x) for x in wanted]
            comparable = np.array([v is not None for v in parsed], bool)
            key = np.array([0 if v is None else v for v in parsed], np.int64)
        elif ids.dtype.kind == "U":
            key = wanted.astype(str)
        found = np.zeros(len(wanted), bool)
        index = np.zeros(len(wanted), np.int64)
        if len(ids) and len(wanted):
            at = np.searchsorted(ids, key, sorter=self.order)
            index = self.order[np.minimum(at, len(ids) - 1)]
            found = comparable & (ids[index] == key)
        return index.astype(np.int32), found


# containers of no order (a set, a dict and its views) or read once (a generator, an
# iterator): numpy takes one for a single id, and their order is none a result could follow
UNORDERED = (abc.Set, abc.Mapping, abc.MappingView, abc.Iterator)


def check_ordered(values, name: str) -> None:
    """DataError where `values` (ids, or one id) come in a container of no order
    (UNORDERED), naming it."""
    if isinstance(values, UNORDERED):
        raise DataError(f"{name} must be an ordered sequence (a list, tuple or numpy array); "
                        f"got a {type(values).__name__}")


ID_SHOWN = 60                      # characters of an id a message shows
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")     # Unicode's control characters (Cc)


def shown_id(x) -> str:
    """An id as a message shows it: its text, cut to ID_SHOWN characters; quoted where it is
    empty, cut, or begins or ends in a space, so that a message never ends in nothing or in a
    megabyte, nor shows " 1" as the known 1."""
    text = str(x)
    if len(text) > ID_SHOWN:
        return f"{text[:ID_SHOWN]!r}... ({len(text)} characters)"
    if text != text.strip():
        return repr(text)
    return text or "'' (empty)"


def _refuse_control_characters(wanted, what: str) -> None:
    """DataError naming the first wanted text id that holds a control character."""
    for x in (wanted if isinstance(wanted, (list, tuple, np.ndarray)) else [wanted]):
        if isinstance(x, str) and CONTROL.search(x):
            raise DataError(f"{what} id {shown_id(repr(x))} holds a control character: ids "
                            "are matched exactly as written")


def integer_id_problem(text: str) -> str | None:
    """What keeps `text` from being an integer id as this module's docstring defines them (None
    where it is one)."""
    try:
        value = int(text)
    except ValueError:
        return "is not an integer"
    if str(value) != text:
        return "is not written as a plain integer (no leading zeros, '+', spaces or '_')"
    if not -2**63 <= value < 2**63:
        return "is out of the int64 range"
    return None


def _integer(x) -> int | None:
    """x as an integer id: text that writes one as a file does ("196"), or a number that is one
    (196, 196.0); None otherwise, and where int64 cannot hold it (no id of the model is it)."""
    if isinstance(x, str):
        value = None if integer_id_problem(x) else int(x)
    else:
        try:
            value = int(x) if float(x).is_integer() else None
        except (TypeError, ValueError, OverflowError):      # float(x): an int beyond float's
            return None
    return value if value is not None and INT64.min <= value <= INT64.max else None


INT64 = np.iinfo(np.int64)


def check_values(name: str, values: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                 entry=lambda row, col: f"({row}, {col})") -> None:
    """Refuse NaN, infinite and negative values, and values float32 cannot hold, with a
    DataError naming the first one's entry as entry(row, column) writes it."""
    values = np.asarray(values, np.float64)
    for bad, what in ((~np.isfinite(values), "NaN or infinite values"),
                      (np.abs(values) > FLOAT32_MAX, f"values {BEYOND_FLOAT32}"),
                      (values < 0, "negative values")):
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise DataError(f"{name}: {int(bad.sum())} {what}, e.g. {values[k]} at "
                            f"{entry(rows[k], cols[k])}: ratings and interaction "
                            "counts are >= 0, held as float32")


def check_entries(data: Interactions, name: str) -> None:
    """Refuse an Interactions that does not hold together (one built by hand: the readers' and
    splits' do by construction) with a DataError naming what, and the first entry where: its
    arrays' kinds and lengths, ids given twice, an index outside its ids, a (user, item) pair
    given twice (a sparse matrix would add them up: a rating lost), values check_values
    refuses."""
    for side in ("user", "item"):
        ids = getattr(data, f"{side}_ids")
        _check_array(ids, f"{name}: {side}_ids")
        unique, counts = np.unique(ids.astype(str) if ids.dtype == object else ids,
                                   return_counts=True)
        if len(unique) < len(ids):
            raise DataError(f"{name}: {side} id {shown_id(unique[counts > 1][0])} is in "
                            f"{side}_ids {counts.max()} times: each id names one {side}")
    for field in ("users", "items", "ratings", "timestamps"):
        values = getattr(data, field)
        if values is None and field in ("ratings", "timestamps"):
            continue
        _check_array(values, f"{name}: {field}")
        kinds = "iu" if field in ("users", "items") else "iuf"
        if values.dtype.kind not in kinds:
            what = f"integer indices into {field[:-1]}_ids" if kinds == "iu" else "numbers"
            raise DataError(f"{name}: {field} must be {what}; got {values.dtype}")
        if len(values) != data.nnz:
            raise DataError(f"{name}: users has {data.nnz} entries, {field} {len(values)}: the "
                            "arrays hold one value an entry, all of one length")
    for field, n in (("users", data.n_users), ("items", data.n_items)):
        index, side = getattr(data, field), field[:-1]
        outside = (index < 0) | (index >= n)
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            many = int(outside.sum())
            raise DataError(f"{name}: entry {k}'s {side} index {index[k]} is outside {side}_ids "
                            f"({n} ids, 0 to {n - 1}; {many} {'entry' if many == 1 else 'entries'}"
                            " so)")

    def entry(user: int, item: int) -> str:
        return f"user {shown_id(data.user_ids[user])}, item {shown_id(data.item_ids[item])}"
    if data.ratings is not None:
        check_values(name, data.ratings, data.users, data.items, entry)
    # whether a pair repeats: a CSR matrix of the entries sums repeated pairs into one (sorting
    # each row's few items, where one sort of every pair's key cost 3x as long on 20M entries)
    merged = sp.csr_matrix((np.ones(data.nnz, np.int8), (data.users, data.items)),
                           shape=(data.n_users, data.n_items))
    if merged.nnz < data.nnz:                       # where: a stable sort of the keys
        key = data.users.astype(np.int64) * data.n_items + data.items           # (nnz,)
        order = np.argsort(key, kind="stable")
        repeated = np.flatnonzero(key[order][1:] == key[order][:-1])
        later = order[repeated + 1]                  # each an entry of an earlier one's pair
        first = int(np.argmin(later))
        j, k = int(order[repeated[first]]), int(later[first])
        raise DataError(f"{name}: entries {j} and {k} are both "
                        f"{entry(data.users[k], data.items[k])} ({len(repeated)} pair"
                        f"{'s' if len(repeated) > 1 else ''} repeated): give each pair once (a "
                        "sparse matrix would add them up)")


def _check_array(values, name: str) -> None:
    """DataError where `values` is not a 1-d numpy array (a container of no order named)."""
    check_ordered(values, name)
    if not isinstance(values, np.ndarray):
        raise DataError(f"{name} must be a 1-d numpy array; got {type(values).__name__}")
    if values.ndim != 1:
        raise DataError(f"{name} must be a 1-d numpy array; got shape {values.shape}")


def from_matrix(X, name: str = "X", rating_scale: tuple[float, float] | None = None,
                item_ids: np.ndarray | None = None) -> Interactions:
    """A scipy.sparse users x items matrix as Interactions.

    Parameters
    ----------
    X : scipy.sparse matrix
        Users x items; every stored entry is an interaction, its value the rating (a stored 0
        too).
    name : str
        What the errors call the matrix.
    rating_scale : (float, float), optional
        The lowest and highest rating (default: the values' range).
    item_ids : numpy.ndarray, optional
        The columns' ids (column j is item_ids[j]; default: the column numbers), which the
        Interactions carry and the errors name.

    Returns
    -------
    Interactions
        Whose user ids are the matrix's row numbers.

    Raises
    ------
    DataError
        X is not a scipy.sparse matrix, has another number of columns than item_ids, or holds
        duplicate entries or negative, NaN or infinite values (naming one of them).
    """
    if not sp.issparse(X):
        raise DataError(f"{name}: expected a scipy.sparse matrix (users x items), "
                        f"got {type(X).__name__}")
    named = item_ids is not None
    if named and len(item_ids) != X.shape[1]:
        raise DataError(f"{name} has {X.shape[1]} columns; the model has {len(item_ids)} items "
                        "(column j is item_ids[j])")
    coo = X.tocoo()                     # keeps duplicates: csr_matrix may hold them unsummed
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    values = np.asarray(coo.data, np.float64)
    if named:
        check_values(name, values, rows, cols,
                     lambda row, col: f"row {row}, item {shown_id(item_ids[col])}")
    else:
        check_values(name, values, rows, cols)
    key = np.sort(rows * X.shape[1] + cols)
    repeated = key[1:] == key[:-1]
    if repeated.any():
        k = int(key[1:][repeated][0])
        raise DataError(f"{name}: {int(repeated.sum())} duplicate entries, e.g. "
                        f"({k // X.shape[1]}, {k % X.shape[1]}): merge them first "
                        "(X.sum_duplicates() adds them up)")
    return Interactions(users=rows.astype(np.int32), items=cols.astype(np.int32),
                        ratings=values.astype(np.float32), timestamps=None,
                        user_ids=np.arange(X.shape[0]),
                        item_ids=item_ids if named else np.arange(X.shape[1]),
                        rating_scale=rating_scale, name=name)
