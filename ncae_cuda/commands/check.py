"""The first thing to run on a new machine, and what a bug report should carry: the versions, the
device, the kernels compiled, every op once against the numpy reference, and two training epochs
beside their floor.

    python -m ncae_cuda.check                          # the GPU where there is one, else the CPU
    python -m ncae_cuda.check --device emulated        # the CUDA kernels, run on the CPU (g++)
    python -m ncae_cuda.check --device gpu --json check.json

Every op runs once on ops/conformance.py's cases (a small random shape that holds what is hard
for the kernels), its outputs against ops/reference.py's in float64; a second run must give the
same bits. Exit status 0 when every op passes and training runs, 1 otherwise (a line per
failure says why), 2 for a usage error.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .. import ops
from ..cli import Parser, check_file_to_write, check_seed
from ..ops.conformance import check_op, op_cases
from ..runs.environment import describe, device_facts, versions

# The data set and hidden widths of the two training epochs, on each device: the emulator runs
# the CUDA threads one after another on a CPU thread, too slowly for more than the tiny case.
TRAIN_CASES = {"cpu": ("synthetic", (128,)), "gpu": ("synthetic", (128,)),
               "emulated": ("synthetic-tiny", (16,))}


# ---------------------------------------------------------------------------------------------
# two epochs beside their floor

def train_epochs(backend, device: str, repeats: int = 3) -> dict:
    """Two epochs of the device's TRAIN_CASES (the first warms up), beside the floor of an epoch
    on this device (ncae_cuda/ops/floors.py: the epoch's work over the bandwidth and product rate
    measured here). The emulated device has no floor: its kernels run on the CPU."""
    from ..model.estimator import NCAE
    from ..data import datasets
    from ..ops.floors import epoch_work, measure_ceilings

    name, hidden = TRAIN_CASES[device]
    data = datasets.load(name)
    model = NCAE(device=backend, hidden=hidden)
    model.fit(data, epochs=2, verbose=False)
    c = model.config
    result = {"case": f"{name} ({data.n_users:,} users x {data.n_items:,} items), {c.feedback}, "
                      f"{c.based}-based, hidden {','.join(map(str, hidden))}",
              "seconds": [h["seconds"] for h in model.history]}
    if device != "emulated":
        m = data.to_csr(c.based, implicit=c.implicit)
        work = epoch_work(m, np.flatnonzero(np.diff(m.indptr)), c.batch_size, hidden,
                          c.feedback)
        ceilings = measure_ceilings(backend.xp, device, repeats)
        result.update(floor=work.floor(ceilings), bandwidth_gb_s=ceilings.bandwidth / 1e9,
                      gflop_s=ceilings.flops / 1e9)
    return result


# ---------------------------------------------------------------------------------------------
# the command

def backend_for(device: str, stack: ExitStack):
    """(backend, what making it compiled and how long it took)."""
    start = time.perf_counter()
    if device == "emulated":
        from ..ops.emulator import CXX, emulated_backend
        if CXX is None:
            raise ops.BackendUnavailable("--device emulated needs g++")
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ncae-check-")))
        backend = emulated_backend(folder)
        return backend, ("the kernel module, for the CPU (g++)", time.perf_counter() - start)
    backend = ops.get_backend(device)
    if backend.name == "gpu":
        from ..ops import gpu
        gpu._module(backend.device.device_id)
        return backend, ("the kernel module (NVRTC, or CuPy's cache of it)",
                         time.perf_counter() - start)
    return backend, ("nothing ahead: Numba compiles each op at its first call, or loads it "
                     "from its cache (in the ops' time below)", 0.0)


def run(device: str, seed: int = 0, train: bool = True) -> dict:
    """The whole check on `device`: {versions, device, compile, ops, training, failures}."""
    report = {"versions": versions(), "device": {"backend": device}, "failures": []}
    with ExitStack() as stack:
        try:
            backend, (compiled, seconds) = backend_for(device, stack)
        except (ops.BackendUnavailable, OSError) as e:
            report["failures"].append(f"{device}: {e}")
            return report
        name = "emulated" if device == "emulated" else backend.name
        report["device"] = {"backend": name, **device_facts(name)}
        report["compile"] = {"what": compiled, "seconds": seconds}
        with backend.session():
            start = time.perf_counter()
            results = [check_op(case) for case in op_cases(backend, seed)]
            report["ops_seconds"] = time.perf_counter() - start
        report["ops"] = [asdict(r) for r in results]
        report["failures"] += [f"{r.op}: {r.reason}" for r in results if not r.passed]
        if train:
            try:
                report["training"] = train_epochs(backend, name)
            except Exception as e:
                report["failures"].append(f"training: {type(e).__name__}: {e}")
    return report


def format_report(report: dict) -> str:
    v = report["versions"]
    lines = [" | ".join(f"{k} {'not installed' if x is None else x}" for k, x in v.items())]
    d = report["device"]
    if "name" in d:
        lines.append(f"device: {d['backend']}: {describe(d['backend'], d)}")
        lines.append(f"compiled: {report['compile']['what']}, "
                     f"{report['compile']['seconds']:.2f} s")
    if "ops" in report:
        lines += ["", f"{'op':24}{'error':>12}{'tolerance':>12}  result"]
        for r in report["ops"]:
            exact = r["tolerance"] == 0
            error = (f"{r['error']:.0f} differ" if exact and np.isfinite(r["error"])
                     else f"{r['error']:.2e}")
            tolerance = "exact" if exact else f"{r['tolerance']:.0e}"
            lines.append(f"{r['op']:24}{error:>12}{tolerance:>12}  "
                         f"{'ok' if r['passed'] else 'FAILED'}")
        lines.append(f"(every op twice: {report['ops_seconds']:.2f} s)")
    t = report.get("training")
    if t:
        # milliseconds to three figures: a tiny case's epoch on a GPU is a few of them
        epochs = ", ".join(f"epoch {i} {s * 1e3:.3g} ms" for i, s in enumerate(t["seconds"], 1))
        lines += ["", f"training: {t['case']}: {epochs} (the first warms up)"]
        if "floor" in t:
            lines.append(f"floor of an epoch here: {t['floor'] * 1e3:.3g} ms (epoch 2 is "
                         f"{t['seconds'][-1] / t['floor']:.1f}x), from {t['bandwidth_gb_s']:.0f} "
                         f"GB/s and {t['gflop_s']:.0f} GFLOP/s measured here "
                         "(ncae_cuda/ops/floors.py)")
    lines.append("")
    if report["failures"]:
        lines += [f"FAILED: {f}" for f in report["failures"]]
    else:
        trained = "training runs" if "training" in report else "training not run (--no-train)"
        lines.append(f"all {len(report['ops'])} ops agree with the reference; {trained}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = Parser(
        prog="python -m ncae_cuda.check",
        description="Check this machine: versions, the device, the kernels compiled, every op "
                    "against the numpy reference, two training epochs beside their floor. "
                    "Exit status 0 when all pass, 1 otherwise.")
    p.add_argument("--device", choices=("auto", "cpu", "gpu", "emulated"), default="auto",
                   help="the backend to check: auto (the GPU where there is one), cpu (Numba), "
                        "gpu (CUDA), emulated (the CUDA kernels run on the CPU by g++) "
                        "(default: %(default)s)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs, >= 0 "
                                                      "(default: %(default)s)")
    p.add_argument("--no-train", action="store_true", help="check the ops only")
    args = p.parse_args(argv)
    check_seed(p, args.seed)
    check_file_to_write(p, "--json", args.json, "JSON")     # now, not after minutes of checks
    device = ("gpu" if ops.HAS_CUDA else "cpu") if args.device == "auto" else args.device
    report = run(device, args.seed, train=not args.no_train)
    print(format_report(report), flush=True)
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(report, indent=2, default=float) + "\n")
        except OSError as e:
            print(f"error: cannot write {args.json}: {e.strerror}", file=sys.stderr)
            return 2
    return 1 if report["failures"] else 0
