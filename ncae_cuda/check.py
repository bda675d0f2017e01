"""The first thing to run on a new machine, and what a bug report should carry: the versions, the
device, the kernels compiled, every op once against the numpy reference, and two training epochs
beside their floor.

    python -m ncae_cuda.check                          # the GPU where there is one, else the CPU
    python -m ncae_cuda.check --device emulated        # the CUDA kernels, run on the CPU (g++)
    python -m ncae_cuda.check --device gpu --json check.json

Every op runs at one small random shape that holds what is hard for the kernels: a row of LONG
entries among short and empty rows (its sums are shared by many windows on the GPU), padding
rows, and a width K that is not a multiple of 4 and spans two warps' slabs. Its outputs are
compared with ops/reference.py's, run in float64 on the same inputs: integer outputs exactly,
float ones within TOLERANCE of the largest expected value. A second run must give the same bits.
Exit status 0 when every op passes and training runs, 1 otherwise (a line per failure says why),
2 for a usage error.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse as sp

from . import __version__, ops
from .cli import Parser
from .ops import reference as ref
from .ops.common import adam_state

TOLERANCE = 2e-5      # float32 against float64: a few ulps of accumulated rounding, relative to
                      # the largest expected value (or 1, where all are smaller)
LONG, SHORT, N, K = 2_000, 40, 2_500, 133     # the long row among SHORT rows of 1..20 entries;
                                              # columns; width: 133 = 128 + 5, two slabs
BATCH = 48            # the batch holds every row, and padding
# The data set and hidden widths of the two training epochs, on each device: the emulator runs
# every CUDA thread as a CPU thread, too slowly for more than the tiny case.
TRAIN_CASES = {"cpu": ("synthetic", (128,)), "gpu": ("synthetic", (128,)),
               "emulated": ("synthetic-tiny", (16,))}


# ---------------------------------------------------------------------------------------------
# versions and the device

def versions() -> dict:
    """The versions a bug report needs: the package's, its libraries', CUDA's where CuPy is."""
    import numba
    import scipy
    found = {"ncae_cuda": __version__, "python": platform.python_version(),
             "numpy": np.__version__, "scipy": scipy.__version__, "numba": numba.__version__}
    try:
        import cupy
    except ImportError:
        return {**found, "cupy": None}
    found["cupy"] = cupy.__version__
    for name, ask in (("cuda_driver", cupy.cuda.runtime.driverGetVersion),
                      ("cuda_runtime", cupy.cuda.runtime.runtimeGetVersion),
                      ("nvrtc", lambda: 1000 * cupy.cuda.nvrtc.getVersion()[0]
                       + 10 * cupy.cuda.nvrtc.getVersion()[1])):
        try:
            v = ask()
            found[name] = f"{v // 1000}.{v % 1000 // 10}"
        except Exception as e:          # no driver: CuPy raises its own runtime errors
            found[name] = f"unknown ({e})"
    return found


def device_facts(device: str) -> dict:
    """What the backend runs on: a GPU's name, memory, compute capability and SM count; the
    CPU's model, cores and memory (the emulated GPU's kernels run on the CPU)."""
    if device == "gpu":
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
        return {"name": props["name"].decode(), "memory_gib": props["totalGlobalMem"] / 2**30,
                "compute_capability": f"{props['major']}.{props['minor']}",
                "sms": props["multiProcessorCount"]}
    model = platform.processor()
    if Path("/proc/cpuinfo").exists():
        model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                      if line.startswith("model name")), model)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"name": model, "cores": os.cpu_count(), "memory_gib": memory}


def describe(device: str, facts: dict) -> str:
    if device == "gpu":
        return (f"{facts['name']}, {facts['memory_gib']:.1f} GiB, compute capability "
                f"{facts['compute_capability']}, {facts['sms']} SMs")
    where = "the CUDA kernels emulated on " if device == "emulated" else ""
    return f"{where}{facts['name']}, {facts['cores']} cores, {facts['memory_gib']:.1f} GiB"


