"""Splits: partitions of the data, seeded, with the leave-one-out and subsampling rules."""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest

from ncae_cuda.data.interactions import NO_TIME, DataError, Interactions
from ncae_cuda.errors import NcaeError
from ncae_cuda.data.cold import with_cold_notes
from ncae_cuda.data.splits import (
    Split,
    by_time,
    carve_validation,
    file_split,
    given_split,
    leave_one_out,
    random_split,
    subsample,
)
from ncae_cuda.runs.protocol import cold_parts


def make(users, items, ratings=None, timestamps=None, user_ids=None, item_ids=None,
         name="data") -> Interactions:
    users, items = np.asarray(users, np.int32), np.asarray(items, np.int32)
    return Interactions(
        users=users, items=items,
        ratings=None if ratings is None else np.asarray(ratings, np.float32),
        timestamps=None if timestamps is None else np.asarray(timestamps, np.int64),
        user_ids=np.arange(users.max() + 1) if user_ids is None else np.asarray(user_ids),
        item_ids=np.arange(items.max() + 1) if item_ids is None else np.asarray(item_ids),
        name=name)


def random_data(seed=0, n_users=60, n_items=40, nnz=900, timestamps=True) -> Interactions:
    """Unique (user, item) pairs with ratings and coarse timestamps (so ties occur)."""
    rng = np.random.default_rng(seed)
    cells = rng.choice(n_users * n_items, nnz, replace=False)
    return make(cells // n_items, cells % n_items,
                ratings=rng.integers(1, 6, nnz),
                timestamps=rng.integers(0, 20, nnz) if timestamps else None,
                user_ids=np.arange(n_users), item_ids=np.arange(n_items))


def rows_of(part: Interactions) -> set[tuple]:
    """The entries of a part as (user, item, rating, timestamp) tuples."""
    ts = part.timestamps if part.timestamps is not None else np.zeros(part.nnz, np.int64)
    ratings = part.ratings if part.ratings is not None else np.zeros(part.nnz, np.float32)
    return set(zip(part.users.tolist(), part.items.tolist(), ratings.tolist(), ts.tolist()))


def assert_partition(split, data):
    parts = [rows_of(p) for p in (split.train, split.valid, split.test)]
    assert sum(len(p) for p in parts) == data.nnz == split.train.nnz + split.valid.nnz \
        + split.test.nnz
    assert set().union(*parts) == rows_of(data)
    for part in (split.train, split.valid, split.test):
        assert (part.n_users, part.n_items) == (data.n_users, data.n_items)


def assert_same_split(a, b):
    for pa, pb in zip((a.train, a.valid, a.test), (b.train, b.valid, b.test)):
        assert_same_entries(pa, pb)


def assert_same_entries(pa, pb):
    np.testing.assert_array_equal(pa.users, pb.users)
    np.testing.assert_array_equal(pa.items, pb.items)


# --- random_split ---------------------------------------------------------------------------

@pytest.mark.parametrize("test_ratio, valid_ratio, sizes", [
    (0.1, 0.1, (800, 100, 100)), (0.1, 0.0, (900, 0, 100)), (0.25, 0.05, (700, 50, 250))])
def test_random_split_sizes_and_partition(test_ratio, valid_ratio, sizes):
    data = random_data(nnz=1000)
    split = random_split(data, test_ratio, valid_ratio, seed=3)
    assert (split.train.nnz, split.valid.nnz, split.test.nnz) == sizes
    assert_partition(split, data)


def test_random_split_is_seeded():
    data = random_data()
    assert_same_split(random_split(data, 0.1, 0.1, seed=5), random_split(data, 0.1, 0.1, seed=5))
    other = random_split(data, 0.1, 0.1, seed=6)
    assert not np.array_equal(random_split(data, 0.1, 0.1, seed=5).test.items, other.test.items)


@pytest.mark.parametrize("test_ratio, valid_ratio", [
    (-0.1, 0.0), (1.0, 0.0), (0.1, 1.0), (float("nan"), 0.1), (0.6, 0.4)])
def test_random_split_rejects_bad_ratios(test_ratio, valid_ratio):
    # the package's error, a command's one line (before: a plain ValueError, its traceback)
    with pytest.raises(NcaeError, match="ratio"):
        random_split(random_data(), test_ratio, valid_ratio)
    with pytest.raises(NcaeError, match="ratio"):
        by_time(random_data(), test_ratio, valid_ratio)


