"""The training CLI end to end on small synthetic data: outputs, determinism, resume, bad flags."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import GPUS
from test_user_errors import mixed_rows, refused, tiny_rows, write_table

from ncae_cuda import NCAE, cli, ops
from ncae_cuda.commands import train
from ncae_cuda.commands.flags import build_parser, run_spec
from ncae_cuda.data import datasets, splits
from ncae_cuda.data.reader import read_table
from ncae_cuda.model import loop, modelfile, stopping
from ncae_cuda.model.config import Config
from ncae_cuda.ops import cpu
from ncae_cuda.runs import protocol
from ncae_cuda.runs.spec import FROM_THE_DATA, DataSpec

TINY = ["--dataset", "synthetic-tiny", "--hidden", "8,6", "--batch-size", "16", "--device", "cpu"]


def run(tmp_path, *extra, name="run"):
    out = tmp_path / name
    code = train.main([*TINY, "--out", str(out), *extra])
    return code, out


def params(out):
    with np.load(out / "model.npz") as f:
        return f["params"]


def test_explicit_end_to_end(tmp_path, capsys):
    code, out = run(tmp_path, "--epochs", "3")
    assert code == 0
    select, refit = capsys.readouterr().out.split("select: ")[1].split("refit: ")
    assert select.count("\nepoch ") == 3 and refit.count("\nepoch ") >= 1
    result = json.loads((out / "metrics.json").read_text())
    assert 0 < result["test"]["rmse"] < 4
    assert result["test"]["clusters"] and result["best_epoch"] >= 1
    assert params(out).dtype == np.float32


def test_a_first_run_says_it_waits_for_the_compile_and_a_second_says_nothing(tmp_path):
    """On a fresh install the first epoch waits seconds for Numba's compile: the note says why,
    once, before the epoch's line; the next run loads the kernels from Numba's cache, silent."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    said = []
    for name in ("first", "second"):
        done = subprocess.run([sys.executable, "-m", "ncae_cuda.train", *TINY, "--epochs", "1",
                               "--out", str(tmp_path / name)], env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
        said.append(done.stderr.count(cpu.COMPILING))
    assert said == [1, 0]


def test_implicit_end_to_end_with_pop(tmp_path):
    code, out = run(tmp_path, "--feedback", "implicit", "--epochs", "2", "--cutoffs", "5,10")
    assert code == 0
    result = json.loads((out / "metrics.json").read_text())
    for model in ("test", "pop"):
        assert 0 <= result[model]["hr@10"] <= 1 and 0 <= result[model]["ndcg@5"] <= 1
    assert result["config"]["split"] == "loo" and result["config"]["based"] == "user"


def test_same_seed_same_parameters(tmp_path):
    first = params(run(tmp_path, "--epochs", "2", name="a")[1])
    second = params(run(tmp_path, "--epochs", "2", name="b")[1])
    other = params(run(tmp_path, "--epochs", "2", "--seed", "1", name="c")[1])
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)


PRETRAIN = ["--pretrain", "S+U+S", "--pretrain-epochs", "2"]


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
@pytest.mark.parametrize("pretraining, stop_at", [
    ([], ("epoch 3", 1)),                 # select phase
    ([], ("epoch 2", 2)),                 # refit phase
    (PRETRAIN, ("layer 2 U 2", 1)),       # inside the select phase's pre-training
    (PRETRAIN, ("output S 1", 2)),        # inside the refit phase's pre-training
    (PRETRAIN, ("epoch 1", 2)),           # refit's first epoch
])
def test_resume_equals_uninterrupted(tmp_path, monkeypatch, feedback, pretraining, stop_at):
    flags = ["--feedback", feedback, "--epochs", "4", "--patience", "0", "--checkpoint-every",
             "0", *pretraining]
    whole = run(tmp_path, *flags, name="whole")[1]

    real_epoch, seen = loop.run_epoch, []
    def interrupted(*args, **kwargs):
        seen.append(args[-1])                                     # the epoch's label
        if seen.count(stop_at[0]) == stop_at[1]:
            raise KeyboardInterrupt
        return real_epoch(*args, **kwargs)
    monkeypatch.setattr(loop, "run_epoch", interrupted)
    with pytest.raises(cli.Interrupted) as stop:      # exit_with's exit 130, and its line:
        run(tmp_path, *flags, name="split")
    assert stop.value.how == f"continue with --resume --out {tmp_path / 'split'}"
    monkeypatch.setattr(loop, "run_epoch", real_epoch)
    assert run(tmp_path, *flags, "--resume", name="split")[0] == 0

    np.testing.assert_array_equal(params(whole), params(tmp_path / "split"))
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (whole, tmp_path / "split"))
    assert a["test"] == b["test"]
    assert [h.get("loss") for h in a["history"]] == [h.get("loss") for h in b["history"]]


