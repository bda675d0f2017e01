"""Seconds per training epoch as the work grows, on the ML-10M shape (item-based, explicit, two
hidden layers of width K; synthetic data of that shape), each beside its floor.

    python -m bench.scalability --device cpu --out bench/results/scalability-cpu
    python -m bench.scalability --device gpu --gpus 0,1,2,3 --out DIR    # a cell on each GPU
    python -m bench.scalability --quick --out /tmp/s            # small, for tests

Two tables. The paper's Table 7: K in --ks by the training ratio D in --ratios (each row's
entries subsampled to D). And growth: at K = --growth-k, the rows, the columns or the
interactions cut to a share of the whole, to show how cost follows each. Every cell times
--epochs epochs of the library's own training loop and reports the last, beside the floor
counted by ncae_cuda/ops/floors.py from the ceilings its process measures, and the time as a
multiple of it. Each cell is a process of its own in DIR/runs/ (ncae_cuda.runs.pool: --jobs at
once, the cores shared out among them, so on a CPU a cell times its share; the same command
again skips the cells timed; --task I --tasks T, --collect). Writes scalability.json, .md, .csv
and .png under --out, with the device, commit and date.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench.cli import (add_quick, check_devices, check_timed_epochs, integers, out_folder,
                       parse, shares, write_results)
from bench.epoch_time import commit, device_name
from ncae_cuda import cli, ops
from ncae_cuda.data import datasets
from ncae_cuda.data.splits import subsample
from ncae_cuda.errors import NcaeError
from ncae_cuda.model.loop import run_epoch
from ncae_cuda.data.atomic_file import atomic_write
from ncae_cuda.model.network import Network, Objective
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.floors import epoch_work, measure_ceilings
from ncae_cuda.ops.layout import AdamConfig, NCAELayout
from ncae_cuda.ops.plan import Planner, Schedule, trainable_rows
from ncae_cuda.runs import pool
from ncae_cuda.runs.rundir import RunDirectory

BATCH = 128
CELL = "cell.json"                 # a cell's row, in its folder
OUTPUTS = (".json", ".md", ".csv", ".png")  # scalability.*: the table, which --overwrite removes
GROWN = ("rows", "columns", "interactions")
QUICK = {"ks": "8,16", "ratios": "0.5,1.0", "growth_k": 8, "shares": "0.5,1.0"}   # --quick's


def time_epochs(backend, m, hidden: tuple[int, ...], epochs: int) -> list[float]:
    """Seconds of each of `epochs` training epochs over the rows x columns matrix m."""
    layout = NCAELayout(m.shape[1], hidden)
    net = Network(layout, backend, Objective.explicit(1.0, 5.0, alpha=1.0, beta=0.5),
                  layout.xavier_init(np.random.default_rng(0)))
    csr = CSR.from_scipy(backend, m)
    planner = Planner(csr, trainable_rows(csr), Schedule(0, BATCH, 0.5))
    net.prepare(planner.geometry)
    adam = AdamConfig(weight_decay=1e-3)
    seconds = []
    with backend.session():
        for epoch in range(1, epochs + 1):
            start = time.perf_counter()
            # run_epoch returns the loss, read from the device: the epoch is done when it returns
            run_epoch(lambda b, s: net.train_step(b, s, adam), net.memory, csr,
                      planner.plan(epoch), f"epoch {epoch}")
            seconds.append(time.perf_counter() - start)
    return seconds


def cell(backend, ceilings, m, hidden, epochs, **labels) -> dict:
    seconds = time_epochs(backend, m, hidden, epochs)
    work = epoch_work(m, np.flatnonzero(np.diff(m.indptr)), BATCH, hidden, "explicit")
    floor = work.floor(ceilings)
    row = {**labels, "rows": m.shape[0], "columns": m.shape[1], "interactions": m.nnz,
           "parameters": NCAELayout(m.shape[1], hidden).size, "seconds": seconds[-1],
           "floor": floor, "x_floor": seconds[-1] / floor,
           "bandwidth_gb_s": ceilings.bandwidth / 1e9, "gflop_s": ceilings.flops / 1e9}
    print(" | ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in row.items()), flush=True)
    return row


# ---------------------------------------------------------------------------------------------
# the cells: listed by the command, each timed by a process of its own (--cell)

def cells(args) -> list[dict]:
    """Every cell of the two tables, by its labels: K and D (Table 7), or what is grown, its
    share and K (growth; the whole, measured once, is grown 'all')."""
    table7 = [{"K": k, "D": d} for d in args.ratios for k in args.ks]
    growth = []
    for share in args.shares:
        grown = ("all",) if share == 1 else GROWN
        growth += [{"grown": g, "share": share, "K": args.growth_k} for g in grown]
    return table7 + growth


def cell_spec(labels: dict) -> str:
    """'K=100,D=0.5': a cell's labels as its --cell flag."""
    return ",".join(f"{k}={v}" for k, v in labels.items())


