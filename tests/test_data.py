"""Readers of ncae_cuda.data.reader on small files written here: values, duplicate rule, bad
input."""
import bz2
import gzip
import hashlib
import lzma
import re
import time
import warnings
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda.data import digest, interactions, reader, table_parser
from ncae_cuda.data.interactions import DataError, IdLookup, UnknownIds, index_ids
from ncae_cuda.data.reader import (
    read_delicious,
    read_lastfm_artists,
    read_lastfm_tag_timestamps,
    read_movielens_100k,
    read_movielens_csv,
    read_movielens_dat,
    read_table,
)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def entries(d):
    """(source user id, source item id, rating, timestamp) per entry, in entry order."""
    ratings = [None] * d.nnz if d.ratings is None else d.ratings.tolist()
    timestamps = [None] * d.nnz if d.timestamps is None else d.timestamps.tolist()
    return list(zip(d.user_ids[d.users].tolist(), d.item_ids[d.items].tolist(),
                    ratings, timestamps))


# ---- each reader on a small file ----------------------------------------------------------------

def test_movielens_100k(tmp_path):
    path = write(tmp_path, "u.data", "196\t242\t3\t881250949\n186\t302\t3\t891717742\n"
                                     "22\t377\t1\t878887116\n196\t302\t5\t881251000\n")
    d = read_movielens_100k(path)
    np.testing.assert_array_equal(d.user_ids, [22, 186, 196])
    np.testing.assert_array_equal(d.item_ids, [242, 302, 377])
    np.testing.assert_array_equal(d.users, [2, 1, 0, 2])
    np.testing.assert_array_equal(d.items, [0, 1, 2, 1])
    np.testing.assert_array_equal(d.ratings, np.array([3, 3, 1, 5], np.float32))
    np.testing.assert_array_equal(d.timestamps, [881250949, 891717742, 878887116, 881251000])
    assert (d.users.dtype, d.items.dtype, d.ratings.dtype, d.timestamps.dtype) == (
        np.int32, np.int32, np.float32, np.int64)
    assert d.user_ids.dtype == np.int64 and d.item_ids.dtype == np.int64
    assert d.rating_scale == (1.0, 5.0) and d.name == "u.data" and d.n_duplicates_merged == 0


def test_movielens_dat_half_stars(tmp_path):
    path = write(tmp_path, "ratings.dat", "1::122::5::838985046\n1::185::4.5::838983525\n"
                                          "2::122::0.5::868245777\n")
    d = read_movielens_dat(path, rating_scale=(0.5, 5.0))
    assert entries(d) == [(1, 122, 5.0, 838985046), (1, 185, 4.5, 838983525),
                          (2, 122, 0.5, 868245777)]
    assert d.rating_scale == (0.5, 5.0)


def test_movielens_csv(tmp_path):
    path = write(tmp_path, "ratings.csv", "userId,movieId,rating,timestamp\n"
                                          "1,2,3.5,1112486027\n1,29,3.5,1112484676\n"
                                          "7,2,4.0,1112484819\n")
    d = read_movielens_csv(path)
    assert entries(d) == [(1, 2, 3.5, 1112486027), (1, 29, 3.5, 1112484676),
                          (7, 2, 4.0, 1112484819)]
    assert d.rating_scale == (0.5, 5.0)


def test_lastfm_artists_positive_weights_are_interactions(tmp_path):
    path = write(tmp_path, "user_artists.dat", "userID\tartistID\tweight\n2\t51\t13883\n"
                                               "2\t52\t0\n3\t51\t1\n")
    d = read_lastfm_artists(path)
    assert entries(d) == [(2, 51, None, None), (3, 51, None, None)]
    np.testing.assert_array_equal(d.item_ids, [51])     # artist 52 was never played
    assert d.ratings is None and d.timestamps is None and d.rating_scale is None


@pytest.mark.parametrize("reader", [read_lastfm_tag_timestamps, read_delicious])
def test_tag_assignments_collapse_to_earliest_time_in_seconds(tmp_path, reader):
    path = write(tmp_path, "tags.dat", "userID\tartistID\ttagID\ttimestamp\n"
                                       "2\t52\t13\t1238536800000\n2\t52\t15\t1238536000999\n"
                                       "2\t63\t13\t1238536800000\n3\t52\t15\t1238536800000\n")
    d = reader(path)
    assert entries(d) == [(2, 52, None, 1238536000), (2, 63, None, 1238536800),
                          (3, 52, None, 1238536800)]
    assert d.ratings is None and d.n_duplicates_merged == 1


def test_table_with_header_text_ids_and_inferred_scale(tmp_path):
    path = write(tmp_path, "t.csv", "user,item,stars\nalice,book,2\nbob,book,4\nalice,pen,3\n")
    d = read_table(path)
    assert entries(d) == [("alice", "book", 2.0, None), ("bob", "book", 4.0, None),
                          ("alice", "pen", 3.0, None)]
    assert d.user_ids.dtype.kind == "U" and d.rating_scale == (2.0, 4.0)


