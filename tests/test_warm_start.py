"""Warm starts (NCAE.fit(warm_start=), partial_fit): parameters by id, fresh new columns, the
shape kept, save and load, resume; and a time split's held-out sets scored through the API."""
from dataclasses import replace

import numpy as np
import pytest

from ncae_cuda import NCAE
from ncae_cuda.baselines.estimators import POP
from ncae_cuda.data import datasets, splits
from ncae_cuda.data.interactions import DataError
from ncae_cuda.model.config import Config, SettingError
from ncae_cuda.model.warmstart import WarmStart, matching
from ncae_cuda.ops.layout import SHARDED, NCAELayout
from ncae_cuda.ops.shard import Columns

SETTINGS = {"hidden": (8, 6), "batch_size": 16}
STILL = 1e-12      # a learning rate whose steps float32 parameters cannot see


def new_model(feedback, based, **settings):
    return NCAE(device="cpu", feedback=feedback, based=based, **{**SETTINGS, **settings})


def views(model) -> dict:
    """The model's parameters by name (E, b1, ..., V, c), on the host."""
    layout = NCAELayout(len(model.data.column_ids), model.config.hidden)
    return layout.views(model._whole_params())


def by_id(model, key: str) -> dict:
    """{column id: its row of parameter `key`} (E, V or c)."""
    return dict(zip(model.data.column_ids.tolist(), views(model)[key]))


def with_ids(data, users, items):
    """`data` (synthetic-tiny) with other source ids: its users and items renamed."""
    return replace(data, user_ids=np.asarray(users), item_ids=np.asarray(items))


CASES = [("implicit", "user"), ("implicit", "item"), ("explicit", "item"),
         ("explicit", "user")]


@pytest.mark.parametrize("feedback, based", CASES)
def test_a_warm_fit_of_the_models_own_data_starts_from_its_parameters(feedback, based):
    data = datasets.load("synthetic-tiny")
    parent = new_model(feedback, based).fit(data, epochs=3, verbose=False)
    warm = new_model(feedback, based, lr=STILL, pretrain="S+U+S").fit(
        data, epochs=1, warm_start=parent, verbose=False)
    assert [record["epoch"] for record in warm.history] == [1]       # no pre-training
    cold = new_model(feedback, based, lr=STILL).fit(data, epochs=1, verbose=False)
    for key, value in views(parent).items():
        np.testing.assert_allclose(views(warm)[key], value, rtol=0, atol=1e-9, err_msg=key)
    assert not np.allclose(views(cold)["V"], views(parent)["V"], atol=1e-3)
    assert warm._net.steps == 4       # Adam counts from zero: one epoch of 60 rows in 16s


@pytest.mark.parametrize("feedback, based", [("implicit", "user"), ("explicit", "item")])
def test_partial_fit_goes_on_from_the_models_loss(feedback, based):
    data = datasets.load("synthetic-tiny")
    parent = new_model(feedback, based, lr=0.01, dropout=0.0).fit(data, epochs=30,
                                                                  verbose=False)
    last = parent.history[-1]["loss"]
    cold_first = new_model(feedback, based, lr=0.01, dropout=0.0).fit(
        data, epochs=1, verbose=False).history[0]["loss"]
    parent.partial_fit(data, epochs=1, verbose=False)
    first = parent.history[0]["loss"]
    # Adam's moments start from zero: the first steps move a little, not back to the start
    assert abs(first - last) < 0.2 * (cold_first - last), (first, last, cold_first)


@pytest.mark.parametrize("feedback, based", CASES)
def test_known_columns_keep_theirs_by_id_and_new_ones_draw_fresh(feedback, based):
    data = datasets.load("synthetic-tiny")
    n_users, n_items = data.n_users, data.n_items
    old = with_ids(data, np.arange(n_users) + 1000, np.arange(n_items) * 10)
    parent = new_model(feedback, based).fit(old, epochs=3, verbose=False)
    # The new data shares 40 of the users and 35 of the items (in other places of its id
    # maps), and has 20 users and 15 items the model has not seen: the same entries, renamed.
    users = np.concatenate([np.arange(20, n_users) + 1000, np.arange(20) + 5000])
    items = np.concatenate([np.arange(15, n_items) * 10, np.arange(15) * 10 + 1])
    order_u, order_i = np.argsort(users), np.argsort(items)
    new = replace(with_ids(data, users[order_u], items[order_i]),
                  users=np.argsort(order_u)[data.users].astype(np.int32),
                  items=np.argsort(order_i)[data.items].astype(np.int32))
    warm = new_model(feedback, based, lr=STILL).fit(new, epochs=1, warm_start=parent,
                                                    verbose=False)
    fresh = new_model(feedback, based, lr=STILL).fit(new, epochs=1, verbose=False)
    known = set(parent.data.column_ids.tolist())
    n_known = 0
    for key in SHARDED:
        theirs, fresh_rows, parents = by_id(warm, key), by_id(fresh, key), by_id(parent, key)
        for column_id, row in theirs.items():
            want = parents[column_id] if column_id in known else fresh_rows[column_id]
            np.testing.assert_allclose(row, want, rtol=0, atol=1e-9, err_msg=f"{key} {column_id}")
            n_known += column_id in known
    assert n_known == 3 * (40 if based == "item" else 35)
    for key, value in views(parent).items():
        if key not in SHARDED:
            np.testing.assert_allclose(views(warm)[key], value, rtol=0, atol=1e-9, err_msg=key)