def cell_name(labels: dict) -> str:
    """'K100-D0.5', 'rows-share0.5-K300': a cell's folder."""
    return "-".join(v if k == "grown" else f"{k}{v}" for k, v in labels.items())


def parse_spec(text: str) -> dict:
    labels = dict(part.split("=", 1) for part in text.split(","))
    return {k: int(v) if k == "K" else v if k == "grown" else float(v)
            for k, v in labels.items()}


def time_cell(args) -> int:
    """--cell: time one cell in its folder (--out), its row in cell.json."""
    labels = parse_spec(args.cell)
    folder = RunDirectory(args.out, {"cell": labels, "device": args.device,
                                     "epochs": args.epochs, "quick": args.quick})
    try:
        folder.open(resume=args.resume)
    except NcaeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    backend = ops.get_backend(args.device)
    ceilings = measure_ceilings(backend.xp, args.device, repeats=1 if args.quick else 5,
                                small=args.quick)
    data = datasets.load("synthetic-tiny" if args.quick else "synthetic-ml10m")
    whole = data.to_csr("item")
    k = labels["K"]
    if "D" in labels:
        d = labels["D"]
        m = whole if d == 1 else subsample(data, d, seed=0, based="item").to_csr("item")
    else:
        R, N, share = *whole.shape, labels["share"]
        m = {"all": lambda: whole,
             "rows": lambda: whole[:max(1, int(share * R))],
             "columns": lambda: whole[:, :max(1, int(share * N))].tocsr(),
             "interactions": lambda: subsample(data, share, seed=0, based="item")
             .to_csr("item")}[labels["grown"]]()
    row = cell(backend, ceilings, m, (k, k), args.epochs, **labels)
    text = json.dumps(row, indent=2).encode()
    atomic_write(args.out / CELL, lambda f: f.write(text))
    folder.finish()
    return 0


# ---------------------------------------------------------------------------------------------
# the command: list the cells, time them, collect the tables

def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="the backend each cell trains on (default: %(default)s)")
    p.add_argument("--ks", type=integers(1), default="100,300,500",
                   help="Table 7's widths K of both hidden layers (default: %(default)s)")
    p.add_argument("--ratios", type=shares, default="0.1,0.3,0.5,1.0",
                   help="Table 7's training ratios D (default: %(default)s)")
    p.add_argument("--growth-k", type=cli.count, default=300,
                   help="growth: the width K its cells train at (default: %(default)s)")
    p.add_argument("--shares", type=shares, default="0.25,0.5,1.0",
                   help="growth: shares of the whole (default: %(default)s)")
    p.add_argument("--epochs", type=cli.count, default=2,
                   help="epochs per cell, 2 or more, the first being start-up; the last is "
                        "reported (default: %(default)s)")
    add_quick(p, "small data, for tests", QUICK)
    p.add_argument("--out", type=Path, required=True,
                   help="folder for scalability.json, .md, .csv and .png, and the cells' runs/")
    cli.add_pool_flags(p)
    p.add_argument("--cell", help=argparse.SUPPRESS)        # a cell's process: time it alone
    p.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    args = parse(p, argv, QUICK)
    if args.cell:
        return time_cell(args)
    cli.check_pool_flags(p, args)
    check_timed_epochs(p, args.epochs)
    check_devices(p, [args.device])
    cli.refused(p, pool.check_gpus, args.gpus, args.device, "the cells")
    out_folder(p, args.out)
    listed = cells(args)
    runs = pool.Pool(args.out / "runs", "scalability", [
        pool.Run(cell_name(labels), "bench.scalability",
                 ("--cell", cell_spec(labels), "--device", args.device, "--epochs",
                  str(args.epochs), *(["--quick"] if args.quick else [])))
        for labels in listed], outputs=tuple(args.out / f"scalability{suffix}"
                                             for suffix in OUTPUTS))
    try:
        if not pool.run_share(runs, args):
            return 0
    except pool.ERRORS as e:
        return pool.exit_code(e)
    rows = [json.loads((runs.folder_of(run) / CELL).read_text()) for run in runs.runs]
    result = {"device": device_name(args.device), "commit": commit(),
              "date": datetime.date.today().isoformat(),
              "data": "synthetic-tiny" if args.quick else "synthetic-ml10m",
              "ceilings": {key: [min(r[key] for r in rows), max(r[key] for r in rows)]
                           for key in ("bandwidth_gb_s", "gflop_s")},
              "epochs_per_cell": args.epochs, "jobs": args.jobs, "growth_k": args.growth_k,
              "table7": [r for r in rows if "D" in r], "growth": [r for r in rows if "D" not in r]}
    ks = sorted({r["K"] for r in result["table7"]})
    ratios = sorted({r["D"] for r in result["table7"]})
    write_results(args.out, "scalability", result, markdown(result, ks, ratios))
    table = io.StringIO(newline="")             # written whole, as the .json and .md are
    writer = csv.DictWriter(table, fieldnames=["table", "K", "D", "grown", "share", "rows",
                                               "columns", "interactions", "parameters",
                                               "seconds", "floor", "x_floor", "bandwidth_gb_s",
                                               "gflop_s"])
    writer.writeheader()
    for name in ("table7", "growth"):
        for row in result[name]:
            writer.writerow({"table": name, **row})
    atomic_write(args.out / "scalability.csv", lambda f: f.write(table.getvalue().encode()))
    plot(result, ks, args.out / "scalability.png")
    print((args.out / "scalability.md").read_text())
    return 0