def test_random_split_notes_cold_users():
    # User 1 has a single entry: whenever it is held out, its user has no training entry.
    data = make([0, 0, 0, 1], [0, 1, 2, 0])
    for seed in range(50):
        split = random_split(data, test_ratio=0.25, seed=seed)
        if split.test.users[0] == 1:
            assert "1 test entries are of users with no training entry" in split.notes
            return
    pytest.fail("no seed held out user 1's entry")


# --- by_time --------------------------------------------------------------------------------

def test_by_time_by_hand():
    # 10 entries of users 0..2 and items 0..4 at times 1..9, two at time 8. Test: the 2 latest
    # (round(0.2 * 10)) reach time 8, and both entries at 8 go to test (3 entries); validation:
    # the 4 latest reach time 7. User 2 is first seen at 7, item 4 at 9.
    times = [1, 2, 3, 4, 5, 6, 7, 8, 8, 9]
    users = [0, 1, 0, 1, 0, 1, 2, 0, 2, 1]
    items = [0, 1, 2, 3, 1, 0, 3, 3, 0, 4]
    data = make(users, items, timestamps=times)
    split = by_time(data, test_ratio=0.2, valid_ratio=0.2)
    assert sorted(split.train.timestamps.tolist()) == [1, 2, 3, 4, 5, 6]
    assert (split.valid.nnz, split.cold_valid.timestamps.tolist()) == (0, [7])  # user 2 new
    # (2, 0) at 8: user 2 was first seen in validation, so before the test cut: not cold
    assert sorted(zip(split.test.users.tolist(), split.test.items.tolist())) == [(0, 3), (2, 0)]
    assert (split.cold_test.users.tolist(), split.cold_test.items.tolist()) == ([1], [4])
    assert split.notes == [
        "time split: 6 train, 1 validation, 3 test entries; interactions at a cut time go to "
        "the later part",
        "test from 8 (1970-01-01 00:00:08 UTC) on",
        "validation from 7 (1970-01-01 00:00:07 UTC) on",
        "1 validation entries are cold, of 1 users and 0 items with no training entry: scored "
        "apart from the other 0",
        "1 test entries are cold, of 0 users and 1 items with no training or validation entry: "
        "scored apart from the other 2"]


def test_a_time_splits_cold_test_counts_as_new_what_neither_train_nor_validation_had():
    """cold_parts (a run's record of them) by hand: 11 entries at times 1..9; test from 8 on
    (round(0.3 * 11) = 3 latest, the tie at 8 with them), validation the 7 (round(0.2 * 11)
    = 2 more). User 2 comes at 7, in validation; item 4 at 9, in test. The cold test entries,
    (1, 4) and (2, 4), are of the new item alone: user 2 came before the test cut."""
    times = [1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9]
    users = [0, 1, 0, 1, 0, 1, 2, 0, 2, 1, 2]
    items = [0, 1, 2, 3, 1, 0, 3, 3, 0, 4, 4]
    split = by_time(make(users, items, timestamps=times), test_ratio=0.3, valid_ratio=0.2)
    assert cold_parts(split) == {
        "cold_valid": {"entries": 1, "users": 1, "items": 1, "new_users": 1, "new_items": 0},
        "cold_test": {"entries": 2, "users": 2, "items": 1, "new_users": 0, "new_items": 1}}


@pytest.mark.parametrize("seed, test_ratio, valid_ratio", [
    (0, 0.1, 0.1), (1, 0.2, 0.0), (2, 0.0, 0.15), (3, 0.33, 0.33)])
