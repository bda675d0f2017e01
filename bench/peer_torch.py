"""ncae_cuda against the same NCAE written in plain PyTorch, trained side by side on one device.

    python -m bench.peer_torch --out /tmp/peer                 # synthetic ratings, item-based
    python -m bench.peer_torch --dataset synthetic-lastfm --feedback implicit --based user \\
        --hidden 128 --epochs 4 --out /tmp/peer-lastfm
    python -m bench.peer_torch --device gpu --out /tmp/peer-gpu     # torch.cuda beside CuPy
    python -m bench.peer_torch --quick --out /tmp/peer-quick         # a smoke test

The peer is what a PyTorch user would write: nn.EmbeddingBag with per_sample_weights for the
sparse input layer, nn.Linear for the rest (explicit feedback gathers the output layer's rows at
the observed entries, as ncae_cuda's sparse output does; implicit feedback needs every column),
autograd for the backward and torch.optim.Adam with weight_decay (L2 added to the gradient, as
ncae_cuda does). Both models train on exactly the same
rows, built by the library from the same trainer flags, with the same loss, initialization,
optimizer settings and batch size; the peer's test predictions are scored by the library's
metric code. Only the dropout masks and shuffles differ (each draws its own), so the two test
figures should agree within seed noise: the run says whether they do.

Writes peer_torch.json and peer_torch.md under --out: device, commit, date, whether --quick ran
(a smoke test's: bench.report leaves it out, bench.floors counts over its ceilings only with
--quick), the configuration, and per model the seconds of every training epoch (evaluation
excluded), their median over epochs 2..E (the first holds start-up: Numba's cache loading, CUDA
compilation, allocation), the test figures after E epochs, the torch / ncae_cuda ratio of the
medians, and both times as multiples of the epoch's floor from ncae_cuda.ops.floors. Both files
are written before each model trains and after both, so a run stopped by a time limit keeps the
model it finished.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MISSING_EXTRA = ("python -m bench.peer_torch needs PyTorch, the [bench] extra: "
                 "pip install -e '.[bench]'")
try:
    import torch
    from torch import nn
except ImportError:
    if __name__ != "__main__":
        raise                             # an importer (a test) decides what its absence means
    print(f"error: {MISSING_EXTRA}", file=sys.stderr)
    raise SystemExit(2) from None

from bench.cli import (add_quick, check_devices, check_timed_epochs, out_folder, parse,
                       said_when_interrupted, write_results)
from bench.epoch_time import ceilings, commit, device_name
from ncae_cuda import cli
from ncae_cuda.commands import flags
from ncae_cuda.data import datasets
from ncae_cuda.data.interactions import Interactions
from ncae_cuda.model import metrics
from ncae_cuda.model.augment import column_weights
from ncae_cuda.model.config import DEFAULTS, FLOAT32, MATMULS, TF32, Config
from ncae_cuda.model.evaluate import EVAL_BATCH, heldout_ranks
from ncae_cuda.model.network import Objective, to_network_scale
from ncae_cuda.ops import get_backend
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.floors import epoch_work
from ncae_cuda.runs import protocol
from ncae_cuda.runs.spec import recorded

# Fixed epochs on both sides: no validation-driven stopping or retraining to blur the timing.
# Implicit leave-one-out always carves a validation item, so there the trainer is told never to
# stop early nor refit; --variant NCAE turns augmentation off, so both train on the same rows.
FIXED_EPOCHS = {"explicit": ["--valid-ratio", "0"],
                "implicit": ["--patience", "0", "--no-refit", "--variant", "NCAE"]}
QUICK = {"dataset": "synthetic-tiny", "hidden": "16", "epochs": 2}
# the trainer's settings --help names, as both models take them from ncae_cuda's defaults
SHOWN_DEFAULTS = ("batch_size", "dropout", "alpha", "beta", "lr", "weight_decay", "c0", "omega",
                  "seed")
# Two models "agree" when their test figures differ by no more than seed noise:
RMSE_TOLERANCE = 0.03          # explicit: relative difference of the RMSEs
HR_STANDARD_ERRORS = 3         # implicit: HR@M within 3 standard errors of a difference of rates


# ---------------------------------------------------------------------------------------------
# the PyTorch model

class TorchNCAE(nn.Module):
    """NCAE (docs/design.md, "The model") in stock PyTorch modules.

    The output layer is one nn.Linear(K_last, N): its weight is V (N, K_last), its bias c (N,).
    Implicit feedback calls it densely; explicit feedback gathers its rows at the observed
    entries only, since only those carry error.
    """

    def __init__(self, n_cols: int, hidden: tuple[int, ...]):
        super().__init__()
        self.embed = nn.EmbeddingBag(n_cols, hidden[0], mode="sum")     # E (N, K1)
        self.b1 = nn.Parameter(torch.zeros(hidden[0]))                   # (K1,)
        self.dense = nn.ModuleList(nn.Linear(k_in, k_out)
                                   for k_in, k_out in zip(hidden, hidden[1:]))
        self.out = nn.Linear(hidden[-1], n_cols)                        # V (N, K_last), c (N,)
        for p in self.parameters():
            if p.dim() == 2:    # (N, K) or (K_out, K_in): the same bound as ncae_cuda's layout
                nn.init.xavier_uniform_(p)
            else:
                nn.init.zeros_(p)

    def encode(self, cols, weights, offsets):
        """a_last (B, K_last) of bags of (column, weight) entries starting at offsets (B,)."""
        a = torch.tanh(self.embed(cols, offsets, per_sample_weights=weights) + self.b1)  # (B, K1)
        for layer in self.dense:
            a = torch.tanh(layer(a))                                     # (B, K_l)
        return a

    def entry_logits(self, a, entry_rows, cols):
        """out (nnz,) at the entries (entry_rows, cols) only: V[col] . a[row] + c[col].

        index_select rather than a[rows]: its backward is an index_add, where advanced
        indexing's is an accumulating index_put, 4x slower for these shapes on the CPU."""
        v = self.out.weight.index_select(0, cols)                       # (nnz, K_last)
        return (a.index_select(0, entry_rows) * v).sum(1) + self.out.bias.index_select(0, cols)


