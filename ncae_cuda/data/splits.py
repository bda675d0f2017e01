"""Train / validation / test splits of one data set, and the paper's training-ratio subsampling.

A `Split` of a data set has three parts on the data's id maps; the random ones partition the
data's entries (each lands in exactly one part, in the data's entry order). A time split
(`by_time`) holds its cold held-out entries apart in two more parts (cold.py). Its notes are
the facts the CLI prints with the results: how the split was made and the held-out entries with
no training entry, recomputed whenever entries move. Everything is seeded with a numpy
Generator and vectorized (ML-20M: 20M entries, 138k users): no loop over users in Python.

Counts that come from a ratio are rounded half up (2.5 -> 3), not Python's half-to-even.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import numpy as np

from ..errors import SettingError
from .cold import cold_notes, set_cold_apart, with_cold_notes
from .interactions import NO_TIME, DataError, Interactions
from .row_draws import latest_in_row, pick_one_per_row, random_order_within_rows

# Part labels: one int8 per entry says where it goes.
TRAIN, VALID, TEST = 0, 1, 2
KINDS = ("random", "loo", "time")   # the splits made here; data sets' own split files beside
VALID_ITEMS = ("random", "latest")   # leave-one-out's validation item: random or latest other


@dataclass(frozen=True)
class Split:
    """The parts of one data set, each on the data's id maps.

    Attributes
    ----------
    train, valid, test : Interactions
        The training, validation and test parts; valid and test may be empty (nnz 0).
    notes : list of str
        Facts the command line prints with the results: how the split was made, and the
        held-out entries with no training entry.
    cold_valid, cold_test : Interactions or None
        Cold held-out entries, apart from valid and test (by_time); None where the split keeps
        them in valid and test (the notes count them). Cold validation entries are those whose
        user or item has no training entry; cold test entries those whose user or item has none
        before the test cut (training or validation), as the protocol scores test: by the refit
        on training + validation.
    """

    train: Interactions
    valid: Interactions
    test: Interactions
    notes: list[str] = field(default_factory=list)
    cold_valid: Interactions | None = None
    cold_test: Interactions | None = None

    def fold_validation(self) -> Split:
        """Train + validation (cold entries too) as the training set, no validation: the
        protocol's final refit."""
        valid = self.valid if self.cold_valid is None else self.valid.concat(self.cold_valid)
        return _move_entries(self, self.train.concat(valid), _empty(self.valid),
                             f"validation entries ({valid.nnz}) folded into train")

    def trained_on(self, train: Interactions, note: str) -> Split:
        """The split with `train` (a subsample of its training part) for its training part:
        `note` added, and the held-out entries whose user or item has no entry left in it set
        apart as cold anew (a time split) and counted anew in the notes."""
        valid = self.valid if self.cold_valid is None else self.valid.concat(self.cold_valid)
        return _move_entries(self, train, valid, note)


def random_split(data: Interactions, test_ratio: float = 0.1, valid_ratio: float = 0.0,
                 seed: int = 0) -> Split:
    """Random hold-out of entries.

    Parameters
    ----------
    data : Interactions
        The whole data set.
    test_ratio, valid_ratio : float
        Shares of all entries held out for test and for validation (0.1/0.1 -> 80/10/10),
        rounded half up.
    seed : int
        The seed of the draw.

    Returns
    -------
    Split

    Raises
    ------
    SettingError
        A ratio outside [0, 1), or ratios that leave nothing to train on.

    Examples
    --------
    >>> from ncae_cuda.data import datasets, splits
    >>> split = splits.random_split(datasets.load("synthetic-tiny"), 0.1, 0.1)
    >>> split.train.nnz, split.valid.nnz, split.test.nnz
    (480, 60, 60)
    """
    _check_ratios(test_ratio, valid_ratio)
    rng = np.random.default_rng(seed)
    n_test, n_valid = held_out_counts(data.nnz, test_ratio, valid_ratio)
    label = _random_labels(data.nnz, [(TEST, n_test), (VALID, n_valid)], rng)
    split = _partition(data, label, [
        f"random hold-out (seed {seed}): {data.nnz - n_test - n_valid} train, "
        f"{n_valid} validation, {n_test} test entries"])
    return with_cold_notes(split)


