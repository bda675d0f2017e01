"""Interaction data: the one in-memory form every reader produces and every split consumes.

An `Interactions` holds observed (user, item) pairs with contiguous 0-based indices, optional
ratings and timestamps, and the maps back to the ids of the source file. Splits and subsamples
are `Interactions` too and share their parent's id maps, so every part of one data set has the
same number of users and items.

The readers below turn the published files into `Interactions`: MovieLens 100K (`u.data` and
its split files), 1M/10M (`ratings.dat`), 20M/25M/32M (`ratings.csv`), HetRec 2011 Last.fm
(`user_artists.dat`, `user_taggedartists-timestamps.dat`) and Delicious
(`user_taggedbookmarks-timestamps.dat`), and generic tables (`read_table`: CSV, TSV or any
separator, a header's names mapped to columns, any encoding, compressed or not). Bad input stops
with a `DataError` whose message starts with `path:line:`.

Ids are the file's own text. A column's ids are int64 only where every one of them is an integer
written as Python prints it (str(int(text)) == text: "7" and "-7", but not "007", "+7", " 7",
"7.0" or "7_000"), so each prints back as the file wrote it; a column with any other id keeps all
its ids as text, and "007" and "7" are two ids. The published formats' ids are such integers,
and their readers refuse any other form, naming its line.

Duplicate (user, item) pairs are merged by one rule, and the count of records merged away is
kept in `Interactions.n_duplicates_merged`:
  - rating data (MovieLens, `read_table`, `user_artists.dat`) keep the most recent record: the
    largest timestamp; among equal timestamps, or where there are none, the later line;
  - tag assignments (HetRec `*-timestamps.dat`) are many records of one interaction by design:
    the pair is one interaction at its earliest timestamp (the earlier line on ties).

`with_times` dates the pairs of one file by another's (Last.fm's plays by their tag times);
a pair the other file has no time for gets NO_TIME, earlier than any time.
"""
from __future__ import annotations

import bz2
import codecs
import contextlib
import csv
import gc
import gzip
import itertools
import lzma
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import scipy.sparse as sp

from .errors import NcaeError


class DataError(NcaeError, ValueError):
    """Bad input data: the message names the file and line (where there is one) and the fix."""


@dataclass(frozen=True)
class Interactions:
    users: np.ndarray               # (nnz,) int32 user index in [0, n_users)
    items: np.ndarray               # (nnz,) int32 item index in [0, n_items)
    ratings: np.ndarray | None      # (nnz,) float32; None for implicit-only data
    timestamps: np.ndarray | None   # (nnz,) int64 seconds (NO_TIME: unknown); None when the
                                    # source has none
    user_ids: np.ndarray            # (n_users,) source ids, int64 or str
    item_ids: np.ndarray            # (n_items,) source ids, int64 or str
    rating_scale: tuple[float, float] | None = None  # (r_min, r_max) for explicit data
    name: str = "data"
    n_duplicates_merged: int = 0    # source records the reader merged into others (see above)
    columns: str = ""               # how read_table took the file's columns, for the CLI to say

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


def lookup_ids(ids: np.ndarray, wanted, what: str) -> np.ndarray:
    """(n,) int32 index in `ids` (source ids, as Interactions.user_ids) of each wanted id.

    Text such as "196" finds the integer id 196 (ids read from a command line or a CSV) where it
    writes it as a file does (the module's docstring: "0196" and "196.0" do not). Ids that are
    not there raise UnknownIds naming them, never drop silently."""
    if ids.dtype == object:                  # text ids held as Python objects
        ids = ids.astype(str)
    wanted = np.atleast_1d(np.asarray(wanted))
    if wanted.ndim != 1:
        raise ValueError(f"{what} ids: expected a 1-d sequence, got shape {wanted.shape}")
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
        order = np.argsort(ids, kind="stable")
        index = order[np.minimum(np.searchsorted(ids, key, sorter=order), len(ids) - 1)]
        found = comparable & (ids[index] == key)
    if not found.all():
        unknown = wanted[~found]
        shown = ", ".join(map(str, unknown[:10])) + (", ..." if len(unknown) > 10 else "")
        raise UnknownIds(f"{len(unknown)} {what} id(s) unknown to the model: {shown}")
    return index.astype(np.int32)


