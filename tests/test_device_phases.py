"""bench/gpu_check.sh's dry run: each phase a lent GPU's short window has (`first`, `more`,
`sanitize`) runs every step with the device's flags on tiny data, the GPU's steps emulated or on
the CPU, so that a renamed flag, a missing file or a broken summary fails here and not on the
device."""
import os
import re
import signal
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import conftest
import pytest

from ncae_cuda import ops
from ncae_cuda.ops.emulator import CXX

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu_check.sh"
# what each phase must bring back: a missing one is a step that wrote nothing
PACKED = {
    "first": ["device.txt", "check.log", "check.json", "gpu-tests.log", "gpu-tests.xml",
              "epoch-time/epoch_time.json", "epoch-time/epoch_time.md",
              "peer-ml10m/peer_torch.json", "peer-ml20m/peer_torch.json",
              "recommend/recommend_time.json", "recommend/recommend_time.md"],
    "more": ["device.txt", "launches/launches.json", "versions-gather_forward.log",
             "versions-scatter_backward.log", "versions-adam.log", "kernel-peers/kernel_peers.json",
             "serve-load/serve_load.json", "serve-load/serve_load.md"],
    "sanitize": ["device.txt", "sanitizer.txt", "memcheck.log", "memcheck.xml", "racecheck.log",
                 "racecheck.xml", "initcheck.log", "initcheck.xml", "synccheck.log",
                 "synccheck.xml"],
}
# the phases whose dry runs need the bench and serve extras (torch, the server): started together
# in CI's run of the extras' tests; sanitize's needs none, and runs in the quick start's suite
WITH_EXTRAS = ("first", "more")
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")

# lines each phase's summary prints of its steps' results (the device's answer keeps only its
# output's end: the summary is what a window brings back for sure)
SUMMARY = {
    "first": ["ops agree with the reference", "s/epoch (x the floor on that device",
              "| device | model | median s |",
              *(f"peer-{shape}/peer_torch.md:{row}" for shape in ("ml10m", "ml20m")
                for row in ("| ncae_cuda", "| torch", "- **torch / ncae_cuda:**"))],
    "more": ["| shape | ops per step |", "| shape | op | ours us |",
             "# python -m ncae_cuda.serve under load", "3: corrections a step ahead (in use)"],
    "sanitize": ["compute-sanitizer: none on a dry run",
                 *(f"{tool}: errors found: 0 (a dry run: no compute-sanitizer); pytest: "
                   for tool in TOOLS)],
}


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory) -> dict:
    """Each phase's dry run, both started at once (their steps are mostly one process on one
    core, and CI's machine has two), each waited for by the test that reads it:
    {phase: (its OUTPUT_FOLDER, its process, the folder of its stdout and stderr)}."""
    env = {**os.environ, "PYTHON": sys.executable, "COMMIT": "dry"}
    started = {}
    for phase in WITH_EXTRAS:
        out, printed = tmp_path_factory.mktemp(phase), tmp_path_factory.mktemp(f"{phase}-printed")
        # files, not pipes: the run waited for second never blocks on a full pipe
        with open(printed / "stdout", "w") as stdout, open(printed / "stderr", "w") as stderr:
            started[phase] = out, subprocess.Popen(
                ["bash", str(SCRIPT), phase, str(out), "--dry"], env=env, stdout=stdout,
                stderr=stderr, start_new_session=True), printed
    yield started
    for _, process, _ in started.values():  # where a test stopped before its run ended
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.extra("bench")          # bench.peer_torch: torch
@pytest.mark.extra("serve")          # bench.serve_load: the server
@pytest.mark.parametrize("phase", WITH_EXTRAS)
def test_a_dry_run_runs_every_step_and_packs_what_the_device_would(phase, dry_runs):
    out, process, printed = dry_runs[phase]
    process.wait(timeout=600)
    stdout, stderr = ((printed / name).read_text() for name in ("stdout", "stderr"))
    assert_packed(phase, out, process.returncode, stdout, stderr)


