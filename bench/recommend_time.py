"""Seconds to recommend the top M items to every user of a data set, through NCAE.recommend.

    python -m bench.recommend_time --dataset ml-100k --data-dir ../shared/data \\
        --devices cpu --out bench/results/run
    python -m bench.recommend_time --quick --out /tmp/r                  # a smoke test

For each device and model kind (implicit user-based: the users' rows through the network;
explicit item-based: every item's code against each user's output embedding) it trains a
model for a few epochs (timing does not depend on how well), then times
recommend(all users, n=M) --repeats times after one warm-up call. Writes recommend_time.json
and .md under --out with device, commit and date, again after each run (a time limit that stops
the command keeps the runs it finished).
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import time
from pathlib import Path

from bench.cli import (add_quick, check_devices, names, out_folder, parse, said_when_interrupted,
                       write_results)
from bench.epoch_time import commit, device_name
from ncae_cuda import NCAE, cli
from ncae_cuda.data import datasets

QUICK = {"dataset": "synthetic-tiny", "repeats": 1}
QUICK_HIDDEN = (8,)                    # --quick's models' widths
DEVICES = ("cpu", "gpu")
KINDS = [dict(feedback="implicit", based="user", hidden=(128,)),
         dict(feedback="explicit", based="item", hidden=(500, 500))]


def label(settings: dict) -> str:
    return (f"{settings['feedback']}, {settings['based']}-based, hidden "
            + ",".join(map(str, settings["hidden"])))


def measure(model: NCAE, users, n: int, repeats: int) -> list[float]:
    model.recommend(users, n=n)                        # warm-up: JIT or kernel compilation
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.recommend(users, n=n)                    # returns host arrays: synchronized
        seconds.append(time.perf_counter() - start)
    return seconds


def markdown(result: dict) -> str:
    """recommend_time.md: a row per device and model kind measured."""
    lines = [f"# Top-{result['n']} for every user of {result['dataset']} ({result['users']} "
             f"users x {result['items']} items)", "",
             f"- commit {result['commit']}, {result['date']}", "",
             "| device | model | median s | runs (s) |", "|---|---|---:|---|"]
    lines += [f"| {r['device_name']} | {r['model']} | {r['median_seconds']:.3f} | "
              + " ".join(f"{s:.3f}" for s in r["seconds"]) + " |" for r in result["runs"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="ml-100k",
                   help="a data set's name or file, as train's (default: %(default)s)")
    p.add_argument("--data-dir", type=Path,
                   help="where the data set is kept, as train's --data-dir")
    p.add_argument("--devices", type=names(DEVICES), default="cpu",
                   help="comma-separated: " + ", ".join(DEVICES) + " (default: %(default)s)")
    p.add_argument("-n", type=cli.count, default=100,
                   help="M: items recommended per user (default: %(default)s)")
    p.add_argument("--epochs", type=cli.count, default=2,
                   help="training epochs before timing (default: %(default)s)")
    p.add_argument("--repeats", type=cli.count, default=5,
                   help="timed calls of each model, after a warm-up (default: %(default)s)")
    add_quick(p, "a smoke test: tiny models", QUICK)
    p.add_argument("--out", type=Path, required=True,
                   help="folder for recommend_time.json and .md")
    args = parse(p, argv, QUICK)
    check_devices(p, args.devices)
    data = cli.refused(p, lambda: datasets.load(args.dataset, data_dir=args.data_dir))
    out_folder(p, args.out)                     # once the flags and the data are sound
    with said_when_interrupted(args.out, "recommend_time"):
        n = min(args.n, data.n_items)               # a top over fewer items is all of them, sorted
        result = {"dataset": args.dataset, "users": data.n_users, "items": data.n_items,
                  "interactions": data.nnz, "n": n, "commit": commit(),
                  "date": datetime.date.today().isoformat(), "runs": []}
        planned = len(args.devices) * len(KINDS)
        for device in args.devices:
            for settings in KINDS:
                if args.quick:
                    settings = {**settings, "hidden": QUICK_HIDDEN}
                kind = label(settings)
                model = NCAE(device=device, **settings).fit(data, epochs=args.epochs, verbose=False)
                seconds = measure(model, data.user_ids, n, args.repeats)
                result["runs"].append({"device": device, "device_name": device_name(device),
                                       "model": kind, "seconds": seconds,
                                       "median_seconds": statistics.median(seconds)})
                print(f"{device} | {kind} | top-{n} for {data.n_users} users: "
                      f"{statistics.median(seconds):.3f} s (median of {len(seconds)})", flush=True)
                write_results(args.out, "recommend_time", result, markdown(result),   # after each
                              (len(result["runs"]), planned, "runs measured"))
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
