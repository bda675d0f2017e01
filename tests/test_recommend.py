"""python -m ncae_cuda.recommend: CSV from a saved model, equal to NCAE.recommend; bad input."""
import csv
import io
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import read_only

from ncae_cuda import NCAE
from ncae_cuda.commands import recommend
from ncae_cuda.data import datasets


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    data = datasets.load("synthetic-tiny")
    model = NCAE(feedback="implicit", hidden=(8,), batch_size=16, device="cpu")
    model.fit(data, epochs=2, verbose=False)
    path = tmp_path_factory.mktemp("model") / "model.npz"
    model.save(path)
    return model, path


def rows_of(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_equals_the_api(saved, capsys):
    model, path = saved
    users = model.user_ids[[0, 7, 3]]
    assert recommend.main([str(path), "--users", ",".join(map(str, users)), "-n", "4",
                           "--device", "cpu"]) == 0
    rows = rows_of(capsys.readouterr().out)
    ids, scores = model.recommend(users, n=4)
    assert [(int(r["user"]), int(r["rank"]), int(r["item"])) for r in rows] == [
        (u, rank, item) for u, row in zip(users, ids) for rank, item in enumerate(row, 1)]
    np.testing.assert_allclose([float(r["score"]) for r in rows], scores.ravel(), rtol=1e-5)


def test_all_users_to_a_file_with_candidates_and_seen(saved, tmp_path, capsys):
    model, path = saved
    items = model.item_ids[:5]
    (tmp_path / "items.txt").write_text("\n".join(map(str, items)) + "\n")
    out = tmp_path / "top.csv"
    assert recommend.main([str(path), "--all", "-n", "10", "--items-file",
                           str(tmp_path / "items.txt"), "--keep-seen", "--out", str(out)]) == 0
    rows = rows_of(out.read_text())
    assert len(rows) == 5 * len(model.user_ids)             # n capped at the 5 candidates
    assert {int(r["item"]) for r in rows} == set(items)
    assert "top-10 for" in capsys.readouterr().err


def test_a_users_file_with_a_byte_order_mark(saved, tmp_path, capsys):
    """An editor's BOM at the head of the file: its first id was unknown ('\\ufeff1')."""
    model, path = saved
    users = model.user_ids[[4, 2]]
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(map(str, users)) + "\n", encoding="utf-8-sig")
    assert recommend.main([str(path), "--users-file", str(ids), "-n", "3"]) == 0
    assert [int(r["user"]) for r in rows_of(capsys.readouterr().out)] == [users[0]] * 3 + [
        users[1]] * 3


def test_a_first_run_says_it_compiles_the_kernels():
    """The note is said once, before the first kernel of the CPU backend compiles; another
    module's compile says nothing."""
    from numba import njit

    from ncae_cuda.ops import cpu

    def elsewhere(x):
        return x + 1

    def backend_kernel(x):
        return x + 2
    backend_kernel.__module__ = cpu.__name__          # a kernel of the backend, not yet compiled
    said = []
    with cpu.compile_note(said.append):
        njit(elsewhere)(1)
        assert said == []
        njit(backend_kernel)(1)
        njit(backend_kernel)(2.0)
    assert said == [cpu.COMPILING]


def test_users_with_fewer_candidates_get_fewer_lines(saved, capsys):
    model, path = saved
    user = model.user_ids[0]
    n_items, seen = len(model.item_ids), model.data.seen[0].nnz
    assert recommend.main([str(path), "--users", str(user), "-n", str(n_items)]) == 0
    assert len(rows_of(capsys.readouterr().out)) == n_items - seen


@pytest.mark.parametrize("flags, message", [
    (["--users", "1,999999,abc"], "2 user id(s) unknown to the model: 999999, abc"),
    (["--all", "-n", "0"], "-n must be >= 1"),
    (["--users", ""], "--users: no user ids in it"),          # before: exit 0, a header only
    (["--users", " , "], "--users: no user ids in it"),
    # before: the empty id dropped unseen, the others answered (no model has an empty id)
    (["--users", "1,"], "--users '1,': id 2 of 2 is empty"),
    (["--users", "1,,2"], "--users '1,,2': id 2 of 3 is empty"),
    (["--users-file", "/dev/null"], "--users-file /dev/null: no user ids in it"),
    (["--users", "1", "--items-file", "/dev/null"],              # before: exit 0, a header
     "--items-file /dev/null: no item ids in it"),
    (["--users", "1", "--items-file", "blank.txt"], "--items-file blank.txt: no item ids in it"),
    (["--users-file", "nowhere.txt"], "nowhere.txt: No such file or directory"),
    (["--users-file", "latin1.txt"], "latin1.txt: not UTF-8 text (byte 2)"),
])
def test_bad_input_is_named(saved, tmp_path, monkeypatch, capsys, flags, message):
    _, path = saved
    monkeypatch.chdir(tmp_path)
    Path("latin1.txt").write_bytes("1\n\xe9\n".encode("latin-1"))      # é: one byte, not UTF-8
    Path("blank.txt").write_text("\n \n")
    try:
        code = recommend.main([str(path), *flags])
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    assert code == 2 and message in captured.err and captured.out == ""


@pytest.mark.parametrize("model_as, read, what", [
    ("file", "model", "the model file"), ("folder", "model", "the model file"),
    ("file", "users", "the --users-file"), ("file", "items", "the --items-file")])
