"""Greedy pre-training: each stage trains exactly its own parameters, the dense stage's gradient
is right, and on synthetic data S+U+S starts fine-tuning from a lower loss than BP."""
import json
from dataclasses import replace

import numpy as np
import pytest
from helpers import random_matrix

from ncae_cuda.commands import train
from ncae_cuda.model import pretrain
from ncae_cuda.ops.plan import trainable_rows
from ncae_cuda.model.network import Network, Objective
from ncae_cuda.ops import reference as ref
from ncae_cuda.ops.common import CSR
from ncae_cuda.ops.layout import AdamConfig, Layout, NCAELayout, Parameters
from ncae_cuda.ops.plan import Planner, Schedule


@pytest.mark.parametrize("variant, expect", [
    ("BP", (None, None, False)), ("U+U", ("U", "U", False)), ("S+S", ("S", "S", False)),
    ("U+S", ("U", "S", False)), ("S+U", ("S", "U", False)), ("S+U+S", ("S", "U", True))])
def test_plan(variant, expect):
    assert tuple(vars(pretrain.stages(variant)).values()) == expect


def setup(feedback, hidden=(6, 5, 4)):
    rng = np.random.default_rng(0)
    m = random_matrix(rng, 30, 12, density=0.3)
    layout = NCAELayout(12, hidden)
    objective = (Objective.explicit(1, 5, 1.0, 0.5) if feedback == "explicit"
                 else Objective.implicit())
    weights = rng.random(12) if feedback == "implicit" else None
    net = Network(layout, ref, objective, layout.xavier_init(rng), weights)
    csr = CSR.from_scipy(ref, m)
    planner = Planner(csr, trainable_rows(csr), Schedule(0, 8, 0.5))
    net.prepare(planner.geometry)
    stage = pretrain.Stage(csr, planner, AdamConfig(lr=1e-2, weight_decay=1e-3), epochs=2)
    return net, stage


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
@pytest.mark.parametrize("train_stage, changed", [
    (lambda net, stage: pretrain.train_first_layer(net, stage, "S"), {"E", "b1"}),
    (lambda net, stage: pretrain.train_first_layer(net, stage, "U"), {"E", "b1"}),
    (lambda net, stage: pretrain.train_supervised_layer(net, stage, 2), {"W2", "b2"}),
    (lambda net, stage: pretrain.train_dense_layer(net, stage, 3), {"W3", "b3"}),
    (pretrain.train_output_layer, {"V", "c"}),
])
def test_each_stage_changes_only_its_parameters(feedback, train_stage, changed):
    net, stage = setup(feedback)
    before = {k: v.copy() for k, v in net.p.items()}
    losses = train_stage(net, stage)
    assert len(losses) == stage.epochs and all(np.isfinite(losses))
    for key, value in net.p.items():
        if key in changed:
            assert not np.array_equal(value, before[key]), key
        else:
            np.testing.assert_array_equal(value, before[key], err_msg=key)


@pytest.mark.parametrize("variant, calls", [
    ("BP", []), ("U+U", [("first", "U"), ("dense", 2), ("dense", 3)]),
    ("S+S", [("first", "S"), ("supervised", 2), ("supervised", 3)]),
    ("S+U+S", [("first", "S"), ("dense", 2), ("dense", 3), ("output",)])])
def test_each_variant_runs_its_stages_in_order(monkeypatch, variant, calls):
    # the stages' names (test_plan) are not what runs: a Y of U must run the dense
    # auto-encoder on each higher layer, S the supervised stage
    ran = []
    for name, kind in (("train_first_layer", "first"), ("train_dense_layer", "dense"),
                       ("train_supervised_layer", "supervised"), ("train_output_layer", "output")):
        monkeypatch.setattr(pretrain, name, lambda net, stage, *arg, kind=kind:
                            ran.append((kind, *arg)) or [0.0])
    pretrain.pretrain(*setup("explicit"), variant)
    assert ran == calls


def test_first_layer_s_targets_the_clean_row_and_u_the_corrupted_input(monkeypatch):
    net, stage = setup("implicit")
    objectives, real = [], pretrain.Network
    monkeypatch.setattr(pretrain, "Network", lambda layout, ops, objective, *args, **kwargs:
                        objectives.append(objective) or real(layout, ops, objective, *args,
                                                             **kwargs))
    for kind in ("S", "U"):
        pretrain.train_first_layer(net, replace(stage, epochs=1), kind)
    assert [o.target_corrupted for o in objectives] == [False, True]
    assert replace(objectives[1], target_corrupted=False) == objectives[0] == net.objective


def test_pretraining_resets_adam_for_fine_tuning():
    net, stage = setup("explicit")
    losses = pretrain.pretrain(net, stage, "S+U+S")
    assert list(losses) == ["layer 1 S", "layer 2 U", "layer 3 U", "output S"]
    assert net.steps == 0 and not net.m.any() and not net.v.any()


def test_dense_stage_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    layout = Layout({"W": (3, 5), "b": (3,), "Wd": (5, 3), "bd": (5,)})
    ae = Parameters(layout, ref, layout.xavier_init(rng) + rng.normal(0, 0.3, layout.size),
                    dtype=np.float64)
    a_in = np.tanh(rng.normal(0, 1, (4, 5)))
    row_weight = np.array([0.25, 0.25, 0.5, 0.0])

    def loss():
        ae.grads.fill(0)
        return float(pretrain.reconstruction_loss_and_grad(ae, a_in, row_weight) @ row_weight)

    # the loss itself, in float64 from the parameters: each row's mean over its 5 units of
    # (tanh(tanh(a W^T + b) Wd^T + bd) - a)^2
    p = ae.p
    r = np.tanh(np.tanh(a_in @ p["W"].T + p["b"]) @ p["Wd"].T + p["bd"])
    np.testing.assert_allclose(pretrain.reconstruction_loss_and_grad(ae, a_in, row_weight),
                               ((r - a_in) ** 2).mean(axis=1), rtol=1e-12)
    loss()
    analytic = ae.grads.copy()
    numeric = np.empty_like(analytic)
    for i in range(layout.size):
        saved = ae.params[i]
        ae.params[i] = saved + 1e-6
        up = loss()
        ae.params[i] = saved - 1e-6
        numeric[i] = (up - loss()) / 2e-6
        ae.params[i] = saved
    assert np.abs(analytic).max() > 1e-3
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-9)


def test_s_u_s_starts_fine_tuning_lower_than_bp(tmp_path):
    first_loss = {}
    for variant in ("BP", "S+U+S"):
        out = tmp_path / variant
        assert train.main(["--hidden", "64,64", "--epochs", "1", "--valid-ratio", "0",
                           "--pretrain", variant,
                           *["--pretrain-epochs", "3"] * (variant != "BP"),
                           "--device", "cpu", "--out", str(out)]) == 0
        history = json.loads((out / "metrics.json").read_text())["history"]
        first_loss[variant] = next(h["loss"] for h in history if h["epoch"] == 1)
    assert first_loss["S+U+S"] < 0.8 * first_loss["BP"]
