"""A warm start against a cold fit, on data cut by time: does a model that starts from yesterday's
parameters reach the quality of a fresh one in fewer epochs, and test as well?

    python -m bench.warm_start --out bench/results/run --data-dir /path/to/ml-100k-folder
    python -m bench.warm_start --out /tmp/w --quick                      # a smoke test

The interactions of --dataset, in time order: a parent model is trained on the first 80% (the
trainer on that part as a file, its validation a random 10% of it, refit on all of it). Then
the first 90% arrive and the last 10% is test: two trainer runs with --split time --test-ratio
0.1 --valid-ratio 0.05 (select on the latest 5% before the test cut, refit on all 90%, the test
part scored once, its cold entries apart), one fresh (cold) and one --warm-start from the parent
(warm), with the same settings and seed. Each feedback with its recipe: explicit
(recipes/ml-100k-explicit.toml, RMSE) and implicit (recipes/ml-100k-implicit.toml, Recall@100
and NDCG@100), for each --seeds.

Reported per case and seed: the cold fit's best validation figure and its epoch; the epochs and
training seconds the warm fit's selection took to reach that figure (none: never reached); both
best epochs; and both test figures, the warm test part and the cold one apart. Then the same
reading on curves averaged over the seeds: the selection fits' validation, and learning curves
of the test part (a cold and a warm fit on all of the first 90% for 30 epochs, test scored after
every epoch with --curves, never chosen on): one seed's best validation epoch is often a high
of its noise, the mean curve's less so. Writes
warm_start.json and warm_start.md under --out with the machine, the versions and the commit;
the runs' own folders and logs go to a temporary folder, removed at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.cli import add_quick, integers, out_folder, parse, said_when_interrupted, write_results
from bench.epoch_time import commit
from ncae_cuda import cli
from ncae_cuda.commands.flags import build_parser, run_spec
from ncae_cuda.data import datasets, splits
from ncae_cuda.errors import NcaeError
from ncae_cuda.model.metrics import format_table
from ncae_cuda.ops import get_backend
from ncae_cuda.runs import protocol
from ncae_cuda.runs.environment import describe, device_facts, versions
from ncae_cuda.runs.spec import DEVICES

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
CASES = {"explicit": RECIPES / "ml-100k-explicit.toml",
         "implicit": RECIPES / "ml-100k-implicit.toml"}
PARENT_SHARE = 0.8                     # the parent's data: the first 80% of the interactions
NEW_FITS = ["--split", "time", "--test-ratio", "0.1", "--valid-ratio", "0.05"]
# the learning curves: a cold and a warm fit on all of the first 90% for CURVE_EPOCHS epochs,
# the test part scored after every epoch (--curves), never chosen on: the warm validation part
# of this cut is small (ML-100K: 515 entries of 31 users), the warm test part larger (2,800 of 87)
CURVE_EPOCHS = 30
CURVE_FITS = ["--split", "time", "--test-ratio", "0.1", "--valid-ratio", "0", "--curves"]
PARENT_VALID = "0.1"                   # the parent's validation: a random share of its data
TEST_FIGURES = {"explicit": ("rmse",), "implicit": ("recall@100", "ndcg@100")}
QUICK_EPOCHS = 4
QUICK = ["--hidden", "8", "--epochs", str(QUICK_EPOCHS), "--batch-size", "16"]
QUICK_FLAGS = {"dataset": "synthetic-tiny", "seeds": "0"}     # --quick's, where not given


def parent_files(data, folder: Path) -> tuple[Path, Path]:
    """The first PARENT_SHARE of `data`'s interactions by time, and the rest, as CSV files of
    its ids (user, item[, rating], timestamp): the parent's --train and --test."""
    cut = splits.by_time(data, test_ratio=1 - PARENT_SHARE)
    paths = []
    for name, part in (("first", cut.train), ("rest", cut.test.concat(cut.cold_test))):
        path = folder / f"{name}.csv"
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            rated = part.ratings is not None
            writer.writerow(["user", "item", *(["rating"] * rated), "timestamp"])
            for row in zip(part.user_ids[part.users], part.item_ids[part.items],
                           *([part.ratings] * rated), part.timestamps):
                writer.writerow(row)
        paths.append(path)
    return paths[0], paths[1]


def trained(argv: list[str], log: Path) -> tuple[dict, str, bool]:
    """A trainer run of these flags, its output in `log`: (what metrics.json holds, the
    validation figure its early stopping follows, whether more is better)."""
    spec, config = run_spec(build_parser(), argv)
    with open(log, "w") as f, contextlib.redirect_stdout(f):
        summary = protocol.run(spec, config)
    return (summary, *config.resolved().selection_metric)


