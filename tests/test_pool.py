"""The run pool (ncae_cuda.runs.pool) under the experiments: the same tables whatever the number of
jobs, tasks and the order the runs end in; a rerun that skips what is finished and resumes what
was killed; another experiment's runs refused, never overwritten; each slot its GPU and its
share of the cores."""
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ncae_cuda import cli
from ncae_cuda.commands import experiments
from ncae_cuda.runs import pool, rundir

REPO = Path(__file__).resolve().parents[1]
QUICK = ["configurations", "--dataset", "synthetic-tiny", "--quick", "--repeats", "2"]
ONE_SEED = QUICK[:-2]
# two runs at once (CI's 2 cores) where the number of jobs is not what a test checks: that the
# tables do not depend on it is test_the_tables_do_not_depend_on_jobs_or_tasks's, against --jobs 1
TWO = ["--jobs", "2"]
OUTPUTS = ("configurations.md", "configurations.csv")


def outputs(out: Path) -> dict:
    return {name: (out / name).read_bytes() for name in OUTPUTS}


@pytest.fixture(scope="module")
def two_at_once(tmp_path_factory) -> tuple[Path, str]:
    """(its --out, what it printed) of QUICK run 2 at once: one pool's run for the tests that
    read it, and for a rerun that must change nothing in it."""
    out = tmp_path_factory.mktemp("pool") / "exp"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert experiments.main([*QUICK, *TWO, "--out", str(out)]) == 0
    return out, printed.getvalue()


def test_the_tables_do_not_depend_on_jobs_or_tasks(tmp_path, capsys, two_at_once):
    assert experiments.main([*QUICK, "--out", str(tmp_path / "one")]) == 0
    shared = [*QUICK, *TWO, "--tasks", "2", "--out", str(tmp_path / "tasks")]
    assert experiments.main([*shared, "--task", "1"]) == 0
    assert "--collect writes the tables once they are" in capsys.readouterr().out
    assert not (tmp_path / "tasks" / "configurations.md").exists()
    code = experiments.main([*shared, "--collect"])
    assert code == 2 and "4 of the 8 runs are not finished" in capsys.readouterr().err
    assert experiments.main([*shared, "--task", "0"]) == 0        # the last task writes them
    assert outputs(tmp_path / "one") == outputs(two_at_once[0]) == outputs(tmp_path / "tasks")
    assert experiments.main([*shared, "--collect"]) == 0
    assert outputs(tmp_path / "tasks") == outputs(tmp_path / "one")
    table = (tmp_path / "one" / "configurations.md").read_text()
    assert "±" in table and "| 16 |" in table.replace("|  16 |", "| 16 |")


def test_a_rerun_skips_the_finished_runs(capsys, two_at_once):
    out, first = two_at_once
    assert "0 finished before (skipped), 0 to resume, 8 to start; 2 at once" in first
    assert "8 done, 0 running, 0 left, nothing left" in first and "about" in first
    logs = {p: p.stat().st_mtime_ns for p in out.glob("runs/configurations/*/log.txt")}
    assert len(logs) == 8
    assert experiments.main([*QUICK, "--out", str(out)]) == 0
    assert "8 finished before (skipped), 0 to resume, 0 to start" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in logs} == logs                # nothing ran again


