"""The kernel versions kept side by side in dev/cuda run, under the emulator, and each matches
the reference (the harness exits 1 where one does not)."""
import pytest

from ncae_cuda import ops
from ncae_cuda.ops.emulator import CXX

from dev.cuda import run


@pytest.mark.skipif(CXX is None, reason="no g++")
@pytest.mark.parametrize("op", run.OPS)
def test_every_version_matches_the_reference(op, capsys):
    assert run.main([op, "--device", "emulated"]) == 0
    out = capsys.readouterr().out
    assert "1: " in out and "2: " in out and "3: " in out and "(in use)" in out


def no_step(backend):
    return lambda params, batch, host, m, v, grads, counter, state: None


def weight_decay_negated(backend):
    settings = {**run.ADAM, "weight_decay": -run.ADAM["weight_decay"]}
    return lambda params, batch, host, m, v, grads, counter, state: backend.adam(
        params, m, v, grads, state, **settings)


@pytest.mark.skipif(CXX is None, reason="no g++")
@pytest.mark.parametrize("wrong", [no_step, weight_decay_negated])
def test_a_version_off_the_reference_fails_the_harness(wrong, monkeypatch, capsys):
    # the version in use, then a wrong one: an Adam that takes no step, or one whose weight
    # decay pulls the wrong way (both passed while the parameters, not the step, were compared)
    real = run.versions
    monkeypatch.setattr(run, "versions", lambda op, backend, *args: [
        real(op, backend, *args)[2], ("9: wrong", wrong(backend))])
    assert run.main(["adam", "--device", "emulated"]) == 1
    assert "9: wrong: does not match the reference" in capsys.readouterr().err


def whole_float4s_only(backend):
    """Adam over the whole float4s alone: a float4 version that drops its partial vectors."""
    def step(params, batch, host, m, v, grads, counter, state):
        head, tail = run.partial_float4s(params)
        whole = slice(head, len(params) - tail)
        backend.adam(params[whole], m[whole], v[whole], grads[whole], state, *run.ADAM.values())
    return step


@pytest.mark.skipif(CXX is None, reason="no g++")
def test_adams_buffers_end_in_partial_float4s_that_a_version_must_step(monkeypatch, capsys):
    """Before, the buffers began and ended on whole float4s, so a float4 version that left
    out the elements before its first and after its last whole float4 passed the check."""
    assert run.main(["adam", "--device", "emulated"]) == 0
    out = capsys.readouterr().out
    assert "3 of them before the first whole float4 and 3 after the last" in out, out
    real = run.versions
    monkeypatch.setattr(run, "versions", lambda op, backend, *args: [
        real(op, backend, *args)[2], ("9: whole float4s only", whole_float4s_only(backend))])
    assert run.main(["adam", "--device", "emulated"]) == 1
    assert "9: whole float4s only: does not match the reference" in capsys.readouterr().err


@pytest.mark.skipif(ops.HAS_CUDA, reason="a GPU is there")
def test_a_gpu_not_there_is_refused_in_a_line(capsys):
    with pytest.raises(SystemExit) as refused:
        run.main(["adam", "--device", "gpu"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "error: --device gpu needs a CUDA GPU" in err, err
