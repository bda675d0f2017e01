"""The whole network's gradient against finite differences (float64, reference ops), and the
fast backends' training steps against the reference's."""
import copy
import types
from dataclasses import replace

import numpy as np
import pytest
from helpers import assert_close, cut_first, random_matrix

from ncae_cuda.model.loop import run_epoch
from ncae_cuda.model.network import AdamConfig, Network, Objective, to_network_scale
from ncae_cuda.ops import BackendUnavailable
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.layout import NCAELayout
from ncae_cuda.ops.plan import Planner, Schedule

OBJECTIVES = {
    "explicit": Objective.explicit(1.0, 5.0, alpha=1.0, beta=0.4),
    "implicit": Objective.implicit(),
    "implicit-multinomial": Objective.implicit("multinomial"),
    # the identity output with a softened row weight (recipes/ml-100k-explicit.toml)
    "explicit-identity": Objective.explicit(1.0, 5.0, alpha=1.0, beta=0.4, identity=True,
                                            row_norm=0.3),
}


class Problem:
    """A random network and one planned batch of 5 rows (of 6: one padding row) to train on."""

    def __init__(self, feedback, hidden, seed=0, n_rows=12, n_cols=9, batch_rows=5,
                 batch_size=6, q=0.4):
        rng = np.random.default_rng(seed)
        self.m = random_matrix(rng, n_rows, n_cols, density=0.35)
        self.rows = rng.choice(n_rows, batch_rows, replace=False).astype(np.int32)
        self.layout = NCAELayout(n_cols, hidden)
        self.params = (self.layout.xavier_init(rng)
                       + rng.normal(0, 0.1, self.layout.size).astype(np.float32))
        implicit = OBJECTIVES[feedback].feedback == "implicit"
        self.col_weights = rng.random(n_cols) if implicit else None
        self.schedule = Schedule(seed, batch_size, q)

    def network(self, backend, objective, dtype=np.float32):
        """(network with its step memory, the batch cut into that memory) on the backend."""
        net = Network(self.layout, backend, objective, self.params, self.col_weights, dtype)
        csr = CSR.from_scipy(backend, self.m)
        planner = Planner(csr, self.rows, self.schedule)
        net.prepare(planner.geometry)
        return net, cut_first(backend, net.memory, csr, planner.plan(1))


@pytest.mark.parametrize("feedback", OBJECTIVES)
@pytest.mark.parametrize("hidden", [(4,), (5, 3), (4, 3, 5)])
@pytest.mark.parametrize("target_corrupted", [False, True])
def test_gradient_matches_finite_differences(feedback, hidden, target_corrupted):
    problem = Problem(feedback, hidden)
    objective = replace(OBJECTIVES[feedback], target_corrupted=target_corrupted)
    net, batch = problem.network(ref, objective, np.float64)
    layout, scale = problem.layout, problem.schedule.scale
    assert 0 < batch.keep.sum() < len(batch.keep)             # some inputs dropped, some kept

    def loss():
        net.grads.fill(0)
        return float(net.loss_and_grad(batch, scale) @ batch.row_weight)

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
        problem = Problem(feedback, (5,))
        losses = []
        for corrupted in (False, True):
            objective = replace(OBJECTIVES[feedback], target_corrupted=corrupted)
            net, batch = problem.network(ref, objective, np.float64)
            losses.append(net.loss_and_grad(batch, 2.0).copy())
        assert not np.allclose(*losses)


@pytest.mark.parametrize("first, lowest", [("V", 3), ("W3", 3), ("W2", 2)])
def test_partial_step_trains_only_the_tail(first, lowest):
    problem = Problem("explicit", (5, 4, 3))
    layout, params = problem.layout, problem.params
    full, batch = problem.network(ref, OBJECTIVES["explicit"], np.float64)
    full.loss_and_grad(batch, 2.0)
    part, batch = problem.network(ref, OBJECTIVES["explicit"], np.float64)
    part.loss_and_grad(batch, 2.0, lowest if first != "V" else 4)
    grads = part.grads.copy()
    part.adam_step(AdamConfig(lr=0.1, weight_decay=0.1), first)
    start = layout.offsets[first]
    np.testing.assert_array_equal(part.params[:start], params[:start])     # frozen: untouched
    assert (part.params[start:] != params[start:]).any()
    trained = layout.offsets[f"W{lowest}"] if first != "V" else layout.offsets["V"]
    np.testing.assert_array_equal(grads[:trained], 0)                       # no backprop below
    np.testing.assert_allclose(grads[trained:], full.grads[trained:], rtol=1e-12)
    assert not part.grads.any() and part.steps == int(part.counter[0]) == 1


