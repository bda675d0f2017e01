"""Interaction data: the one in-memory form every reader produces and every split consumes.

An `Interactions` holds observed (user, item) pairs with contiguous 0-based indices, optional
ratings and timestamps, and the maps back to the ids of the source file. Splits and subsamples
are `Interactions` too and share their parent's id maps, so every part of one data set has the
same number of users and items.

The readers below turn the published files into `Interactions`: MovieLens 100K (`u.data` and
its split files), 1M/10M (`ratings.dat`), 20M/25M/32M (`ratings.csv`), HetRec 2011 Last.fm
(`user_artists.dat`, `user_taggedartists-timestamps.dat`) and Delicious
(`user_taggedbookmarks-timestamps.dat`), and generic CSV/TSV tables (`read_table`). Bad input
stops with a `DataError` whose message starts with `path:line:`.

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

import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np
import scipy.sparse as sp
from numpy.lib.stride_tricks import sliding_window_view


class DataError(ValueError):
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

    Text such as "196" finds the integer id 196 (ids read from a command line or a CSV). Ids
    that are not there raise UnknownIds naming them, never drop silently."""
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
    """x as an integer id if it spells one ("196", "196.0", 196.0); None otherwise."""
    text = str(x).strip()
    try:
        return int(text)                       # exact for ids beyond float precision
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def check_values(name: str, values: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> None:
    """Refuse NaN, infinite and negative values with a DataError naming the first one's entry."""
    values = np.asarray(values, np.float64)
    for bad, what in ((~np.isfinite(values), "NaN or infinite"), (values < 0, "negative")):
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise DataError(f"{name}: {int(bad.sum())} {what} values, e.g. {values[k]} at "
                            f"({rows[k]}, {cols[k]}): ratings and interaction counts are >= 0")


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
# Readers. One parsing core serves every format: a `_Layout` says how a format separates fields,
# what each column holds and whether line 1 is a header. `_parse` reads the file in blocks of
# whole lines and parses a block with vectorized numpy, so Python works per block, not per line;
# only a block that holds a bad line gets a per-value Python pass, to name the first bad line.
# -------------------------------------------------------------------------------------------------

_BLOCK_BYTES = 1 << 24       # whole lines parsed per step: bounds the temporaries to ~100 MB
_UNIT_SEP = b"\x1f"          # ASCII unit separator: what a multi-byte separator becomes
_LABELS = {"user": "user id", "item": "item id", "rating": "rating",
           "timestamp": "timestamp", "weight": "weight"}
_SEP_NAMES = {b"\t": "tab", b",": "comma", b"::": "'::'"}
_TABLE_COLUMNS = {2: ("user", "item"), 3: ("user", "item", "rating"),
                  4: ("user", "item", "rating", "timestamp")}


@dataclass(frozen=True)
class _Layout:
    sep: bytes                      # field separator as written: b"\t", b",", b"::"
    columns: tuple[str, ...]        # what each column holds: a key of _LABELS, or "" (unused)
    header: bool                    # line 1 is a header
    int_ids: bool = True            # ids must be integers; False keeps any text (read_table)
    rating_scale: tuple[float, float] | None = None   # ratings outside it are errors


def read_movielens_100k(path: str | os.PathLike) -> Interactions:
    """MovieLens 100K `u.data` or one of its split files (u1.base, u1.test, ua.base, ...).

    Tab-separated `user item rating timestamp`, no header; ratings 1..5 stars.
    """
    return _read_ratings(path, b"\t", header=False, rating_scale=(1.0, 5.0))


def read_movielens_dat(path: str | os.PathLike,
                       rating_scale: tuple[float, float]) -> Interactions:
    """MovieLens 1M / 10M `ratings.dat`: `user::item::rating::timestamp`, no header.

    rating_scale: (1, 5) for ML-1M, (0.5, 5) for ML-10M.
    """
    return _read_ratings(path, b"::", header=False, rating_scale=rating_scale)


def read_movielens_csv(path: str | os.PathLike,
                       rating_scale: tuple[float, float] = (0.5, 5.0)) -> Interactions:
    """MovieLens 20M / 25M / 32M `ratings.csv`: header `userId,movieId,rating,timestamp`."""
    return _read_ratings(path, b",", header=True, rating_scale=rating_scale)


def read_lastfm_artists(path: str | os.PathLike) -> Interactions:
    """HetRec 2011 Last.fm `user_artists.dat`: tab-separated, header `userID artistID weight`.

    The weight is a play count: a pair with a positive weight is one implicit interaction, a pair
    with weight 0 is not an interaction and is dropped; a negative weight is a DataError. No
    ratings and no timestamps (both None).
    """
    layout = _Layout(b"\t", ("user", "item", "weight"), header=True)
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
               rating_scale: tuple[float, float] | None = None) -> Interactions:
    """A generic CSV/TSV table with columns user, item[, rating[, timestamp]].

    sep: the field separator; None picks tab if line 1 has one, else comma.
    Header: line 1 is a header when it has a non-number in a column that must hold numbers: the
    rating and timestamp columns, and an id column whose value on line 2 is a number. (So a
    two-column file of text ids cannot have a header.)
    Ids: int64 when every id in a column is an integer, else str.
    Ratings: checked against rating_scale; with rating_scale None it is inferred as the (min,
    max) of the ratings in the file. Timestamps must be integers (seconds).
    """
    with _open(path) as f:
        first, second = (f.readline().rstrip(b"\r\n") for _ in range(2))
    if not first:
        raise DataError(f"{path}:1: empty file, no interactions")
    sep_bytes = sep.encode() if sep is not None else _sniff_separator(path, first)
    fields = first.split(sep_bytes)
    columns = _TABLE_COLUMNS.get(len(fields))
    if columns is None:
        raise DataError(f"{path}:1: expected 2 to 4 {_sep_name(sep_bytes)}-separated columns "
                        f"(user, item[, rating[, timestamp]]), found {len(fields)}")
    header = _is_header(fields, second.split(sep_bytes) if second else None, columns)
    layout = _Layout(sep_bytes, columns, header, int_ids=False, rating_scale=rating_scale)
    values, _ = _parse(path, layout)
    for key in ("user", "item"):
        values[key] = _int_ids_if_possible(values[key])
    if "rating" in values and rating_scale is None:
        rating_scale = (float(values["rating"].min()), float(values["rating"].max()))
    return _interactions(path, values, rating_scale=rating_scale, keep="latest")