@pytest.mark.parametrize("lo, hi", [(0, 10), (10, 37), (36, 37), (0, 37)])
def test_a_shard_starts_from_its_rows_of_the_whole_warm_start(lo, hi):
    # A model of 30 columns with ids 0, 2, .., 58; a fit of 37 with ids 0..36: the even ones
    # up to 36 are known. Each shard's start is its rows of the whole start.
    config = Config(hidden=(6, 5)).resolved()
    model = NCAELayout(30, config.hidden)
    start = WarmStart(config, model.xavier_init(np.random.default_rng(9)), np.arange(30) * 2)
    whole = NCAELayout(37, config.hidden)
    expect = whole.views(start.start(whole, np.arange(37),
                                     whole.xavier_init(np.random.default_rng([4, 2]))))
    shard = NCAELayout(hi - lo, config.hidden, Columns(lo, hi, 37))
    got = shard.views(start.start(shard, np.arange(37),
                                  shard.xavier_init(np.random.default_rng([4, 2]))))
    for key, view in got.items():
        np.testing.assert_array_equal(view, expect[key][lo:hi] if key in SHARDED else expect[key],
                                      err_msg=key)
    np.testing.assert_array_equal(expect["V"][0:37:2], model.views(start.params)["V"][:19])
    assert start.known(np.arange(37), "user") == "19 of 37 items from the model, 18 new"


def test_ids_meet_as_text_where_one_side_is_text():
    at, known = matching(np.array(["7", "x", "12"]), np.array([3, 7, 12]))
    assert at.tolist() == [2, 0] and known.tolist() == [2, 1]        # "12", then "7"
    at, known = matching(np.array([5, 9]), np.array([9, 4]))
    assert at.tolist() == [1] and known.tolist() == [0]


@pytest.mark.parametrize("settings, message", [
    ({"hidden": (8,)}, r"^hidden must be the warm start's model's \(hidden 8,6 there, 8 here\): "
                       r"a warm start keeps the network's shape; fit from scratch to change it$"),
    ({"based": "item"}, r"^based must be the warm start's model's \(based user there, item "
                        r"here\)"),
    ({"loss": "multinomial"}, r"^loss must be the warm start's model's \(loss "
                              r"weighted_square there, multinomial here\)"),
    ({"feedback": "explicit", "hidden": (4, 6)},
     r"^hidden, feedback and based must be the warm start's model's \(hidden 8,6 there, 4,6 "
     r"here; feedback implicit there, explicit here; based user there, item here\)"),
])
def test_a_warm_start_refuses_another_shape(settings, message):
    data = datasets.load("synthetic-tiny")
    parent = new_model("implicit", "user").fit(data, epochs=1, verbose=False)
    settings = {"feedback": "implicit", "based": None, **settings}
    with pytest.raises(SettingError, match=message):
        NCAE(device="cpu", **{**SETTINGS, **settings}).fit(data, warm_start=parent,
                                                           verbose=False)
    with pytest.raises(RuntimeError, match="call fit"):
        new_model("implicit", "user").fit(data, warm_start=new_model("implicit", "user"))
    with pytest.raises(SettingError, match=r"^warm_start must be an NCAE, whose parameters a fit "
                                           r"starts from; got POP$"):
        new_model("implicit", "user").fit(data, warm_start=POP().fit(data))


