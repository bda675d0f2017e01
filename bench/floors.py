"""The floors of bench.epoch_time's cases on a device measured before, counted without it: each
epoch's bytes and FLOPs (ncae_cuda/ops/floors.py) over the ceilings a GPU session recorded (its
peer_torch.json or epoch_time.json), at each batch size given. It says what that device could at
best do, to set beside what it did and beside a target: a count over a measured ceiling, not a
measured time.

    python -m bench.floors \\
        --ceilings bench/results/2026-11-28-h200-gpu-check/peer-ml10m/peer_torch.json \\
        --cases ml10m,ml20m --batch-sizes 128,1024,24576 --out bench/results/run
    python -m bench.floors --ceilings FILE --quick --out /tmp/f      # a smoke test

Writes floors.json and floors.md under --out: where the ceilings came from, and per case and
batch size the epoch's steps, bytes (Adam's share beside them), FLOPs, floor, which of the two
sets it, and the rows a second that the floor allows.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from bench.cli import integers, out_folder, said_when_interrupted, write_results
from bench.epoch_time import add_case_flags, case_flags, commit, epoch_work_of, quick_note, short_id
from ncae_cuda.ops.floors import Ceilings, tf32_rate, tf32_said


def recorded_ceilings(path: Path) -> tuple[Ceilings, dict]:
    """The ceilings a benchmark measured on its device, and its commit, date and whether it
    was a --quick run (its ceilings a smoke test's): from bench.peer_torch's JSON (one device)
    or bench.epoch_time's (its first GPU device)."""
    result = json.loads(path.read_text())
    if "floor" in result:                                       # peer_torch.json
        floor = result["floor"]
        ceilings = Ceilings(result["device"], floor["bandwidth"], floor["flop_rate"],
                            tf32_rate(floor.get("tf32_flop_rate")))
    elif "ceilings" in result:                                  # epoch_time.json
        gpus = [d for d in result["ceilings"] if d.startswith("gpu")]
        device = (gpus or list(result["ceilings"]))[0]
        measured = result["ceilings"][device]
        ceilings = Ceilings(result["devices"][device], measured["bandwidth_gb_s"] * 1e9,
                            measured["gflop_s"] * 1e9,
                            tf32_rate(measured.get("tf32_gflop_s"), 1e9))
    else:
        raise ValueError("neither bench.peer_torch's nor bench.epoch_time's JSON")
    return ceilings, {"commit": result["commit"], "date": result["date"],
                      "quick": bool(result.get("quick"))}


def table(result: dict) -> list[str]:
    """floors.json's result as a line saying where the ceilings came from (after a quick run's
    note), then a table."""
    c = result["ceilings"]
    return [*quick_note(result),
            f"Epochs counted at commit {short_id(result['commit'])} ({result['date']}), not "
            f"timed, over the ceilings measured on {c['device']} (commit "
            f"{short_id(c['commit'])}, {c['date']}: "
            f"{c['bandwidth_gb_s']:,.0f} GB/s, {c['gflop_s']:,.0f} GFLOP/s float32, "
            f"{tf32_said(c.get('tf32_gflop_s'))}; "
            f"{c['source']}).", "",
            "| case | rows a step | steps | GB (Adam's) | TFLOP | floor s | set by | rows/s at "
            "the floor |", "|---|---:|---:|---:|---:|---:|---|---:|",
            *(f"| {r['title']} | {r['batch_size']} | {r['steps']} | {r['gb']:.3g} "
              f"({r['adam_gb']:.3g}) | {r['tflop']:.3g} | {r['floor_s']:.3g} | {r['set_by']} | "
              f"{r['rows_per_s']:,.0f} |" for r in result["floors"])]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--ceilings", type=Path, required=True,
                   help="a peer_torch.json or epoch_time.json from a run on the device (a "
                        "--quick run's only with --quick)")
    add_case_flags(p)
    p.add_argument("--batch-sizes", type=integers(1), default=[],
                   help="comma-separated rows a step to count each case at (default: each "
                        "case's own)")
    p.add_argument("--out", type=Path, required=True, help="folder for floors.json and .md")
    args = p.parse_args(argv)
    batch_sizes = args.batch_sizes or [None]                     # None: each case's own
    try:
        ceilings, source = recorded_ceilings(args.ceilings)
    except (OSError, ValueError, KeyError, TypeError) as e:
        p.error(f"--ceilings {args.ceilings}: cannot read ceilings from it "
                f"({type(e).__name__}: {e})")
    if source.pop("quick") and not args.quick:
        # small arrays measured once, in tenths of a second: figures a cache flatters
        p.error(f"--ceilings {args.ceilings}: a --quick run's ceilings, a smoke test's: give a "
                "full run's, or count with --quick")
    out_folder(p, args.out)
    with said_when_interrupted(args.out, "floors"):
        floors = []
        for case in args.cases:
            title, flags = case_flags(case, args.quick)
            for batch in batch_sizes:
                count = epoch_work_of([*flags, *(["--batch-size", str(batch)] if batch else [])])
                floor = count.floor(ceilings)
                memory = count.work.bytes / ceilings.bandwidth
                floors.append({
                    "case": case, "title": title, "batch_size": count.batch,
                    "steps": count.steps, "gb": count.work.bytes / 1e9,
                    "adam_gb": count.adam_bytes / 1e9, "tflop": count.work.flops / 1e12,
                    "floor_s": floor, "set_by": "bytes" if floor == memory else "FLOPs",
                    "rows": count.rows, "rows_per_s": count.rows / floor})
        result = {"ceilings": {"source": str(args.ceilings), "device": ceilings.device,
                               "bandwidth_gb_s": ceilings.bandwidth / 1e9,
                               "gflop_s": ceilings.flops / 1e9,
                               "tf32_gflop_s": ceilings.recorded_tf32(1e9),
                               **source},
                  "commit": commit(), "date": datetime.date.today().isoformat(),
                  "quick": args.quick, "floors": floors}
        text = "\n".join(table(result))
        write_results(args.out, "floors", result, text)
        print(text)
        return 0


if __name__ == "__main__":
    sys.exit(main())