def test_another_listing_is_refused_and_overwrite_starts_over(tmp_path, capsys):
    out = tmp_path / "exp"
    assert experiments.main([*ONE_SEED, *TWO, "--out", str(out), "--", "--batch-size", "16"]) == 0
    before = outputs(out)
    capsys.readouterr()
    code = experiments.main([*ONE_SEED, "--out", str(out), "--", "--batch-size", "32"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert (f"{out / 'runs' / 'configurations'} holds runs of configurations with other "
            "settings (K16-SINGLE-BP-seed0: --batch-size 16 -> --batch-size 32; 3 runs more "
            "changed): rerun it with those, start over with --overwrite") in err
    assert outputs(out) == before                                      # nothing overwritten
    assert experiments.main([*ONE_SEED, *TWO, "--out", str(out), "--overwrite", "--",
                             "--batch-size", "32"]) == 0
    assert outputs(out) != before
    run = json.loads((out / "runs" / "configurations" / "K16-SINGLE-BP-seed0" / "run.json")
                     .read_text())
    assert run["run"]["settings"]["batch_size"] == 32


def test_collect_where_nothing_ran_says_so_and_writes_nothing(tmp_path, capsys):
    # Before: "4 of the 4 runs are not finished", after writing the listing of its settings,
    # which refused a later --collect (and run) of other settings as "holds runs of
    # configurations with other settings"
    out = tmp_path / "exp"
    folder = out / "runs" / "configurations"
    for extra in ([], ["--", "--batch-size", "32"]):
        assert experiments.main([*ONE_SEED, "--out", str(out), "--collect", *extra]) == 2
        assert (f"error: --collect: {folder} holds no runs of configurations: run them first "
                "(the same command without --collect)") in capsys.readouterr().err
        assert not out.exists()


def test_a_data_file_changed_since_the_runs_is_refused(tmp_path):
    """Runs of a data file (--dataset FILE, a split's files) whose contents have changed since
    are refused as another listing is (before, the finished ones were skipped and the tables
    rebuilt from the old data's figures); a data set's name is no file, and a listing written
    before the files were recorded is taken as of them."""
    data, folder = tmp_path / "ratings.csv", tmp_path / "runs"
    data.write_text("user,item,rating\n1,2,3\n")
    runs = [pool.Run("file", "ncae_cuda.train", ("--dataset", str(data))),
            pool.Run("split", "ncae_cuda.train", (f"--train={data}", "--test", str(data))),
            pool.Run("named", "ncae_cuda.train", ("--dataset", "synthetic-tiny"))]

    def take(overwrite: bool = False) -> None:
        pool.Pool(folder, "check", runs).take(overwrite).close()
    take()
    listed = json.loads((folder / pool.LISTING).read_text())
    assert list(listed.pop("data")) == [str(data)]
    (folder / pool.LISTING).write_text(json.dumps(listed))
    take()
    data.write_text("user,item,rating\n1,2,4\n")
    with pytest.raises(pool.PoolError) as refused:
        take()
    assert str(refused.value) == (f"{folder} holds runs of check with other settings ({data}: "
                                  "changed since they ran): start over with --overwrite, or "
                                  "choose another --out")
    take(overwrite=True)
    take()


def test_a_recipe_changed_since_the_runs_is_refused(tmp_path):
    """A recipe (--config FILE) edited since its runs is refused as a changed data file is
    (before, its finished runs were skipped and the recipes table showed the old recipe's
    figures under its name); a listing written before recipes were recorded is taken as of
    them."""
    recipe, folder = tmp_path / "mine.toml", tmp_path / "runs"
    recipe.write_text("hidden = [8]\n")
    runs = [pool.Run("mine-seed0", "ncae_cuda.train", ("--config", str(recipe)))]

    def take() -> None:
        pool.Pool(folder, "recipes", runs).take().close()
    take()
    listed = json.loads((folder / pool.LISTING).read_text())
    assert list(listed["data"]) == [str(recipe)]
    (folder / pool.LISTING).write_text(json.dumps({**listed, "data": {}}))
    take()
    recipe.write_text("hidden = [64]\n")
    with pytest.raises(pool.PoolError, match=f"{recipe}: changed since they ran"):
        take()


def test_runs_another_process_holds_are_refused_and_kept(tmp_path, capsys):
    """A second command on runs that a first is running (its lock held), and --overwrite of
    runs one of which is still in use: each refused in a line naming the process, and
    --overwrite removes none of the runs (before, those listed ahead of the busy one were
    gone)."""
    out = tmp_path / "exp"
    runs = out / "runs" / "configurations"
    runs.mkdir(parents=True)
    with rundir.lock(runs / rundir.LOCK):
        code = experiments.main([*ONE_SEED, "--out", str(out)])
    assert code == 2 and (f"{runs}: another process (process {os.getpid()}) is running these "
                          "runs: wait for it to end") in capsys.readouterr().err
    assert experiments.main([*ONE_SEED, *TWO, "--out", str(out)]) == 0
    finished = sorted(runs.glob("*/metrics.json"))
    busy = runs / list(json.loads((runs / pool.LISTING).read_text())["runs"])[-1]  # last listed
    with rundir.lock(busy / rundir.LOCK):
        code = experiments.main([*ONE_SEED, "--out", str(out), "--overwrite"])
    assert code == 2 and (f"--overwrite: {busy} is in use (process {os.getpid()}): stop it "
                          "first") in capsys.readouterr().err
    assert sorted(runs.glob("*/metrics.json")) == finished and len(finished) == 4


def test_a_finished_runs_results_removed_or_damaged_by_hand_are_named(tmp_path, capsys):
    """A finished run whose metrics.json was since removed or damaged: one line naming it and
    what to do (before, "metrics.json: cannot write it" and a JSONDecodeError's traceback),
    and the same command, once its folder is removed, runs it again."""
    out = tmp_path / "exp"
    assert experiments.main([*ONE_SEED, *TWO, "--out", str(out)]) == 0
    folder = out / "runs" / "configurations" / "K16-SINGLE-BP-seed0"
    for damage, said in ((lambda path: path.unlink(), "there is none"),
                         (lambda path: path.write_text('{"test": '),
                          "not JSON (Expecting value: line 1 column 10 (char 9))")):
        damage(folder / "metrics.json")
        capsys.readouterr()
        assert experiments.main([*ONE_SEED, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.splitlines() == [
            f"error: {folder / 'metrics.json'}: {said}, though the run finished: remove "
            f"{folder} and run the same command again, which reruns it"], err
    shutil.rmtree(folder)
    assert experiments.main([*ONE_SEED, "--out", str(out)]) == 0
    assert "3 finished before (skipped), 0 to resume, 1 to start" in capsys.readouterr().out


def test_a_finished_runs_manifest_removed_by_hand_is_named(tmp_path, capsys):
    """Before: the run was taken for a new one, the trainer refused its files ("continue it
    with --resume, start over with --overwrite", flags the pool does not take), and "the same
    command reruns the failed runs" failed the same way every time."""
    out = tmp_path / "exp"
    assert experiments.main([*ONE_SEED, *TWO, "--out", str(out)]) == 0
    folder = out / "runs" / "configurations" / "K16-SINGLE-BP-seed0"
    (folder / "run.json").unlink()
    capsys.readouterr()
    assert experiments.main([*ONE_SEED, "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {folder} holds a run's files (checkpoint-select.npz, checkpoint-refit.npz, "
        f"model.npz, metrics.json) but not its run.json: remove {folder} and run the same "
        "command again, which reruns it"]
    shutil.rmtree(folder)
    assert experiments.main([*ONE_SEED, "--out", str(out)]) == 0
    assert "3 finished before (skipped), 0 to resume, 1 to start" in capsys.readouterr().out


def test_two_experiments_never_share_runs(tmp_path, capsys):
    out = str(tmp_path)
    for name in ("topm", "clusters"):
        assert experiments.main([name, "--dataset", "synthetic-tiny", "--quick", *TWO,
                                 "--out", out]) == 0
    assert experiments.main(["topm", "--dataset", "synthetic-tiny", "--quick", "--out", out]) == 0
    assert "4 finished before (skipped)" in capsys.readouterr().out   # clusters replaced none
    assert {p.name for p in (tmp_path / "runs").iterdir()} == {"topm", "clusters"}
    assert {"topm.md", "clusters.md"} <= {p.name for p in tmp_path.iterdir()}


def test_a_killed_pool_resumes_its_run_and_ends_as_an_uninterrupted_one(tmp_path):
    # robustness --quick: two runs, D 0.4 and 0.6, each long enough to be killed in
    flags = ["robustness", "--dataset", "synthetic", "--quick", "--", "--hidden", "16",
             "--epochs", "75", "--patience", "0", "--no-refit", "--checkpoint-every", "0"]
    assert experiments.main([*flags[:4], *TWO, "--out", str(tmp_path / "whole"), *flags[4:]]) == 0
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "ncae_cuda.experiments", *flags[:4], "--out", str(out),
               *flags[4:]]
    running = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL)
    second = out / "runs" / "robustness" / "D0.6-seed0"
    deadline = time.monotonic() + 120
    while not ((second / "log.txt").exists() and "epoch  10 " in (second / "log.txt").read_text()):
        assert time.monotonic() < deadline and running.poll() is None
        time.sleep(0.1)
    running.send_signal(signal.SIGKILL)               # the pool dies; its run gets SIGTERM
    running.wait()
    deadline = time.monotonic() + 60
    while _held(second / ".lock"):                    # and stops at the end of its step
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert (second / "checkpoint-select.npz").exists() and not (second / "metrics.json").exists()
    rerun = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert "1 finished before (skipped), 1 to resume, 0 to start" in rerun.stdout
    assert "(resumed)" in (second / "log.txt").read_text()
    assert (out / "robustness.csv").read_bytes() == (tmp_path / "whole" / "robustness.csv") \
        .read_bytes()


def _held(lock: Path) -> bool:
    """Whether a process still holds a run folder's lock (the run still stopping)."""
    from ncae_cuda.runs import rundir
    try:
        rundir.lock(lock).close()
    except rundir.Held:
        return True
    return False


def test_each_slot_sees_its_gpu_and_its_share_of_the_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "cores", lambda: 8)
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    show = [sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], "
                                  "os.environ['NUMBA_NUM_THREADS'])"]
    with pool.Processes(2, ["3", "5"]) as processes:
        for i in range(2):
            processes.start(i, show, log=tmp_path / f"{i}.txt")
        assert sorted(code for _, code, _ in processes.wait()) == [0, 0]
    assert [(tmp_path / f"{i}.txt").read_text().split() for i in range(2)] == [["3", "4"],
                                                                               ["5", "4"]]
    for name in pool.THREADS:                                       # the user's say stands
        monkeypatch.setenv(name, "1")
    assert pool.slot_env(0, 2, []) == {}


def test_each_slot_runs_blas_on_its_share_of_the_cores(tmp_path, monkeypatch):
    """BLAS (EASE's solve, NumPy's products) as Numba: before, each of two slots on two cores
    ran BLAS on both, as many threads as the machine has cores in every slot."""
    monkeypatch.setattr(pool, "cores", lambda: 2)
    for name in pool.THREADS:
        monkeypatch.delenv(name, raising=False)
    show = [sys.executable, "-c", "import numpy; from threadpoolctl import threadpool_info; "
                                  "print(*{p['num_threads'] for p in threadpool_info() "
                                  "if p['user_api'] == 'blas'})"]
    with pool.Processes(2, []) as processes:
        for i in range(2):
            processes.start(i, show, log=tmp_path / f"{i}.txt")
        assert sorted(code for _, code, _ in processes.wait()) == [0, 0]
    assert [(tmp_path / f"{i}.txt").read_text().split() for i in range(2)] == [["1"], ["1"]]


def test_the_pool_flags_are_checked(capsys):
    for flags, message in ((["--task", "2", "--tasks", "2"], "--task 2: must be in 0..1"),
                           (["--overwrite", "--tasks", "2"], "--overwrite: start over with one"),
                           (["--jobs", "0"], "--jobs: expected an integer >= 1"),
                           # --collect writes the tables of every task's runs: a task's share
                           # named beside it would be unread (before: accepted, and unread)
                           (["--collect", "--tasks", "2", "--task", "1"],
                            "--task 1: --collect writes the tables of every task's runs, and "
                            "runs none: leave --task out"),
                           (["--collect", "--task", "0"], "--task 0: --collect writes"),
                           (["--gpus", "0,x"], "expected comma-separated GPU numbers")):
        with pytest.raises(SystemExit):
            experiments.main(["configurations", "--quick", *flags])
        assert message in capsys.readouterr().err


def test_a_failed_run_is_counted_as_failed_not_done(tmp_path, capsys):
    refused = pool.Run("refused", "ncae_cuda.train", ("--hidden", "0"))     # exits 2 at once
    never = pool.Run("never", "ncae_cuda.train", ("--hidden", "0"))  # not started after a failure
    runs = pool.Pool(tmp_path, "check", [refused, never])
    with pytest.raises(pool.PoolError, match="refused failed"):
        runs.run([refused, never], jobs=1, gpus=[])
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "check: 0 done, 1 failed, 0 running, 1 left,")