def selection_epochs(summary: dict) -> list[dict]:
    """The records of the selection fit's epochs, in order."""
    return [r for r in summary["history"] if r.get("phase") == "select" and r["epoch"] >= 1]


def as_good(value: float, target: float, higher: bool) -> bool:
    return value >= target if higher else value <= target


def reached(summary: dict, metric: str, higher: bool, target: float) -> tuple[int, float] | None:
    """(epochs, training seconds) the selection fit took to score `target` on validation or
    better; None where it never did."""
    seconds = 0.0
    for record in selection_epochs(summary):
        seconds += record["seconds"]
        if as_good(record["valid"][metric], target, higher):
            return record["epoch"], seconds
    return None


def seed_mean_reading(runs: list[dict]) -> dict:
    """The curves averaged over the seeds (over the epochs every seed's fit ran), of validation
    (the selection fits') and of test (the curve fits'): the cold fit's best figure and its
    epoch, and the first epoch the warm fit's is as good (None: never)."""
    reading, higher = {}, runs[0]["higher"]
    for part in ("valid", "test"):
        mean = {}
        for kind in ("cold", "warm"):
            found = [run["curves"][kind][part] for run in runs]
            mean[kind] = [statistics.fmean(c[e] for c in found)
                          for e in range(min(map(len, found)))]
        cold = mean["cold"]
        best = (max if higher else min)(range(len(cold)), key=cold.__getitem__)
        reading[part] = {
            "cold_best": cold[best], "cold_best_epoch": best + 1, "cold_epochs": len(cold),
            "warm_epochs_to_it": next((e + 1 for e, v in enumerate(mean["warm"])
                                       if as_good(v, cold[best], higher)), None),
            "warm_epochs": len(mean["warm"])}
    return reading


@dataclass(frozen=True)
class Setup:
    """What every case and seed share."""
    common: list[str]            # the trainer's flags of every fit (device, --quick's)
    source: list[str]            # the data's flags of the new fits
    parent_train: Path           # the first 80% (parent_files)
    parent_test: Path            # the rest
    runs: Path                   # the runs' folders and logs
    curve_epochs: int            # the test curves' fits' epochs
    warm: list[str]              # the warm fits' own flags (--warm-lr)


def compare(setup: Setup, case: str, seed: int) -> dict:
    """One case and seed: the parent, then the cold and the warm fit on the first 90%, and the
    two fits that draw the test curves."""
    flags = ["--config", str(CASES[case]), "--seed", str(seed), *setup.common]
    runs = setup.runs
    parent = runs / f"{case}-{seed}-parent"
    trained(["--train", str(setup.parent_train), "--test", str(setup.parent_test),
             "--valid-ratio", PARENT_VALID, *flags, "--out", str(parent)],
            runs / f"{parent.name}.log")
    fits, curves = {}, {}
    for kind, extra in (("cold", []), ("warm", ["--warm-start", str(parent), *setup.warm])):
        name = f"{case}-{seed}-{kind}"
        fits[kind], metric, higher = trained([*flags, *setup.source, *NEW_FITS, *extra, "--out",
                                              str(runs / name)], runs / f"{name}.log")
        curve = trained([*flags, *setup.source, *CURVE_FITS, "--epochs", str(setup.curve_epochs),
                         *extra, "--out", str(runs / f"{name}-curve")],
                        runs / f"{name}-curve.log")[0]
        curves[kind] = {"valid": [r["valid"][metric] for r in selection_epochs(fits[kind])],
                        "test": [r["test"][metric] for r in selection_epochs(curve)]}
    cold, warm = fits["cold"], fits["warm"]
    best = next(r["valid"][metric] for r in selection_epochs(cold)
                if r["epoch"] == cold["best_epoch"])
    warm_reached = reached(warm, metric, higher, best)
    cold_seconds = reached(cold, metric, higher, best)[1]
    return {
        "metric": metric, "higher": higher, "cold_best_valid": best,
        "cold_best_epoch": cold["best_epoch"], "cold_seconds_to_best": cold_seconds,
        "warm_best_epoch": warm["best_epoch"],
        "warm_epochs_to_cold_best": warm_reached and warm_reached[0],
        "warm_seconds_to_cold_best": warm_reached and warm_reached[1],
        "data": cold["data"], "lr": {kind: fits[kind]["config"]["lr"] for kind in fits},
        "curves": curves,
        **{f"{kind}_{part}": {k: fits[kind][part][k] for k in TEST_FIGURES[case]}
           for kind in fits for part in ("test", "cold_test") if part in fits[kind]}}


