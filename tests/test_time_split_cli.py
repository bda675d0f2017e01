"""Data that grows, on the command line: --split time with its cold test part scored apart (the
trainer, train --baselines, python -m ncae_cuda.baselines), Recall@M as the tuner's score, and
--warm-start (run.json's record of the parent, a refused shape, --resume, sharded runs)."""
import hashlib
import json
import shutil

import numpy as np
import pytest
from test_user_errors import refused, write_table

from ncae_cuda import NCAE, cli
from ncae_cuda.commands import baselines, train, tune
from ncae_cuda.commands.flags import build_parser, run_spec
from ncae_cuda.data import datasets, splits
from ncae_cuda.data.interactions import DataError
from ncae_cuda.model import loop
from ncae_cuda.model.config import Config
from ncae_cuda.runs import protocol, tuning
from ncae_cuda.runs.spec import DataSpec, SpecError

TINY = ["--dataset", "synthetic-tiny", "--hidden", "8", "--batch-size", "16", "--device", "cpu"]
TIME = ["--split", "time", "--test-ratio", "0.2", "--valid-ratio", "0.1"]
CUTOFFS = (5, 20)


def run(tmp_path, *flags, name="run"):
    out = tmp_path / name
    return train.main([*TINY, "--out", str(out), *flags]), out


def metrics(out) -> dict:
    return json.loads((out / "metrics.json").read_text())


def time_split() -> splits.Split:
    """The split TIME makes of synthetic-tiny, made here through the API."""
    return splits.by_time(datasets.load("synthetic-tiny"), test_ratio=0.2, valid_ratio=0.1)


def set_figures(scores: np.ndarray, held, seen: np.ndarray, m: int) -> dict:
    """HR@m, Recall@m and NDCG@m of `held` by (users, items) float64 `scores`, each held-out
    item ranked among the items its user has not seen ((users, items) bool), ties against: a
    loop over users and items, apart from the evaluator."""
    hits_total, recalls, ndcgs = 0, [], []
    for u in np.unique(held.users):
        items = held.items[held.users == u]
        places = [int((~seen[u] & (scores[u] >= scores[u, i])).sum()) - 1 for i in items]
        hits = [p for p in places if p < m]
        hits_total += len(hits)
        recalls.append(len(hits) / min(m, len(items)))
        ndcgs.append(sum(1 / np.log2(p + 2) for p in hits)
                     / sum(1 / np.log2(p + 2) for p in range(min(m, len(items)))))
    return {f"hr@{m}": hits_total / held.nnz, f"recall@{m}": np.mean(recalls),
            f"ndcg@{m}": np.mean(ndcgs)}


def model_scores(model: NCAE, n_items: int) -> np.ndarray:
    """(users, items) float64 scores of every item by `model` (its logits, as recommend has
    them), in the data's item order."""
    items, logits = model.recommend(model.user_ids, n=n_items, filter_seen=False)
    scores = np.empty((len(model.user_ids), n_items))
    np.put_along_axis(scores, np.searchsorted(model.item_ids, items), logits, axis=1)
    return scores


def assert_figures(figures: dict, expected: dict) -> None:
    for key, value in expected.items():
        assert figures[key] == pytest.approx(value, rel=1e-9), key


def counted(part, before) -> dict:
    """A cold part's counts by hand: its entries, users and items, and those new (no entry in
    `before`)."""
    users, items = set(part.users.tolist()), set(part.items.tolist())
    return {"entries": part.nnz, "users": len(users), "items": len(items),
            "new_users": len(users - set(before.users.tolist())),
            "new_items": len(items - set(before.items.tolist()))}


# ---------------------------------------------------------------------------------------------
# --split time

