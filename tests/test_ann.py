"""recommend(index='approximate'): the faiss index's top-k against a float64 numpy top-k of the
same model, the exact top-k for users the index finds too few for, the index file beside the
model (reused while it matches, rebuilt when the model changes, also on a server's SIGHUP),
and the one-line refusals."""
import copy
import logging
import signal
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from test_cold_entries import EMPTIED, emptied_items_data
from test_serve import Server, query, wait_for

from ncae_cuda import NCAE, BlendedNCAE
from ncae_cuda.commands import recommend
from ncae_cuda.data import datasets
from ncae_cuda.model import ann

pytestmark = pytest.mark.extra("ann")
KINDS = {"implicit-user": {"feedback": "implicit", "based": "user"},
         "explicit-item": {"feedback": "explicit", "based": "item"}}


def fit(kind: str, seed: int = 0) -> NCAE:
    return NCAE(device="cpu", hidden=(16,), seed=seed, **KINDS[kind]).fit(
        datasets.load("synthetic"), epochs=1, verbose=False)


@pytest.fixture(scope="module")
def models() -> dict:
    return {kind: fit(kind) for kind in KINDS}


def scanning_every_list(model: NCAE) -> ann.ItemIndex:
    """The model's index as a query scanning every list searches it: what it misses then is
    the 4-bit codes' doing alone."""
    every_list = ann.IndexSettings().lists(len(model.item_ids))
    return ann.ItemIndex.for_model(model, None, ann.IndexSettings(probes=every_list))


def reference_top(model: NCAE, users: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(items, logits) each user's n best unseen items, in float64 numpy from the network's
    parameters: the items' logits are the user's code against V and c (user-based), or the
    items' codes against the user's V row and c (item-based)."""
    net, inputs = model._net, model.data.inputs()
    V, c = net.p["V"].astype(np.float64), net.p["c"].astype(np.float64)
    if model.config.based == "user":
        codes = net.codes(model.ops.cut_rows(inputs, users)).astype(np.float64)
        logits = codes @ V.T + c
    else:
        every = np.arange(inputs.shape[0], dtype=np.int32)
        codes = net.codes(model.ops.cut_rows(inputs, every)).astype(np.float64)
        logits = V[users] @ codes.T + c[users][:, None]
    logits[model.data.seen[users].toarray() > 0] = -np.inf
    best = np.argsort(-logits, axis=1, kind="stable")[:, :n]
    return best, np.take_along_axis(logits, best, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_the_index_finds_the_float64_top_k_where_it_scans_every_list(kind, models):
    model = copy.copy(models[kind])
    model._index = scanning_every_list(model)
    users = np.arange(0, len(model.user_ids), 7)
    items, scores = model.recommend(model.user_ids[users], n=10, index="approximate")
    best, logits = reference_top(model, users, 10)
    np.testing.assert_array_equal(items, model.item_ids[best])
    expected = logits if model.config.implicit else model._net.objective.rating(logits)
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-5)


def items_of_every_norm(seed: int = 3) -> np.ndarray:
    """(500, 9) float32 item vectors whose norms span four decades, as a trained layer's do
    more mildly (popular items large): what an index clustering them as they are searches
    badly."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((500, 9)) * 10 ** rng.uniform(-3, 1, (500, 1))
            ).astype(np.float32)


def test_on_the_sphere_items_have_norm_one_and_keep_the_inner_products_order():
    items, query = items_of_every_norm(), np.random.default_rng(4).standard_normal(9) * 7
    points = ann._on_sphere(items).astype(np.float64)                       # (500, 10)
    np.testing.assert_allclose(np.linalg.norm(points, axis=1), 1, rtol=1e-6)
    lifted = np.append(query / np.linalg.norm(query), 0.0)                  # (10,)
    np.testing.assert_array_equal(np.argsort(-(points @ lifted))[:20],
                                  np.argsort(-(items.astype(np.float64) @ query))[:20])


