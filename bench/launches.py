"""What a training step asks of the device at the paper's benchmark shapes: the launch ledger.

    python -m bench.launches --out bench/results/launches          # no GPU needed
    python -m bench.launches --out /tmp/l --shapes lastfm          # one shape
    python -m bench.launches --out DIR --device gpu                # the real counts, on a GPU
    python -m bench.launches --out /tmp/l --quick                  # tiny data: a smoke test
    python -m bench.launches --out DIR --shapes ml10m --ranks 1,4,8   # and column shards

Each shape is synthetic data of that shape trained as the paper trains it (ML-10M: explicit,
item-based, hidden 500,500; Last.fm and Delicious: implicit, user-based, hidden 128, popularity
weighting), for one epoch of the trainer's own loop on the GPU backend, counted by a ledger
(ncae_cuda/ops/ledger.py). Without a GPU the device is emulated: the kernel that cuts batches
(and the step count it follows) runs on the CPU, every other kernel is launched in name only
(counted and weighed, not run), so the full shapes take seconds. Writes launches.json,
{"shapes": {name: figures}}, and launches.md under --out, with the commit, the date and the SMs
the launches were weighed against, again after each shape (a time limit that stops the command
keeps the shapes it finished).

Figures per shape: ops_per_step (device operations: custom kernels, BLAS calls and array-library
operations), allocations_per_step (after the epoch's first step), transfers_per_epoch and
syncs_per_epoch (after the first step, the closing read of the losses included) and
work_balance (the largest busiest-block-over-mean-block ratio of any kernel launch), and
graph_nodes_per_step (the captured step's operations); parallel_slack (the fewest blocks per SM
of any launch whose grid is sized by the batch's entries, against the SM count of the device:
an H100's 132 where it is emulated) and serial_tail (the longest chain of dependent reads any
block makes, in entries: ops/gpu.py weighs it), each with its kernel and per kernel.

--ranks R1,R2,... adds what each rank of a column-sharded fit (ncae_cuda/ops/shard.py) holds and
shares, planned from the columns' training entries, nothing allocated: its columns and their
entries, the bytes of its parameters and their state (parameters, gradients, Adam's m and v,
the best epoch's copy) and the bytes it contributes to a step's collectives
(ncae_cuda.model.distributed.step_bytes, which the ledger counts in a sharded fit). Shapes: ML-10M
(item-based: its 69,878 users are the columns, hidden 500,500) and a catalogue of 10M columns
with 1G training entries, a column's share of them falling off as a Zipf law of its popularity
rank (exponent 0.8), the ranks shuffled over the columns (hidden 500,500).
"""
from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np

from bench.cli import (check_devices, integers, names, out_folder, said_when_interrupted,
                       write_results)
from bench.epoch_time import commit, device_name
from ncae_cuda import ops
from ncae_cuda.data import datasets
from ncae_cuda.model.augment import column_weights
from ncae_cuda.model.distributed import step_bytes
from ncae_cuda.model.loop import run_epoch
from ncae_cuda.model.network import Network, Objective
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.emulator import emulated_backend
from ncae_cuda.ops.layout import AdamConfig, NCAELayout
from ncae_cuda.ops.ledger import Ledger
from ncae_cuda.ops.plan import Planner, Schedule, trainable_rows
from ncae_cuda.ops.shard import Columns, split_columns

# name: (data set, feedback, rows encoded, hidden widths)
SHAPES = {
    "ml10m": ("synthetic-ml10m", "explicit", "item", (500, 500)),
    "lastfm": ("synthetic-lastfm", "implicit", "user", (128,)),
    "delicious": ("synthetic-delicious", "implicit", "user", (128,)),
}
BATCH = 128
# The kernels that run: the batch cutting and the step count it follows; the others' work is
# weighed from what those cut.
RUN = ("cut_batch_kernel", "step_loss_kernel")