# ---------------------------------------------------------------------------------------------
# the ops against the reference

@dataclass
class OpCase:
    """One op at the check's shape: run() puts fresh copies of the inputs on the device, runs
    the backend's op and returns its outputs on the host; `expected` holds the reference's."""
    op: str
    run: Callable[[], dict]
    expected: dict
    exact: bool = False   # every output must be equal: the op copies, counts or selects


@dataclass
class OpResult:
    op: str
    error: float          # exact outputs: elements that differ; float ones: the largest error
                          # relative to the largest expected value
    tolerance: float
    passed: bool
    reason: str = ""      # why not, in one line


def long_row_matrix(rng, n_cols: int, long: int, short: int) -> sp.csr_matrix:
    """One row of `long` entries among `short` rows of 1..20 and three empty rows, shuffled;
    ratings 1..5."""
    lengths = np.concatenate([[long], rng.integers(1, 21, short), [0, 0, 0]])
    rng.shuffle(lengths)
    cols = [np.sort(rng.choice(n_cols, n, replace=False)) for n in lengths]
    return sp.csr_matrix((rng.integers(1, 6, lengths.sum()).astype(np.float32),
                          np.concatenate(cols), np.concatenate([[0], np.cumsum(lengths)])),
                         shape=(len(lengths), n_cols))


def compare(actual: np.ndarray, expected: np.ndarray, exact: bool) -> tuple[float, float, str]:
    """(error, tolerance, where the worst is) of one output: exact and integer outputs must be
    equal, float ones within TOLERANCE of the largest expected value; equal values (infinities
    and NaN too) differ by nothing."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return np.inf, 0.0, f"shape {actual.shape}, expected {expected.shape}"
    same = (actual == expected) | (np.isnan(actual) & np.isnan(expected)
                                   if expected.dtype.kind == "f" else False)
    if exact or expected.dtype.kind != "f":
        wrong = np.flatnonzero(~same.ravel())
        where = "" if not len(wrong) else (
            f"{len(wrong)} of {same.size} differ, first at {_index(wrong[0], same.shape)}: "
            f"{actual.ravel()[wrong[0]]} vs {expected.ravel()[wrong[0]]}")
        return float(len(wrong)), 0.0, where
    finite = expected[np.isfinite(expected)]
    scale = max(np.abs(finite).max(initial=0.0), 1.0)
    diff = np.where(same, 0.0, np.abs(actual.astype(np.float64) - expected))
    diff[np.isnan(diff)] = np.inf                  # NaN (or an infinity) where none belongs
    worst = _index(np.argmax(diff), diff.shape) if diff.size else ()
    error = float(diff.max(initial=0.0)) / scale
    return error, TOLERANCE, (f"at {worst}: {actual[worst]:.6g} vs {expected[worst]:.6g}"
                              if diff.size else "")


def _index(flat: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def check_op(case: OpCase) -> OpResult:
    """Run the case twice; its outputs against the reference's, and the second run's bits
    against the first's."""
    try:
        first, second = case.run(), case.run()
    except Exception as e:
        return OpResult(case.op, np.inf, 0.0, False, f"raised {type(e).__name__}: {e}")
    worst = OpResult(case.op, 0.0, 0.0, True)
    for name, expected in case.expected.items():
        error, tolerance, where = compare(first[name], expected, case.exact)
        if error > tolerance:
            return OpResult(case.op, error, tolerance, False,
                            f"{name}: error {error:.3g} over the tolerance {tolerance:.3g} "
                            f"({where})")
        if error / (tolerance or 1) >= worst.error / (worst.tolerance or 1):
            worst = OpResult(case.op, error, tolerance, True)
        if not np.array_equal(first[name], second[name], equal_nan=True):
            changed = int((np.asarray(first[name]) != np.asarray(second[name])).sum())
            return OpResult(case.op, error, tolerance, False,
                            f"{name}: not bit-identical on a rerun ({changed} elements differ)")
    return worst


