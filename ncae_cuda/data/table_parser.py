"""The table parser under every reader: a data file's fields as checked, typed columns.

One core serves every format: a `Layout` says how a format separates fields, what each column
holds and whether line 1 is a header. pyarrow's CSV reader parses the file (quoting, encodings,
every core). A file it refuses, or whose values fail a check, is read again line by line with
Python's csv module, which names the first bad line. That reading is the definition of what a
file holds: a file it reads whole is read, in the few forms pyarrow refuses ("+5").
Timestamps are Unix seconds (integers) or ISO 8601 dates and times (read line by line).
"""
from __future__ import annotations

import bz2
import codecs
import contextlib
import csv
import datetime
import gc
import gzip
import itertools
import lzma
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

from .interactions import BEYOND_FLOAT32, FLOAT32_MAX, DataError, integer_id_problem

ENCODING = "utf-8"           # a data file's text, unless told otherwise
LABELS = {"user": "user id", "item": "item id", "rating": "rating",     # a column, as told
          "timestamp": "timestamp", "weight": "weight"}
SEP_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon"}
# A compressed file is told by its first bytes, not its name.
_COMPRESSED = {b"\x1f\x8b": gzip.open, b"BZh": bz2.open, b"\xfd7zXZ\x00": lzma.open}
# What a file of other first bytes is that a user may give for a table (MovieLens ships as .zip):
# read as text, it would be refused as a byte that is not text, and --encoding suggested.
_ARCHIVES = {b"PK\x03\x04": "a zip archive", b"PK\x05\x06": "a zip archive",
             b"(\xb5/\xfd": "compressed with Zstandard", b"7z\xbc\xaf'\x1c": "a 7-Zip archive"}
_UNIT_SEP = "\x1f"           # ASCII unit separator: what a separator of several characters becomes

_ARROW_TYPES = {"user": "string", "item": "string", "timestamp": "int64",     # pyarrow's names
                "rating": "float64", "weight": "float64"}
_BLOCK_BYTES = 1 << 20       # lines the line-by-line reading decodes, converts and checks at once


@dataclass(frozen=True)
class Layout:
    sep: str                        # field separator as written: "\t", ",", "::"
    columns: tuple[str, ...]        # what each column holds: a key of LABELS, or "" (unused)
    header: bool                    # line 1 is a header
    int_ids: bool = True            # ids must be integers as written (data.py's docstring);
                                    # False keeps any text (read_table)
    rating_scale: tuple[float, float] | None = None   # ratings outside it are errors
    encoding: str = ENCODING
    names: tuple[str, ...] = ()     # the header's names, where the columns were mapped by them
    per_second: int = 1             # the timestamps' units in a second: 1, or the HetRec tag
                                    # files' milliseconds (1000)

    def described(self) -> str:
        labels = [LABELS[key] for key in self.columns]
        if self.names:
            return "columns by the header: " + ", ".join(
                f"{name} = {label}" for name, label in zip(self.names, labels))
        return "columns by position (no header): " + ", ".join(labels)


def id_column(texts: np.ndarray, codes: np.ndarray):
    """An id column read as (unique texts, (n,) codes): (n,) int64 ids where every text writes
    an integer id (ncae_cuda/data/interactions.py's docstring), else (texts, codes) as they are."""
    listed = texts.tolist()
    if any(map(integer_id_problem, listed)):
        return texts, codes
    return np.fromiter(map(int, listed), np.int64, len(listed))[codes]


def sep_name(sep: str) -> str:
    return SEP_NAMES.get(sep, repr(sep))