def _integer(x) -> int | None:
    """x as an integer id: text that writes one as a file does ("196"), or a number that is one
    (196, 196.0); None otherwise."""
    if isinstance(x, str):
        return None if _id_problem(x) else int(x)
    try:
        return int(x) if float(x).is_integer() else None
    except (TypeError, ValueError):
        return None


def check_values(name: str, values: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> None:
    """Refuse NaN, infinite and negative values, and values float32 cannot hold, with a
    DataError naming the first one's entry."""
    values = np.asarray(values, np.float64)
    for bad, what in ((~np.isfinite(values), "NaN or infinite values"),
                      (np.abs(values) > FLOAT32_MAX, f"values {BEYOND_FLOAT32}"),
                      (values < 0, "negative values")):
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise DataError(f"{name}: {int(bad.sum())} {what}, e.g. {values[k]} at "
                            f"({rows[k]}, {cols[k]}): ratings and interaction counts are >= 0, "
                            "held as float32")


def from_matrix(X, name: str = "X", rating_scale: tuple[float, float] | None = None
                ) -> Interactions:
    """A scipy.sparse users x items matrix as Interactions whose ids are the row and column
    numbers. Every stored entry is an interaction (its value the rating); duplicate entries,
    negative, NaN or infinite values are refused with a DataError naming one of them."""
    if not sp.issparse(X):
        raise DataError(f"{name}: expected a scipy.sparse matrix (users x items), "
                        f"got {type(X).__name__}")
    coo = X.tocoo()                     # keeps duplicates: csr_matrix may hold them unsummed
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    values = np.asarray(coo.data, np.float64)
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
                        user_ids=np.arange(X.shape[0]), item_ids=np.arange(X.shape[1]),
                        rating_scale=rating_scale, name=name)

# -------------------------------------------------------------------------------------------------
# Readers. One core serves every format: a `_Layout` says how a format separates fields, what each
# column holds and whether line 1 is a header. pyarrow's CSV reader parses the file (quoting,
# encodings, every core). A file it refuses, or whose values fail a check, is read again line by
# line with Python's csv module, which names the first bad line. That reading is the definition
# of what a file holds: a file it reads whole is read, in the few forms pyarrow refuses ("+5").
# -------------------------------------------------------------------------------------------------

_LABELS = {"user": "user id", "item": "item id", "rating": "rating",
           "timestamp": "timestamp", "weight": "weight"}
_SEP_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon"}
_TABLE_COLUMNS = ("user", "item", "rating", "timestamp")   # a table's columns without a header
# A header's names, lower case without ' ', '_' and '-', and the column each one names.
COLUMN_NAMES = {
    "user": ("user", "userid", "uid", "customer", "customerid", "reviewer", "reviewerid"),
    "item": ("item", "itemid", "iid", "movie", "movieid", "product", "productid", "artist",
             "artistid", "track", "trackid", "song", "songid", "book", "bookid", "isbn",
             "bookmark", "bookmarkid", "business", "businessid"),
    "rating": ("rating", "score", "stars", "star"),
    "timestamp": ("timestamp", "time", "ts", "unixtime", "unixreviewtime"),
}
_COLUMN_OF = {name: key for key, names in COLUMN_NAMES.items() for name in names}
# A compressed file is told by its first bytes, not its name.
_COMPRESSED = {b"\x1f\x8b": gzip.open, b"BZh": bz2.open, b"\xfd7zXZ\x00": lzma.open}
_UNIT_SEP = "\x1f"           # ASCII unit separator: what a separator of several characters becomes
_ARROW_TYPES = {"user": pa.string(), "item": pa.string(), "timestamp": pa.int64(),
                "rating": pa.float64(), "weight": pa.float64()}
_BLOCK_BYTES = 1 << 20       # lines the line-by-line reading decodes, converts and checks at once
ENCODING = "utf-8"           # a data file's text, unless told otherwise