def table_columns(path: str | os.PathLike, sep: str | None = None) -> int:
    """How many columns a CSV/TSV table has (its first line's), as read_table reads it."""
    with _open(path) as f:
        first = f.readline().rstrip(b"\r\n")
    return len(first.split(sep.encode() if sep is not None else _sniff_separator(path, first)))


def _read_ratings(path: str | os.PathLike, sep: bytes, header: bool,
                  rating_scale: tuple[float, float]) -> Interactions:
    layout = _Layout(sep, ("user", "item", "rating", "timestamp"), header,
                     rating_scale=rating_scale)
    columns, _ = _parse(path, layout)
    return _interactions(path, columns, rating_scale=rating_scale, keep="latest")


def _read_tag_assignments(path: str | os.PathLike) -> Interactions:
    layout = _Layout(b"\t", ("user", "item", "", "timestamp"), header=True)
    columns, _ = _parse(path, layout)
    columns["timestamp"] //= 1000           # milliseconds -> seconds
    return _interactions(path, columns, rating_scale=None, keep="earliest")


def _interactions(path: str | os.PathLike, columns: dict[str, np.ndarray],
                  rating_scale: tuple[float, float] | None, keep: str) -> Interactions:
    """Index the parsed columns and merge duplicate pairs by the module's rule (`keep`)."""
    user_ids, users = index_ids(columns["user"])
    item_ids, items = index_ids(columns["item"])
    ratings = columns.get("rating")
    timestamps = columns.get("timestamp")
    data = Interactions(
        users=users, items=items,
        ratings=None if ratings is None else ratings.astype(np.float32),
        timestamps=timestamps,
        user_ids=_decoded(user_ids), item_ids=_decoded(item_ids),
        rating_scale=rating_scale, name=Path(path).name)
    kept = _deduplicated(users, items, len(item_ids), timestamps, keep)
    if kept is None:
        return data
    return replace(data.subset(kept), n_duplicates_merged=data.nnz - len(kept))


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


