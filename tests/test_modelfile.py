"""The model and checkpoint file format (ncae_cuda.model.modelfile): every damaged byte is refused
with the one error, never a traceback; a write that fails leaves nothing behind and says why."""
import errno
import io
import os
import re
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from helpers import read_only

from ncae_cuda import NCAE
from ncae_cuda.commands import train
from ncae_cuda.data import atomic_file
from ncae_cuda.data.interactions import DataError
from ncae_cuda.model import modelfile
from ncae_cuda.runs.rundir import FILES, RunDirectory

MASKS = (0xFF, *(1 << bit for bit in range(8)))    # a byte's every bit, or one of them


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """{kind: path} a model and a checkpoint of one tiny fit (30 items, hidden 6), each a few
    KB. The checkpoint's state entry is larger than the 4 KB zipfile reads at once, so its
    array header is read before the entry's CRC is checked, as in any real model."""
    rng = np.random.default_rng(0)
    dense = (rng.random((12, 30)) < 0.3).astype(np.float32)
    folder = tmp_path_factory.mktemp("files")
    model = NCAE(feedback="implicit", hidden=(6,), batch_size=8, device="cpu")
    model.fit(sp.csr_matrix(dense), epochs=1, checkpoint=folder / "checkpoint.npz",
              verbose=False)
    model.save(folder / "model.npz")
    return {"model": folder / "model.npz", "checkpoint": folder / "checkpoint.npz"}


@pytest.mark.filterwarnings("error")          # no line on stderr but the error's own
@pytest.mark.parametrize("kind", ["model", "checkpoint"])
def test_every_damaged_byte_is_refused_with_the_one_error(files, kind, tmp_path):
    # Before, 4 in 3,000 flips gave tracebacks: NotImplementedError (a zip entry's flags or
    # compression method), RuntimeError (its encryption bit), tokenize.TokenError (a header);
    # and numpy took some damaged array headers for Python 2's, with a warning.
    good = files[kind].read_bytes()
    meta, arrays = modelfile.read(files[kind], kind)
    bad = tmp_path / f"{kind}.npz"
    loaded = refused = 0
    for at in range(len(good)):
        mask = MASKS[at % len(MASKS)]
        damaged = bytearray(good)
        damaged[at] ^= mask
        bad.write_bytes(damaged)
        try:
            got_meta, got = modelfile.read(bad, kind)
        except DataError as e:
            assert type(e) is DataError and str(e).startswith(f"{bad}: ") \
                and "\n" not in str(e), (at, mask, str(e))
            refused += 1
            continue
        except BaseException as e:
            raise AssertionError(f"byte {at} ^ {mask:#x}: {type(e).__name__}: {e}") from e
        # a byte nothing reads (a zip entry's time, say): the same file
        assert got_meta == meta and got.keys() == arrays.keys(), (at, mask)
        for name, a in arrays.items():
            assert got[name].dtype == a.dtype and np.array_equal(got[name], a), (at, mask)
        loaded += 1
    assert refused > 0.8 * len(good) and loaded > 0


@pytest.mark.parametrize("kind", ["model", "checkpoint"])
def test_a_damaged_file_says_what_to_do(files, kind, tmp_path):
    cut = tmp_path / "cut.npz"
    cut.write_bytes(files[kind].read_bytes()[:-100])
    todo = "train it again" if kind == "model" else "start over instead of resuming"
    with pytest.raises(DataError, match=rf"^{re.escape(str(cut))}: a damaged ncae_cuda {kind} "
                                        rf"file: truncated or unreadable \(.*\): {todo}"):
        modelfile.read(cut, kind)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("header, message", [
    # before, numpy allocated 931 GiB (MemoryError) before reading the entry's 16 bytes
    (dict(descr="<f4", shape=(250_000_000_000,)), r"params\.npy: its header says "
     r"\(250000000000,\) float32, 1000000000000 bytes; it holds 16\)"),
    # f flipped to a: numpy's deprecated alias of S, and a warning
    (dict(descr="<a4", shape=(4,)), r"not an array header of numbers or text: \{'descr': '<a4'"),
    (dict(descr="|O", shape=(2,)), r"not an array header of numbers or text: \{'descr': '\|O'"),
    (dict(descr="<f3", shape=(4,)), r"data type '<f3' not understood"),
])
def test_an_array_header_is_checked_before_its_array_is_made(tmp_path, header, message):
    # an entry whose CRC and sizes agree with it, as a zip tool would write it: only its array
    # header is wrong
    path = tmp_path / "crafted.npz"
    modelfile.write(path, "model", {}, {"params": np.zeros(4, np.float32)})
    with zipfile.ZipFile(path) as z:
        entries = {info.filename: z.read(info) for info in z.infolist()}
    npy = io.BytesIO()
    np.lib.format.write_array_header_1_0(npy, {"fortran_order": False, **header})
    entries["params.npy"] = npy.getvalue() + np.zeros(4, np.float32).tobytes()
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    with pytest.raises(DataError, match=r"a damaged ncae_cuda model file: truncated or "
                                        r"unreadable \(ValueError: .*" + message):
        modelfile.read(path, "model")


