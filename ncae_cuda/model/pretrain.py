"""Greedy layer-wise pre-training: the paper's three stages, for any depth.

A variant "X+Y[+S]" names what trains each part of the network before fine-tuning:
  X, hidden layer 1 with a temporary output layer:
      S  supervised SR: the task loss against the clean row, from the corrupted input;
      U  unsupervised: reconstructs the corrupted input itself;
  Y, each further hidden layer l in turn, the layers below frozen:
      U  unsupervised DR: a temporary tanh decoder reconstructs layer l-1's activations
         (mean squared error over its K units);
      S  supervised: a temporary output layer and the task loss;
  +S, the output layer V, c with every hidden layer frozen (stage 3).
BP is no pre-training. Every stage runs the network's own forward and backward (a Network over
the layers in play, with its own step memory, or tanh_layer_backward for the decoder), trains
only its own parameters, and copies them into the network; Adam's state is reset before
fine-tuning.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..ops.common import CSR
from ..ops.layout import AdamConfig, Layout, NCAELayout, Parameters
from ..ops.memory import StepMemory
from ..ops.plan import Planner
from . import loop
from .config import VARIANTS
from .network import Network, tanh_layer_backward

EPOCH_KEYS = 1_000_000    # stage s, epoch e shuffle and drop out as epoch s * EPOCH_KEYS + e


@dataclass(frozen=True)
class Stages:
    first: str | None      # 'S' or 'U' for hidden layer 1; None for BP
    higher: str | None     # 'S' or 'U' for hidden layers 2..L
    top: bool              # stage 3: the output layer alone


def stages(variant: str) -> Stages:
    if variant not in VARIANTS:
        raise ValueError(f"pre-training variant must be one of {', '.join(VARIANTS)}")
    if variant == "BP":
        return Stages(None, None, False)
    parts = variant.split("+")
    return Stages(parts[0], parts[1], len(parts) == 3)


@dataclass
class Stage:
    """What a stage needs beside the network: its data, its batches, and its optimizer."""
    csr: CSR
    planner: Planner
    adam: AdamConfig
    epochs: int
    verbose: bool = True              # print one line per epoch

    def train(self, step, memory: StepMemory, key: int, label: str) -> list[float]:
        """`epochs` epochs of step(batch, scale) -> row_loss in `memory`; returns their
        losses."""
        losses = []
        for epoch in range(1, self.epochs + 1):
            plan = self.planner.plan(key * EPOCH_KEYS + epoch)
            losses.append(loop.run_epoch(step, memory, self.csr, plan, f"{label} {epoch}"))
            if self.verbose:
                print(f"pretrain {label} epoch {epoch:3d} | loss {losses[-1]:.4f}", flush=True)
        return losses


def pretrain(net: Network, stage: Stage, variant: str) -> dict[str, list[float]]:
    """Pre-train `net` in place by `variant`; returns each stage's losses per epoch."""
    steps = stages(variant)
    losses = {}
    if steps.first:
        losses[f"layer 1 {steps.first}"] = train_first_layer(net, stage, steps.first)
    for layer in range(2, net.layout.n_layers + 1) if steps.higher else ():
        train = train_dense_layer if steps.higher == "U" else train_supervised_layer
        losses[f"layer {layer} {steps.higher}"] = train(net, stage, layer)
    if steps.top:
        losses["output S"] = train_output_layer(net, stage)
    net.reset_optimizer()
    return losses


def _temporary_network(net: Network, stage: Stage, depth: int, objective) -> Network:
    """A network of net's first `depth` hidden layers (copied) and a fresh output layer."""
    layout = NCAELayout(net.layout.n_cols, net.layout.hidden[:depth], net.layout.columns)
    params = layout.xavier_init(np.random.default_rng([stage.planner.schedule.seed, depth]))
    trained = net.layout.views(net.ops.to_host(net.params))
    for key, view in layout.views(params).items():
        if key not in ("V", "c"):
            view[:] = trained[key]
    weights = None if net.col_weights is None else net.ops.to_host(net.col_weights)
    temp = Network(layout, net.ops, objective, params, weights, comm=net.comm, tf32=net.tf32)
    temp.prepare(stage.planner.geometry)
    return temp


