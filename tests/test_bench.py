"""The benchmarks' arithmetic and their quick forms: floors from counted work, and the
scalability and epoch-time runs end to end on small data."""
import contextlib
import dataclasses
import errno
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from bench import (
    ann,
    epoch_time,
    floors,
    kernel_peers,
    launches,
    reader_speed,
    recommend_time,
    report,
    scalability,
    serve_load,
    tuned_alike,
    warm_start,
)
from helpers import REPOSITORY, provenance_said
from ncae_cuda import ops
from ncae_cuda.data import atomic_file, datasets, splits
from ncae_cuda.model.config import read_toml
from ncae_cuda.ops.common import DEFAULT_SMS
from ncae_cuda.ops.floors import ADAM_BYTES, Ceilings, Work, epoch_work, op_work
from ncae_cuda.ops.layout import NCAELayout
from ncae_cuda.runs import effort, pool
from ncae_cuda.runs.factory import read_recipe


def test_floor_is_the_larger_of_the_two_times():
    ceilings = Ceilings("x", bandwidth=10e9, flops=100e9)
    assert Work(20e9, 50e9).floor(ceilings) == 2.0          # memory-bound
    assert Work(1e9, 300e9).floor(ceilings) == 3.0          # compute-bound
    assert Work(1, 2) + Work(3, 4) == Work(4, 6)


def test_adam_moves_eight_streams():
    # read p, m, v, g and write p, m, v, g (zeroed): 8 float32 per parameter
    assert op_work("adam", P=10) == Work(320, 120)


def test_epoch_work_counts_adam_per_step_and_scales_with_steps():
    # identical rows: every batch of two does the same work, however the epoch shuffles
    m = sp.csr_matrix(np.array([[1, 0, 2]] * 4, np.float32))
    hidden = (4,)
    one = epoch_work(m, np.arange(2), 2, hidden, "explicit")        # 1 step
    two = epoch_work(m, np.arange(4), 2, hidden, "explicit")        # 2 steps
    assert two == one + one
    assert one.bytes > ADAM_BYTES * NCAELayout(3, hidden).size     # Adam's stream and more


def test_implicit_epochs_count_the_dense_output():
    m = sp.random(6, 50, density=0.2, random_state=0, format="csr", dtype=np.float32)
    explicit = epoch_work(m, np.arange(6), 3, (8,), "explicit")
    implicit = epoch_work(m, np.arange(6), 3, (8,), "implicit")
    assert implicit.flops > explicit.flops                  # B x N x K products per step


def test_scalability_quick(tmp_path, monkeypatch):
    """The quick table, whole; then an --overwrite stopped before its cells finished leaves no
    table of the old cells beside the new ones (before, the old scalability.* stayed)."""
    assert scalability.main(["--quick", "--jobs", "2", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "scalability.json").read_text())
    assert {(r["K"], r["D"]) for r in result["table7"]} == {(8, 0.5), (8, 1.0), (16, 0.5),
                                                            (16, 1.0)}
    assert all(r["seconds"] > 0 and r["floor"] > 0 for r in result["table7"] + result["growth"])
    grown = {r["grown"] for r in result["growth"]}
    assert grown == {"rows", "columns", "interactions", "all"}
    tables = [tmp_path / f"scalability{suffix}" for suffix in (".json", ".md", ".csv", ".png")]
    assert all(path.stat().st_size > 0 for path in tables)

    def stopped(self, share, jobs, gpus) -> None:
        raise pool.Stopped("SIGINT")
    monkeypatch.setattr(pool.Pool, "run", stopped)
    code = scalability.main(["--quick", "--out", str(tmp_path), "--overwrite"])
    assert code == 128 + signal.SIGINT
    assert not any(path.exists() for path in tables)



def test_scalability_tables_name_each_ratio_as_given(monkeypatch):
    """A training ratio D or a growth share below 1% or between whole percents is headed as
    given, in bench.scalability's table and in bench.report's (before, '.0%' headed 0.001 and
    0.004 both 'D = 0%', and 0.025 'D = 2%')."""
    def row(k, d):
        return {"K": k, "D": d, "rows": 10, "columns": 20, "interactions": 30, "seconds": 1.0,
                "floor": 0.5, "x_floor": 2.0}
    ratios = [0.001, 0.004, 0.025, 1.0]
    result = {"data": "synthetic-tiny", "device": "cpu", "commit": "abc1234",
              "date": "2026-11-29", "jobs": 1, "epochs_per_cell": 2, "growth_k": 8,
              "ceilings": {"bandwidth_gb_s": [1.0, 2.0], "gflop_s": [3.0, 4.0]},
              "table7": [row(8, d) for d in ratios],
              "growth": [{"grown": "rows", "share": 0.125, "K": 8, "rows": 1, "columns": 2,
                          "interactions": 3, "parameters": 4, "seconds": 1.0, "floor": 0.5,
                          "x_floor": 2.0}]}
    headings = "| K | D = 0.1% | D = 0.4% | D = 2.5% | D = 100% |"
    made = scalability.markdown(result, [8], ratios)
    assert headings in made.splitlines()
    assert "| rows | 12.5% | 1 | 2 | 3 | 4 | 1 | 0.5 | 2.0 |" in made.splitlines()
    path = report.RESULTS / "made" / "scalability.json"
    monkeypatch.setattr(report, "_load", lambda name: [(path, result)])
    tables = report.scalability_tables()
    assert headings in tables
    assert "columns at D = 100%:" in tables[0]


def test_scalability_refuses_a_task_beside_collect(tmp_path, capsys):
    """--collect writes the tables of every task's cells: --task beside it is refused, as the
    experiments' (cli.check_pool_flags) is (before: accepted, and unread)."""
    with pytest.raises(SystemExit) as refused:
        scalability.main(["--quick", "--collect", "--tasks", "2", "--task", "1", "--out",
                          str(tmp_path)])
    assert refused.value.code == 2
    assert "--task 1: --collect writes the tables of every task's runs" in capsys.readouterr().err


def raising_at_call(real, n: int, error: BaseException):
    """`real`, raising `error` at its n-th call in place of running it, the calls before and
    after it running: what a time limit's signal (KeyboardInterrupt) or a run that fails is to
    a bench's loop over its parts."""
    calls = itertools.count(1)

    def wrapped(*args, **kwargs):
        if next(calls) == n:
            raise error
        return real(*args, **kwargs)
    return wrapped


