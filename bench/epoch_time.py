"""Seconds per training epoch on the paper's benchmark shapes, for each device given, measured
through the trainer itself (python -m ncae_cuda.train) on synthetic data of those shapes.
Devices: cpu, gpu (each step's kernels launched), gpu-graphs (each step replayed from a captured
CUDA graph: --cuda-graphs on).

    python -m bench.epoch_time --devices cpu,gpu,gpu-graphs --out bench/results/run   # full shapes
    python -m bench.epoch_time --devices cpu --quick --out /tmp/t          # a smoke test

Writes epoch_time.json and epoch_time.md under --out: device names, commit, date, whether
--quick's tiny data and width ran in place of the shapes (bench.report leaves such a run out),
and per case the seconds of each training epoch and their median after the first (which holds
start-up: the GPU's kernel compilation and warm-up), beside the epoch's floor on that device
(ncae_cuda/ops/floors.py: the case's work over the memory bandwidth and matrix-product rate
measured there first) and the multiple of it, and the run's wall time (data, compilation,
epochs, test and checkpoint: what a time limit has to hold). Both files are written again after
every run, so a run stopped by a time limit keeps the runs it finished. A run that fails is said,
kept as failed (its error in the JSON) and the runs after it go on; the exit status is then 1.
The runs' own outputs (checkpoints of up to a few GB) go to a temporary folder, removed at the
end.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.cli import (check_devices, check_timed_epochs, names, out_folder, said_when_interrupted,
                       write_results)
from ncae_cuda import ops
from ncae_cuda.commands.flags import build_parser, run_flags, run_spec
from ncae_cuda.errors import NcaeError
from ncae_cuda.model.config import TF32
from ncae_cuda.ops.floors import (Ceilings, Work, epoch_work, measure_ceilings, op_work,
                                   tf32_said)
from ncae_cuda.ops.layout import NCAELayout
from ncae_cuda.runs import protocol
from ncae_cuda.runs.environment import device_facts

CASES = {
    "ml10m": ("synthetic-ml10m: explicit, item-based, hidden 500,500",
              ["--dataset", "synthetic-ml10m", "--feedback", "explicit", "--based", "item",
               "--hidden", "500,500", "--valid-ratio", "0"]),
    "lastfm": ("synthetic-lastfm: implicit, user-based, hidden 128",
               ["--dataset", "synthetic-lastfm", "--feedback", "implicit", "--based", "user",
                "--hidden", "128", "--patience", "0", "--no-refit"]),
    "delicious": ("synthetic-delicious: implicit, user-based, hidden 128",
                  ["--dataset", "synthetic-delicious", "--feedback", "implicit", "--based",
                   "user", "--hidden", "128", "--patience", "0", "--no-refit"]),
    # NVIDIA's VAE-CF figures (DeepLearningExamples: Mult-VAE, 600 hidden units, on ML-20M as it
    # trains there) are users/s: the same shape and width, without NCAE+'s extra rows, so that
    # a row trained is a user
    "ml20m": ("synthetic-ml20m: implicit, user-based, hidden 600, NCAE (VAE-CF's shape)",
              ML20M := ["--dataset", "synthetic-ml20m", "--feedback", "implicit", "--based",
                        "user", "--variant", "NCAE", "--hidden", "600", "--patience", "0",
                        "--no-refit"]),
    # the same at 1,024 users a step, where the epoch's floor is the dense output layer's
    # FLOPs rather than Adam's pass over every parameter once a step (python -m bench.floors);
    # VAE-CF's figures are at 24,576 a step
    "ml20m-batch1024": ("synthetic-ml20m as above, 1,024 users a step",
                        ML20M_1024 := [*ML20M, "--batch-size", "1024"]),
    # and the same with its products on TF32 tensor cores (--matmul tf32)
    "ml20m-tf32": ("synthetic-ml20m as above, 1,024 users a step, products on TF32",
                   [*ML20M_1024, "--matmul", "tf32"]),
}
DEVICE_FLAGS = {"cpu": ["--device", "cpu"], "gpu": ["--device", "gpu", "--cuda-graphs", "off"],
                "gpu-graphs": ["--device", "gpu", "--cuda-graphs", "on"]}
EPOCHS = {"cpu": 2, "gpu": 3, "gpu-graphs": 3}     # a run's epochs where --epochs is not given
QUICK = ["--dataset", "synthetic-tiny", "--hidden", "16"]


def add_case_flags(p: argparse.ArgumentParser) -> None:
    """--cases (each named once: a case twice would run, or be counted, twice) and --quick, as
    every bench over these cases takes them."""
    p.add_argument("--cases", type=names(CASES), default=",".join(CASES),
                   help=f"comma-separated, of: {', '.join(CASES)} (default: all)")
    p.add_argument("--quick", action="store_true", help="tiny data instead of the full shapes")


def case_flags(case: str, quick: bool = False) -> tuple[str, list[str]]:
    """A case's title and the trainer's flags for it; with quick, --quick's tiny data and width
    in place of its own, and a title that says what ran (the case's shape never did)."""
    title, flags = CASES[case]
    if quick:
        return f"quick: {case}'s flags with {' '.join(QUICK)}", [*flags, *QUICK]
    return title, flags


def quick_note(result: dict) -> list[str]:
    """A quick run's markdown opens with this line: its figures are tiny data's, not the
    shapes'."""
    if not result.get("quick"):
        return []
    return [f"--quick: every case ran with {' '.join(QUICK)}, not at its own shape: a smoke "
            "test's figures, no case's", ""]


def device_name(device: str) -> str:
    if device.startswith("gpu"):
        return device_facts("gpu")["name"] + (", CUDA graphs" if device == "gpu-graphs" else "")
    facts = device_facts("cpu")
    return f"{facts['name']}, {facts['cores']} cores"


def machine() -> str:
    """The machine of a bench whose models train where the trainer's --device auto puts them
    (the baselines on the CPU): its CPU, and its GPU where there is one."""
    cpu = device_name("cpu")
    return f"{cpu}; GPU {device_name('gpu')}" if ops.HAS_CUDA else cpu


def provenance(where: str) -> dict:
    """What a bench's results say of where and when they were measured: the commit, the date
    and `where` (the machine, as device_name or machine give it)."""
    return {"commit": commit(), "date": datetime.date.today().isoformat(), "machine": where}


def provenance_line(result: dict) -> str:
    """provenance's figures of `result` as a line of its markdown."""
    return f"commit {result['commit']}, {result['date']}; {result['machine']}"


def ceilings(device: str, quick: bool = False) -> Ceilings:
    """The device's memory bandwidth and product rates (float32, and the backend's gemm on
    TF32), measured on it once (seconds to measure; a benchmark's --quick: once, small, in
    tenths): gpu-graphs is the same card as gpu."""
    return _measured("gpu" if device.startswith("gpu") else device, 1 if quick else 5, quick)


@functools.cache
def _measured(device: str, repeats: int, small: bool) -> Ceilings:
    backend, name = ops.get_backend(device), device_name(device)
    try:
        return measure_ceilings(backend.xp, name, repeats, small,
                                lambda out, a, b: backend.gemm(out, a, b, tf32=True))
    except Exception as e:
        # the TF32 product is the newest path and the last measured: where it fails (a GPU's
        # first run of it), the other ceilings are measured again without it, and every case
        # but the TF32 one keeps its floor; a failure of theirs is raised by the second try
        print(f"note: on {name} the product on TF32 failed ({type(e).__name__}: {e}): its "
              "rate is left unmeasured", file=sys.stderr, flush=True)
        return measure_ceilings(backend.xp, name, repeats, small)


@dataclass(frozen=True)
class EpochCount:
    """One training epoch of a case, counted (ncae_cuda/ops/floors.py) without running it."""
    work: Work                  # the epoch's bytes and FLOPs
    rows: int                   # rows it trains
    batch: int                  # rows a step
    steps: int
    dense_flops: float          # implicit: the dense output layer's three products, else 0
    adam_bytes: float           # Adam's share of work.bytes: every parameter, once a step
    tf32: bool                  # the step's products on TF32 (--matmul tf32)

    def floor(self, ceilings: Ceilings) -> float:
        return self.work.floor(ceilings, self.tf32)


def epoch_work_of(flags: list[str]) -> EpochCount:
    """The count of one training epoch of the case over the training matrix the trainer builds
    from these flags (implicit augmentation's extra rows left out, which keeps the floor a
    lower bound); for implicit feedback with the FLOPs of the dense output layer's three
    products (out = a V^T, dV, da) over the epoch's padded batches."""
    spec, config = run_spec(build_parser(), [*flags, "--out", os.devnull])
    with contextlib.redirect_stdout(io.StringIO()):
        _, split = protocol.prepare(spec, config, "")
    m = split.train.to_csr(config.based, implicit=config.implicit)
    rows = np.flatnonzero(np.diff(m.indptr))
    batch = min(config.batch_size, len(rows))                # a batch is at most the rows
    steps = -(-len(rows) // batch)
    dense = 6.0 * steps * batch * m.shape[1] * config.hidden[-1] if config.implicit else 0.0
    adam = steps * op_work("adam", P=NCAELayout(m.shape[1], config.hidden).size).bytes
    return EpochCount(epoch_work(m, rows, batch, config.hidden, config.feedback), len(rows),
                      batch, steps, dense, adam, config.matmul == TF32)


SHORT_ID = 7                # hex digits of a commit id as results give it (git's --short)
CHECKOUT = Path(__file__).parent                # where git is asked: the code measured


def commit() -> str:
    """The commit measured, as short_id gives it: from $COMMIT where it is set (a GPU machine's
    copy of the tree has no .git), else from git, marked "+dirty" where tracked files differ
    from it; "unknown" where neither tells."""
    if os.environ.get("COMMIT"):
        return short_id(os.environ["COMMIT"])

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              cwd=CHECKOUT).stdout.strip()
    try:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return short_id(git("rev-parse", "HEAD") + ("+dirty" if dirty else ""))
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def short_id(commit: str) -> str:
    """A commit id cut to SHORT_ID hex digits, a "+dirty" after it kept: one form for ids given
    whole ($COMMIT, the results of GPU runs) and ids git shortened."""
    head, plus, mark = commit.partition("+")
    return head[:SHORT_ID] + plus + mark


def case_table(result: dict, unit: str, fmt) -> list[str]:
    """A row per case, a column per device headed by its name and `unit`, each cell fmt(the
    case's figures on that device), "failed" where the run failed (its error in the JSON), or
    a dash where the run never came (a time limit stopped the command first)."""
    devices = list(result["devices"])

    def cell(case: dict, device: str) -> str:
        if device not in case:
            return "-"
        return "failed" if "error" in case[device] else fmt(case[device])
    return ["| case | " + " | ".join(f"{d}{unit}" for d in devices) + " |",
            "|---|" + "---:|" * len(devices)] + [
        f"| {case['title']} | " + " | ".join(cell(case, d) for d in devices) + " |"
        for case in result["cases"].values()]


def seconds_table(result: dict) -> list[str]:
    """Seconds per epoch, and the multiple of the floor on that device: a row per case."""
    return case_table(result, " s/epoch",
                      lambda t: f"{t['median_after_first']:.3g} ({t['x_floor']:.1f}x)")


def markdown(result: dict) -> list[str]:
    """epoch_time.md's lines: devices and ceilings, then seconds per epoch and rows/s."""
    lines = [*quick_note(result), f"commit {result['commit']}, {result['date']}"]
    lines += [f"- {d}: {name}" for d, name in result["devices"].items()]
    lines += [f"- {d} ceilings: memory {c['bandwidth_gb_s']:.1f} GB/s, float32 product "
              f"{c['gflop_s']:.0f} GFLOP/s, {tf32_said(c['tf32_gflop_s'])}"
              for d, c in result["ceilings"].items()]
    lines += ["", "s/epoch (x the floor on that device; -: not run; failed: its error is in "
              "epoch_time.json)", "",
              *seconds_table(result),
              "", "training rows (users, where user-based) a second, and the dense output "
              "layer's TFLOP/s (implicit)", "",
              *case_table(result, "", lambda t: f"{t['rows_per_s']:,.0f} "
                                                f"({t['dense_output_tflop_s']:.3g})")]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=names(DEVICE_FLAGS), default="cpu,gpu",
                   help=f"comma-separated, of: {', '.join(DEVICE_FLAGS)} (default: %(default)s)")
    p.add_argument("--epochs", type=int,
                   help="epochs per run, 2 or more, the first being start-up (default: "
                        + ", ".join(f"{n} on {d}" for d, n in EPOCHS.items()) + ")")
    add_case_flags(p)
    p.add_argument("--out", type=Path, required=True, help="folder for epoch_time.json and .md")
    args = p.parse_args(argv)
    devices, cases = args.devices, args.cases
    check_timed_epochs(p, args.epochs)        # the figure: the median of those after the first
    check_devices(p, {"gpu" if d.startswith("gpu") else d for d in devices})
    out_folder(p, args.out)
    with said_when_interrupted(args.out, "epoch_time"):
        result = {"commit": commit(), "date": datetime.date.today().isoformat(),
                  "quick": args.quick, "devices": {d: device_name(d) for d in devices},
                  "cases": {}}
        measured = {d: ceilings(d, args.quick) for d in devices}
        result["ceilings"] = {d: {"bandwidth_gb_s": c.bandwidth / 1e9, "gflop_s": c.flops / 1e9,
                                  "tf32_gflop_s": c.recorded_tf32(1e9)}
                              for d, c in measured.items()}
        planned, done, failed = len(cases) * len(devices), 0, []

        def save():
            write_results(args.out, "epoch_time", result, "\n".join(markdown(result)),
                          (done, planned, "runs measured"))

        save()                                  # the devices and their ceilings, before any run
        with tempfile.TemporaryDirectory(prefix="ncae-epoch-time-") as runs:
            for case in cases:
                title, flags = case_flags(case, args.quick)
                count = epoch_work_of(flags)                    # counted once, floored per device
                for device in devices:
                    run_dir = Path(runs) / f"{case}-{device}"
                    start = time.perf_counter()
                    result["cases"].setdefault(case, {"title": title, "rows": count.rows})
                    done += 1
                    try:
                        history = run_flags([
                            *flags, *DEVICE_FLAGS[device], "--epochs",
                            str(args.epochs or EPOCHS[device]), "--out", str(run_dir)])["history"]
                    except Exception as e:
                        # a run that fails (out of memory, a kernel's error on a GPU's first run of
                        # it) is said and kept, and the runs after it go on: a device's window
                        # loses that run alone
                        failed.append(f"{case} on {device}")
                        if not isinstance(e, NcaeError):             # a bug: its traceback too
                            traceback.print_exc()
                        print(f"error: {failed[-1]}: {type(e).__name__}: {e}", file=sys.stderr,
                              flush=True)
                        result["cases"][case][device] = {
                            "error": f"{type(e).__name__}: {e}",
                            "wall_seconds": time.perf_counter() - start}
                        save()
                        continue
                    seconds = [h["seconds"] for h in history if h["phase"] == "select"]
                    median = statistics.median(seconds[1:] or seconds)
                    floor = count.floor(measured[device])
                    timed = {"seconds": seconds, "median_after_first": median, "floor": floor,
                             "x_floor": median / floor, "rows_per_s": count.rows / median,
                             "dense_output_tflop_s": count.dense_flops / median / 1e12,
                             "wall_seconds": time.perf_counter() - start}
                    result["cases"][case][device] = timed
                    print(f"{case} on {device}: {median:.4g} s an epoch ({median / floor:.1f}x the "
                          f"floor), the run {timed['wall_seconds']:.1f} s in all", flush=True)
                    save()
        print("\n".join(markdown(result)))
        if failed:
            print(f"error: {len(failed)} of {planned} runs failed: {', '.join(failed)}",
                  file=sys.stderr)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