def _copy_back(net: Network, temp: Parameters, keys: dict[str, str]) -> None:
    for theirs, ours in keys.items():
        net.p[ours][...] = temp.p[theirs]


def train_first_layer(net: Network, stage: Stage, kind: str) -> list[float]:
    """Hidden layer 1 with a temporary output layer: S against the clean row, U against the
    corrupted input. Changes only E and b1 of net."""
    objective = net.objective if kind == "S" else replace(net.objective, target_corrupted=True)
    temp = _temporary_network(net, stage, 1, objective)
    losses = stage.train(lambda b, s: temp.train_step(b, s, stage.adam), temp.memory, 1,
                         f"layer 1 {kind}")
    _copy_back(net, temp, {"E": "E", "b1": "b1"})
    return losses


def train_supervised_layer(net: Network, stage: Stage, layer: int) -> list[float]:
    """Hidden layer `layer` and a temporary output layer on the task loss, the layers below
    frozen. Changes only W_layer and b_layer of net."""
    temp = _temporary_network(net, stage, layer, net.objective)
    first = f"W{layer}"
    losses = stage.train(lambda b, s: temp.train_step(b, s, stage.adam, first), temp.memory,
                         layer, f"layer {layer} S")
    _copy_back(net, temp, {first: first, f"b{layer}": f"b{layer}"})
    return losses


def train_dense_layer(net: Network, stage: Stage, layer: int) -> list[float]:
    """Hidden layer `layer` as the encoder of a tanh auto-encoder of layer layer-1's
    activations (from the corrupted input through the frozen layers below). Changes only
    W_layer and b_layer of net."""
    k_in, k_out = net.layout.hidden[layer - 2], net.layout.hidden[layer - 1]
    layout = Layout({"W": (k_out, k_in), "b": (k_out,), "Wd": (k_in, k_out), "bd": (k_in,)})
    params = layout.xavier_init(np.random.default_rng([stage.planner.schedule.seed, layer]))
    views = layout.views(params)
    views["W"][:] = net.ops.to_host(net.p[f"W{layer}"])
    views["b"][:] = net.ops.to_host(net.p[f"b{layer}"])
    ae = Parameters(layout, net.ops, params)

    def step(batch, scale):
        a_in = net.hidden_forward(batch, scale, net.memory.acts[:layer - 1])[-1]
        row_loss = reconstruction_loss_and_grad(ae, a_in, batch.row_weight)   # (B,)
        ae.adam_step(stage.adam)
        return row_loss

    losses = stage.train(step, net.memory, layer, f"layer {layer} U")
    _copy_back(net, ae, {"W": f"W{layer}", "b": f"b{layer}"})
    return losses


def reconstruction_loss_and_grad(ae: Parameters, a_in, row_weight):
    """row_loss (B,) = mean over the K_in units of (tanh(tanh(a W^T + b) Wd^T + bd) - a)^2;
    the gradient of sum_b row_weight[b] * row_loss[b] accumulates into ae's grads."""
    p, d = ae.p, ae.d
    h = ae.ops.xp.tanh(a_in @ p["W"].T + p["b"])                      # (B, K_out)
    r = ae.ops.xp.tanh(h @ p["Wd"].T + p["bd"])                       # (B, K_in)
    err = r - a_in
    k_in = a_in.shape[1]
    dr = row_weight[:, None] * (2.0 / k_in) * err                     # (B, K_in)
    dh = tanh_layer_backward(d["Wd"], d["bd"], dr, r, h, p["Wd"])
    tanh_layer_backward(d["W"], d["b"], dh, h, a_in, p["W"], input_grad=False)
    return (err * err).sum(axis=1) / k_in


def train_output_layer(net: Network, stage: Stage) -> list[float]:
    """Stage 3: V and c on the task loss, every hidden layer frozen."""
    key = net.layout.n_layers + 1
    return stage.train(lambda b, s: net.train_step(b, s, stage.adam, "V"), net.memory, key,
                       "output S")