@pytest.fixture
def temporary(tmp_path, monkeypatch) -> Path:
    """The folder tempfile gives temporary folders in, for this test alone: empty at its end
    where the code cleaned up (before, runs and the emulator's builds stayed in /tmp)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.parametrize("device", ["cpu"])
def test_epoch_time_quick(tmp_path, temporary, device):
    out = tmp_path / "out"
    assert epoch_time.main(["--devices", device, "--quick", "--epochs", "3", "--out",
                            str(out)]) == 0
    result = json.loads((out / "epoch_time.json").read_text())
    assert set(result["cases"]) == set(epoch_time.CASES)
    tiny = datasets.load("synthetic-tiny")
    for name, case in result["cases"].items():
        timed = case[device]
        assert len(timed["seconds"]) == 3       # before, --epochs did not reach the CPU's runs
        assert timed["median_after_first"] > 0 and timed["floor"] > 0
        assert timed["x_floor"] == pytest.approx(timed["median_after_first"] / timed["floor"])
        assert timed["rows_per_s"] == pytest.approx(case["rows"] / timed["median_after_first"])
    # the quick ML-20M case: user-based rows of synthetic-tiny's training part (leave-one-out
    # keeps every user with an entry), and its dense output's products: 6 B N K a step, B the
    # rows (one batch), K 16 (--quick)
    ml20m = result["cases"]["ml20m"]
    assert 0 < ml20m["rows"] <= tiny.n_users
    assert ml20m[device]["dense_output_tflop_s"] == pytest.approx(
        6 * ml20m["rows"] * tiny.n_items * 16 / ml20m[device]["median_after_first"] / 1e12)
    assert result["cases"]["ml10m"][device]["dense_output_tflop_s"] == 0     # explicit
    assert result["ceilings"][device]["bandwidth_gb_s"] > 0
    assert list(temporary.iterdir()) == []
    # every case ran at --quick's hidden 16, which its title says (before: its own shape's)
    assert result["quick"] is True
    assert result["cases"]["ml10m"]["title"] == ("quick: ml10m's flags with --dataset "
                                                 "synthetic-tiny --hidden 16")
    assert (out / "epoch_time.md").read_text().startswith("--quick: every case ran with "
                                                          "--dataset synthetic-tiny --hidden 16")


def test_a_tf32_product_that_fails_leaves_the_other_ceilings_and_cases(tmp_path, monkeypatch,
                                                                       capsys):
    """Where the backend's product on TF32 raises (on a GPU, its first run of that path), the
    ceilings are measured without it: TF32 unmeasured and said, every float32 case timed
    beside its floor. Before, the exception ended the command before its first run."""
    cpu = ops.get_backend("cpu")
    real = cpu.gemm

    def no_tf32(out, a, b, *args, tf32=False, **kwargs):
        if tf32:
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
        return real(out, a, b, *args, **kwargs)

    monkeypatch.setattr(cpu, "gemm", no_tf32)
    epoch_time._measured.cache_clear()
    out = tmp_path / "out"
    try:
        assert epoch_time.main(["--devices", "cpu", "--quick", "--epochs", "2", "--cases",
                                "ml10m,ml20m", "--out", str(out)]) == 0
    finally:
        epoch_time._measured.cache_clear()          # no ceilings of this test for another
    assert ("the product on TF32 failed (RuntimeError: CUBLAS_STATUS_NOT_SUPPORTED): its rate "
            "is left unmeasured") in capsys.readouterr().err
    assert "GFLOP/s, on TF32 none measured" in (out / "epoch_time.md").read_text()
    result = json.loads((out / "epoch_time.json").read_text())
    assert result["ceilings"]["cpu"]["tf32_gflop_s"] is None
    assert result["ceilings"]["cpu"]["gflop_s"] > 0 and "unfinished" not in result
    assert all(case["cpu"]["floor"] > 0 for case in result["cases"].values())


def test_epoch_time_keeps_the_runs_finished_before_it_was_stopped(tmp_path, monkeypatch):
    """After every run both files hold what is measured so far, so a time limit that stops the
    command (the device's window) keeps the finished runs; the runs not come are dashes."""
    finished, real_run = [], epoch_time.run_flags

    def run(argv):
        finished.append(real_run(argv))
        return finished[-1]

    # KeyboardInterrupt: what the time limit is to the 3rd run
    monkeypatch.setattr(epoch_time, "run_flags", raising_at_call(run, 3, KeyboardInterrupt))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as ended:
        epoch_time.main(["--devices", "cpu", "--quick", "--epochs", "2", "--cases",
                         "ml10m,lastfm,ml20m", "--out", str(out)])
    assert ended.value.code == 130
    result = json.loads((out / "epoch_time.json").read_text())
    assert list(result["cases"]) == ["ml10m", "lastfm"]
    assert result["unfinished"] == "2 of 3 runs measured"
    for case, run in zip(result["cases"].values(), finished):
        seconds = [h["seconds"] for h in run["history"] if h["phase"] == "select"]
        assert case["cpu"]["seconds"] == seconds
        assert case["cpu"]["wall_seconds"] >= sum(seconds)
    text = (out / "epoch_time.md").read_text()
    assert text.startswith("> unfinished: 2 of 3 runs measured")
    assert sorted(p.name for p in out.iterdir()) == ["epoch_time.json", "epoch_time.md"]
    # a case a device never reached reads as a dash, in the file and in the docs' table
    result["devices"]["gpu"] = "Test GPU"
    rows = epoch_time.seconds_table(result)[2:]
    assert [row.rsplit("|", 2)[1].strip() for row in rows] == ["-", "-"]


# The benches a device's window runs under a time limit (bench/gpu_check.sh), each stopped
# where its second part begins: (bench, its function that measures a part, flags, what the
# files say is missing, the finished part's names in the result)
STOPPED = [
    (recommend_time, "measure", ["--quick"], "1 of 2 runs measured",
     lambda r: [run["model"] for run in r["runs"]]),
    pytest.param(kernel_peers, "first_step", ["--device", "cpu", "--quick", "--repeats", "1",
                                              "--shapes", "lastfm,ml10m"],
                 "1 of 2 shapes measured", lambda r: list(r["shapes"]),
                 marks=pytest.mark.extra("bench", optional=True)),
    (launches, "ledger_of_epoch", ["--quick", "--shapes", "ml10m,lastfm"],
     "1 of 2 shapes counted", lambda r: list(r["shapes"])),
    pytest.param(serve_load, "measure_server", ["--quick", "--index"],
                 "1 of 2 servers measured", lambda r: [s["index"] for s in r["shapes"]],
                 marks=[pytest.mark.extra("serve"), pytest.mark.extra("ann")]),
]


@pytest.mark.parametrize("bench, part, flags, unfinished, finished", STOPPED)
def test_a_bench_stopped_keeps_the_parts_it_finished(tmp_path, temporary, monkeypatch, capsys,
                                                    bench, part, flags, unfinished, finished):
    """Stopped as a time limit stops it (KeyboardInterrupt: its signal) when its second part
    begins, a bench's json and md hold the first part and say that the rest is missing; the
    same command run whole then writes both without the word. Before, these benches wrote
    nothing until their end, and a device's window lost whatever a limit cut short."""
    name = bench.__name__.rsplit(".", 1)[1]
    out = tmp_path / "out"
    stopped_at(monkeypatch, bench, part, 2, [*flags, "--out", str(out)])
    result = json.loads((out / f"{name}.json").read_text())
    kept = finished(result)
    assert result["unfinished"] == unfinished and len(kept) == 1
    text = (out / f"{name}.md").read_text()
    assert text.startswith(f"> unfinished: {unfinished} (the command stopped before the rest")
    assert capsys.readouterr().err.endswith(
        f"\ninterrupted: {unfinished}, kept in {out / name}.json and .md\n")
    assert bench.main([*flags, "--out", str(out)]) == 0
    whole = json.loads((out / f"{name}.json").read_text())
    assert "unfinished" not in whole and len(finished(whole)) == 2
    assert finished(whole)[0] == kept[0]
    assert "unfinished" not in (out / f"{name}.md").read_text()
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".dot")) == [
        f"{name}.json", f"{name}.md"]                  # no temporary file left beside them
    # stopped before its first part, it says the files there are not this run's
    stopped_at(monkeypatch, bench, part, 1, [*flags, "--out", str(out)])
    assert capsys.readouterr().err.endswith(
        f"\ninterrupted: nothing written to {out} ({name}.json and .md there are an earlier "
        "run's)\n")
    assert json.loads((out / f"{name}.json").read_text()) == whole


def stopped_at(monkeypatch, bench, part: str, n: int, argv: list[str]) -> None:
    """bench.main(argv) stopped as a Ctrl-C stops it (KeyboardInterrupt) at the n-th call of
    its function `part`: it ends with exit 130, as the package's commands do."""
    with monkeypatch.context() as patched:
        patched.setattr(bench, part, raising_at_call(getattr(bench, part), n, KeyboardInterrupt))
        with pytest.raises(SystemExit) as ended:
            bench.main(argv)
    assert ended.value.code == 130


# python -m bench.<name> FLAGS, paused where its function PART is called the N-th time, until
# the test's signal: argv is NAME PART N FLAGS...
PAUSED_AT_A_PART = """
import importlib, itertools, os, signal, sys
name, part, n, *flags = sys.argv[1:]
bench = importlib.import_module(f"bench.{name}")
real, calls = getattr(bench, part), itertools.count(1)


def paused(*args, **kwargs):
    if next(calls) == int(n):
        open(os.environ["PAUSED"], "w").close()
        signal.pause()                                   # until the test's SIGINT
    return real(*args, **kwargs)


setattr(bench, part, paused)
sys.exit(bench.main(flags))
"""

# each bench as a Ctrl-C finds it at the n-th call of its function that measures a part:
# (bench, the function, n, flags, what the line says is kept, {out} and {json} its files')
INTERRUPTED = [
    pytest.param(kernel_peers, "first_step", 2, ["--device", "cpu", "--quick", "--repeats", "1",
                                                 "--shapes", "lastfm,ml10m"],
                 "1 of 2 shapes measured, kept in {json} and .md",
                 marks=pytest.mark.extra("bench", optional=True)),
    (recommend_time, "measure", 2, ["--quick"], "1 of 2 runs measured, kept in {json} and .md"),
    (launches, "ledger_of_epoch", 2, ["--quick", "--shapes", "ml10m,lastfm"],
     "1 of 2 shapes counted, kept in {json} and .md"),
    pytest.param(serve_load, "measure_server", 2, ["--quick", "--index"],
                 "1 of 2 servers measured, kept in {json} and .md",
                 marks=[pytest.mark.extra("serve"), pytest.mark.extra("ann")]),
    (floors, "epoch_work_of", 2, ["--quick", "--cases", "ml10m", "--batch-sizes", "16,1024",
                                  "--ceilings", "bench/results/2026-11-28-h200-gpu-check/"
                                  "peer-ml10m/peer_torch.json"],
     "nothing written to {out}"),                        # its files are written at its end
    pytest.param(ann, "measure_shape", 1, ["--quick"], "nothing written to {out}",
                 marks=pytest.mark.extra("ann")),
]


@pytest.mark.parametrize("bench, part, n, flags, kept", INTERRUPTED)
def test_ctrl_c_ends_a_bench_in_a_line_saying_what_it_kept(tmp_path, bench, part, n, flags,
                                                          kept):
    """SIGINT (a terminal's Ctrl-C) to python -m bench.<name> while it measures a part: exit
    130 and one line saying what its files under --out keep, as the package's commands end.
    Before, a KeyboardInterrupt traceback, and the files' state left to guess."""
    name = bench.__name__.rsplit(".", 1)[1]
    out, paused = tmp_path / "out", tmp_path / "paused"
    script = tmp_path / "paused_at_a_part.py"
    script.write_text(PAUSED_AT_A_PART)
    env = {**os.environ, "PAUSED": str(paused), "TMPDIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY),
                                                       os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, str(script), name, part, str(n), *flags, "--out",
                             str(out)], cwd=REPOSITORY, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not paused.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert paused.exists(), proc.stderr.read() if proc.poll() is not None else "timeout"
        proc.send_signal(signal.SIGINT)
        code, stderr = proc.wait(120), proc.stderr.read()
    finally:
        proc.kill()
    said = kept.format(out=out, json=out / f"{name}.json")
    assert code == 130 and "Traceback" not in stderr, stderr
    assert stderr.endswith(f"\ninterrupted: {said}\n"), stderr