def codecs_name(encoding: str) -> str:
    """The codec's own name for `encoding` ('latin1' -> 'iso8859-1'); DataError where Python
    knows no such encoding."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise DataError(f"unknown encoding {encoding!r} (e.g. utf-8, latin-1, cp1252)") from None


def parse(path: str | os.PathLike, layout: Layout) -> tuple[dict, int]:
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
        if all(map(is_number, fields)):
            names = ", ".join(LABELS.get(key, "...") for key in layout.columns)
            raise DataError(f"{path}:{line}: expected a header line ({names}), found data: "
                            f"{layout.sep.join(fields)!r}")
        if not head:
            raise DataError(f"{path}:{line + 1}: no interactions: nothing follows the header "
                            "line")
    values = _read_fast(path, layout)
    if values is None or _first_bad(values, layout) is not None:
        values = _read_slowly(path, layout)
    return values, head[0][0]


def _read_fast(path: str | os.PathLike, layout: Layout) -> dict | None:
    """The file's columns as pyarrow's CSV reader parses them; None where it refuses the file.
    Ids are read as text: pyarrow's integer columns take "007" and " 7" for 7."""
    # pyarrow is imported by the first file read, not with the package: many processes that
    # import the package (a run on synthetic data, a server, a pool's run) read no file, and
    # pyarrow is a large share of a process's start
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    names = [key or f"unused {k}" for k, key in enumerate(layout.columns)]
    types = {key: pa.type_for_alias(_ARROW_TYPES[key]) for key in layout.columns if key}
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
    """numpy values of a column; an id column as id_column gives it."""
    import pyarrow as pa
    if column.type != pa.string():
        return np.require(column.to_numpy(), requirements="W")    # arrow's own are read-only
    numbers = _arrow_integer_ids(column)
    if numbers is not None:
        return numbers
    coded = column.combine_chunks().dictionary_encode()
    return id_column(coded.dictionary.to_numpy(zero_copy_only=False).astype(str),
                      coded.indices.to_numpy())


def _arrow_integer_ids(column: pa.ChunkedArray) -> np.ndarray | None:
    """(n,) int64 of an id column where every text writes an integer id, None where one may
    not: id_column's rule at arrow's speed. Arrow's cast takes [-]digits and [-]0x hex, so the
    texts it takes that are not plain integers are those that start with 0 and say more than
    "0", and those that start with -0."""
    import pyarrow as pa
    import pyarrow.compute as pc
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


def _read_slowly(path: str | os.PathLike, layout: Layout) -> dict:
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
                failure = row, f"{LABELS[key]} {text!r} {what}"
            if failure is not None:
                row, message = failure
                raise DataError(f"{path}:{chunk[row][0]}: {message}")
            for key in keys:
                parts[key].append(values[key])
    columns = {key: np.concatenate(chunks) for key, chunks in parts.items()}
    for key in ("user", "item"):
        texts, codes = np.unique(columns[key], return_inverse=True)
        columns[key] = id_column(texts, codes.astype(np.int32).reshape(-1))
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


def _converted(records: list[tuple[int, list[str]]], layout: Layout
               ) -> tuple[dict[str, np.ndarray], tuple[int, str] | None]:
    """The values of the records before the first that cannot be read, and that record's row
    with what is wrong (None if every one can)."""
    n_columns = len(layout.columns)
    rows = next((row for row, (_, fields) in enumerate(records) if len(fields) != n_columns),
                len(records))
    failures = [] if rows == len(records) else [
        (rows, f"expected {n_columns} {sep_name(layout.sep)}-separated fields, found "
               f"{len(records[rows][1])}")]
    values = {}
    for column, key in enumerate(layout.columns):
        if key:
            values[key], failure = _column_values(
                [fields[column] for _, fields in records[:rows]], LABELS[key], _KINDS[key])
            failures += [failure] if failure else []
    failure = min(failures, default=None)
    if failure is not None:
        values = {key: value[:failure[0]] for key, value in values.items()}
    return values, failure


def unix_seconds(text: str) -> int:
    """A timestamp as whole seconds since 1970-01-01 UTC: an integer as it is, or an ISO 8601
    date and time (2024-03-01T12:30:00+01:00; UTC where it names no zone) rounded down;
    ValueError where it is neither."""
    try:
        return int(text)
    except ValueError:
        moment = datetime.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return math.floor(moment.timestamp())


TIMESTAMP_FORMS = "Unix seconds (an integer) or an ISO 8601 date and time"
# The last second a date can name (9999-12-31T23:59:59Z): a timestamp after it is not seconds,
# and read as seconds it would skew every time between interactions (--recency-halflife's)
LATEST_SECONDS = int(datetime.datetime(9999, 12, 31, 23, 59, 59,
                                        tzinfo=datetime.timezone.utc).timestamp())
_KINDS = {"user": str, "item": str, "timestamp": unix_seconds, "rating": float, "weight": float}
_DTYPES = {unix_seconds: np.int64, float: np.float64, str: str}
_WHAT = {unix_seconds: TIMESTAMP_FORMS, float: "a number"}      # what a field of a kind must be


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
    what = _WHAT[kind]
    try:
        value = kind(text)
    except ValueError:
        return f"{label} {text!r} is not {what}"
    if "_" in text:
        return f"{label} {text!r} is not {what}"
    if kind is unix_seconds and not -2**63 <= value < 2**63:
        return f"{label} {text!r} is out of the int64 range"
    return None


