"""bench.peer_torch: the PyTorch peer computes ncae_cuda's exact loss, gradients and Adam steps,
the benchmark writes its report, and both models reach the same test RMSE. Skipped without
the [bench] extra (PyTorch)."""
import json
import math

import numpy as np
import pytest
from helpers import missing_extra

pytestmark = pytest.mark.extra("bench")
torch = pytest.importorskip("torch", reason=missing_extra("bench"))

from helpers import cut_first, random_matrix  # noqa: E402

from bench import peer_torch, report  # noqa: E402
from ncae_cuda import ops  # noqa: E402
from ncae_cuda.model.network import Network, Objective  # noqa: E402
from ncae_cuda.ops import reference as ref  # noqa: E402
from ncae_cuda.ops.common import CSR  # noqa: E402
from ncae_cuda.ops.floors import Ceilings  # noqa: E402
from ncae_cuda.ops.layout import AdamConfig, NCAELayout  # noqa: E402
from ncae_cuda.ops.plan import Planner, Schedule  # noqa: E402

OBJECTIVES = {"explicit": Objective.explicit(1.0, 5.0, alpha=1.0, beta=0.5),
              "implicit": Objective.implicit()}


def torch_params(model) -> dict:
    """The peer's parameters under ncae_cuda's layout names."""
    named = {"E": model.embed.weight, "b1": model.b1, "V": model.out.weight, "c": model.out.bias}
    for layer, linear in enumerate(model.dense, start=2):
        named[f"W{layer}"], named[f"b{layer}"] = linear.weight, linear.bias
    return named