def test_table_tab_without_header_has_int_ids(tmp_path):
    path = write(tmp_path, "t.tsv", "10\t7\t4\t100\n11\t7\t5\t90\n")
    d = read_table(path, rating_scale=(1, 5))
    assert entries(d) == [(10, 7, 4.0, 100), (11, 7, 5.0, 90)]
    assert d.user_ids.dtype == np.int64 and d.rating_scale == (1, 5)


def test_table_reads_iso_8601_timestamps_as_unix_seconds(tmp_path):
    """Beside Unix seconds: a zone as written, none as UTC, a date alone at midnight, parts of
    a second dropped (hand-computed: 2024-03-01T00:00:00Z is 1709251200)."""
    midnight = 1709251200
    path = write(tmp_path, "t.csv", "user,item,timestamp\n"
                 "1,2,2024-03-01T12:30:00+01:00\n1,3,1700000000\n2,2,2024-03-01\n"
                 "2,3,2024-03-01T00:00:59.9Z\n")
    assert entries(read_table(path)) == [(1, 2, None, midnight + 11 * 3600 + 30 * 60),
                                         (1, 3, None, 1700000000), (2, 2, None, midnight),
                                         (2, 3, None, midnight + 59)]
    # without a header, an ISO time on line 1 is data too (before: "neither data (timestamp
    # '2024-03-01' is not a number) nor a header")
    path = write(tmp_path, "bare.csv", "2,2,5,2024-03-01\n1,3,4,1700000000\n")
    assert entries(read_table(path)) == [(2, 2, 5.0, midnight), (1, 3, 4.0, 1700000000)]


def test_a_time_of_no_zone_is_utc_whatever_the_machine_s_zone(tmp_path, monkeypatch):
    """The machine's zone (New York's here, UTC - 5 in March) is not the file's: a time that
    names no zone is UTC (hand-computed: 2024-03-01T00:00:00Z is 1709251200)."""
    path = write(tmp_path, "t.csv", "user,item,timestamp\n1,2,2024-03-01T12:30:00\n")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert entries(read_table(path)) == [(1, 2, None, 1709251200 + 12 * 3600 + 30 * 60)]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_ids_are_matched_as_written():
    """A NUL would be dropped by numpy's text (and 'u0\\x00' find 'u0'): refused, as every
    control character; an empty id and a long one are shown so that a message says what it
    was, in a line of bounded length."""
    ids = np.array(["u0", "u1"])
    for bad in ["u0\x00", "u0\n", "\x7fu1"]:
        with pytest.raises(DataError, match="control character"):
            IdLookup(ids, "user")([bad])
    with pytest.raises(UnknownIds, match="unknown to the model: '' \\(empty\\)$"):
        IdLookup(ids, "user")([""])
    with pytest.raises(UnknownIds) as long_one:
        IdLookup(ids, "user")(["x" * 900_000])
    assert len(str(long_one.value)) < 200 and "(900000 characters)" in str(long_one.value)
    assert IdLookup(ids, "user")(["u1", "u0"]).tolist() == [1, 0]


@pytest.mark.parametrize("kind", ["integer", "text"])
def test_a_lookup_sorted_once_finds_every_id_as_a_dictionary_does(kind):
    """Random ids, looked up many times by one IdLookup: each found where a dictionary of the
    ids puts it, an absent one named."""
    rng = np.random.default_rng(0)
    numbers = rng.permutation(20_000)[:3_000]                                  # (3000,)
    ids = numbers.astype(np.int64) if kind == "integer" else np.array([f"u{k}" for k in numbers])
    where = {v: k for k, v in enumerate(ids.tolist())}
    lookup = IdLookup(ids, "user")
    for size in (1, 7, 500):
        wanted = rng.choice(ids, size)
        assert lookup(wanted).tolist() == [where[w] for w in wanted.tolist()]
    absent = 20_001 if kind == "integer" else "u20001"
    with pytest.raises(UnknownIds, match=f"1 user id\\(s\\) unknown to the model: {absent}$"):
        lookup([ids[0], absent])
    assert IdLookup(ids[:0], "item")([]).tolist() == []


def test_table_two_columns_is_implicit(tmp_path):
    d = read_table(write(tmp_path, "t.csv", "1,2\n1,3\n4,2\n"), sep=",")
    assert entries(d) == [(1, 2, None, None), (1, 3, None, None), (4, 2, None, None)]


@pytest.mark.parametrize("texts", [
    ["3", "3.", ".5", "0.1", "4.25", "7.0", "123456789.0123"],     # all plain
    ["+2", "1e2", " 2.5", "0.30000000000000004", "2.5 "],          # forms pyarrow may refuse
])
def test_number_forms_parse_like_python_float(tmp_path, texts):
    path = write(tmp_path, "t.csv", "".join(f"{k},1,{t}\n" for k, t in enumerate(texts)))
    assert read_table(path).ratings.tolist() == [np.float32(float(t)) for t in texts]