@dataclass(frozen=True)
class _Layout:
    sep: str                        # field separator as written: "\t", ",", "::"
    columns: tuple[str, ...]        # what each column holds: a key of _LABELS, or "" (unused)
    header: bool                    # line 1 is a header
    int_ids: bool = True            # ids must be integers as written (the module's docstring);
                                    # False keeps any text (read_table)
    rating_scale: tuple[float, float] | None = None   # ratings outside it are errors
    encoding: str = ENCODING
    names: tuple[str, ...] = ()     # the header's names, where the columns were mapped by them

    def described(self) -> str:
        labels = [_LABELS[key] for key in self.columns]
        if self.names:
            return "columns by the header: " + ", ".join(
                f"{name} = {label}" for name, label in zip(self.names, labels))
        return "columns by position (no header): " + ", ".join(labels)


def read_movielens_100k(path: str | os.PathLike) -> Interactions:
    """MovieLens 100K `u.data` or one of its split files (u1.base, u1.test, ua.base, ...).

    Tab-separated `user item rating timestamp`, no header; ratings 1..5 stars.
    """
    return _read_ratings(path, "\t", header=False, rating_scale=(1.0, 5.0))


def read_movielens_dat(path: str | os.PathLike,
                       rating_scale: tuple[float, float]) -> Interactions:
    """MovieLens 1M / 10M `ratings.dat`: `user::item::rating::timestamp`, no header.

    rating_scale: (1, 5) for ML-1M, (0.5, 5) for ML-10M.
    """
    return _read_ratings(path, "::", header=False, rating_scale=rating_scale)


def read_movielens_csv(path: str | os.PathLike,
                       rating_scale: tuple[float, float] = (0.5, 5.0)) -> Interactions:
    """MovieLens 20M / 25M / 32M `ratings.csv`: header `userId,movieId,rating,timestamp`."""
    return _read_ratings(path, ",", header=True, rating_scale=rating_scale)


def read_lastfm_artists(path: str | os.PathLike) -> Interactions:
    """HetRec 2011 Last.fm `user_artists.dat`: tab-separated, header `userID artistID weight`.

    The weight is a play count: a pair with a positive weight is one implicit interaction, a pair
    with weight 0 is not an interaction and is dropped; a negative weight is a DataError. No
    ratings and no timestamps (both None).
    """
    layout = _Layout("\t", ("user", "item", "weight"), header=True)
    columns, first_line = _parse(path, layout)
    listened = columns.pop("weight") > 0
    if not listened.any():
        raise DataError(f"{path}:{first_line}: no interactions: every weight is 0")
    return _interactions(path, {key: value[listened] for key, value in columns.items()},
                         rating_scale=None, keep="latest")


def read_lastfm_tag_timestamps(path: str | os.PathLike) -> Interactions:
    """HetRec 2011 Last.fm `user_taggedartists-timestamps.dat`.

    Tab-separated, header `userID artistID tagID timestamp`, timestamps in milliseconds. Each
    (user, artist) pair the user tagged is one implicit interaction at its earliest tag time,
    in int64 seconds; no ratings.
    """
    return _read_tag_assignments(path)


def read_delicious(path: str | os.PathLike) -> Interactions:
    """HetRec 2011 Delicious `user_taggedbookmarks-timestamps.dat`.

    Tab-separated, header `userID bookmarkID tagID timestamp`, timestamps in milliseconds. Each
    (user, bookmark) pair is one implicit interaction at its earliest tag time, in int64 seconds;
    no ratings.
    """
    return _read_tag_assignments(path)