def file_split(data: Interactions, base: Interactions, test: Interactions) -> Split:
    """A data set's own split files (ML-100K u1..u5, ua, ub) on the id maps of the full data.

    Parameters
    ----------
    data : Interactions
        The whole data set.
    base, test : Interactions
        The split's files, from the same reader as `data` but on their own id maps; their
        entries are re-indexed onto `data.user_ids` / `data.item_ids`.

    Returns
    -------
    Split
        With no validation part: see `carve_validation`. Test entries of users or items the
        base file lacks are held apart in cold_test, as by_time's and given_split's.
    """
    train, held = (_reindex(part, data) for part in (base, test))
    split = Split(train, _empty(train), held,
                  [f"split files: {base.name} ({base.nnz} train), {test.name} ({test.nnz} test)"],
                  _empty(train), _empty(train))
    return with_cold_notes(set_cold_apart(split))


def given_split(train: Interactions, test: Interactions, valid: Interactions | None = None
                ) -> tuple[Interactions, Split]:
    """A split the user gives as files, on one id map.

    Parameters
    ----------
    train, test : Interactions
        The parts, each read with its own id maps (reader.read_table).
    valid : Interactions, optional
        The validation part (default: none; `carve_validation` makes one).

    Returns
    -------
    data : Interactions
        All their entries on one id map, the union of the parts' ids (as text where one
        part's are text and another's integers: integer ids print as their files wrote them).
    split : Split
        The parts on that map. The rating scale is the training part's: held-out ratings
        never widen it (read the held-out files on it, as the command line does, to refuse a
        rating outside it). Held-out entries of users or items new there are held apart in
        cold_valid and cold_test, as by_time's.

    Raises
    ------
    DataError
        A validation or test (user, item) pair that the training part (or, for test, the
        validation part, which the refit trains on) holds too, naming the file: a pair held
        out is one the model has not seen, and scoring it would fail after the training.
    """
    parts = {"train": train, "valid": valid, "test": test}
    parts = {name: part for name, part in parts.items() if part is not None}
    ids = {}
    for side in ("user_ids", "item_ids"):
        arrays = [getattr(part, side) for part in parts.values()]
        if len({a.dtype.kind for a in arrays}) > 1:
            arrays = [a.astype(str) for a in arrays]
            parts = {name: replace(part, **{side: a})
                     for (name, part), a in zip(parts.items(), arrays)}
        ids[side] = np.unique(np.concatenate(arrays))
    shell = replace(_empty(train), n_duplicates_merged=0, **ids)
    on_one_map = {name: _reindex(part, shell) for name, part in parts.items()}
    data = replace(functools.reduce(Interactions.concat, on_one_map.values()),
                   n_duplicates_merged=sum(part.n_duplicates_merged for part in parts.values()))
    notes = ["given split: " + ", ".join(f"{part.name} ({part.nnz} {name}{_merged(part)})"
                                         for name, part in parts.items())]
    for name, earlier in (("valid", "train"), ("test", "train"), ("test", "valid")):
        if name not in parts or earlier not in parts:
            continue
        also = np.isin(_pair_keys(on_one_map[name]), _pair_keys(on_one_map[earlier]))
        if also.any():
            raise DataError(f"{parts[name].name}: {int(also.sum())} of its (user, item) pairs "
                            f"are in {parts[earlier].name} too: a held-out pair must be one the "
                            "model is not trained on; remove them from one file")
    train = on_one_map["train"]
    split = Split(train, on_one_map.get("valid", _empty(train)), on_one_map["test"], notes,
                  _empty(train), _empty(train))
    return data, with_cold_notes(set_cold_apart(split))


def _merged(part: Interactions) -> str:
    """How many of a file's duplicate records were merged, for its note; nothing if none."""
    merged = part.n_duplicates_merged
    return f", {merged} duplicate records merged" if merged else ""


def _pair_keys(part: Interactions) -> np.ndarray:
    return part.users.astype(np.int64) * part.n_items + part.items