def test_by_time_random_data_against_loops(seed, test_ratio, valid_ratio):
    data = random_data(seed, n_users=150, n_items=100, nnz=400)  # times 0..19: many ties,
    # and a few entries a user or item: many cold ones
    split = by_time(data, test_ratio, valid_ratio)
    parts = (split.train, split.valid, split.cold_valid, split.test, split.cold_test)
    entries = [rows_of(part) for part in parts]
    assert sum(part.nnz for part in parts) == data.nnz
    assert set().union(*entries) == rows_of(data)
    times = sorted(data.timestamps.tolist(), reverse=True)
    n_test, n_valid = (int(r * data.nnz + 0.5) for r in (test_ratio, valid_ratio))
    test_cut = times[n_test - 1] if n_test else math.inf
    valid_cut = times[n_test + n_valid - 1] if n_test + n_valid else math.inf
    train_users, train_items = {e[0] for e in entries[0]}, {e[1] for e in entries[0]}
    before_users = train_users | {e[0] for part in entries[1:3] for e in part}
    before_items = train_items | {e[1] for part in entries[1:3] for e in part}
    for entry in rows_of(data):
        user, item, _, t = entry
        part = 3 if t >= test_cut else 1 if t >= valid_cut else 0
        if part == 1 and (user not in train_users or item not in train_items):
            part = 2
        if part == 3 and (user not in before_users or item not in before_items):
            part = 4
        assert entry in entries[part]
    assert split.test.nnz + split.cold_test.nnz >= n_test   # ties go to the later part
    # The notes count the users and items new at each cut, cold validation's known before test
    for cold, warm, users, items, name, before in (
            (entries[2], entries[1], train_users, train_items, "validation", "no training entry"),
            (entries[4], entries[3], before_users, before_items, "test",
             "no training or validation entry")):
        new_users, new_items = ({e[0] for e in cold} - users), ({e[1] for e in cold} - items)
        note = (f"{len(cold)} {name} entries are cold, of {len(new_users)} users and "
                f"{len(new_items)} items with {before}: scored apart from the other {len(warm)}")
        assert (note in split.notes) == bool(cold)


def test_by_time_says_why_its_validation_is_empty_where_the_test_cut_takes_it():
    # test: the 2 latest (round(0.2 * 10)) reach time 8; validation: the next one,
    # (round(0.1 * 10)), is at 8 too, so at the test cut: all three entries at 8 are test
    data = make([0, 1, 0, 1, 0, 1, 0, 1, 0, 1], [0, 1, 1, 0, 2, 3, 3, 2, 4, 4],
                timestamps=[1, 2, 3, 4, 5, 6, 7, 8, 8, 8])
    split = by_time(data, test_ratio=0.2, valid_ratio=0.1)
    assert (split.train.nnz, split.valid.nnz, split.cold_valid.nnz) == (7, 0, 0)
    assert split.test.nnz + split.cold_test.nnz == 3
    assert ("validation is empty: the 1 entries valid_ratio asks for are at the test cut's "
            "time, 8 (1970-01-01 00:00:08 UTC), which goes to test") in split.notes


def test_by_time_refuses_data_it_cannot_cut():
    with pytest.raises(DataError, match="has no timestamps"):
        by_time(random_data(timestamps=False))
    undated = make([0, 1, 2, 3], [0, 1, 2, 3], timestamps=[NO_TIME, NO_TIME, NO_TIME, 5])
    with pytest.raises(DataError, match="only 1 of 4 interactions have a time"):
        by_time(undated, test_ratio=0.5)
    with pytest.raises(DataError, match="nothing is left to train on"):
        by_time(make([0, 1, 2], [0, 1, 2], timestamps=[4, 4, 4]), test_ratio=0.2)
    with pytest.raises(ValueError, match="ratio"):
        by_time(random_data(), 0.6, 0.4)


def test_by_time_keeps_undated_in_train():
    data = make([0, 0, 1, 1, 0, 1], [0, 1, 0, 1, 2, 2],
                timestamps=[NO_TIME, 3, NO_TIME, 5, 9, NO_TIME])
    split = by_time(data, test_ratio=0.2)
    assert sorted(split.train.timestamps.tolist()) == [NO_TIME, NO_TIME, NO_TIME, 3, 5]
    assert split.test.timestamps.tolist() == [9]            # item 2 known from an undated entry
    assert ("3 interactions have no time and count as earlier than any dated one: they are in "
            "train") in split.notes


