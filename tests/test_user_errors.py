"""What a new user's mistakes and a machine's faults print: a message naming the flag or file,
exit code 2, never a traceback; and a run folder that is never mixed with another run's."""
import gzip
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda import NCAE, ops
from ncae_cuda.cli import Interrupted, continued_by, exit_with
from ncae_cuda.commands import baselines, check, experiments, recommend, train, tune
from ncae_cuda.commands import datasets as datasets_command
from ncae_cuda.data import datasets, splits
from ncae_cuda.data.interactions import DataError
from ncae_cuda.data.reader import read_movielens_100k, read_table
from ncae_cuda.model import loop, modelfile, stopping
from ncae_cuda.model.estimator import OutOfMemory
from ncae_cuda.ops import BackendUnavailable
from ncae_cuda.runs import rundir
from ncae_cuda.runs.rundir import RunDirectory

TINY = ["--dataset", "synthetic-tiny", "--hidden", "8", "--batch-size", "16", "--device", "cpu"]
REPO = Path(__file__).resolve().parents[1]


def cli(main, argv, capsys) -> tuple[int, str]:
    """(exit code, stderr) of a command's main, argparse's exits included."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def refused(main, argv, capsys, message: str) -> None:
    code, err = cli(main, argv, capsys)
    assert code == 2 and message in err and "Traceback" not in err, err


def trained(tmp_path, *flags, name="run") -> Path:
    out = tmp_path / name
    assert train.main([*TINY, "--out", str(out), *flags]) == 0
    return out


# ---------------------------------------------------------------------------------------------
# 1. the run folder

def test_a_stale_run_is_never_taken_for_this_one(tmp_path, capsys, monkeypatch):
    # The scenario: a finished 3-epoch run in D; a new 2-epoch run into D; it is killed in its
    # second epoch and resumed. Before, the resume reused the first run's refit checkpoint.
    D = trained(tmp_path, "--epochs", "3", name="D")
    refused(train.main, [*TINY, "--epochs", "2", "--out", str(D)], capsys,
            "holds another run's files (run.json, checkpoint-select.npz, checkpoint-refit.npz, "
            "model.npz, metrics.json; finished): continue it with --resume, start over with "
            "--overwrite")
    refused(train.main, [*TINY, "--epochs", "2", "--out", str(D), "--resume"], capsys,
            "holds another run (settings.epochs: 3 -> 2)")
    real, calls = loop.run_epoch, []

    def killed_in_epoch_2(*args, **kwargs):
        calls.append(args[-1])
        if calls.count("epoch 2") == 1 and args[-1] == "epoch 2":
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(loop, "run_epoch", killed_in_epoch_2)
    old = run_files(D)
    with pytest.raises(Interrupted):
        train.main([*TINY, "--epochs", "2", "--out", str(D), "--overwrite"])
    monkeypatch.setattr(loop, "run_epoch", real)
    assert run_files(D) == old          # the finished run stays whole until the new one is
    assert train.main([*TINY, "--epochs", "2", "--out", str(D), "--resume"]) == 0
    whole = trained(tmp_path, "--epochs", "2", name="whole")
    resumed, uninterrupted = (json.loads((d / "metrics.json").read_text()) for d in (D, whole))
    assert resumed["test"] == uninterrupted["test"]
    manifest = json.loads((D / "run.json").read_text())
    assert manifest["finished"] and manifest["run"]["settings"]["epochs"] == 2
    assert run_files(D).keys() == old.keys() and not (D / rundir.STAGING).exists()


def test_a_runs_files_without_their_manifest_are_not_offered_to_resume(tmp_path, capsys):
    """A run folder whose run.json was removed by hand: before, "...; unfinished): continue it
    with --resume", which then said "holds no run to continue"."""
    out = trained(tmp_path, "--epochs", "1")
    (out / "run.json").unlink()
    refused(train.main, [*TINY, "--out", str(out)], capsys,
            f"--out {out} holds a run's files (checkpoint-select.npz, checkpoint-refit.npz, "
            "model.npz, metrics.json) but not its run.json: start over with --overwrite, or "
            "choose another --out")
    assert train.main([*TINY, "--epochs", "1", "--out", str(out), "--overwrite"]) == 0