@pytest.mark.parametrize("text", [b"user,item,rating\n1,2,3\n", b"", b"\x93NUMPY"])
def test_a_file_of_another_kind_is_not_a_model_file(tmp_path, text):
    # Before, a CSV was "not a readable ncae_cuda model file, truncated or damaged (ValueError:
    # This file contains pickled (object) data. If you trust the file you can load it unsafely
    # using the `allow_pickle=` keyword argument or `pickle.load()`.)"
    path = tmp_path / "ratings.csv"
    path.write_bytes(text)
    with pytest.raises(DataError) as e:
        NCAE.load(path, device="cpu")
    assert str(e.value) == f"{path}: not an ncae_cuda model file (no .npz archive)"


def test_a_folder_is_not_called_missing(tmp_path):
    # Before, NCAE.load("runs/demo") (a run folder, which the commands and load_model read as
    # its model.npz: test_contract) said "runs/demo: no such file" of a folder that is there
    with pytest.raises(DataError) as e:
        NCAE.load(tmp_path, device="cpu")
    assert str(e.value) == f"{tmp_path}: a folder, not an ncae_cuda model file"


@pytest.mark.parametrize("since", ["open", "replace"])
def test_a_write_to_a_read_only_folder_says_so(tmp_path, monkeypatch, since):
    # Before: OSError from removing the temporary file, a traceback.
    path = tmp_path / "out.csv"
    path.write_text("earlier\n")
    with monkeypatch.context() as m:
        read_only(m, since)
        with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: cannot write it "
                                            r"\(Read-only file system\)$"):
            atomic_file.atomic_write(path, lambda f: f.write(b"new\n"))
    assert path.read_text() == "earlier\n"


def test_opening_a_run_folder_removes_its_own_stale_temporaries_only(tmp_path):
    # Before, a kill during a checkpoint's write left checkpoint-select.npz.<hex>.tmp for good.
    folder = tmp_path / "run"
    run = RunDirectory(folder, {"epochs": 2})
    run.open()
    run.release()
    stale = [f"{name}.0123456789ab.tmp" for name in FILES] + [
        "checkpoint-select.rank1-of-2.g3.npz.a1b2c3d4e5f6.tmp"]
    others = ["notes.txt.0123456789ab.tmp",            # not one of the run's files
              "model.npz.0123456789.tmp",              # not our pattern: 10 digits
              "model.npz.0123456789xy.tmp", "model.npz.tmp", "model.npz.0123456789ab.tmp.bak"]
    for name in stale + others:
        (folder / name).write_text("x")
    RunDirectory(folder, {"epochs": 2}).open(resume=True)
    assert sorted(p.name for p in folder.iterdir()) == sorted([".lock", "run.json", *others])


def test_resuming_from_a_damaged_checkpoint_says_to_start_over(tmp_path, capsys):
    # Before: NotImplementedError: compressed patched data (flag bit 5), a traceback.
    out = tmp_path / "run"
    flags = ["--dataset", "synthetic-tiny", "--hidden", "8", "--batch-size", "16", "--device",
             "cpu", "--epochs", "1", "--out", str(out)]
    assert train.main(flags) == 0
    path = out / "checkpoint-select.npz"
    data = bytearray(path.read_bytes())
    data[data.index(b"PK\x01\x02") + 8] ^= 0x20     # the first entry's flags in the directory
    path.write_bytes(data)
    capsys.readouterr()
    assert train.main([*flags, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {path}: a damaged ncae_cuda checkpoint file: truncated or "
                   "unreadable (NotImplementedError: compressed patched data (flag bit 5)): "
                   "start over instead of resuming (--overwrite)\n"), err


def test_a_checkpoint_whose_parts_do_not_fit_together_is_refused(tmp_path):
    # Before: KeyError: 'state', a traceback.
    X = sp.random(12, 30, density=0.3, format="csr", random_state=0, dtype=np.float32)
    path = tmp_path / "checkpoint.npz"
    NCAE(hidden=(6,), device="cpu").fit(X, epochs=1, checkpoint=path, verbose=False)
    meta, _ = modelfile.read(path, "checkpoint")
    modelfile.write(path, "checkpoint", {k: v for k, v in meta.items()
                                         if k not in ("format", "version", "kind")}, {})
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: a damaged ncae_cuda "
                                        r"checkpoint file: its contents are inconsistent "
                                        r"\(KeyError: 'state'\): start over"):
        NCAE(hidden=(6,), device="cpu").fit(X, epochs=1, checkpoint=path, resume=True,
                                            verbose=False)


def test_a_file_that_cannot_be_opened_is_not_called_damaged(tmp_path, monkeypatch, files):
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    monkeypatch.setattr(modelfile, "open", refuse, raising=False)
    with pytest.raises(DataError, match=rf"^{re.escape(str(files['model']))}: cannot read it "
                                        r"\(Permission denied\)$"):
        modelfile.read(files["model"], "model")