class DeviceCSR:
    """The rows x columns training matrix on the torch device, cut into EmbeddingBag batches."""

    def __init__(self, m, device: torch.device):
        self.device = device
        self.indptr = torch.as_tensor(m.indptr, dtype=torch.int64, device=device)
        self.cols = torch.as_tensor(m.indices, dtype=torch.int64, device=device)
        self.vals = torch.as_tensor(m.data, dtype=torch.float32, device=device)
        self.lengths = np.diff(m.indptr)        # host copy: a batch's size without a device sync

    def batch(self, rows: np.ndarray):
        """(cols (nnz,), vals (nnz,), offsets (B,), entry_rows (nnz,), counts (B,)) of the rows'
        entries, row after row; offsets are where each row's bag starts."""
        nnz = int(self.lengths[rows].sum())
        r = torch.as_tensor(rows, dtype=torch.int64, device=self.device)
        starts = self.indptr[r]                                          # (B,)
        counts = self.indptr[r + 1] - starts                             # (B,)
        offsets = torch.cumsum(counts, 0) - counts                       # (B,)
        entry_rows = torch.repeat_interleave(
            torch.arange(len(rows), device=self.device), counts, output_size=nnz)  # (nnz,)
        entries = (starts[entry_rows] - offsets[entry_rows]
                   + torch.arange(nnz, device=self.device))              # (nnz,) CSR positions
        return self.cols[entries], self.vals[entries], offsets, entry_rows, counts


