"""The data files, read into `Interactions`: MovieLens 100K (`u.data` and its split files), 1M/10M
(`ratings.dat`), 20M/25M/32M (`ratings.csv`), HetRec 2011 Last.fm (`user_artists.dat`,
`user_taggedartists-timestamps.dat`) and Delicious (`user_taggedbookmarks-timestamps.dat`), and
generic tables (`read_table`: CSV, TSV or any separator, a header's names mapped to columns, any
encoding, compressed or not). Bad input stops with a `DataError` whose message starts with
`path:line:`.

Ids are read by the rule of ncae_cuda/data/interactions.py's docstring (an integer only where
every id of the column is one, as Python prints it).

Duplicate (user, item) pairs are merged by one rule, and the count of records merged away is
kept in `Interactions.n_duplicates_merged`:
  - rating data (MovieLens, `read_table`, `user_artists.dat`) keep the most recent record: the
    largest timestamp; among equal timestamps, or where there are none, the later line;
  - tag assignments (HetRec `*-timestamps.dat`) are many records of one interaction by design:
    the pair is one interaction at its earliest timestamp (the earlier line on ties).
"""
from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .interactions import DataError, Interactions, index_ids
from .table_parser import (
    ENCODING,
    SEP_NAMES,
    Layout,
    codecs_name,
    field_problem,
    parse,
    sep_name,
    split_fields,
    text_blocks,
)

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
    layout = Layout("\t", ("user", "item", "weight"), header=True)
    columns, first_line = parse(path, layout)
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
    Ids: int64 where every id of a column is a plain integer (data.py's docstring), else
    str: each as the file writes it.
    Ratings: >= 0 and inside rating_scale; with rating_scale None it is inferred as the (min,
    max) of the ratings in the file. Timestamps must be integers (seconds).
    """
    layout = replace(table_layout(path, sep, encoding), rating_scale=rating_scale)
    values, _ = parse(path, layout)
    if "rating" in values and rating_scale is None:
        rating_scale = (float(values["rating"].min()), float(values["rating"].max()))
    return replace(_interactions(path, values, rating_scale=rating_scale, keep="latest"),
                   columns=layout.described())


def table_layout(path: str | os.PathLike, sep: str | None = None,
                 encoding: str = ENCODING) -> Layout:
    """How read_table reads the file: its separator, its columns and whether it has a header,
    from its first line; a DataError says what is wrong with it."""
    codecs_name(encoding)
    first = next(((first + k, text) for first, block in text_blocks(path, encoding)
                  for k, text in enumerate(block.split("\n")) if text.strip()), None)
    if first is None:
        raise DataError(f"{path}:1: empty file, no interactions")
    line, text = first
    if sep is None:
        sep = next((s for s in SEP_NAMES if s in text), None)
        if sep is None:
            raise DataError(f"{path}:{line}: cannot tell the separator: line {line} has no tab, "
                            "comma or semicolon (give it with --sep)")
    fields = split_fields(text, sep, f"{path}:{line}")
    known = [_COLUMN_OF.get(re.sub(r"[\s_-]", "", field.lower())) for field in fields]
    if all(known):
        _check_names(path, line, fields, known)
        return Layout(sep, tuple(known), header=True, int_ids=False, encoding=encoding,
                       names=tuple(fields))
    rename = ("name the columns user, item, rating, timestamp (or userId, movieId, ...: "
              "ncae_cuda.data.reader.COLUMN_NAMES)")
    if any(known):          # a header, of as many columns as it names (a fifth: its name said)
        unknown = ", ".join(repr(field) for field, key in zip(fields, known) if key is None)
        raise DataError(f"{path}:{line}: a header with names this reader does not know "
                        f"({unknown}): {rename}")
    if not 2 <= len(fields) <= len(_TABLE_COLUMNS):
        raise DataError(f"{path}:{line}: expected 2 to 4 {sep_name(sep)}-separated columns "
                        f"(user, item[, rating[, timestamp]]), found {len(fields)}")
    columns = _TABLE_COLUMNS[:len(fields)]
    # (a timestamp may be an ISO 8601 time: a date is data, not a column's name)
    not_numbers = [problem for field, key in zip(fields, columns)
                   if key in ("rating", "timestamp") and (problem := field_problem(field, key))]
    if not_numbers:
        raise DataError(f"{path}:{line}: neither data ({not_numbers[0]}) nor a header of known "
                        f"names: {rename}")
    return Layout(sep, columns, header=False, int_ids=False, encoding=encoding)


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




def _read_ratings(path: str | os.PathLike, sep: str, header: bool,
                  rating_scale: tuple[float, float]) -> Interactions:
    layout = Layout(sep, ("user", "item", "rating", "timestamp"), header,
                     rating_scale=rating_scale)
    columns, _ = parse(path, layout)
    return _interactions(path, columns, rating_scale=rating_scale, keep="latest")


def _read_tag_assignments(path: str | os.PathLike) -> Interactions:
    layout = Layout("\t", ("user", "item", "", "timestamp"), header=True, per_second=1000)
    columns, _ = parse(path, layout)
    columns["timestamp"] //= layout.per_second            # milliseconds -> seconds
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
    """(sorted unique ids, (n,) int32 index) of an id column (id_column's)."""
    if not isinstance(column, tuple):
        return index_ids(column)
    texts, codes = column
    order = np.argsort(texts)
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    return texts[order], rank[codes]




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