def test_resume_refuses_other_settings(tmp_path, capsys):
    run(tmp_path, "--epochs", "1")
    code, _ = run(tmp_path, "--epochs", "1", "--lr", "0.01", "--resume")
    assert code == 2 and "lr: 0.001 -> 0.01" in capsys.readouterr().err


def test_resume_refuses_other_curves(tmp_path, monkeypatch, capsys):
    # before, --curves was not of the run: resumed without it, the history held the test
    # figures of the epochs before the stop and of none after
    flags = ["--epochs", "3", "--patience", "0", "--checkpoint-every", "0"]
    real_epoch = loop.run_epoch
    def interrupted(*args, **kwargs):
        if args[-1] == "epoch 2":
            raise KeyboardInterrupt
        return real_epoch(*args, **kwargs)
    monkeypatch.setattr(loop, "run_epoch", interrupted)
    with pytest.raises(cli.Interrupted):
        run(tmp_path, *flags, "--curves")
    monkeypatch.setattr(loop, "run_epoch", real_epoch)
    capsys.readouterr()
    assert run(tmp_path, *flags, "--resume")[0] == 2
    assert "settings.curves: True -> False" in capsys.readouterr().err
    assert run(tmp_path, *flags, "--curves", "--resume")[0] == 0
    history = json.loads((tmp_path / "run" / "metrics.json").read_text())["history"]
    assert all("test" in record for record in history)