def test_an_implicit_time_split_scores_its_cold_test_part_apart(tmp_path, capsys):
    code, out = run(tmp_path, "--feedback", "implicit", *TIME, "--epochs", "2", "--cutoffs",
                    ",".join(map(str, CUTOFFS)))
    assert code == 0
    result, split = metrics(out), time_split()
    assert result["config"]["split"] == "time"
    seen = split.fold_validation().train
    assert split.test.nnz and split.cold_test.nnz
    assert result["data"]["test"] == split.test.nnz
    assert result["data"]["cold_test"] == counted(split.cold_test, seen)
    assert result["data"]["cold_valid"] == counted(split.cold_valid, split.train)
    # the figures: the warm part's and the cold part's, each of its own entries alone
    model = NCAE.load(out / "model.npz", device="cpu")
    scores = model_scores(model, split.train.n_items)
    popularity = np.bincount(seen.items, minlength=seen.n_items).astype(np.float64)
    pop_scores = np.broadcast_to(popularity, scores.shape)
    seen_mask = seen.to_csr("user").toarray() > 0
    for m in CUTOFFS:
        assert_figures(result["test"], set_figures(scores, split.test, seen_mask, m))
        assert_figures(result["cold_test"], set_figures(scores, split.cold_test, seen_mask, m))
        assert_figures(result["cold_pop"], set_figures(pop_scores, split.cold_test, seen_mask,
                                                       m))
    assert result["test"]["rows"] == split.test.nnz
    assert result["cold_test"]["rows"] == split.cold_test.nnz
    printed = capsys.readouterr().out
    assert "warm test\n" in printed and "recall@20" in printed
    assert (f"cold test, scored apart: {split.cold_test.nnz} entries of "
            f"{result['data']['cold_test']['users']} users") in printed


def test_an_explicit_time_split_scores_its_cold_ratings_apart(tmp_path):
    code, out = run(tmp_path, *TIME, "--epochs", "2")
    assert code == 0
    result, split = metrics(out), time_split()
    model = NCAE.load(out / "model.npz", device="cpu")
    for key, part in (("test", split.test), ("cold_test", split.cold_test)):
        predicted = model.predict(part.user_ids[part.users], part.item_ids[part.items])
        errors = predicted.astype(np.float64) - part.ratings
        assert result[key]["rmse"] == pytest.approx(np.sqrt(np.mean(errors ** 2)), rel=1e-6)
    assert result["data"]["cold_test"]["entries"] == split.cold_test.nnz
    assert "cold_pop" not in result


@pytest.mark.parametrize("based", ["user", "item"])
def test_a_time_split_sets_apart_what_the_data_ratio_leaves_cold(based):
    # before, the cold parts were the full training part's: an entry whose user or item had
    # no entry left in the subsample was scored with the warm ones (by hand: test_splits.py)
    data, split = datasets.load("synthetic-tiny"), time_split()
    spec = DataSpec(split="time", test_ratio=0.2, valid_ratio=0.1, data_ratio=0.2)
    sampled = protocol.make_split(spec, data, based)
    assert sampled.train.nnz < split.train.nnz

    def pairs(*parts):
        return sorted(pair for part in parts for pair in zip(part.users, part.items))

    def known(*parts):
        return ({u for part in parts for u in part.users},
                {i for part in parts for i in part.items})

    before_test = (sampled.train, sampled.valid, sampled.cold_valid)
    for warm, cold, seen in (("valid", "cold_valid", (sampled.train,)),
                             ("test", "cold_test", before_test)):
        # no held-out entry lost or gained, each on the side its user and item say
        assert pairs(getattr(sampled, warm), getattr(sampled, cold)) == pairs(
            getattr(split, warm), getattr(split, cold))
        users, items = known(*seen)
        assert all(u in users and i in items for u, i in pairs(getattr(sampled, warm)))
        assert not any(u in users and i in items for u, i in pairs(getattr(sampled, cold)))
    counted = [note for note in sampled.notes if "test entries are cold" in note]
    assert len(counted) == 1 and counted[0].startswith(f"{sampled.cold_test.nnz} test entries")