def test_by_time_folds_and_carves_its_cold_entries():
    # Validation holds (user 2, item 3) cold (both new) and (0, 2) warm; test (2, 0) is warm
    # against train + validation.
    data = make([0, 0, 1, 1, 2, 0, 2], [0, 1, 1, 2, 3, 2, 0], timestamps=[1, 2, 3, 4, 5, 6, 7])
    split = by_time(data, test_ratio=0.15, valid_ratio=0.3)
    assert (split.valid.nnz, split.cold_valid.nnz, split.test.nnz, split.cold_test.nnz) == \
        (1, 1, 1, 0)
    folded = split.fold_validation()
    assert rows_of(folded.train) == rows_of(split.train) | rows_of(split.valid) | rows_of(
        split.cold_valid)
    assert (folded.valid.nnz, folded.cold_valid.nnz, folded.test.nnz) == (0, 0, 1)
    assert not any("cold" in note for note in folded.notes)
    # A validation carved at random from a time split's train sets its cold entries apart too.
    carved = carve_validation(by_time(data, test_ratio=0.15), 0.5, seed=0)
    assert carved.valid.nnz + carved.cold_valid.nnz == 3
    assert carved.train.nnz + carved.valid.nnz + carved.cold_valid.nnz + carved.test.nnz \
        + carved.cold_test.nnz == data.nnz
    train_users = set(carved.train.users.tolist())
    train_items = set(carved.train.items.tolist())
    for u, i in zip(carved.cold_valid.users.tolist(), carved.cold_valid.items.tolist()):
        assert u not in train_users or i not in train_items
    for u, i in zip(carved.valid.users.tolist(), carved.valid.items.tolist()):
        assert u in train_users and i in train_items


def test_a_time_split_trained_on_less_sets_apart_what_it_leaves_cold():
    # train (0,0) (0,1) (1,1) (1,2) (2,0) | valid (2,1) | test (0,2) (1,0): nothing cold. Trained
    # on (0,0) (0,1) (1,1) only, user 2 has no training entry (validation's (2,1) is cold) and
    # item 2 none before the test cut ((0,2) is cold); (1,0) stays warm.
    data = make([0, 0, 1, 1, 2, 2, 0, 1], [0, 1, 1, 2, 0, 1, 2, 0],
                timestamps=[1, 2, 3, 4, 5, 6, 7, 8])
    split = by_time(data, test_ratio=0.25, valid_ratio=0.125)
    assert (split.valid.nnz, split.cold_valid.nnz, split.test.nnz, split.cold_test.nnz) == \
        (1, 0, 2, 0)
    def pairs(part):
        return set(zip(part.users.tolist(), part.items.tolist()))

    moved = split.trained_on(split.train.subset(np.isin(split.train.items, [0, 1])
                                                & (split.train.users != 2)), "less")
    assert pairs(moved.train) == {(0, 0), (0, 1), (1, 1)}
    assert (pairs(moved.valid), pairs(moved.cold_valid)) == (set(), {(2, 1)})
    assert (pairs(moved.test), pairs(moved.cold_test)) == ({(1, 0)}, {(0, 2)})
    assert moved.notes == [*split.notes, "less",
                           "1 validation entries are cold, of 1 users and 0 items with no "
                           "training entry: scored apart from the other 0",
                           "1 test entries are cold, of 0 users and 1 items with no training "
                           "or validation entry: scored apart from the other 1"]


def test_a_time_split_trained_on_its_whole_train_keeps_its_cold_validation_entries():
    # the split of test_by_time_folds_and_carves_its_cold_entries: validation (0, 2) warm and
    # (2, 3) cold; a subsample that keeps every training entry moves none of them
    data = make([0, 0, 1, 1, 2, 0, 2], [0, 1, 1, 2, 3, 2, 0], timestamps=[1, 2, 3, 4, 5, 6, 7])
    split = by_time(data, test_ratio=0.15, valid_ratio=0.3)
    moved = split.trained_on(split.train, "all of it")
    for part in ("valid", "cold_valid", "test", "cold_test"):
        assert rows_of(getattr(moved, part)) == rows_of(getattr(split, part)), part
    assert (moved.valid.nnz, moved.cold_valid.nnz) == (1, 1)


# --- file_split -----------------------------------------------------------------------------