def percent(share: float) -> str:
    """'10%', '2.5%', '0.1%': a ratio D or a share to four significant figures, so that two
    ratios never share a heading ('.0%' heads 0.001 and 0.004 both '0%')."""
    return f"{share * 100:.4g}%"


def markdown(result: dict, ks: list[int], ratios: list[float]) -> str:
    def at(k, d):
        row = next(r for r in result["table7"] if r["K"] == k and r["D"] == d)
        return f"{row['seconds']:.4g} ({row['x_floor']:.1f}x)"
    bandwidth, gflops = result["ceilings"]["bandwidth_gb_s"], result["ceilings"]["gflop_s"]
    lines = [f"# Seconds per epoch, {result['data']} (item-based, explicit, hidden K,K)", "",
             f"- device: {result['device']}", f"- commit {result['commit']}, {result['date']}",
             f"- each cell timed by a process of its own, {result['jobs']} at once",
             f"- ceilings each cell measured: {bandwidth[0]:.1f}-{bandwidth[1]:.1f} GB/s (copy, "
             f"read + write), {gflops[0]:.0f}-{gflops[1]:.0f} GFLOP/s (float32 matmul)",
             f"- each cell: the last of {result['epochs_per_cell']} epochs; in brackets the "
             "multiple of the epoch's floor (ncae_cuda/ops/floors.py)", "",
             "| K | " + " | ".join(f"D = {percent(d)}" for d in ratios) + " |",
             "|---:|" + "---:|" * len(ratios)]
    lines += [f"| {k} | " + " | ".join(at(k, d) for d in ratios) + " |" for k in ks]
    lines += ["", f"Growth at K = {result['growth_k']}: one quantity cut to a share of the "
              "whole (rows: the first items; columns: the first users; interactions: each "
              "row's entries subsampled)", "",
              "| grown | share | rows | columns | interactions | parameters | s/epoch | floor s "
              "| x floor |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['grown']} | {percent(r['share'])} | {r['rows']:,} | {r['columns']:,} | "
              f"{r['interactions']:,} | {r['parameters']:,} | {r['seconds']:.4g} | "
              f"{r['floor']:.4g} | {r['x_floor']:.1f} |" for r in result["growth"]]
    return "\n".join(lines) + "\n"


def plot(result: dict, ks: list[int], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for k in ks:
        rows = [r for r in result["table7"] if r["K"] == k]
        left.plot([r["D"] for r in rows], [r["seconds"] for r in rows], "o-", label=f"K = {k}")
        left.plot([r["D"] for r in rows], [r["floor"] for r in rows], ":", color="gray")
    left.set(xlabel="training ratio D", ylabel="seconds per epoch (dotted: floor)",
             title=result["device"])
    left.legend()
    for grown in GROWN:
        rows = sorted([r for r in result["growth"] if r["grown"] in (grown, "all")],
                      key=lambda r: r["share"])
        right.plot([r["share"] for r in rows], [r["seconds"] for r in rows], "o-", label=grown)
    right.set(xlabel="share of the whole", ylabel="seconds per epoch",
              title="cost as one quantity grows")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