def test_crlf_missing_final_newline_blank_lines(tmp_path):
    lines = "1\t2\t3\t10\r\n\r\n1\t3\t4\t11"
    expected = [(1, 2, 3.0, 10), (1, 3, 4.0, 11)]
    assert entries(read_movielens_100k(write(tmp_path, "a", lines))) == expected
    assert entries(read_movielens_100k(write(tmp_path, "b", lines + "\r\n\n\n"))) == expected


MIXED = ('user,item,rating,timestamp\n"u 1",book,2,10\n"u,2",book,4.5,11\n'
         'u3,"pen",+3,12\n\n"u 1",pen, 1e0 ,13\n')


def test_the_line_by_line_reading_reads_what_pyarrow_reads(tmp_path, monkeypatch):
    """Two readings of one file: pyarrow's, and Python's csv module's, which names bad lines
    and reads what pyarrow refuses ("+3" here): the same entries and ids."""
    path = write(tmp_path, "t.csv", MIXED)
    both = read_table(path)
    monkeypatch.setattr(table_parser, "_read_fast", lambda path, layout: None)
    slow = read_table(path)
    assert entries(slow) == entries(both) == [
        ("u 1", "book", 2.0, 10), ("u,2", "book", 4.5, 11), ("u3", "pen", 3.0, 12),
        ("u 1", "pen", 1.0, 13)]
    for d in (both, slow):
        assert d.user_ids.tolist() == ["u 1", "u,2", "u3"] and d.user_ids.dtype.kind == "U"


# Ids that Python's int() or pyarrow's integer columns read as an integer, written otherwise
NOT_PLAIN_INTEGERS = ["007", "00007", "+7", " 7", "7 ", "7_0", "0x7", "-0", "-07", "00",
                      "9" * 20]


@pytest.mark.parametrize("reading", ["pyarrow", "line by line"])
def test_ids_are_the_files_text_unless_every_one_is_a_plain_integer(tmp_path, monkeypatch,
                                                                     reading):
    if reading == "line by line":
        monkeypatch.setattr(table_parser, "_read_fast", lambda path, layout: None)
    plain = ["7", "-7", "0", str(2**63 - 1), str(-2**63)]
    d = read_table(write(tmp_path, "p.csv", "".join(f"{u},{u},1\n" for u in plain)))
    assert d.user_ids.dtype == d.item_ids.dtype == np.int64
    assert sorted(d.user_ids.tolist()) == sorted(map(int, plain))
    for form in NOT_PLAIN_INTEGERS + ["7.0", "1e1"]:
        d = read_table(write(tmp_path, "t.csv", f"7,1,3\n{form},2,4\n12,{form},5\n"))
        assert entries(d) == [("7", "1", 3.0, None), (form, "2", 4.0, None),
                              ("12", form, 5.0, None)], form
        assert d.n_users == 3 and d.n_duplicates_merged == 0


@pytest.mark.parametrize("form", NOT_PLAIN_INTEGERS)
def test_a_published_format_refuses_an_id_that_is_not_a_plain_integer(tmp_path, form):
    path = write(tmp_path, "u.data", f"1\t2\t3\t4\n{form}\t2\t3\t4\n")
    with pytest.raises(DataError, match=rf"^{path}:2: user id '{re.escape(form)}' is (not an "
                                        r"integer|not written as a plain integer \(no leading "
                                        r"zeros|out of the int64 range)"):
        read_movielens_100k(path)


def test_text_finds_an_integer_id_only_as_a_file_writes_it():
    ids = np.array([1, 7, 196])
    np.testing.assert_array_equal(interactions.IdLookup(ids, "user")(["196", "7"]), [2, 1])
    np.testing.assert_array_equal(interactions.IdLookup(ids, "user")([7, 1.0]), [1, 0])
    assert interactions.shown_id(" 196") == "' 196'"                  # not the known 196
    for wanted in ("0196", "196.0", " 196", "+196", "1_96"):
        shown = re.escape(interactions.shown_id(wanted))
        with pytest.raises(interactions.UnknownIds, match=f"unknown to the model: {shown}$"):
            interactions.IdLookup(ids, "user")([wanted])
    texts = np.array(["007", "7", "x"])
    np.testing.assert_array_equal(interactions.IdLookup(texts, "user")(["7", 7, "007"]),
                                  [1, 1, 0])