def batch_loss(model: TorchNCAE, batch, keep, q: float, objective, col_weights):
    """The batch's mean row loss, exactly as ncae_cuda.model.network defines it."""
    cols, vals, offsets, entry_rows, counts = batch
    a = model.encode(cols, vals * keep / (1 - q), offsets)              # (B, K_last)
    if objective.feedback == "explicit":
        yhat = objective.s * torch.tanh(model.entry_logits(a, entry_rows, cols)) + objective.m_off
        # alpha/|K| on errors at dropped inputs, beta/|K| at kept ones, in the unit range
        w = (torch.where(keep, objective.beta, objective.alpha) * objective.unit
             / counts[entry_rows])                                       # (nnz,)
        return (w * (yhat - vals) ** 2).sum() / len(counts)
    yhat = torch.tanh(model.out(a))                                      # (B, N)
    target = torch.zeros_like(yhat)
    target[entry_rows, cols] = 1.0                                       # (B, N)
    w = torch.where(target > 0, 1.0, col_weights)                        # (B, N): c_j unobserved
    return (w * (yhat - target) ** 2).sum(1).mean()


def train_epoch(model, optimizer, csr: DeviceCSR, rows: np.ndarray, q: float, batch_size: int,
                objective, col_weights) -> float:
    """One shuffled pass over the training rows; returns the mean row loss."""
    order = rows[torch.randperm(len(rows)).numpy()]
    total = torch.zeros((), device=csr.device)           # summed on the device: no sync a batch
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        batch = csr.batch(chunk)
        keep = torch.rand(len(batch[0]), device=csr.device) >= q        # (nnz,) input dropout
        loss = batch_loss(model, batch, keep, q, objective, col_weights)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach() * len(chunk)
    return float(total) / len(order)


@torch.no_grad()
def row_outputs(model: TorchNCAE, csr: DeviceCSR, rows: np.ndarray, dense: bool):
    """Each row encoded from all its entries (no dropout): a_last (n, K_last), or with dense
    the logits (n, N), in evaluation-sized chunks."""
    parts = []
    for start in range(0, len(rows), EVAL_BATCH):
        cols, vals, offsets, _, _ = csr.batch(rows[start:start + EVAL_BATCH])
        a = model.encode(cols, vals, offsets)
        parts.append(model.out(a) if dense else a)
    return torch.cat(parts)


# ---------------------------------------------------------------------------------------------
# the two runs

def trainer_argv(args) -> list[str]:
    """The trainer's flags for this comparison; the peer parses the same ones for its data."""
    feedback = args.feedback or datasets.default_feedback(args.dataset)
    # --curves: the trainer scores test after every epoch, so its figures after epoch E can be
    # read even where, having a validation part, it restores its best-validation epoch at the end
    argv = ["--dataset", args.dataset, "--feedback", feedback, "--hidden", args.hidden,
            "--epochs", str(args.epochs), "--device", args.device, "--matmul", args.matmul,
            "--curves", *FIXED_EPOCHS[feedback]]
    if args.based:
        argv += ["--based", args.based]
    if args.data_dir:
        argv += ["--data-dir", str(args.data_dir)]
    return argv


def run_ncae(argv: list[str]) -> dict:
    """Train as python -m ncae_cuda.train does, in this process; the seconds of every epoch and the
    test figures after the last, from its metrics.json. Its --out (checkpoints of up to GBs) is
    a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="ncae-peer-") as out:
        history = flags.run_flags([*argv, "--out", out, "--overwrite"])["history"]
    return {"seconds": [h["seconds"] for h in history],
            "test": {k: v for k, v in history[-1]["test"].items() if k not in ("rows", "entries")}}


@dataclass
class Experiment:
    """The trainer's settings, data and split, and what the peer derives from them as the
    trainer does (ncae_cuda.model.estimator): the objective and the column weights."""
    config: Config
    data: Interactions
    split: object

    @property
    def implicit(self) -> bool:
        return self.config.feedback == "implicit"

    @property
    def n_cols(self) -> int:
        return self.data.n_items if self.config.based == "user" else self.data.n_users

    def oriented(self, part: Interactions) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of the part's entries in the network's rows x columns view."""
        return ((part.users, part.items) if self.config.based == "user"
                else (part.items, part.users))

    def objective(self) -> Objective:
        if self.implicit:
            return Objective.implicit()
        return Objective.explicit(*self.data.rating_scale, self.config.alpha, self.config.beta)

    def col_weights(self, part: Interactions) -> np.ndarray:
        a = self.config
        return column_weights(self.oriented(part)[1], self.n_cols, a.weighting, a.c0, a.omega,
                              a.uniform_c)