def test_file_split_remaps_ids():
    # The full data and two files, each with its own (sorted, dense) id maps.
    data = make([0, 0, 1, 2, 2], [0, 3, 1, 2, 3], ratings=[1, 2, 3, 4, 5],
                user_ids=["a", "b", "c"], item_ids=[100, 200, 300, 400])
    base = make([0, 1, 1], [0, 1, 2], ratings=[1, 4, 5],
                user_ids=["a", "c"], item_ids=[100, 300, 400], name="u1.base")
    test = make([0, 1], [1, 0], ratings=[2, 3], user_ids=["a", "b"], item_ids=[200, 400],
                name="u1.test")
    split = file_split(data, base, test)
    # User "b" and item 200 occur only in the test file: their entry is cold, apart
    assert split.test.nnz == split.cold_test.nnz == 1
    held = split.test.concat(split.cold_test)
    assert_partition(replace(split, test=held), data)
    for part, source in ((split.train, base), (held, test)):
        np.testing.assert_array_equal(data.user_ids[part.users], source.user_ids[source.users])
        np.testing.assert_array_equal(data.item_ids[part.items], source.item_ids[source.items])
        np.testing.assert_array_equal(part.ratings, source.ratings)
        assert part.users.dtype == part.items.dtype == np.int32
    assert split.valid.nnz == 0
    # (no time cut: a cold entry's user or item is in neither earlier part)
    assert ("1 test entries are cold, of 1 users and 1 items with no training or validation "
            "entry: scored apart from the other 1") in split.notes


@pytest.mark.parametrize("test_user, test_item, message", [
    ("b", 99, r"u1\.test: item id 99 does not occur in data"),
    ("zz", 10, r"u1\.test: user id 'zz' does not occur in data")])
def test_file_split_unknown_id(test_user, test_item, message):
    data = make([0, 1], [0, 1], user_ids=["a", "b"], item_ids=[10, 20])
    base = make([0], [0], user_ids=["a"], item_ids=[10], name="u1.base")
    test = make([0], [0], user_ids=[test_user], item_ids=[test_item], name="u1.test")
    with pytest.raises(DataError, match=message):
        file_split(data, base, test)


def test_file_split_ignores_unused_map_entries():
    data = make([0], [0], user_ids=[1], item_ids=[10])
    base = make([0], [0], user_ids=[1, 7], item_ids=[10])   # id 7: in the map, in no entry
    split = file_split(data, base, base.subset(slice(0, 0)))
    np.testing.assert_array_equal(split.train.users, [0])


def test_given_split_maps_ids_across_files():
    # Each file has its own id maps; user 9 and item "b" are in both, user 3 and item "c" only
    # in the test file.
    train = make([0, 1, 1], [0, 0, 1], ratings=[4, 3, 5], user_ids=[7, 9], item_ids=["a", "b"],
                 name="train.csv")
    test = make([0, 1], [0, 1], ratings=[2, 1], user_ids=[3, 9], item_ids=["b", "c"],
                name="test.csv")
    valid = make([0], [0], ratings=[5], user_ids=[7], item_ids=["b"], name="valid.csv")
    data, split = given_split(train, test, valid)
    assert data.user_ids.tolist() == [3, 7, 9] and data.item_ids.tolist() == ["a", "b", "c"]
    assert data.nnz == 6 and data.name == "train.csv"
    # both test entries are cold (user 3, item "c": no training entry): held apart
    assert split.test.nnz == 0 and split.cold_valid.nnz == 0
    for part, source in ((split.train, train), (split.valid, valid), (split.cold_test, test)):
        assert data.user_ids[part.users].tolist() == source.user_ids[source.users].tolist()
        assert data.item_ids[part.items].tolist() == source.item_ids[source.items].tolist()
        np.testing.assert_array_equal(part.ratings, source.ratings)
    assert split.notes[:1] == ["given split: train.csv (3 train), valid.csv (1 valid), "
                               "test.csv (2 test)"]
    assert split.notes[1] == ("2 test entries are cold, of 1 users and 1 items with no training "
                              "or validation entry: scored apart from the other 0")


def test_given_split_notes_which_file_held_duplicates():
    """Before: one total for all files ('3 duplicate (user, item) records merged')."""
    train = replace(make([0, 1], [0, 0], name="train.csv"), n_duplicates_merged=2)
    test = replace(make([0], [1], item_ids=[0, 1], name="test.csv"), n_duplicates_merged=1)
    data, split = given_split(train, test)
    assert data.n_duplicates_merged == 3
    assert split.notes[0] == ("given split: train.csv (2 train, 2 duplicate records merged), "
                              "test.csv (1 test, 1 duplicate records merged)")


@pytest.mark.parametrize("held, also", [("valid", "train"), ("test", "train"),
                                        ("test", "valid")])