def test_the_index_finds_items_of_every_norm():
    """Every list scanned: the float64 top 10 of 50 queries among items of norms 1e-3 to 10,
    their logits the exact inner products."""
    items = items_of_every_norm()
    queries = np.random.default_rng(5).standard_normal((50, 9)).astype(np.float32) * 3
    index = ann.ItemIndex(items, ann.IndexSettings(probes=ann.IndexSettings().lists(500)))
    index.build()
    idx, logits = index.search(queries, 10)
    exact = queries.astype(np.float64) @ items.T.astype(np.float64)         # (50, 500)
    best = np.argsort(-exact, axis=1)[:, :10]
    np.testing.assert_array_equal(np.sort(idx, axis=1), np.sort(best, axis=1))
    np.testing.assert_allclose(logits, np.take_along_axis(exact, idx, 1), rtol=1e-5,
                               atol=1e-6)


def logits_of(model: NCAE, users: np.ndarray) -> np.ndarray:
    """(U, items) float64 the users' logits of every item (user-based)."""
    net = model._net
    codes = net.codes(model.ops.cut_rows(model.data.inputs(), users)).astype(np.float64)
    return codes @ net.p["V"].astype(np.float64).T + net.p["c"].astype(np.float64)


@pytest.mark.parametrize("users", [np.array([5]), np.arange(0, 600, 3)],
                             ids=["one user", "a batch on every core"])
def test_seen_items_are_left_out_by_the_search_and_never_returned(models, users):
    """Each user has seen its 40 best items: the search leaves them out itself, so the
    refine x n candidates are all eligible and, every list scanned, the n it returns are the
    float64 top n of the rest; the old search (n + seen deep, then filtered) is not asked."""
    model = models["implicit-user"]
    index = scanning_every_list(model)
    logits = logits_of(model, users)                                        # (U, items)
    best = np.argsort(-logits, axis=1, kind="stable")[:, :40]
    seen = sp.csr_matrix((np.ones(best.size), (np.repeat(users, 40), best.ravel())),
                         shape=(len(model.user_ids), len(model.item_ids)))
    idx, found, short = index.top(ann.user_queries(model, users), users, 10, seen)
    assert not short.any() and not (idx[:, :, None] == best[:, None, :]).any()    # own seen
    rest = np.argsort(-logits, axis=1, kind="stable")[:, 40:50]
    np.testing.assert_array_equal(idx, rest)
    np.testing.assert_allclose(found, np.take_along_axis(logits, rest, 1), rtol=1e-4,
                               atol=1e-5)


def test_an_excluded_item_is_never_found_even_where_it_scores_best(models):
    model = models["implicit-user"]
    index = model.item_index()
    query = ann.user_queries(model, np.array([0]))                          # (1, d)
    first, _ = index.search(query, 5)
    again, _ = index.search(query, 5, first[0, :3])
    assert not np.isin(again, first[0, :3]).any()
    np.testing.assert_array_equal(again[0, :2], first[0, 3:])


def test_candidate_items_are_ranked_exactly(models):
    model = models["implicit-user"]
    users, items = model.user_ids[:30], model.item_ids[::3]
    np.testing.assert_array_equal(
        model.recommend(users, n=5, items=items, index="approximate")[0],
        model.recommend(users, n=5, items=items)[0])


def test_candidate_items_build_no_index_they_are_not_searched_through(models, tmp_path,
                                                                      capsys):
    """Before: recommend(items=..., index='approximate') and --items-file with --index
    approximate built the whole index, and saved it beside the model, then ranked the
    candidates exactly; now the call builds nothing, and the command refuses the flags in a
    line, before it loads the model."""
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    loaded = NCAE.load(path, device="cpu")
    users, items = loaded.user_ids[:3], loaded.item_ids[::3]
    for got, want in zip(loaded.recommend(users, n=5, items=items, index="approximate"),
                         loaded.recommend(users, n=5, items=items)):
        np.testing.assert_array_equal(got, want)
    assert loaded._index is None and not ann.index_path(path).exists()
    (tmp_path / "items.txt").write_text("\n".join(map(str, items)))
    with pytest.raises(SystemExit) as refused:
        recommend.main([str(path), "--users", ",".join(map(str, users)), "--items-file",
                        str(tmp_path / "items.txt"), "--index", "approximate"])
    assert refused.value.code == 2
    said = capsys.readouterr().err.splitlines()[-1]
    assert said == ("python -m ncae_cuda.recommend: error: --items-file: its candidates are "
                    "ranked exactly, not searched through an index: leave out --index "
                    "approximate (see --help)")
    assert not ann.index_path(path).exists()