@pytest.mark.parametrize("feedback, based", [("implicit", "user"), ("explicit", "item")])
def test_a_warm_started_model_saves_loads_and_starts_another(tmp_path, feedback, based):
    data = datasets.load("synthetic-tiny")
    split = splits.by_time(data, test_ratio=0.2)
    parent = new_model(feedback, based).fit(split.train, epochs=2, verbose=False)
    parent.save(tmp_path / "parent.npz")
    warm = new_model(feedback, based).fit(data, epochs=2, verbose=False,
                                          warm_start=NCAE.load(tmp_path / "parent.npz", "cpu"))
    again = new_model(feedback, based).fit(data, epochs=2, verbose=False, warm_start=parent)
    np.testing.assert_array_equal(warm._whole_params(), again._whole_params())
    warm.save(tmp_path / "warm.npz")
    loaded = NCAE.load(tmp_path / "warm.npz", device="cpu")
    np.testing.assert_array_equal(loaded._whole_params(), warm._whole_params())
    assert loaded.history == warm.history
    users, items = data.user_ids[:7], data.item_ids[:7]
    np.testing.assert_array_equal(loaded.predict(users, items), warm.predict(users, items))
    for a, b in zip(loaded.recommend(users, 5, filter_seen=False),
                    warm.recommend(users, 5, filter_seen=False)):
        np.testing.assert_array_equal(a, b)


def test_a_warm_fit_resumes_only_from_the_same_model(tmp_path):
    data = datasets.load("synthetic-tiny")
    parent = new_model("implicit", "user").fit(data, epochs=1, verbose=False)
    other = new_model("implicit", "user", seed=1).fit(data, epochs=1, verbose=False)
    path = tmp_path / "checkpoint.npz"
    whole = new_model("implicit", "user").fit(data, epochs=2, warm_start=parent,
                                              checkpoint=path, verbose=False)
    resumed = new_model("implicit", "user").fit(data, epochs=2, warm_start=parent,
                                                checkpoint=path, resume=True, verbose=False)
    np.testing.assert_array_equal(resumed._whole_params(), whole._whole_params())
    with pytest.raises(DataError, match=r"the checkpoint is of another fit \(warm_start: "):
        new_model("implicit", "user").fit(data, epochs=2, warm_start=other, checkpoint=path,
                                          resume=True, verbose=False)


def test_a_stopped_partial_fit_leaves_the_model_and_resumes(tmp_path):
    # before, the stop left the model half trained, and the resume, which starts from the
    # model, was refused as another fit's checkpoint
    data = datasets.load("synthetic-tiny")
    whole = new_model("implicit", "user").fit(data, epochs=1, verbose=False)
    whole.partial_fit(data, epochs=3, verbose=False)
    model = new_model("implicit", "user").fit(data, epochs=1, verbose=False)
    before = model._whole_params()

    def stop(fitted, record):
        if record["epoch"] == 2:
            raise KeyboardInterrupt
    path = tmp_path / "checkpoint.npz"
    with pytest.raises(KeyboardInterrupt):
        model.partial_fit(data, epochs=3, callback=stop, checkpoint=path, checkpoint_every=0,
                          verbose=False)
    np.testing.assert_array_equal(model._whole_params(), before)
    assert [record["epoch"] for record in model.history] == [1]
    model.partial_fit(data, epochs=3, checkpoint=path, resume=True, verbose=False)
    np.testing.assert_array_equal(model._whole_params(), whole._whole_params())


def test_a_time_splits_held_out_sets_scored_as_sets():
    # Every user's test items as a set, and the cold ones apart: each against a loop over the
    # model's own scores of every item (its logits, as recommend gives them).
    data = datasets.load("synthetic-tiny")
    split = splits.by_time(data, test_ratio=0.3)
    assert split.cold_test.nnz and split.test.nnz
    model = new_model("implicit", "user").fit(split.train, epochs=3, verbose=False)
    all_items, logits = model.recommend(model.user_ids, n=data.n_items, filter_seen=False)
    scores = np.empty((data.n_users, data.n_items))
    np.put_along_axis(scores, np.searchsorted(data.item_ids, all_items), logits, axis=1)
    seen = split.train.to_csr("user").toarray() > 0
    for part in (split.test, split.cold_test):
        figures = model.evaluate(part, per_user=True)
        if part is split.cold_test:                       # scored apart, as 'cold'
            assert figures["rows"] == 0
            figures = figures["cold"]
        for m in model.config.cutoffs:
            recalls, ndcgs = [], []
            for u in np.unique(part.users):
                held = part.items[part.users == u]
                candidates = ~seen[u]
                places = [int((candidates & (scores[u] >= scores[u, i])).sum()) - 1
                          for i in held]
                hits = [p for p in places if p < m]
                recalls.append(len(hits) / min(m, len(held)))
                ndcgs.append(sum(1 / np.log2(p + 2) for p in hits)
                             / sum(1 / np.log2(p + 2) for p in range(min(m, len(held)))))
            assert figures[f"recall@{m}"] == pytest.approx(np.mean(recalls), rel=1e-12)
            assert figures[f"ndcg@{m}"] == pytest.approx(np.mean(ndcgs), rel=1e-12)
        assert figures["rows"] == part.nnz
        if part is split.test:
            assert sum(c["rows"] for c in figures["clusters"]) == len(np.unique(part.users))
