"""python -m ncae_cuda.check: every op of each backend passes against the reference, and an op
that is wrong, not deterministic, or raises is reported as failed, with its reason, and fails the
exit status."""
import json
import warnings

import numpy as np
import pytest

from ncae_cuda import ops
from ncae_cuda.commands import check
from ncae_cuda.ops import conformance, cpu

OPS = ("cut_batch", "cut_rows", "dropout_keep", "gather_forward", "scatter_backward",
       "sparse_output_forward", "sparse_output_backward", "reweighted_error",
       "multinomial_error", "gemm", "gemm, tf32",
       "bias_tanh", "bias_backward", "adam", "step_loss", "rank_heldout", "topk")


def results(backend) -> dict:
    with backend.session():
        return {r.op: r for r in map(conformance.check_op, conformance.op_cases(backend))}


def test_every_op_passes(backend):
    found = results(backend)
    assert tuple(found) == OPS
    failed = {op: r.reason for op, r in found.items() if not r.passed}
    assert not failed
    assert all(r.error <= r.tolerance for r in found.values())


def _planted(monkeypatch, op: str, wrap) -> dict:
    """The check on the cpu backend with `op` replaced by wrap(the real op)."""
    monkeypatch.setattr(cpu, op, wrap(getattr(cpu, op)))
    return results(cpu)


def test_a_wrong_output_fails_its_op_only(monkeypatch):
    def off_by_a_little(real):
        def op(a1, batch, E, b1, scale):
            real(a1, batch, E, b1, scale)
            a1[3, 7] += 1e-3                      # one element, 50x the tolerance
        return op
    found = _planted(monkeypatch, "gather_forward", off_by_a_little)
    bad = found["gather_forward"]
    assert not bad.passed and bad.error > 10 * bad.tolerance
    assert bad.reason.startswith("a1: error") and "(3, 7)" in bad.reason
    assert all(r.passed for op, r in found.items() if op != "gather_forward")


def test_a_wrong_count_fails_an_exact_op(monkeypatch):
    def one_more(real):
        def op(ranks, *args):
            real(ranks, *args)
            ranks[0] += 1
        return op
    bad = _planted(monkeypatch, "rank_heldout", one_more)["rank_heldout"]
    assert not bad.passed and bad.error == 1 and bad.tolerance == 0
    assert "1 of 20 differ, first at (0,)" in bad.reason


def test_an_op_that_changes_between_runs_fails(monkeypatch):
    runs = iter(range(100))

    def drifting(real):
        def op(dE, dpre1, batch, scale):
            real(dE, dpre1, batch, scale)
            dE[0, 0] += 1e-5 * next(runs)         # inside the tolerance, yet not the same
        return op
    bad = _planted(monkeypatch, "scatter_backward", drifting)["scatter_backward"]
    assert not bad.passed and "not bit-identical on a rerun (1 elements differ)" in bad.reason


def test_an_op_that_raises_fails(monkeypatch):
    def broken(real):
        def op(*args):
            raise RuntimeError("launch failed")
        return op
    bad = _planted(monkeypatch, "topk", broken)["topk"]
    assert not bad.passed and bad.reason == "raised RuntimeError: launch failed"


def test_compare_hand_cases():
    f = np.float64
    assert (conformance.compare(np.float32([1, 2]), f([1, 2 + 1e-6]), False)[0]
            == pytest.approx(5e-7))
    # relative to the largest expected value, or 1 where all are smaller
    assert (conformance.compare(np.float32([100.0]), f([100.01]), False)[0]
            == pytest.approx(0.01 / 100.01))
    assert conformance.compare(np.float32([0.0]), f([1e-3]), False)[0] == pytest.approx(1e-3)
    # equal infinities and NaN differ by nothing, said without a RuntimeWarning (inf - inf);
    # a NaN where a number belongs is infinite
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert conformance.compare(f([-np.inf, np.nan]), f([-np.inf, np.nan]), False)[0] == 0
    assert conformance.compare(f([np.nan]), f([0.0]), False)[0] == np.inf
    assert conformance.compare(f([1.0, 2.0]), f([1.0, 2.0 + 1e-9]), True)[:2] == (1.0, 0.0)
    assert conformance.compare(np.zeros(3), np.zeros(4), False)[0] == np.inf


def test_command_on_the_cpu_passes_with_the_floor(tmp_path, capsys):
    assert check.main(["--device", "cpu", "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "device: cpu:" in out and "numba" in out
    assert "floor of an epoch here:" in out
    assert out.rstrip().endswith(f"all {len(OPS)} ops agree with the reference; training runs")
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["failures"] == [] and len(report["ops"]) == len(OPS)
    assert len(report["training"]["seconds"]) == 2 and report["training"]["floor"] > 0


def test_command_without_training_does_not_say_it_trained(capsys):
    # before, --no-train's last line said "all 17 ops agree with the reference; training runs"
    assert check.main(["--device", "cpu", "--no-train"]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last == f"all {len(OPS)} ops agree with the reference; training not run (--no-train)"


def test_command_reports_a_planted_failure(monkeypatch, tmp_path, capsys):
    real = cpu.sparse_output_forward

    def biased(yhat, *args, **kwargs):
        real(yhat, *args, **kwargs)
        yhat += 0.01
    monkeypatch.setattr(cpu, "sparse_output_forward", biased)
    code = check.main(["--device", "cpu", "--no-train", "--json", str(tmp_path / "c.json")])
    out = capsys.readouterr().out
    assert code == 1
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and failed[0].startswith("FAILED: sparse_output_forward: yhat: error")
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["failures"] == [failed[0].removeprefix("FAILED: ")]


@pytest.mark.skipif(ops.HAS_CUDA, reason="a GPU is there")
def test_command_without_a_gpu_says_why(capsys):
    assert check.main(["--device", "gpu"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: gpu: --device gpu needs a CUDA GPU" in out and "Traceback" not in out