def test_an_id_beyond_int64_is_unknown_not_an_overflow():
    """Before: OverflowError (a server's 500 for every request batched with it)."""
    lookup = interactions.IdLookup(np.array([1, np.iinfo(np.int64).max]), "item")
    np.testing.assert_array_equal(lookup([2 ** 63 - 1, "9223372036854775807"]), [1, 1])
    for wanted in (2 ** 63, -2 ** 63 - 1, 10 ** 30, 1e30, 10 ** 400, str(10 ** 30)):
        with pytest.raises(interactions.UnknownIds, match="1 item id.s. unknown to the model"):
            lookup([1, wanted])


def test_a_rating_beyond_float32_is_refused_without_a_warning(tmp_path):
    # Before: an overflow warning, then "X: NaN or infinite values" in training, or a NaN loss.
    path = write(tmp_path, "t.csv", "user,item,rating\na,b,1\na,c,1e300\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DataError, match=rf"^{path}:3: rating '1e300' is beyond float32's "
                                            r"range \(\+-3\.4e\+38\)$"):
            read_table(path)
    assert read_table(write(tmp_path, "ok.csv", "a,b,3e38\n")).ratings.tolist() == [
        np.float32(3e38)]
    X = sp.csr_matrix(np.array([[0, 1e300], [2, 0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DataError, match=r"^X: 1 values beyond float32's range "
                                            r"\(\+-3\.4e\+38\), e\.g\. 1e\+300 at \(0, 1\)"):
            interactions.from_matrix(X)


def test_chunks_of_the_line_by_line_reading_join_and_count_lines(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    rows = [(u, i, r, t) for u, i, r, t in zip(
        rng.integers(1, 50, 300), range(300), rng.integers(1, 6, 300), rng.integers(0, 9, 300))]
    text = "".join(f"{u}\t{i}\t{r}\t{t}\n" for u, i, r, t in rows)
    path = write(tmp_path, "u.data", text)
    whole = read_movielens_100k(path)
    monkeypatch.setattr(table_parser, "_BLOCK_BYTES", 64)       # a few lines a block
    monkeypatch.setattr(table_parser, "_read_fast", lambda path, layout: None)
    assert entries(read_movielens_100k(path)) == entries(whole)
    lines = text.splitlines(keepends=True)
    lines[256] = "1\t2\t3\n"
    lines[270] = "1\t2\t9\t4\n"
    with pytest.raises(DataError, match=r"u\.data:257: expected 4 tab-separated fields"):
        read_movielens_100k(write(tmp_path, "u.data", "".join(lines)))


def test_index_ids_matches_unique_for_compact_and_sparse_ids():
    for raw in (np.array([5, 3, 5, 9, 3]), np.array([10**12, 7, 10**12, -4])):
        ids, index = index_ids(raw)
        expected_ids, expected_index = np.unique(raw, return_inverse=True)
        np.testing.assert_array_equal(ids, expected_ids)
        np.testing.assert_array_equal(index, expected_index)
        assert index.dtype == np.int32


def test_with_times_dates_each_pair_whatever_the_entry_order():
    # Entries not in (user, item) order; the times on their own id maps, with a pair the data
    # lacks (ignored) and one of its pairs missing (NO_TIME).
    data = interactions.Interactions(
        users=np.array([1, 0, 1, 0], np.int32), items=np.array([0, 1, 1, 0], np.int32),
        ratings=None, timestamps=None, user_ids=np.array([10, 20]), item_ids=np.array([7, 8]))
    times = interactions.Interactions(
        users=np.array([0, 1, 1, 2], np.int32), items=np.array([0, 1, 0, 0], np.int32),
        ratings=None, timestamps=np.array([100, 200, 300, 400]),
        user_ids=np.array([10, 20, 30]), item_ids=np.array([8, 7]))
    # (10, 8) at 100, (20, 7) at 200, (20, 8) at 300, (30, 8) not in data
    dated = interactions.with_times(data, times)
    assert entries(dated) == [(20, 7, None, 200), (10, 8, None, 100), (20, 8, None, 300),
                              (10, 7, None, interactions.NO_TIME)]


# ---- duplicates: one rule per kind of data ------------------------------------------------------

def test_ratings_keep_the_latest_record(tmp_path):
    path = write(tmp_path, "u.data", "1\t2\t5\t300\n1\t2\t1\t100\n1\t3\t4\t50\n1\t2\t2\t200\n")
    d = read_movielens_100k(path)
    assert entries(d) == [(1, 2, 5.0, 300), (1, 3, 4.0, 50)]
    assert d.n_duplicates_merged == 2


def test_ratings_with_equal_times_keep_the_later_line(tmp_path):
    path = write(tmp_path, "r.csv", "userId,movieId,rating,timestamp\n1,2,5,100\n1,2,1,100\n")
    d = read_movielens_csv(path)
    assert entries(d) == [(1, 2, 1.0, 100)] and d.n_duplicates_merged == 1


def test_records_without_time_keep_the_later_line(tmp_path):
    artists = read_lastfm_artists(write(tmp_path, "a.dat", "userID\tartistID\tweight\n"
                                                           "1\t2\t5\n1\t3\t1\n1\t2\t9\n"))
    assert entries(artists) == [(1, 3, None, None), (1, 2, None, None)]
    table = read_table(write(tmp_path, "t.csv", "a,x,1\na,x,2\n"))
    assert entries(table) == [("a", "x", 2.0, None)] and table.n_duplicates_merged == 1


def test_tags_with_equal_times_keep_the_earlier_line(tmp_path):
    path = write(tmp_path, "t.dat", "userID\tbookmarkID\ttagID\ttimestamp\n"
                                    "1\t2\t7\t5000\n1\t3\t7\t1000\n1\t2\t8\t5000\n")
    assert entries(read_delicious(path)) == [(1, 2, None, 5), (1, 3, None, 1)]


# ---- bad input: DataError naming file and line --------------------------------------------------

ML100K_ROW = "1\t2\t3\t4\n"
BAD_INPUT = [
    # reader, file text, expected line, what the message says
    (read_movielens_100k, ML100K_ROW + "1\t2\t3\n", 2, "expected 4 tab-separated fields, found 3"),
    (read_movielens_100k, ML100K_ROW + "1\t2\t3\t4\t5\n", 2, "found 5"),
    (read_movielens_100k, ML100K_ROW * 2 + " \n" + ML100K_ROW, 3, "found 1"),
    (read_movielens_100k, ML100K_ROW + "1\tabc\t3\t4\n", 2, "item id 'abc' is not an integer"),
    (read_movielens_100k, "1.5\t2\t3\t4\n", 1, "user id '1.5' is not an integer"),
    (read_movielens_100k, ML100K_ROW + "1\t2\t3\tnow\n", 2,
     "timestamp 'now' is not Unix seconds (an integer) or an ISO 8601"),
    (read_movielens_100k, ML100K_ROW + "1\t2\t\t4\n", 2, "empty rating"),
    (read_movielens_100k, ML100K_ROW + "1\t2\tfive\t4\n", 2, "rating 'five' is not a number"),
    (read_movielens_100k, ML100K_ROW + "1\t2\tnan\t4\n", 2, "rating 'nan' is not a finite number"),
    (read_movielens_100k, ML100K_ROW + "1\t2\tinf\t4\n", 2, "rating 'inf' is not a finite number"),
    (read_movielens_100k, ML100K_ROW + "1\t2\t6\t4\n", 2, "rating '6' is outside the rating scale "
                                                          "[1, 5]"),
    (read_movielens_100k, ML100K_ROW + "1\t2\t0.5\t4\n", 2, "outside the rating scale"),
    (read_movielens_100k, "9" * 20 + "\t2\t3\t4\n", 1, "out of the int64 range"),
    (read_movielens_100k, "", 1, "empty file, no interactions"),
    (read_movielens_100k, "\n\n", 1, "empty file, no interactions"),
    (lambda p: read_movielens_dat(p, (1, 5)), "1::2::3::4\n1::2::3\n", 2, "expected 4 '::'"),
    (read_movielens_csv, "userId,movieId,rating,timestamp\n", 2, "nothing follows the header"),
    (read_movielens_csv, "userId,movieId,rating,timestamp\n1,2,3,4\n1,2,NaN,4\n", 3,
     "rating 'NaN' is not a finite number"),
    (read_movielens_csv, "1,2,3.5,4\n", 1, "expected a header line"),
    (read_lastfm_artists, "userID\tartistID\tweight\n1\t2\t-3\n", 2, "weight '-3' is negative"),
    (read_lastfm_artists, "userID\tartistID\tweight\n1\t2\t0\n", 2, "every weight is 0"),
    (read_delicious, "userID\tbookmarkID\ttagID\ttimestamp\n1\t2\t3\n", 2, "expected 4 tab"),
    (read_table, "", 1, "empty file"),
    (read_table, "user item\n", 1, "has no tab, comma or semicolon (give it with --sep)"),
    (read_table, "a,b,c,d,e\n", 1, "expected 2 to 4 comma-separated columns"),
    (read_table, "user,item,rating\n", 2, "nothing follows the header"),
    (read_table, "user,item,rating\na,b,1\na,c,x\n", 3, "rating 'x' is not a number"),
    (read_table, "a,b,1\na,c,-1\n", 2, "rating '-1' is negative (ratings are >= 0)"),
    (read_table, "a,b,1\n,c,2\n", 2, "empty user id"),
    (read_table, "u,i,r\na,b,1\n", 1, "neither data (rating 'r' is not a number) nor a header "
                                      "of known names: name the columns user, item, rating"),
    (read_table, "user,i,r\na,b,1\n", 1, "a header with names this reader does not know ('i', "
                                         "'r')"),
    (read_table, "user,item,stars,when\n", 1, "names this reader does not know ('when')"),
    (read_table, "user,title,rating\n1,2,3\n", 1, "does not know ('title')"),
    # a fifth column's name (before: "expected 2 to 4 comma-separated columns, found 5")
    (read_table, "user,item,rating,timestamp,extra\n1,2,3,4,5\n", 1,
     "a header with names this reader does not know ('extra')"),
    (read_table, "user,rating\n1,2\n", 1, "the header names no item column"),
    (read_table, "userId,user_id,movieId\n", 1, "names the user column twice: userId, user_id"),
    (lambda p: read_table(p, rating_scale=(1, 5)), "a,b,1\na,c,9\n", 2, "outside the rating"),
    # csv's errors: before, a traceback where line 1 had them, and csv's own words elsewhere
    (read_table, "user,item\r1,2\r1,3\r", 1, "a carriage return (\\r) without a line feed"),
    (read_table, "user,item\n1,2\r1,3\r", 2, "lines that end in \\r alone (classic Mac OS)"),
    (read_table, "x" * 200_000 + ",1\n", 1, "field larger than field limit"),
    # a timestamp in milliseconds: before, read as seconds (a date in the year 56,000, every
    # time between interactions 1,000 times as long), pyarrow's way and line by line
    (read_table, "user,item,timestamp\na,b,1709074989\na,c,1709074989123\n", 3,
     "timestamp '1709074989123' is after the year 9999 as Unix seconds: in milliseconds?"),
    (read_table, "a,b,5,2024-03-01\na,c,5,1709074989123\n", 2, "after the year 9999"),
    (lambda p: read_movielens_dat(p, (1, 5)), "1::2::3::253402300799\n1::3::3::253402300800\n",
     2, "timestamp '253402300800' is after the year 9999"),
    (read_delicious, "userID\tbookmarkID\ttagID\ttimestamp\n1\t2\t3\t253402300800000\n", 2,
     "timestamp '253402300800000' is after the year 9999"),
]


@pytest.mark.parametrize("reader, text, line, message", BAD_INPUT)
def test_bad_input_names_file_and_line(tmp_path, reader, text, line, message):
    path = write(tmp_path, "bad.txt", text)
    with pytest.raises(DataError) as caught:
        reader(path)
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert message in str(caught.value)


def test_the_first_bad_line_wins_across_columns_and_checks(tmp_path):
    path = write(tmp_path, "u.data", "1\t2\t3\t4\n1\t2\t9\t4\n1\tx\t3\t4\n1\t2\n")
    with pytest.raises(DataError, match=r"u\.data:2: rating '9'"):
        read_movielens_100k(path)


@pytest.mark.parametrize("reader", [read_movielens_100k, read_lastfm_artists, read_table])
def test_missing_file(tmp_path, reader):
    path = tmp_path / "nowhere.dat"
    with pytest.raises(DataError, match=f"^{path}: no such file"):
        reader(path)


# ---- tables: columns by the header's names, text, quoting, separators, compression --------------

RATED = [(1, 10, 4.0, 100), (2, 10, 3.0, 200), (1, 20, 5.0, 300)]     # user, item, rating, time


@pytest.mark.parametrize("header, order", [
    ("user,item,rating,timestamp", (0, 1, 2, 3)),
    ("item,user,rating,timestamp", (1, 0, 2, 3)),          # before: users and items swapped
    ("user,item,timestamp,rating", (0, 1, 3, 2)),          # before: timestamps as ratings
    ("userId,movieId,rating,timestamp", (0, 1, 2, 3)),
    ("Timestamp,Rating,Movie_ID,User ID", (3, 2, 1, 0)),
    ("user_id,item_id,score,time", (0, 1, 2, 3)),
])
def test_a_header_names_the_columns(tmp_path, header, order):
    text = header + "\n" + "".join(",".join(f"{row[k]:g}" for k in order) + "\n" for row in RATED)
    d = read_table(write(tmp_path, "t.csv", text))
    assert entries(d) == RATED
    names = header.split(",")
    labels = {0: "user id", 1: "item id", 2: "rating", 3: "timestamp"}
    assert d.columns == "columns by the header: " + ", ".join(
        f"{name} = {labels[k]}" for name, k in zip(names, order))


def test_without_a_header_the_columns_go_by_position(tmp_path):
    d = read_table(write(tmp_path, "t.tsv", "".join(f"{u}\t{i}\t{r:g}\n" for u, i, r, _ in RATED)))
    assert entries(d) == [row[:3] + (None,) for row in RATED]
    assert d.columns == "columns by position (no header): user id, item id, rating"
    assert reader.table_layout(write(tmp_path, "h.csv", "user,item\na,b\n")).header


def test_quoted_fields_are_read_as_their_text(tmp_path):
    d = read_table(write(tmp_path, "q.csv", '"1","52",4\n"2","52","3"\n"1","x,y",5\n'))
    assert entries(d) == [(1, "52", 4.0, None), (2, "52", 3.0, None), (1, "x,y", 5.0, None)]
    assert d.user_ids.dtype == np.int64
    ids = read_table(write(tmp_path, "n.csv", '"1","52",4\n"2","53",3\n'))
    assert entries(ids) == [(1, 52, 4.0, None), (2, 53, 3.0, None)]


LATIN = "José,a,1\nJosè,a,2\nJosê,b,3\n"


def test_text_is_decoded_strictly_and_by_the_given_encoding(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(LATIN.encode("latin-1"))
    with pytest.raises(DataError, match=rf"^{path}:1: not utf-8 text \(b'\\xe9': invalid "
                                        r"continuation byte\): give the file's encoding with "
                                        r"--encoding"):
        read_table(path)
    d = read_table(path, encoding="latin-1")
    assert d.user_ids.tolist() == ["Josè", "José", "Josê"]          # before: one id, three times
    assert entries(d) == [("José", "a", 1.0, None), ("Josè", "a", 2.0, None),
                          ("Josê", "b", 3.0, None)]
    utf16 = tmp_path / "utf16.tsv"
    utf16.write_bytes("user\titem\nJosé\ta\nJosè\ta\n".encode("utf-16"))
    assert read_table(utf16, encoding="utf-16").user_ids.tolist() == ["Josè", "José"]
    with pytest.raises(DataError, match="unknown encoding 'latin-9000'"):
        read_table(path, encoding="latin-9000")


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_a_compressed_file_is_read_as_such_whatever_its_name(tmp_path, compress):
    text = "user,item,rating,timestamp\n" + "".join(f"{u},{i},{r:g},{t}\n" for u, i, r, t in RATED)
    for name in ("t.csv.gz", "t.csv"):
        path = tmp_path / name
        path.write_bytes(compress(text.encode()))
        assert entries(read_table(path)) == RATED
    path.write_bytes(compress(b"user,item\n1,2\n1,x\xff\n"))
    with pytest.raises(DataError, match=rf"^{path}:3: not utf-8 text"):
        read_table(path)


def test_an_archive_is_refused_as_one_not_as_text_of_another_encoding(tmp_path):
    # before: "not utf-8 text ...: give the file's encoding with --encoding (e.g. latin-1)"
    path = tmp_path / "ml-latest-small.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ratings.csv", "userId,movieId,rating\n1,2,3\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: a zip archive, not a "
                                        "table: extract the table from it"):
        read_table(path)
    path.write_bytes(b"(\xb5/\xfd" + bytes(range(256)))
    with pytest.raises(DataError, match="compressed with Zstandard, not a table"):
        read_table(path)


def test_separators(tmp_path):
    rows = [row[:3] + (None,) for row in RATED]
    for sep in (";", "|", "::"):
        text = "".join(sep.join(f"{v:g}" for v in row[:3]) + "\n" for row in RATED)
        path = write(tmp_path, "t.txt", text)
        assert entries(read_table(path, sep=sep)) == rows
    assert entries(read_table(write(tmp_path, "s.csv", "1;10;4\n2;10;3\n1;20;5\n"))) == rows
    with pytest.raises(DataError, match=r"t\.txt:1: expected 2 to 4 comma-separated columns"):
        read_table(write(tmp_path, "t.txt", "1;10;4\n"), sep=",")


def test_an_empty_file_says_so(tmp_path):
    for text in ("", "\n\n"):
        with pytest.raises(DataError, match=r"t\.csv:1: empty file, no interactions"):
            read_table(write(tmp_path, "t.csv", text))
    empty = tmp_path / "e.csv.gz"
    empty.write_bytes(gzip.compress(b""))
    with pytest.raises(DataError, match="empty file"):
        read_table(empty)


# --- an Interactions built by hand, checked where a model takes it -------------------------

def by_hand(**changed) -> interactions.Interactions:
    """Four users (ids 100..103) x three items ("a", "b", "c"), six entries, with `changed`."""
    fields = dict(users=np.array([0, 0, 1, 2, 3, 3], np.int32),
                  items=np.array([0, 1, 1, 2, 0, 2], np.int32),
                  ratings=np.array([5, 3, 4, 1, 2, 5], np.float32), timestamps=None,
                  user_ids=np.arange(100, 104), item_ids=np.array(["a", "b", "c"]))
    return interactions.Interactions(**{**fields, **changed})


BY_HAND = {   # name: (the changed fields, what the DataError says); before: see each
    # before: "1 duplicate (user, item) pairs reached to_csr; readers must merge duplicates
    # first"; an explicit evaluate scored the pair twice
    "a pair twice": (dict(users=np.array([0, 0, 1, 2, 3, 0], np.int32),
                          items=np.array([0, 1, 1, 2, 0, 1], np.int32)),
                     "X: entries 1 and 5 are both user 100, item b (1 pair repeated): give "
                     "each pair once (a sparse matrix would add them up)"),
    # before: ValueError "axis 0 index 4 exceeds matrix dimension 4"
    "a user beyond the ids": (dict(users=np.array([0, 0, 1, 2, 4, 3], np.int32)),
                              "X: entry 4's user index 4 is outside user_ids (4 ids, 0 to "
                              "3; 1 entry so)"),
    # before: ValueError "negative axis 1 index: -1"
    "a negative item": (dict(items=np.array([0, 1, -1, 2, 0, 2], np.int32)),
                        "X: entry 2's item index -1 is outside item_ids (3 ids"),
    # before: ValueError "axis 0 index 3 exceeds matrix dimension 3"
    "too few user ids": (dict(user_ids=np.arange(100, 103)),
                         "X: entry 4's user index 3 is outside user_ids (3 ids"),
    # before: the error named indices as if they were ids: "e.g. nan at (2, 2)"
    "a NaN rating": (dict(ratings=np.array([5, 3, 4, 1, np.nan, 5], np.float32)),
                     "X: 1 NaN or infinite values, e.g. nan at user 103, item a"),
    # before: ValueError "all index and data arrays must have the same length"; then "5 ratings
    # for 6 users", as if the users array named 6 users
    "fewer items than users": (dict(items=np.array([0, 1, 1, 2, 0], np.int32)),
                               "X: users has 6 entries, items 5: the arrays hold one value an "
                               "entry, all of one length"),
    "fewer ratings": (dict(ratings=np.ones(5, np.float32)),
                      "X: users has 6 entries, ratings 5: the arrays hold one value an "
                      "entry, all of one length"),
    # before: accepted, the times read by no entry
    "fewer times": (dict(timestamps=np.zeros(2, np.int64)),
                    "X: users has 6 entries, timestamps 2: the arrays hold one value "
                    "an entry, all of one length"),
    # before: accepted, a user 1.5 taken for user 1
    "indices of floats": (dict(users=np.array([0, 0, 1.5, 2, 3, 3])),
                          "X: users must be integer indices into user_ids; got float64"),
    # before: ValueError "coordinates and data arrays must be 1-D"
    "indices of two dimensions": (dict(users=np.array([[0, 0, 1], [2, 3, 3]], np.int32)),
                                  "X: users must be a 1-d numpy array; got shape (2, 3)"),
    "indices in a list": (dict(users=[0, 0, 1, 2, 3, 3]),
                          "X: users must be a 1-d numpy array; got list"),
    # before: accepted; the model saved, and its file refused on load: "2 duplicate user ids"
    "an id twice": (dict(user_ids=np.array([100, 101, 100, 101])),
                    "X: user id 100 is in user_ids 2 times: each id names one user"),
    # before: ValueError from scipy, a set taken for one id
    "ids in a set": (dict(item_ids={"a", "b", "c"}),
                     "X: item_ids must be an ordered sequence (a list, tuple or numpy "
                     "array); got a set"),
}


@pytest.mark.parametrize("changed, says", BY_HAND.values(), ids=BY_HAND.keys())
def test_an_interactions_built_by_hand_is_checked_where_a_model_takes_it(changed, says):
    from ncae_cuda import NCAE, make_model
    bad = by_hand(**changed)
    with pytest.raises(DataError, match=re.escape(says)):
        NCAE(hidden=(4,), device="cpu").fit(bad, epochs=1, verbose=False)
    if "user_ids" in changed or "item_ids" in changed:
        return                                     # no longer the fit data's ids
    fitted = make_model({"model": "pop"}, device="cpu").fit(by_hand())
    explicit = NCAE(hidden=(4,), device="cpu").fit(by_hand(), epochs=1, verbose=False)
    for held_out in (lambda: fitted.evaluate(bad), lambda: explicit.evaluate(bad),
                     lambda: fitted.fit(by_hand(), validation=bad)):
        with pytest.raises(DataError, match=re.escape(says.replace("X:", "", 1))):
            held_out()


def test_an_interactions_with_users_of_no_entry_is_taken():
    """More ids than entries name (a part of a split shares the whole data's id maps)."""
    from ncae_cuda import make_model
    model = make_model({"model": "pop"}, device="cpu").fit(by_hand(user_ids=np.arange(100, 109)))
    assert model.user_ids.tolist() == list(range(100, 109))



def test_a_files_sha256_is_of_all_its_blocks(tmp_path, monkeypatch):
    """file_sha256 reads a block at a time: a file of three blocks and a part is hashed whole,
    as hashlib hashes its bytes at once."""
    monkeypatch.setattr(digest, "READ_BYTES", 1000)
    data = np.random.default_rng(0).bytes(3500)
    path = tmp_path / "blocks.bin"
    path.write_bytes(data)
    assert digest.file_sha256(path) == hashlib.sha256(data).hexdigest()
