"""One model across processes (--shard columns, ncae_cuda/model/distributed.py), with real
processes: torchrun starts 2 or 3 ranks that talk over gloo, on the CPU backend (the CLI) and on the
emulated GPU backend (the real kernels, through the API: tests/shard_worker.py). A sharded fit
agrees with one process to float rounding, reruns bit for bit, resumes after a rank is killed,
splits columns unevenly (a rank with no entry in a batch), refuses what it cannot do, and
shares the bytes its formula says."""
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import missing_extra

pytestmark = pytest.mark.extra("distributed")
pytest.importorskip("torch.distributed", reason=missing_extra("distributed"))

import shard_worker  # noqa: E402  (torch.distributed: after the skip without it)

from ncae_cuda import NCAE, ops  # noqa: E402
from ncae_cuda.commands import train  # noqa: E402
from ncae_cuda.data import datasets, splits
from ncae_cuda.model.modelfile import read  # noqa: E402
from ncae_cuda.ops.emulator import CXX, build, emulated_backend  # noqa: E402

HERE = Path(__file__).resolve().parent
TINY = ["--dataset", "synthetic-tiny", "--device", "cpu", "--patience", "0"]
CASES = {   # a CLI run's flags: the paper's three ways to train, sharded
    "explicit, 2 layers": [*TINY, "--hidden", "12,7", "--epochs", "4"],
    "NCAE+, augmented": [*TINY, "--feedback", "implicit", "--hidden", "9", "--epochs", "4",
                         "--augment-eps", "0.2"],
    "S+U+S pre-training": [*TINY, "--hidden", "10,6", "--epochs", "2", "--pretrain", "S+U+S",
                           "--pretrain-epochs", "2"],
}
B = 32                              # fewer than the rows of every case: a batch is at most them