@pytest.mark.skipif(CXX is None, reason="no g++: the emulated backend the dry run tests on")
def test_the_sanitize_dry_run_runs_its_selections_emulated_and_packs_them(tmp_path):
    """The sanitizer's tests run, not only collected: their selections are what a dry run can
    check (a node id renamed, a -k that selects none), and the emulated cases are quick."""
    env = {**os.environ, "PYTHON": sys.executable, "COMMIT": "dry"}
    done = subprocess.run(["bash", str(SCRIPT), "sanitize", str(tmp_path), "--dry"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert_packed("sanitize", tmp_path, done.returncode, done.stdout, done.stderr)
    counts = re.findall(r"^\w+: errors found: .*; pytest: (.*)$", done.stdout, re.M)
    assert len(counts) == len(TOOLS) and all(re.fullmatch(r"\d+ passed(, \d+ deselected)? in .*",
                                                          count) for count in counts), counts


def assert_packed(phase: str, out: Path, returncode: int, stdout: str, stderr: str) -> None:
    """A dry run of `phase` into `out` passed, packed every file the device's would and printed
    its summary."""
    last = stdout.strip().splitlines()[-1]
    assert returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert last == (f"phase {phase}: 0 failed; everything is in "
                    f"{out}/{phase}.tar.gz"), last
    with tarfile.open(out / f"{phase}.tar.gz") as packed:
        names = {name.removeprefix(f"{phase}/") for name in packed.getnames()}
        facts = packed.extractfile(f"{phase}/device.txt").read().decode()
    assert not [name for name in PACKED[phase] if name not in names]
    assert "commit dry" in facts and "(dry run: no GPU)" in facts
    assert "cuda runtime" in facts
    for line in SUMMARY[phase]:                       # the summary, printed before the last line
        assert line in stdout, line


@pytest.mark.parametrize("phase, steps", [("first", ["data-synthetic-tiny", "check",
                                                     "gpu-tests", "epoch-time", "peer-ml10m",
                                                     "peer-ml20m", "recommend"]),
                                          ("more", ["launches", "versions-gather_forward",
                                                    "versions-scatter_backward",
                                                    "versions-adam", "kernel-peers",
                                                    "serve-load"]),
                                          ("sanitize", list(TOOLS))])
def test_a_failing_step_is_named_and_fails_the_phase(tmp_path, phase, steps):
    """The script can fail: every step whose command exits non-zero is named in the last line,
    `first`'s data step, run in the background, too."""
    env = {**os.environ, "PYTHON": str(tmp_path / "no-such-python"), "COMMIT": "dry"}
    done = subprocess.run(["bash", str(SCRIPT), phase, str(tmp_path), "--dry"], env=env,
                          capture_output=True, text=True, timeout=60)
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 1
    assert last.startswith(f"phase {phase}: {len(steps)} failed: "), last
    assert sorted(re.findall(r"(\S+) \(exit 127\)", last)) == sorted(steps), last


# compute-sanitizer as it ends: memcheck's two processes report 3 errors in two kernels, racecheck
# one error (its warnings not counted), initcheck none, and synccheck stops before its summary
FAKE_SANITIZER = """#!/usr/bin/env bash
echo "fake compute-sanitizer $*"
case "$*" in
--version) echo "NVIDIA (R) Compute Sanitizer, Version 2026.1.0" ;;
"--tool memcheck "*) printf '%s\\n' "========= Invalid __global__ read of size 4 bytes" \\
    "=========     at gather_forward+0x1b0" "=========     at gather_forward+0x2c0" \\
    "=========     at topk+0x70" "========= ERROR SUMMARY: 1 error" \\
    "========= ERROR SUMMARY: 2 errors"; exit 1 ;;
"--tool racecheck "*) echo "========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)"
    exit 1 ;;
"--tool initcheck "*) echo "========= ERROR SUMMARY: 0 errors" ;;
esac
"""


def test_the_sanitizers_errors_are_counted_over_its_processes_and_fail_the_phase(tmp_path):
    """The phase on the device (a stand-in compute-sanitizer on PATH, running nothing): each
    tool's line counts what its summaries say, and a sanitizer that printed none is not read
    as a clean run."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "compute-sanitizer").write_text(FAKE_SANITIZER)
    (tools / "compute-sanitizer").chmod(0o755)
    env = {**os.environ, "PYTHON": sys.executable, "COMMIT": "fake",
           "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(SCRIPT), "sanitize", str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=60)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1
    assert lines[-1].startswith("phase sanitize: 2 failed: memcheck (exit 1) racecheck (exit 1);")
    assert [line for line in lines if ": errors found: " in line] == [
        "memcheck: errors found: 3 (2 sanitized processes) in gather_forward x2, topk x1; "
        "pytest: no count (see memcheck.log)",
        "racecheck: errors found: 1 (1 sanitized process); pytest: no count (see racecheck.log)",
        "initcheck: errors found: 0 (1 sanitized process); pytest: no count (see initcheck.log)",
        "synccheck: errors found: unknown: no compute-sanitizer summary in synccheck.log; "
        "pytest: no count (see synccheck.log)"]
    assert "NVIDIA (R) Compute Sanitizer, Version 2026.1.0" in lines
    with tarfile.open(tmp_path / "out" / "sanitize.tar.gz") as packed:
        ran = {tool: packed.extractfile(f"sanitize/{tool}.log").read().decode().splitlines()[0]
               for tool in TOOLS}
    for tool, command in ran.items():      # every process pytest starts, the GPU's cases
        assert command.startswith(f"fake compute-sanitizer --tool {tool} --target-processes all "
                                  f"--error-exitcode 1 {sys.executable} -m pytest "), command
        assert "--cuda-unpooled" in command and "gpu-emulated" not in command, command
    assert "[gpu-long-runs]" in ran["racecheck"] and "-k gpu and not emulated" in ran["memcheck"]


def test_cuda_unpooled_turns_cupys_memory_pool_off_only_where_there_is_a_gpu(monkeypatch):
    allocators = []
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(set_allocator=allocators.append))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    for has_cuda, unpooled in [(True, False), (False, True), (True, True)]:
        monkeypatch.setattr(ops, "HAS_CUDA", has_cuda)
        config = types.SimpleNamespace(getoption={"cuda_unpooled": unpooled}.__getitem__)
        conftest.pytest_configure(config)
    assert allocators == [None]           # CuPy's default: every allocation a cudaMalloc


def test_the_suite_names_missing_extras_from_a_checkout_not_installed(monkeypatch):
    """The device runs the checkout from PYTHONPATH, not installed: without the package's own
    metadata the suite still says which extra a test needs (the first device run's test step
    failed to collect four files on this)."""
    import importlib.metadata

    import helpers
    installed = {name: helpers.missing_extra(name) for name in ("tune", "serve", "cuda13")}
    requires = importlib.metadata.requires

    def not_installed(name):
        if name == "ncae-cuda":
            raise importlib.metadata.PackageNotFoundError(name)
        return requires(name)
    monkeypatch.setattr(importlib.metadata, "requires", not_installed)
    assert {name: helpers.missing_extra(name) for name in installed} == installed


@pytest.mark.parametrize("args", [["tests", "OUT", "--dry"], ["first"], ["first", "OUT", "--wet"],
                                  ["firts", "OUT"]])
def test_a_wrong_call_says_how_to_call_it_before_any_work(args, tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode != 0
    assert not (tmp_path / "OUT").exists()
    assert "usage: bench/gpu_check.sh first|more|" in done.stderr