class _Killed(pool.Run):
    """A run killed by SIGKILL (the system's out-of-memory killer, a user's kill -9) once it
    has written a line of progress."""

    def command(self, folder: Path, resume: bool) -> list[str]:
        return [sys.executable, "-c", "import os, signal; print('epoch  31 | loss 0.1491', "
                "flush=True); os.kill(os.getpid(), signal.SIGKILL)"]


def test_a_killed_run_is_said_to_be_killed(tmp_path):
    """Before, the error gave a killed run's last line as its reason: "failed: epoch  31 |
    loss 0.1491"."""
    killed = _Killed("killed", "ncae_cuda.train", ())
    with pytest.raises(pool.PoolError) as failed:
        pool.Pool(tmp_path, "check", [killed]).run([killed], jobs=1, gpus=[])
    assert str(failed.value).splitlines()[0] == (
        f"killed failed: killed by SIGKILL (see {tmp_path / 'killed' / pool.LOG})")



class _Unfinished(pool.Run):
    """A run that ends well (exit 0) without marking itself finished: a command that is no
    run of the pool's kind, or one that stopped short."""

    def command(self, folder: Path, resume: bool) -> list[str]:
        return [sys.executable, "-c", "print('nothing to do here')"]


def test_a_run_that_exits_well_without_finishing_is_failed_with_its_last_line(tmp_path,
                                                                              capsys):
    unfinished = _Unfinished("unfinished", "ncae_cuda.train", ())
    with pytest.raises(pool.PoolError) as failed:
        pool.Pool(tmp_path, "check", [unfinished]).run([unfinished], jobs=1, gpus=[])
    assert str(failed.value).splitlines()[0] == (
        f"unfinished failed: nothing to do here (see {tmp_path / 'unfinished' / pool.LOG})")
    assert capsys.readouterr().out.splitlines()[-1] == (
        "check: 0 done, 1 failed, 0 running, 0 left, nothing left | unfinished failed")