def test_resume_without_a_run_says_so(tmp_path, capsys):
    assert run(tmp_path, "--resume")[0] == 2
    assert "holds no run to continue" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--dropout", "1.5"], "must be in [0, 1)"),
    (["--hidden", "500,x"], "comma-separated integers"),
    (["--epochs", "0"], "--epochs: must be an integer >= 1; got 0"),
    (["--dataset", "nope"], "--dataset nope: neither a data set's name nor a file"),
    (["--feedback", "implicit", "--split", "random"], "use --split loo"),
    (["--device", "tpu"], "invalid choice"),
])
def test_bad_flags_exit_with_a_message(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as e:
        train.main([*TINY, "--out", str(tmp_path), *flags])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.skipif(ops.HAS_CUDA, reason="a GPU is present")
def test_device_gpu_without_gpu_says_so(tmp_path, capsys):
    code = train.main([*TINY[:-2], "--device", "gpu", "--out", str(tmp_path)])
    assert code == 2 and "needs a CUDA GPU" in capsys.readouterr().err


def test_cuda_graphs_on_the_cpu_says_it_is_for_the_gpu(tmp_path, capsys):
    code = train.main([*TINY, "--device", "cpu", "--cuda-graphs", "on", "--out", str(tmp_path)])
    assert code == 2 and "--cuda-graphs is for the GPU backend" in capsys.readouterr().err


def test_the_cli_and_the_api_have_the_same_defaults(tmp_path):
    parser = build_parser()
    _, config = run_spec(parser, ["--out", str(tmp_path)])
    assert config.resolved() == Config().resolved()
    flags = {a.dest: a for a in parser._actions}
    for f in dataclasses.fields(Config):
        default = None if f.name in FROM_THE_DATA else f.default
        assert flags[f.name].default == default and flags[f.name].help, f.name


def test_help_explains_flags(capsys):
    with pytest.raises(SystemExit):
        train.main(["--help"])
    text = capsys.readouterr().out
    for flag in ("--feedback", "--based", "--hidden", "--dropout", "--alpha", "--weighting",
                 "--data-ratio", "--resume", "--patience"):
        assert flag in text
    assert all(action.help for action in build_parser()._actions)
    for quirk in ("(default: True)", "(default: False)", "(default: None)"):
        assert quirk not in text

def test_data_ratio_subsamples_training_rows(tmp_path):
    full = json.loads((run(tmp_path, "--epochs", "1", name="full")[1] / "metrics.json").read_text())
    half = json.loads((run(tmp_path, "--epochs", "1", "--data-ratio", "0.5", name="half")[1]
                       / "metrics.json").read_text())
    assert 0.4 * full["data"]["train"] < half["data"]["train"] < 0.6 * full["data"]["train"]
    assert half["data"]["test"] == full["data"]["test"]       # D thins training only


def test_implicit_item_based_end_to_end(tmp_path):
    code, out = run(tmp_path, "--feedback", "implicit", "--based", "item", "--epochs", "2")
    assert code == 0
    assert 0 <= json.loads((out / "metrics.json").read_text())["test"]["ndcg@100"] <= 1


def test_ml100k_u1_split_files(tmp_path, shared_data):
    code = train.main(["--dataset", "ml-100k", "--data-dir", str(shared_data), "--split", "u1",
                       "--hidden", "8", "--epochs", "1", "--device", "cpu",
                       "--out", str(tmp_path)])
    assert code == 0
    data = json.loads((tmp_path / "metrics.json").read_text())["data"]
    assert data["train"] + data["valid"] + data["cold_valid"]["entries"] == 80_000
    assert data["test"] + data["cold_test"]["entries"] == 20_000       # 32 cold: apart


def test_a_data_sets_own_split_files_are_its_test_and_training(tmp_path, capsys):
    """--split u1 on a stand-in ml-100k folder (synthetic-tiny's 600 ratings in its tab-separated
    layout, u1.base 500 of them in a random order, u1.test the rest): its test entries are
    u1.test's, and its training and validation (--valid-ratio's share drawn from u1.base) are
    u1.base's. The real files' test (above) needs them in $NCAE_CUDA_DATA, which CI has not."""
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    rows = mixed_rows()
    for name, part in (("u.data", rows), ("u1.base", rows[:500]), ("u1.test", rows[500:])):
        (folder / name).write_text("".join(f"{u}\t{i}\t{r:g}\t{t}\n" for u, i, r, t in part))
    assert train.main(["--dataset", "ml-100k", "--data-dir", str(tmp_path), "--split", "u1",
                       "--valid-ratio", "0.2", *TINY[2:], "--epochs", "1",
                       "--out", str(tmp_path / "run")]) == 0
    data = json.loads((tmp_path / "run" / "metrics.json").read_text())["data"]
    assert data["test"] + data["cold_test"]["entries"] == len(rows) - 500
    assert data["train"] + data["valid"] + data["cold_valid"]["entries"] == 500
    assert data["valid"] + data["cold_valid"]["entries"] == 100              # 0.2 of u1.base
    printed = capsys.readouterr().out
    assert "note: split files: u1.base (500 train), u1.test (100 test)" in printed
    assert "100 random training entries (0.2 of 500, seed 0) carved from train" in printed


def test_a_given_split_is_the_data_sets_own_split(tmp_path, shared_data):
    """--train u1.base --test u1.test: the files' ids mapped onto one map, the validation part
    carved from train, are ml-100k's own split u1 to the bit."""
    folder, flags = shared_data / "ml-100k", ["--hidden", "8", "--epochs", "2", "--device", "cpu"]
    assert train.main(["--dataset", "ml-100k", "--data-dir", str(shared_data), "--split", "u1",
                       *flags, "--out", str(tmp_path / "split")]) == 0
    assert train.main(["--train", str(folder / "u1.base"), "--test", str(folder / "u1.test"),
                       *flags, "--out", str(tmp_path / "given")]) == 0
    split, given = (json.loads((tmp_path / name / "metrics.json").read_text())
                    for name in ("split", "given"))
    assert given["test"] == split["test"] and given["data"] == split["data"]
    np.testing.assert_array_equal(params(tmp_path / "given"), params(tmp_path / "split"))


def given_split_flags(tmp_path, **held: list[tuple]) -> list[str]:
    """--train (synthetic-tiny's first 500 ratings) and a flag and file for each held part."""
    flags = ["--train", str(write_table(tmp_path / "train.csv", "user,item,rating",
                                        [row[:3] for row in mixed_rows()[:500]]))]
    for part, rows in held.items():
        header = ",".join(["user", "item", "rating"][:len(rows[0])])
        flags += [f"--{part}", str(write_table(tmp_path / f"{part}.csv", header, rows))]
    return [*flags, *TINY[2:], "--epochs", "1"]


@pytest.mark.parametrize("part", ["test", "valid"])
def test_a_held_out_rating_outside_the_training_files_scale_is_refused(tmp_path, capsys, part):
    # Before, the scale was read off every file: a test rating of 10 beside training ratings of
    # 1-5 trained a model of a 1-10 scale.
    held = [row[:3] for row in mixed_rows()[500:]]
    held[6] = (*held[6][:2], 10)                                        # line 8
    parts = {"test": held} if part == "test" else {"test": held[50:], "valid": held[:50]}
    flags = given_split_flags(tmp_path, **parts)
    refused(train.main, [*flags, "--out", str(tmp_path / "a")], capsys,
            f"error: {tmp_path / part}.csv:8: rating '10' is outside the rating scale [1, 5]\n")
    assert not (tmp_path / "a" / "model.npz").exists()
    assert train.main([*flags, "--rating-scale", "1,10", "--out", str(tmp_path / "b")]) == 0
    assert NCAE.load(tmp_path / "b" / "model.npz", device="cpu").rating_scale == (1, 10)


def test_a_held_out_file_without_ratings_is_the_one_named(tmp_path, capsys):
    # Before: "train.csv has no ratings", of the file that has them.
    flags = given_split_flags(tmp_path, test=[row[:2] for row in mixed_rows()[500:]])
    refused(train.main, [*flags, "--out", str(tmp_path / "run")], capsys,
            "error: test.csv has no ratings: use --feedback implicit\n")


def test_ratings_all_equal_ask_for_the_scale_by_the_flags_name(tmp_path, capsys):
    path = write_table(tmp_path / "same.csv", "user,item,rating",
                       [(*row[:2], 3) for row in tiny_rows()])
    refused(train.main, ["--dataset", str(path), *TINY[2:], "--out", str(tmp_path / "run")],
            capsys, "same.csv: every rating is 3: give the rating scale (--rating-scale "
                    "LOW,HIGH; rating_scale=(low, high) in the API), or, where they are "
                    "interactions rather than ratings, --feedback implicit")


@pytest.mark.parametrize("device", GPUS)
@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_gpu_training_agrees_with_cpu(tmp_path, gpu_cli, device, feedback):
    gpu_cli(device)
    flags = ["--feedback", feedback, "--epochs", "2", "--patience", "0"]
    results = []
    for name in ("cpu", "gpu"):
        assert run(tmp_path, *flags, "--device", name, name=name)[0] == 0
        results.append(json.loads((tmp_path / name / "metrics.json").read_text()))
    cpu, gpu = results
    np.testing.assert_allclose([h["loss"] for h in gpu["history"]],
                               [h["loss"] for h in cpu["history"]], rtol=1e-4)
    for key, value in cpu["test"].items():
        if key == "rmse":
            assert gpu["test"][key] == pytest.approx(value, rel=1e-4)
        elif "@" in key:     # a rank flipped by a near-tie moves a metric by 1 row's share
            assert abs(gpu["test"][key] - value) <= 2 / cpu["test"]["rows"]


def test_out_of_memory_names_the_sizes_and_the_flags(tmp_path, monkeypatch, capsys):
    def exhausted(*args, **kwargs):
        raise MemoryError("Out of memory allocating 1,073,741,824 bytes")
    monkeypatch.setattr(loop, "run_epoch", exhausted)
    code, _ = run(tmp_path, "--feedback", "implicit")
    err = capsys.readouterr().err
    assert code == 2 and "1,073,741,824 bytes" in err
    assert "lower --hidden" in err and "lower --batch-size" in err and "Traceback" not in err


PAUSE_IN_EPOCH_3 = """
import os, sys, time
from ncae_cuda.model import loop, stopping
from ncae_cuda.commands import train

real_epoch = loop.run_epoch


def paused_epoch(step, memory, csr, plan, label, **kwargs):
    steps = []

    def step_then_pause(batch, scale):
        if label == "epoch 3" and len(steps) == 1:      # one step of epoch 3 taken
            open(os.environ["PAUSED"], "w").close()
            while not stopping.asked():                  # until the test's signal (a kill
                time.sleep(0.01)                         # ends it here)
        steps.append(1)
        return step(batch, scale)
    return real_epoch(step_then_pause, memory, csr, plan, label, **kwargs)


loop.run_epoch = paused_epoch
sys.exit(train.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("signal_name, every", [("SIGKILL", "0"), ("SIGINT", "1000"),
                                                ("SIGTERM", "1000")])
def test_process_killed_mid_epoch_resumes_to_the_same_parameters(tmp_path, signal_name, every):
    # SIGINT and SIGTERM: the step under way ends, the checkpoint is saved there (before, none
    # was: the resume restarted from the last one, up to --checkpoint-every seconds back), and
    # the resume continues from the next step. SIGKILL: from the last epoch's checkpoint.
    flags = ["--epochs", "4", "--patience", "0"]
    whole = run(tmp_path, *flags, name="whole")[1]

    out, paused = tmp_path / "killed", tmp_path / "paused"
    script = tmp_path / "pause_in_epoch_3.py"
    script.write_text(PAUSE_IN_EPOCH_3)
    env = {**os.environ, "PAUSED": str(paused)}
    proc = subprocess.Popen([sys.executable, str(script), *TINY, *flags, "--checkpoint-every",
                             every, "--out", str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not paused.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert paused.exists(), proc.stderr.read().decode() if proc.poll() is not None else "timeout"
    signum = getattr(signal, signal_name)
    proc.send_signal(signum)
    code = proc.wait(60)
    progress = modelfile.read(out / "checkpoint-select.npz", "checkpoint")[0]["progress"]
    if signal_name == "SIGKILL":
        assert code == -signum and progress["epoch"] == 2 and not progress["epoch_losses"]
    else:
        assert code == 128 + signum
        assert (f"{signal_name}: stopped at the end of a training step: continue with --resume "
                f"--out {out}").encode() in proc.stderr.read()
        assert progress["epoch"] == 2 and len(progress["epoch_losses"]) == 2
    assert not (out / "model.npz").exists()

    assert run(tmp_path, *flags, "--resume", name="killed")[0] == 0
    np.testing.assert_array_equal(params(whole), params(out))
    resumed, uninterrupted = (json.loads((d / "metrics.json").read_text()) for d in (out, whole))
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in uninterrupted["history"]]


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_while_the_last_epoch_is_scored_still_stops(tmp_path, signal_name):
    # before, a signal that came after the last step was dropped with the fit's handlers: the
    # process went on (tune's worker ran the study to its end after the command's SIGTERM)
    from ncae_cuda.data import datasets, splits
    split = splits.leave_one_out(datasets.load("synthetic-tiny"))

    def signalled(model, record):
        if record["epoch"] == 2:
            os.kill(os.getpid(), getattr(signal, signal_name))
    model = NCAE(feedback="implicit", hidden=(8,), epochs=2, patience=0, device="cpu")
    with pytest.raises(stopping.Stopped) as stop:
        model.fit(split.train, validation=split.valid, callback=signalled, verbose=False,
                  checkpoint=tmp_path / "checkpoint.npz")
    assert (stop.value.signal_name, stop.value.after_last_step) == (signal_name, True)
    progress = modelfile.read(tmp_path / "checkpoint.npz", "checkpoint")[0]["progress"]
    assert progress["epoch"] == 2 and not progress["epoch_losses"]     # whole, and saved


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_after_the_last_step_says_the_fit_had_ended(tmp_path, monkeypatch, capsys,
                                                              signal_name):
    # before, train said "stopped at the end of a training step" of a fit with none left
    signum = getattr(signal, signal_name)

    def signalled_in_the_last_epoch(spec, config):
        def on_epoch(record):
            if record["epoch"] == 2:
                os.kill(os.getpid(), signum)
        return protocol.run(spec, config, on_epoch=on_epoch)
    monkeypatch.setattr(train, "run", signalled_in_the_last_epoch)
    code, out = run(tmp_path, "--epochs", "2", "--patience", "0")
    assert (code, capsys.readouterr().err.splitlines()[-1]) == (
        128 + signum, f"{signal_name}: stopped after the fit's last step, as it was scored: "
                      f"continue with --resume --out {out}")
    monkeypatch.undo()
    assert run(tmp_path, "--epochs", "2", "--patience", "0", "--resume")[0] == 0
    assert (out / "model.npz").exists()


def test_validation_only_never_scores_test(tmp_path, monkeypatch, capsys):
    from ncae_cuda import NCAE

    def scored(*args, **kwargs):
        raise AssertionError("the test part was scored")
    heard = []
    monkeypatch.setattr(NCAE, "evaluate", scored)
    spec, config = run_spec(build_parser(), [
        *TINY, "--epochs", "4", "--validation-only", "--out", str(tmp_path / "v")])
    summary = protocol.run(spec, config, on_epoch=heard.append)
    valid = [h["valid"]["rmse"] for h in summary["history"]]
    assert summary["valid"]["rmse"] == min(valid) and "test" not in summary
    assert summary["best_epoch"] == 1 + valid.index(min(valid))
    assert [r["epoch"] for r in heard] == [1, 2, 3, 4]             # every epoch, as it ended
    assert json.loads((tmp_path / "v" / "metrics.json").read_text())["valid"] == summary["valid"]
    assert "validation, best epoch" in capsys.readouterr().out


def test_a_run_out_of_epochs_while_improving_says_so(tmp_path, capsys):
    code, out = run(tmp_path, "--epochs", "3", "--lr", "1e-2")
    printed = capsys.readouterr().out
    result = json.loads((out / "metrics.json").read_text())
    valid = [h["valid"]["rmse"] for h in result["history"] if h["phase"] == "select"]
    assert code == 0 and valid[-1] == min(valid) and result["best_epoch"] == 3
    assert result["still_improving"] is True
    assert ("note: the best epoch is 3 of 3: --epochs ran out before --patience 10 could end "
            "the fit; more --epochs may help") in printed
    # without early stopping: a best epoch among the last 5%
    run(tmp_path, "--epochs", "3", "--lr", "1e-2", "--patience", "0", name="no-patience")
    assert ("note: the best epoch is 3 of 3: validation was still improving; more --epochs "
            "may help") in capsys.readouterr().out
    code, out = run(tmp_path, "--epochs", "3", "--valid-ratio", "0", name="unvalidated")
    assert json.loads((out / "metrics.json").read_text())["still_improving"] is False
    assert "note: the best epoch" not in capsys.readouterr().out


def record(epoch, validated=True):
    return {"epoch": epoch, **({"valid": {"rmse": 1.0}} if validated else {})}


@pytest.mark.parametrize("last, best, epochs, patience, validated, expected", [
    (300, 286, 300, 15, True, True),      # ran out, early stopping not yet given up
    (300, 285, 300, 15, True, False),     # stopped early on the budget's last epoch
    (290, 275, 300, 15, True, False),     # stopped early
    (300, 296, 300, 5, True, True),       # the last `patience`, not the last 5%
    (300, 295, 300, 5, True, False),
    (300, 286, 300, 0, True, True),       # no patience: the last 5%, 15 of 300
    (300, 285, 300, 0, True, False),
    (3, 3, 3, 0, True, True),             # at least the last epoch
    (3, 2, 3, 0, True, False),
    (3, 3, 3, 15, False, False),          # no validation: nothing to say
])
def test_still_improving_is_a_best_epoch_among_the_last_few(last, best, epochs, patience,
                                                             validated, expected):
    history = [record(e, validated) for e in range(1, last + 1)]
    assert stopping.still_improving(history, best, epochs, patience) is expected


def test_validation_only_needs_validation_and_no_curves(tmp_path, capsys):
    code, _ = run(tmp_path, "--validation-only", "--valid-ratio", "0")
    assert code == 2 and "this split has no validation entry to choose the epoch on" in (
        capsys.readouterr().err)
    with pytest.raises(SystemExit):
        run(tmp_path, "--validation-only", "--curves", name="c")
    assert "--validation-only never scores it" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::ncae_cuda.data.datasets.CatalogueWarning")   # a stand-in
@pytest.mark.parametrize("kind", ["loo", "random", "u1", "given"])
def test_a_runs_split_and_data_ratio_sample_are_drawn_by_the_split_seed(tmp_path, kind):
    # u1: a stand-in ml-100k folder of synthetic-tiny's entries; given: --train and --test
    # files; both carve their validation part, by the seed
    rows = mixed_rows()
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    for name, part in (("u.data", rows), ("u1.base", rows[100:]), ("u1.test", rows[:100])):
        (folder / name).write_text("".join(f"{u}\t{i}\t{int(r)}\t{t}\n" for u, i, r, t in part))
    for name, part in (("train", rows[100:]), ("test", rows[:100])):
        write_table(tmp_path / f"{name}.csv", "user,item,rating,timestamp", part)
    files = {"train": tmp_path / "train.csv", "test": tmp_path / "test.csv"}

    def wanted(seed: int) -> splits.Split:
        if kind == "loo":
            split = splits.leave_one_out(datasets.load("synthetic-tiny"), seed=seed)
        elif kind == "random":
            split = splits.random_split(datasets.load("synthetic-tiny"), 0.1, 0.1, seed=seed)
        else:
            base = (splits.file_split(datasets.load("ml-100k", data_dir=tmp_path),
                                      *datasets.load_split("ml-100k", "u1", tmp_path))
                    if kind == "u1" else
                    splits.given_split(*(read_table(files[n]) for n in ("train", "test")))[1])
            split = splits.carve_validation(base, 0.1, seed=seed)
        return split.trained_on(splits.subsample(split.train, 0.5, seed=seed, based="item"), "")

    def made(seed: int) -> splits.Split:
        spec = DataSpec(dataset="ml-100k" if kind == "u1" else "synthetic-tiny",
                        data_dir=tmp_path, split=kind if kind != "given" else None,
                        split_seed=seed, data_ratio=0.5,
                        **(files if kind == "given" else {}))
        read = protocol.given_split if kind == "given" else protocol.dataset_split
        return read(spec, Config(based="item"))[1]

    def pairs(split):
        return [sorted(zip(part.user_ids[part.users].tolist(), part.item_ids[part.items].tolist()))
                for part in (split.train, split.valid, split.test)]
    for seed in (0, 3):
        assert pairs(made(seed)) == pairs(wanted(seed))
    assert pairs(made(0))[:2] != pairs(made(3))[:2]


def test_curves_score_test_against_the_items_of_neither_training_nor_validation(tmp_path):
    # one epoch, not refit: the curve's one point is the model tested, and so are its figures
    code, out = run(tmp_path, "--feedback", "implicit", "--epochs", "1", "--no-refit",
                    "--curves", "--cutoffs", "5,20")
    result = json.loads((out / "metrics.json").read_text())
    [record] = result["history"]
    assert code == 0 and record["test"] == {k: v for k, v in result["test"].items()
                                            if k != "clusters"}


def test_epoch_seconds_set_the_first_epoch_apart_from_the_median_of_the_others():
    history = [{"epoch": 0, "seconds": 50.0}, {"epoch": 1, "seconds": 9.0},   # 0: pre-training
               {"epoch": 2, "seconds": 1.0}, {"epoch": 3, "seconds": 2.0}]
    assert protocol.epoch_seconds({"history": history}) == {"seconds_first_epoch": 9.0,
                                                            "seconds_per_epoch": 1.5}
    assert protocol.epoch_seconds({"history": history[:2]})["seconds_per_epoch"] is None
