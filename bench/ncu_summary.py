"""The summary of an Nsight Compute profile: per kernel, its time, DRAM throughput, achieved
occupancy and main stall reasons, from the raw page of a report.

    ncu --import profile.ncu-rep --page raw --csv > profile.csv
    python -m bench.ncu_summary profile.csv > profile.md

Kernels are sorted by their share of the profiled time, so the first rows are the ones an
epoch spends most on. The raw page's first row names the metrics, the second gives their units
(where it is there), then one row per profiled launch.
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from collections import defaultdict
from pathlib import Path

DURATION = "gpu__time_duration.sum"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
REGISTERS = "launch__registers_per_thread"
STALL = re.compile(r"smsp__average_warps?_(?:latency_)?issue_stalled_(\w+?)"
                   r"(?:_per_issue_active)?\.ratio$")
TO_MICROSECONDS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
                   "msecond": 1e3, "s": 1e6, "second": 1e6}
TOP_STALLS = 3


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def summarize(rows: list[dict], units: dict) -> list[dict]:
    """Per kernel name: launches, mean microseconds, share of the profiled time, and the means
    of the other figures over its launches."""
    to_us = TO_MICROSECONDS.get(units.get(DURATION, "ns"), 1e-3)
    launches = defaultdict(list)
    for row in rows:
        launches[row["Kernel Name"].split("(")[0].strip()].append(row)
    total = sum(_number(r.get(DURATION, "")) or 0.0 for r in rows) * to_us
    summary = []
    for kernel, runs in launches.items():
        def mean(metric: str) -> float | None:
            values = [v for v in (_number(r.get(metric, "")) for r in runs) if v is not None]
            return sum(values) / len(values) if values else None
        stalls = {m.group(1): mean(name) for name in runs[0]          # "selected": issuing
                  if (m := STALL.match(name)) and m.group(1) != "selected"
                  and mean(name) is not None}
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:TOP_STALLS]
        us = (mean(DURATION) or 0.0) * to_us
        summary.append({"kernel": kernel, "launches": len(runs), "us": us,
                        "share": us * len(runs) / total if total else 0.0,
                        "dram_pct": mean(DRAM), "occupancy_pct": mean(OCCUPANCY),
                        "registers": mean(REGISTERS), "stalls": top})
    return sorted(summary, key=lambda s: -s["share"])


def read(path: Path) -> tuple[list[dict], dict]:
    """(the launches' rows, the units by metric) of a raw-page CSV; ValueError where the file
    is no raw page (empty, another page's, not ncu's)."""
    try:
        with open(path, newline="") as f:
            table = list(csv.reader(line for line in f if not line.startswith("==")))
    except UnicodeDecodeError:                       # not text: the report itself, say
        table = []
    if not table or not {"ID", "Kernel Name"} <= set(table[0]):
        raise ValueError("not the raw page of an Nsight Compute report (no ID and Kernel Name "
                         "columns): save it with ncu --import REPORT --page raw --csv")
    header, body = table[0], table[1:]
    units = {}
    if body and not body[0][header.index("ID")].strip():          # the units row
        units = dict(zip(header, body[0]))
        body = body[1:]
    return [dict(zip(header, row)) for row in body if len(row) == len(header)], units


def table(summary: list[dict]) -> str:
    def figure(value, pattern: str) -> str:
        return "-" if value is None else pattern.format(value)
    lines = ["| kernel | launches | us each | share of profiled time | DRAM throughput | "
             "achieved occupancy | registers | main stalls (cycles per issued instruction) |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for s in summary:
        stalls = ", ".join(f"{name} {value:.1f}" for name, value in s["stalls"]) or "-"
        lines.append(f"| {s['kernel']} | {s['launches']} | {s['us']:.1f} | {s['share']:.0%} | "
                     f"{figure(s['dram_pct'], '{:.0f}%')} | "
                     f"{figure(s['occupancy_pct'], '{:.0f}%')} | "
                     f"{figure(s['registers'], '{:.0f}')} | {stalls} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("csv", type=Path, help="ncu --import REPORT --page raw --csv, saved")
    args = p.parse_args(argv)
    try:
        rows, units = read(args.csv)
    except OSError as e:                             # none there, a folder, not readable
        p.error(f"{args.csv}: cannot read it ({e.strerror or e})")
    except ValueError as e:
        p.error(f"{args.csv}: {e}")
    if not rows:
        print(f"error: {args.csv} holds no profiled launches", file=sys.stderr)
        return 2
    sys.stdout.write(table(summarize(rows, units)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
