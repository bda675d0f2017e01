"""The whole network's gradient against finite differences (float64, reference ops), and the
fast backends' training steps against the reference's."""
from dataclasses import replace

import numpy as np
import pytest

from ncae_cuda.layout import NCAELayout
from ncae_cuda.model import AdamConfig, Network, Objective
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR

from helpers import assert_close, random_matrix

OBJECTIVES = {
    "explicit": Objective.explicit(1.0, 5.0, alpha=1.0, beta=0.4),
    "implicit": Objective.implicit(),
}


def make_problem(feedback, hidden, seed=0, n_rows=12, n_cols=9, batch_rows=5, batch_size=6):
    rng = np.random.default_rng(seed)
    m = random_matrix(rng, n_rows, n_cols, density=0.35)
    rows = rng.choice(n_rows, batch_rows, replace=False).astype(np.int32)
    batch = ref.cut_batch(CSR.from_scipy(ref, m), rows, batch_size)
    layout = NCAELayout(n_cols, hidden)
    params = layout.xavier_init(rng) + rng.normal(0, 0.1, layout.size).astype(np.float32)
    keep = (rng.random(len(batch.cols)) < 0.6).astype(np.uint8)
    col_weights = rng.random(n_cols) if feedback == "implicit" else None
    return layout, params, batch, keep, col_weights


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
@pytest.mark.parametrize("hidden", [(4,), (5, 3), (4, 3, 5)])
@pytest.mark.parametrize("target_corrupted", [False, True])
def test_gradient_matches_finite_differences(feedback, hidden, target_corrupted):
    layout, params, batch, keep, col_weights = make_problem(feedback, hidden)
    objective = replace(OBJECTIVES[feedback], target_corrupted=target_corrupted)
    net = Network(layout, ref, objective, params, col_weights, dtype=np.float64)
    scale = 1 / (1 - 0.4)

    def loss():
        net.grads.fill(0)
        return float(net.loss_and_grad(batch, keep, scale) @ batch.row_weight)

    loss()
    analytic = net.grads.copy()
    numeric = np.empty_like(analytic)
    h = 1e-6
    for i in range(layout.size):
        saved = net.params[i]
        net.params[i] = saved + h
        up = loss()
        net.params[i] = saved - h
        down = loss()
        net.params[i] = saved
        numeric[i] = (up - down) / (2 * h)
    assert np.abs(analytic).max() > 1e-3          # the check is not vacuous
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8)


def test_corrupted_target_differs_from_the_clean_one():
    for feedback in ("explicit", "implicit"):
        layout, params, batch, keep, col_weights = make_problem(feedback, (5,))
        losses = []
        for corrupted in (False, True):
            objective = replace(OBJECTIVES[feedback], target_corrupted=corrupted)
            net = Network(layout, ref, objective, params, col_weights, dtype=np.float64)
            losses.append(net.loss_and_grad(batch, keep, 2.0))
        assert not np.allclose(*losses)


@pytest.mark.parametrize("first, lowest", [("V", 3), ("W3", 3), ("W2", 2)])
def test_partial_step_trains_only_the_tail(first, lowest):
    layout, params, batch, keep, col_weights = make_problem("explicit", (5, 4, 3))
    full = Network(layout, ref, OBJECTIVES["explicit"], params, dtype=np.float64)
    full.loss_and_grad(batch, keep, 2.0)
    part = Network(layout, ref, OBJECTIVES["explicit"], params, dtype=np.float64)
    part.train_step(batch, keep, 2.0, AdamConfig(lr=0.1, weight_decay=0.1), first)
    start = layout.offsets[first]
    np.testing.assert_array_equal(part.params[:start], params[:start])     # frozen: untouched
    assert (part.params[start:] != params[start:]).any()
    trained = layout.offsets[f"W{lowest}"] if first != "V" else layout.offsets["V"]
    np.testing.assert_array_equal(part.grads[:trained], 0)                  # no backprop below
    np.testing.assert_allclose(part.grads[trained:], full.grads[trained:], rtol=1e-12)


def test_padding_and_alignment_gaps_get_no_gradient():
    layout, params, batch, keep, col_weights = make_problem("implicit", (5, 3))
    net = Network(layout, ref, OBJECTIVES["implicit"], params, col_weights, dtype=np.float64)
    net.loss_and_grad(batch, keep, 1.0)
    used = np.zeros(layout.size, bool)
    for view in layout.views(used).values():
        view[...] = True
    assert not net.grads[~used].any()


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_backend_training_steps_match_reference(backend, feedback):
    layout, params, _, _, col_weights = make_problem(feedback, (7, 5))
    rng = np.random.default_rng(1)
    m = random_matrix(rng, 40, 9, density=0.3)
    adam = AdamConfig(lr=1e-2, weight_decay=1e-3)
    nets = [Network(layout, ref, OBJECTIVES[feedback], params, col_weights, dtype=np.float64),
            Network(layout, backend, OBJECTIVES[feedback], params, col_weights)]
    for step in range(5):
        rows = rng.choice(40, 16, replace=False).astype(np.int32)
        losses = []
        for net in nets:
            o = net.ops
            batch = o.cut_batch(CSR.from_scipy(o, m), rows, 16)
            keep = o.xp.empty(len(batch.cols), np.uint8)
            o.dropout_keep(keep, batch.entry_ids, 3, step, 0.5)
            losses.append(float(net.train_step(batch, keep, 2.0, adam)))
        assert losses[1] == pytest.approx(losses[0], rel=1e-4)
    assert_close(backend.to_host(nets[1].params), nets[0].params, rtol=1e-4)
