"""Top-M recommendations from a saved model, batched, on the CPU or the GPU.

    python -m ncae_cuda.recommend runs/ncae/model.npz --users 196,186 -n 10
    python -m ncae_cuda.recommend runs/ncae/model.npz --all -n 100 --out top100.csv
    python -m ncae_cuda.recommend runs/ncae/model.npz --users-file ids.txt --keep-seen

Writes CSV lines `user,rank,item,score` (rank 1 is the best; scores as the model's recommend
gives them: predicted ratings, logits for NCAE's implicit feedback, a baseline's own scores)
to stdout or --out, a file written whole or not at all (an earlier file there stays as it was
until the new one is complete). A user with fewer candidate items than -n gets fewer lines.
An id is the model's as written where the model has it so (a data file may hold " a"), else
stripped of the spaces around it ("1, 2" asks for 1 and 2). Ids the model does not know stop
it with a message naming them, before anything is written, as does an empty one in --users
("1,": a stray comma, or an id that went missing).
The model is a model.npz of any model (NCAE, a blend, a baseline: ncae_cuda.load_model reads
it) or the run folder that holds one.
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

import numpy as np

from ..cli import Parser, check_file_to_write
from ..data.atomic_file import atomic_write
from ..data.interactions import CONTROL, DataError, IdLookup
from ..errors import NcaeError
from ..model import ann
from ..model.base import Model
from ..ops import cpu
from ..runs.factory import load_model
from . import flags

USERS_PER_CALL = 4096     # users per recommend() call: bounds the results held before writing


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m ncae_cuda.recommend", description=__doc__.split("\n\n")[0])
    flags.add_model_file(p)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--users", help="comma-separated user ids")
    who.add_argument("--users-file", type=Path, help="a file with one user id per line")
    who.add_argument("--all", action="store_true", help="every user the model knows")
    p.add_argument("-n", type=int, default=10,
                   help="recommendations per user, M (default: %(default)s)")
    p.add_argument("--items-file", type=Path,
                   help="recommend only among these item ids (one per line)")
    p.add_argument("--keep-seen", action="store_true",
                   help="also offer items the user interacted with in the training data")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                   help="auto: the GPU when there is one (default: %(default)s)")
    flags.add_index(p)
    p.add_argument("--out", type=Path, help="CSV file to write (default: stdout)")
    return p


def some_ids(ids: list[str], given: str, kind: str) -> np.ndarray:
    """`ids` (of users or items: `kind`), refused where there is none: `given` names the flag
    they came from (before, an empty list wrote the CSV's header alone, exit 0)."""
    if not ids:
        raise DataError(f"{given}: no {kind} ids in it")
    return np.array(ids)


def read_ids(path: Path, flag: str, kind: str) -> np.ndarray:
    """One id per line of `path`, the file `flag` names (UTF-8, a byte-order mark skipped), as
    written; blank lines skipped, a file of none refused (some_ids)."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as e:
        raise DataError(f"{path}: {e.strerror}", errno=e.errno) from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None
    return some_ids([line for line in lines if line.strip()], f"{flag} {path}", kind)


def listed_ids(text: str, flag: str, kind: str) -> np.ndarray:
    """The comma-separated ids of `text`, the value of `flag`, each as written; an empty one
    (or of spaces alone) among others refused (before, "1," and "1,,2" dropped it unseen: no
    model has an empty id, so it is a stray comma or an id that went missing), none at all
    some_ids'."""
    ids = text.split(",")
    empty = [k for k, part in enumerate(ids, 1) if not part.strip()]
    if empty and len(empty) < len(ids):
        raise DataError(f"{flag} {text!r}: id {empty[0]} of {len(ids)} is empty: give the "
                        f"{kind} ids separated by single commas, none empty")
    return some_ids([part for part in ids if part.strip()], flag, kind)


def known(lookup: IdLookup, written: np.ndarray) -> np.ndarray:
    """The indices (lookup's) of ids as a user wrote them: each as written where the model has
    it so, else stripped of the spaces around it (before, every id was stripped: a data file's
    " a" was asked for as "a", another user, and "b " could not be asked for at all). Ids
    holding a control character (a tab) are not ids as written: stripped."""
    stripped = np.char.strip(written)
    padded = (stripped != written) & np.array([not CONTROL.search(w) for w in written], bool)
    padded[padded] = lookup.find(written[padded])[1]                    # ... and the model's
    return lookup(np.where(padded, written, stripped))


def wanted_users(args, model: Model) -> np.ndarray:
    """The users the flags ask for, as the model has them."""
    if args.all:
        return model.user_ids
    written = (read_ids(args.users_file, "--users-file", "user") if args.users_file else
               listed_ids(args.users, "--users", "user"))
    return model.user_ids[known(model.data.user_lookup, written)]


def write_recommendations(out, model: Model, users: np.ndarray, n: int, filter_seen: bool,
                          items, index: str = "exact") -> int:
    """CSV rows for every user (ids as the model has them), USERS_PER_CALL at a time; returns
    the number of rows."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["user", "rank", "item", "score"])
    rows = 0
    for start in range(0, len(users), USERS_PER_CALL):
        chunk = users[start:start + USERS_PER_CALL]
        ids, scores = model.recommend(chunk, n=n, filter_seen=filter_seen, items=items,
                                      index=index)
        for user, user_items, user_scores in zip(chunk, ids, scores):
            real = np.isfinite(user_scores)
            for rank, (item, score) in enumerate(zip(user_items[real], user_scores[real]), 1):
                writer.writerow([user, rank, item, f"{score:.6g}"])
                rows += 1
    return rows


def written(path: Path | None, write) -> int:
    """write(text stream) -> rows, to stdout, or to `path` atomically."""
    if path is None:
        return write(sys.stdout)
    rows = []

    def fill(f) -> None:
        text = io.TextIOWrapper(f, encoding="utf-8", newline="")
        rows.append(write(text))
        text.detach()                    # flushed; f stays open for atomic_write to sync
    atomic_write(path, fill)
    return rows[0]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("-n must be >= 1")
    if args.items_file is not None and args.index == "approximate":
        # the index would be built for nothing (recommend ranks candidates exactly)
        parser.error("--items-file: its candidates are ranked exactly, not searched through "
                     "an index: leave out --index approximate")
    check_file_to_write(parser, "--out", args.out, "CSV", reads={
        "the model file": args.model, "the --users-file": args.users_file,
        "the --items-file": args.items_file})
    try:
        ann.require(args.index)
        model = load_model(args.model, device=args.device)
        # unknown ids stop here, before any output is written or an index built; known ones
        # as the model has them
        users = wanted_users(args, model)
        items = (None if args.items_file is None else model.item_ids[known(
            model.data.item_lookup, read_ids(args.items_file, "--items-file", "item"))])
        if args.index == "approximate":
            model.item_index()      # refused, read or built before a row is written
        start = time.perf_counter()
        with cpu.compile_note():
            rows = written(args.out, lambda out: write_recommendations(
                out, model, users, args.n, not args.keep_seen, items, args.index))
    except NcaeError as e:
        print(f"error: {e.on_command_line()}", file=sys.stderr)
        return 2
    print(f"top-{args.n} for {len(users)} users: {rows} rows in "
          f"{time.perf_counter() - start:.2f} s on {model.ops.name}", file=sys.stderr)
    return 0