def run_files(folder: Path) -> dict:
    """{name: bytes} of the files in a run folder, its lock and staged run left out."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("rows, flags, message", [
    ("user,item,rating\n1,1,4\n1,2,3\n2,1,1\n2,2,5\n", [],
     "the split has no test entries (--test-ratio 0.1 of 4 entries is none)"),
    ("user,item,rating\n1,1,4\n1,2,x\n", [], "new.csv:3: rating 'x' is not a number"),
])
def test_overwrite_keeps_the_finished_run_where_the_new_input_is_refused(tmp_path, capsys, rows,
                                                                        flags, message):
    # before, --overwrite removed the finished run's files first: the folder kept only .lock
    D = trained(tmp_path, "--epochs", "2", name="D")
    old = run_files(D)
    data = tmp_path / "new.csv"
    data.write_text(rows)
    refused(train.main, ["--dataset", str(data), *flags, "--hidden", "4", "--device", "cpu",
                         "--out", str(D), "--overwrite"], capsys, message)
    assert run_files(D) == old and not (D / rundir.STAGING).exists()
    assert train.main([*TINY, "--epochs", "1", "--out", str(D), "--overwrite"]) == 0
    assert json.loads((D / "run.json").read_text())["run"]["settings"]["epochs"] == 1
    assert run_files(D).keys() == old.keys() and not (D / rundir.STAGING).exists()


def test_a_refused_run_removes_the_folder_it_made(tmp_path, capsys, monkeypatch):
    # before, runs/nan-<date>-<time>/ (and runs/) stayed, holding only .lock; so did --resume's
    monkeypatch.chdir(tmp_path)
    Path("nan.csv").write_text("user,item,rating\n1,1,5\n1,2,nan\n2,1,3\n")
    nan = ["--dataset", "nan.csv", "--hidden", "4", "--device", "cpu"]
    refused(train.main, nan, capsys, "nan.csv:3: rating 'nan' is not a finite number")
    refused(baselines.main, ["--dataset", "nan.csv", "--models", "pop"], capsys,
            "nan.csv:3: rating 'nan' is not a finite number")
    refused(train.main, [*TINY, "--resume", "--out", "new/run"], capsys,
            "--resume: new/run holds no run to continue (no run.json)")
    assert [p.name for p in tmp_path.iterdir()] == ["nan.csv"]
    for folder in ("runs", "mine"):                 # the user's folders stay
        Path(folder).mkdir()
    refused(train.main, nan, capsys, "is not a finite number")
    refused(train.main, [*nan, "--out", "mine"], capsys, "is not a finite number")
    assert not any(Path("runs").iterdir()) and Path("mine").is_dir()


def test_a_swap_killed_part_way_is_finished_by_the_next_process(tmp_path, monkeypatch):
    """A finished overwriting run's files replace the old run's in an order that the next
    process to take the folder finishes, wherever a kill stopped it: at each of its 10 steps
    (4 old files and the old manifest removed, 5 new files moved in)."""
    old = trained(tmp_path, "--epochs", "2", name="old")
    new = trained(tmp_path, "--epochs", "1", name="new")
    new_run = json.loads((new / "run.json").read_text())["run"]
    for kill in range(10):
        D = tmp_path / f"D{kill}"
        shutil.copytree(old, D)
        shutil.copytree(new, D / rundir.STAGING)           # finished, not yet swapped in
        done = []

        def counted(real):
            def step(*args, **kwargs):
                if len(done) == kill:
                    raise KeyboardInterrupt                # killed before this step
                done.append(real(*args, **kwargs))
            return step
        with monkeypatch.context() as patched:
            patched.setattr(rundir.os, "replace", counted(os.replace))
            patched.setattr(Path, "unlink", counted(Path.unlink))
            killed = RunDirectory(D, new_run)
            with pytest.raises(KeyboardInterrupt):
                killed.open(resume=True)
        killed.release()                        # (as the end of its process would)
        assert len(done) == kill
        folder = RunDirectory(D, new_run)
        folder.open(resume=True)                # the next process: the swap finished first
        folder.release()
        files, expected = run_files(D), run_files(new)
        assert json.loads(files.pop("run.json"))["run"] == new_run, kill
        assert files == {k: v for k, v in expected.items() if k != "run.json"}, kill
        assert not (D / rundir.STAGING).exists()


def test_an_unfinished_overwriting_run_alone_in_its_folder_is_offered_to_resume(tmp_path):
    """An --overwrite run into a folder of no run, stopped before it finished: its files are
    all staged, the folder's own manifest absent; a fresh run there is told to --resume it
    (which continues it), not that the manifest was removed by hand."""
    D, run = tmp_path / "D", {"settings": {"epochs": 2}}
    stopped = RunDirectory(D, run)
    stopped.open(overwrite=True)
    stopped.release()
    with pytest.raises(rundir.RunFolderError, match=re.escape(
            f"--out {D} holds another run's files ({rundir.STAGING}/run.json; unfinished): "
            "continue it with --resume")):
        RunDirectory(D, run).open()
    resumed = RunDirectory(D, run)
    resumed.open(resume=True)
    resumed.release()
    assert resumed.work == D / rundir.STAGING

def test_a_second_process_on_one_folder_refuses_at_start(tmp_path):
    D = tmp_path / "D"
    held = RunDirectory(D, {"settings": {}})
    held.open()                                                  # held by this process
    done = subprocess.run([sys.executable, "-m", "ncae_cuda.train", *TINY, "--out", str(D)],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"another run (process {os.getpid()}) is using this folder" in done.stderr
    assert held.path.is_dir()


@pytest.mark.parametrize("text", ['{"run": 5}', '{"run": null}', '[1]', "garbage"])
def test_an_edited_manifest_is_refused_in_a_line(tmp_path, capsys, text):
    # before, a manifest whose run was not an object ended --resume in an AttributeError
    (tmp_path / "D").mkdir()
    (tmp_path / "D" / "run.json").write_text(text)
    for flags in (["--resume"], []):
        refused(train.main, [*TINY, "--out", str(tmp_path / "D"), *flags], capsys,
                "run.json: not a run manifest")


@pytest.mark.parametrize("held", [True, False], ids=["in use", "another run's files"])
def test_a_command_refused_a_folder_leaves_the_other_runs_manifest(tmp_path, capsys, held):
    other = RunDirectory(tmp_path / "D", {"settings": {"other": 1}})
    other.open()                                 # another run, its manifest all it has saved
    if not held:
        other.release()
    manifest = (other.path / "run.json").read_bytes()
    refused(baselines.main, ["--dataset", "synthetic-tiny", "--models", "pop", "--out",
                             str(other.path)], capsys, "--out " + str(other.path))
    assert (other.path / "run.json").read_bytes() == manifest


def test_an_out_that_is_a_file_or_cannot_be_created(tmp_path, capsys):
    file = tmp_path / "file"
    file.write_text("x")
    refused(train.main, [*TINY, "--out", str(file)], capsys, "a file, not a folder")
    refused(train.main, [*TINY, "--out", str(file / "run")], capsys, "cannot write there")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_out(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    refused(train.main, [*TINY, "--out", str(locked / "run")], capsys, "cannot write there")


def _limit_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)        # a write past the limit: EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no file size limit here")
def test_an_out_that_fills_up_says_so_and_leaves_no_temporary_file(tmp_path):
    D = tmp_path / "D"
    done = subprocess.run([sys.executable, "-m", "ncae_cuda.train", *TINY, "--hidden", "64",
                           "--out", str(D)], capture_output=True, text=True, cwd=REPO,
                          preexec_fn=_limit_file_size)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "checkpoint-select.npz: cannot write it (File too large)" in done.stderr
    assert not list(D.glob("*.tmp"))


def test_each_run_gets_its_own_folder_and_says_where(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert train.main([*TINY, "--epochs", "1"]) == 0
    runs = sorted((tmp_path / "runs").iterdir())
    out = capsys.readouterr().out
    assert all(f"run folder: runs/{d.name}" in out and f"wrote runs/{d.name}/model.npz" in out
               for d in runs) and len(runs) >= 1
    assert runs[0].name.startswith("synthetic-tiny-")
    refused(train.main, [*TINY, "--resume"], capsys, "--resume continues the run in --out")


# ---------------------------------------------------------------------------------------------
# 2. every traceback a message

@pytest.mark.parametrize("flags, message", [
    (["--seed", "-1"], "--seed: must be an integer >= 0; got -1"),
    (["--split", "u1"], "--split u1: synthetic-tiny has no such split files"),
    (["--test-ratio", "0.6", "--valid-ratio", "0.6"],
     "--test-ratio + --valid-ratio must be < 1 to leave training data; got 0.6 + 0.6"),
    (["--weight-decay", "inf"], "--weight-decay: must be a finite number >= 0; got inf"),
    (["--lr", "nan"], "--lr: must be a finite number > 0; got nan"),
    (["--hidden", "abc"], "argument --hidden: expected comma-separated integers, got 'abc'"),
    # the value as the flag was written: before, Python's tuple, "got (0,)"
    (["--hidden", "0"], "--hidden: must be positive integers, e.g. 500,500; got 0 (see --help)"),
    (["--hidden", "3,-1"], "--hidden: must be positive integers, e.g. 500,500; got 3,-1 (see "
                           "--help)"),
    # the value as the flag was written: before, the float parsed, "got 0.0"
    (["--lr-decay", "0"], "--lr-decay: must be in (0, 1]; got 0 (see --help)"),
    (["--lr-decay", "1.5"], "--lr-decay: must be in (0, 1]; got 1.5 (see --help)"),
    # ...before, Python's tuple, "got (5.0, 1.0)", then its floats, "got 5.0,1.0"
    (["--rating-scale", "5,1"], "--rating-scale: must be (low, high) with low < high; got "
                                "5,1 (see --help)"),
    (["--rating-scale", "4.5,0.5"], "--rating-scale: must be (low, high) with low < high; got "
                                    "4.5,0.5 (see --help)"),
    (["--row-norm", "-1"], "--row-norm: must be a finite number >= 0; got -1 (see --help)"),
    (["--lr=-1e-05"], "--lr: must be a finite number > 0; got -1e-05 (see --help)"),
    (["--output", "linear"], "argument --output: invalid choice: 'linear'"),
    (["--feedback", "implicit", "--output", "identity"], "--output: is for explicit feedback"),
    (["--feedback", "implicit", "--row-norm", "0.5"], "--row-norm: is for explicit feedback"),
    # flags the other settings never read, each run bit for bit as without it before
    (["--feedback", "implicit", "--alpha", "2"], "--alpha: is for explicit feedback"),
    (["--feedback", "implicit", "--beta", "3"], "--beta: is for explicit feedback"),
    (["--feedback", "implicit", "--rating-scale", "1,5"],
     "--rating-scale: is for explicit feedback"),
    (["--feedback", "implicit", "--variant", "NCAE-", "--c0", "5"],
     "--c0: is for popularity weighting"),
    (["--feedback", "implicit", "--weighting", "uniform", "--omega", "0.3"],
     "--omega: is for popularity weighting"),
    (["--feedback", "implicit", "--uniform-c", "0.1"], "--uniform-c: is for uniform weighting"),
    (["--pretrain-epochs", "5"], "--pretrain-epochs: is for pre-training (a pretrain other "
                                 "than BP)"),
    (["--feedback", "implicit", "--loss", "multinomial", "--c0", "5"],
     "--c0: weighs the square loss's entries: the multinomial loss has none to weigh"),
    (["--c0", "5"], "--c0: is for implicit feedback"),
    # settings read only where another turns them on (before, accepted and read by nothing)
    (["--augment-p", "0.5"], "--augment-p: is for augmentation (implicit feedback, variant "
                             "NCAE+): augment_eps > 0 turns it on"),
    (["--feedback", "implicit", "--variant", "NCAE", "--augment-p", "0.5"],
     "--augment-p: is for augmentation"),
    (["--feedback", "implicit", "--augment-eps", "0", "--augment-p", "0.5"],
     "--augment-p: is for augmentation"),
    (["--feedback", "implicit", "--recency-halflife", "4"],
     "--recency-halflife: is for recency weighting: recency_boost > 0 turns it on"),
    (["--valid-ratio", "0", "--patience", "5"],
     "--patience 5: stops on the validation score, and --valid-ratio 0 holds out no "
     "validation part (the run trains --epochs): leave it out"),
    (["--valid-ratio", "0", "--patience", "0"], "--patience 0: stops on the validation score"),
    (["--resume", "--overwrite"], "--resume continues the run in --out, --overwrite starts"),
    # before, accepted: metrics.json's cutoffs (10, 10), its figures at 10 once
    (["--feedback", "implicit", "--cutoffs", "10,10"],
     "--cutoffs: must each be given once; 10 is repeated"),
    (["--shard-timeout", "60"], "--shard-timeout: is for --shard columns"),
    (["--shard-timeout", "0"], "argument --shard-timeout: expected a number of seconds in "
                               "(0, 9223372036], got '0'"),
    (["--shard-timeout", "1e10"], "argument --shard-timeout: expected a number of seconds in "
                                  "(0, 9223372036], got '1e10'"),
])
def test_train_flags(tmp_path, capsys, flags, message):
    refused(train.main, [*TINY, "--out", str(tmp_path / "r"), *flags], capsys, message)


def test_a_recipes_patience_runs_without_validation(tmp_path):
    # a recipe is a whole, run on any split: its patience is not refused where the run holds
    # out no validation part, as a --patience given on the command line is
    (tmp_path / "recipe.toml").write_text("patience = 3\nepochs = 2\n")
    out = trained(tmp_path, "--config", str(tmp_path / "recipe.toml"), "--valid-ratio", "0")
    assert len(json.loads((out / "metrics.json").read_text())["history"]) == 2


@pytest.mark.parametrize("name, flags, message", [
    # before, each accepted and read by nothing: the description was the one without it
    ("ml-100k", ["--seed", "7"], "--seed 7: is a synthetic data set's seed; ml-100k is not "
                                 "one: leave it out"),
    ("rows.csv", ["--seed", "7"], "--seed 7: is a synthetic data set's seed; rows.csv is not "
                                  "one: leave it out"),
    ("synthetic-tiny", ["--data-dir", "d"], "--data-dir d: is where a published data set is "
                                            "kept; synthetic-tiny is not one: leave it out"),
    ("rows.csv", ["--cache-dir", "c"], "--cache-dir c: is where a published data set is "
     "downloaded and a synthetic one of 1,000,000 interactions or more kept once drawn; "
     "rows.csv is neither: leave it out"),
    ("synthetic-tiny", ["--cache-dir", "c"], "synthetic-tiny is neither"),
])
def test_datasets_describe_refuses_a_flag_its_data_set_never_reads(tmp_path, capsys,
                                                                   monkeypatch, name, flags,
                                                                   message):
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "rows.csv", "user,item,rating", [r[:3] for r in tiny_rows()])
    refused(datasets_command.main, ["describe", name, *flags], capsys, message)


def test_a_trainer_cache_dir_its_data_never_reads_is_refused(tmp_path, capsys, monkeypatch):
    # before, accepted and unread: no cache folder was made or looked in
    monkeypatch.chdir(tmp_path)
    refused(train.main, [*TINY, "--cache-dir", "c", "--out", "r"], capsys,
            "--cache-dir c: is where a published data set is downloaded and a synthetic one of "
            "1,000,000 interactions or more kept once drawn; --dataset synthetic-tiny is "
            "neither: leave it out")


def test_datasets_describe_negative_seed(capsys):
    refused(datasets_command.main, ["describe", "synthetic-tiny", "--seed", "-1"], capsys,
            "--seed must be >= 0; got -1")


@pytest.mark.parametrize("settings, message", [
    (dict(seed=-1), "seed must be an integer >= 0; got -1"),
    (dict(hidden="abc"), "hidden must be positive integers, e.g. (500, 500); got 'abc'"),
    # a Python call's value as it was given (a command line's as its flag was written)
    (dict(hidden=(3, -1)), "hidden must be positive integers, e.g. (500, 500); got (3, -1)"),
    (dict(cutoffs=0), "cutoffs must be positive integers, e.g. (10, 100); got 0"),
    # a set's order is its hashes': the layers, or the cutoff early stopping reads, at random
    (dict(hidden={8, 16}), "hidden must be an ordered sequence (a list or tuple); got a set"),
    (dict(cutoffs=frozenset({5, 10})),
     "cutoffs must be an ordered sequence (a list or tuple); got a frozenset"),
    (dict(hidden={8: 1}), "hidden must be an ordered sequence (a list or tuple); got a dict"),
    (dict(dropout="high"), "dropout must be a number; got 'high'"),
    # a list as the list given: before, the tuple Config.from_dict had made of it
    (dict(feedback="implicit", cutoffs=[0, 10]),
     "cutoffs must be positive integers, e.g. (10, 100); got [0, 10]"),
    (dict(hidden=[3, -1]), "hidden must be positive integers, e.g. (500, 500); got [3, -1]"),
    (dict(rating_scale=[5, 1]), "rating_scale must be (low, high) with low < high; got [5, 1]"),
    (dict(dropout=[0.5]), "dropout must be a number; got [0.5]"),
])
def test_settings_of_the_api(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        NCAE(device="cpu", **settings)


def test_one_width_is_one_hidden_layer():
    assert NCAE(device="cpu", hidden=500).config.hidden == (500,)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("saved") / "run"
    assert train.main([*TINY, "--epochs", "1", "--out", str(out)]) == 0
    return out / "model.npz"


def test_recommend_out_into_a_missing_folder(tmp_path, capsys, saved):
    refused(recommend.main, [str(saved), "--all", "--out", str(tmp_path / "no" / "top.csv")],
            capsys, "there is no folder")


def test_recommend_a_fractional_n(saved):
    model = NCAE.load(saved, device="cpu")
    with pytest.raises(ValueError, match=r"n must be an integer >= 1; got 2\.7"):
        model.recommend(model.user_ids[:2], n=2.7)


def _damaged(saved: Path, tmp_path: Path, checksum: str = "kept", **changes) -> Path:
    """The saved model with `changes` made to its arrays (header: its JSON text) and its
    checksum kept as written (as a damaged or edited file has it) or "made" anew for the changed
    contents (as a file written so would have it)."""
    with np.load(saved) as f:
        arrays = {k: f[k] for k in f.files}
    for key, change in changes.items():
        arrays[key] = change(arrays[key].copy())
    path = tmp_path / "damaged.npz"
    if checksum == "kept":
        np.savez(path, **arrays)
    else:
        meta = json.loads(str(arrays.pop("header")))
        for key in ("format", "version", "kind"):
            meta.pop(key)
        arrays.pop("checksum")
        modelfile.write(path, "model", meta, arrays)
    return path


def _poke(value, at=0):
    def change(a):
        a.reshape(-1)[at] = value
        return a
    return change


def _edited(**settings):
    """A header change: settings of the model file's JSON header, by dotted name."""
    def change(header):
        meta = json.loads(str(header))
        for name, value in settings.items():
            *path, last = name.split(".")
            node = meta
            for key in path:
                node = node[key]
            node[last] = value
        return np.array(json.dumps(meta))
    return change