@pytest.mark.parametrize("first", ["V", "W3", "W2", "E"])
def test_a_partial_train_step_leaves_no_gradient_behind(first):
    """train_step(first=...) backprops no further than the parameters its Adam step takes:
    a gradient left below them would be added into the next step that trains them."""
    problem = Problem("explicit", (5, 4, 3))
    net, batch = problem.network(ref, OBJECTIVES["explicit"], np.float64)
    net.train_step(batch, 2.0, AdamConfig(lr=0.1), first)
    start = problem.layout.offsets[first]
    np.testing.assert_array_equal(net.params[:start], problem.params[:start])
    assert (net.params[start:] != problem.params[start:]).any()
    assert not net.grads.any()


@pytest.mark.parametrize("identity", [False, True])
def test_a_rating_at_the_scales_ends_has_a_finite_logit_that_maps_back(identity):
    """Objective.logit, rating()'s inverse, at the scale's ends and inside it (1-10 ratings):
    the tanh output reaches its ends only at an infinite logit, so an end gets the nearest
    finite one, whose float32 rating is the end."""
    objective = Objective.explicit(1.0, 10.0, 1.0, 1.0, identity=identity)
    ratings = np.array([1.0, 10.0, 3.25, 7.0])
    logits = objective.logit(ratings)
    assert np.isfinite(logits).all()
    np.testing.assert_allclose(objective.rating(logits.astype(np.float32)), ratings, rtol=1e-6)
    np.testing.assert_array_equal(objective.rating(logits.astype(np.float32))[:2], [1.0, 10.0])


def test_identity_output_predicts_within_the_rating_scale():
    problem = Problem("explicit", (4,))
    net, batch = problem.network(ref, OBJECTIVES["explicit-identity"], np.float64)
    net.p["c"][:] = np.linspace(-6.0, 6.0, len(net.p["c"]))     # logits far past 1..5
    yhat = net.predict_entries(batch, batch)
    assert yhat.min() == 1.0 and yhat.max() == 5.0
    assert ((yhat > 1.0) & (yhat < 5.0)).any()


def test_padding_and_alignment_gaps_get_no_gradient():
    problem = Problem("implicit", (5, 3))
    net, batch = problem.network(ref, OBJECTIVES["implicit"], np.float64)
    net.loss_and_grad(batch, 1.0)
    used = np.zeros(problem.layout.size, bool)
    for view in problem.layout.views(used).values():
        view[...] = True
    assert not net.grads[~used].any()


@pytest.mark.parametrize("feedback", OBJECTIVES)
def test_a_backend_step_matches_the_reference(backend, feedback):
    """One step from the same parameters on the same batch: loss, gradients and the Adam
    update agree to float32 rounding (before rounding differences can grow)."""
    problem = Problem(feedback, (7, 5), n_rows=40, batch_rows=16, batch_size=16)
    (expect, e_batch), (got, g_batch) = (problem.network(ref, OBJECTIVES[feedback], np.float64),
                                         problem.network(backend, OBJECTIVES[feedback]))
    e_loss = expect.loss_and_grad(e_batch, 2.0) @ e_batch.row_weight
    g_loss = float(backend.to_host(got.loss_and_grad(g_batch, 2.0)) @ backend.to_host(
        g_batch.row_weight))
    assert g_loss == pytest.approx(e_loss, rel=1e-5)
    assert_close(backend.to_host(got.grads), expect.grads)
    adam = AdamConfig(lr=1e-2, weight_decay=1e-3, lr_decay=0.5, steps_per_epoch=1)
    for _ in range(2):                                        # the second at lr / 2
        expect.adam_step(adam)
        got.adam_step(adam)
    assert_close(backend.to_host(got.params), expect.params)


@pytest.mark.parametrize("feedback", ["explicit", "implicit", "implicit-multinomial"])
def test_backend_epochs_match_the_reference_in_loss(backend, feedback):
    """Three epochs through the trainer's loop: after the first step, rounding (FMA
    contraction, summation order) makes the paths part, so the epochs are compared on their
    loss, which they must agree on closely."""
    problem = Problem(feedback, (7, 5), n_rows=60, n_cols=20)
    adam = AdamConfig(lr=1e-2, weight_decay=1e-3)
    losses = []
    for ops, dtype in ((ref, np.float64), (backend, np.float32)):
        net = Network(problem.layout, ops, OBJECTIVES[feedback], problem.params,
                      problem.col_weights, dtype)
        csr = CSR.from_scipy(ops, problem.m)
        planner = Planner(csr, np.flatnonzero(np.diff(problem.m.indptr)).astype(np.int32),
                          Schedule(0, 16, 0.5))
        net.prepare(planner.geometry)
        losses.append([run_epoch(lambda b, s: net.train_step(b, s, adam), net.memory, csr,
                                 planner.plan(epoch), "test") for epoch in (1, 2, 3)])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)