def test_given_split_refuses_a_held_out_pair_trained_on(held, also):
    """Before: a note, then the select fit trained whole and the refit failed (explicit:
    'duplicate (user, item) pairs reached to_csr'; implicit: 'a held-out item must be a
    candidate')."""
    parts = {"train": make([0, 1, 1], [0, 0, 1], ratings=[4, 3, 5], name="train.csv"),
             "valid": make([0], [1], ratings=[2], item_ids=[0, 1], name="valid.csv"),
             "test": make([1], [2], ratings=[1], name="test.csv")}
    parts[held] = replace(parts[also].subset(slice(0, 1)), name=f"{held}.csv")  # (0, 0) or (0, 1)
    with pytest.raises(DataError, match=f"^{held}.csv: 1 of its .user, item. pairs are in "
                                        f"{parts[also].name} too"):
        given_split(**parts)


def test_given_split_meets_text_and_integer_ids_as_text():
    train = make([0, 1], [0, 1], ratings=[4, 3], user_ids=[1, 2], item_ids=[5, 6])
    test = make([0, 1], [0, 0], ratings=[2, 1], user_ids=["1", "x"], item_ids=[6])
    data, split = given_split(train, test)
    assert data.user_ids.tolist() == ["1", "2", "x"]
    assert data.user_ids[split.test.users].tolist() == ["1"]
    assert data.user_ids[split.cold_test.users].tolist() == ["x"]        # new: held apart
    assert split.valid.nnz == 0


def test_given_split_keeps_the_training_parts_rating_scale():
    # Before, the scale was the union of the parts': a test rating of 10 beside training
    # ratings of 1-5 made the model's scale 1-10.
    train = replace(make([0, 1], [0, 1], ratings=[1, 5], name="train.csv"), rating_scale=(1, 5))
    test = replace(make([0, 1], [1, 0], ratings=[10, 3], name="test.csv"), rating_scale=(3, 10))
    data, split = given_split(train, test)
    for part in (data, split.train, split.valid, split.test):
        assert part.rating_scale == (1, 5)
    np.testing.assert_array_equal(split.test.ratings, [10, 3])     # held out as they are


def test_cold_notes_follow_moved_entries():
    data = make([0, 0, 0, 1, 1], [0, 1, 2, 0, 3], user_ids=["a", "b"], item_ids=[1, 2, 3, 4])
    base = data.subset(np.array([0, 1, 2, 3]))    # item 4 occurs only in the test file
    test = data.subset(np.array([4]))
    # a split that keeps its cold entries among the others, counted in its notes
    split = with_cold_notes(Split(base, base.subset(slice(0, 0)), test))
    item_note = "1 test entries are of items with no training entry"
    user_note = "1 test entries are of users with no training entry"
    assert item_note in split.notes and user_note not in split.notes
    # Carve until user b's only training entry goes to validation: its test entry turns cold.
    carved = next(c for c in (carve_validation(split, 0.25, seed) for seed in range(50))
                  if c.valid.users.tolist() == [1])
    # ...against training, though not against training + validation, which a refit learns
    # from and the cold test table counts against (before, "1 test entries are of users with
    # no training entry" alone, where the refit's cold test table held none of user b's)
    assert carved.notes[-3:] == [
        "1 validation entries are of users with no training entry",
        "1 test entries are of users with no training entry, 0 with no training or validation "
        "entry",
        "1 test entries are of items with no training entry, 1 with no training or validation "
        "entry"]
    folded = carved.fold_validation()
    assert user_note not in folded.notes and folded.notes.count(item_note) == 1
    assert not any("validation entries are" in note for note in folded.notes)


# --- carve_validation / fold_validation -----------------------------------------------------

def test_carve_validation():
    data = random_data(nnz=1000)
    split = random_split(data, 0.1)
    carved = carve_validation(split, 0.2, seed=1)
    assert (carved.train.nnz, carved.valid.nnz, carved.test.nnz) == (720, 180, 100)
    assert_partition(carved, data)
    assert rows_of(carved.train) | rows_of(carved.valid) == rows_of(split.train)
    assert carved.notes[:len(split.notes)] == split.notes and len(carved.notes) > len(split.notes)
    assert_same_split(carved, carve_validation(split, 0.2, seed=1))
    with pytest.raises(NcaeError, match="already"):
        carve_validation(carved, 0.1)
    with pytest.raises(NcaeError, match="valid_ratio"):
        carve_validation(split, 0.0)