def test_a_mistyped_user_is_refused_before_the_index_is_built(models, tmp_path, capsys):
    """Before: the index was built (and saved) first, the unknown id refused after."""
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    user = models["implicit-user"].user_ids[0]
    assert recommend.main([str(path), "--users", f"{user},999999", "--index", "approximate",
                           "--device", "cpu"]) == 2
    assert capsys.readouterr().err == "error: 1 user id(s) unknown to the model: 999999\n"
    assert not ann.index_path(path).exists()


def test_a_user_the_index_finds_too_few_for_gets_the_exact_top_k(models):
    """One list scanned (no calibration), ~40 items: n=100 is more than it finds, so every user
    is short and the exact top-k answers; the index alone would have padded the rows with -1."""
    model = models["implicit-user"]
    model._index = ann.ItemIndex.for_model(model, None, ann.IndexSettings(
        probes=1, refine=1, recall_target=0))
    users = np.arange(0, len(model.user_ids), 11)
    _, _, short = model._index.top(ann.user_queries(model, users), users, 100, model.data.seen)
    assert short.all()
    items, _ = model.recommend(model.user_ids[users], n=100, index="approximate")
    np.testing.assert_array_equal(items, model.item_ids[reference_top(model, users, 100)[0]])
    model._index = None


def top_of_every_list(items: np.ndarray, left_out=None) -> ann.ItemIndex:
    """An index of `items` whose queries scan every list: its top is the float64 top-k's."""
    settings = ann.IndexSettings(probes=ann.IndexSettings().lists(len(items)))
    index = ann.ItemIndex(items, settings, left_out)
    index.build()
    return index


def test_items_of_equal_logits_go_earlier_first_through_the_index():
    """Items of one vector tie on every query: faiss returns them in its own order, and top
    puts the earlier item first, as the exact top-k (a stable float64 argsort) does."""
    rng = np.random.default_rng(7)
    items = rng.standard_normal((40, 5)).astype(np.float32)
    items[[3, 17, 29]] = items[[31, 5, 11]]                  # three pairs of equal vectors
    queries = rng.standard_normal((30, 5)).astype(np.float32)
    idx, logits, short = top_of_every_list(items).top(queries, np.arange(30), 40, None)
    exact = queries.astype(np.float64) @ items.T.astype(np.float64)         # (30, 40)
    np.testing.assert_array_equal(idx, np.argsort(-exact, axis=1, kind="stable"))
    np.testing.assert_allclose(logits, -np.sort(-exact, axis=1), rtol=1e-5, atol=1e-6)
    assert not short.any()


def test_short_marks_the_users_the_index_found_fewer_for_than_the_exact_top_k_offers(
        monkeypatch):
    """The exact top-k offers a user n items, or their unseen items not left out where those
    are fewer: a user the index found all of those for is not short, one it found one fewer
    for is (and the exact top-k answers them)."""
    rng = np.random.default_rng(8)
    items = rng.standard_normal((40, 5)).astype(np.float32)
    left_out = np.array([2, 5])
    index = top_of_every_list(items, left_out)
    offered = np.setdiff1d(np.arange(40), left_out)                         # (38,)
    seen_of = [offered[:0], offered[:30], offered]           # unseen and offered: 38, 8, 0
    seen = sp.csr_matrix((np.ones(sum(map(len, seen_of))), np.concatenate(seen_of),
                          np.cumsum([0, *map(len, seen_of)])), shape=(3, 40))
    queries, users = rng.standard_normal((3, 5)).astype(np.float32), np.arange(3)
    idx, _, short = index.top(queries, users, 10, seen)
    assert (idx >= 0).sum(axis=1).tolist() == [10, 8, 0] and not short.any()
    search = index.search

    def one_fewer(queries, k, excluded=None):                # the last item found dropped
        found, logits = search(queries, k, excluded)
        rows, last = np.arange(len(found)), (found >= 0).sum(axis=1) - 1     # (B,) each
        rows, last = rows[last >= 0], last[last >= 0]
        found[rows, last], logits[rows, last] = -1, -np.inf
        return found, logits
    monkeypatch.setattr(index, "search", one_fewer)
    assert index.top(queries, users, 10, seen)[2].tolist() == [True, True, False]