def ledger_of_epoch(backend, data, feedback: str, based: str, hidden: tuple,
                    batch_size: int = BATCH) -> dict:
    """The ledger's figures of one training epoch of `data` on `backend`, and the nodes of a
    step captured in a second one."""
    m = data.to_csr(based, implicit=feedback == "implicit")
    layout = NCAELayout(m.shape[1], hidden)
    params = layout.xavier_init(np.random.default_rng(0))
    if feedback == "explicit":
        objective, weights = Objective.explicit(*data.rating_scale, alpha=1.0, beta=0.5), None
    else:
        objective = Objective.implicit()
        weights = column_weights(m.indices, m.shape[1], "popularity", 512.0, 0.5, 0.05)
    ledger = Ledger()
    with backend.session():
        with ledger.recording():
            net = Network(layout, backend, objective, params, weights)
            csr = CSR.from_scipy(backend, m)
            planner = Planner(csr, trainable_rows(csr), Schedule(0, batch_size, 0.5))
            net.prepare(planner.geometry)
            adam = AdamConfig(weight_decay=1e-3)
            step = lambda b, s: net.train_step(b, s, adam)      # noqa: E731
            # a graph is asked for: this epoch runs the step uncaptured, the next captures it
            run_epoch(step, net.memory, csr, planner.plan(1), "ledger", graph=True)
        run_epoch(step, net.memory, csr, planner.plan(2), "graph", graph=True)
    graph = net.memory.graph
    return {**ledger.summary(), "graph_nodes_per_step": graph.nodes, "graph_dot": graph.dot}


STATE_COPIES = 5      # floats a parameter: itself, its gradient, Adam's m and v, the best copy
CATALOGUE = (10_000_000, 10**9)        # columns, training entries
SHARDED = ("ml10m", "10m-columns")     # the shapes --ranks plans


def quick_mark(result: dict) -> str:
    """What a title line adds for a --quick result: its rows are named by the shapes, whose
    data it did not draw."""
    return " (quick: synthetic-tiny in place of each shape's data)" if result["quick"] else ""


def shard_counts(name: str, quick: bool) -> tuple[np.ndarray, tuple]:
    """(each column's training entries, hidden widths) of a sharded shape."""
    if name == "ml10m":
        dataset, _, based, hidden = SHAPES["ml10m"]
        data = datasets.load("synthetic-tiny" if quick else dataset)
        columns = data.users if based == "item" else data.items
        return np.bincount(columns, minlength=data.n_users if based == "item" else data.n_items
                           ), hidden
    columns, entries = (10_000, 10**6) if quick else CATALOGUE
    rng = np.random.default_rng(0)
    share = 1.0 / (1.0 + rng.permutation(columns)) ** 0.8        # by popularity rank
    return np.round(entries * share / share.sum()).astype(np.int64), (500, 500)


def shard_plan(counts: np.ndarray, hidden: tuple, ranks: int,
               batch_size: int = BATCH) -> list[dict]:
    """Per rank of `ranks`: what it holds and shares (see the module's docstring)."""
    bounds = split_columns(counts, ranks)
    plan = []
    for r in range(ranks):
        columns = Columns(int(bounds[r]), int(bounds[r + 1]), len(counts))
        size = NCAELayout(columns.n, hidden, columns).size
        plan.append({"rank": r, "columns": columns.n,
                     "entries": int(counts[columns.lo:columns.hi].sum()), "parameters": size,
                     "state_bytes": STATE_COPIES * 4 * size,
                     "collective_bytes_per_step": step_bytes(batch_size, hidden)})
    return plan