def read_table(path: str | os.PathLike, sep: str | None = None,
               rating_scale: tuple[float, float] | None = None,
               encoding: str = ENCODING) -> Interactions:
    """A table of user, item[, rating[, timestamp]] columns: CSV, TSV or any separator, plain
    or compressed (gzip, bzip2, xz: told by the file's first bytes).

    sep: the field separator; None takes the first of tab, comma and semicolon on line 1.
    Columns: where line 1 holds column names (COLUMN_NAMES: user, userId, user_id, item,
    movieId, rating, timestamp, ...) each column is what its name says, in any order, and a
    header with a name not known there is refused; without a header they are user, item[,
    rating[, timestamp]] in this order. Interactions.columns says which way they were read.
    Text: decoded as `encoding`, strictly (a byte that is not is an error naming its line);
    fields may be quoted ("1","52",4).
    Ids: int64 where every id of a column is a plain integer (the module's docstring), else
    str: each as the file writes it.
    Ratings: >= 0 and inside rating_scale; with rating_scale None it is inferred as the (min,
    max) of the ratings in the file. Timestamps must be integers (seconds).
    """
    layout = replace(table_layout(path, sep, encoding), rating_scale=rating_scale)
    values, _ = _parse(path, layout)
    if "rating" in values and rating_scale is None:
        rating_scale = (float(values["rating"].min()), float(values["rating"].max()))
    return replace(_interactions(path, values, rating_scale=rating_scale, keep="latest"),
                   columns=layout.described())


def table_layout(path: str | os.PathLike, sep: str | None = None,
                 encoding: str = ENCODING) -> _Layout:
    """How read_table reads the file: its separator, its columns and whether it has a header,
    from its first line; a DataError says what is wrong with it."""
    codecs_name(encoding)
    first = next(((first + k, text) for first, block in _text_blocks(path, encoding)
                  for k, text in enumerate(block.split("\n")) if text.strip()), None)
    if first is None:
        raise DataError(f"{path}:1: empty file, no interactions")
    line, text = first
    if sep is None:
        sep = next((s for s in _SEP_NAMES if s in text), None)
        if sep is None:
            raise DataError(f"{path}:{line}: cannot tell the separator: line {line} has no tab, "
                            "comma or semicolon (give it with --sep)")
    fields = _split(text, sep)
    known = [_COLUMN_OF.get(re.sub(r"[\s_-]", "", field.lower())) for field in fields]
    if all(known):
        _check_names(path, line, fields, known)
        return _Layout(sep, tuple(known), header=True, int_ids=False, encoding=encoding,
                       names=tuple(fields))
    if not 2 <= len(fields) <= len(_TABLE_COLUMNS):
        raise DataError(f"{path}:{line}: expected 2 to 4 {_sep_name(sep)}-separated columns "
                        f"(user, item[, rating[, timestamp]]), found {len(fields)}")
    columns = _TABLE_COLUMNS[:len(fields)]
    not_numbers = [f"{_LABELS[key]} {field!r} is not a number" for field, key
                   in zip(fields, columns) if key in ("rating", "timestamp")
                   and not _is_number(field)]
    if any(known) or not_numbers:
        unknown = ", ".join(repr(field) for field, key in zip(fields, known) if key is None)
        what = (f"a header with names this reader does not know ({unknown})" if any(known) else
                f"neither data ({not_numbers[0]}) nor a header of known names")
        raise DataError(f"{path}:{line}: {what}: name the columns user, item, rating, timestamp "
                        "(or userId, movieId, ...: ncae_cuda.data.COLUMN_NAMES)")
    return _Layout(sep, columns, header=False, int_ids=False, encoding=encoding)


def _check_names(path, line: int, names: list[str], columns: list[str]) -> None:
    """A header's columns name each of user and item, and no column twice."""
    for key in ("user", "item"):
        if key not in columns:
            raise DataError(f"{path}:{line}: the header names no {key} column "
                            f"({', '.join(names)}); e.g. {COLUMN_NAMES[key][0]}")
    for key in dict.fromkeys(columns):
        twice = [name for name, column in zip(names, columns) if column == key]
        if len(twice) > 1:
            raise DataError(f"{path}:{line}: the header names the {key} column twice: "
                            f"{', '.join(twice)}")