def _decoded(ids: np.ndarray) -> np.ndarray:
    """Text ids (bytes) as str; numeric ids unchanged."""
    return np.char.decode(ids, "utf-8", errors="replace") if ids.dtype.kind == "S" else ids


def _int_ids_if_possible(raw: np.ndarray) -> np.ndarray:
    try:
        return raw.astype(np.int64)
    except (ValueError, OverflowError):
        return raw


def _sniff_separator(path: str | os.PathLike, first_line: bytes) -> bytes:
    for sep in (b"\t", b","):
        if sep in first_line:
            return sep
    raise DataError(f"{path}:1: cannot tell the separator: line 1 has neither a tab nor a "
                    "comma (pass sep=...)")


def _is_header(first: list[bytes], second: list[bytes] | None, columns: tuple[str, ...]) -> bool:
    """Whether line 1 (`first`) has a non-number where numbers belong: in the rating and
    timestamp columns, and in an id column whose value on line 2 (`second`) is a number."""
    for column, value in enumerate(first):
        below = second[column] if second and column < len(second) else None
        numeric = (columns[column] in ("rating", "timestamp")
                   or (below is not None and _is_number(below)))
        if numeric and not _is_number(value):
            return True
    return False


def _is_number(text: bytes) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _sep_name(sep: bytes) -> str:
    return _SEP_NAMES.get(sep, repr(sep.decode(errors="replace")))


_BOM = b"\xef\xbb\xbf"          # UTF-8's byte-order mark, which some editors write first


def _open(path: str | os.PathLike) -> BinaryIO:
    """The file, positioned at its first byte of data (after a UTF-8 byte-order mark)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: a folder, not a data file") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read: {error.strerror}") from None
    if f.read(len(_BOM)) != _BOM:
        f.seek(0)
    return f


def _parse(path: str | os.PathLike, layout: _Layout) -> tuple[dict[str, np.ndarray], int]:
    """All data lines of the file, parsed: ({column: (n,) values}, line number of the first).

    Ids and timestamps come back int64 (ids as bytes where layout.int_ids is False), ratings and
    weights float64, each in file order, so entry k was on line (first data line + k).
    """
    first_line = 2 if layout.header else 1
    parts: dict[str, list[np.ndarray]] = {key: [] for key in layout.columns if key}
    line = first_line
    with _open(path) as f:
        end = _end_of_data(f)
        if end == f.tell():
            raise DataError(f"{path}:1: empty file, no interactions")
        if layout.header:
            _check_header(path, f.readline(), layout)
        for block in _blocks(f, end):
            n_lines, values = _parse_block(path, block, line, layout)
            for key, value in values.items():
                parts[key].append(value)
            line += n_lines
    if line == first_line:
        raise DataError(f"{path}:{line}: no interactions: nothing follows the header line")
    return {key: np.concatenate(chunks) for key, chunks in parts.items()}, first_line


def _end_of_data(f: BinaryIO) -> int:
    """Byte offset where the data ends: blank lines at the end of a file are not data. f is
    left where it was (the start of its data)."""
    start = f.tell()
    end = f.seek(0, os.SEEK_END)
    while end > start:
        step = min(end - start, 1 << 16)
        f.seek(end - step)
        kept = f.read(step).rstrip(b"\r\n")
        end -= step - len(kept)
        if kept:
            break
    f.seek(start)
    return end


def _check_header(path: str | os.PathLike, line: bytes, layout: _Layout) -> None:
    # A file without its header line would otherwise lose its first record without a word.
    fields = line.rstrip(b"\r\n").split(layout.sep)
    if all(_is_number(field) for field in fields):
        names = ", ".join(_LABELS.get(key, "...") for key in layout.columns)
        raise DataError(f"{path}:1: expected a header line ({names}), found data: "
                        f"{line.decode(errors='replace').strip()!r}")


def _blocks(f: BinaryIO, end: int) -> Iterator[bytes]:
    """The bytes up to `end` from f's position, in blocks of whole lines, each ending in b"\\n"."""
    carry = b""
    while f.tell() < end:
        chunk = carry + f.read(min(_BLOCK_BYTES, end - f.tell()))
        cut = len(chunk) if f.tell() >= end else chunk.rfind(b"\n") + 1
        block, carry = chunk[:cut], chunk[cut:]
        if block:
            # Only the last block can lack a final newline: `end` excludes trailing newlines.
            yield block.replace(b"\r", b"") + (b"" if block.endswith(b"\n") else b"\n")