def torchrun(ranks: int, *args, wait: bool = True, **kwargs):
    """`ranks` processes of one job on this machine, on a free port."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={ranks}", *map(str, args)]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "OMP_NUM_THREADS": "1"}
    if not wait:
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **kwargs)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                          **kwargs)


def sharded_train(ranks: int, flags: list, out: Path, *extra) -> subprocess.CompletedProcess:
    done = torchrun(ranks, "-m", "ncae_cuda.train", "--shard", "columns", *flags, "--out", out,
                    *extra)
    return done


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def params(out: Path) -> np.ndarray:
    return read(out / "model.npz", "model")[1]["params"]


def assert_agree(sharded: dict, one: dict) -> None:
    """Per-epoch losses and the test figures of two runs, to float rounding."""
    np.testing.assert_allclose([h["loss"] for h in sharded["history"] if "loss" in h],
                               [h["loss"] for h in one["history"] if "loss" in h], rtol=2e-5)
    for key, value in one["test"].items():
        if isinstance(value, float):
            np.testing.assert_allclose(sharded["test"][key], value, rtol=1e-4, err_msg=key)


def flags_of(case: str) -> list:
    return [*CASES[case], "--batch-size", str(B)]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """sharded(case): (its --out, what it printed) of the 2-process run of `case`, made once: the
    rerun test runs the NCAE+ case's again beside the one its agreement test reads, and the
    refusals resume a copy of it with 3 processes."""
    made = {}

    def run(case: str) -> tuple[Path, str]:
        if case not in made:
            out = tmp_path_factory.mktemp("sharded") / "run"
            done = sharded_train(2, flags_of(case), out)
            assert done.returncode == 0, done.stderr[-3000:]
            made[case] = out, done.stdout
        return made[case]
    return run


@pytest.mark.parametrize("case", CASES)
def test_a_sharded_run_agrees_with_one_process(case, sharded, tmp_path):
    flags = flags_of(case)
    out, printed = sharded(case)
    assert train.main([*flags, "--out", str(tmp_path / "one")]) == 0
    one = metrics(tmp_path / "one")
    assert_agree(metrics(out), one)
    np.testing.assert_allclose(params(out), params(tmp_path / "one"),
                               atol=1e-4)          # the gathered model: the one-process format
    shard = metrics(out)["shard"]
    assert shard["processes"] == 2 and len(shard["columns"]) == 3
    hidden = [int(k) for k in flags[flags.index("--hidden") + 1].split(",")]
    formula = 4 * B * (hidden[0] + hidden[-1] + 1)          # B (K1 + K_L + 1) floats a step
    assert shard["collective_bytes_per_step"] == formula
    # rank 0 speaks for the run: one log, not two
    assert printed.count("select: training on the training part") == 1


def test_a_sharded_rerun_is_bit_identical_and_its_model_serves_in_one_process(sharded, tmp_path):
    first, _ = sharded("NCAE+, augmented")
    done = sharded_train(2, flags_of("NCAE+, augmented"), tmp_path / "again")
    assert done.returncode == 0, done.stderr[-3000:]
    np.testing.assert_array_equal(params(first), params(tmp_path / "again"))
    model = NCAE.load(first / "model.npz", device="cpu")
    data = datasets.load("synthetic-tiny")
    split = splits.leave_one_out(data)
    fold = split.fold_validation()
    figures = model.evaluate(split.test, exclude=split.valid)
    assert figures["ndcg@100"] == pytest.approx(metrics(first)["test"]["ndcg@100"])
    items, _ = model.recommend(data.user_ids[:2], n=5)
    assert items.shape == (2, 5) and fold.train.nnz > 0


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    if CXX is None:
        pytest.skip("no g++")
    folder = tmp_path_factory.mktemp("emulator")
    build(folder)                       # once, before the ranks load it
    return folder


@pytest.fixture(scope="module")
def emulated_ranks(emulator, tmp_path_factory) -> Path:
    """The folder of every shard_worker case's 3-rank fit (one torchrun job fits them in turn):
    CASE/rank{r}.json and CASE/model.npz."""
    out = tmp_path_factory.mktemp("emulated-ranks")
    done = torchrun(3, HERE / "shard_worker.py", emulator, out, *shard_worker.CASES)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("case", shard_worker.CASES)
def test_three_ranks_on_the_emulated_gpu_agree_with_one_process(case, emulator, emulated_ranks):
    folder = emulated_ranks / case
    ranks = [json.loads((folder / f"rank{r}.json").read_text()) for r in range(3)]
    name, kind, settings = shard_worker.CASES[case]
    if name is None:
        train_part, valid, test = shard_worker.skewed(), None, None
    else:
        data = datasets.load(name)
        split = (splits.leave_one_out(data) if kind == "loo"
                 else splits.random_split(data, 0.1, 0.1))
        train_part, valid, test = split.train, split.valid, split.test
    one = NCAE(device=emulated_backend(emulator), **settings).fit(train_part, validation=valid,
                                                                  verbose=False)
    for r in ranks:                     # every rank has the same figures, to the bit
        assert r["losses"] == ranks[0]["losses"] and r.get("test") == ranks[0].get("test")
    np.testing.assert_allclose(ranks[0]["losses"], [h["loss"] for h in one.history], rtol=2e-5)
    if test is not None:
        expect = one.evaluate(test, exclude=valid)
        for key, value in expect.items():
            np.testing.assert_allclose(ranks[0]["test"][key], value, rtol=1e-4, err_msg=key)
    np.testing.assert_allclose(params(folder), one.ops.to_host(one._net.params), atol=1e-4)
    columns = [tuple(r["columns"]) for r in ranks]        # contiguous, every column once
    assert columns[0][0] == 0 and all(a[1] == b[0] for a, b in zip(columns, columns[1:]))
    assert columns[-1][1] == one.data.n_cols
    hidden = settings["hidden"]
    formula = 4 * settings["batch_size"] * (hidden[0] + hidden[-1] + 1)
    assert all(r["collective_bytes_per_step"] == formula for r in ranks)
    if case == "skewed":
        assert ranks[-1]["least_entries"] == 0           # a batch with none of its entries
    if "recommend" in ranks[0]:                          # every rank's top M, merged
        users = one.user_ids[shard_worker.USERS]
        items = one.item_ids[shard_worker.ITEMS]
        for got, expect in ((ranks[0]["recommend"], one.recommend(users, n=7)),
                            (ranks[0]["similar"], one.similar_items(items, n=4))):
            np.testing.assert_array_equal(got[0], expect[0])
            np.testing.assert_allclose(got[1], expect[1], rtol=1e-4)


@pytest.mark.skipif(not ops.HAS_CUDA, reason=ops.NO_CUDA_REASON)
def test_one_nccl_rank_on_the_gpu_agrees_with_one_gpu_process(tmp_path):
    flags = ["--dataset", "synthetic", "--device", "gpu", "--hidden", "128", "--epochs", "3",
             "--patience", "0"]
    done = sharded_train(1, flags, tmp_path / "nccl")
    assert done.returncode == 0, done.stderr[-3000:]
    assert train.main([*flags, "--out", str(tmp_path / "one")]) == 0
    assert_agree(metrics(tmp_path / "nccl"), metrics(tmp_path / "one"))


def _pid_of_rank(parent: int, rank: int) -> int | None:
    """The process of torchrun `parent` whose RANK is `rank`, once it runs."""
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit():
                continue
            stat = (proc / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != parent:
                continue
            if f"RANK={rank}\0".encode() in (proc / "environ").read_bytes().replace(
                    b"LOCAL_RANK", b"L"):
                return int(proc.name)
        except (OSError, ValueError):
            continue
    return None


def past_checkpoint(job: subprocess.Popen, out: Path, generation: int) -> None:
    """Once `job`'s selection fit in `out` has checkpointed `generation` (or 300 s have
    passed); the job's output where it ended before."""
    manifest = out / "checkpoint-select.npz"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert job.poll() is None, job.communicate()[1][-3000:]
        if manifest.exists() and read(manifest, "checkpoint")[0]["generation"] >= generation:
            return
        time.sleep(0.05)