def test_explicit_loss_and_gradients_are_the_same_on_any_scale():
    """The same ratings on 1-5 and mapped affinely to 1-100 and to 0.5-5, read as the network
    reads them (to_network_scale): the loss and the gradients of every layer, the input's
    included, are the same, so one lr and weight decay train them alike, and the predictions
    are each scale's own; on 1-5 the map is the identity bit for bit and the loss the squared
    error / s^2 = / 4 (float64 brute force)."""
    problem = Problem("explicit", (5, 4))
    found = []
    for low, high in ((1.0, 5.0), (1.0, 100.0), (0.5, 5.0)):
        scaled = copy.copy(problem)
        scaled.m = problem.m.copy()
        data = low + (problem.m.data - 1.0) * (high - low) / 4                   # 1..5 -> low..high
        scaled.m.data = to_network_scale(data, (low, high))
        objective = Objective.explicit(low, high, 1.0, 0.4)
        net, batch = scaled.network(ref, objective, np.float64)
        loss = float(net.loss_and_grad(batch, 2.0) @ batch.row_weight)
        yhat = net.predict_entries(batch, batch)
        found.append((loss, net.grads.copy(), batch, yhat, (low, high)))
    (loss5, grads5, _, yhat5, _), *others = found
    np.testing.assert_array_equal(to_network_scale(problem.m.data, (1.0, 5.0)), problem.m.data)
    assert np.abs(grads5).max() > 1e-3                           # not vacuous
    for loss, grads, _, yhat, (low, high) in others:
        assert loss == pytest.approx(loss5, rel=1e-12)
        np.testing.assert_allclose(grads, grads5, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(yhat, low + (yhat5 - 1.0) * (high - low) / 4, rtol=1e-12)
    # the brute force with the input layer's part taken out (E = 0: the codes are then the
    # same with dropout, as the loss has them, and without, as prediction has them)
    problem.layout.views(problem.params)["E"][...] = 0
    net, batch = problem.network(ref, Objective.explicit(1.0, 5.0, 1.0, 0.4), np.float64)
    loss = float(net.loss_and_grad(batch, 2.0) @ batch.row_weight)
    yhat = net.predict_entries(batch, batch)
    w = np.where(batch.keep.astype(bool), 0.4, 1.0) / batch.row_entries[batch.entry_rows]
    expected = batch.row_weight[batch.entry_rows] @ (w * (yhat - batch.vals) ** 2) / 4
    assert loss == pytest.approx(expected, rel=1e-12)


def brute_force_row_losses(problem, objective, batch, scale):
    """(B,) float64 each batch row's loss written out from the objective's definition
    (docs/design.md, "The model") on dense matrices: the input's kept entries scaled, the
    hidden layers, the logits, and the loss over the target (the clean row, or with
    target_corrupted its kept entries alone)."""
    p = problem.layout.views(problem.params.astype(np.float64))
    rows, cols = np.asarray(batch.entry_rows), np.asarray(batch.cols)
    kept, vals = np.asarray(batch.keep).astype(bool), np.asarray(batch.vals, np.float64)
    shape = (len(batch.row_weight), problem.layout.n_cols)
    x_in, observed, target_kept = np.zeros(shape), np.zeros(shape, bool), np.zeros(shape, bool)
    x_in[rows[kept], cols[kept]] = vals[kept] * scale
    observed[rows, cols] = True
    target_kept[rows[kept], cols[kept]] = True
    a = np.tanh(x_in @ p["E"] + p["b1"])
    for layer in range(2, len(problem.layout.hidden) + 1):
        a = np.tanh(a @ p[f"W{layer}"].T + p[f"b{layer}"])
    out = a @ p["V"].T + p["c"]                                          # (B, N)
    target = target_kept if objective.target_corrupted else observed
    if objective.feedback == "explicit":
        low, high = objective.scale
        s, m_off = (high - low) / 2, (high + low) / 2
        yhat = out + m_off if objective.identity else s * np.tanh(out) + m_off
        ratings = np.zeros(shape)
        ratings[rows, cols] = vals
        weight = np.where(target_kept, objective.beta, 0.0 if objective.target_corrupted
                          else objective.alpha) * observed
        per_row = np.maximum(np.asarray(batch.row_entries, np.float64), 1) ** objective.row_norm
        return (weight * (yhat - ratings) ** 2).sum(axis=1) / per_row / s ** 2
    if objective.loss == "multinomial":
        log_pi = out - np.log(np.exp(out).sum(axis=1, keepdims=True))
        return -(target * log_pi).sum(axis=1)
    weight = np.where(target, 1.0, problem.col_weights)
    return (weight * (np.tanh(out) - target) ** 2).sum(axis=1)


@pytest.mark.parametrize("feedback", OBJECTIVES)
@pytest.mark.parametrize("target_corrupted", [False, True])
@pytest.mark.parametrize("hidden", [(4,), (5, 3)])
def test_row_losses_match_the_objective_written_out(feedback, target_corrupted, hidden):
    """Each row's loss against a float64 brute force of its definition, on a batch with inputs
    dropped, one row's every input: the gradient check above cannot see a loss that is
    consistently the wrong one (e.g. the clean target where pre-training's corrupted one is
    asked)."""
    problem = Problem(feedback, hidden, n_rows=14, batch_rows=6, batch_size=7, q=0.5)
    objective = replace(OBJECTIVES[feedback], target_corrupted=target_corrupted)
    net, batch = problem.network(ref, objective, np.float64)
    real = np.asarray(batch.row_weight) > 0                        # the padding row left out
    kept_in_row = np.bincount(batch.entry_rows, batch.keep, minlength=len(real))
    dropped = np.diff(batch.indptr) - kept_in_row
    assert (dropped > 0).any() and (real & (kept_in_row == 0)).any()  # a row with no input left
    scale = problem.schedule.scale
    got = net.loss_and_grad(batch, scale)
    expected = brute_force_row_losses(problem, objective, batch, scale)
    np.testing.assert_allclose(got[real], expected[real], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("hidden, fits", [((6,), True), ((7,), False), ((6, 9, 6), True),
                                          ((6, 7), False), ((7, 6), False)])
def test_a_backend_takes_end_layers_up_to_its_widest_and_no_wider(hidden, fits):
    """A backend with a widest layer (the GPU kernels', ops/gpu.py) takes a first and a last
    hidden layer of exactly that width, and refuses one wider naming the flag; a middle layer
    (dense products) may be wider."""
    narrow = types.SimpleNamespace(**{**vars(ref), "max_width": 6, "name": "narrow"})
    layout = NCAELayout(9, hidden)
    params = layout.xavier_init(np.random.default_rng(0))
    objective = OBJECTIVES["explicit"]
    if fits:
        assert Network(layout, narrow, objective, params).layout is layout
    else:
        with pytest.raises(BackendUnavailable, match=r"the narrow backend takes a first and last "
                                                     r"hidden layer up to 6 wide \(--hidden"):
            Network(layout, narrow, objective, params)


def test_multinomial_predictions_are_the_softmax_even_of_logits_past_exps_range():
    """The multinomial loss's predictions, each row's softmax at the asked entries, against a
    float64 softmax, with logits past 88, where float32's exp overflows."""
    problem = Problem("implicit-multinomial", (4,))
    net, batch = problem.network(ref, OBJECTIVES["implicit-multinomial"])      # float32
    net.p["c"][:] = np.linspace(80.0, 120.0, len(net.p["c"]))
    logits = net.logits(batch).astype(np.float64)                               # (B, N)
    softmax = np.exp(logits - logits.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    got = net.predict_entries(batch, batch)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, softmax[batch.entry_rows, batch.cols], rtol=1e-4,
                               atol=1e-30)


def test_a_shards_l2_penalty_counts_each_parameter_once():
    """A column shard's lambda/2 ||params||^2 (an epoch's record's l2): its columns' part summed
    over the ranks, the replicated layers once; a shard of every column (one rank, whose sum
    over the ranks is its own) gives the whole network's, written out in float64."""
    layout = NCAELayout(9, (5, 3))
    params = layout.xavier_init(np.random.default_rng(0))        # its alignment gaps zero
    one_rank = types.SimpleNamespace(sum_host=lambda values: values)
    net = Network(layout, ref, OBJECTIVES["explicit"], params, dtype=np.float64, comm=one_rank)
    expected = 0.5 * 0.3 * sum(float((view.astype(np.float64) ** 2).sum())
                               for view in layout.views(params).values())
    assert net.l2_penalty(0.3) == pytest.approx(expected, rel=1e-12)