@pytest.mark.parametrize("ratio, n_valid", [(0.25, 3), (0.45, 5)])
def test_carve_validation_rounds_half_up(ratio, n_valid):
    # of 10 training entries: 2.5 -> 3 and 4.5 -> 5, as the held-out counts of a split round
    split = random_split(random_data(nnz=10), test_ratio=0.0)
    carved = carve_validation(split, ratio)
    assert (carved.train.nnz, carved.valid.nnz) == (10 - n_valid, n_valid)


def test_carve_validation_keeps_a_given_part_of_cold_entries():
    # Before, a given validation part whose entries are all cold (user 3 has no training entry)
    # was dropped for the carved one, and nothing said so.
    train = make([0, 1, 1], [0, 0, 1], ratings=[4, 3, 5], user_ids=[7, 9], item_ids=["a", "b"])
    test = make([0], [0], ratings=[2], user_ids=[7], item_ids=["b"])
    valid = make([0], [0], ratings=[5], user_ids=[3], item_ids=["b"])
    split = given_split(train, test, valid)[1]
    assert (split.valid.nnz, split.cold_valid.nnz) == (0, 1)
    with pytest.raises(ValueError, match=r"the split already has 1 validation entries \(cold "
                                         r"ones included\)"):
        carve_validation(split, 0.5)


def test_fold_validation():
    data = random_data()
    split = random_split(data, 0.1, 0.1)
    folded = split.fold_validation()
    assert folded.valid.nnz == 0 and rows_of(folded.test) == rows_of(split.test)
    assert rows_of(folded.train) == rows_of(split.train) | rows_of(split.valid)


# --- leave_one_out --------------------------------------------------------------------------

def hand_data(timestamps=True):
    users = [0, 0, 0, 0, 1, 1, 1, 2, 2, 3]
    items = [0, 1, 2, 3, 0, 1, 2, 4, 5, 0]
    ts = [5, 9, 1, 3, 7, 7, 2, 1, 2, 1]   # user 1: items 0 and 1 tie for latest
    return make(users, items, timestamps=ts if timestamps else None)


def entries(part, user):
    return sorted(part.items[part.users == user].tolist())


def test_leave_one_out_by_hand():
    data = hand_data()
    tied_test, valid_items = set(), set()
    for seed in range(40):
        split = leave_one_out(data, seed)
        assert_partition(split, data)
        assert entries(split.test, 0) == [1]                    # the latest
        assert len(entries(split.valid, 0)) == 1
        valid_items.update(entries(split.valid, 0))
        tied_test.update(entries(split.test, 1))
        assert entries(split.test, 1) in ([0], [1]) and len(entries(split.valid, 1)) == 1
        assert (entries(split.test, 2), entries(split.valid, 2), entries(split.train, 2)) \
            == ([5], [], [4])                                   # 2 interactions: test only
        assert (entries(split.test, 3), entries(split.valid, 3), entries(split.train, 3)) \
            == ([], [], [0])                                    # 1 interaction: train only
    assert tied_test == {0, 1}            # the seed breaks the tie, both ways
    assert valid_items == {0, 2, 3}       # any other interaction can be the validation item
    notes = leave_one_out(data).notes
    assert "1 users with 2 interactions have a test item but no validation item" in notes
    assert "1 users with 1 interaction stay in train and are not evaluated" in notes
    assert not any("no timestamps" in note for note in notes)


def test_leave_one_out_random_data_picks_latest():
    data = random_data(seed=4, nnz=1500)
    split = leave_one_out(data, seed=2)
    assert_partition(split, data)
    counts = np.bincount(data.users, minlength=data.n_users)
    np.testing.assert_array_equal(np.bincount(split.test.users, minlength=data.n_users),
                                  counts >= 2)
    np.testing.assert_array_equal(np.bincount(split.valid.users, minlength=data.n_users),
                                  counts >= 3)
    for u, t in zip(split.test.users, split.test.timestamps):
        assert t == data.timestamps[data.users == u].max()
    assert_same_split(split, leave_one_out(data, seed=2))


def test_leave_one_out_latest_validation_by_hand():
    data = hand_data()
    tied = set()
    for seed in range(40):
        split = leave_one_out(data, seed, valid_item="latest")
        assert_partition(split, data)
        assert (entries(split.test, 0), entries(split.valid, 0)) == ([1], [0])   # times 9, 5
        pair = entries(split.test, 1) + entries(split.valid, 1)                  # a tie at 7
        assert sorted(pair) == [0, 1] and entries(split.train, 1) == [2]
        tied.add(tuple(pair))
        assert (entries(split.test, 2), entries(split.valid, 2)) == ([5], [])
        assert_same_entries(split.test, leave_one_out(data, seed).test)   # test: the seed's alone
    assert tied == {(0, 1), (1, 0)}
    assert "validation item = the latest other interaction" in leave_one_out(
        data, valid_item="latest").notes[0]