def is_number(text: str) -> bool:
    return _field_problem(text, "", float) is None


def field_problem(text: str, key: str) -> str | None:
    """What is wrong with one field of column `key` (a key of LABELS), or None."""
    return _field_problem(text, LABELS[key], _KINDS[key])


def _first_bad(values: dict, layout: Layout) -> tuple[int, str, str] | None:
    """(row, column, what is wrong) of the first row whose values fail a check, or None."""
    failed = []                                        # (row, key, what)
    for key in ("user", "item"):
        value = values.get(key)
        if value is None or not isinstance(value, tuple) and value.dtype.kind == "i":
            continue                                   # integer ids: checked as converted
        # text ids: (unique texts, codes) as read whole, a block's texts as read line by line
        texts, codes = value if isinstance(value, tuple) else (value, None)
        bad = (np.array([integer_id_problem(text) is not None for text in texts.tolist()], bool)
               if layout.int_ids else texts == "")
        if bad.any():
            row = int(np.argmax(bad if codes is None else bad[codes]))
            text = texts[row if codes is None else codes[row]]
            failed.append((row, key, integer_id_problem(text) if layout.int_ids else "is empty"))
    stamps = values.get("timestamp")
    late = None if stamps is None else stamps > LATEST_SECONDS * layout.per_second
    if late is not None and late.any():
        failed.append((int(np.argmax(late)), "timestamp",
                       "is after the year 9999" + (" as Unix seconds: in milliseconds? give "
                                                   "seconds (divide by 1000)"
                                                   if layout.per_second == 1 else "")))
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


def split_fields(text: str, sep: str, where: str) -> list[str]:
    """The fields of one line, as csv reads them; a DataError starting `where` (path:line)
    where csv cannot."""
    try:
        return next(_csv_reader([text], sep), [])
    except csv.Error as e:
        raise DataError(f"{where}: {_csv_problem(e)}") from None


def _csv_problem(error: csv.Error) -> str:
    """csv's error in a user's terms: its 'new-line character seen in unquoted field - do you
    need to open the file in universal-newline mode?' is a carriage return without a line feed,
    which the user meets as a file whose lines end in CR alone (classic Mac OS)."""
    if "new-line character" not in str(error):
        return str(error)
    return ("a carriage return (\\r) without a line feed (\\n) in an unquoted field: lines "
            "that end in \\r alone (classic Mac OS) are not read; save the file with \\n or "
            "\\r\\n line ends")


def _csv_reader(lines: list[str], sep: str):
    """csv's reader of the lines; a separator of several characters (csv takes one) becomes
    _UNIT_SEP first, as _read_fast does for pyarrow."""
    if len(sep) == 1:
        return csv.reader(lines, delimiter=sep)
    return csv.reader((text.replace(sep, _UNIT_SEP) for text in lines), delimiter=_UNIT_SEP)


def _records(path: str | os.PathLike, layout: Layout) -> Iterator[list[tuple[int, list[str]]]]:
    """(line number, fields) of every line that is not blank, as Python's csv module reads the
    file (quoted fields and all), in blocks."""
    for first, text in text_blocks(path, layout.encoding):
        reader = _csv_reader(text.split("\n"), layout.sep)
        try:
            records = [(first - 1 + reader.line_num, fields) for fields in reader if fields]
        except csv.Error as e:
            raise DataError(f"{path}:{first - 1 + reader.line_num}: {_csv_problem(e)}"
                            ) from None
        if records:
            yield records


def text_blocks(path: str | os.PathLike, encoding: str) -> Iterator[tuple[int, str]]:
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
    """The file as bytes, decompressed where its first bytes say it is compressed; a DataError
    where they say it is an archive this reader does not open (_ARCHIVES)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: a folder, not a data file") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read: {error.strerror}", errno=error.errno) from None
    with f:
        start = f.read(max(map(len, [*_COMPRESSED, *_ARCHIVES])))
    archive = next((what for magic, what in _ARCHIVES.items() if start.startswith(magic)), None)
    if archive:
        raise DataError(f"{path}: {archive}, not a table: extract the table from it (a file "
                        "compressed with gzip, bzip2 or xz is read as it is)")
    opener = next((opener for magic, opener in _COMPRESSED.items() if start.startswith(magic)),
                  open)
    return opener(path, "rb")