def run_torch(exp: Experiment, ops, m, rows: np.ndarray, device: torch.device) -> dict:
    """Train the peer on the trainer's own training matrix m (scipy, rows x N) over `rows`;
    seconds of each epoch and the test figures after the last."""
    config, split = exp.config, exp.split
    torch.manual_seed(config.seed)
    torch.backends.cuda.matmul.allow_tf32 = config.matmul == TF32
    torch.set_num_threads(os.cpu_count())
    csr = DeviceCSR(m, device)
    objective = exp.objective()                          # s, m_off from the rating scale
    col_weights = (torch.as_tensor(exp.col_weights(split.train), device=device)
                   if exp.implicit else None)            # (N,) popularity weights c_j
    model = TorchNCAE(exp.n_cols, config.hidden).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=config.weight_decay)

    seconds = []
    for epoch in range(1, config.epochs + 1):
        synchronize(device)
        start = time.perf_counter()
        loss = train_epoch(model, optimizer, csr, rows, config.dropout, config.batch_size,
                           objective, col_weights)       # float(total) waits for the device
        synchronize(device)
        seconds.append(time.perf_counter() - start)
        print(f"torch epoch {epoch:3d} | loss {loss:.4f} | {seconds[-1]:.2f} s", flush=True)

    all_rows = np.arange(m.shape[0])
    test = (ranking(exp, ops, model, csr, all_rows) if exp.implicit
            else test_rmse(exp, model, csr, all_rows))
    return {"seconds": seconds, "test": test}


@torch.no_grad()
def test_rmse(exp, model: TorchNCAE, csr: DeviceCSR, all_rows: np.ndarray) -> dict:
    """RMSE over the test ratings, each predicted from its row's training entries."""
    objective, held = exp.objective(), exp.split.test
    held_rows, held_cols = (torch.as_tensor(x, dtype=torch.int64, device=csr.device)
                            for x in exp.oriented(held))                 # (test entries,) each
    a = row_outputs(model, csr, all_rows, dense=False)                   # (rows, K_last)
    yhat = (objective.s * torch.tanh(model.entry_logits(a, held_rows, held_cols))
            + objective.m_off)                                           # (test entries,)
    return {"rmse": metrics.rmse(objective.clipped(yhat.cpu().numpy()), held.ratings)}


def ranking(exp, ops, model: TorchNCAE, csr: DeviceCSR, all_rows: np.ndarray) -> dict:
    """HR@M, NDCG@M of each user's held-out item among the items outside train + validation,
    ranked by the peer's logits (as the trainer ranks, through evaluate.heldout_ranks)."""
    split, config = exp.split, exp.config
    if config.based == "user":
        def scores(users):                                               # (B, items)
            return ops.to_device(row_outputs(model, csr, users, dense=True).cpu().numpy())
    else:   # a user's scores are a column of the items x users output: compute it all once
        full = np.ascontiguousarray(row_outputs(model, csr, all_rows, dense=True).cpu().numpy().T)

        def scores(users):                                               # (B, items)
            return ops.to_device(full[users])
    seen = split.fold_validation().train
    exclude = CSR.from_scipy(ops, seen.to_csr("user", implicit=True))
    ranks = heldout_ranks(ops, scores, exclude, split.test.users, split.test.items)
    summary = metrics.ranking_summary(ranks, config.cutoffs)
    summary.pop("rows")
    return summary


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------------------------
# the comparison