def _parse_block(path: str | os.PathLike, block: bytes, first_line: int,
                 layout: _Layout) -> tuple[int, dict[str, np.ndarray]]:
    """Parse whole lines; raise a DataError naming the first bad line among them."""
    sep = layout.sep
    if len(sep) > 1:
        block, sep = block.replace(sep, _UNIT_SEP), _UNIT_SEP
    raw = np.frombuffer(block, np.uint8)                                   # (bytes,)
    newlines = np.flatnonzero(raw == ord("\n"))                            # (lines,)
    field_ends = np.flatnonzero((raw == sep[0]) | (raw == ord("\n")))      # (fields,)
    n_columns = len(layout.columns)
    n_good, found = _well_formed_lines(field_ends, newlines, n_columns)
    problems = []                                       # (row in block, message)
    if n_good < len(newlines):
        problems.append((n_good, f"expected {n_columns} {_sep_name(layout.sep)}-separated "
                                 f"fields, found {found}"))
    ends = field_ends[:n_good * n_columns].reshape(n_good, n_columns)      # (n_good, columns)
    starts = np.empty_like(ends)
    starts.flat[1:] = ends.flat[:-1] + 1
    starts.flat[:1] = 0
    # Zero bytes on both sides, as wide as the widest field, so that a window of any field's
    # width starting at a field's first byte or ending at its last stays inside the buffer.
    pad = int((ends - starts).max(initial=0)) + 1
    buf = np.zeros(len(raw) + 2 * pad, np.uint8)
    buf[pad:pad + len(raw)] = raw
    values = {}
    for column, key in enumerate(layout.columns):
        if key:
            values[key], problem = _column(buf, starts[:, column] + pad, ends[:, column] + pad,
                                           key, layout)
            if problem:
                problems.append(problem)
    if problems:
        row, message = min(problems, key=lambda problem: problem[0])
        raise DataError(f"{path}:{first_line + row}: {message}")
    return len(newlines), values


def _well_formed_lines(field_ends: np.ndarray, newlines: np.ndarray,
                       n_columns: int) -> tuple[int, int]:
    """(number of leading lines with n_columns fields, fields on the first line without)."""
    if (len(field_ends) == len(newlines) * n_columns
            and np.array_equal(field_ends[n_columns - 1::n_columns], newlines)):
        return len(newlines), n_columns
    per_line = np.diff(np.searchsorted(field_ends, newlines, side="right"), prepend=0)
    bad = int(np.argmax(per_line != n_columns))
    return bad, int(per_line[bad])


