"""The fit driver on its own (ncae_cuda.model.trainer, loop.py): early stopping and the best
epoch's parameters against hand-computed runs of validation scores given in advance, an
epoch's loss against the steps' losses weighted by their real rows, and what tells a
checkpoint of this fit from another's."""
import math

import numpy as np
import pytest
from helpers import random_matrix

from ncae_cuda.data.interactions import DataError
from ncae_cuda.model import loop, modelfile
from ncae_cuda.model.network import Network, Objective
from ncae_cuda.model.trainer import Checkpoint, Progress, Trainer, fingerprint
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.layout import AdamConfig, NCAELayout
from ncae_cuda.ops.plan import Planner, Schedule


def fit_parts(n_rows=12, batch_size=5, seed=0):
    """(network with its step memory, CSR, planner) of a small explicit fit on the reference
    ops: 12 rows in batches of 5 (steps of 5, 5 and 2 real rows)."""
    rng = np.random.default_rng(seed)
    m = random_matrix(rng, n_rows, 7, density=0.5, empty_share=0.0)
    layout = NCAELayout(7, (4,))
    net = Network(layout, ref, Objective.explicit(1.0, 5.0, 1.0, 0.5),
                  layout.xavier_init(rng), dtype=np.float64)
    csr = CSR.from_scipy(ref, m)
    planner = Planner(csr, np.flatnonzero(np.diff(m.indptr)).astype(np.int32),
                      Schedule(seed, batch_size, 0.3))
    net.prepare(planner.geometry)
    return net, csr, planner


def scripted_fit(scores, patience, higher=False):
    """A fit whose validation scores are `scores`, one an epoch: (progress, the parameters
    after each epoch, the network's parameters at the end)."""
    net, csr, planner = fit_parts()
    metric = "ndcg@10" if higher else "rmse"
    given = iter(scores)
    after = []
    trainer = Trainer(net, csr, planner, AdamConfig(lr=0.05), "BP", 0, patience,
                      (metric, higher), score=lambda: {metric: next(given)},
                      on_epoch=lambda record: after.append(net.params.copy()), verbose=False)
    progress = trainer.run(len(scores))
    return progress, after, net.params.copy()


# (validation scores, lower better; patience) -> (epochs run, best epoch, stopped early),
# worked out by hand: a score equal to the best is no improvement (the first epoch of equal
# scores is the best); a better one starts the count of bad epochs again
STOPPING = [
    ([1.0, 0.8, 0.9, 0.8, 0.7, 0.6], 2, (4, 2, True)),       # a tie is a bad epoch
    ([1.0, 0.9, 0.95, 0.85, 0.9, 0.88, 0.5], 2, (6, 4, True)),  # the count starts again
    ([1.0, 1.1, 0.9, 1.2, 1.3], 3, (5, 3, False)),           # out of epochs, 2 bad of 3
    ([1.0, 1.1, 1.2, 1.3], 0, (4, 1, False)),                # patience 0: never stops
]


@pytest.mark.parametrize("higher", [False, True])
@pytest.mark.parametrize("scores, patience, expected", STOPPING)
def test_early_stopping_keeps_the_best_epochs_parameters(scores, patience, expected, higher):
    if higher:                              # the same run of a figure where more is better
        scores = [2.0 - s for s in scores]
    progress, after, final = scripted_fit(scores, patience, higher)
    epochs, best, _ = expected
    assert (progress.epoch, progress.best_epoch, progress.stopped_early) == expected
    assert len(after) == epochs
    assert progress.best_value == scores[best - 1]
    assert not np.array_equal(after[best - 1], after[-1]) or best == epochs
    np.testing.assert_array_equal(final, after[best - 1])


def test_a_validation_score_that_is_not_finite_stops_the_fit_naming_the_epoch():
    with pytest.raises(loop.Diverged, match=r"validation rmse became nan after epoch 2: "
                                            r"lower the learning rate"):
        scripted_fit([1.0, math.nan, 0.5], 2)


def steps_losing(per_step):
    """A training step whose batch's rows each lose per_step[s] at step s."""
    taken = []

    def step(batch, scale):
        taken.append(len(taken))
        return np.full(len(batch.row_weight), per_step[taken[-1]])
    return step


def test_an_epochs_loss_is_the_mean_over_its_rows_not_over_its_steps():
    net, csr, planner = fit_parts()
    plan = planner.plan(1)
    rows = [plan.rows(s) for s in range(plan.steps)]
    assert rows == [5, 5, 2]                        # the last batch part full: not vacuous
    per_step = [1.0, 2.0, 7.0]
    expected = (5 * 1.0 + 5 * 2.0 + 2 * 7.0) / 12
    loss = loop.run_epoch(steps_losing(per_step), net.memory, csr, plan, "test")
    assert loss == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_a_step_loss_that_is_not_finite_stops_the_epoch_naming_the_step(bad):
    net, csr, planner = fit_parts()
    with pytest.raises(loop.Diverged, match=rf"the training loss became {bad} at step 2 of 3 "
                                            "in test"):
        loop.run_epoch(steps_losing([1.0, bad, 2.0]), net.memory, csr, planner.plan(1), "test")


def test_a_fingerprint_tells_apart_data_cut_elsewhere_or_held_elsewhere():
    """A checkpoint's digest of its training and validation data: the same bytes split
    otherwise between the parts, or a part moved to another place (validation absent, the
    test part given), are another fit's data, never taken for this one's."""
    a, b = np.arange(6, dtype=np.int32), np.arange(6, 9, dtype=np.int32)
    digests = {fingerprint(a, b), fingerprint(a[:4], np.concatenate([a[4:], b])),
               fingerprint(np.concatenate([a, b]), None), fingerprint(None, np.concatenate([a, b])),
               fingerprint(a, b, None), fingerprint(a, None, b)}
    assert len(digests) == 6
    assert fingerprint(a, b) == fingerprint(a.copy(), b.copy())


@pytest.mark.parametrize("part, cut", [("state", (slice(None), slice(1, None))),
                                       ("state", (slice(1, None),)), ("best", (slice(1, None),))])
def test_a_checkpoint_whose_arrays_do_not_fit_the_network_is_refused_in_a_line(tmp_path, part,
                                                                                cut):
    """A checkpoint of this fit's identity (its settings, data) whose arrays were cut (a file
    edited or put together by hand) is refused naming the shapes, not restored part way."""
    net, _, _ = fit_parts()
    path = tmp_path / "checkpoint.npz"
    Checkpoint(path, {"fit": 1}).save(net, Progress(epoch=2), net.params.copy())
    meta, arrays = modelfile.read(path, Checkpoint.kind)
    arrays[part] = arrays[part][cut]
    modelfile.write(path, Checkpoint.kind, meta, arrays)
    with pytest.raises(DataError, match=rf"inconsistent \(ValueError: state \(.*\) and best "
                                        rf"\(.*\); the fit has {net.layout.size} parameters"):
        Checkpoint(path, {"fit": 1}).load(net)