def agreement(feedback: str, ncae: dict, peer: dict, n_test: int) -> tuple[bool, str]:
    """Whether the test figures differ by no more than seed noise, and the rule with the
    numbers."""
    if feedback == "explicit":
        a, b = ncae["rmse"], peer["rmse"]
        rel = abs(b - a) / a
        return rel < RMSE_TOLERANCE, (f"RMSE ncae_cuda {a:.4f} vs torch {b:.4f}: relative "
                                      f"difference {rel:.1%} (agree when < {RMSE_TOLERANCE:.0%})")
    agree, parts = True, []
    for key in (k for k in ncae if k.startswith("hr@")):
        a, b = ncae[key], peer[key]
        p = (a + b) / 2
        # standard error of a difference of two independent hit rates over n_test users each:
        # lenient, as the same users make the two correlated
        bound = HR_STANDARD_ERRORS * math.sqrt(2 * p * (1 - p) / n_test)
        agree &= abs(a - b) <= bound
        parts.append(f"{key.upper()} ncae_cuda {a:.4f} vs torch {b:.4f} "
                     f"(|diff| {abs(a - b):.4f}, bound {bound:.4f})")
    return agree, ("; ".join(parts) + f": agree when every |diff| <= {HR_STANDARD_ERRORS} "
                   f"standard errors sqrt(2p(1-p)/n) of a difference of rates, n = {n_test}")


def median_after_first(seconds: list[float]) -> float:
    return statistics.median(seconds[1:] or seconds)