def carve_validation(split: Split, valid_ratio: float, seed: int = 0) -> Split:
    """Move a random share of split.train into an (empty) validation part.

    Parameters
    ----------
    split : Split
        A split without validation (file_split's, given_split's).
    valid_ratio : float
        The share of the training entries to move.
    seed : int
        The seed of the draw.

    Returns
    -------
    Split
    """
    # cold ones too: a given validation part all cold was dropped for the carved one, unsaid
    given = split.valid.nnz + (0 if split.cold_valid is None else split.cold_valid.nnz)
    if given:
        raise DataError(f"the split already has {given} validation entries (cold ones "
                        "included)")
    _check_ratio("valid_ratio", valid_ratio)
    if valid_ratio == 0.0:
        raise SettingError("valid_ratio", "must be > 0 to carve a validation part")
    train = split.train
    n_valid = int(_round_half_up(valid_ratio * train.nnz))
    label = _random_labels(train.nnz, [(VALID, n_valid)], np.random.default_rng(seed))
    return _move_entries(split, train.subset(label == TRAIN), train.subset(label == VALID),
                         f"validation: {n_valid} random training entries ({valid_ratio:g} of "
                         f"{train.nnz}, seed {seed}) carved from train")


def leave_one_out(data: Interactions, seed: int = 0, valid_item: str = "random") -> Split:
    """Per user: the latest interaction is the test item, one other the validation item.

    Ties between equal timestamps are broken at random; without timestamps the test and
    validation items are random interactions, and so they are for a user whose interactions
    are all undated (data.NO_TIME, earlier than any time). Users with 2 interactions get a test
    item only; users with 1 stay in train and are not evaluated.

    Parameters
    ----------
    data : Interactions
        The whole data set.
    seed : int
        The seed of the ties and of the random validation item. The test items depend on the
        seed alone, not on valid_item: the two validations choose for the same test.
    valid_item : {'random', 'latest'}
        The validation item: a random other interaction, or the latest of the others (the
        second-latest, so validation asks what test asks: the next item from the ones before
        it).

    Returns
    -------
    Split

    Examples
    --------
    >>> from ncae_cuda.data import datasets, splits
    >>> data = datasets.load("synthetic-tiny")
    >>> splits.leave_one_out(data, valid_item="latest").test.nnz <= data.n_users
    True
    """
    if valid_item not in VALID_ITEMS:
        raise SettingError("valid_item", f"must be one of {', '.join(VALID_ITEMS)}; got "
                                         f"{valid_item!r}")
    rng = np.random.default_rng(seed)
    counts = np.bincount(data.users, minlength=data.n_users)   # (n_users,) int64
    row_count = counts[data.users]                             # (nnz,) the entry's user's
    test_candidate = row_count >= 2
    if data.timestamps is not None:
        test_candidate &= latest_in_row(data, row_count >= 2)
    test = pick_one_per_row(data.users, data.n_users, test_candidate, rng)
    valid_candidate = ~test & (row_count >= 3)
    if valid_item == "latest" and data.timestamps is not None:
        valid_candidate &= latest_in_row(data, valid_candidate)
    valid = pick_one_per_row(data.users, data.n_users, valid_candidate, rng)
    label = np.full(data.nnz, TRAIN, np.int8)
    label[test] = TEST
    label[valid] = VALID

    dated = data.timestamps is not None
    how = "latest interaction by timestamp" if dated else "random interaction"
    valid_how = "the latest" if valid_item == "latest" and dated else "a random"
    notes = [f"leave-one-out (seed {seed}): test item = each user's {how}, "
             f"validation item = {valid_how} other interaction"]
    if data.timestamps is None:
        notes.append("no timestamps: leave-one-out holds out a random interaction per user")
        if valid_item == "latest":
            notes.append("no timestamps: the validation item is a random other interaction, "
                         "not the latest (--valid-item latest orders by time)")
    elif (data.timestamps == NO_TIME).any():
        undated = int(np.count_nonzero(data.timestamps[test] == NO_TIME))   # latest undated
        notes.append(f"{np.count_nonzero(data.timestamps == NO_TIME)} interactions have no "
                     f"time and count as earlier than any dated one; {undated} users have "
                     "none dated, and a random test item")
    for n, fact in ((2, "have a test item but no validation item"),
                    (1, "stay in train and are not evaluated")):
        n_users = int(np.count_nonzero(counts == n))
        if n_users:
            notes.append(f"{n_users} users with {n} interaction{'s' * (n > 1)} {fact}")
    return with_cold_notes(_partition(data, label, notes))