def op_cases(backend, seed: int = 0) -> list[OpCase]:
    """Every op of the backend at the check's shape, its reference result beside it."""
    from .layout import NCAELayout
    from .loop import trainable_rows
    from .memory import StepMemory
    from .ops.common import CSR
    from .plan import Planner, Schedule

    rng = np.random.default_rng(seed)
    m = long_row_matrix(rng, N, LONG, SHORT)
    h = lambda x: np.asarray(backend.to_host(x))                          # noqa: E731
    d = backend.to_device

    def step_of(ops):
        """The first training step of an epoch over every non-empty row, cut by `ops`."""
        csr = CSR.from_scipy(ops, m)
        planner = Planner(csr, trainable_rows(csr), Schedule(seed, BATCH, 0.5))
        memory = StepMemory(ops, NCAELayout(N, (K,)), "explicit", planner.geometry)
        plan = planner.plan(1)

        def cut():
            ops.load_plan(memory, plan)
            return ops.cut_batch(memory, csr, plan, 0)
        return csr, cut

    csr, cut = step_of(backend)
    ref_csr, ref_cut = step_of(ref)
    fields = ref.Batch._fields[:-1]                       # the windows are the GPU's own
    hb = ref_cut()
    batch = cut()
    h64 = hb._replace(vals=hb.vals.astype(np.float64))
    B, nnz = len(hb.row_weight), len(hb.cols)

    def normal(*shape, sd=0.3):
        return rng.normal(0, sd, shape).astype(np.float32)

    def f64(*arrays):
        return [a.astype(np.float64) for a in arrays]

    cases = [OpCase("cut_batch", lambda: {f: h(getattr(cut(), f)) for f in fields},
                    {f: getattr(hb, f) for f in fields}, exact=True)]

    rows = rng.choice(m.shape[0], 20, replace=False).astype(np.int32)
    expect_rows = ref.cut_rows(ref_csr, rows)
    cases.append(OpCase("cut_rows", lambda: {
        f: h(getattr(backend.cut_rows(csr, rows), f)) for f in fields if f != "col_order"},
        {f: getattr(expect_rows, f) for f in fields if f != "col_order"}, exact=True))

    ids = rng.permutation(5_000).astype(np.int32)
    keep = np.empty(len(ids), np.uint8)
    ref.dropout_keep(keep, ids, seed, 3, 0.3)

    def dropout():
        out = d(np.full(len(ids), 9, np.uint8))
        backend.dropout_keep(out, d(ids), seed, 3, 0.3)
        return {"keep": h(out)}
    cases.append(OpCase("dropout_keep", dropout, {"keep": keep}, exact=True))

    E, b1 = normal(N, K), normal(K)
    a1 = np.empty((B, K))
    ref.gather_forward(a1, h64, *f64(E, b1), 2.0)

    def gather():
        out = d(np.full((B, K), np.nan, np.float32))
        backend.gather_forward(out, batch, d(E), d(b1), 2.0)
        return {"a1": h(out)}
    cases.append(OpCase("gather_forward", gather, {"a1": a1}))

    dpre1, dE0 = normal(B, K, sd=1.0), normal(N, K, sd=1.0)
    dE = dE0.astype(np.float64)
    ref.scatter_backward(dE, dpre1.astype(np.float64), h64, 0.5)

    def scatter():
        out = d(dE0.copy())
        backend.scatter_backward(out, d(dpre1), batch, 0.5)
        return {"dE": h(out)}
    cases.append(OpCase("scatter_backward", scatter, {"dE": dE}))

    a, V, c = np.tanh(normal(B, K, sd=1.0)), normal(N, K), normal(N)
    yhat = np.empty(nnz)
    ref.sparse_output_forward(yhat, *f64(a, V, c), h64, 2.0, 3.0)

    def output_forward():
        out = d(np.full(nnz, np.nan, np.float32))
        backend.sparse_output_forward(out, d(a), d(V), d(c), batch, 2.0, 3.0)
        return {"yhat": h(out)}
    cases.append(OpCase("sparse_output_forward", output_forward, {"yhat": yhat}))

    dV0, dc0 = normal(N, K, sd=1.0), normal(N, sd=1.0)
    names = ("da", "dV", "dc", "row_loss", "g")
    expect = [np.empty((B, K)), *f64(dV0, dc0), np.empty(B), np.empty(nnz)]
    ref.sparse_output_backward(*expect, *f64(a, V, c), h64, 0.8, 0.3, 2.0, 3.0)

    def output_backward():
        outs = [d(np.full((B, K), np.nan, np.float32)), d(dV0.copy()), d(dc0.copy()),
                d(np.full(B, np.nan, np.float32)), d(np.full(nnz, np.nan, np.float32))]
        backend.sparse_output_backward(*outs, d(a), d(V), d(c), batch, 0.8, 0.3, 2.0, 3.0)
        return dict(zip(names, map(h, outs)))
    cases.append(OpCase("sparse_output_backward", output_backward, dict(zip(names, expect))))

    z, weights = normal(B, N, sd=1.5), rng.random(N).astype(np.float32)
    dout, loss = np.empty((B, N)), np.empty(B)
    ref.reweighted_error(dout, loss, *f64(z, c), hb, weights.astype(np.float64))

    def reweighted():
        outs = d(np.full((B, N), np.nan, np.float32)), d(np.full(B, np.nan, np.float32))
        backend.reweighted_error(*outs, d(z), d(c), batch, d(weights))
        return {"dout": h(outs[0]), "row_loss": h(outs[1])}
    cases.append(OpCase("reweighted_error", reweighted, {"dout": dout, "row_loss": loss}))

    W, dW0 = normal(37, K), normal(37, K)          # a dense layer K -> 37 and its gradient
    dpre2 = normal(B, 37, sd=1.0)
    expect_gemm = {"a W^T": a.astype(np.float64) @ W.astype(np.float64).T,
                   "dW + dpre^T a": dW0 + dpre2.astype(np.float64).T @ a.astype(np.float64)}

    def gemm():
        out, dW = d(np.full((B, 37), np.nan, np.float32)), d(dW0.copy())
        backend.gemm(out, d(a), d(W), trans_b=True)
        backend.gemm(dW, d(dpre2), d(a), trans_a=True, accumulate=True)
        return {"a W^T": h(out), "dW + dpre^T a": h(dW)}
    cases.append(OpCase("gemm", gemm, expect_gemm))

    x = normal(B, K, sd=1.0)

    def bias_tanh():
        out = d(x.copy())
        backend.bias_tanh(out, d(b1))
        return {"a": h(out)}
    cases.append(OpCase("bias_tanh", bias_tanh, {"a": np.tanh(x.astype(np.float64) + b1)}))

    dpre = dpre1.astype(np.float64) * (1 - a.astype(np.float64) ** 2)

    def bias_backward():
        dpre_out, db = d(dpre1.copy()), d(b1.copy())
        backend.bias_backward(db, dpre_out, dpre_out, d(a))
        return {"dpre": h(dpre_out), "db": h(db)}
    cases.append(OpCase("bias_backward", bias_backward,
                        {"dpre": dpre, "db": b1 + dpre.sum(axis=0)}))

    n = 10_007                                     # not a multiple of any block
    p0, g0, m0 = normal(n, sd=1.0), normal(n, sd=1.0), normal(n, sd=0.1)
    v0 = rng.random(n).astype(np.float32) * 0.01
    state = f64(p0, m0, v0)
    counter = adam_state(6)
    schedule = (1e-2, 0.9, 0.999, 1e-8, 0.1, 0.5, 2, 1)     # ..., λ, lr decay from step 1
    ref.adam(*state, g0.astype(np.float64), counter, *schedule)

    def adam():
        outs = [d(t.copy()) for t in (p0, m0, v0, g0)]
        count = d(adam_state(6))
        backend.adam(*outs, count, *schedule)
        return {**dict(zip(("params", "m", "v", "grads"), map(h, outs))),
                "step": h(count)[:1]}
    cases.append(OpCase("adam", adam, {"params": state[0], "m": state[1], "v": state[2],
                                       "grads": np.zeros(n), "step": counter[:1]}))

    row_loss = rng.random(B).astype(np.float32)

    def step_loss():
        losses, step = d(np.zeros(3, np.float32)), d(np.array([1], np.int32))
        backend.step_loss(losses, step, d(row_loss), batch.row_weight)
        return {"losses": h(losses), "step": h(step)}
    cases.append(OpCase("step_loss", step_loss, {
        "losses": np.array([0.0, hb.row_weight.astype(np.float64) @ row_loss, 0.0]),
        "step": np.array([2])}))

    scores = rng.integers(0, 4, (len(rows), N)).astype(np.float32)    # few values: many ties
    scores[-1, ::3] = np.nan
    taken = [set(expect_rows.cols[expect_rows.indptr[i]:expect_rows.indptr[i + 1]])
             for i in range(len(rows))]
    heldout = np.array([next(j for j in rng.permutation(N) if j not in t) for t in taken],
                       np.int32)
    ranks = np.empty(len(rows), np.int64)
    ref.rank_heldout(ranks, scores, heldout, expect_rows.indptr, expect_rows.cols)
    excluded = backend.cut_rows(csr, rows)

    def rank():
        out = d(np.full(len(rows), -7, np.int32))
        backend.rank_heldout(out, d(scores), d(heldout), excluded.indptr, excluded.cols)
        return {"ranks": h(out)}
    cases.append(OpCase("rank_heldout", rank, {"ranks": ranks}, exact=True))

    top = 10
    top_idx, top_vals = np.empty((len(rows), top), np.int64), np.empty((len(rows), top))
    ref.topk(top_idx, top_vals, scores, expect_rows.indptr, expect_rows.cols)

    def topk():
        idx = d(np.full((len(rows), top), -7, np.int32))
        vals = d(np.full((len(rows), top), np.nan, np.float32))
        backend.topk(idx, vals, d(scores), excluded.indptr, excluded.cols)
        return {"idx": h(idx), "vals": h(vals)}
    cases.append(OpCase("topk", topk, {"idx": top_idx, "vals": top_vals}, exact=True))
    return cases