def test_data_without_timestamps_is_refused_for_a_time_split(tmp_path, capsys):
    path = write_table(tmp_path / "ratings.csv", "user,item,rating",
                       [(u, i, 1 + (u + i) % 5) for u in range(12) for i in range(8) if u % 3
                        or i % 2])
    refused(train.main, ["--dataset", str(path), *TIME, "--device", "cpu", "--out",
                         str(tmp_path / "run")], capsys, "has no timestamps: a time split")
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.parametrize("flags, message", [
    (["--feedback", "implicit", "--split", "random"], "use --split loo or time"),
    (["--split", "time", "--valid-item", "latest"], "use it with --split loo"),
    (["--split", "time", "--test-ratio", "0.6", "--valid-ratio", "0.4"],
     "--test-ratio + --valid-ratio must be < 1"),
    # before, leave-one-out and a data set's split files read no ratio given them, unsaid
    (["--split", "loo", "--test-ratio", "0.3"], "--test-ratio 0.3: --split loo holds out each "
     "user's latest interaction, not a share of the entries (--split time holds out the "
     "latest share)"),
    (["--split", "loo", "--valid-ratio", "0"], "--valid-ratio 0: --split loo holds out a "
     "validation item of each user with 3 or more interactions, not a share of the entries "
     "(--valid-item chooses which)"),
    (["--dataset", "ml-100k", "--split", "u1", "--test-ratio", "0.3"],
     "--test-ratio 0.3: --split u1's test part is its test file"),
    # before, a split seed that no draw read was accepted, and the run the seed-0 one
    (["--split", "time", "--split-seed", "3"], "--split-seed 3: --split time cuts by time, and "
     "nothing is drawn at random here (the seed draws --data-ratio's sample below 1): leave it "
     "out"),
    (["--dataset", "ml-100k", "--split", "u1", "--valid-ratio", "0", "--split-seed", "3"],
     "--split-seed 3: --split u1's parts are its files, and nothing is drawn at random here "
     "(the seed draws the validation part --valid-ratio carves from the training part, and "
     "--data-ratio's sample below 1): leave it out"),
])
def test_time_split_flags_are_checked(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as e:
        train.main([*TINY, "--out", str(tmp_path), *flags])
    assert e.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("flags", [
    ["--split", "time", "--data-ratio", "0.5"],
    ["--dataset", "ml-100k", "--split", "u1"],
    ["--dataset", "ml-100k", "--split", "u1", "--valid-ratio", "0", "--data-ratio", "0.5"],
    ["--split", "loo", "--valid-item", "latest"],
    ["--split", "random"],
])
def test_a_split_seed_is_taken_where_the_split_draws(flags):
    spec, _ = run_spec(build_parser(), [*TINY, *flags, "--split-seed", "3"])
    assert spec.data.split_seed == 3


def test_the_baselines_score_a_time_splits_cold_part_apart(tmp_path, capsys):
    out = tmp_path / "baselines"
    assert baselines.main(["--dataset", "synthetic-tiny", *TIME, "--models", "ease,pop",
                           "--grid", "ease.l2=5,50", "--cutoffs", "5,20", "--out",
                           str(out)]) == 0
    summary, split = json.loads((out / "baselines.json").read_text()), time_split()
    seen = split.fold_validation().train
    assert summary["data"]["cold_test"] == counted(split.cold_test, seen)
    popularity = np.bincount(seen.items, minlength=seen.n_items).astype(np.float64)
    scores = np.broadcast_to(popularity, (seen.n_users, seen.n_items))
    seen_mask = seen.to_csr("user").toarray() > 0
    pop = summary["models"]["pop"]
    for m in CUTOFFS:
        assert_figures(pop["test"], set_figures(scores, split.test, seen_mask, m))
        assert_figures(pop["cold_test"], set_figures(scores, split.cold_test, seen_mask, m))
    assert summary["models"]["ease"]["cold_test"]["rows"] == split.cold_test.nnz
    shown = (out / "baselines.md").read_text()
    assert "warm test\n" in shown and "cold test, scored apart" in shown
    assert shown.count("| EASE") == 2 and "recall@20" in shown


def test_the_baselines_show_no_cold_part_where_a_time_split_has_none(tmp_path, capsys):
    # Before: "warm test" over the table, then "cold test, scored apart: 0 entries of 0 users
    # and 0 items, ..." with no table; the trainer shows "test" alone.
    rng = np.random.default_rng(0)
    rows = [(u, i, 1, int(t)) for u in range(20) for i in range(15)
            for t in rng.integers(0, 10**6, 1)]
    path = write_table(tmp_path / "clicks.csv", "user,item,timestamp", rows)
    assert splits.by_time(datasets.load(str(path)), 0.1, 0.1).cold_test.nnz == 0
    assert baselines.main(["--dataset", str(path), "--split", "time", "--models", "pop",
                           "--out", str(tmp_path / "b")]) == 0
    shown = (tmp_path / "b" / "baselines.md").read_text()
    assert "\ntest\n| model" in shown and "cold" not in shown, shown


def test_train_baselines_on_a_time_split_show_their_cold_figures(tmp_path, capsys):
    code, out = run(tmp_path, "--feedback", "implicit", *TIME, "--epochs", "1",
                    "--baselines", "ease")
    assert code == 0
    result = metrics(out)
    assert set(result["baselines"]["ease"]["cold_test"]) >= {"recall@100", "ndcg@100"}
    cold_table = capsys.readouterr().out.split("cold test, scored apart")[1]
    assert "| POP" in cold_table and "| EASE" in cold_table


# ---------------------------------------------------------------------------------------------
# the tuner's score

def test_the_tuner_scores_implicit_trials_by_recall_at_the_last_cutoff_when_asked():
    implicit = Config(feedback="implicit", cutoffs=CUTOFFS).resolved()
    assert tuning.selection(None, implicit) == ("ndcg@20", True)
    assert tuning.selection("recall", implicit) == ("recall@20", True)
    with pytest.raises(SpecError, match="explicit feedback is scored by RMSE"):
        tuning.selection("recall", Config().resolved())


@pytest.mark.extra("tune")
def test_a_study_scored_by_recall_records_each_trials_validation_recall(tmp_path, capsys):
    pytest.importorskip("optuna")
    (tmp_path / "recipe.toml").write_text('feedback = "implicit"\nepochs = 2\npatience = 0\n'
                                          "batch_size = 16\nhidden = [8]\n")
    (tmp_path / "space.toml").write_text("[dropout]\nlow = 0.0\nhigh = 0.6\n")
    out = tmp_path / "study"
    flags = ["--dataset", "synthetic-tiny", *TIME, "--config", str(tmp_path / "recipe.toml"),
             "--space", str(tmp_path / "space.toml"), "--device", "cpu", "--pruner", "none",
             "--metric", "recall"]
    assert tune.main([*flags, "--trials", "2", "--out", str(out)]) == 0
    rows = (out / "trials.csv").read_text().splitlines()
    assert "valid recall@100" in rows[0]
    for number in (0, 1):
        run_metrics = metrics(out / "trials" / f"{number:04d}")
        value = float(rows[1 + number].split(",")[2])
        assert value == pytest.approx(run_metrics["valid"]["recall@100"])
    refused(tune.main, [*flags[:-2], "--metric", "ndcg", "--out", str(out)], capsys,
            "tunes other settings")


# ---------------------------------------------------------------------------------------------
# --warm-start

def test_a_warm_started_run_records_its_parent_and_starts_from_it(tmp_path, capsys):
    parent = run(tmp_path, "--feedback", "implicit", *TIME, "--epochs", "3", name="parent")[1]
    code, child = run(tmp_path, "--feedback", "implicit", *TIME, "--epochs", "2",
                      "--warm-start", str(parent), name="child")
    assert code == 0
    digest = hashlib.sha256((parent / "model.npz").read_bytes()).hexdigest()
    record = {"path": str(parent / "model.npz"), "sha256": digest}
    assert json.loads((child / "run.json").read_text())["run"]["warm_start"] == record
    assert metrics(child)["warm_start"] == record
    assert "note: warm start: 50 of 50 items from the model, 0 new" in capsys.readouterr().out
    # the same fits through the API: both start from the parent
    split, model = time_split(), NCAE.load(parent / "model.npz", device="cpu")
    cold = run(tmp_path, "--feedback", "implicit", *TIME, "--epochs", "2", name="cold")[1]
    first = [h["loss"] for h in metrics(child)["history"] if h["phase"] == "select"]
    fresh = [h["loss"] for h in metrics(cold)["history"] if h["phase"] == "select"]
    api = NCAE(feedback="implicit", hidden=(8,), batch_size=16, device="cpu").fit(
        split.train, validation=split.valid, epochs=2, warm_start=model, verbose=False)
    assert first == pytest.approx([h["loss"] for h in api.history], rel=1e-6)
    assert first != fresh


def test_a_warm_start_that_changes_the_shape_is_refused_in_a_line(tmp_path, capsys):
    parent = run(tmp_path, "--epochs", "1", name="parent")[1]
    out = tmp_path / "child"
    refused(train.main, [*TINY[:2], "--hidden", "16", "--device", "cpu", "--epochs", "1",
                         "--warm-start", str(parent / "model.npz"), "--out", str(out)], capsys,
            "error: hidden must be the warm start's model's (hidden 8 there, 16 here): a warm "
            "start keeps the network's shape; fit from scratch to change it")
    assert not (out / "run.json").exists()
    refused(train.main, [*TINY, "--warm-start", str(tmp_path / "none"), "--out", str(out)],
            capsys, f"--warm-start {tmp_path / 'none'}: no such model file")
    # before: --overwrite replaced the model the run started from
    before = (parent / "model.npz").read_bytes()
    refused(train.main, [*TINY, "--epochs", "1", "--warm-start", str(parent), "--out",
                         str(parent), "--overwrite"], capsys,
            f"--warm-start {parent}: the model in --out {parent}, which this run would replace")
    assert (parent / "model.npz").read_bytes() == before


def test_a_warm_start_that_knows_none_of_the_datas_ids_is_refused_in_a_line(tmp_path, capsys):
    # before, it ran as a fit from scratch with 'note: warm start: 0 of 60 users from the
    # model, 60 new' (explicit feedback: item-based, whose columns are the users)
    parent = run(tmp_path, "--epochs", "1", name="parent")[1]
    data = datasets.load("synthetic-tiny")
    renamed = write_table(tmp_path / "renamed.csv", "user,item,rating", [
        (f"u{u}", f"i{i}", r, None) for u, i, r in zip(data.users, data.items, data.ratings)])
    out = tmp_path / "child"
    refused(train.main, ["--dataset", str(renamed), "--hidden", "8", "--device", "cpu",
                         "--warm-start", str(parent), "--out", str(out)], capsys,
            f"error: warm start: the model knows none of the data's {data.n_users} users (its "
            f"{data.n_users} users have other ids): it would be a fit from scratch; warm-start "
            "from a model of this data's ids, or fit without one")
    assert not (out / "checkpoint-select.npz").exists() and not (out / "run.json").exists()
    model = NCAE.load(parent / "model.npz", device="cpu")
    other = NCAE(hidden=(8,), device="cpu")
    with pytest.raises(DataError, match="the model knows none of the data's"):
        other.fit(datasets.load(str(renamed)), warm_start=model, verbose=False)
    assert other.data is None                                 # the refused fit changed nothing


def test_a_warm_started_run_resumes_as_any_other(tmp_path, monkeypatch, capsys):
    parent = run(tmp_path, "--epochs", "2", name="parent")[1]
    flags = ["--epochs", "4", "--patience", "0", "--checkpoint-every", "0", "--warm-start",
             str(parent)]
    whole = run(tmp_path, *flags, name="whole")[1]
    real_epoch, seen = loop.run_epoch, []

    def interrupted(*args, **kwargs):
        seen.append(args[-1])                                     # the epoch's label
        if seen.count("epoch 3") == 1:
            raise KeyboardInterrupt
        return real_epoch(*args, **kwargs)
    monkeypatch.setattr(loop, "run_epoch", interrupted)
    with pytest.raises(cli.Interrupted):
        run(tmp_path, *flags, name="split")
    monkeypatch.setattr(loop, "run_epoch", real_epoch)
    # another parent under the same name is another run: its resume is refused
    saved = tmp_path / "saved.npz"
    shutil.copy(parent / "model.npz", saved)
    other = run(tmp_path, "--epochs", "2", "--seed", "1", name="other")[1]
    shutil.copy(other / "model.npz", parent / "model.npz")
    refused(train.main, [*TINY, *flags, "--resume", "--out", str(tmp_path / "split")], capsys,
            "holds another run (warm_start.sha256:")
    shutil.copy(saved, parent / "model.npz")
    assert run(tmp_path, *flags, "--resume", name="split")[0] == 0
    with np.load(whole / "model.npz") as a, np.load(tmp_path / "split" / "model.npz") as b:
        np.testing.assert_array_equal(a["params"], b["params"])
    assert metrics(whole)["test"] == metrics(tmp_path / "split")["test"]


@pytest.mark.extra("distributed")
def test_a_sharded_run_warm_starts_as_one_process_does(tmp_path):
    from test_distributed import assert_agree, sharded_train
    flags = [*TINY, "--feedback", "implicit", "--epochs", "2", "--patience", "0"]
    parent = run(tmp_path, *flags, name="parent")[1]
    warm = [*flags, "--warm-start", str(parent)]
    done = sharded_train(2, warm, tmp_path / "sharded")
    assert done.returncode == 0, done.stderr[-3000:]
    assert train.main([*warm, "--out", str(tmp_path / "one")]) == 0
    sharded, one = metrics(tmp_path / "sharded"), metrics(tmp_path / "one")
    assert_agree(sharded, one)
    assert sharded["warm_start"] == one["warm_start"]


def test_a_time_split_whose_test_entries_are_all_cold_says_so(tmp_path, capsys):
    # each user's interactions come after the one before's: the latest 10% are a new user's
    path = write_table(tmp_path / "clicks.csv", "user,item,timestamp",
                       [(u, i, None, 1000 + 10 * u + i) for u in range(10) for i in range(5)])
    # before, it said 'raise --test-ratio': any share of such data is all new users
    for ratio in ("0.1", "0.5"):
        refused(train.main, ["--dataset", str(path), "--split", "time", "--test-ratio", ratio,
                             "--device", "cpu", "--out", str(tmp_path / "run")], capsys,
                "test entries are of users or items new at the test cut, which are scored "
                "apart: none is left to test the model on (--split loo holds out each user's "
                "own latest interaction instead)")
    assert train.main(["--dataset", str(path), "--split", "loo", "--hidden", "4", "--epochs", "1",
                       "--device", "cpu", "--out", str(tmp_path / "loo")]) == 0


def new_user_at_the_validation_cut(tmp_path):
    """A clicks file: users 0-8 arrive one after another, rating 5 of items 0-9 each; then user 0
    rates the other 5. Cut by time at 10% and 10%, the test part is warm, the validation part
    (user 8's) new at its cut."""
    rows = [(u, (u + i) % 10, None, 1000 + 10 * u + i) for u in range(9) for i in range(5)]
    return write_table(tmp_path / "clicks.csv", "user,item,timestamp",
                       rows + [(0, i, None, 2000 + i) for i in range(5, 10)])


def test_a_time_split_whose_validation_entries_are_all_cold_says_so(tmp_path, capsys):
    # before, it trained --epochs epochs without validation and said nothing of why
    path = new_user_at_the_validation_cut(tmp_path)
    for extra in ([], ["--validation-only"]):
        refused(train.main, ["--dataset", str(path), "--split", "time", "--test-ratio", "0.1",
                             "--valid-ratio", "0.1", "--device", "cpu", *extra, "--out",
                             str(tmp_path / "run")], capsys,
                "all 5 validation entries are of users or items new at the validation cut, "
                "which are scored apart: none is left to choose the epoch on (--split loo "
                "holds out each user's own latest interaction instead)")


@pytest.mark.parametrize("times, ratio, why", [
    # every user's second interaction at one time: the test cut takes validation's 6 entries
    ("tied", "0.1", "the 6 entries --valid-ratio 0.1 of 60 asks for are at the test cut's time, "
                    "which goes to test"),
    ("apart", "0.005", "--valid-ratio 0.005 of 60 entries is none")])
def test_a_validation_part_asked_for_and_left_empty_is_refused(tmp_path, capsys, times, ratio,
                                                               why):
    # before, it trained --epochs epochs without validation, choosing no epoch, unsaid
    path = write_table(tmp_path / "pairs.csv", "user,item,timestamp",
                       [(u, (u + k) % 7, None, 1000 if k and times == "tied" else 100 * k + u)
                        for u in range(30) for k in range(2)])
    refused(train.main, ["--dataset", str(path), "--split", "time", "--test-ratio", "0.2",
                         "--valid-ratio", ratio, "--hidden", "4", "--device", "cpu", "--out",
                         str(tmp_path / "run")], capsys,
            f"error: pairs.csv: this split has no validation entry to choose the epoch on "
            f"({why}): raise --valid-ratio")
    assert not (tmp_path / "run" / "model.npz").exists()


@pytest.mark.parametrize("ratio, message", [
    ("0.1", "all 5 validation entries are of users or items new at the validation cut, which "
            "are scored apart: none is left to choose the baselines' settings on"),
    ("0", "this split has no validation entry to choose the baselines' settings on "
          "(--valid-ratio 0): give --valid-ratio above 0")])
def test_the_baselines_without_validation_say_so(tmp_path, capsys, ratio, message):
    # before, every point of a grid scored NaN on validation and the first was chosen
    path = new_user_at_the_validation_cut(tmp_path)
    flags = ["--dataset", str(path), "--split", "time", "--test-ratio", "0.1", "--valid-ratio",
             ratio, "--device", "cpu"]
    refused(baselines.main, [*flags, "--models", "ease", "--out", str(tmp_path / "b")], capsys,
            message)
    if ratio == "0":              # (validation all cold: NCAE's own refusal comes first)
        refused(train.main, [*flags, "--feedback", "implicit", "--baselines", "ease", "--out",
                             str(tmp_path / "t")], capsys, message)
        assert not (tmp_path / "t" / "model.npz").exists()


@pytest.mark.parametrize("feedback, count", [("explicit", "entries"), ("implicit", "rows")])
def test_without_the_refit_every_test_entry_is_scored(tmp_path, feedback, count):
    """--no-refit tests the model fit before validation, to which the test entries of users
    who came during validation are cold. Before, those were left out of both tables (in
    metrics.json's test['cold'] only, a dict in the printed implicit table)."""
    split = time_split()
    code, out = run(tmp_path, *TIME, "--feedback", feedback, "--epochs", "1", "--no-refit")
    result = metrics(out)
    assert code == 0 and "cold" not in result["test"]
    assert (result["test"][count] + result["cold_test"][count]
            == split.test.nnz + split.cold_test.nnz)