def by_time(data: Interactions, test_ratio: float = 0.1, valid_ratio: float = 0.0) -> Split:
    """A global cut by time: the latest interactions are test, those before them validation.

    Each cut is one time for every user: a model is trained on what came before it and tested
    on what came after, as a deployed one is. Ties: every interaction at a cut time goes to the
    later part, so a part may hold a few entries more than its ratio says, and training never
    holds an interaction as late as a held-out one. Undated interactions (NO_TIME) count as
    earlier than any dated one and stay in train.

    Parameters
    ----------
    data : Interactions
        The whole data set, with timestamps.
    test_ratio, valid_ratio : float
        The shares of all entries held out for test (the latest) and for validation (those
        before them), rounded as random_split's.

    Returns
    -------
    Split
        Whose held-out entries of users or items new at the cut are held apart in cold_valid
        and cold_test, counted in the notes.

    Raises
    ------
    DataError
        The data has no timestamps, a cut would fall on undated interactions, or nothing is
        left to train on.

    Examples
    --------
    >>> from ncae_cuda.data import datasets, splits
    >>> split = splits.by_time(datasets.load("synthetic-tiny"), test_ratio=0.1, valid_ratio=0.1)
    >>> int(split.train.timestamps.max()) < int(split.test.timestamps.min())
    True
    """
    _check_ratios(test_ratio, valid_ratio)
    if data.timestamps is None:
        raise DataError(f"{data.name} has no timestamps: a time split cuts the interactions "
                        "by their time (use a random or leave-one-out split)")
    n_test, n_valid = held_out_counts(data.nnz, test_ratio, valid_ratio)
    times = np.sort(data.timestamps)                                   # (nnz,) ascending
    cuts = []                          # (the cut time, the part from it on), latest first
    for part, n_later in ((TEST, n_test), (VALID, n_test + n_valid)):
        if n_later:
            cut = int(times[data.nnz - n_later])         # the n_later-th latest entry's time
            if cut == NO_TIME:
                dated = int(np.count_nonzero(times != NO_TIME))
                raise DataError(f"{data.name}: only {dated} of {data.nnz} interactions have a "
                                f"time; a time split of {n_later} held-out entries would hold "
                                "out undated ones: lower the ratios")
            cuts.append((part, cut))
    label = np.full(data.nnz, TRAIN, np.int8)
    for part, cut in reversed(cuts):                   # the later cut labels over the earlier
        label[data.timestamps >= cut] = part
    if not (label == TRAIN).any():
        raise DataError(f"{data.name}: every interaction is at or after the earliest cut time "
                        f"({_when(cuts[-1][1])}): nothing is left to train on")
    counts = np.bincount(label, minlength=3)
    notes = [f"time split: {counts[TRAIN]} train, {counts[VALID]} validation, {counts[TEST]} "
             "test entries; interactions at a cut time go to the later part"]
    notes += [f"{name} from {_when(cut)} on" for (part, cut), name in
              zip(cuts, ("test" if n_test else "validation", "validation")) if counts[part]]
    if n_valid and not counts[VALID]:       # its cut fell on the test cut's time
        notes.append(f"validation is empty: the {n_valid} entries valid_ratio asks for are at "
                     f"the test cut's time, {_when(cuts[0][1])}, which goes to test")
    undated = int(np.count_nonzero(data.timestamps == NO_TIME))
    if undated:
        notes.append(f"{undated} interactions have no time and count as earlier than any dated "
                     "one: they are in train")
    split = _partition(data, label, notes)
    split = replace(split, cold_valid=_empty(data), cold_test=_empty(data))
    return with_cold_notes(set_cold_apart(split))


def held_out_counts(nnz: int, test_ratio: float, valid_ratio: float) -> tuple[int, int]:
    """(test, validation) entries of `nnz` the ratios ask for, rounded half up (a time split's
    parts may hold more: the entries tied at a cut go to the later part)."""
    n_test, n_valid = _round_half_up(np.array([test_ratio, valid_ratio]) * nnz)
    return int(n_test), int(n_valid)


def _when(t: int) -> str:
    """A timestamp (seconds) as its number and, where it is one, its UTC date."""
    try:
        return f"{t} ({datetime.fromtimestamp(t, timezone.utc):%Y-%m-%d %H:%M:%S} UTC)"
    except (OverflowError, OSError, ValueError):
        return str(t)