BY_ANOTHER = "another process (process {pid}) is running these runs: wait for it to end"
BY_TASKS = "tasks of a --tasks share are running these runs: wait for them to end"


@pytest.mark.parametrize("first, second, refused", [
    ([], ["--tasks", "2", "--task", "0"], BY_ANOTHER),
    (["--tasks", "2", "--task", "0"], [], BY_TASKS),
    (["--tasks", "2", "--task", "0"], ["--tasks", "2", "--task", "0"], BY_ANOTHER),
    (["--tasks", "2", "--task", "0"], ["--tasks", "2", "--task", "1"], None),
    (["--tasks", "2", "--task", "1"], ["--tasks", "3", "--task", "0"],
     "--tasks 3: task 1 of a --tasks 2 share (process {pid}) is running these runs, which "
     "--tasks 3 shares out otherwise: give --tasks 2, or wait for it to end"),
    (["--tasks", "2", "--task", "0"], ["--tasks", "2", "--collect"], BY_TASKS),
    (["--tasks", "2", "--task", "1"], ["--tasks", "2", "--collect"], BY_TASKS),
    ([], ["--tasks", "2", "--collect"], BY_ANOTHER)])
def test_a_folder_is_run_by_one_command_or_by_its_tasks_never_both(first, second, refused,
                                                                    tmp_path, capsys,
                                                                    monkeypatch):
    """A second command on the runs while a first runs them (started from the first's pool):
    refused in a line, except the other tasks of one share (before, a plain command took
    .lock and task I .lock-taskI, so a plain command and a share ran the same runs at once).
    A task of another --tasks is refused, naming both: task 1 of 2 and task 0 of 3 both run
    the fourth run (before, each started it, and one failed on the run's own lock). --collect
    writes tables of finished runs only: refused while any task runs (before, it took task 0's
    lock: refused while task 0 ran, not while task 1 did, whatever its --task)."""
    flags = [*ONE_SEED, "--out", str(tmp_path / "exp")]
    codes = []

    def while_running(self, share, jobs, gpus) -> None:
        if not codes:                     # the first command's runs: the second starts then
            codes.append(None)
            codes.append(experiments.main([*flags, *second]))
    monkeypatch.setattr(pool.Pool, "run", while_running)
    experiments.main([*flags, *first])
    err = capsys.readouterr().err
    if refused is None:
        assert codes[1] == 0, err
    else:
        runs = tmp_path / "exp" / "runs" / "configurations"
        said = f"error: {runs}: {refused.format(pid=os.getpid())}\n"
        assert codes[1] == 2 and said in err, err