@pytest.mark.parametrize("checksum, changes, message", [
    ("kept", dict(header=lambda h: np.array("not json{")), "its header is not JSON"),
    # before, these loaded and scored otherwise (4.62 became 4.13 or 9.05)
    ("kept", dict(header=_edited(rating_scale=[1, 9])), "a damaged ncae_cuda model file: its "
     "header or arrays are not what was written (their checksum differs)"),
    ("kept", dict(header=_edited(**{"settings.output": "identity"})), "checksum differs"),
    ("kept", dict(params=_poke(np.float32(0.5))), "checksum differs"),
    ("made", dict(params=_poke(np.nan)), "a damaged ncae_cuda model file: params holds NaN or "
                                         "infinite values"),
    ("made", dict(params=_poke(np.inf)), "params holds NaN or infinite values"),
    ("made", dict(seen_indices=_poke(10 ** 6)), "indices must be <"),
    # before, a model with three equal ids loaded, and recommend printed one list three times
    ("made", dict(user_ids=_poke(1, at=1)), "a damaged ncae_cuda model file: its contents are "
                                            "inconsistent (ValueError: 1 duplicate user ids, "
                                            "e.g. 1): train it again"),
])
def test_a_damaged_model_file_is_refused(tmp_path, saved, checksum, changes, message):
    with pytest.raises(DataError, match=re.escape(message)):
        NCAE.load(_damaged(saved, tmp_path, checksum, **changes), device="cpu")


def test_a_checkpoint_holding_nan_is_refused_as_damaged(tmp_path, capsys):
    # Before, resuming from it said "loss became nan ... lower the learning rate".
    out = trained(tmp_path, "--epochs", "2", "--checkpoint-every", "0", name="nan")
    path = out / "checkpoint-select.npz"
    meta, arrays = modelfile.read(path, "checkpoint")
    arrays["state"][1, 3] = np.nan                   # Adam's first moment
    modelfile.write(path, "checkpoint", {k: v for k, v in meta.items()
                                         if k not in ("format", "version", "kind")}, arrays)
    code, err = cli(train.main, [*TINY, "--epochs", "2", "--checkpoint-every", "0", "--out",
                                 str(out), "--resume"], capsys)
    assert code == 2 and "checkpoint-select.npz: a damaged ncae_cuda checkpoint file: state " \
                         "holds NaN or infinite values" in err, err