def subsample(train: Interactions, ratio: float, seed: int = 0,
              based: str = "user") -> Interactions:
    """The paper's training ratio D: keep round(ratio * n) random entries of each row (>= 1).

    Parameters
    ----------
    train : Interactions
        The training part.
    ratio : float
        D, in (0, 1]; 1 returns `train` itself.
    seed : int
        The seed of the draw.
    based : {'user', 'item'}
        Rows are users for 'user', items for 'item'.

    Returns
    -------
    Interactions
        The entries kept, on the same id maps.
    """
    if not 0.0 < ratio <= 1.0:
        raise SettingError("ratio", f"must be in (0, 1], got {ratio}")
    if based not in ("user", "item"):
        raise SettingError("based", f"must be 'user' or 'item', not {based!r}")
    if ratio == 1.0:
        return train
    rows, n_rows = ((train.users, train.n_users) if based == "user"
                    else (train.items, train.n_items))
    order, pos, counts = random_order_within_rows(rows, n_rows, np.random.default_rng(seed))
    keep_count = np.maximum(_round_half_up(ratio * counts), 1)   # (n_rows,) int64
    keep = np.empty(train.nnz, bool)
    # Rows are in random order within each row, so the first keep_count are a random sample.
    keep[order] = pos < keep_count[rows[order]]
    return train.subset(keep)


def _check_ratios(test_ratio: float, valid_ratio: float) -> None:
    _check_ratio("test_ratio", test_ratio)
    _check_ratio("valid_ratio", valid_ratio)
    if test_ratio + valid_ratio >= 1.0:
        raise SettingError("test_ratio + valid_ratio", f"must be < 1 to leave training data, "
                                                       f"got {test_ratio} + {valid_ratio}")


def _check_ratio(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:   # also rejects nan
        raise SettingError(name, f"must be in [0, 1), got {value}")


def _round_half_up(x):
    return np.floor(np.asarray(x, np.float64) + 0.5).astype(np.int64)


def _random_labels(nnz: int, parts: list[tuple[int, int]],
                   rng: np.random.Generator) -> np.ndarray:
    """(nnz,) int8 labels: `count` random entries get `part` for each pair, the rest TRAIN."""
    label = np.full(nnz, TRAIN, np.int8)
    perm = rng.permutation(nnz)
    start = 0
    for part, count in parts:
        label[perm[start:start + count]] = part
        start += count
    return label


def _partition(data: Interactions, label: np.ndarray, notes: list[str]) -> Split:
    train, valid, test = (data.subset(label == part) for part in (TRAIN, VALID, TEST))
    return Split(train, valid, test, notes)


def _reindex(part: Interactions, data: Interactions) -> Interactions:
    """`part`'s entries on `data`'s id maps (named after the file they came from)."""
    return replace(
        data,
        name=part.name,
        users=_lookup(part.users, part.user_ids, data.user_ids, "user", part.name, data.name),
        items=_lookup(part.items, part.item_ids, data.item_ids, "item", part.name, data.name),
        ratings=part.ratings,
        timestamps=part.timestamps,
    )


def _lookup(codes: np.ndarray, ids: np.ndarray, target_ids: np.ndarray, what: str,
            source: str, target: str) -> np.ndarray:
    """Indices `codes` into `ids` -> (len(codes),) int32 indices of the same ids in target_ids."""
    sorter = np.argsort(target_ids, kind="stable")
    where = np.searchsorted(target_ids, ids, sorter=sorter)
    table = sorter[np.minimum(where, len(target_ids) - 1)]   # (len(ids),) candidate index
    found = target_ids[table] == ids
    used = np.zeros(len(ids), bool)
    used[codes] = True             # an id in the map that no entry uses is harmless
    missing = ids[used & ~found].tolist()   # Python ints / strs: they print as in the file
    if missing:
        raise DataError(f"{source}: {what} id {missing[0]!r} does not occur in {target} "
                        f"({len(missing)} {what} ids missing); split files must be read "
                        "from the same data set")
    return table[codes].astype(np.int32)


def _empty(part: Interactions) -> Interactions:
    return part.subset(slice(0, 0))


def _move_entries(split: Split, train: Interactions, valid: Interactions, note: str) -> Split:
    """`split` with new train and validation parts: the note added, cold entries set apart
    anew (where the split holds them apart) and cold-entry notes redone."""
    stale = set(cold_notes(split))
    notes = [n for n in split.notes if n not in stale] + [note]
    moved = replace(split, train=train, valid=valid, notes=notes)
    if split.cold_valid is not None:
        moved = set_cold_apart(replace(moved, cold_valid=_empty(valid)))
    return with_cold_notes(moved)