def past_epoch(job: subprocess.Popen, epoch: int) -> None:
    """Once `job` has printed its selection fit's line of `epoch` (rank 0 prints it once every
    rank has taken the epoch's steps); a failure with the job's errors where it ended before."""
    for line in job.stdout:
        if line.startswith(f"epoch {epoch:3d} |"):
            return
    job.wait()
    pytest.fail(f"the job ended before epoch {epoch}: {job.stderr.read()[-3000:]}")


SYNTHETIC = ["--dataset", "synthetic", "--device", "cpu", "--hidden", "64", "--valid-ratio", "0",
             "--checkpoint-every", "0"]               # a checkpoint each epoch
KILLED = [*SYNTHETIC, "--epochs", "16"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted") / "whole"
    whole = sharded_train(2, KILLED, out)
    assert whole.returncode == 0, whole.stderr[-3000:]
    return out


@pytest.mark.parametrize("victim", [0, 1])
def test_a_killed_rank_ends_the_job_and_resume_ends_where_an_uninterrupted_run_does(
        victim, uninterrupted, tmp_path):
    flags = KILLED
    job = torchrun(2, "-m", "ncae_cuda.train", "--shard", "columns", *flags, "--out",
                   tmp_path / "cut", wait=False)
    past_checkpoint(job, tmp_path / "cut", 3)           # past a few epochs' checkpoints
    pid = _pid_of_rank(job.pid, victim)
    assert pid is not None, f"rank {victim} was not found running"
    os.kill(pid, signal.SIGKILL)
    _, stderr = job.communicate(timeout=300)
    assert job.returncode != 0, stderr[-2000:]
    # the other rank says which stopped and how to go on: from the engine's error, or from the
    # launcher's SIGTERM; and nothing of ours after it (a late SIGTERM raised in the exit)
    survivor = 1 - victim
    said = re.search(rf"error \(rank {survivor}\): (rank {victim} stopped \(|this process got "
                     rf"SIGTERM, the launcher's when rank {victim} has stopped).*: the job ends; "
                     "run it again with --resume to continue from its last checkpoint\n", stderr)
    assert said and f"[rank{survivor}]: Traceback" not in stderr, stderr[-3000:]
    assert not (tmp_path / "cut" / "model.npz").exists()
    resumed = sharded_train(2, flags, tmp_path / "cut", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # from the checkpoint, past the epochs it holds: a rerun from the start would end with the
    # same parameters too
    assert "epoch   1 |" not in resumed.stdout and "epoch  16 |" in resumed.stdout
    np.testing.assert_array_equal(params(tmp_path / "cut"), params(uninterrupted))


def test_a_frozen_rank_ends_the_job_after_shard_timeout(tmp_path):
    """A process that hangs without ending (SIGSTOP here; a machine that stops answering) is
    not one the launcher sees stop: before --shard-timeout the other waited in its collective
    for torch.distributed's default, 30 minutes on gloo."""
    timeout = 5
    job = torchrun(2, "-m", "ncae_cuda.train", "--shard", "columns", *KILLED, "--out",
                   tmp_path / "frozen", "--shard-timeout", timeout, wait=False)
    past_checkpoint(job, tmp_path / "frozen", 1)
    pid = _pid_of_rank(job.pid, 1)
    assert pid is not None, "rank 1 was not found running"
    os.kill(pid, signal.SIGSTOP)
    try:        # rank 0 stops after the timeout; torchrun then ends rank 1 (SIGKILL after 30 s)
        _, stderr = job.communicate(timeout=timeout + 120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        job.kill()
    assert job.returncode != 0
    # gloo's error without its source file's name: a line a user reads
    said = re.search(r"error \(rank 0\): rank 1 stopped \(Timed out [^)[]*\): the job ends; "
                     "run it again with --resume to continue from its last checkpoint\n", stderr)
    assert said and "[rank0]: Traceback" not in stderr, stderr[-3000:]


def test_what_a_sharded_run_cannot_do_is_refused_with_a_message(sharded, tmp_path, capsys,
                                                                monkeypatch):
    two_items = tmp_path / "two.csv"                  # 2 items: too few for 3 ranks
    two_items.write_text("user,item\n" + "".join(f"{u},{i}\n" for u in range(9)
                                                  for i in range(2) if (u + i) % 3))
    done = sharded_train(3, ["--dataset", two_items, "--feedback", "implicit", "--device",
                             "cpu", "--epochs", "1"], tmp_path / "few")
    assert done.returncode != 0 and "ncae_cuda/" not in done.stderr     # no traceback of ours
    for rank in range(3):                # (torchrun prints its own when a process fails)
        assert (f"error (rank {rank}): the network's columns (the items): 2 columns cannot be "
                "shared among 3 processes") in done.stderr
    flags = flags_of("NCAE+, augmented")
    shutil.copytree(sharded("NCAE+, augmented")[0], tmp_path / "r")   # a finished 2-process run
    three = sharded_train(3, flags, tmp_path / "r", "--resume")          # other processes
    assert three.returncode != 0 and "processes: 2 -> 3" in three.stderr
    assert train.main([*flags, "--out", str(tmp_path / "r"), "--resume"]) == 2
    capsys.readouterr()
    for launchers in ("RANK", "WORLD_SIZE"):        # a process no launcher started: this one
        monkeypatch.delenv(launchers, raising=False)
    assert train.main(["--shard", "columns", *flags, "--out", str(tmp_path / "x")]) == 2
    assert "launch it with torchrun" in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "2")            # torchrun's, without --shard columns
    with pytest.raises(SystemExit):
        train.main([*flags, "--out", str(tmp_path / "y")])
    assert ("this process is one of 2 of a torch.distributed job (torchrun): one model across "
            "them takes --shard columns") in capsys.readouterr().err
    assert not (tmp_path / "y").exists()



@pytest.fixture
def a_process_of_two(tmp_path, monkeypatch):
    """This process as torchrun starts rank 0 of 2, in tmp_path, where joining the group would
    fail at once (no MASTER_ADDR) rather than wait for the other."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.chdir(tmp_path)
    return ["--shard", "columns", *TINY, "--epochs", "1"]


def test_a_sharded_run_without_out_is_refused(a_process_of_two, tmp_path, capsys):
    # before, each process dated a folder of its own (a second apart, or one taken: -2), and
    # the ranks' checkpoint files were split among them
    with pytest.raises(SystemExit):
        train.main(a_process_of_two)
    assert ("--shard columns: name the run's folder with --out, the same for every process"
            in capsys.readouterr().err)
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(ops.HAS_CUDA, reason="a GPU is there")
def test_a_sharded_run_on_a_missing_gpu_is_refused_before_joining(a_process_of_two, tmp_path,
                                                                  capsys):
    # before, CuPy's ImportError as a traceback
    out = tmp_path / "g"
    assert train.main([*a_process_of_two, "--device", "gpu", "--out", str(out)]) == 2
    assert (f"error (rank 0): --device gpu needs a CUDA GPU: {ops.NO_CUDA_REASON}"
            in capsys.readouterr().err)
    assert not out.exists()


def assert_interrupted_in_one_line(job: subprocess.Popen, out: Path) -> None:
    """`job`, sent a terminal's Ctrl-C, ends with rank 0's one line saying how to go on, and
    nothing else of any rank's (before, every rank printed the same line)."""
    _, stderr = job.communicate(timeout=300)
    # (torchrun's own traceback of the signal follows: the launcher's, not a rank's)
    ours = [line for line in stderr.splitlines() if line.startswith(("error", "interrupted"))]
    assert ours == [f"interrupted: continue with --resume --out {out}"], stderr
    assert "[rank" not in stderr and "Exception ignored" not in stderr, stderr


def test_ctrl_c_ends_a_sharded_run_with_one_line(tmp_path):
    """A terminal's Ctrl-C (SIGINT to torchrun's process group; torchrun hands it to each
    rank), once every rank trains: past its first epoch, its compiles are done, and epochs
    enough are left that the signal comes in one."""
    job = torchrun(2, "-m", "ncae_cuda.train", "--shard", "columns", *SYNTHETIC, "--epochs",
                   1000, "--out", tmp_path / "cut", wait=False, start_new_session=True)
    past_epoch(job, 1)
    os.killpg(job.pid, signal.SIGINT)
    assert_interrupted_in_one_line(job, tmp_path / "cut")


def test_ctrl_c_in_a_compile_ends_a_sharded_run_with_one_line(tmp_path, monkeypatch):
    """Ctrl-C in the first seconds of a job, while its ranks compile: in rank 1, inside
    llvmlite's callback of its first compile (tests/ctrl_c_in_compile.py). Before, Python
    dropped the KeyboardInterrupt there: the rank went on, to say "rank 0 stopped" once rank 0
    had, or its compile, cut short, failed with Numba's RuntimeError ("no compiled object
    yet"), a traceback."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))     # compiles, not loads
    job = torchrun(2, HERE / "ctrl_c_in_compile.py", "--shard", "columns", *KILLED, "--out",
                   tmp_path / "cut", wait=False)
    assert_interrupted_in_one_line(job, tmp_path / "cut")
