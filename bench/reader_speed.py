"""Seconds to read a large ratings file through the package's readers (ncae_cuda.data.reader), on
synthetic files written here: MovieLens 100K's layout (tab-separated, no header, integer ids),
a CSV with a header line (MovieLens 20M's), and a CSV with text ids.

    python -m bench.reader_speed --rows 10000000 --out bench/results/DIR    # the README's figure
    python -m bench.reader_speed --rows 100000 --repeats 1 --out /tmp/r     # a smoke test

The files hold `rows` distinct (user, item) pairs (70,000 users x 10,000 items, the ML-10M
shape), half-star ratings from 1 to 5 and 10-digit timestamps, seeded; they are written to a
temporary folder, removed at the end. Each reader is timed `repeats` times after one untimed
read (which warms the page cache); writes reader_speed.json (machine, commit, date, seconds of
every read and their median) and reader_speed.md under --out.
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.cli import out_folder, said_when_interrupted, write_results
from bench.epoch_time import commit, device_name
from ncae_cuda.data import reader

USERS, ITEMS = 70_000, 10_000
SEED = 0


def columns(rows: int) -> dict[str, np.ndarray]:
    """`rows` distinct (user, item) pairs in random order, with ratings and timestamps."""
    rng = np.random.default_rng(SEED)
    keys = np.unique(rng.integers(0, USERS * ITEMS, int(rows * 1.05) + 100))
    keys = rng.permutation(keys)[:rows]
    return {"user": keys // ITEMS + 1, "item": keys % ITEMS + 1,
            "rating": rng.integers(2, 11, rows) / 2,          # 1 to 5 stars in halves
            "timestamp": rng.integers(800_000_000, 1_300_000_000, rows)}


def write(path: Path, values: dict[str, np.ndarray], sep: str, header: str | None,
          prefix: str = "") -> None:
    """One line per row, written in blocks (the text of 10M rows at once would take GBs)."""
    block = 1_000_000
    with open(path, "w") as f:
        if header:
            f.write(header + "\n")
        for start in range(0, len(values["user"]), block):
            part = {k: v[start:start + block] for k, v in values.items()}
            f.write("".join(f"{prefix}{u}{sep}{prefix}{i}{sep}{r:g}{sep}{t}\n" for u, i, r, t
                            in zip(part["user"].tolist(), part["item"].tolist(),
                                   part["rating"].tolist(), part["timestamp"].tolist())))


CASES = {
    # name: (file name, separator, header, id prefix, reader)
    "u.data layout, read_movielens_100k": ("u.data", "\t", None, "",
                                           reader.read_movielens_100k),
    "CSV with header, read_table": ("ratings.csv", ",", "userId,movieId,rating,timestamp", "",
                                    reader.read_table),
    "CSV with text ids, read_table": ("text.csv", ",", None, "u", reader.read_table),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--rows", type=int, default=10_000_000, help="rows of each file "
                   "(default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed reads of each file "
                   "(default: %(default)s)")
    p.add_argument("--out", type=Path, required=True, help="folder for reader_speed.json and .md")
    args = p.parse_args(argv)
    if args.rows < 1 or args.repeats < 1:
        p.error("--rows and --repeats must be >= 1")
    out_folder(p, args.out)
    with said_when_interrupted(args.out, "reader_speed"):
        result = {"commit": commit(), "date": datetime.date.today().isoformat(),
                  "device": device_name("cpu"), "rows": args.rows, "cases": {}}
        values = columns(args.rows)
        with tempfile.TemporaryDirectory(prefix="ncae-reader-speed-") as folder:
            for name, (file, sep, header, prefix, read_file) in CASES.items():
                path = Path(folder) / file
                write(path, values, sep, header, prefix)
                read = read_file(path)
                assert read.nnz == args.rows, (name, read.nnz)
                seconds = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    read_file(path)
                    seconds.append(time.perf_counter() - start)
                result["cases"][name] = {"bytes": path.stat().st_size, "seconds": seconds,
                                         "median": statistics.median(seconds)}
                print(f"{name}: {statistics.median(seconds):.2f} s", flush=True)
        lines = [f"{result['device']}, commit {result['commit']}, {result['date']}, "
                 f"{args.rows:,} rows", "", "| file | MB | median s | rows/s |",
                 "|---|---:|---:|---:|"]
        lines += [f"| {name} | {case['bytes'] / 1e6:.0f} | {case['median']:.2f} | "
                  f"{args.rows / case['median']:,.0f} |" for name, case in result["cases"].items()]
        write_results(args.out, "reader_speed", result, "\n".join(lines))
        print("\n".join(lines) + f"\n\nwrote {args.out / 'reader_speed.json'} and "
              f"{args.out / 'reader_speed.md'}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
