"""Cold entries: held-out entries whose user or item has no entry in the part a model learns
from (their predictions come from untrained parameters). Each split counts them in its notes; a
time split holds them apart (Split.cold_valid, cold_test), to be scored on their own.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .interactions import DataError, Interactions

# What a cold entry of each held-out part lacks, in words true of every split that holds them
# apart: a time split's (where it is before the part's cut) and a split of files (no cut)
NO_ENTRY = {"validation": "no training entry", "test": "no training or validation entry"}


def set_cold_apart(split):
    """`split` (one that holds cold entries apart) with each held-out part's cold entries in
    its cold part, and only those: validation's against train, test's against train and
    validation (Split.cold_valid, cold_test)."""
    valid = split.valid.concat(split.cold_valid)
    test = split.test.concat(split.cold_test)
    cold_valid = cold_entries(valid, split.train)                        # (valid nnz,) bool
    cold_test = cold_entries(test, split.train.concat(valid))            # (test nnz,) bool
    return replace(split, valid=valid.subset(~cold_valid), cold_valid=valid.subset(cold_valid),
                   test=test.subset(~cold_test), cold_test=test.subset(cold_test))


def with_an_entry(known: Interactions) -> tuple[np.ndarray, np.ndarray]:
    """((n_users,) bool, (n_items,) bool): the users and items with an entry in `known`."""
    users, items = np.zeros(known.n_users, bool), np.zeros(known.n_items, bool)
    users[known.users] = True
    items[known.items] = True
    return users, items


def cold_entries(part: Interactions, known: Interactions) -> np.ndarray:
    """(part nnz,) bool: the entries of `part` whose user or item has no entry in `known`."""
    users, items = with_an_entry(known)
    return ~users[part.users] | ~items[part.items]


def with_cold_notes(split):
    return replace(split, notes=[*split.notes, *cold_notes(split)])


def cold_notes(split) -> list[str]:
    """A note per held-out part and side with entries whose user / item has no training entry,
    a test note also counting those with no validation entry either where there is a
    validation part; where the split holds them apart, a note per cold part with its entries,
    users and items.

    Their predictions come from untrained parameters, which explains e.g. a high test RMSE.
    """
    if split.cold_valid is not None:
        return cold_apart_notes(split)
    notes = []
    # (n_users,), (n_items,) each: has a training entry; has a training or validation entry
    trained = with_an_entry(split.train)
    before_test = with_an_entry(split.train.concat(split.valid))
    for side, what in enumerate(("users", "items")):
        for part_name, part in (("validation", split.valid), ("test", split.test)):
            ids = getattr(part, what)
            cold = int(np.count_nonzero(~trained[side][ids]))
            if not cold:
                continue
            note = f"{cold} {part_name} entries are of {what} with no training entry"
            if part_name == "test" and split.valid.nnz:
                # the refit learns from validation too: its cold test table counts these
                colder = int(np.count_nonzero(~before_test[side][ids]))
                note += f", {colder} with {NO_ENTRY['test']}"
            notes.append(note)
    return notes


def cold_apart_notes(split) -> list[str]:
    """A note per cold part with entries: how many, and of how many users and items new there
    (an entry may be of a new user and a new item at once)."""
    notes = []
    before_test = split.train.concat(split.valid).concat(split.cold_valid)
    for name, cold, warm, known in (("validation", split.cold_valid, split.valid, split.train),
                                    ("test", split.cold_test, split.test, before_test)):
        if cold.nnz:
            users, items = with_an_entry(known)
            new_users = np.unique(cold.users[~users[cold.users]])
            new_items = np.unique(cold.items[~items[cold.items]])
            notes.append(f"{cold.nnz} {name} entries are cold, of {len(new_users)} users and "
                         f"{len(new_items)} items with {NO_ENTRY[name]}: scored apart from the "
                         f"other {warm.nnz}")
    return notes


def refuse_all_cold(cold: Interactions | None, part: str, use: str, files: bool = False
                    ) -> None:
    """DataError where a held-out part has no entry but its cold ones (`cold`, scored apart):
    none is left to `use`. Call it where the part's other entries are none.

    `files`: the part was given as a file, whose entries of --train's users and items would
    help. Otherwise the part is a time split's, and there a larger share cannot be counted on
    to help (users that arrive one after another are all new at any cut): the message points
    to leave-one-out, whose held-out entry is of a user with earlier ones."""
    if cold is not None and cold.nnz:
        advice = (f"give {part} entries of --train's users and items" if files else
                  "--split loo holds out each user's own latest interaction instead")
        lacking = f"with {NO_ENTRY[part]}" if files else f"new at the {part} cut"
        raise DataError(f"{cold.name}: all {cold.nnz} {part} entries are of users or items "
                        f"{lacking}, which are scored apart: none is left to {use} ({advice})")