def test_the_index_file_is_reused_while_it_matches_and_rebuilt_when_the_model_changes(
        models, tmp_path, caplog):
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    caplog.set_level(logging.INFO, "ncae_cuda.ann")
    first = NCAE.load(path, device="cpu").item_index()
    assert ann.index_path(path).exists() and "built" in caplog.text
    caplog.clear()
    again = NCAE.load(path, device="cpu").item_index()
    assert "read" in caplog.text and "built" not in caplog.text
    assert again.digest == first.digest
    fit("implicit-user", seed=1).save(path)
    caplog.clear()
    changed = NCAE.load(path, device="cpu")
    assert changed.item_index().digest != first.digest
    assert "another model: rebuilding" in caplog.text and "built" in caplog.text
    with np.load(ann.index_path(path)) as saved:
        assert str(saved["digest"]) == changed.item_index().digest


def recall_of(model: NCAE, index: ann.ItemIndex, users: np.ndarray) -> float:
    """The mean share of each user's float64 top CALIBRATION_K that recommend finds through
    `index` (the exact top-k answering users it finds too few for, as recommend does)."""
    model = copy.copy(model)
    model._index = index
    found, _ = model.recommend(model.user_ids[users], n=ann.CALIBRATION_K, index="approximate")
    best, _ = reference_top(model, users, ann.CALIBRATION_K)
    return float(np.mean([np.isin(f, e).mean() for f, e in zip(found, model.item_ids[best])]))


@pytest.mark.parametrize("target", [0.6, 0.9, 0.99])
def test_the_probes_are_the_fewest_doubling_that_find_the_target_of_a_sample(models, target):
    """A trained model's items cluster less evenly than bench/ann.py's generated ones, and 16
    probes found 54-92% of three trained models' top 10 (before: searched at those, whatever
    they found); the index now doubles them until a sample of the model's users finds
    `recall_target` of its top 10, as float64 numpy ranks them."""
    model = models["implicit-user"]
    settings = ann.IndexSettings(probes=1, probe_share=0, recall_target=target)
    index = ann.ItemIndex.for_model(model, None, settings)
    _, users, _ = ann._calibration_sample(model, settings.calibration_users)
    assert len(users) == min(settings.calibration_users, len(model.user_ids))
    assert index.recall == pytest.approx(recall_of(model, index, users), abs=0.01)
    assert index.recall >= target or index.probes == index.lists()
    if index.probes > 1:                                    # half as many fell short
        index.probes //= 2
        assert recall_of(model, index, users) < target


def test_a_target_of_zero_keeps_the_settings_probes_and_one_past_reach_scans_every_list(
        models):
    model = models["explicit-item"]
    kept = ann.ItemIndex.for_model(model, None, ann.IndexSettings(probes=2, recall_target=0))
    assert kept.probes == ann.IndexSettings(probes=2).probes_of(kept.lists())
    every = ann.ItemIndex.for_model(model, None, ann.IndexSettings(probes=1, recall_target=1.01))
    assert every.probes == every.lists() and every.recall <= 1


def test_the_calibrations_exact_top_k_is_float64_numpys_a_few_queries_at_a_time(
        models, monkeypatch):
    model = models["implicit-user"]
    index = ann.ItemIndex.for_model(model, None, ann.IndexSettings(recall_target=0))
    queries, users, seen = ann._calibration_sample(model, 64)
    monkeypatch.setattr(ann, "EXACT_FLOATS", 3 * len(model.item_ids))     # 3 queries a batch
    found = index.exact_top(queries, users, ann.CALIBRATION_K, seen)
    best, _ = reference_top(model, users, ann.CALIBRATION_K)
    np.testing.assert_array_equal(np.sort(found, axis=1), np.sort(best, axis=1))