def test_overwrite_removes_the_old_tables_before_its_runs(tmp_path, capsys, monkeypatch):
    """An --overwrite stopped before its runs finished leaves no table of the old runs beside
    the new ones (before, the old configurations.md and .csv stayed, looking current); one
    refused (its listing's runs in use) removes nothing."""
    out = tmp_path / "exp"
    assert experiments.main(["clusters", "--dataset", "synthetic-tiny", "--quick", *TWO,
                             "--out", str(out)]) == 0
    tables = {out / f"clusters{suffix}" for suffix in (".md", ".csv")}
    assert all(path.exists() for path in tables)
    busy = next(p for p in (out / "runs" / "clusters").iterdir() if p.is_dir())
    overwrite = ["clusters", "--dataset", "synthetic-tiny", "--quick", "--out", str(out),
                 "--overwrite"]
    with rundir.lock(busy / rundir.LOCK):
        assert experiments.main(overwrite) == 2
    assert all(path.exists() for path in tables)
    capsys.readouterr()

    def stopped(self, share, jobs, gpus) -> None:
        raise pool.Stopped("SIGINT")
    monkeypatch.setattr(pool.Pool, "run", stopped)
    assert experiments.main(overwrite) == 128 + signal.SIGINT
    assert not any(path.exists() for path in tables)
    assert (f"clusters: --overwrite: removed {out / 'clusters.md'}, {out / 'clusters.csv'}, "
            "the tables of the runs it starts over") in capsys.readouterr().out