def _column(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, key: str,
            layout: _Layout) -> tuple[np.ndarray | None, tuple[int, str] | None]:
    """One column's fields buf[starts[k]:ends[k]] as values, and its first bad row with what is
    wrong (None if none): ids and timestamps int64 (text ids as bytes), the rest float64."""
    label = _LABELS[key]
    if key in ("user", "item") and not layout.int_ids:
        return _field_text(buf, starts, ends), None
    integer = key in ("user", "item", "timestamp")
    values, plain = _plain_decimals(buf, starts, ends, integer)
    if not plain.all():
        # Signs, exponents, spaces, "nan", garbage: numpy's cast decides, on these rows only.
        rows = np.flatnonzero(~plain)
        text = _field_text(buf, starts[rows], ends[rows])
        try:
            values[rows] = text.astype(values.dtype)
        except (ValueError, OverflowError):
            row, message = _first_unparsable(text, values.dtype, label)
            return None, (int(rows[row]), message)
    if integer:
        return values, None
    checks = [(~np.isfinite(values), "is not a finite number")]           # (mask, what)
    if key == "rating" and layout.rating_scale is not None:
        low, high = layout.rating_scale
        checks.append(((values < low) | (values > high),
                       f"is outside the rating scale [{low:g}, {high:g}]"))
    if key == "weight":
        checks.append((values < 0, "is negative (play counts are >= 0)"))
    failed = [(int(np.argmax(bad)), what) for bad, what in checks if bad.any()]
    if not failed:
        return values, None
    row, what = min(failed, key=lambda problem: problem[0])
    return values, (row, f"{label} {_shown(buf[starts[row]:ends[row]].tobytes())} {what}")


def _plain_decimals(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                    integer: bool) -> tuple[np.ndarray, np.ndarray]:
    """Fields written as plain decimals, parsed by array arithmetic: (values, (n,) bool plain).

    Plain: 1 to 15 characters, all digits but (where not `integer`) one optional '.'. Up to 15
    digits float64 holds every integer exactly, so a value is one correctly rounded division of
    two exact numbers: the same float as Python's float(text). Values of other rows are junk.
    This is 3x faster than numpy's cast from bytes, which parses value by value.
    """
    n = len(starts)
    lengths = ends - starts                                                # (n,)
    width = int(lengths.max(initial=0))
    if not 0 < width <= 15:
        return np.zeros(n, np.int64 if integer else np.float64), np.zeros(n, bool)
    # (width, n) uint8: row k holds character k of every field, right-aligned, so one pass per
    # character position works on a contiguous row.
    chars = np.ascontiguousarray(sliding_window_view(buf, width)[ends - width].T)
    first = width - lengths              # (n,) first row that is inside the field
    number = np.zeros(n, np.int64)       # the digits read so far, as an integer
    dots = np.zeros(n, np.int64)         # '.' seen so far
    after_dot = np.zeros(n, np.int64)    # digits read after a '.'
    bad = lengths == 0
    for k, row in enumerate(chars):
        inside = first <= k
        digit = row - np.uint8(ord("0"))                   # non-digits wrap around to > 9
        is_digit = inside & (digit <= 9)
        is_dot = inside & (row == ord(".")) if not integer else np.zeros(n, bool)
        bad |= inside & ~is_digit & ~is_dot
        number *= np.where(is_dot, 1, 10)
        number += digit * is_digit
        after_dot += is_digit & (dots > 0)
        dots += is_dot
    if integer:
        return number, ~bad
    plain = ~bad & (dots <= 1) & (dots < lengths)
    return number / 10.0 ** after_dot, plain


def _field_text(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """(n,) fixed-width bytes array of the fields buf[starts[k]:ends[k]]."""
    lengths = ends - starts
    width = max(int(lengths.max(initial=0)), 1)
    chars = sliding_window_view(buf, width)[starts]         # (n, width) uint8, left-aligned
    chars *= np.arange(width) < lengths[:, None]            # NUL padding: numpy's S drops it
    return chars.view(f"S{width}").reshape(-1)


def _first_unparsable(text: np.ndarray, dtype: np.dtype, label: str) -> tuple[int, str]:
    """The slow pass: convert value by value, as the vectorized cast does, to find the bad one."""
    for row, value in enumerate(text):
        try:
            np.array([value]).astype(dtype)
        except ValueError:
            kind = "an integer" if dtype == np.int64 else "a number"
            return row, (f"empty {label}" if not value
                         else f"{label} {_shown(value)} is not {kind}")
        except OverflowError:
            return row, f"{label} {_shown(value)} is out of the int64 range"
    raise AssertionError("the vectorized cast failed but no single value does")


def _shown(value: bytes) -> str:
    return repr(value.decode(errors="replace"))