# ---------------------------------------------------------------------------------------------
# two epochs beside their floor

def train_epochs(backend, device: str, repeats: int = 3) -> dict:
    """Two epochs of the device's TRAIN_CASES (the first warms up), beside the floor of an epoch
    on this device (ncae_cuda/floors.py: the epoch's work over the bandwidth and product rate
    measured here). The emulated device has no floor: its kernels run on the CPU."""
    from . import NCAE, datasets
    from .floors import epoch_work, measure_ceilings

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
        from .ops.emulator import CXX, emulated_backend
        if CXX is None:
            raise ops.BackendUnavailable("--device emulated needs g++")
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ncae-check-")))
        backend = emulated_backend(folder)
        return backend, ("the kernel module, for the CPU (g++)", time.perf_counter() - start)
    backend = ops.get_backend(device)
    if backend.name == "gpu":
        from .ops import gpu
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
        epochs = ", ".join(f"epoch {i} {s:.3f} s" for i, s in enumerate(t["seconds"], 1))
        lines += ["", f"training: {t['case']}: {epochs} (the first warms up)"]
        if "floor" in t:
            lines.append(f"floor of an epoch here: {t['floor']:.4f} s (epoch 2 is "
                         f"{t['seconds'][-1] / t['floor']:.1f}x), from {t['bandwidth_gb_s']:.0f} "
                         f"GB/s and {t['gflop_s']:.0f} GFLOP/s measured here (ncae_cuda/floors.py)")
    lines.append("")
    if report["failures"]:
        lines += [f"FAILED: {f}" for f in report["failures"]]
    else:
        lines.append(f"all {len(report['ops'])} ops agree with the reference; training runs")
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
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs "
                                                      "(default: %(default)s)")
    p.add_argument("--no-train", action="store_true", help="check the ops only")
    args = p.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