def codecs_name(encoding: str) -> str:
    """The codec's own name for `encoding` ('latin1' -> 'iso8859-1'); DataError where Python
    knows no such encoding."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise DataError(f"unknown encoding {encoding!r} (e.g. utf-8, latin-1, cp1252)") from None


def _read_ratings(path: str | os.PathLike, sep: str, header: bool,
                  rating_scale: tuple[float, float]) -> Interactions:
    layout = _Layout(sep, ("user", "item", "rating", "timestamp"), header,
                     rating_scale=rating_scale)
    columns, _ = _parse(path, layout)
    return _interactions(path, columns, rating_scale=rating_scale, keep="latest")


def _read_tag_assignments(path: str | os.PathLike) -> Interactions:
    layout = _Layout("\t", ("user", "item", "", "timestamp"), header=True)
    columns, _ = _parse(path, layout)
    columns["timestamp"] //= 1000           # milliseconds -> seconds
    return _interactions(path, columns, rating_scale=None, keep="earliest")


def _interactions(path: str | os.PathLike, columns: dict,
                  rating_scale: tuple[float, float] | None, keep: str) -> Interactions:
    """Index the parsed columns and merge duplicate pairs by the module's rule (`keep`)."""
    user_ids, users = _indexed(columns["user"])
    item_ids, items = _indexed(columns["item"])
    ratings = columns.get("rating")
    timestamps = columns.get("timestamp")
    data = Interactions(
        users=users, items=items,
        ratings=None if ratings is None else ratings.astype(np.float32),
        timestamps=timestamps, user_ids=user_ids, item_ids=item_ids,
        rating_scale=rating_scale, name=Path(path).name)
    kept = _deduplicated(users, items, len(item_ids), timestamps, keep)
    if kept is None:
        return data
    return replace(data.subset(kept), n_duplicates_merged=data.nnz - len(kept))