def test_concurrent_saves_to_one_path_each_write_a_whole_file(tmp_path, saved):
    # Before, every writer used <path>.tmp: 16% of saves failed and readers got damaged files.
    model, path = NCAE.load(saved, device="cpu"), tmp_path / "shared.npz"
    model.save(path)
    failures, reads = [], []

    def write():
        for _ in range(20):
            try:
                model.save(path)
            except DataError as e:
                failures.append(str(e))

    def read():
        for _ in range(40):
            try:
                reads.append(NCAE.load(path, device="cpu").user_ids)
            except DataError as e:
                failures.append(str(e))
    threads = [threading.Thread(target=write) for _ in range(4)] + [threading.Thread(
        target=read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and len(reads) == 40
    assert all(np.array_equal(ids, model.user_ids) for ids in reads)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.npz"]     # no temporaries


@pytest.mark.parametrize("argv, message", [
    (["configurations", "--ks", "abc"], "--ks: expected comma-separated numbers, got 'abc'"),
    (["augmentation", "--variant-flags", "NCAE*=--lr 1"],
     "--variant-flags 'NCAE*=--lr 1': expected NAME=FLAGS with NAME one of NCAE-, NCAE, NCAE+"),
    # another experiment's flag: before, accepted and ignored
    (["pretraining", "--ks", "10"], "--ks: is for configurations, not pretraining: leave it out"),
    (["configurations", "--recipes", "recipes/ml-100k-explicit.toml"],
     "--recipes: is for recipes, not configurations"),
    (["clusters", "--baselines", "ease"], "--baselines: is for factors, topm, not clusters"),
    (["clusters", "--gpus", "0", "--", "--device", "cpu"],
     "--gpus 0: the runs run on the CPU (--device cpu): leave out --gpus, or use --device gpu"),
])
def test_experiments_flags(tmp_path, capsys, argv, message):
    cut = argv.index("--") if "--" in argv else len(argv)           # the runs' flags last
    refused(experiments.main, [*argv[:cut], "--quick", "--out", str(tmp_path), *argv[cut:]],
            capsys, message)


def test_a_network_too_large_for_memory_names_the_sizes(capsys, tmp_path):
    X = sp.random(50, 40, density=0.2, format="csr", random_state=0) * 5
    with pytest.raises(OutOfMemory) as e:
        NCAE(device="cpu", hidden=(200_000, 200_000)).fit(X, epochs=1, verbose=False)
    text = str(e.value)
    assert "out of memory on the cpu backend" in text and "floats =" in text
    assert "lower --hidden" in text and "--device cpu" not in text


def test_a_nan_validation_metric_stops_training_at_once(monkeypatch):
    X = sp.random(40, 30, density=0.3, format="csr", random_state=1) * 4 + 0
    X.data = np.ceil(X.data)
    valid = sp.random(40, 30, density=0.02, format="csr", random_state=2)
    valid = valid - valid.multiply(X > 0)
    valid.eliminate_zeros()
    valid.data[:] = 3
    monkeypatch.setattr(NCAE, "evaluator", lambda self, held: lambda: {"rmse": float("nan")})
    model = NCAE(device="cpu", hidden=(4,), batch_size=8)
    with pytest.raises(FloatingPointError, match=r"the validation rmse became nan after epoch 1"):
        model.fit(X, validation=valid, epochs=5, verbose=False)


def test_a_file_with_another_count_than_the_catalogue_warns(tmp_path, shared_data):
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    lines = (shared_data / "ml-100k" / "u.data").read_text().splitlines()[:1000]
    (folder / "u.data").write_text("\n".join(lines) + "\n")
    with pytest.warns(datasets.CatalogueWarning, match="holds 1,000 interactions where "
                                                       "ml-100k's catalogue lists 100,000"):
        data = datasets.load("ml-100k", data_dir=tmp_path, download=False)
    assert data.nnz == 1000


def test_describe_prints_the_counts_it_read(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_text("user,item,rating\n1,2,3\n2,3,4\n2,1,5\n")
    assert datasets_command.main(["describe", str(path)]) == 0
    out = capsys.readouterr().out
    assert "users         2" in out and "interactions  3" in out


def test_a_utf8_byte_order_mark_is_skipped(tmp_path):
    with_header, without = tmp_path / "a.csv", tmp_path / "b.csv"
    with_header.write_bytes(b"\xef\xbb\xbfuser,item,rating\n1,2,3\n2,3,4\n")
    without.write_bytes(b"\xef\xbb\xbf1,2,3\n2,3,4\n")
    for path in (with_header, without):
        data = read_table(path)
        assert data.nnz == 2 and list(data.user_ids) == [1, 2]
    movielens = tmp_path / "u.data"
    movielens.write_bytes(b"\xef\xbb\xbf196\t242\t3\t881250949\n186\t302\t3\t891717742\n")
    assert sorted(read_movielens_100k(movielens).user_ids) == [186, 196]


def test_a_stored_zero_rating_is_refused_unless_the_scale_has_zero():
    X = sp.csr_matrix((np.array([0.0, 3, 4, 2, 1, 1, 1]), [0, 1, 2, 0, 0, 1, 2], [0, 3, 4, 7]),
                      shape=(3, 3))
    with pytest.raises(DataError, match=r"1 stored zeros: .*X\.eliminate_zeros"):
        NCAE(device="cpu", hidden=(4,)).fit(X, epochs=1, verbose=False)
    NCAE(device="cpu", hidden=(4,), rating_scale=(0, 5)).fit(X, epochs=1, verbose=False)


def test_a_file_as_the_data_set(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = {(u, i): rng.integers(1, 6) for u, i in zip(rng.integers(0, 40, 600),
                                                       rng.integers(0, 30, 600))}
    path = tmp_path / "mine.tsv"
    path.write_text("".join(f"{u}\t{i}\t{r}\n" for (u, i), r in rows.items()))
    assert train.main(["--dataset", str(path), "--hidden", "8", "--epochs", "1", "--device",
                       "cpu", "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert (f"{path}: columns by position (no header): user id, item id, rating; ratings 1 to "
            "5 (read off the file") in out
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["test"]["rmse"] > 0
    modelfile.read(tmp_path / "run" / "model.npz", "model")


def test_a_layer_wider_than_the_gpu_kernels_take_is_refused(tmp_path, capsys, gpu_cli):
    gpu_cli("gpu-emulated")
    widest = ops.gpu.MAX_WIDTH
    argv = [*TINY[:-2], "--device", "gpu", "--hidden", f"8,{widest + 1}", "--out",
            str(tmp_path / "wide")]
    refused(train.main, argv, capsys, f"takes a first and last hidden layer up to {widest} wide")
    assert not (tmp_path / "wide" / "run.json").exists()            # the same command can rerun
    with pytest.raises(BackendUnavailable, match=f"hidden {widest + 1},8: the gpu backend"):
        NCAE(device=ops.get_backend("gpu"), hidden=(widest + 1, 8)).fit(
            sp.random(20, 30, density=0.3, format="csr", random_state=0), epochs=1,
            verbose=False)


# ---------------------------------------------------------------------------------------------
# 3. a data file read as its header and its bytes say

def tiny_rows() -> list[tuple]:
    """synthetic-tiny's (user, item, rating, timestamp) records, in its order."""
    d = datasets.load("synthetic-tiny")
    return list(zip(d.user_ids[d.users].tolist(), d.item_ids[d.items].tolist(),
                    d.ratings.tolist(), d.timestamps.tolist()))


def mixed_rows() -> list[tuple]:
    """tiny_rows() in a random order, so that any 100 of them are mostly of users and items of
    the others (in its order, the last 100 are of the last users alone: new, cold)."""
    rows = tiny_rows()
    return [rows[k] for k in np.random.default_rng(0).permutation(len(rows))]


def write_table(path: Path, header: str, rows, compress=None) -> Path:
    """A CSV of the rows with columns in the header's order (user, item, rating, timestamp)."""
    position = {"user": 0, "item": 1, "rating": 2, "timestamp": 3}
    order = [position[name] for name in header.split(",")]
    text = header + "\n" + "".join(",".join(str(row[k]) for k in order) + "\n"
                                   for row in rows)
    path.write_bytes(compress(text.encode()) if compress else text.encode())
    return path


def test_a_header_in_any_order_trains_the_same_model(tmp_path, capsys):
    # Before, item,user,... swapped users and items, and user,item,timestamp,rating trained on
    # timestamps ("ratings 9.47973e+08 to 1.25514e+09"); both printed "columns user, item,
    # rating, timestamp". A gzip file was read as text ("expected 3 tab-separated fields").
    rows, results = tiny_rows(), []
    for name, header, compress in (("a.csv", "user,item,rating,timestamp", None),
                                   ("b.csv", "item,user,rating,timestamp", None),
                                   ("c.csv", "user,item,timestamp,rating", None),
                                   ("d.csv.gz", "item,timestamp,user,rating", gzip.compress)):
        path = write_table(tmp_path / name, header, rows, compress)
        out = tmp_path / f"run-{name}"
        assert train.main(["--dataset", str(path), "--hidden", "8", "--epochs", "1", "--device",
                           "cpu", "--out", str(out)]) == 0
        labels = {"user": "user id", "item": "item id", "rating": "rating",
                  "timestamp": "timestamp"}
        mapping = ", ".join(f"{name} = {labels[name]}" for name in header.split(","))
        assert (f"{path}: columns by the header: {mapping}; ratings 1 to 5"
                in capsys.readouterr().out)
        results.append(json.loads((out / "metrics.json").read_text())["test"])
    assert all(result == results[0] for result in results)


def test_bytes_that_are_not_utf8_are_refused_or_read_by_the_encoding_given(tmp_path, capsys):
    # Before, "José", "Josè" and "Josê" (Latin-1) all became "Jos\ufffd": one id, three times.
    path = tmp_path / "latin.csv"
    names = ["José", "Josè", "Josê"]
    path.write_bytes("".join(f"{names[u % 3]}{u // 3},{i},{r:g}\n"
                             for u, i, r, _ in tiny_rows()).encode("latin-1"))
    refused(train.main, ["--dataset", str(path), *TINY[2:], "--out", str(tmp_path / "r")],
            capsys, f"{path}:1: not utf-8 text (b'\\xe8': invalid continuation byte): give the "
                    "file's encoding with --encoding (e.g. latin-1)")
    out = tmp_path / "latin"
    assert train.main(["--dataset", str(path), "--encoding", "latin-1", *TINY[2:], "--epochs",
                       "1", "--out", str(out)]) == 0
    model = NCAE.load(out / "model.npz", device="cpu")
    assert len(set(model.user_ids.tolist())) == len(model.user_ids) == 60
    assert {"José1", "Josè1", "Josê1"} <= set(model.user_ids.tolist())
    refused(train.main, ["--dataset", str(path), "--encoding", "latin-9000", *TINY[2:]], capsys,
            "argument --encoding: unknown encoding 'latin-9000'")


def test_quoted_ids_and_a_separator_given(tmp_path, capsys):
    # Before, "1","52",4 made user '"1"', unknown as 1.
    path = tmp_path / "quoted.txt"
    path.write_text("".join(f'"{u}"|"{i}"|{r:g}\n' for u, i, r, _ in tiny_rows()))
    out = tmp_path / "run"
    assert train.main(["--dataset", str(path), "--sep", "|", *TINY[2:], "--epochs", "1",
                       "--out", str(out)]) == 0
    capsys.readouterr()
    assert recommend.main([str(out / "model.npz"), "--users", "1", "-n", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("1,1,")


@pytest.mark.parametrize("text, message", [
    ("", "empty.csv:1: empty file, no interactions"),
    ("user,item,rating\n1,2,3\n2,3,-1\n", "empty.csv:3: rating '-1' is negative (ratings are "
                                           ">= 0)"),
    ("user,film,rating\n1,2,3\n", "empty.csv:1: a header with names this reader does not know "
                                   "('film')"),
])
def test_a_bad_file_names_its_line(tmp_path, capsys, text, message):
    # Before: an empty file said "cannot tell the separator ... (pass sep=...)", a negative
    # rating "X: 1 negative values, e.g. -1.0 at (1, 2)".
    path = tmp_path / "empty.csv"
    path.write_text(text)
    refused(train.main, ["--dataset", str(path), *TINY[2:], "--out", str(tmp_path / "r"),
                         "--feedback", "explicit"], capsys, message)


def cut_gzip(path: Path) -> None:
    """A gzipped table cut in half, as a download that stopped would leave it."""
    rows = np.random.default_rng(0).integers(0, 1000, (20_000, 2))
    whole = gzip.compress(b"user,item\n" + b"".join(b"%d,%d\n" % tuple(r) for r in rows))
    path.write_bytes(whole[:len(whole) // 2])


@pytest.mark.parametrize("make, given, message", [
    # before, "--train data.csv: no such file", and --dataset "neither a data set's name nor a
    # file" with the names listed
    (Path.mkdir, "--train", "--train data.csv: a folder, not a data file"),
    (Path.mkdir, "--dataset", "--dataset data.csv: a folder, not a data file: name a file in "
                              "it, or a data set's name with --data-dir data.csv"),
    (cut_gzip, "--dataset", "data.csv: cannot read it (Compressed file ended before the "
                            "end-of-stream marker was reached)"),  # never the rows before it
    (cut_gzip, "--train", "data.csv: cannot read it (Compressed file ended"),
], ids=["a folder to --train", "a folder to --dataset", "a gzip cut short", "to --train"])
def test_a_data_file_that_cannot_be_read_is_named(tmp_path, capsys, monkeypatch, make, given,
                                                  message):
    monkeypatch.chdir(tmp_path)
    make(Path("data.csv"))
    data = ["--dataset", "data.csv"] if given == "--dataset" else ["--train", "data.csv",
                                                                   "--test", "data.csv"]
    refused(train.main, [*data, *TINY[2:], "--out", "r"], capsys, message)
    assert not Path("r").exists()


@pytest.mark.parametrize("flags, message", [
    (["--test", "t.csv"], "--train and --test name your own split together"),
    (["--train", "t.csv", "--test", "t.csv", "--dataset", "synthetic"],
     "--dataset synthetic: with --train and --test the data and split are those files"),
    (["--train", "t.csv", "--test", "t.csv", "--split", "random"], "--split random: with"),
    (["--train", "t.csv", "--test", "nowhere.csv"], "--test nowhere.csv: no such file"),
    (["--test-r", "0.2"], "unrecognized arguments: --test-r"),     # no abbreviations
    # before, accepted and unread (a folder not there, even)
    (["--data-dir", "nowhere"], "--data-dir nowhere: is where a published data set is kept; "
                                "--dataset synthetic is not one: leave it out"),
    (["--train", "t.csv", "--test", "t.csv", "--data-dir", "d"],
     "--data-dir d: is where a published data set is kept; --train t.csv is not one"),
    # ratios the files' parts leave unread: before, accepted and ignored
    (["--train", "t.csv", "--test", "t.csv", "--test-ratio", "0.3"],
     "--test-ratio 0.3: with --train and --test the test part is the --test file"),
    (["--train", "t.csv", "--test", "t.csv", "--valid", "t.csv", "--valid-ratio", "0"],
     "--valid-ratio 0: with --valid the validation part is that file"),
    # before, accepted and read by no draw
    (["--train", "t.csv", "--test", "t.csv", "--valid", "t.csv", "--split-seed", "2"],
     "--split-seed 2: --train, --test and --valid are the parts, and nothing is drawn at "
     "random here (the seed draws the validation part --valid-ratio carves from --train, and "
     "--data-ratio's sample below 1): leave it out"),
])
def test_a_given_split_and_its_flags(tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "t.csv", "user,item,rating", [r[:3] for r in tiny_rows()])
    refused(train.main, [*TINY[2:], *flags], capsys, message)


def test_a_given_split_trains_on_its_files_with_ids_mapped_across_them(tmp_path, capsys):
    rows = mixed_rows()
    train_file = write_table(tmp_path / "train.csv", "user,item,rating,timestamp", rows[:500])
    test_file = write_table(tmp_path / "test.csv", "item,user,rating", [
        (u, i, r) for u, i, r, _ in rows[500:]])
    out = tmp_path / "run"
    assert train.main(["--train", str(train_file), "--test", str(test_file), *TINY[2:],
                       "--epochs", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "note: given split: train.csv (500 train), test.csv (100 test)" in printed
    assert "validation: 50 random training entries" in printed
    summary = json.loads((out / "metrics.json").read_text())
    data, cold = summary["data"], summary["data"]["cold_test"]["entries"]
    assert {k: data[k] for k in ("users", "items", "interactions", "train")} == {
        "users": 60, "items": 50, "interactions": 600, "train": 450}
    assert data["valid"] + data["cold_valid"]["entries"] == 50
    assert data["test"] + cold == 100 and summary["test"]["entries"] == data["test"]


def test_a_given_test_file_of_new_users_alone_is_refused_in_a_line(tmp_path, capsys):
    rows = tiny_rows()                       # in user order: the last 100 of the last users
    train_file = write_table(tmp_path / "train.csv", "user,item,rating", rows[:500])
    test_file = write_table(tmp_path / "test.csv", "user,item,rating", rows[500:])
    refused(train.main, ["--train", str(train_file), "--test", str(test_file), *TINY[2:],
                         "--out", str(tmp_path / "run")], capsys,
            "test.csv: all 100 test entries are of users or items with no training or "
            "validation entry, which are scored apart: none is left to test the model on (give "
            "test entries of --train's users and items)")


@pytest.mark.parametrize("header, held_out", [("user,item", 1), ("user,item,rating", 2)])
def test_a_file_of_one_user_is_refused_as_cold_not_as_a_learning_rate(tmp_path, capsys, header,
                                                                      held_out):
    # One user: every held-out item is one no training entry has. Before: "the validation
    # ndcg@100 (rmse) became nan after epoch 1: lower the learning rate (lr, --lr)".
    path = write_table(tmp_path / "one.csv", header, [("me", f"item{k}", k % 5 + 1)
                                                     for k in range(20)])
    refused(train.main, ["--dataset", str(path), *TINY[2:], "--epochs", "2", "--out",
                         str(tmp_path / "run")], capsys,
            f"error: validation: all {held_out} entries are of users or items with no training "
            "entry (cold, scored apart): none is left to choose the epoch on")


def test_a_given_validation_file_of_new_users_alone_is_refused_in_a_line(tmp_path, capsys):
    # Before, its entries were set apart as cold and 45 random training entries validated
    # instead: "validation: 45 random training entries ... carved from train", exit 0.
    rows = tiny_rows()                       # in user order: the last 100 of the last users
    train_file = write_table(tmp_path / "train.csv", "user,item,rating",
                             [r[:3] for k, r in enumerate(rows[:500]) if k % 10])
    test_file = write_table(tmp_path / "test.csv", "user,item,rating", rows[:500:10])
    valid_file = write_table(tmp_path / "valid.csv", "user,item,rating", rows[500:])
    refused(train.main, ["--train", str(train_file), "--test", str(test_file), "--valid",
                         str(valid_file), *TINY[2:], "--out", str(tmp_path / "run")], capsys,
            "valid.csv: all 100 validation entries are of users or items with no training "
            "entry, which are scored apart: none is left to choose the epoch on (give validation "
            "entries of --train's users and items)")


COMMANDS = ("ncae_cuda.commands.train", "ncae_cuda.commands.recommend",
            "ncae_cuda.commands.experiments", "ncae_cuda.commands.datasets",
            "ncae_cuda.commands.tune", "bench.ann", "bench.autorec_peer", "bench.epoch_time",
            "bench.floors", "bench.kernel_peers", "bench.launches", "bench.ncu_summary",
            "bench.peer_torch", "bench.reader_speed", "bench.recommend_time", "bench.report",
            "bench.scalability", "bench.serve_load", "bench.tuned_alike", "bench.warm_start",
            "dev.cuda.run")                  # the modules of every command that main(argv) runs


def test_no_cli_takes_an_abbreviation_or_says_a_default_twice(monkeypatch, capsys):
    import argparse
    import importlib
    built = []
    real = argparse.ArgumentParser.__init__

    def record(self, *args, **kwargs):
        real(self, *args, **kwargs)
        built.append((self.prog, self.allow_abbrev))
    monkeypatch.setattr(argparse.ArgumentParser, "__init__", record)
    for name in COMMANDS:
        try:
            module = importlib.import_module(name)
        except ImportError:                  # bench.peer_torch without torch
            continue
        for argv in (["--help"], ["describe", "--help"]):
            with pytest.raises(SystemExit):
                module.main(argv)
            text = " ".join(capsys.readouterr().out.split())
            # before, recommend's --out said "(default: stdout) (default: None)"
            assert not re.search(r"\(default: [^)]*\) \(default:|\(default: (None|False)\)",
                                 text), (name, text)
    assert len(built) >= 20 and all(not abbrev for _, abbrev in built), built


def test_every_bench_flag_says_what_it_is_and_its_default(monkeypatch, capsys):
    """Each flag of the benches' and dev/cuda's commands has a help, and says its default where
    it has one. Before, 35 did not: scalability --help named neither what --ks is nor that its
    default is 100,300,500 at the ML-10M shape, a run of hours on a CPU."""
    import argparse
    import importlib
    built = []
    real = argparse.ArgumentParser.__init__

    def record(self, *args, **kwargs):
        real(self, *args, **kwargs)
        built.append(self)
    monkeypatch.setattr(argparse.ArgumentParser, "__init__", record)
    unsaid = []
    for name in COMMANDS:
        if name.startswith("ncae_cuda."):
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:                  # bench.peer_torch without torch
            continue
        built.clear()
        with pytest.raises(SystemExit):
            module.main(["--help"])
        capsys.readouterr()
        for action in built[0]._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            flag = action.option_strings[-1] if action.option_strings else action.dest
            if not action.help:
                unsaid.append(f"{name} {flag}: no help")
            elif (action.default not in (None, False, True, []) and not action.required
                  and "default" not in action.help):
                unsaid.append(f"{name} {flag}: its default {action.default!r} unsaid")
    assert unsaid == []


@pytest.mark.parametrize("module, argv, message", [
    # each before any work: baselines' before its data is read (the data set named is none)
    (baselines, ["--dataset", "x.csv", "--cutoffs", "0"],
     "--cutoffs: must be positive integers, e.g. 10,100; got 0 (see --help)"),
    # before, refused by the first model made, after the data was read and a study scored
    (baselines, ["--dataset", "x.csv", "--cutoffs", "10,10"],
     "--cutoffs: must each be given once; 10 is repeated"),
    (baselines, ["--dataset", "x.csv", "--seed", "-1"], "--seed must be >= 0; got -1"),
    (check, ["--device", "cpu", "--no-train", "--seed", "-1"], "--seed must be >= 0; got -1"),
    (check, ["--device", "cpu", "--no-train", "--json", "nowhere/check.json"],
     "--json nowhere/check.json: there is no folder nowhere"),
    (check, ["--device", "cpu", "--no-train", "--json", "FOLDER"],
     "--json FOLDER: a folder; name the JSON file to write"),
    (experiments, ["configurations", "--repeats", "0"], "--repeats must be >= 1"),
    (experiments, ["recipes"], "recipes: name the recipe files, e.g. --recipes "
                               "recipes/ml-100k-*.toml"),
    # before, listed and run: every run failed on it, and the corrected name was then refused
    # as other settings than the folder's runs were listed with
    (experiments, ["configurations", "--dataset", "nosuch", "--out", "OUT"],
     "--dataset nosuch: neither a data set's name nor a file"),
    # --ms by the cutoffs' rule, as given: before, the runs' --cutoffs with topm's own M added
    # ("run NCAE--seed0: --cutoffs: ...; got (0, 50, 100)"), train's parser's line for 0.5,
    # and 100,100 accepted, each M twice in the table
    # its example --ms's own default (before, --cutoffs', 10,100)
    (experiments, ["topm", "--ms", "0,50", "--out", "OUT"],
     "error: --ms: must be positive integers, e.g. 50,100,150,200,250; got 0,50 (see --help)"),
    (experiments, ["topm", "--ms", "0.5,50", "--out", "OUT"],
     "experiments: error: --ms: must be positive integers, e.g. 50,100,150,200,250; got "
     "0.5,50 (see"),
    (experiments, ["topm", "--ms", "100,100", "--out", "OUT"],
     "error: --ms: must each be given once; 100 is repeated (see --help)"),
    (recommend, ["model.npz", "--all", "--out", "FOLDER"],
     "--out FOLDER: a folder; name the CSV file to write"),
    (tune, ["--dataset", "synthetic-tiny", "--out", "FILE"], "--out FILE: a file, not a folder"),
    (tune, ["--dataset", "synthetic-tiny", "--split-seeds", "0,0", "--out", "OUT"],
     "--split-seeds: each split once"),
    (tune, ["--dataset", "synthetic-tiny", "--split-seeds", "-1", "--out", "OUT"],
     "--split-seeds must be >= 0; got -1"),
], ids=["baselines cutoffs", "baselines cutoff twice", "baselines seed", "check seed",
        "check json nowhere", "check json folder", "experiments repeats", "experiments recipes",
        "experiments data",
        "topm ms zero", "topm ms fraction", "topm ms twice",
        "recommend out", "tune out", "tune split seeds twice", "tune split seeds"])
def test_a_flag_out_of_range_is_refused_before_any_work(tmp_path, capsys, monkeypatch, module,
                                                       argv, message):
    """A flag's mistake in one line, exit 2, and nothing made: no --out folder, no file."""
    monkeypatch.chdir(tmp_path)
    Path("FOLDER").mkdir()
    Path("FILE").touch()
    refused(module.main, argv, capsys, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE", "FOLDER"]


@pytest.mark.parametrize("cutoffs, reason", [
    ("0,10", "must be positive integers, e.g. 10,100; got 0,10"),
    ("10,10", "must each be given once; 10 is repeated")], ids=["zero", "twice"])
@pytest.mark.parametrize("module, flags", [
    (train, ["--feedback", "implicit"]), (baselines, []), (tune, ["--model", "ease"])],
    ids=["train", "baselines", "tune a baseline"])
def test_cutoffs_are_refused_by_one_rule_in_one_line(tmp_path, capsys, monkeypatch, module,
                                                     flags, cutoffs, reason):
    """Every command's --cutoffs by the models' one rule (config.checked_cutoffs), said alike
    and said once, before any work. Before, baselines refused 0 in words of its own
    ("--cutoffs must be >= 1; got 0,10"), and tune first printed a "not searched" note giving
    the cutoffs' error as its reason, then the error."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        module.main([*flags, "--dataset", "synthetic-tiny", "--device", "cpu", "--out", "OUT",
                     "--cutoffs", cutoffs])
    printed, err = capsys.readouterr()
    assert stopped.value.code == 2 and printed == "" and not Path("OUT").exists(), printed
    assert err == f"python -m {module.__name__.replace('.commands', '')}: error: --cutoffs: " \
                  f"{reason} (see --help)\n"


@pytest.mark.parametrize("flags, message", [
    (["--device", "gpu"], "error: --device gpu needs a CUDA GPU: none here\n"),
    (["--device", "cpu", "--gpus", "0,1"], "python -m ncae_cuda.tune: error: --gpus 0,1: the "
     "trials run on the CPU (--device cpu): leave out --gpus, or use --device gpu (see "
     "--help)\n"),
    (["--gpus", "0"], "python -m ncae_cuda.tune: error: --gpus 0: the trials run on the CPU "
     "(--device auto): leave out --gpus, or use --device gpu (see --help)\n"),
], ids=["no gpu", "gpus on the cpu", "gpus where auto is the cpu"])
def test_tune_refuses_a_device_before_any_trial(tmp_path, capsys, monkeypatch, flags, message):
    # before: without a GPU, ten trials failed on it, kept in the study, then the command
    # asked whether the space's range was too wide; --gpus on the CPU was taken and unused
    monkeypatch.setattr(ops, "HAS_CUDA", False)
    monkeypatch.setattr(ops, "NO_CUDA_REASON", "none here")
    out = tmp_path / "out"
    code, err = cli(tune.main, ["--dataset", "synthetic-tiny", "--trials", "2", *flags,
                                "--out", str(out)], capsys)
    assert code == 2 and err == message and not out.exists(), err


@pytest.mark.parametrize("module, argv", [
    (train, []), (tune, []), (baselines, []), (experiments, ["configurations"]),
    (recommend, ["model.npz"]), (datasets_command, []), (datasets_command, ["describe", "x"]),
    (check, []),
])
def test_a_flag_mistake_prints_one_line_that_names_help(module, argv, capsys):
    code, err = cli(module.main, [*argv, "--no-such-flag"], capsys)
    entry = module.__name__.replace(".commands.", ".")          # python -m's name of it
    assert code == 2 and re.fullmatch(rf"python -m {entry}: error: [^\n]+ "
                                      r"\(see --help\)\n", err), err
    with pytest.raises(SystemExit) as help_:                # --help: all of it, as before
        module.main([*argv[:1], "--help"] if module is datasets_command else ["--help"])
    assert help_.value.code == 0 and capsys.readouterr().out.startswith("usage: ")


def test_latest_validation_on_data_without_times_says_it_is_random(tmp_path, capsys):
    undated = tmp_path / "undated.csv"
    undated.write_text("user,item\n" + "".join(f"{u},{i}\n" for u in range(6) for i in range(4)))
    assert train.main(["--dataset", str(undated), "--feedback", "implicit", "--valid-item",
                       "latest", "--hidden", "4", "--epochs", "1", "--device", "cpu", "--out",
                       str(tmp_path / "run")]) == 0
    assert ("note: no timestamps: the validation item is a random other interaction, not the "
            "latest (--valid-item latest orders by time)") in capsys.readouterr().out


@pytest.mark.parametrize("rows, flags, message", [
    ("user,item\n1,1\n", ["--feedback", "implicit"],           # one row: no user to test
     "the split has no test entries (leave-one-out tests the users with 2 or more "
     "interactions; there are none)"),
    ("user,item\n" + "".join(f"{u},7\n" for u in range(30)), [],   # one item: the same
     "the split has no test entries (leave-one-out tests the users with 2 or more "
     "interactions; there are none)"),
    ("user,item,rating\n1,1,4\n1,2,3\n2,1,1\n2,2,5\n", [],        # explicit: 0.1 of 4 is 0
     "the split has no test entries (--test-ratio 0.1 of 4 entries is none)"),
])
def test_a_split_without_test_entries_is_refused_before_training(tmp_path, capsys, rows, flags,
                                                                 message):
    data = tmp_path / "few.csv"
    data.write_text(rows)
    code = train.main(["--dataset", str(data), *flags, "--hidden", "4", "--device", "cpu",
                       "--out", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 2 and f"error: few.csv: {message}" in err and "Traceback" not in err, err
    assert "select: training" not in out


@pytest.mark.parametrize("flags, message", [
    ([], "(leave-one-out holds out a validation item of each user with 3 or more interactions; "
         "there are none): use --split time"),        # --valid-ratio 0.1 by default, unused
    (["--split", "time", "--test-ratio", "0.2", "--valid-ratio", "0.005"],
     "(--valid-ratio 0.005 of 60 entries is none): raise --valid-ratio"),
    (["--split", "time", "--test-ratio", "0.2", "--valid-ratio", "0"],
     "(--valid-ratio 0): give --valid-ratio above 0"),
])
@pytest.mark.parametrize("command, use", [
    (baselines, "choose the baselines' settings on"), (tune, "score the trials on"),
    (train, "choose the epoch on")], ids=["baselines", "tune", "train --validation-only"])
def test_a_split_without_validation_says_why_before_any_work(tmp_path, capsys, flags, message,
                                                            command, use):
    # before: baselines said 'give --valid-ratio above 0' where it was 0.1; tune ran ten
    # trials that failed, then asked 'is the space's range too wide?'
    # 30 users of 2 items each, every user's second after all the firsts: a time split's
    # held-out entries are of users seen before its cut
    data = write_table(tmp_path / "pairs.csv", "user,item,timestamp",
                       [(u, i, None, 100 * k + u) for u in range(30)
                        for k, i in enumerate((u % 7, 7 + u % 5))])
    out = tmp_path / "out"
    argv = {baselines: ["--models", "pop"], tune: ["--trials", "2"],
            train: ["--validation-only", "--hidden", "4"]}[command]
    code, err = cli(command.main, ["--dataset", str(data), *flags, "--device", "cpu", *argv,
                                   "--out", str(out)], capsys)
    assert code == 2
    assert re.fullmatch(rf"error: pairs.csv: this split has no validation entry to {use} "
                        rf"{re.escape(message)}\n", err), err
    assert not (out / "trials").exists()


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_an_empty_held_out_part_scores_nan_through_the_api(feedback):
    data = datasets.load("synthetic-tiny")
    split = splits.leave_one_out(data)
    model = NCAE(device="cpu", feedback=feedback, hidden=(4,), epochs=1).fit(split.train,
                                                                            verbose=False)
    figures = model.evaluate(split.test.subset(slice(0, 0)), exclude=split.valid, per_user=True)
    assert figures.pop("clusters") == [] and figures.pop("entries" if feedback == "explicit"
                                                         else "rows") == 0
    assert figures and all(np.isnan(v) for v in figures.values()), figures


def test_a_batch_larger_than_the_rows_is_the_rows():
    X = sp.random(60, 50, density=0.2, format="csr", random_state=3) * 4 + 0
    X.data = np.ceil(X.data)
    rows = int((X.getnnz(axis=0) > 0).sum())          # item-based: a row is an item
    fitted = [NCAE(device="cpu", hidden=(6,), epochs=3, batch_size=b).fit(X, verbose=False)
              for b in (10**9, rows)]         # a billion asked for 78 GiB of padding before
    np.testing.assert_array_equal(*(m.ops.to_host(m._net.params) for m in fitted))
    assert [h["loss"] for h in fitted[0].history] == [h["loss"] for h in fitted[1].history]


@pytest.mark.parametrize("feedback, lines", [
    ("explicit", "a batch's hidden layers and their gradients: about 2 x 50 x 14 floats"),
    ("implicit", "dense output of a batch: about 3 x 60 x 50 floats"),
])
def test_out_of_memory_names_the_batch_at_the_size_it_has(monkeypatch, feedback, lines):
    from ncae_cuda.model import network

    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 1 TiB")
    monkeypatch.setattr(network, "StepMemory", no_memory)
    X = sp.random(60, 50, density=0.2, format="csr", random_state=3) * 4 + 0
    X.data = np.ceil(X.data)
    with pytest.raises(OutOfMemory) as e:
        NCAE(device="cpu", feedback=feedback, hidden=(8, 6), batch_size=10**9).fit(
            X, epochs=1, verbose=False)
    assert f"{lines} = 0 MiB (lower --batch-size)" in str(e.value), str(e.value)


def test_a_cutoff_past_the_catalogue_is_noted(tmp_path, capsys):
    """Before: HR@50 of 1 for any model on synthetic-tiny's 50 items, unsaid (a tuner of
    Recall@50 ties every trial)."""
    out = tmp_path / "run"
    assert train.main([*TINY, "--feedback", "implicit", "--cutoffs", "5,50", "--epochs", "1",
                       "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert ("note: cutoff @50 at or above the 50 items: HR and Recall there are 1 for any model "
            "(--cutoffs sets smaller ones)") in printed
    test = json.loads((out / "metrics.json").read_text())["test"]
    assert test["hr@50"] == 1 and test["hr@5"] < 1


def test_a_reader_that_stops_reading_ends_a_command_quietly(tmp_path):
    """Output piped into a reader that has gone (| head -1): exit 141, as a Unix tool's, and
    no BrokenPipeError traceback (before: one, exit 1)."""
    model = trained(tmp_path, "--epochs", "1")
    for command in (["datasets", "list"], ["recommend", str(model), "--all", "-n", "5"]):
        done = subprocess.Popen([sys.executable, "-m", f"ncae_cuda.{command[0]}", *command[1:]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
        done.stdout.close()                 # gone before the command writes a line
        assert (done.wait(timeout=60), done.stderr.read()) == (141, b""), command


@pytest.mark.parametrize("files, said", [
    ({"__init__.py": "raise ImportError('libtorch_cpu.so: cannot open shared object file')"},
     "PyTorch is installed but does not import (libtorch_cpu.so: cannot open shared object "
     "file): reinstall it"),
    ({"__init__.py": "", "distributed/__init__.py": "def is_available():\n    return False\n"},
     "this PyTorch is built without torch.distributed: install a build with it")])
def test_a_sharded_run_names_what_is_wrong_with_an_installed_torch(tmp_path, files, said):
    """A PyTorch that is there but cannot run the job (a broken install, a build without
    torch.distributed, here stand-ins on PYTHONPATH): before, the first was told to pip install
    it, the second got an AttributeError's traceback."""
    for name, text in files.items():
        (tmp_path / "torch" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "torch" / name).write_text(text)
    done = subprocess.run([sys.executable, "-m", "ncae_cuda.train", *TINY, "--shard", "columns",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert done.returncode == 2 and done.stderr.splitlines() == [f"error: {said}"], done.stderr


def test_a_blend_s_data_ratio_is_refused_before_the_run_starts(tmp_path, capsys):
    """--data-ratio keeps a share of each row's entries, and a blend's two NCAEs have rows of
    two kinds: before, the run started (its folder made, the data read) and failed, "error:
    based must be 'user' or 'item', not 'both'"."""
    refused(train.main, [*TINY, "--feedback", "explicit", "--based", "both", "--data-ratio",
                         "0.4", "--out", str(tmp_path / "o")], capsys,
            "--data-ratio 0.4: keeps a share of each row's training entries, and based both "
            "blends an item- and a user-based NCAE, whose rows differ: give --based item or "
            "user")
    assert not (tmp_path / "o").exists()


# a command's __main__ through cli.exit_with, its work paused until the test's SIGINT once it
# has said so; argv: [HOW], the continuation its work says (continued_by: '' for None, another
# process's to say), or none
PAUSED_COMMAND = """
import contextlib, signal, sys
from ncae_cuda import cli


def main():
    with cli.continued_by(sys.argv[1] or None) if sys.argv[1:] else contextlib.nullcontext():
        print("started", flush=True)
        signal.pause()


cli.exit_with(main)
"""


def interrupted(argv: list[str], started: str, errors: Path, signum=signal.SIGINT,
                **popen) -> tuple[int, str]:
    """(exit status, stderr) of the command `argv`, sent `signum` (SIGINT: a terminal's
    Ctrl-C) once it has printed a line starting `started`: its work under way, no sleep to
    time it. Its stderr goes to the file `errors`, which a pipe unread meanwhile could not
    hold."""
    with open(errors, "w+") as stderr:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=REPO,
                                **popen)
        try:
            said = next((line for line in proc.stdout if line.startswith(started)), None)
            if said is not None:
                proc.send_signal(signum)
            code = proc.wait(120)
        finally:
            proc.kill()
            proc.stdout.close()
        assert said is not None, errors.read_text()       # (ended without the line)
        return code, errors.read_text()


@pytest.mark.parametrize("how, signum, said", [
    ([], signal.SIGINT, "\ninterrupted\n"),
    (["continue with X"], signal.SIGINT, "\ninterrupted: continue with X\n"),
    ([""], signal.SIGINT, ""),
    ([], signal.SIGTERM, "\nSIGTERM: stopped\n"),
    (["continue with X"], signal.SIGTERM, "\nSIGTERM: stopped: continue with X\n")])
def test_a_ctrl_c_ends_a_command_in_a_line_saying_how_to_continue(tmp_path, how, signum, said):
    """Every command's Ctrl-C: exit 130 (128 + SIGINT) and one line, naming the continuation
    where its work said one, and none where another process of its job says it (a sharded
    train's ranks but 0); before, a KeyboardInterrupt traceback and exit -2 (killed by
    SIGINT) in every command but train's. A SIGTERM alike, exit 143; before, -15 unsaid."""
    script = tmp_path / "paused.py"
    script.write_text(PAUSED_COMMAND)
    code, stderr = interrupted([sys.executable, str(script), *how], "started",
                               tmp_path / "stderr", signum,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (code, stderr) == (128 + signum, said)


@pytest.mark.parametrize("within", ["deferred", "recorded"])
@pytest.mark.parametrize("signum, said", [(signal.SIGINT, "interrupted"),
                                          (signal.SIGTERM, "SIGTERM: stopped")])
def test_a_second_signal_in_a_fit_ends_a_command_as_that_signal(capsys, within, signum, said):
    """A second SIGTERM while a fit stops (stopping.deferred, or a tuning worker's recorded),
    which stops it at once: exit 143 and `SIGTERM: stopped`; before, said as a Ctrl-C's,
    `interrupted` and exit 130 (the KeyboardInterrupt it raised named no signal)."""
    def main():
        with continued_by("continue with X"), getattr(stopping, within)():
            os.kill(os.getpid(), signum)        # asks the fit to stop at its step's end
            os.kill(os.getpid(), signum)        # stops it at once
    with pytest.raises(SystemExit) as ended:
        exit_with(main)
    assert (ended.value.code, capsys.readouterr().err) == (128 + signum,
                                                           f"\n{said}: continue with X\n")


# `python -m ncae_cuda.NAME` (argv: NAME MODULE), its first import of a module named MODULE...
# paused until the test's SIGINT once it has said so
PAUSED_IMPORT = """
import runpy, signal, sys


class PausedImport:
    def find_spec(self, name, path, target=None):
        if name.startswith(sys.argv[2]):
            print("importing", flush=True)
            signal.pause()


sys.meta_path.insert(0, PausedImport())
runpy.run_module(f"ncae_cuda.{sys.argv[1]}", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("loading", ["ncae_cuda.commands.", "numpy"])
@pytest.mark.parametrize("command", ["train", "tune", "baselines", "experiments", "recommend",
                                     "serve", "check", "datasets"])
def test_a_ctrl_c_as_a_command_loads_ends_it_in_a_line(tmp_path, command, loading):
    """A Ctrl-C while `python -m ncae_cuda.NAME` imports its command's module, or the first of
    the libraries (numpy; most of a command's start): exit 130 and `interrupted`. Before, the
    shim imported its command before cli.exit_with ran, and Python imported numpy with the
    package (its face's NCAE) before the shim: a traceback."""
    script = tmp_path / "paused.py"
    script.write_text(PAUSED_IMPORT)
    code, stderr = interrupted([sys.executable, str(script), command, loading], "importing",
                               tmp_path / "stderr", env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (code, stderr) == (130, "\ninterrupted\n")


# `python -m ncae_cuda.NAME ARGS...` (argv: NAME ARGS...) given a Ctrl-C inside llvmlite's
# ctypes callback of its first compile in the main thread (where Python prints an exception
# raised as "Exception ignored" and drops it); it says so first
CTRL_C_IN_COMPILE = """
import runpy, signal, sys, threading
from numba.core import codegen

object_compiled = codegen.JITCodeLibrary._object_compiled_hook
pressed = []


def on_object_compiled(cls, ll_module, buf):
    if not pressed and threading.current_thread() is threading.main_thread():
        pressed.append(True)
        print("pressed", flush=True)
        signal.raise_signal(signal.SIGINT)        # its Python handler runs before the next line
    object_compiled(ll_module, buf)


codegen.JITCodeLibrary._object_compiled_hook = classmethod(on_object_compiled)
sys.argv = sys.argv[1:]
runpy.run_module(f"ncae_cuda.{sys.argv[0]}", run_name="__main__", alter_sys=True)
"""


def test_a_ctrl_c_in_a_compile_ends_a_command_in_a_line(tmp_path, saved):
    """A Ctrl-C while recommend compiles its kernels (a fresh NUMBA_CACHE_DIR: about 12 s on a
    new install), inside llvmlite's callback: exit 130 and `interrupted`. Before, Python
    dropped it there ("Exception ignored on calling ctypes callback function", a traceback)
    and the command went on to write every recommendation, exit 0."""
    script = tmp_path / "ctrl_c_in_compile.py"
    script.write_text(CTRL_C_IN_COMPILE)
    done = subprocess.run([sys.executable, str(script), "recommend", str(saved), "--all"],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO),
                               "NUMBA_CACHE_DIR": str(tmp_path / "numba")})
    assert "pressed\n" in done.stdout, done.stderr
    # (the compile note before it: recommend's own line as it starts compiling)
    assert done.returncode == 130 and done.stderr.endswith("\n\ninterrupted\n"), done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("signum, said", [(signal.SIGINT, "interrupted"),
                                          (signal.SIGTERM, "SIGTERM: stopped")])
def test_a_ctrl_c_in_baselines_says_resume_and_resume_ends_the_run(tmp_path, signum, said):
    """python -m ncae_cuda.baselines stopped by a Ctrl-C (or a launcher's SIGTERM) while it
    scores its grids: exit 130 (143) and a line naming --resume, which then ends the run;
    before, a traceback from within a fit, exit -2, and run.json and .lock left unsaid (a
    SIGTERM: exit -15, nothing said)."""
    out = tmp_path / "out"
    flags = ["--dataset", "synthetic-tiny", "--device", "cpu", "--models", "ease,item-knn",
             "--out", str(out)]
    command = [sys.executable, "-m", "ncae_cuda.baselines", *flags]
    code, stderr = interrupted(command, "EASE 1/", tmp_path / "stderr", signum)
    assert (code, stderr) == (128 + signum, f"\n{said}: continue with --resume --out {out}\n")
    assert not (out / "baselines.json").exists()
    assert baselines.main([*flags, "--resume"]) == 0
    assert set(json.loads((out / "baselines.json").read_text())["models"]) == {"ease",
                                                                              "item-knn"}