def shard_markdown(shards: dict) -> str:
    lines = ["| shape | ranks | rank | columns | entries | parameters | parameters and state "
             "GiB | collective bytes a step |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for shape, by_ranks in shards.items():
        for ranks, plan in by_ranks.items():
            for p in plan:
                lines.append(f"| {shape} | {ranks} | {p['rank']} | {p['columns']:,} | "
                             f"{p['entries']:,} | {p['parameters']:,} | "
                             f"{p['state_bytes'] / 2**30:.2f} | "
                             f"{p['collective_bytes_per_step']:,} |")
    return "\n".join(lines) + "\n"


def markdown(result: dict) -> str:
    """launches.md: a row per shape counted, its kernels' parallelism, and the column shards'
    plans where --ranks asked for them."""
    lines = [f"commit {result['commit']}, {result['date']}, {result['device']}, "
             f"{result['sms']} SMs" + quick_mark(result), "",
             "| shape | ops per step | allocations per step | transfers per epoch | "
             "syncs per epoch | work balance (kernel) | graph nodes per step | "
             "parallel slack (kernel) | serial tail (kernel) |",
             "|---|---:|---:|---:|---:|---|---:|---|---|"]
    for name, f in result["shapes"].items():
        count = (str(f["ops_per_step"]) if f["ops_per_step"] == f["ops_per_step_min"]
                 else f"{f['ops_per_step_min']}-{f['ops_per_step']}")
        nodes = f.get("graph_nodes_per_step", {}).get("nodes", "-")
        lines.append(f"| {name} | {count} | {f['allocations_per_step']} | "
                     f"{f['transfers_per_epoch']} | {f['syncs_per_epoch']} | "
                     f"{f['work_balance']:.1f} ({f['least_balanced_kernel']}) | {nodes} | "
                     f"{f['parallel_slack']:.2f} ({f['least_parallel_kernel']}) | "
                     f"{f['serial_tail']:.0f} ({f['longest_tail_kernel']}) |")
    text = "\n".join(lines + [""] + parallelism_by_kernel(result)) + "\n"
    return text + ("\n" + shard_markdown(result["shards"]) if "shards" in result else "")


def parallelism_by_kernel(result: dict) -> list:
    """Per kernel and shape: its fewest blocks per SM (grids sized by the batch's entries) and
    its longest serial tail, in entries."""
    shapes = result["shapes"]
    kernels = sorted({k for f in shapes.values() for k in f["serial_tail_by_kernel"]})
    lines = ["| kernel | " + " | ".join(f"{name} slack | {name} tail" for name in shapes) + " |",
             "|---|" + "---:|---:|" * len(shapes)]
    for k in kernels:
        cells = []
        for f in shapes.values():
            slack = f["parallel_slack_by_kernel"].get(k)
            tail = f["serial_tail_by_kernel"].get(k)
            cells += ["-" if slack is None else f"{slack:.2f}",
                      "-" if tail is None else f"{tail:.0f}"]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for launches.json and .md")
    p.add_argument("--shapes", type=names(SHAPES), default=",".join(SHAPES),
                   help=f"comma-separated, of: {', '.join(SHAPES)} (default: all)")
    p.add_argument("--device", choices=("emulated", "gpu"), default="emulated",
                   help="emulated: no GPU needed, the kernels counted; gpu: every kernel runs "
                        "(default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="synthetic-tiny, in batches of 16, trained as each shape is")
    p.add_argument("--ranks", type=integers(1), default=[], metavar="R1,R2,...",
                   help="also plan column-sharded fits of these numbers of processes")
    args = p.parse_args(argv)
    if args.device == "gpu":
        check_devices(p, ["gpu"])
    sharded = {shape: shard_counts(shape, args.quick) for shape in SHARDED if args.ranks}
    for shape, (counts, _) in sharded.items():
        if max(args.ranks) > len(counts):
            p.error(f"--ranks {max(args.ranks)}: {shape} has {len(counts):,} columns to share, "
                    "fewer than the processes")
    out_folder(p, args.out)                         # before the emulator's build
    with said_when_interrupted(args.out, "launches"):
        if args.device == "gpu":
            backend, device = ops.get_backend("gpu"), device_name("gpu")
        else:
            backend = emulated_backend(runs=lambda kernel: kernel in RUN)
            device = "emulated (the batch cutting runs; the other kernels are counted)"
        result = {"commit": commit(), "date": datetime.date.today().isoformat(), "device": device,
                  "sms": backend.sms, "quick": args.quick, "shapes": {}}
        for name in args.shapes:
            dataset, feedback, based, hidden = SHAPES[name]
            dataset = "synthetic-tiny" if args.quick else dataset
            start = time.perf_counter()
            print(f"{name}: one epoch of {dataset}, {feedback}, {based}-based, hidden "
                  f"{','.join(map(str, hidden))}: drawing the data ...", flush=True)
            data = datasets.load(dataset)
            print(f"{name}: {data.nnz:,} interactions drawn in "
                  f"{time.perf_counter() - start:.0f} s; counting an epoch, then capturing its "
                  "step ...", flush=True)
            figures = ledger_of_epoch(backend, data, feedback, based, hidden,
                                      16 if args.quick else BATCH)
            print(f"{name}: done in {time.perf_counter() - start:.0f} s", flush=True)
            dot = figures.pop("graph_dot")
            if dot:
                (args.out / f"graph-{name}.dot").write_text(dot)
            result["shapes"][name] = figures
            write_results(args.out, "launches", result, markdown(result),     # after each shape
                          (len(result["shapes"]), len(args.shapes), "shapes counted"))
        if sharded:
            result["shards"] = {shape: {r: shard_plan(counts, hidden, r) for r in args.ranks}
                                for shape, (counts, hidden) in sharded.items()}
            write_results(args.out, "launches", result, markdown(result))
        print(markdown(result))
        return 0


if __name__ == "__main__":
    sys.exit(main())