def markdown(result: dict) -> str:
    quick = " (quick)" if result["quick"] else ""
    warm_lr = "" if result["warm_lr"] is None else f", the warm fits at --lr {result['warm_lr']:g}"
    lines = [f"commit {result['commit']}, {result['date']}, {result['dataset']}{quick}{warm_lr}",
             f"- {result['machine']}", ""]
    for case, found in result["cases"].items():
        rows = []
        for seed, r in found["seeds"].items():
            row = {"seed": seed, f"cold best valid {r['metric']}": r["cold_best_valid"],
                   "cold epochs": r["cold_best_epoch"], "cold s": r["cold_seconds_to_best"],
                   **{f"warm {what} to it": "never" if r[key] is None else r[key]
                      for what, key in (("epochs", "warm_epochs_to_cold_best"),
                                        ("s", "warm_seconds_to_cold_best"))}}
            for kind in ("cold", "warm"):
                for part in ("test", "cold_test"):
                    for k, v in r.get(f"{kind}_{part}", {}).items():
                        row[f"{kind} fit: {part.replace('_', ' ')} {k}"] = v
            rows.append(row)
        median = found["median_epochs"]
        warm = median["warm_to_cold_best"]
        lines += [f"{case} ({found['recipe']})", "", format_table(rows), "",
                  f"median over the seeds: the cold fit's best epoch {median['cold']:g}; the "
                  "warm fit reached that validation figure "
                  + ("not in every seed" if warm is None else f"in {warm:g} epochs"), ""]
        for part, what in (("valid", "validation"),
                           ("test", "test (fits on all 90%, --curves: never chosen on)")):
            r = found["seed_mean"][part]
            warm_at = r["warm_epochs_to_it"]
            lines += [f"the {what} curves averaged over the seeds: the cold fit's best "
                      f"{r['cold_best']:.4f} at epoch {r['cold_best_epoch']} of "
                      f"{r['cold_epochs']}; the warm fit's "
                      + (f"reached it at epoch {warm_at}" if warm_at else
                         f"never did in {r['warm_epochs']}"), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.warm_start", allow_abbrev=False,
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="ml-100k", help="(default: %(default)s)")
    p.add_argument("--data-dir", type=Path, help="folder with an extracted copy of it")
    p.add_argument("--seeds", type=integers(0), default="0,1,2",
                   help="the model's seeds, a parent, cold and warm fit each (default: "
                        "%(default)s)")
    p.add_argument("--device", default="auto", choices=DEVICES, help="(default: %(default)s)")
    add_quick(p, "small networks, few epochs: a smoke test", QUICK_FLAGS)
    p.add_argument("--warm-lr", type=float, metavar="LR",
                   help="the warm fits' learning rate (default: the recipe's, as the cold fits')")
    p.add_argument("--out", type=Path, required=True, help="folder for warm_start.json and .md")
    args = parse(p, argv, QUICK_FLAGS)
    if args.warm_lr is not None and not args.warm_lr > 0:
        p.error(f"--warm-lr must be > 0; got {args.warm_lr:g}")
    data = cli.refused(p, lambda: datasets.load(args.dataset, data_dir=args.data_dir))
    out_folder(p, args.out)                     # once the flags and the data are sound
    with said_when_interrupted(args.out, "warm_start"):
        source = ["--dataset", args.dataset, *(["--data-dir", str(args.data_dir)] if args.data_dir
                                          else [])]
        try:
            device = get_backend(args.device).name
            with tempfile.TemporaryDirectory(prefix="ncae-warm-start-") as folder:
                runs = Path(folder)
                setup = Setup(["--device", args.device, *(QUICK if args.quick else [])], source,
                              *parent_files(data, runs), runs,
                              QUICK_EPOCHS if args.quick else CURVE_EPOCHS,
                              [] if args.warm_lr is None else ["--lr", str(args.warm_lr)])
                found = {case: {"recipe": CASES[case].name, "seeds": {
                    seed: compare(setup, case, seed) for seed in args.seeds}} for case in CASES}
        except NcaeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        result = {"commit": commit(), "date": datetime.date.today().isoformat(),
                  "dataset": args.dataset, "quick": args.quick, "warm_lr": args.warm_lr,
                  "device": device,
                  "machine": describe(device, device_facts(device)), "versions": versions(),
                  "cases": found}
        for case in found.values():
            reached_at = [r["warm_epochs_to_cold_best"] for r in case["seeds"].values()]
            case["median_epochs"] = {
                "cold": statistics.median(r["cold_best_epoch"] for r in case["seeds"].values()),
                "warm_to_cold_best": None if None in reached_at else statistics.median(reached_at)}
            case["seed_mean"] = seed_mean_reading(list(case["seeds"].values()))
        text = markdown(result)
        write_results(args.out, "warm_start", result, text)
        print(text)
        return 0


if __name__ == "__main__":
    sys.exit(main())