def test_a_saved_index_keeps_its_calibration(models, tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    settings = ann.IndexSettings(probes=1, probe_share=0)
    built = ann.ItemIndex.for_model(NCAE.load(path, device="cpu"), path, settings)
    monkeypatch.setattr(ann.ItemIndex, "calibrate", None)   # read, not calibrated again
    read = ann.ItemIndex.for_model(NCAE.load(path, device="cpu"), path, settings)
    assert (read.probes, read.recall) == (built.probes, built.recall)
    assert built.probes > 1                                 # what the read had to keep


@pytest.mark.parametrize("damage", ["cut short", "a byte flipped", "emptied"])
def test_a_damaged_index_file_is_rebuilt_not_raised(damage, models, tmp_path, caplog):
    """model.ann cut short (a copy interrupted, a full disk) or with a byte changed: zipfile's
    BadZipFile went past the read's handler, a traceback out of recommend and serve; now the
    index is rebuilt, said in a warning, and saved again whole. An empty file, which holds
    nothing to keep, is replaced alike."""
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    built = NCAE.load(path, device="cpu").item_index()
    saved = ann.index_path(path).read_bytes()
    damaged = {"cut short": saved[:len(saved) // 2], "emptied": b"",
               "a byte flipped": saved[:len(saved) // 2] + bytes([saved[len(saved) // 2] ^ 0xFF])
               + saved[len(saved) // 2 + 1:]}[damage]
    ann.index_path(path).write_bytes(damaged)
    caplog.set_level(logging.INFO, "ncae_cuda.ann")
    again = NCAE.load(path, device="cpu").item_index()
    assert "unreadable" in caplog.text and "built" in caplog.text
    assert again.digest == built.digest
    with np.load(ann.index_path(path)) as index:
        assert str(index["digest"]) == built.digest


def test_a_model_file_named_as_an_index_is_not_overwritten_by_its_index(models, tmp_path):
    """A model saved as model.ann: its index went to model.npz -> model.ann, the model's own
    file, which the index replaced (the model gone, the next load "not an ncae_cuda model
    file"); now it is saved beside it under a name of its own, and read back from there."""
    path = tmp_path / "model.ann"
    models["implicit-user"].save(path)
    written = path.read_bytes()
    built = NCAE.load(path, device="cpu").item_index()
    assert path.read_bytes() == written
    assert ann.index_path(path) != path and ann.index_path(path).exists()
    assert NCAE.load(path, device="cpu").item_index().digest == built.digest


@pytest.mark.parametrize("theirs", ["notes", "a copy of the model"])
def test_a_file_of_ones_own_where_the_index_goes_is_kept_not_overwritten(theirs, models,
                                                                           tmp_path, caplog):
    """Before: a user's own model.ann beside model.npz (notes, a copy of the model) was taken
    for a damaged index and replaced by one, a warning said after the fact; now it is kept
    byte for byte, the index is searched unsaved, and a warning says so and what to do."""
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    own = b"my notes on this model\n" if theirs == "notes" else path.read_bytes()
    ann.index_path(path).write_bytes(own)
    caplog.set_level(logging.INFO, "ncae_cuda.ann")
    loaded = NCAE.load(path, device="cpu")
    users = loaded.user_ids[:20]
    for got, want in zip(loaded.recommend(users, n=5, index="approximate"),
                         loaded.recommend(users, n=5)):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert ann.index_path(path).read_bytes() == own
    assert "not an index file, kept as it is" in caplog.text and "built" in caplog.text


def test_a_refit_model_searches_a_new_index(models):
    model = fit("implicit-user")
    before = model.item_index()
    model.partial_fit(datasets.load("synthetic"), epochs=1, verbose=False)
    assert model.item_index() is not before and model.item_index().digest != before.digest


def test_an_index_asked_for_between_a_fits_epochs_is_of_that_epochs_items():
    # The fit steps one network: the index of epoch 1 is stale at epoch 2.
    indexes = []

    def heard(model, record):
        p = model._net.p
        items = np.column_stack([p["V"], p["c"]]).astype(np.float32)     # user-based: (V, c)
        indexes.append((model.item_index().digest, ann.ItemIndex(items).digest))
    NCAE(device="cpu", hidden=(16,), **KINDS["implicit-user"]).fit(
        datasets.load("synthetic"), epochs=2, callback=heard, verbose=False)
    assert len(indexes) == 2 and indexes[0][1] != indexes[1][1]
    for found, wanted in indexes:
        assert found == wanted


def test_the_cli_writes_the_same_rows_through_the_index(models, tmp_path, capsys):
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    users = ",".join(map(str, models["implicit-user"].user_ids[:20]))
    outputs = []
    for index in ann.INDEXES:
        assert recommend.main([str(path), "--users", users, "-n", "5", "--device", "cpu",
                               "--index", index]) == 0
        outputs.append(np.array([line.split(",") for line in
                                 capsys.readouterr().out.splitlines()[1:]]))    # (rows, 4)
    exact, approximate = outputs
    assert exact.shape == (100, 4)
    np.testing.assert_array_equal(exact[:, :3], approximate[:, :3])        # user, rank, item
    np.testing.assert_allclose(exact[:, 3].astype(float), approximate[:, 3].astype(float),
                               rtol=1e-5)


def test_a_blend_and_a_missing_extra_are_refused_in_a_line(models, tmp_path, monkeypatch,
                                                            capsys):
    blend = BlendedNCAE(device="cpu", hidden=(8,), feedback="explicit").fit(
        datasets.load("synthetic-tiny"), epochs=1, verbose=False)
    for items in (None, blend.item_ids[:3]):        # candidates, ranked exactly, refused too
        with pytest.raises(ann.IndexUnavailable, match="blend"):
            blend.recommend(blend.user_ids[:2], items=items, index="approximate")
    with pytest.raises(ValueError, match="index must be one of exact, approximate"):
        blend.recommend(blend.user_ids[:2], index="fast")
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    monkeypatch.setitem(sys.modules, "faiss", None)            # import faiss fails
    assert recommend.main([str(path), "--all", "--index", "approximate"]) == 2
    assert capsys.readouterr().err == f"error: {ann.MISSING_EXTRA}\n"


@pytest.mark.extra("serve")
def test_serve_index_rebuilds_on_sighup_and_answers_as_the_offline_index(models, tmp_path):
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    server = Server(path, "--index", "approximate")
    try:
        assert server.call("/healthz")[1]["index"] == "approximate"
        assert "built" in server.logged() and ann.index_path(path).exists()
        # faiss's loader's INFO lines (which CPU builds it tried) are not the server's log
        assert "faiss" not in server.logged(), server.logged()
        second = fit("implicit-user", seed=1)
        second.save(path)
        server.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "reloaded" in server.logged())
        assert "another model: rebuilding" in server.logged()
        user = second.user_ids[3]
        _, got = server.call("/recommend" + query(user=user, n=10))
        items, scores = second.recommend([user], n=10, index="approximate")
        assert got["items"] == items[0].tolist()
        np.testing.assert_allclose(got["scores"], scores[0], rtol=1e-5)
    finally:
        assert server.stop() == 0, server.logged()


@pytest.mark.parametrize("kind", KINDS)
def test_no_users_get_no_rows_through_the_index_as_through_the_exact_top_k(kind, models):
    """recommend([]) through the index: (0, n) arrays of the exact top-k's dtypes (it raised
    numpy's ValueError, concatenating no batch of user codes)."""
    model = models[kind]
    exact = model.recommend([], n=5)
    approximate = model.recommend([], n=5, index="approximate")
    for got, expected in zip(approximate, exact):
        assert got.shape == expected.shape == (0, 5) and got.dtype == expected.dtype


@pytest.mark.parametrize("n_items", [1, 2, 3, 15])
def test_a_catalogue_of_fewer_items_than_a_code_has_centroids_is_searched(n_items):
    """Fewer items than a 4-bit code's 16 centroids (faiss refused to train on them): the
    index finds each user's float64 top n of its unseen items, a user who has seen them all
    padded with -1 and -inf, as the exact top-k pads it."""
    rng = np.random.default_rng(n_items)
    X = (rng.random((12, n_items)) < 0.5).astype(float)
    X[0], X[1] = 1, 0                                   # every item seen; none
    model = NCAE(device="cpu", hidden=(4,), feedback="implicit").fit(
        sp.csr_matrix(X), epochs=1, verbose=False)
    users = np.arange(len(model.user_ids))
    items, scores = model.recommend(model.user_ids, n=n_items, index="approximate")
    best, logits = reference_top(model, users, n_items)
    found = np.isfinite(logits)
    np.testing.assert_array_equal(items, np.where(found, model.item_ids[best], -1))
    np.testing.assert_allclose(scores, logits, rtol=1e-4, atol=1e-5)
    assert not found[0].any() and found[1].all()
    _, _, short = model.item_index().top(ann.user_queries(model, users), users, n_items,
                                         model.data.seen)
    assert not short.any()                               # the index's answers, not exact's


@pytest.mark.parametrize("n_items", [3, 300])
def test_a_small_catalogue_is_indexed_without_faiss_warning_on_every_coordinate(n_items,
                                                                                 capfd):
    """A sample under 39 points a centroid made faiss print a warning a coordinate (hundreds
    of lines at a server's start): the index is built as before, quietly, its search exact
    where every list is scanned."""
    items = items_of_every_norm()[:n_items]
    index = ann.ItemIndex(items, ann.IndexSettings(probes=ann.IndexSettings().lists(n_items)))
    index.build()
    assert "WARNING" not in capfd.readouterr().err
    queries = np.random.default_rng(6).standard_normal((20, 9)).astype(np.float32)
    idx, _ = index.search(queries, 3)
    best = np.argsort(-(queries.astype(np.float64) @ items.T.astype(np.float64)), axis=1)
    np.testing.assert_array_equal(np.sort(idx, axis=1), np.sort(best[:, :3], axis=1))


def test_a_loaded_model_fit_on_leaves_the_index_of_its_file_as_it_was(models, tmp_path):
    """partial_fit of a loaded model, then an index: the refit model's index replaced the
    file's, though the file still holds the model it was built of (the next load rebuilt it)."""
    path = tmp_path / "model.npz"
    models["implicit-user"].save(path)
    model = NCAE.load(path, device="cpu")
    model.item_index()
    saved = ann.index_path(path).read_bytes()
    model.partial_fit(datasets.load("synthetic"), epochs=1, verbose=False)
    model.item_index()
    assert ann.index_path(path).read_bytes() == saved
    with np.load(ann.index_path(path)) as index:
        assert str(index["digest"]) == ann.ItemIndex.for_model(NCAE.load(path, device="cpu")
                                                               ).digest


@pytest.mark.parametrize("based", ["user", "item"])
@pytest.mark.parametrize("filter_seen", [True, False])
def test_items_of_no_fit_rating_are_ranked_through_the_index_as_the_exact_top_k(based,
                                                                                 filter_seen):
    """An explicit model scores a known user's item with no fit rating at the user's shrunk
    mean, as predict does; the index holds such an item's untrained vector, and found or
    missed it by that instead. Every list scanned, the index's rows are the exact top-k's."""
    X = emptied_items_data()
    model = NCAE(device="cpu", hidden=(8,), feedback="explicit", based=based,
                 rating_scale=(1, 5)).fit(X, epochs=2, verbose=False)
    model._index = scanning_every_list(model)
    users = np.arange(X.shape[0])
    for n in (5, 12):
        items, scores = model.recommend(users, n=n, filter_seen=filter_seen,
                                        index="approximate")
        exact_items, exact_scores = model.recommend(users, n=n, filter_seen=filter_seen)
        np.testing.assert_array_equal(items, exact_items)
        np.testing.assert_allclose(scores, exact_scores, rtol=1e-5)
    assert np.isin(exact_items, EMPTIED).any()                      # the case: ranked by them


def test_items_of_no_fit_rating_ranked_first_are_all_found_through_the_index():
    """Users whose shrunk mean is near the scale's top: the items of no fit rating, scored at
    it, rank first, tied, the earlier first; through the index for n under their number, as
    the exact top-k and as written here."""
    X = emptied_items_data()
    model = NCAE(device="cpu", hidden=(8,), feedback="explicit", rating_scale=(1, 5)).fit(
        X, epochs=2, verbose=False)
    model._index = scanning_every_list(model)
    model.data.shrunk_means.users[:] = 4.99
    users = np.arange(X.shape[0])
    for n in range(1, len(EMPTIED) + 2):
        items, scores = model.recommend(users, n=n, filter_seen=False, index="approximate")
        exact_items, _ = model.recommend(users, n=n, filter_seen=False)
        np.testing.assert_array_equal(items, exact_items)
        np.testing.assert_array_equal(items[:, :len(EMPTIED)], np.broadcast_to(
            EMPTIED[:n], (len(users), min(n, len(EMPTIED)))))
        np.testing.assert_allclose(scores[:, :len(EMPTIED)], 4.99, rtol=1e-5)


def test_an_index_that_does_not_apply_is_said_in_flags_on_the_command_line(tmp_path, capsys):
    blend = BlendedNCAE(device="cpu", hidden=(8,), feedback="explicit").fit(
        datasets.load("synthetic-tiny"), epochs=1, verbose=False)
    with pytest.raises(ann.IndexUnavailable) as raised:
        blend.recommend(blend.user_ids[:2], index="approximate")
    python = str(raised.value)
    assert "(based='both')" in python and "(index='exact')" in python
    path = tmp_path / "model.npz"
    blend.save(path)
    assert recommend.main([str(path), "--all", "--index", "approximate"]) == 2
    said = capsys.readouterr().err
    assert said == "error: " + python.replace("based='both'", "--based both").replace(
        "index='exact'", "--index exact") + "\n"


def test_an_index_on_the_gpu_names_both_ways_out_in_each_spelling(models):
    on_gpu = copy.copy(models["implicit-user"])
    on_gpu.ops = type("Ops", (), {"name": "gpu"})()
    with pytest.raises(ann.IndexUnavailable) as raised:
        ann.check_applies(on_gpu)
    assert str(raised.value).endswith("(index='exact', or device='cpu')")
    assert raised.value.on_command_line().endswith("(--index exact, or --device cpu)")


def test_the_items_no_user_is_offered_are_left_out_once_a_search_not_once_a_user(monkeypatch):
    """An explicit model's items of no fit rating are left out of every user's search: their
    ids went into each user's own exclusion list, a cost a user that grew with their number.
    Now their selector is made once, and a user's list holds the items that user has seen
    alone."""
    X = emptied_items_data()
    model = NCAE(device="cpu", hidden=(8,), feedback="explicit",
                 rating_scale=(1, 5)).fit(X, epochs=1, verbose=False)
    made = []                                          # the ids of each exclusion list made
    faiss = ann.faiss_module()
    selector = faiss.IDSelectorBatch

    def recorded(ids):
        made.append(np.sort(ids))
        return selector(ids)
    monkeypatch.setattr(faiss, "IDSelectorBatch", recorded)
    model.item_index()                                 # built, and calibrated on some users
    built = len(made)
    users = np.arange(X.shape[0])
    model.recommend(users, n=5, index="approximate")
    model.recommend(users, n=5, index="approximate")
    seen = [np.sort(X[u].indices).tolist() for u in users if X[u].nnz]
    cold = [ids for ids in made if np.isin(EMPTIED, ids).any()]
    assert len(cold) == 1 and cold[0].tolist() == EMPTIED                # the index's, once
    assert sorted(ids.tolist() for ids in made[built:]) == sorted(2 * seen)
