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


@pytest.mark.skipif(ops.HAS_CUDA, reason="a GPU is there")
def test_a_gpu_not_there_is_refused_in_a_line(capsys):
    with pytest.raises(SystemExit) as refused:
        run.main(["adam", "--device", "gpu"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "error: --device gpu needs a CUDA GPU" in err, err