def _indexed(column) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique ids, (n,) int32 index) of an id column (_id_column's)."""
    if not isinstance(column, tuple):
        return index_ids(column)
    texts, codes = column
    order = np.argsort(texts)
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    return texts[order], rank[codes]


def _id_column(texts: np.ndarray, codes: np.ndarray):
    """An id column read as (unique texts, (n,) codes): (n,) int64 ids where every text writes
    an integer id (the module's docstring), else (texts, codes) as they are."""
    listed = texts.tolist()
    if any(map(_id_problem, listed)):
        return texts, codes
    return np.fromiter(map(int, listed), np.int64, len(listed))[codes]


def _id_problem(text: str) -> str | None:
    """What keeps `text` from being an integer id as the module's docstring defines them (None
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


def _deduplicated(users: np.ndarray, items: np.ndarray, n_items: int,
                  timestamps: np.ndarray | None, keep: str) -> np.ndarray | None:
    """Entry indices (file order) that survive merging duplicate pairs; None if none repeat.

    keep="latest": each pair's largest timestamp, the later line on ties or without timestamps;
    keep="earliest": the smallest timestamp, the earlier line on ties.
    """
    # scipy builds CSR with a counting sort and merges repeated cells: an O(nnz) test, several
    # times faster than sorting 64-bit keys, and most files repeat no pair at all.
    cells = sp.csr_matrix((np.ones(len(users), np.float32), (users, items)),
                          shape=(int(users.max()) + 1, n_items))
    repeats = np.diff(cells.indptr) != np.bincount(users, minlength=cells.shape[0])  # per user
    if not repeats.any():
        return None
    involved = np.flatnonzero(repeats[users])         # (m,) entries of users who repeat a pair
    key = users[involved].astype(np.int64) * n_items + items[involved]     # (m,) pair id
    sort_keys = (involved, key) if timestamps is None else (involved, timestamps[involved], key)
    by_pair = np.lexsort(sort_keys)                   # by pair, then time, then line
    order, sorted_key = involved[by_pair], key[by_pair]
    boundary = sorted_key[1:] != sorted_key[:-1]      # (m-1,) a new pair starts after k
    winner = np.r_[boundary, True] if keep == "latest" else np.r_[True, boundary]
    kept = np.ones(len(users), bool)
    kept[involved] = False
    kept[order[winner]] = True
    return np.flatnonzero(kept)


def _sep_name(sep: str) -> str:
    return _SEP_NAMES.get(sep, repr(sep))


def _parse(path: str | os.PathLike, layout: _Layout) -> tuple[dict, int]:
    """All data records of the file: ({column: (n,) values}, line number of the first).

    Ids come back int64 where every id of the column is an integer as written (always, where
    layout.int_ids), else as (unique texts, (n,) int32 codes); timestamps int64, ratings and
    weights float64, each in file order.
    """
    head = list(itertools.islice(itertools.chain.from_iterable(_records(path, layout)), 2))
    if not head:
        raise DataError(f"{path}:1: empty file, no interactions")
    if layout.header:
        line, fields = head.pop(0)
        if all(map(_is_number, fields)):
            names = ", ".join(_LABELS.get(key, "...") for key in layout.columns)
            raise DataError(f"{path}:{line}: expected a header line ({names}), found data: "
                            f"{layout.sep.join(fields)!r}")
        if not head:
            raise DataError(f"{path}:{line + 1}: no interactions: nothing follows the header "
                            "line")
    values = _read_fast(path, layout)
    if values is None or _first_bad(values, layout) is not None:
        values = _read_slowly(path, layout)
    return values, head[0][0]


def _read_fast(path: str | os.PathLike, layout: _Layout) -> dict | None:
    """The file's columns as pyarrow's CSV reader parses them; None where it refuses the file.
    Ids are read as text: pyarrow's integer columns take "007" and " 7" for 7."""
    names = [key or f"unused {k}" for k, key in enumerate(layout.columns)]
    types = {key: _ARROW_TYPES[key] for key in layout.columns if key}
    try:
        with _open(path) as f:
            source = f
            if len(layout.sep) > 1:
                source = pa.BufferReader(f.read().replace(
                    layout.sep.encode(layout.encoding), _UNIT_SEP.encode(layout.encoding)))
            table = pa_csv.read_csv(
                source,
                read_options=pa_csv.ReadOptions(column_names=names, skip_rows=int(layout.header),
                                                encoding=layout.encoding),
                parse_options=pa_csv.ParseOptions(
                    delimiter=layout.sep if len(layout.sep) == 1 else _UNIT_SEP),
                convert_options=pa_csv.ConvertOptions(
                    column_types=types, include_columns=list(types), null_values=[],
                    strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, UnicodeError, OSError, EOFError, lzma.LZMAError):
        return None
    return {key: _arrow_column(table.column(key)) for key in types}


def _arrow_column(column: pa.ChunkedArray):
    """numpy values of a column; an id column as _id_column gives it."""
    if column.type != pa.string():
        return np.require(column.to_numpy(), requirements="W")    # arrow's own are read-only
    numbers = _arrow_integer_ids(column)
    if numbers is not None:
        return numbers
    coded = column.combine_chunks().dictionary_encode()
    return _id_column(coded.dictionary.to_numpy(zero_copy_only=False).astype(str),
                      coded.indices.to_numpy())


def _arrow_integer_ids(column: pa.ChunkedArray) -> np.ndarray | None:
    """(n,) int64 of an id column where every text writes an integer id, None where one may
    not: _id_column's rule at arrow's speed. Arrow's cast takes [-]digits and [-]0x hex, so the
    texts it takes that are not plain integers are those that start with 0 and say more than
    "0", and those that start with -0."""
    try:
        numbers = np.require(pc.cast(column, pa.int64()).to_numpy(), requirements="W")
    except pa.ArrowInvalid:
        return None
    zero_led = pc.starts_with(column, "0")
    if pc.any(zero_led).as_py() and pc.any(
            pc.and_(zero_led, pc.greater(pc.binary_length(column), 1))).as_py():
        return None
    if numbers.min() <= 0 and pc.any(pc.starts_with(column, "-0")).as_py():
        return None
    return numbers


def _read_slowly(path: str | os.PathLike, layout: _Layout) -> dict:
    """The file read line by line: its columns as _read_fast gives them, or a DataError naming
    the first bad line."""
    keys = [key for key in layout.columns if key]
    parts = {key: [] for key in keys}
    with _no_garbage_collection():          # a block's records hold no cycles to collect
        for number, chunk in enumerate(_records(path, layout)):
            chunk = chunk[int(layout.header and number == 0):]
            values, failure = _converted(chunk, layout)
            bad = _first_bad(values, layout)
            if bad is not None:
                row, key, what = bad
                text = chunk[row][1][layout.columns.index(key)]
                failure = row, f"{_LABELS[key]} {text!r} {what}"
            if failure is not None:
                row, message = failure
                raise DataError(f"{path}:{chunk[row][0]}: {message}")
            for key in keys:
                parts[key].append(values[key])
    columns = {key: np.concatenate(chunks) for key, chunks in parts.items()}
    for key in ("user", "item"):
        texts, codes = np.unique(columns[key], return_inverse=True)
        columns[key] = _id_column(texts, codes.astype(np.int32).reshape(-1))
    return columns


@contextlib.contextmanager
def _no_garbage_collection():
    """Python's cycle collector paused: it walks every young object each 700 allocations, half
    the time of reading millions of records into lists."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _converted(records: list[tuple[int, list[str]]], layout: _Layout
               ) -> tuple[dict[str, np.ndarray], tuple[int, str] | None]:
    """The values of the records before the first that cannot be read, and that record's row
    with what is wrong (None if every one can)."""
    n_columns = len(layout.columns)
    rows = next((row for row, (_, fields) in enumerate(records) if len(fields) != n_columns),
                len(records))
    failures = [] if rows == len(records) else [
        (rows, f"expected {n_columns} {_sep_name(layout.sep)}-separated fields, found "
               f"{len(records[rows][1])}")]
    values = {}
    for column, key in enumerate(layout.columns):
        if key:
            values[key], failure = _column_values(
                [fields[column] for _, fields in records[:rows]], _LABELS[key], _KINDS[key])
            failures += [failure] if failure else []
    failure = min(failures, default=None)
    if failure is not None:
        values = {key: value[:failure[0]] for key, value in values.items()}
    return values, failure


_KINDS = {"user": str, "item": str, "timestamp": int, "rating": float, "weight": float}
_DTYPES = {int: np.int64, float: np.float64, str: str}


def _column_values(texts: list[str], label: str, kind: type
                   ) -> tuple[np.ndarray, tuple[int, str] | None]:
    """The values of one column's fields as `kind` (int, float or str) reads them; where one
    cannot be read, the values before it and its row with what is wrong."""
    try:
        if kind is str:
            if "" in texts:
                raise ValueError
            return np.array(texts, str), None
        if "_" in "".join(texts):        # Python reads 1_000 as 1000; no data file means that
            raise ValueError
        return np.fromiter(map(kind, texts), _DTYPES[kind], len(texts)), None
    except (ValueError, OverflowError):
        row, problem = next((row, problem) for row, problem in (
            (row, _field_problem(text, label, kind)) for row, text in enumerate(texts)) if problem)
        return _column_values(texts[:row], label, kind)[0], (row, problem)


def _field_problem(text: str, label: str, kind: type) -> str | None:
    """What is wrong with one field read as `kind` (int, float or str), or None."""
    if not text:
        return f"empty {label}"
    if kind is str:
        return None
    what = "an integer" if kind is int else "a number"
    try:
        value = kind(text)
    except ValueError:
        return f"{label} {text!r} is not {what}"
    if "_" in text:
        return f"{label} {text!r} is not {what}"
    if kind is int and not -2**63 <= value < 2**63:
        return f"{label} {text!r} is out of the int64 range"
    return None


def _is_number(text: str) -> bool:
    return _field_problem(text, "", float) is None


def _first_bad(values: dict, layout: _Layout) -> tuple[int, str, str] | None:
    """(row, column, what is wrong) of the first row whose values fail a check, or None."""
    failed = []                                        # (row, key, what)
    for key in ("user", "item"):
        value = values.get(key)
        if value is None or not isinstance(value, tuple) and value.dtype.kind == "i":
            continue                                   # integer ids: checked as converted
        # text ids: (unique texts, codes) as read whole, a block's texts as read line by line
        texts, codes = value if isinstance(value, tuple) else (value, None)
        bad = (np.array([_id_problem(text) is not None for text in texts.tolist()], bool)
               if layout.int_ids else texts == "")
        if bad.any():
            row = int(np.argmax(bad if codes is None else bad[codes]))
            text = texts[row if codes is None else codes[row]]
            failed.append((row, key, _id_problem(text) if layout.int_ids else "is empty"))
    for key, value in values.items():
        if key not in ("rating", "weight"):
            continue
        checks = [(~np.isfinite(value), "is not a finite number")]
        if key == "rating":
            checks.append((np.isfinite(value) & (np.abs(value) > FLOAT32_MAX),
                           f"is {BEYOND_FLOAT32}"))
        scale = layout.rating_scale if key == "rating" else None
        if scale is not None:
            checks.append(((value < scale[0]) | (value > scale[1]),
                           f"is outside the rating scale [{scale[0]:g}, {scale[1]:g}]"))
        else:
            counted = "play counts" if key == "weight" else "ratings"
            checks.append((value < 0, f"is negative ({counted} are >= 0)"))
        failed += [(int(np.argmax(bad)), key, what) for bad, what in checks if bad.any()]
    return min(failed, default=None)


def _split(text: str, sep: str) -> list[str]:
    """The fields of one line, as csv reads them."""
    return next(_csv_reader([text], sep), [])


def _csv_reader(lines: list[str], sep: str):
    """csv's reader of the lines; a separator of several characters (csv takes one) becomes
    _UNIT_SEP first, as _read_fast does for pyarrow."""
    if len(sep) == 1:
        return csv.reader(lines, delimiter=sep)
    return csv.reader((text.replace(sep, _UNIT_SEP) for text in lines), delimiter=_UNIT_SEP)


def _records(path: str | os.PathLike, layout: _Layout) -> Iterator[list[tuple[int, list[str]]]]:
    """(line number, fields) of every line that is not blank, as Python's csv module reads the
    file (quoted fields and all), in blocks."""
    for first, text in _text_blocks(path, layout.encoding):
        reader = _csv_reader(text.split("\n"), layout.sep)
        try:
            records = [(first - 1 + reader.line_num, fields) for fields in reader if fields]
        except csv.Error as e:
            raise DataError(f"{path}:{first - 1 + reader.line_num}: {e}") from None
        if records:
            yield records


def _text_blocks(path: str | os.PathLike, encoding: str) -> Iterator[tuple[int, str]]:
    """(number of its first line, text) of the file's blocks of whole lines, decoded strictly:
    a byte that is not `encoding` is a DataError naming its line. A UTF-8 byte-order mark is no
    data."""
    name = codecs_name(encoding)
    decoder = codecs.getincrementaldecoder("utf-8-sig" if name == "utf-8" else name)()
    number = 1
    with _open(path) as f:
        try:
            for block in _byte_blocks(f, whole="\n".encode(name) != b"\n"):
                try:
                    text = decoder.decode(block, final=not block)
                except UnicodeDecodeError as e:
                    at = number + e.object[:e.start].count(b"\n")
                    raise DataError(f"{path}:{at}: not {encoding} text "
                                    f"({e.object[e.start:e.end]!r}: {e.reason}): give the "
                                    "file's encoding with --encoding (e.g. latin-1)") from None
                yield number, text
                number += text.count("\n")
        except (OSError, EOFError, lzma.LZMAError) as e:
            raise DataError(f"{path}: cannot read it ({e})") from None


def _byte_blocks(f: BinaryIO, whole: bool) -> Iterator[bytes]:
    """The file in blocks of whole lines (whole: in one block, for encodings whose newline is
    not the byte b"\\n"), then b"" to end it."""
    carry = b""
    while chunk := f.read(-1 if whole else _BLOCK_BYTES):
        chunk = carry + chunk
        cut = len(chunk) if whole else chunk.rfind(b"\n") + 1
        carry = chunk[cut:]
        if cut:
            yield chunk[:cut]
    if carry:
        yield carry
    yield b""


def _open(path: str | os.PathLike) -> BinaryIO:
    """The file as bytes, decompressed where its first bytes say it is compressed."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: a folder, not a data file") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read: {error.strerror}", errno=error.errno) from None
    with f:
        start = f.read(max(map(len, _COMPRESSED)))
    opener = next((opener for magic, opener in _COMPRESSED.items() if start.startswith(magic)),
                  open)
    return opener(path, "rb")