def test_a_ctrl_c_outside_the_runs_says_the_same_command_resumes_them(tmp_path, monkeypatch,
                                                                      capsys):
    """A Ctrl-C in an experiment's command outside its runs (the pool taking its folder, the
    tables written): exit 130 and a line saying the same command goes on; before, a
    KeyboardInterrupt traceback."""
    def interrupted(self, share, jobs, gpus) -> None:
        os.kill(os.getpid(), signal.SIGINT)              # no handler of the pool's here
    monkeypatch.setattr(pool.Pool, "run", interrupted)
    try:
        with pytest.raises(SystemExit) as ended:
            cli.exit_with(lambda: experiments.main([*ONE_SEED, "--out", str(tmp_path)]))
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C ended the command in a KeyboardInterrupt")
    assert ended.value.code == 130
    assert capsys.readouterr().err == ("\ninterrupted: the same command resumes the runs and "
                                       "writes the tables\n")


def test_more_slots_than_cores_give_each_slot_one_thread(monkeypatch):
    """A share of the cores is at least one thread: 4 slots on 2 cores would otherwise set
    NUMBA_NUM_THREADS=0, which Numba refuses in every run."""
    monkeypatch.setattr(pool, "cores", lambda: 2)
    for name in pool.THREADS:
        monkeypatch.delenv(name, raising=False)
    assert [pool.slot_env(slot, 4, [])["NUMBA_NUM_THREADS"] for slot in range(4)] == ["1"] * 4
    assert pool.slot_env(1, 2, [])["NUMBA_NUM_THREADS"] == "1"


@pytest.mark.parametrize("seconds, shown", [(0.4, "0 s"), (59.6, "1 min 00 s"),
                                            (125, "2 min 05 s"), (3599.4, "59 min 59 s"),
                                            (3725, "1 h 02 min"), (90061, "25 h 01 min")])
def test_a_duration_is_said_in_hours_minutes_or_seconds(seconds, shown):
    assert pool.duration(seconds) == shown


class _Slots:
    """What Pool._progress reads of a Processes: its slots and the runs in them."""

    def __init__(self, jobs, started):
        self.jobs, self.stopped = jobs, None
        self.running = {object(): (None, slot, at) for slot, at in enumerate(started)}


def test_the_time_left_is_the_work_left_over_the_slots(monkeypatch, capsys):
    """Runs of 30 s on average, two slots: one run 10 s in (20 s to go), one 40 s in (past the
    mean: none to go, not minus 10), two waiting (60 s): 80 s of work over 2 slots, 40 s."""
    monkeypatch.setattr(pool.time, "monotonic", lambda: 1000.0)
    share = [pool.Run(f"r{i}", "m", ()) for i in range(6)]
    runs = pool.Pool(Path("unused"), "check", share)
    runs._progress(share, _Slots(2, [990.0, 960.0]), share[4:], [20.0, 40.0], [], ["r5 started"])
    assert capsys.readouterr().out == ("check: 2 done, 2 running, 2 left, about 40 s left | "
                                       "r5 started\n")