@pytest.fixture
def float64_default():
    """torch's default dtype float64 (the peer's scalars and new tensors follow it)."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(saved)


@pytest.mark.parametrize("feedback", ["explicit", "implicit"])
def test_peer_steps_match_ncae(feedback, float64_default):
    """Same parameters, rows and dropout mask: the same loss, gradients and Adam updates
    (float64 on both sides, so any difference is a difference in the math)."""
    rng = np.random.default_rng(0)
    hidden, q = (7, 5), 0.5
    m = random_matrix(rng, 40, 9, density=0.3)
    layout = NCAELayout(9, hidden)
    col_weights = rng.random(9) if feedback == "implicit" else None
    net = Network(layout, ref, OBJECTIVES[feedback], layout.xavier_init(rng), col_weights,
                  dtype=np.float64)
    model = peer_torch.TorchNCAE(9, hidden)
    with torch.no_grad():
        for key, p in torch_params(model).items():
            p.copy_(torch.as_tensor(net.p[key]))
    csr = peer_torch.DeviceCSR(m, torch.device("cpu"))
    csr.vals = csr.vals.double()
    weights = None if col_weights is None else torch.as_tensor(col_weights)
    adam = AdamConfig(lr=1e-2, weight_decay=1e-3)
    optimizer = torch.optim.Adam(model.parameters(), lr=adam.lr, weight_decay=adam.weight_decay)
    ours = CSR.from_scipy(ref, m)
    planner = Planner(ours, np.flatnonzero(np.diff(m.indptr)).astype(np.int32),
                      Schedule(0, 16, q))
    net.prepare(planner.geometry)
    for step in range(3):
        plan = planner.plan(step)                  # its first step: 16 rows, dropout by hash
        batch = cut_first(ref, net.memory, ours, plan)
        expected = float(net.loss_and_grad(batch, plan.scale) @ batch.row_weight)
        grads = {key: g.copy() for key, g in net.d.items()}
        net.adam_step(adam)

        optimizer.zero_grad()
        loss = peer_torch.batch_loss(model, csr.batch(plan.order[:16]),
                                     torch.as_tensor(batch.keep.astype(bool)), q,
                                     OBJECTIVES[feedback], weights)
        loss.backward()
        assert loss.item() == pytest.approx(expected, rel=1e-12)
        for key, p in torch_params(model).items():
            np.testing.assert_allclose(p.grad.numpy(), grads[key], rtol=1e-9, atol=1e-12)
        optimizer.step()
    for key, p in torch_params(model).items():
        np.testing.assert_allclose(p.detach().numpy(), net.p[key], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("feedback, metric", [("explicit", "rmse"), ("implicit", "hr@10")])
def test_quick_run_reports_both_models(tmp_path, feedback, metric):
    assert peer_torch.main(["--quick", "--feedback", feedback, "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "peer_torch.json").read_text())
    assert len(result["models"]) == 2 and "ncae_cuda" in result["models"]
    for model in result["models"].values():
        assert len(model["seconds"]) == 2 and min(model["seconds"]) > 0
        assert all(math.isfinite(v) for v in model["test"].values()) and metric in model["test"]
        assert model["floor_multiple"] > 0
    assert result["ratio_torch_over_ncae"] > 0 and result["floor"]["seconds"] > 0
    assert "unfinished" not in result
    assert result["config"]["feedback"] == feedback and result["commit"]
    assert "| ncae_cuda" in (tmp_path / "peer_torch.md").read_text()
    # a smoke test's, as bench.report and bench.floors read it (before, unsaid)
    assert result["quick"] is True


def test_quick_leaves_the_flags_given(tmp_path, monkeypatch, capsys):
    """--quick's data set, hidden widths and epochs only where not given (before, they
    replaced those given, and --epochs 0 with them)."""
    def reached(args):
        raise RuntimeError(args.dataset, args.hidden, args.epochs)
    monkeypatch.setattr(peer_torch, "trainer_argv", reached)
    with pytest.raises(RuntimeError) as got:
        peer_torch.main(["--quick", "--hidden", "8", "--epochs", "3", "--out", str(tmp_path)])
    assert got.value.args == ("synthetic-tiny", "8", 3)
    with pytest.raises(SystemExit):
        peer_torch.main(["--quick", "--epochs", "0", "--out", str(tmp_path)])
    assert "argument --epochs: expected an integer >= 1, got '0'" in capsys.readouterr().err


@pytest.mark.skipif(ops.HAS_CUDA, reason="a GPU is there")
def test_a_gpu_not_there_is_refused_in_a_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        peer_torch.main(["--quick", "--device", "gpu", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "error: --device gpu needs a CUDA GPU" in err, err


@pytest.mark.parametrize("flags, message", [
    # before, a traceback after --out was made
    (["--dataset", "ml-100k", "--data-dir", "none"], "error: ml-100k: u.data is in neither"),
    # before, run: the median "of epochs 2..E" was the first epoch's, start-up and all
    (["--epochs", "1"], "error: --epochs must be >= 2, the first being start-up; got 1"),
])
def test_a_users_mistake_is_refused_in_a_line_before_the_out_folder(tmp_path, capsys, flags,
                                                                     message):
    flags = [str(tmp_path / f) if f == "none" else f for f in flags]
    with pytest.raises(SystemExit) as refused:
        peer_torch.main(["--quick", *flags, "--out", str(tmp_path / "made")])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "made").exists()


def test_a_run_stopped_in_the_peer_keeps_ncae_cuda_and_the_report_dashes_the_rest(
        tmp_path, monkeypatch):
    """A time limit that stops the command while torch trains (its signal: KeyboardInterrupt)
    leaves both files with ncae_cuda's epochs and "1 of 2 models trained", and no ratio or
    agreement; bench.report reads such a file with dashes where torch's figures would be.
    Before, the files came only at the end, and the device's window lost both models."""
    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(peer_torch, "run_torch", stopped)
    with pytest.raises(SystemExit) as ended:
        peer_torch.main(["--quick", "--out", str(tmp_path)])
    assert ended.value.code == 130                      # a Ctrl-C's, said in a line
    result = json.loads((tmp_path / "peer_torch.json").read_text())
    assert result["unfinished"] == "1 of 2 models trained"
    assert list(result["models"]) == ["ncae_cuda"] and "agreement" not in result
    ours = result["models"]["ncae_cuda"]
    assert len(ours["seconds"]) == 2 and ours["median_seconds"] == ours["seconds"][1]
    text = (tmp_path / "peer_torch.md").read_text()
    assert text.startswith("> unfinished: 1 of 2 models trained")
    assert "| ncae_cuda" in text and "| torch" not in text and "torch / ncae_cuda" not in text
    monkeypatch.setattr(report, "_load", lambda name: [
        (report.ROOT / "x" / name, result)] if name == "peer_torch.json" else [])
    row = report.peer_table()[-2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:7] == [f"{ours['median_seconds']:.3g}", "-", "-",
                          f"rmse {ours['test']['rmse']:.4f}", "-"]
    # nor a README speed line from half a comparison, though at the headline's shape
    result["config"].update(report.HEADLINE)
    assert "MovieLens 10M" not in " ".join(report.speed_lines())


def test_both_models_reach_the_same_rmse(tmp_path, monkeypatch):
    # 10 epochs: past the first few, where the test RMSE still falls fast and two different
    # shuffles and dropout draws put the models furthest apart. The floor is checked above;
    # measuring the machine again would cost seconds.
    monkeypatch.setattr(peer_torch, "ceilings", lambda device, repeats: Ceilings(device, 1e10,
                                                                                   1e11))
    assert peer_torch.main(["--dataset", "synthetic", "--feedback", "explicit", "--hidden", "32",
                            "--epochs", "10", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "peer_torch.json").read_text())
    assert result["agreement"]["agree"], result["agreement"]["detail"]