def test_leave_one_out_latest_validation_random_data():
    data = random_data(seed=6, nnz=1500)
    split = leave_one_out(data, seed=3, valid_item="latest")
    assert_partition(split, data)
    for u, t in zip(split.valid.users, split.valid.timestamps):
        assert t == split.train.timestamps[split.train.users == u].max(initial=t)
        assert t <= split.test.timestamps[split.test.users == u][0]
    assert_same_entries(split.test, leave_one_out(data, seed=3).test)
    assert not np.array_equal(split.valid.items, leave_one_out(data, seed=3).valid.items)


def test_leave_one_out_latest_validation_without_timestamps_is_random():
    data = hand_data(timestamps=False)
    assert_same_split(leave_one_out(data, 4, valid_item="latest"), leave_one_out(data, 4))
    with pytest.raises(NcaeError, match="valid_item must be one of random, latest"):
        leave_one_out(data, valid_item="second")


def test_leave_one_out_without_timestamps():
    data = hand_data(timestamps=False)
    split = leave_one_out(data)
    assert_partition(split, data)
    assert "no timestamps: leave-one-out holds out a random interaction per user" in split.notes
    test_items = {tuple(entries(leave_one_out(data, seed).test, 0)) for seed in range(40)}
    assert test_items == {(0,), (1,), (2,), (3,)}
    for seed in range(40):      # the count rules hold without timestamps to narrow the choice
        split = leave_one_out(data, seed)
        assert (len(entries(split.test, 2)), entries(split.valid, 2)) == (1, [])
        assert (entries(split.test, 3), entries(split.valid, 3), entries(split.train, 3)) \
            == ([], [], [0])                                    # 1 interaction: train only


def test_leave_one_out_is_vectorized():
    # 2M entries over 100k users: a Python loop per user would take far longer than this.
    data = random_data(n_users=100_000, n_items=1000, nnz=2_000_000)
    start = time.perf_counter()
    leave_one_out(data)
    assert time.perf_counter() - start < 5.0


# --- subsample ------------------------------------------------------------------------------

@pytest.mark.parametrize("based", ["user", "item"])
@pytest.mark.parametrize("ratio", [0.1, 0.25, 0.5, 0.8])
def test_subsample_keeps_rounded_share_per_row(based, ratio):
    train = random_data(nnz=1200)
    kept = subsample(train, ratio, seed=1, based=based)
    rows, kept_rows, n = ((train.users, kept.users, train.n_users) if based == "user"
                          else (train.items, kept.items, train.n_items))
    counts = np.bincount(rows, minlength=n)
    expected = np.where(counts > 0, np.maximum(np.floor(ratio * counts + 0.5), 1), 0)
    np.testing.assert_array_equal(np.bincount(kept_rows, minlength=n), expected)
    assert rows_of(kept) <= rows_of(train)
    np.testing.assert_array_equal(kept.items, subsample(train, ratio, seed=1, based=based).items)


def test_subsample_draws_each_rows_entries_alike():
    # one row of 10 entries, 3 kept: over 2000 seeds each entry is kept 600 times, give or take
    # 4 standard deviations (20.5 each), whatever its place in the entry order
    row = make(np.zeros(10), np.arange(10))
    kept = np.zeros(10)
    for seed in range(2000):
        kept[subsample(row, 0.3, seed=seed).items] += 1
    assert np.abs(kept - 600).max() < 4 * math.sqrt(2000 * 0.3 * 0.7)


def test_subsample_edges():
    train = random_data()
    assert subsample(train, 1.0) is train
    small = make([0, 1, 1, 1], [0, 0, 1, 2])
    assert np.bincount(subsample(small, 0.01).users).tolist() == [1, 1]   # at least 1 per row
    assert np.bincount(subsample(small, 0.5).users).tolist() == [1, 2]    # 1.5 rounds up to 2
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(NcaeError, match="ratio"):
            subsample(train, bad)
    with pytest.raises(NcaeError, match="based"):
        subsample(train, 0.5, based="row")