def markdown(result: dict) -> str:
    """peer_torch.md: the settings and floor, then each model trained so far; the ratio and
    the agreement once both are."""
    c, floor, models = result["config"], result["floor"], result["models"]
    rows = [{"model": name, "seconds per epoch": " ".join(f"{s:.3f}" for s in r["seconds"]),
             "median s (2..E)": r["median_seconds"], "x floor": r["floor_multiple"], **r["test"]}
            for name, r in models.items()]
    lines = [
        f"# PyTorch peer: {c['dataset']}, {c['feedback']}, {c['based']}-based, "
        f"hidden {','.join(map(str, c['hidden']))}, {c['epochs']} epochs",
        "",
        f"- **device:** {result['device']} ({c['device']})",
        f"- **commit:** {result['commit']}, **date:** {result['date']}, torch {result['torch']}",
        f"- **data:** {c['data']['rows']} rows x {c['data']['cols']} columns, "
        f"{c['data']['train_entries']} training entries in {c['data']['trainable_rows']} "
        f"rows, {c['data']['test_entries']} test entries",
        f"- **settings:** batch {c['batch_size']}, dropout {c['dropout']}, lr {c['lr']}, "
        f"weight decay {c['weight_decay']}"
        + (f", alpha {c['alpha']}, beta {c['beta']}" if c["feedback"] == "explicit"
           else f", popularity weights c0 {c['c0']}, omega {c['omega']}"),
        f"- **ncae_cuda flags:** `python -m ncae_cuda.train {' '.join(c['trainer_argv'])}`",
        f"- **floor of one epoch:** {floor['seconds']:.4g} s ({floor['bytes'] / 1e9:.3g} GB at "
        f"{floor['bandwidth'] / 1e9:.3g} GB/s, {floor['flops'] / 1e9:.3g} GFLOP at "
        f"{floor['flop_rate'] / 1e9:.3g} GFLOP/s; ncae_cuda.ops.floors)",
    ]
    if "agreement" in result:
        lines += [
            f"- **torch / ncae_cuda:** {result['ratio_torch_over_ncae']:.2f}x the seconds per "
            "epoch (medians of epochs 2..E; evaluation not timed)",
            f"- **test figures {'agree' if result['agreement']['agree'] else 'DIFFER'}:** "
            f"{result['agreement']['detail']}"]
    return "\n".join([*lines, "", metrics.format_table(rows) if rows else ""])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.peer_torch", description=__doc__, allow_abbrev=False,
        epilog="Both models use the trainer's defaults for everything not set here:\n"
               + ", ".join(f"{name.replace('_', ' ')} {getattr(DEFAULTS, name):g}"
                           for name in SHOWN_DEFAULTS) + ".",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="synthetic", choices=datasets.names(),
                   help=f"named data set: {', '.join(datasets.names())} (default %(default)s)",
                   metavar="NAME")
    p.add_argument("--data-dir", type=Path, help="folder with an extracted copy of the data set")
    p.add_argument("--feedback", choices=("explicit", "implicit"),
                   help="default: the data set's own")
    p.add_argument("--based", choices=("user", "item"),
                   help="default: the trainer's (item for explicit, user for implicit)")
    p.add_argument("--hidden", default="500,500",
                   help="hidden widths K1,K2,...: one per hidden layer (default %(default)s)")
    p.add_argument("--epochs", type=cli.count, default=3,
                   help="epochs of each model, 2 or more; the first holds start-up and is left "
                        "out of the median (default %(default)s)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="cpu (default): Numba beside torch's CPU threads; gpu: ncae_cuda's CUDA "
                        "kernels beside torch.cuda")
    p.add_argument("--matmul", choices=MATMULS, default=FLOAT32,
                   help="both models' products: float32 (default), or tf32 (torch's "
                        "allow_tf32: on a GPU's tensor cores; the CPU's torch stays float32)")
    add_quick(p, "a smoke test", QUICK)
    p.add_argument("--out", type=Path, required=True, help="folder for peer_torch.json and .md")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv, QUICK)
    check_timed_epochs(parser, args.epochs)
    check_devices(parser, [args.device])
    argv = trainer_argv(args)
    spec, config = flags.run_spec(flags.build_parser(),            # --out unused by the peer
                            [*argv, "--out", str(args.out)])
    torch_device = torch.device("cuda" if args.device == "gpu" else "cpu")

    ops = get_backend(args.device)                       # the library's metric ops
    # load + make_split, a data set not there refused in its line before --out is made
    exp = Experiment(config, *cli.refused(parser, protocol.prepare, spec, config, ops.name))
    out_folder(parser, args.out)
    with said_when_interrupted(args.out, "peer_torch"):
        m = exp.split.train.to_csr(config.based, implicit=exp.implicit)      # (rows, N) scipy
        if not exp.implicit:                                 # the ratings as the network reads them
            m.data = to_network_scale(m.data.astype(np.float64),
                                      exp.data.rating_scale).astype(np.float32)
        rows = np.flatnonzero(np.diff(m.indptr) > 0)         # rows with an input to encode
        work = epoch_work(m, rows, config.batch_size, config.hidden, config.feedback)
        ceil = ceilings(args.device, args.quick)
        floor = work.floor(ceil, config.matmul == TF32)
        n_test = exp.split.test.nnz
        result = {
            "device": device_name(args.device), "commit": commit(),
            "date": datetime.date.today().isoformat(), "quick": args.quick,
            "torch": torch.__version__,
            "config": {**recorded(spec, config),
                       "device": args.device, "trainer_argv": argv,
                       "data": {"rows": m.shape[0], "cols": m.shape[1], "train_entries": m.nnz,
                                "trainable_rows": len(rows), "test_entries": n_test}},
            "floor": {"seconds": floor, "bytes": work.bytes, "flops": work.flops,
                      "bandwidth": ceil.bandwidth, "flop_rate": ceil.flops,
                      "tf32_flop_rate": ceil.recorded_tf32()},
            "models": {}}
        # written before each model and after both, so that a time limit keeps what was trained
        for name, train in (("ncae_cuda", lambda: run_ncae(argv)),
                            ("torch", lambda: run_torch(exp, ops, m, rows, torch_device))):
            write_results(args.out, "peer_torch", result, markdown(result),
                          (len(result["models"]), 2, "models trained"))
            r = result["models"][name] = train()
            r["median_seconds"] = median_after_first(r["seconds"])
            r["floor_multiple"] = r["median_seconds"] / floor
        ncae, peer = result["models"].values()
        agree, detail = agreement(config.feedback, ncae["test"], peer["test"], n_test)
        result["ratio_torch_over_ncae"] = peer["median_seconds"] / ncae["median_seconds"]
        result["agreement"] = {"agree": bool(agree), "detail": detail}
        text = markdown(result)
        write_results(args.out, "peer_torch", result, text)
        print("\n" + text)
        return 0


if __name__ == "__main__":
    sys.exit(main())