def test_a_bench_that_cannot_write_its_files_says_so_in_a_line(tmp_path, monkeypatch, capsys):
    """A disk that fills while a bench writes its results: exit 2 and the file named, no
    traceback, no temporary file left (before, atomic_write's DataError was a traceback)."""
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_file.os, "fsync", full)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as ended:
        recommend_time.main(["--quick", "--out", str(out)])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "Traceback" not in err
    assert err == (f"error: {out / 'recommend_time.json'}: cannot write it (No space left on "
                   "device)\n")
    assert list(out.iterdir()) == []


def test_epoch_time_goes_on_past_a_run_that_fails(tmp_path, monkeypatch, capsys):
    """A run that raises (on a GPU: out of memory, a kernel's first run) is said with its
    traceback, kept as failed, and the runs after it are measured; exit 1. Before, the command
    ended there, and a device's window lost every run after it."""
    monkeypatch.setattr(epoch_time, "run_flags", raising_at_call(
        epoch_time.run_flags, 2, RuntimeError("an illegal memory access was encountered")))
    out = tmp_path / "out"
    assert epoch_time.main(["--devices", "cpu", "--quick", "--epochs", "2", "--cases",
                            "ml10m,lastfm,ml20m", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "error: lastfm on cpu: RuntimeError: an illegal memory access" \
        in err and err.endswith("error: 1 of 3 runs failed: lastfm on cpu\n")
    result = json.loads((out / "epoch_time.json").read_text())
    cases = result["cases"]
    assert cases["lastfm"]["cpu"]["error"] == "RuntimeError: an illegal memory access was " \
                                                 "encountered"
    assert cases["ml10m"]["cpu"]["floor"] > 0 and cases["ml20m"]["cpu"]["floor"] > 0
    assert "unfinished" not in result
    rows = epoch_time.seconds_table(result)[2:]
    assert [row.rsplit("|", 2)[1].strip() for row in rows][1] == "failed"
    monkeypatch.setattr(report, "_load", lambda name: [(report.ROOT / "x" / name, {
        **result, "devices": {"gpu": "Test GPU"},
        "cases": {"ml20m": {**cases["ml20m"], "gpu": cases["lastfm"]["cpu"]}}})]
        if name == "epoch_time.json" else [])
    assert "users/s" not in " ".join(report.speed_lines())    # a failed run is no figure


def test_commit_is_one_short_form_marked_where_the_tree_differs(tmp_path, monkeypatch):
    """commit(): $COMMIT (a GPU machine's, given whole) cut to git's short length, and git's
    own id marked "+dirty" where a tracked file differs from it (an untracked one does not).
    Before, $COMMIT came whole, 40 digits beside the CPU runs' 7, and no tree was marked."""
    monkeypatch.setenv("COMMIT", "c74178d3469506ad1b89a325e9607ec977af94c5")
    assert epoch_time.commit() == "c74178d"
    monkeypatch.delenv("COMMIT")
    monkeypatch.setattr(epoch_time, "CHECKOUT", tmp_path)

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              cwd=tmp_path, check=True, capture_output=True,
                              text=True).stdout.strip()
    git("init", "-q")
    (tmp_path / "a.py").write_text("1")
    git("add", "a.py")
    git("commit", "-qm", "a")
    head = git("rev-parse", "HEAD")[:7]
    (tmp_path / "new.py").write_text("untracked")
    assert epoch_time.commit() == head
    (tmp_path / "a.py").write_text("2")
    assert epoch_time.commit() == f"{head}+dirty"


def test_floors_quick_counts_each_batch_size_over_recorded_ceilings(tmp_path):
    """Each row's floor is the larger of bytes over bandwidth and FLOPs over rate; Adam's bytes
    are every parameter of the one-layer net (E and V of N x K, b1 of K, c of N, each padded
    by at most 3 floats) a step; and epoch_time.json's ceilings read as peer_torch.json's."""
    peer = tmp_path / "peer_torch.json"
    peer.write_text(json.dumps({"device": "Test GPU", "commit": "abc", "date": "2026-01-01",
                                "floor": {"bandwidth": 1e12, "flop_rate": 1e13}}))
    out = tmp_path / "out"
    assert floors.main(["--ceilings", str(peer), "--quick", "--cases", "ml20m",
                        "--batch-sizes", "16,1024", "--out", str(out)]) == 0
    result = json.loads((out / "floors.json").read_text())
    assert result["ceilings"]["device"] == "Test GPU" and result["ceilings"]["commit"] == "abc"
    tiny = datasets.load("synthetic-tiny")
    N, K = tiny.n_items, 16                                   # user-based; --quick's hidden 16
    params = 2 * N * K + K + N
    small, whole = result["floors"]
    assert (small["batch_size"], whole["batch_size"]) == (16, whole["rows"])  # at most the rows
    for row in result["floors"]:
        assert row["steps"] == -(-row["rows"] // row["batch_size"])
        memory, arithmetic = row["gb"] * 1e9 / 1e12, row["tflop"] * 1e12 / 1e13
        assert row["floor_s"] == pytest.approx(max(memory, arithmetic))
        assert row["set_by"] == ("bytes" if memory >= arithmetic else "FLOPs")
        assert row["rows_per_s"] == pytest.approx(row["rows"] / row["floor_s"])
        assert 0 <= row["adam_gb"] * 1e9 - row["steps"] * 32 * params <= row["steps"] * 32 * 12
        assert row["adam_gb"] < row["gb"]
    assert small["steps"] > whole["steps"] == 1 and small["adam_gb"] > whole["adam_gb"]
    text = (out / "floors.md").read_text()
    assert result["quick"] is True and text.startswith("--quick: every case ran with")
    assert "| quick: ml20m's flags with --dataset synthetic-tiny --hidden 16 |" in text
    assert "hidden 600" not in text                    # before, the title of a shape not run
    timed = tmp_path / "epoch_time.json"
    timed.write_text(json.dumps({
        "commit": "def", "date": "2026-01-02", "devices": {"cpu": "CPU", "gpu": "Test GPU"},
        "ceilings": {"cpu": {"bandwidth_gb_s": 50.0, "gflop_s": 500.0},
                     "gpu": {"bandwidth_gb_s": 1000.0, "gflop_s": 10000.0}}}))
    assert floors.recorded_ceilings(timed) == (Ceilings("Test GPU", 1e12, 1e13),
                                               {"commit": "def", "date": "2026-01-02",
                                                "quick": False})
    # a TF32 case's FLOPs count at the TF32 rate, and bound nothing where none was measured
    for rate, bound in ((None, "bytes"), (1e8, "FLOPs")):
        peer.write_text(json.dumps({"device": "Test GPU", "commit": "abc", "date": "2026-01-01",
                                    "floor": {"bandwidth": 1e12, "flop_rate": 1e13,
                                              "tf32_flop_rate": rate}}))
        assert floors.main(["--ceilings", str(peer), "--quick", "--cases", "ml20m-tf32",
                            "--out", str(out)]) == 0
        (row,) = json.loads((out / "floors.json").read_text())["floors"]
        memory, arithmetic = row["gb"] * 1e9 / 1e12, row["tflop"] * 1e12 / (rate or np.inf)
        assert row["set_by"] == bound and row["floor_s"] == pytest.approx(max(memory, arithmetic))


def test_floors_table_says_each_floor_to_three_significant_figures():
    """A GPU's floors of a few ms (0.00139 s) or less keep their figures: before, four decimals
    gave 0.0014, and 0.0000 for a floor under 50 microseconds."""
    ceilings = {"source": "peer_torch.json", "device": "Test GPU", "commit": "abc",
                "date": "2026-01-01", "bandwidth_gb_s": 1000.0, "gflop_s": 10000.0}
    row = {"title": "tiny", "batch_size": 16, "steps": 4, "gb": 1.0, "adam_gb": 0.5,
           "tflop": 1.0, "set_by": "bytes", "rows_per_s": 1.0}
    result = {"ceilings": ceilings, "commit": "abc", "date": "2026-01-02", "floors": [
        {**row, "floor_s": floor} for floor in (0.068213, 0.0013912, 3.8e-05, 321.64)]}
    cells = [line.split(" | ")[5] for line in floors.table(result) if line.startswith("| tiny |")]
    assert cells == ["0.0682", "0.00139", "3.8e-05", "322"]


def test_cpu_kernel_timings_are_of_calls_each_after_a_cache_flush(monkeypatch):
    """bench/test_kernels.py's CPU figure is the median of calls each made after the flush
    (a buffer larger than the caches written), as the GPU's is: before, pytest-benchmark's
    back-to-back rounds, which find a small shape's inputs in the cache from the round
    before. Here a call right after a flush takes 10 ms, any other none."""
    from types import SimpleNamespace

    from bench import test_kernels, timing
    flushed = []

    class Scratch:
        def fill(self, value):
            flushed.append(True)
    monkeypatch.setattr(timing, "np", SimpleNamespace(empty=lambda *shape: Scratch(),
                                                      int32=np.int32, median=np.median))

    def call():
        if flushed:
            time.sleep(0.01)
        flushed.clear()

    class Benchmark:                       # pytest-benchmark's fixture: rounds back to back
        extra_info = {}

        def pedantic(self, fn, rounds=5, warmup_rounds=0):
            times = []
            for _ in range(warmup_rounds + rounds):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            self.stats = SimpleNamespace(stats=SimpleNamespace(median=np.median(times)))

        def __call__(self, fn):
            self.pedantic(fn)

    benchmark = Benchmark()
    test_kernels.timed(benchmark, ops.get_backend("cpu"), call, "adam", P=1000)
    seconds = benchmark.extra_info["seconds"]
    assert 0.01 <= seconds < 0.05, seconds
    assert benchmark.extra_info["gb_per_s"] == pytest.approx(ADAM_BYTES * 1000 / seconds / 1e9)


def test_floors_refuse_a_smoke_tests_ceilings_but_for_a_smoke_test(tmp_path, capsys):
    """Before, a --quick run's ceilings (small arrays, measured once, that a cache flatters)
    gave floors as a device's, and said nothing of it."""
    quick = tmp_path / "epoch_time.json"
    quick.write_text(json.dumps({
        "commit": "abc", "date": "2026-01-01", "quick": True, "devices": {"cpu": "CPU"},
        "ceilings": {"cpu": {"bandwidth_gb_s": 3.0, "gflop_s": 17.0}}}))
    with pytest.raises(SystemExit) as refused:
        floors.main(["--ceilings", str(quick), "--cases", "lastfm", "--out",
                     str(tmp_path / "made")])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and (
        f"error: --ceilings {quick}: a --quick run's ceilings, a smoke test's: give a full "
        "run's, or count with --quick") in err, err
    assert not (tmp_path / "made").exists()
    assert floors.main(["--ceilings", str(quick), "--quick", "--cases", "lastfm", "--out",
                        str(tmp_path / "out")]) == 0


BENCH_ERRORS = [
    # before, each a traceback
    (epoch_time, ["--cases", "ml10m,x", "--quick", "--out", "OUT"], "argument --cases: "
     "expected comma-separated names of: ml10m, lastfm, delicious, ml20m, ml20m-batch1024, "
     "ml20m-tf32, got 'ml10m,x'"),
    (epoch_time, ["--devices", "tpu", "--quick", "--out", "OUT"], "argument --devices: expected "
     "comma-separated names of: cpu, gpu, gpu-graphs, got 'tpu'"),
    # before, a case or device given twice ran twice: the second run found the first's folder,
    # failed, and its error replaced the first's figures (exit 1); floors counted it twice
    (epoch_time, ["--cases", "lastfm,lastfm", "--quick", "--out", "OUT/made"], "argument "
     "--cases: expected comma-separated names of: ml10m, lastfm, delicious, ml20m, "
     "ml20m-batch1024, ml20m-tf32, each once, got 'lastfm,lastfm'"),
    (epoch_time, ["--devices", "cpu,cpu", "--quick", "--out", "OUT/made"], "argument "
     "--devices: expected comma-separated names of: cpu, gpu, gpu-graphs, each once, got "
     "'cpu,cpu'"),
    (floors, ["--ceilings", "FILE", "--cases", "lastfm,lastfm", "--out", "OUT/made"], "argument "
     "--cases: expected comma-separated names of: ml10m, lastfm, delicious, ml20m, "
     "ml20m-batch1024, ml20m-tf32, each once, got 'lastfm,lastfm'"),
    (floors, ["--ceilings", "FILE", "--batch-sizes", "16,16", "--out", "OUT/made"], "argument "
     "--batch-sizes: expected comma-separated integers >= 1, each once, got '16,16'"),
    # before, one epoch's median after the first was that first epoch, start-up and all
    (epoch_time, ["--devices", "cpu", "--epochs", "1", "--quick", "--out", "OUT"],
     "--epochs must be >= 2, the first being start-up; got 1"),
    (epoch_time, ["--devices", "cpu", "--quick", "--out", "/proc/x"], "--out /proc/x: cannot "
     "write there"),
    (launches, ["--quick", "--out", "FILE"], "--out FILE: cannot write there (File exists)"),
    (floors, ["--ceilings", "FILE", "--quick", "--out", "OUT"], "--ceilings FILE: cannot read "
     "ceilings from it (JSONDecodeError"),
    (floors, ["--ceilings", "FILE", "--batch-sizes", "8,x", "--out", "OUT"], "argument "
     "--batch-sizes: expected comma-separated integers >= 1, got '8,x'"),
    (warm_start, ["--quick", "--warm-lr", "0", "--out", "OUT"], "--warm-lr must be > 0; got 0"),
    # before, a cell of one epoch reported that epoch, start-up and all (15.8 s for 0.3)
    (scalability, ["--quick", "--epochs", "1", "--out", "OUT/made"],
     "--epochs must be >= 2, the first being start-up; got 1"),
    # before, an AssertionError's traceback (two cells of one folder), and the seed's test
    # counted twice in the mean
    (scalability, ["--quick", "--ks", "8,8", "--out", "OUT/made"], "argument --ks: expected "
     "comma-separated integers >= 1, each once, got '8,8'"),
    (tuned_alike, ["--dataset", "synthetic-tiny", "--split-seeds", "0,1,0", "--out", "OUT/made"],
     "argument --split-seeds: expected comma-separated integers >= 0, each once, got '0,1,0'"),
    # before, "--out /tmp/ncae-warm-start-.../explicit-0-parent holds another run's files"
    (warm_start, ["--quick", "--seeds", "0,0", "--out", "OUT/made"], "argument --seeds: "
     "expected comma-separated integers >= 0, each once, got '0,0'"),
    (warm_start, ["--quick", "--seeds", "-1", "--out", "OUT/made"], "argument --seeds: "
     "expected comma-separated integers >= 0, got '-1'"),
    # before, a traceback after --out was made (warm_start: its line, after --out was made)
    (serve_load, ["--data-dir", "OUT/none", "--out", "OUT/made"],
     "error: ml-100k: u.data is in neither"),
    (warm_start, ["--dataset", "ml-100k", "--data-dir", "OUT/none", "--out", "OUT/made"],
     "error: ml-100k: u.data is in neither"),
    # each before a traceback, after --out was made or after the work; or, --repeats 0 and
    # --probes 0, an all-nan table and a faiss abort
    (scalability, ["--ks", "", "--out", "OUT"], "argument --ks: expected comma-separated "
     "integers >= 1, got ''"),
    (scalability, ["--ks", "abc", "--out", "OUT"], "argument --ks: expected comma-separated "
     "integers >= 1, got 'abc'"),
    (scalability, ["--ratios", "x", "--out", "OUT"], "argument --ratios: expected "
     "comma-separated shares in (0, 1], got 'x'"),
    (scalability, ["--shares", "0.5,2", "--out", "OUT"], "argument --shares: expected "
     "comma-separated shares in (0, 1], got '0.5,2'"),
    (serve_load, ["--clients", "", "--out", "OUT"], "argument --clients: expected "
     "comma-separated integers >= 1, got ''"),
    (tuned_alike, ["--dataset", "synthetic-tiny", "--split-seeds", "x", "--out", "OUT"],
     "argument --split-seeds: expected comma-separated integers >= 0, got 'x'"),
    (tuned_alike, ["--dataset", "synthetic-tiny", "--trials", "0", "--out", "OUT"],
     "argument --trials: expected an integer >= 1, got '0'"),
    (ann, ["--shapes", "bogus", "--out", "OUT"], "argument --shapes: expected comma-separated "
     "names of: ML-20M, Delicious, 1M synthetic, got 'bogus'"),
    (ann, ["--quick", "--probes", "0", "--out", "OUT"], "argument --probes: expected "
     "comma-separated integers >= 1, got '0'"),
    # before, accepted and ignored: the other libraries are measured at the Delicious shape
    (ann, ["--libraries", "--shapes", "ML-20M", "--out", "OUT/made"], "--libraries: the other "
     "libraries' indexes are measured at the Delicious shape: add it to --shapes"),
    (ann, ["--libraries", "--quick", "--out", "OUT/made"], "--libraries: the other libraries' "
     "indexes are measured at the Delicious shape, which --quick leaves out"),
    (kernel_peers, ["--quick", "--repeats", "0", "--out", "OUT"], "argument --repeats: "
     "expected an integer >= 1, got '0'"),
    (launches, ["--quick", "--ranks", "100", "--out", "OUT"], "--ranks 100: ml10m has 60 "
     "columns to share, fewer than the processes"),
    (recommend_time, ["--quick", "--devices", "bogus", "--out", "OUT"], "argument --devices: "
     "expected comma-separated names of: cpu, gpu, got 'bogus'"),
    *[(recommend_time, ["--quick", flag, "0", "--out", "OUT"], f"argument {flag}: expected an "
       "integer >= 1, got '0'") for flag in ("--repeats", "-n", "--epochs")],
    (recommend_time, ["--dataset", "bogus", "--out", "OUT/made"],
     "error: unknown data set 'bogus'"),
    (scalability, ["--quick", "--gpus", "0", "--out", "OUT/made"], "--gpus 0: the cells run on "
     "the CPU (--device cpu): leave out --gpus, or use --device gpu"),
    *[(serve_load, ["--quick", flag, value, "--out", "OUT"], f"argument {flag}: expected "
       f"{what}, got '{value}'") for flag, value, what in (
        ("--seconds", "0", "a number >= 0.1"), ("--seconds", "nan", "a number >= 0.1"),
        ("--requests", "0", "an integer >= 1"), ("--client-processes", "0", "an integer >= 1"),
        ("-n", "-3", "an integer >= 1"))],
]
if not ops.HAS_CUDA:           # each bench that takes a GPU refuses one not there, before work
    BENCH_ERRORS += [(bench, [*flags, "--quick", "--out", "OUT"],
                      "error: --device gpu needs a CUDA GPU")
                     for bench, flags in [(epoch_time, ["--devices", "cpu,gpu"]),
                                          (launches, ["--device", "gpu"]),
                                          (kernel_peers, ["--device", "gpu"]),
                                          (recommend_time, ["--devices", "cpu,gpu"]),
                                          (serve_load, ["--device", "gpu"]),
                                          (scalability, ["--device", "gpu"])]]


@pytest.mark.parametrize("bench, argv, message", BENCH_ERRORS)
def test_a_bench_says_what_is_wrong_in_a_line(tmp_path, capsys, bench, argv, message):
    (tmp_path / "FILE").write_text("x")
    argv = [str(tmp_path / a) if a.split("/")[0] in ("OUT", "FILE") else a for a in argv]
    message = message.replace("FILE", str(tmp_path / "FILE"))
    try:
        code = bench.main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "OUT" / "made").exists()        # refused before --out is made


class Reached(Exception):
    """Raised in place of a bench's part: what the part was called with, its work not done."""


# --quick's values stand only for the flags not given (before, they replaced those given too):
# (bench, its part that the flags reach, flags beside --quick, what of the part's arguments,
# as the flags and --quick's values set them)
QUICK_GIVEN = [
    (scalability, "cells", ["--ks", "4", "--epochs", "3"],
     lambda args: (args.ks, args.ratios, args.epochs), ([4], [0.5, 1.0], 3)),
    pytest.param(serve_load, "measure_shape", ["--clients", "2"],
                 lambda name, hidden, used, data, args, folder: (args.clients, args.requests),
                 ([2], 40),
                 marks=pytest.mark.extra("serve")),
    pytest.param(tuned_alike, "tuned", ["--dataset", "synthetic-tiny", "--trials", "7"],
                 lambda model, data, trials, work, recipe: trials, 7,
                 marks=pytest.mark.extra("tune")),
    (recommend_time, "measure", ["--repeats", "3"], lambda model, users, n, repeats: repeats, 3),
    pytest.param(ann, "measure_shape", ["--users", "10"],
                 lambda name, items, hidden, args: (name, args.users, args.calls),
                 ("quick", 10, 5), marks=pytest.mark.extra("ann")),
]


@pytest.mark.parametrize("bench, part, flags, read, expected", QUICK_GIVEN)
def test_quick_leaves_the_flags_given(tmp_path, monkeypatch, bench, part, flags, read, expected):
    def reached(*args):
        raise Reached(read(*args))
    monkeypatch.setattr(bench, part, reached)
    with pytest.raises(Reached) as got:
        bench.main(["--quick", *flags, "--out", str(tmp_path)])
    assert got.value.args[0] == expected


QUICK_MARK = " (quick: synthetic-tiny in place of each shape's data)"



def microbenchmarks(json_path) -> subprocess.CompletedProcess:
    """One small case of the kernel microbenchmarks, its results to --benchmark-json json_path,
    run as a user runs them: not as an xdist worker of this suite (pytest-benchmark reads
    PYTEST_XDIST_WORKER, which a worker's subprocess inherits, as xdist on, and refuses
    --benchmark-only)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return subprocess.run([sys.executable, "-m", "pytest", "bench/", "-q", "-p",
                           "no:cacheprovider", "--benchmark-only", "-k",
                           "test_cut_batch and lastfm and cpu", f"--benchmark-json={json_path}"],
                          cwd=REPOSITORY, env=env, capture_output=True, text=True, timeout=300)


def test_kernel_microbenchmarks_write_into_a_folder_not_made_yet(tmp_path):
    """--benchmark-json in a folder that does not exist is made before the cases run, as a
    bench's --out is (before, every case ran, then a FileNotFoundError traceback lost them)."""
    json_path = tmp_path / "not" / "made" / "kernels.json"
    done = microbenchmarks(json_path)
    assert done.returncode == 0, done.stdout + done.stderr
    cases = json.loads(json_path.read_text())["benchmarks"]
    assert [case["name"] for case in cases] == ["test_cut_batch[lastfm-cpu]"]


def test_kernel_microbenchmarks_refuse_a_json_they_cannot_write_before_any_case(tmp_path):
    """--benchmark-json naming a folder, or a file under a file, is refused in a line before
    any case runs (before: an IsADirectoryError or NotADirectoryError traceback at the end)."""
    (tmp_path / "file").write_text("")
    for json_path, why in ((tmp_path, "is a folder"),
                           (tmp_path / "file" / "kernels.json", "cannot write there")):
        done = microbenchmarks(json_path)
        assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
        assert f"--benchmark-json {json_path}: " in done.stderr and why in done.stderr
        assert "Traceback" not in done.stdout + done.stderr
        assert "test_cut_batch" not in done.stdout


@pytest.mark.extra("bench", optional=True)         # the PyTorch peers beside the NumPy ones
def test_kernel_peers_quick(tmp_path):
    assert kernel_peers.main(["--device", "cpu", "--quick", "--shapes", "lastfm", "--repeats",
                              "2", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "kernel_peers.json").read_text())
    ops_ = [row["op"] for row in result["shapes"]["lastfm"]]
    expected = ["gather_forward", "sparse_output_forward", "scatter_backward", "adam"]
    assert ops_ == (expected if result["torch"] == "installed" else expected[:2])
    for row in result["shapes"]["lastfm"]:
        assert row["gb_per_s"] == pytest.approx(row["bytes"] / row["seconds"] / 1e9)
        assert row["peer_over_ours"] == pytest.approx(row["peer_seconds"] / row["seconds"])
    md = (tmp_path / "kernel_peers.md").read_text()
    assert "| lastfm | gather_forward |" in md
    assert result["quick"] and md.splitlines()[0].endswith(QUICK_MARK)   # not lastfm's data


def test_kernel_peers_refuse_a_peer_that_computes_something_else(monkeypatch, tmp_path):
    def off_by_one(step):
        pair = kernel_peers.gather_forward(step)
        return dataclasses.replace(pair, theirs=lambda: pair.theirs() + 1)
    monkeypatch.setattr(kernel_peers, "PAIRS", (off_by_one,))
    with pytest.raises(AssertionError, match="gather_forward .*relative error"):
        kernel_peers.main(["--device", "cpu", "--quick", "--shapes", "lastfm", "--repeats", "1",
                           "--out", str(tmp_path)])


def test_launches_quick(tmp_path, temporary, capsys):
    assert launches.main(["--quick", "--shapes", "ml10m,lastfm", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "lastfm: 600 interactions drawn in" in printed and "lastfm: done in" in printed
    assert list(temporary.iterdir()) == []                # the emulator's build is removed
    result = json.loads((tmp_path / "launches.json").read_text())
    for name in ("ml10m", "lastfm"):
        f = result["shapes"][name]
        assert f["ops_per_step"] == f["ops_per_step_min"] <= 20
        assert (f["allocations_per_step"], f["transfers_per_epoch"], f["syncs_per_epoch"]) == (
            0, 1, 1)
        assert 1 <= f["work_balance"] <= 3          # see test_ledger.py
        assert f["graph_nodes_per_step"]["nodes"] == f["ops_per_step"]
        # every launch over the batch's entries weighed for its slack ...
        by_entries = {"cut_batch_kernel", "gather_forward_kernel", "scatter_backward_kernel"}
        assert by_entries <= set(f["parallel_slack_by_kernel"])
        assert f["parallel_slack"] == pytest.approx(min(f["parallel_slack_by_kernel"].values()),
                                                    abs=1e-3)
        # ... and every kernel a serial tail, the longest reported
        assert set(f["serial_tail_by_kernel"]) == set(f["work_balance_by_kernel"])
        assert f["serial_tail"] == max(f["serial_tail_by_kernel"].values())
    md = (tmp_path / "launches.md").read_text()
    assert "| lastfm |" in md and "| gather_forward_kernel |" in md
    assert result["quick"] and md.splitlines()[0].endswith(QUICK_MARK)   # not lastfm's data
    # the SMs the slack is counted against and the windows dealt out for (before, unsaid)
    assert result["sms"] == DEFAULT_SMS and f", {DEFAULT_SMS} SMs" in md.splitlines()[0]


def test_launches_plans_column_shards(tmp_path):
    assert launches.main(["--quick", "--shapes", "lastfm", "--ranks", "1,3",
                          "--out", str(tmp_path)]) == 0
    shards = json.loads((tmp_path / "launches.json").read_text())["shards"]
    for shape, columns in {"ml10m": 60, "10m-columns": 10_000}.items():
        one, three = shards[shape]["1"], shards[shape]["3"]
        assert one[0]["columns"] == columns == sum(p["columns"] for p in three)
        assert one[0]["entries"] == sum(p["entries"] for p in three)
        # the dense layers are every rank's, each column's rows of E, V and c one rank's; the
        # views of the flat buffer start at multiples of 4 floats
        def floats(n):
            return -(-n // 4) * 4
        for plan in (*one, *three):
            n = plan["columns"]
            assert plan["parameters"] == (floats(n * 500) + floats(500) + floats(500 * 500)
                                          + floats(500) + floats(n * 500) + floats(n))
            assert plan["state_bytes"] == 5 * 4 * plan["parameters"]
            assert plan["collective_bytes_per_step"] == 4 * 128 * (500 + 500 + 1)
    assert "| 10m-columns | 3 | 2 |" in (tmp_path / "launches.md").read_text()
    with pytest.raises(SystemExit):
        launches.main(["--quick", "--ranks", "0", "--out", str(tmp_path)])


@pytest.mark.extra("serve")
def test_serve_load_quick(tmp_path):
    """The server under 1 and 4 clients beside its floor and the offline rate, each figure
    from requests that were all answered."""
    assert serve_load.main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "serve_load.json").read_text())
    (shape,) = result["shapes"]
    assert result["commit"] and result["versions"]["ncae_cuda"] and shape["users"] == 60
    levels = {(level["endpoint"], level["clients"]): level for level in shape["levels"]}
    assert set(levels) == {(e, c) for e in ("recommend", "healthz") for c in (1, 4)}
    for (endpoint, _), level in levels.items():
        assert level["errors"] == 0 and level["requests"] > 0
        assert 0 < level["p50_ms"] <= level["p99_ms"]
        assert (level["mean_batch"] is None) == (endpoint == "healthz")
    assert levels["recommend", 1]["mean_batch"] == 1.0
    assert shape["offline_users_per_s"] > 0 and shape["targets"]["clients"] == 4
    assert "| recommend | 4 |" in (tmp_path / "serve_load.md").read_text()


@pytest.mark.extra("serve")
@pytest.mark.extra("ann")
def test_serve_load_quick_serves_the_index_beside_the_exact_path(tmp_path):
    assert serve_load.main(["--quick", "--index", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "serve_load.json").read_text())
    assert [shape["index"] for shape in result["shapes"]] == ["exact", "approximate"]
    for shape in result["shapes"]:
        assert all(level["errors"] == 0 and level["requests"] > 0 for level in shape["levels"])
    assert "index approximate" in (tmp_path / "serve_load.md").read_text()


@pytest.mark.extra("ann")
def test_ann_quick_measures_recall_against_the_exact_path(tmp_path):
    assert ann.main(["--quick", "--out", str(tmp_path)]) == 0
    (shape,) = json.loads((tmp_path / "ann.json").read_text())["shapes"]
    assert shape["exact"]["users_per_s"] > 0 and shape["build_s"] > 0
    assert shape["size_bytes"] > shape["items"] * (shape["hidden"] + 1) * 4   # vectors kept
    assert sum(row["default"] for row in shape["index"]) == 1
    # at the widest probes swept, a quarter of the lists, it finds nearly all of the top 10
    assert max(row["recall"] for row in shape["index"]) >= 0.99
    assert "(default)" in (tmp_path / "ann.md").read_text()
    assert provenance_said(tmp_path / "ann.json", tmp_path / "ann.md")


def test_peer_torch_without_torch_says_so_in_a_line(tmp_path):
    """python -m bench.peer_torch where PyTorch is not installed (a package that fails to
    import stands for it): before, a traceback ending in the ImportError."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPOSITORY)])}
    done = subprocess.run([sys.executable, "-m", "bench.peer_torch", "--quick", "--out",
                           str(tmp_path / "made")], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == ("error: python -m bench.peer_torch needs PyTorch, the [bench] extra: "
                           "pip install -e '.[bench]'\n")
    assert not (tmp_path / "made").exists()


@pytest.mark.parametrize("bench, absent, flags, message", [
    (ann, "faiss", ["--quick"], "the approximate index needs the [ann] extra"),
    # before, a traceback after the Delicious shape was measured (minutes), nothing written
    pytest.param(ann, "usearch", ["--libraries", "--shapes", "Delicious"],
                 "--libraries needs usearch beside faiss: pip install usearch",
                 marks=pytest.mark.extra("ann")),
    # before, a traceback after the exact path's server was measured
    (serve_load, "faiss", ["--quick", "--index"], "--index: the approximate index needs the "
                                                  "[ann] extra"),
])
def test_a_bench_refuses_a_library_not_installed_before_any_work(tmp_path, monkeypatch, capsys,
                                                                 bench, absent, flags, message):
    monkeypatch.setitem(sys.modules, absent, None)              # its import fails
    with pytest.raises(SystemExit) as refused:
        bench.main([*flags, "--out", str(tmp_path / "made")])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "made").exists()


def test_ann_tables_the_index_over_the_exact_path_to_two_decimals():
    """An index slower than the exact path shows its ratio (before, 0.34 printed 0)."""
    timing = {"p50_ms": 1.0, "p99_ms": 2.0, "cold_p50_ms": 3.0}
    shape = {"shape": "s", "items": 100, "hidden": 8, "lists": 4, "build_s": 0.1,
             "size_bytes": 4096, "exact": {"users_per_s": 100.0, **timing},
             "index": [{"probes": 1, "default": True, "recall": 0.5, "users_per_s": 34.0,
                        **timing}]}
    assert ann.table({"shapes": [shape]})[3].endswith("| 3.00 | 0.34 |")


@pytest.mark.extra("tune")
def test_tuned_alike_quick_tables_each_models_study_and_tests(tmp_path):
    """Each model's study (2 trials) and its best recipe tested: the table holds the study's
    trials and chosen settings and the test run's own figures; NCAE's margin is over the
    best baseline's mean; the same command again reads the runs, running nothing."""
    (tmp_path / "ncae.toml").write_text('feedback = "implicit"\nepochs = 3\nhidden = [8]\n')
    argv = ["--dataset", "synthetic-tiny", "--quick", "--models", "ncae,item-knn",
            "--ncae-config", str(tmp_path / "ncae.toml"), "--out", str(tmp_path / "out")]
    assert tuned_alike.main(argv) == 0
    result = json.loads((tmp_path / "out" / "tuned_alike.json").read_text())
    rows = {row["model"]: row for row in result["models"]}
    assert list(rows) == ["ncae", "item-knn"] and result["split_seeds"] == [0]
    runs = tmp_path / "out" / "runs"
    for model, row in rows.items():
        assert row["trials"] == 2 and row["chosen"]
        if model == "ncae":
            test = json.loads((runs / "test-ncae-s0" / "metrics.json").read_text())["test"]
        else:
            test = json.loads((runs / f"test-{model}-s0" / "baselines.json").read_text()
                              )["models"][model]["test"]
        assert row["test"] == [test["ndcg@100"]] and row["mean_test"] == test["ndcg@100"]
    margin = 100 * (rows["ncae"]["mean_test"] / rows["item-knn"]["mean_test"] - 1)
    assert f"NCAE's mean test ndcg@100 is {margin:+.1f}%" in (
        tmp_path / "out" / "tuned_alike.md").read_text()
    # before, its minutes said no machine, and the table no commit or date
    assert provenance_said(tmp_path / "out" / "tuned_alike.json",
                           tmp_path / "out" / "tuned_alike.md")
    logs = sorted(runs.glob("*.log"))
    stamps = [log.stat().st_mtime_ns for log in logs]
    assert tuned_alike.main(argv) == 0
    assert [log.stat().st_mtime_ns for log in logs] == stamps


def test_tuned_alike_tunes_ncae_on_implicit_feedback(tmp_path, monkeypatch, capsys):
    """NCAE's study starts from its recipe on implicit feedback where the recipe does not say,
    as the baselines learn (before, it trained on synthetic-tiny's ratings, which ndcg@100 does
    not score: a KeyError at the end); a recipe saying explicit is refused in a line, and so is
    another start for a study there (before, written to ncae-start.toml: a study of enough
    trials, kept as it was, tuned nothing from it)."""
    def reached(model, data, trials, work, recipe):
        (work / f"tune-{model}").mkdir()                 # the study, as if it had run
        raise Reached(read_recipe(recipe))
    monkeypatch.setattr(tuned_alike, "tuned", reached)
    recipe = tmp_path / "ncae.toml"
    argv = ["--dataset", "synthetic-tiny", "--quick", "--models", "ncae", "--ncae-config",
            str(recipe), "--out", str(tmp_path / "out")]
    recipe.write_text("hidden = [8]\n")
    with pytest.raises(Reached) as got:
        tuned_alike.main(argv)
    assert got.value.args[0] == {**read_recipe(recipe), "feedback": "implicit"}
    recipe.write_text("hidden = [16]\n")
    with pytest.raises(SystemExit):
        tuned_alike.main(argv)
    start = tmp_path / "out" / "runs" / "ncae-start.toml"
    assert (f"error: --ncae-config {recipe}: {start.parent / 'tune-ncae'} was tuned from other "
            f"settings ({start}): rerun with those, or choose another --out or --work"
            ) in capsys.readouterr().err
    assert read_recipe(start)["hidden"] == (8,)
    recipe.write_text('feedback = "explicit"\n')
    with pytest.raises(SystemExit):
        tuned_alike.main(argv)
    assert (f"error: --ncae-config {recipe}: feedback explicit: every model here is tuned alike "
            "on implicit feedback") in capsys.readouterr().err
    # NCAE's study is scored at its recipe's last cutoff (before: NDCG@20 against the baselines'
    # NDCG@100, and a KeyError once its test run was read)
    recipe.write_text("cutoffs = [5, 20]\n")
    with pytest.raises(SystemExit):
        tuned_alike.main(argv)
    assert (f"error: --ncae-config {recipe}: cutoffs [5, 20]: every model here is tuned and "
            "tested by ndcg@100: end them at 100, or leave them out") in capsys.readouterr().err


@pytest.mark.extra("tune")
def test_tuned_alike_refuses_a_work_folder_of_other_data(tmp_path, capsys):
    """Before, --dataset ml-100k over synthetic-tiny's --out ran nothing and tabled
    synthetic-tiny's studies and tests as ml-100k's."""
    argv = ["--dataset", "synthetic-tiny", "--quick", "--models", "ease", "--out",
            str(tmp_path / "out")]
    assert tuned_alike.main(argv) == 0
    table = (tmp_path / "out" / "tuned_alike.md").read_text()
    with pytest.raises(SystemExit) as refused:
        tuned_alike.main([*argv, "--valid-item", "latest"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and (
        f"error: --work {tmp_path / 'out' / 'runs'} holds runs on other data (--dataset "
        "synthetic-tiny): rerun with those flags, or choose another --out or --work") in err
    assert (tmp_path / "out" / "tuned_alike.md").read_text() == table


@pytest.mark.extra("tune")
def test_tuned_alike_counts_an_earlier_study_continues_its_own_and_retests_a_stale_run(tmp_path):
    """--also's study counts in the model's trials and minutes and the recipe is the best of
    the model's studies on validation; a larger --trials continues the model's own study; a
    test folder that ran another recipe is run again."""
    def table(*flags):
        argv = ["--dataset", "synthetic-tiny", "--models", "item-knn", "--split-seeds", "0",
                "--out", str(tmp_path / "out"), *flags]
        assert tuned_alike.main(argv) == 0
        return json.loads((tmp_path / "out" / "tuned_alike.json").read_text())["models"][0]

    runs = tmp_path / "out" / "runs"
    table("--trials", "2")
    shutil.copytree(runs / "tune-item-knn", tmp_path / "earlier")   # an earlier study of 2
    also = ("--also", f"item-knn={tmp_path / 'earlier'}")
    ran = runs / "test-item-knn-s0.toml"                            # the recipe the test ran
    ran.write_text('model = "item-knn"\nk = 3\nshrink = 0.0\n')  # ... as if another one
    log = runs / "test-item-knn-s0.log"
    before = log.stat().st_mtime_ns
    row = table("--trials", "5", *also)
    studies = [tmp_path / "earlier", runs / "tune-item-knn"]
    searched = [effort.of_study(study / "best.toml") for study in studies]
    assert [s["trials"] for s in searched] == [2, 3] and row["trials"] == 5
    assert row["minutes"] == pytest.approx(sum(s["minutes"] for s in searched))
    best = max(studies, key=lambda s: json.loads((s / "tune.json").read_text())["best"]["value"])
    assert row["recipe"] == str(best / "best.toml")
    assert log.stat().st_mtime_ns > before and read_recipe(ran) == read_recipe(row["recipe"])
    assert "| 5 (2 studies) |" in (tmp_path / "out" / "tuned_alike.md").read_text()
    with pytest.raises(SystemExit) as refused:
        table("--trials", "2", *also)
    assert refused.value.code == 2


@pytest.mark.extra("tune")
def test_tuned_alike_refuses_an_earlier_study_scored_otherwise(tmp_path, capsys):
    """--also STUDY whose trials were scored by another figure, on another split's validation,
    is refused in a line before any run (before, its recall@100 of 1.0 beat the studies'
    NDCG@100, and its recipe was tabled as chosen on seed 0's validation)."""
    from ncae_cuda.commands import tune
    earlier, out = tmp_path / "earlier", tmp_path / "out"
    assert tune.main(["--model", "item-knn", "--dataset", "synthetic-tiny", "--metric",
                      "recall", "--split-seed", "1", "--trials", "1", "--out",
                      str(earlier)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        tuned_alike.main(["--dataset", "synthetic-tiny", "--models", "item-knn", "--trials",
                          "2", "--split-seeds", "0", "--also", f"item-knn={earlier}",
                          "--out", str(out)])
    assert refused.value.code == 2
    assert (f"--also item-knn={earlier}: {earlier} scored its trials otherwise (metric: "
            "recall@100 -> ndcg@100; split_seeds: [1] -> [0]): tune it as this command's "
            "studies are, or leave it out") in capsys.readouterr().err
    assert not (out / "runs" / "tune-item-knn").exists()


@pytest.mark.extra("tune")
def test_tuned_alike_tunes_on_the_first_split_seeds_validation(tmp_path):
    """The studies tune on the first of --split-seeds, as the table says (before: on split
    seed 0 whatever --split-seeds said, while the table said 'chosen on seed 1's
    validation')."""
    out = tmp_path / "out"
    assert tuned_alike.main(["--dataset", "synthetic-tiny", "--models", "item-knn", "--trials",
                             "1", "--split-seeds", "1", "--out", str(out)]) == 0
    held = json.loads((out / "runs" / "tune-item-knn" / "tune.json").read_text())
    assert held["scored"]["split_seeds"] == [1]
    assert "chosen on seed 1's validation" in (out / "tuned_alike.md").read_text()


def test_recommend_time_quick(tmp_path):
    assert recommend_time.main(["--dataset", "synthetic-tiny", "--quick", "--out",
                                str(tmp_path)]) == 0
    result = json.loads((tmp_path / "recommend_time.json").read_text())
    assert [r["model"] for r in result["runs"]] == ["implicit, user-based, hidden 8",
                                                    "explicit, item-based, hidden 8"]
    assert all(r["median_seconds"] > 0 for r in result["runs"])
    # -n 100 of 50 items: a top of all 50 is what was timed (before, titled "Top-100")
    assert result["n"] == result["items"] == 50
    assert (tmp_path / "recommend_time.md").read_text().startswith("# Top-50 for every user")


def test_reader_speed_quick(tmp_path, temporary):
    assert reader_speed.main(["--rows", "2000", "--repeats", "2", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "reader_speed.json").read_text())
    assert result["rows"] == 2000 and set(result["cases"]) == set(reader_speed.CASES)
    for case in result["cases"].values():
        assert len(case["seconds"]) == 2 and case["median"] > 0 and case["bytes"] > 2000 * 10
    assert list(temporary.iterdir()) == []


def test_report_says_what_it_wrote(tmp_path, monkeypatch, capsys):
    page = tmp_path / "performance.md"
    page.write_text(report.PAGE.read_text())
    monkeypatch.setattr(report, "PAGE", page)
    assert report.main([]) == 0
    assert "performance tables are already what" in capsys.readouterr().out
    page.write_text(page.read_text().replace(report.BEGIN, report.BEGIN + "\nstale"))
    assert report.main(["--check"]) == 1
    assert report.main([]) == 0
    assert f"wrote {page}'s performance tables" in capsys.readouterr().out
    assert page.read_text() == report.PAGE.read_text() == (
        report.ROOT / "docs" / "performance.md").read_text()


def test_warm_start_quick(tmp_path, temporary):
    out = tmp_path / "out"
    assert warm_start.main(["--quick", "--device", "cpu", "--out", str(out)]) == 0
    result = json.loads((out / "warm_start.json").read_text())
    assert set(result["cases"]) == set(warm_start.CASES) and result["commit"]
    split = splits.by_time(datasets.load("synthetic-tiny"), test_ratio=0.1, valid_ratio=0.05)
    for case, found in result["cases"].items():
        run = found["seeds"]["0"]
        assert run["data"]["test"] == split.test.nnz
        assert run["data"]["cold_test"]["entries"] == split.cold_test.nnz
        epochs = run["warm_epochs_to_cold_best"]
        assert epochs is None or 1 <= epochs <= 4
        for kind in ("cold", "warm"):
            for part in ("test", "cold_test"):
                figures = run[f"{kind}_{part}"]
                assert set(figures) == set(warm_start.TEST_FIGURES[case])
                assert all(0 < v < 5 for v in figures.values())
        for kind in ("cold", "warm"):       # a figure an epoch: the test curve's fit runs all
            assert len(run["curves"][kind]["test"]) == warm_start.QUICK_EPOCHS
            assert 1 <= len(run["curves"][kind]["valid"]) <= warm_start.QUICK_EPOCHS
        assert set(found["seed_mean"]) == {"valid", "test"}
    text = (out / "warm_start.md").read_text()
    assert "implicit (ml-100k-implicit.toml)" in text
    assert "the test (fits on all 90%, --curves: never chosen on) curves averaged" in text
    assert list(temporary.iterdir()) == []


def test_warm_start_takes_the_warm_fits_learning_rate(tmp_path, temporary):
    out = tmp_path / "out"
    assert warm_start.main(["--quick", "--device", "cpu", "--warm-lr", "3e-4",
                            "--out", str(out)]) == 0
    result = json.loads((out / "warm_start.json").read_text())
    assert result["warm_lr"] == 3e-4
    recipe_lr = read_toml(warm_start.CASES["explicit"])["lr"]
    assert result["cases"]["explicit"]["seeds"]["0"]["lr"] == {"cold": recipe_lr, "warm": 3e-4}
    assert "the warm fits at --lr 0.0003" in (out / "warm_start.md").read_text()


def test_warm_start_reads_the_curves_averaged_over_the_seeds():
    def run(cold_valid, warm_valid, higher=False):
        test = {"cold": [9.0] * len(cold_valid), "warm": [9.0] * len(warm_valid)}
        return {"higher": higher, "curves": {
            "cold": {"valid": cold_valid, "test": test["cold"]},
            "warm": {"valid": warm_valid, "test": test["warm"]}}}
    # cold means over the 3 epochs both seeds ran: 1.0, 0.8, 0.75 (seed 1's 4th epoch is cut);
    # warm means 0.9, 0.75: as good as the cold best at its epoch 2
    runs = [run([1.2, 0.8, 0.7, 0.1], [0.9, 0.8]), run([0.8, 0.8, 0.8], [0.9, 0.7, 0.9])]
    reading = warm_start.seed_mean_reading(runs)
    assert reading["valid"] == pytest.approx({"cold_best": 0.75, "cold_best_epoch": 3,
                                              "cold_epochs": 3, "warm_epochs_to_it": 2,
                                              "warm_epochs": 2})
    assert reading["test"]["cold_best_epoch"] == 1 and reading["test"]["warm_epochs_to_it"] == 1
    higher = [run([0.1, 0.3], [0.2, 0.25], higher=True)]
    assert warm_start.seed_mean_reading(higher)["valid"] == {
        "cold_best": 0.3, "cold_best_epoch": 2, "cold_epochs": 2, "warm_epochs_to_it": None,
        "warm_epochs": 2}


def test_warm_start_counts_the_epochs_and_seconds_to_a_validation_figure():
    history = [{"epoch": e, "phase": "select", "seconds": 0.5 * e, "valid": {"rmse": r}}
               for e, r in ((1, 1.0), (2, 0.8), (3, 0.7))]
    history += [{"epoch": 1, "phase": "refit", "seconds": 9.0}]
    assert warm_start.reached({"history": history}, "rmse", False, 0.8) == (2, 1.5)
    assert warm_start.reached({"history": history}, "rmse", False, 0.69) is None
    assert warm_start.reached({"history": history}, "rmse", True, 0.9) == (1, 0.5)


def test_a_studys_effort_counts_its_finished_trials_and_their_minutes(tmp_path):
    # the trials.csv study_outputs writes: a failed or running trial is not one --trials counts
    (tmp_path / effort.TABLE).write_text(
        "trial,state,valid ndcg@100,best epoch,last epoch,seconds,worker,error\n"
        "0,COMPLETE,0.3,4,4,90.0,h:1,\n1,PRUNED,0.1,,2,30.0,h:1,\n"
        "2,FAIL,,,,600.0,h:2,boom\n3,RUNNING,,,,,h:2,\n")
    assert effort.of_study(tmp_path / "best.toml") == {"by": "study", "trials": 2,
                                                       "minutes": 2.0}
    assert effort.of_study(tmp_path / "other" / "best.toml") is None      # a recipe by hand
    assert effort.columns(effort.of_grid(12, 90.0)) == {"trials": "12 (grid)", "minutes": "1.5"}
    # a study's device named beside a run on another only (python -m ncae_cuda.baselines'
    # table, which gives none, marked every study "on cpu" before)
    study = {"by": "study", "trials": 2, "minutes": 0.5, "jobs": 2, "device": "gpu"}
    assert [effort.columns(study, device)["minutes"] for device in (None, "gpu", "cpu")] == [
        "0.5 (2 jobs)", "0.5 (2 jobs)", "0.5 (2 jobs, on gpu)"]


# python -m NAME FOLDER: a command that stops as a study does at a signal, its write (the
# study's journal) ended first: FOLDER/started once it runs, FOLDER/whole once that write is
STOPPING_AFTER_A_WRITE = """
import pathlib, signal, sys, time
signals = {signal.SIGINT, signal.SIGTERM}
signal.pthread_sigmask(signal.SIG_BLOCK, signals)        # taken below, whenever it came
folder = pathlib.Path(sys.argv[1])
(folder / "started").touch()
signal.sigwait(signals)
time.sleep(1)                                            # the write under way
(folder / "whole").touch()
sys.exit(130)
"""


def test_a_ctrl_c_in_tuned_alike_waits_for_the_study_to_stop(tmp_path, monkeypatch):
    """A Ctrl-C to bench.tuned_alike while it runs a package command: the command gets it and
    is waited for, stopping where it stops cleanly, and then the bench stops. Before,
    subprocess.run killed it 0.25 s after the signal, perhaps within a write to its journal
    (and a command not signalled itself, never told, lost its write the same way)."""
    (tmp_path / "stopping_after_a_write.py").write_text(STOPPING_AFTER_A_WRITE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
        str(tmp_path), str(REPOSITORY), os.environ.get("PYTHONPATH")])))

    def ctrl_c_once_started() -> None:
        while not (tmp_path / "started").exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=ctrl_c_once_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        tuned_alike.run(["stopping_after_a_write", str(tmp_path)], tmp_path / "log")
    assert (tmp_path / "whole").exists()


def clients(pid: int, connected: bool) -> int:
    """How many of process `pid`'s children are multiprocessing's (spawn_main) (Linux's /proc);
    connected: those alone that hold a socket, so are past their start."""
    found = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if (parent == pid and "spawn_main" in (stat.parent / "cmdline").read_text()
                    and (not connected or any(os.readlink(fd).startswith("socket:")
                                              for fd in (stat.parent / "fd").iterdir()))):
                found += 1
        except (OSError, IndexError, ValueError):         # a process that ended meanwhile
            continue
    return found


def session_left(session: int) -> list[str]:
    """The command lines of the processes still in `session` (Linux's /proc)."""
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == session:
                left.append((stat.parent / "cmdline").read_text().replace("\0", " "))
        except (OSError, IndexError, ValueError):
            continue
    return left


@pytest.mark.extra("serve")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
@pytest.mark.parametrize("signalled", ["the terminal's group", "the bench alone"])
@pytest.mark.parametrize("connected", [False, True], ids=["as they start", "once connected"])
def test_a_ctrl_c_ends_serve_load_s_client_processes_quietly_with_it(tmp_path, signalled,
                                                                     connected):
    """SIGINT while bench.serve_load's clients run in processes of their own, or start: the
    bench ends in its one line, exit 130, its clients and server with it, nothing of theirs
    said after the signal. Before, a terminal's Ctrl-C (to the whole group) had each client
    print a KeyboardInterrupt traceback, and a bench signalled alone waited for them to run
    out their --seconds; a Ctrl-C as they started, taken by another thread of the bench than
    the one that blocked it, was raised within a client's start: that client, its process
    unknown to the bench, ran on (waiting for the others at the barrier, or printing
    FileNotFoundError once the bench had removed its semaphores); and the server said
    uvicorn's "Shutting down" lines after the signal."""
    out = tmp_path / "out"
    env = {**os.environ, "TMPDIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY),
                                                       os.environ.get("PYTHONPATH")]))}
    with open(tmp_path / "stderr", "w+") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.serve_load", "--quick", "--clients", "2",
             "--client-processes", "2", "--requests", "1000000", "--seconds", "600", "--out",
             str(out)], cwd=REPOSITORY, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
            start_new_session=True)                       # a group of its own, a terminal's
        try:
            deadline = time.monotonic() + 300
            while (clients(proc.pid, connected) < (2 if connected else 1)
                   and proc.poll() is None and time.monotonic() < deadline):
                time.sleep(0.05 if connected else 0.001)
            assert proc.poll() is None, stderr.read()
            before = os.fstat(stderr.fileno()).st_size      # what was said before the signal
            if signalled == "the bench alone":
                proc.send_signal(signal.SIGINT)
            else:
                os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(120)
            deadline = time.monotonic() + 60                # (multiprocessing's resource
            while session_left(proc.pid) and time.monotonic() < deadline:    # tracker ends
                time.sleep(0.1)                                              # as it finds)
            left = session_left(proc.pid)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        said = (tmp_path / "stderr").read_text()
    assert (code, said[before:]) == (130, f"\ninterrupted: nothing written to {out}\n"), said
    assert not left