def test_out_that_names_a_file_it_reads_is_refused(saved, tmp_path, capsys, model_as, read,
                                                    what):
    """Before, --out naming the model file itself (or through its run folder) replaced the
    trained model with the CSV, exit 0; an ids file, with the CSV of its ids."""
    model, path = saved
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "model.npz").write_bytes(path.read_bytes())
    files = {"model": folder / "model.npz", "users": tmp_path / "users.txt",
             "items": tmp_path / "items.txt"}
    files["users"].write_text(f"{model.user_ids[0]}\n")
    files["items"].write_text("\n".join(map(str, model.item_ids[:3])) + "\n")
    before = {name: file.read_bytes() for name, file in files.items()}
    with pytest.raises(SystemExit) as stopped:
        recommend.main([str(folder if model_as == "folder" else files["model"]),
                        "--users-file", str(files["users"]), "--items-file",
                        str(files["items"]), "--out", str(files[read])])
    assert stopped.value.code == 2 and capsys.readouterr().err == (
        f"python -m ncae_cuda.recommend: error: --out {files[read]}: {what} this command "
        "reads; name another file (see --help)\n")
    assert {name: file.read_bytes() for name, file in files.items()} == before


def test_a_truncated_model_is_refused(saved, tmp_path, capsys):
    _, path = saved
    cut = tmp_path / "cut.npz"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert recommend.main([str(cut), "--all"]) == 2
    assert "truncated" in capsys.readouterr().err


def test_a_csv_is_not_a_model_file(tmp_path, capsys):
    # Before: "... (ValueError: This file contains pickled (object) data. If you trust the file
    # you can load it unsafely using the `allow_pickle=` keyword argument or `pickle.load()`.)"
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("user,item,rating\n1,2,5\n")
    assert recommend.main([str(ratings), "--all"]) == 2
    assert capsys.readouterr().err == (f"error: {ratings}: not an ncae_cuda model file (no .npz "
                                       "archive)\n")


def test_out_on_a_read_only_file_system_is_one_line(saved, tmp_path, capsys, monkeypatch):
    # Before: OSError from removing the temporary file that could not be made, a traceback.
    _, path = saved
    out = tmp_path / "top.csv"
    read_only(monkeypatch)
    assert recommend.main([str(path), "--all", "--device", "cpu", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {out}: cannot write it (Read-only file system)\n"
    assert list(tmp_path.iterdir()) == []


def test_a_run_folder_stands_for_its_model(saved, capsys):
    # Before: "runs/demo: no such file".
    model, path = saved
    user = str(model.user_ids[0])
    assert recommend.main([str(path), "--users", user]) == 0
    by_file = capsys.readouterr().out
    assert recommend.main([str(path.parent), "--users", user]) == 0
    assert capsys.readouterr().out == by_file


def _limit_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)        # a write past the limit: EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no file size limit here")
def test_out_is_written_whole_or_not_at_all(saved, tmp_path):
    # Before, a full disk left a truncated CSV in place of the earlier file.
    _, path = saved
    out = tmp_path / "top.csv"
    out.write_text("earlier results\n")
    done = subprocess.run([sys.executable, "-m", "ncae_cuda.recommend", str(path), "--all",
                           "-n", "20", "--device", "cpu", "--out", str(out)],
                          capture_output=True, text=True, preexec_fn=_limit_file_size,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{out}: cannot write it (File too large)" in done.stderr
    assert out.read_text() == "earlier results\n"
    assert [p.name for p in tmp_path.iterdir()] == ["top.csv"]
    assert recommend.main([str(path), "--all", "-n", "20", "--out", str(out)]) == 0
    assert len(rows_of(out.read_text())) == 20 * 60


def fit_on_file(folder: Path, seen: dict) -> NCAE:
    """A model fit on a CSV file of the users' `seen` items ({user: [item, ...]}), their ids as
    written, saved as folder/model.npz."""
    path = folder / "ids.csv"
    path.write_text("user,item\n" + "".join(f"{u},{i}\n" for u, items in seen.items()
                                             for i in items))
    model = NCAE(feedback="implicit", hidden=(4,), batch_size=4, device="cpu")
    model.fit(datasets.load(str(path)), epochs=1, verbose=False)
    assert sorted(model.user_ids.tolist()) == sorted(seen)
    model.save(folder / "model.npz")
    return model


def test_ids_print_as_the_file_wrote_them(tmp_path, capsys):
    # Before, users "00007", "007" and "7" were one user 7, and item "01" printed as 1.
    seen = {"00007": ["01", "1"], "007": ["1", "2"], "7": ["2", "3"], "00001": ["01", "3"]}
    model = fit_on_file(tmp_path, seen)
    assert sorted(model.item_ids.tolist()) == ["01", "1", "2", "3"]
    assert recommend.main([str(tmp_path / "model.npz"), "--users", "007,7,00007", "-n",
                           "4"]) == 0
    rows = rows_of(capsys.readouterr().out)
    assert [r["user"] for r in rows] == ["007"] * 2 + ["7"] * 2 + ["00007"] * 2
    for r in rows:                     # each user's unseen items, as written
        assert r["item"] in {"01", "1", "2", "3"} - set(seen[r["user"]])


def test_ids_with_spaces_are_found_as_written_before_stripped(tmp_path, capsys):
    # Before, " a" was asked for as "a" (another user's rows, silently) and "b " as the
    # unknown "b": --users and --users-file stripped every id
    fit_on_file(tmp_path, {"a": ["1", "2"], " a": ["2", "3"], "b ": ["3", "4"], "c": ["4", "1"]})
    (tmp_path / "users.txt").write_text(" a\nb \na\n")
    for flags, users in [(["--users", " a,b "], [" a", "b "]),
                         (["--users", "a, a"], ["a", " a"]),            # exact first
                         (["--users", "c, a ,b "], ["c", "a", "b "]),  # then stripped
                         (["--users-file", str(tmp_path / "users.txt")], [" a", "b ", "a"])]:
        assert recommend.main([str(tmp_path / "model.npz"), *flags, "-n", "1"]) == 0
        assert [r["user"] for r in rows_of(capsys.readouterr().out)] == users, flags
