"""bench/gpu_check.sh's dry run: each phase a lent GPU's short window has (`first`, `more`) runs
every step with the device's flags on tiny data, the GPU's steps emulated or on the CPU, so that
a renamed flag, a missing file or a broken summary fails here and not on the device."""
import os
import re
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

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
}

# lines each phase's summary prints of its steps' results (the device's answer keeps only its
# output's end: the summary is what a window brings back for sure)
SUMMARY = {
    "first": ["ops agree with the reference", "s/epoch (x the floor on that device",
              "| device | model | median s |",
              *(f"peer-{shape}/peer_torch.md:{row}" for shape in ("ml10m", "ml20m")
                for row in ("| ncae_cuda", "| torch", "- **torch / ncae_cuda:**"))],
    "more": ["| shape | ops per step |", "| shape | op | ours us |",
             "# python -m ncae_cuda.serve under load", "3: corrections a step ahead (in use)"],
}


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory) -> dict:
    """Each phase's dry run, both started at once (their steps are mostly one process on one
    core, and CI's machine has two), each waited for by the test that reads it:
    {phase: (its OUTPUT_FOLDER, its process, the folder of its stdout and stderr)}."""
    env = {**os.environ, "PYTHON": sys.executable, "COMMIT": "dry"}
    started = {}
    for phase in PACKED:
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
@pytest.mark.parametrize("phase", PACKED)
def test_a_dry_run_runs_every_step_and_packs_what_the_device_would(phase, dry_runs):
    out, process, printed = dry_runs[phase]
    process.wait(timeout=600)
    stdout, stderr = ((printed / name).read_text() for name in ("stdout", "stderr"))
    last = stdout.strip().splitlines()[-1]
    assert process.returncode == 0, stdout[-3000:] + stderr[-3000:]
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
                                                    "serve-load"])])
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
