"""Recency weights against hand-worked cases and brute force, and a model scoring from them:
trained as without them, scoring as the float64 forward of the weighted rows."""
from dataclasses import replace

import numpy as np
import pytest
from test_estimator import N_ITEMS, N_USERS, codes, matrix, params64

from ncae_cuda import NCAE
from ncae_cuda.commands import train
from ncae_cuda.data.interactions import NO_TIME, DataError, from_matrix
from ncae_cuda.data.recency import later_counts, weights


def brute_later(users, times):
    return np.array([np.count_nonzero((users == u) & (times > t)) for u, t in zip(users, times)])


def test_later_counts_by_hand():
    users = np.array([0, 0, 0, 0, 2, 3, 3, 3])         # user 1 has no entries
    times = np.array([5, 3, 5, 1, 7, NO_TIME, 4, NO_TIME])
    # user 0: the two 5s are latest (0 later), 3 has two later, 1 three; user 3: undated earliest
    np.testing.assert_array_equal(later_counts(users, times, 4), [0, 2, 0, 3, 0, 1, 0, 1])
    assert later_counts(users[:0], times[:0], 4).shape == (0,)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_later_counts_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    nnz = int(rng.integers(1, 400))
    users = rng.integers(0, 30, nnz)
    times = rng.integers(0, 6, nnz)                     # coarse times: many ties
    np.testing.assert_array_equal(later_counts(users, times, 35), brute_later(users, times))


def timed(X, seed=0):
    """X as Interactions with random coarse times (ties among them)."""
    data = from_matrix(X, "X")
    return replace(data, timestamps=np.random.default_rng(seed).integers(0, 8, data.nnz))


def test_weights_are_one_plus_the_halved_boost():
    data = timed(matrix())
    r = brute_later(data.users, data.timestamps)
    np.testing.assert_allclose(weights(data, 3.0, 1.5, "d"), 1 + 3.0 * 0.5 ** (r / 1.5),
                               rtol=1e-6)
    with pytest.raises(DataError, match="d has no timestamps"):
        weights(from_matrix(matrix(), "X"), 3.0, 1.5, "d")


def dense_weighted(data, boost, halflife) -> np.ndarray:
    """(users, items) float64: each interaction's recency weight, 0 elsewhere."""
    r = brute_later(data.users, data.timestamps)
    dense = np.zeros((data.n_users, data.n_items))
    dense[data.users, data.items] = 1 + boost * 0.5 ** (r / halflife)
    return dense


SMALL = {"feedback": "implicit", "hidden": (8, 6), "batch_size": 16, "device": "cpu"}


def test_a_model_scores_from_weighted_rows_and_trains_as_without_them():
    data = timed(matrix())
    plain = NCAE(**SMALL).fit(data, epochs=2, verbose=False)
    model = NCAE(**SMALL, recency_boost=3.0, recency_halflife=1.5).fit(data, epochs=2,
                                                                       verbose=False)
    p = params64(model)
    np.testing.assert_array_equal(model.ops.to_host(model._net.params),
                                  plain.ops.to_host(plain._net.params))
    users = np.repeat(np.arange(N_USERS), N_ITEMS)
    items = np.tile(np.arange(N_ITEMS), N_USERS)
    out = codes(p, dense_weighted(data, 3.0, 1.5)) @ p["V"].T + p["c"]   # (users, items)
    np.testing.assert_allclose(model.predict(users, items), np.tanh(out).ravel(), atol=1e-4)
    assert not np.allclose(plain.predict(users, items), model.predict(users, items), atol=1e-3)
    # a new user folded in with their times scores as the same user known to the model
    rows = np.array([5, 0, 1, 33])
    X = matrix()
    times = X.copy()
    times.data = data.timestamps[np.lexsort((data.items, data.users))].astype(float) + 1e9
    got = model.recommend_new(X[rows], n=7, times=times[rows])
    want = model.recommend(rows, n=7)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_recency_refusals():
    X = matrix()
    with pytest.raises(DataError, match="X has no timestamps"):
        NCAE(**SMALL, recency_boost=2.0).fit(X, epochs=1, verbose=False)
    model = NCAE(**SMALL, recency_boost=2.0).fit(timed(X), epochs=1, verbose=False)
    with pytest.raises(ValueError, match="give times="):
        model.recommend_new(X[:2])
    with pytest.raises(DataError, match="times is 2 x 29"):
        model.recommend_new(X[:2], times=X[:2, :29])


def test_a_checkpoint_is_of_the_times_it_scored_with(tmp_path):
    """With recency weights the times steer validation, so a checkpoint is refused for other
    times; without them it is not, as the times change nothing."""
    path = tmp_path / "checkpoint.npz"
    data, retimed = timed(matrix(), seed=0), timed(matrix(), seed=1)
    NCAE(**SMALL, recency_boost=2.0).fit(data, epochs=2, checkpoint=path, verbose=False)
    with pytest.raises(DataError, match=r"of another fit \(data: \w+ -> \w+\)"):
        NCAE(**SMALL, recency_boost=2.0).fit(retimed, epochs=2, checkpoint=path, resume=True,
                                             verbose=False)
    NCAE(**SMALL).fit(data, epochs=2, checkpoint=path, verbose=False)
    resumed = NCAE(**SMALL).fit(retimed, epochs=2, checkpoint=path, resume=True, verbose=False)
    assert len(resumed.history) == 2


@pytest.mark.parametrize("flags, message", [
    (["--feedback", "explicit", "--recency-boost", "2"], "--recency-boost: is for implicit"),
    (["--feedback", "implicit", "--based", "item", "--recency-boost", "2"],
     "it needs based='user'"),
    (["--feedback", "implicit", "--recency-halflife", "0"], "must be a finite number > 0"),
    (["--feedback", "explicit", "--valid-item", "latest"], "use it with --split loo"),
])
def test_bad_recency_flags_exit_with_a_message(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as e:
        train.main(["--dataset", "synthetic-tiny", "--device", "cpu", "--out", str(tmp_path),
                    *flags])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
