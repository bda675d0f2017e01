"""ncae_cuda.data.datasets: extracted copies, the download path (file:// URLs), the synthetic
generator, the CLI, and the real MovieLens 100K where the shared folder has it."""
import hashlib
import subprocess
import sys
import time
import zipfile
from dataclasses import replace

import numpy as np
import pytest

from ncae_cuda.commands.datasets import main
from ncae_cuda.data import datasets
from ncae_cuda.data.datasets import (
    DATA_ENV,
    DATASETS,
    Archive,
    UnverifiedArchiveWarning,
    load,
    split_files,
)
from ncae_cuda.data.interactions import NO_TIME, DataError
from ncae_cuda.data.reader import read_movielens_100k
from ncae_cuda.data.splits import leave_one_out
from ncae_cuda.data import synthetic as synthetic_module
from ncae_cuda.data import synthetic_cache
from ncae_cuda.data.synthetic import PRESETS, synthetic

U_DATA = "1\t10\t4\t100\n2\t10\t3\t200\n2\t11\t5\t300\n"
# The copies here are a few lines, each below its catalogue's count, and a Last.fm copy may lack
# its tag times: what their warnings say is checked where it is the point (test_load_from_data_dir,
# the Last.fm tests), and left out of the suite's summary elsewhere
pytestmark = pytest.mark.filterwarnings("ignore::ncae_cuda.data.datasets.CatalogueWarning",
                                        "ignore::ncae_cuda.data.datasets.NoTimesWarning")


@pytest.fixture(autouse=True)
def no_data_folder(request, monkeypatch):
    """The download and cache tests see no extracted copies in $NCAE_CUDA_DATA (the tests of
    the real data set, which ask for shared_data, keep it)."""
    if "shared_data" not in request.fixturenames:
        monkeypatch.delenv(DATA_ENV, raising=False)


def make_ml100k(folder):
    """A stand-in ml-100k folder: u.data and the u1 split."""
    folder.mkdir(parents=True)
    (folder / "u.data").write_text(U_DATA)
    (folder / "u1.base").write_text(U_DATA)
    (folder / "u1.test").write_text(U_DATA.splitlines(keepends=True)[0])
    return folder


def serve(tmp_path, monkeypatch, name, members, checksum="sha256", size=True):
    """Zip `members` under the archive's own file name and point the registry entry `name` at
    it through a file:// URL, recording its checksum (None: none) and size."""
    entry = DATASETS[name]
    served = tmp_path / "server" / entry.archive.filename
    served.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(served, "w") as archive:
        for member, text in members.items():
            archive.writestr(member, text)
    digest = None if checksum is None else (
        f"{checksum}:{hashlib.new(checksum, served.read_bytes()).hexdigest()}")
    monkeypatch.setitem(DATASETS, name, replace(entry, archive=Archive(
        served.as_uri(), digest, served.stat().st_size if size else None)))
    return served


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# ---- extracted copies ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["folder", "parent"])
def test_load_from_data_dir(tmp_path, layout):
    folder = make_ml100k(tmp_path / "ml-100k")
    # (a copy of 3 lines is not the published file, and is said not to be)
    with pytest.warns(datasets.CatalogueWarning, match=(
            r"u.data holds 3 interactions where ml-100k's catalogue lists 100,000: another "
            r"release, or a damaged copy\?")):
        d = load("ml-100k", data_dir=folder if layout == "folder" else tmp_path,
                 cache_dir=tmp_path / "cache")
    assert (d.name, d.n_users, d.n_items, d.nnz) == ("ml-100k", 2, 2, 3)
    assert not (tmp_path / "cache").exists()            # an extracted copy needs no cache


def test_the_data_folder_of_the_environment_is_read_where_it_holds_the_data_set(
        tmp_path, monkeypatch):
    """$NCAE_CUDA_DATA (~ expanded) is looked in before the cache, and a data set it does not
    hold is looked for in the cache, as if it were unset; --data-dir wins over it."""
    make_ml100k(tmp_path / "home" / "data" / "ml-100k")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(DATA_ENV, "~/data")
    cache = tmp_path / "cache"
    assert load("ml-100k", cache_dir=cache, download=False).nnz == 3
    assert not cache.exists()                           # read where it is: nothing cached
    served = serve(tmp_path, monkeypatch, "lastfm-2k", {"user_artists.dat": LASTFM_PLAYS})
    assert load("lastfm-2k", cache_dir=cache).nnz == 9 and (cache / served.name).is_file()
    other = make_ml100k(tmp_path / "other" / "ml-100k")
    (other / "u.data").write_text(U_DATA.splitlines(keepends=True)[0])
    assert load("ml-100k", data_dir=other, cache_dir=cache).nnz == 1


def test_data_dir_without_the_file_says_what_to_put_where(tmp_path, monkeypatch):
    """A --data-dir is read alone, never the cache: its error says to extract the archive into
    it, or to leave it out for the cache, not to put the archive into the cache (where, with
    --data-dir still given, it would be ignored)."""
    served = serve(tmp_path, monkeypatch, "ml-100k", {"ml-100k/u.data": U_DATA})
    cache, given = tmp_path / "cache", tmp_path / "given"
    cache.mkdir(), given.mkdir()
    served.rename(cache / served.name)                  # the archive in the cache, by hand
    with pytest.raises(DataError) as caught:
        load("ml-100k", data_dir=given, cache_dir=cache, download=False)
    assert str(caught.value) == (
        f"ml-100k: u.data is in neither {given} nor {given / 'ml-100k'}. To provide it, "
        f"extract ml-100k.zip (from {served.as_uri()}) into {given}, or leave out --data-dir "
        f"to read it from the cache, {cache}")
    assert load("ml-100k", cache_dir=cache, download=False).nnz == 3    # as it says


def test_a_data_dir_that_is_a_file_is_named_so(tmp_path):
    (tmp_path / "u.data").write_text(U_DATA)
    with pytest.raises(DataError, match=(
            f"^ml-100k: --data-dir {tmp_path / 'u.data'} is a file: give the folder that holds "
            r"u.data \(or its parent, which holds ml-100k/\)$")):
        load("ml-100k", data_dir=tmp_path / "u.data")


def test_split_files(tmp_path):
    make_ml100k(tmp_path / "ml-100k")
    base, test = split_files("ml-100k", "u1", data_dir=tmp_path)
    assert (base.name, test.name) == ("u1.base", "u1.test")
    assert read_movielens_100k(test).nnz == 1


def test_a_split_of_a_data_set_without_split_files_is_refused_naming_it():
    """Before, load_split asked a generated data set for its reader first: AttributeError."""
    with pytest.raises(DataError, match=r"^synthetic-tiny has no split files \(data sets with "
                                        r"them: ml-100k\)$"):
        datasets.load_split("synthetic-tiny", "u1")


def test_a_data_sets_own_split_is_read_on_its_declared_scale(tmp_path):
    folder = make_ml100k(tmp_path / "ml-100k")
    (folder / "u1.test").write_text("1\t10\t4\t100\n2\t11\t10\t300\n")
    with pytest.raises(DataError, match=rf"^{folder / 'u1.test'}:2: rating '10' is outside the "
                                        r"rating scale \[1, 5\]$"):
        datasets.load_split("ml-100k", "u1", data_dir=tmp_path)


def test_a_files_rating_scale_is_given_or_read_off_it(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("user,item,rating\n1,2,2\n1,3,4\n")
    assert load(str(path)).rating_scale == (2, 4)
    assert load(str(path), rating_scale=(1, 10)).rating_scale == (1, 10)
    with pytest.raises(DataError, match=rf"^{path}:3: rating '4' is outside the rating scale "
                                        r"\[1, 3\]$"):
        load(str(path), rating_scale=(1, 3))


def test_how_to_read_a_file_is_refused_for_a_named_data_set(tmp_path, capsys):
    # before: read in its own format, the separator and encoding given were never read, unsaid
    with pytest.raises(DataError, match=r"^synthetic-tiny is read in its own format: --sep "
                                        r"\(sep in datasets.load\) is for a data file given"):
        load("synthetic-tiny", sep=";")
    with pytest.raises(DataError, match="--encoding .encoding in datasets.load. is for"):
        datasets.default_feedback("ml-100k", encoding="latin-1")
    assert load("synthetic-tiny", encoding="UTF8").nnz == load("synthetic-tiny").nnz
    assert main(["describe", "synthetic-tiny", "--sep", "tab"]) == 2
    assert "--sep (sep in datasets.load) is for" in capsys.readouterr().err


@pytest.mark.parametrize("name, split, message", [
    ("ml-1m", "u1", "ml-1m has no split files"),
    ("ml-100k", "u6", "its splits are u1, u2, u3, u4, u5, ua, ub"),
    ("nope", "u1", "unknown data set 'nope'"),
])
def test_split_files_refuses(tmp_path, name, split, message):
    with pytest.raises(DataError, match=message):
        split_files(name, split, data_dir=tmp_path)


def test_names_and_default_feedback():
    assert datasets.names()[:2] == ["ml-100k", "ml-1m"] and "synthetic" in datasets.names()
    assert datasets.default_feedback("ml-10m") == "explicit"
    assert datasets.default_feedback("delicious-2k") == "implicit"
    assert datasets.default_feedback("synthetic-lastfm") == "implicit"


def test_unknown_name():
    with pytest.raises(DataError, match=r"unknown data set 'ml-7m': neither a data set's name "
                                        r"nor a file \(names: ml-100k"):
        load("ml-7m")


@pytest.mark.parametrize("given, message", [
    ({"name": None}, "name is a data set's name or a file's path: a str or os.PathLike, not "
                     "None"),
    ({"name": 5}, "name is a data set's name or a file's path: a str or os.PathLike, not 5"),
    ({"name": "ml-100k", "data_dir": 5},
     "data_dir is a folder: a str or os.PathLike, not 5"),
    ({"name": "ml-100k", "data_dir": ["data"]},
     r"data_dir is a folder: a str or os.PathLike, not \['data'\]"),
    ({"name": "ml-100k", "cache_dir": 5}, "cache_dir is a folder: a str or os.PathLike, not 5"),
    ({"name": "synthetic-tiny", "cache_dir": 5},
     "cache_dir is a folder: a str or os.PathLike, not 5"),
    ({"name": "synthetic-tiny", "seed": -1},
     "seed is a synthetic data set's seed: an integer >= 0, not -1"),
    ({"name": "synthetic-tiny", "seed": 1.5},
     "seed is a synthetic data set's seed: an integer >= 0, not 1.5"),
    ({"name": "synthetic-tiny", "seed": "1"},
     "seed is a synthetic data set's seed: an integer >= 0, not '1'"),
], ids=["name None", "name int", "data_dir int", "data_dir list", "cache_dir int",
        "synthetic cache_dir int", "seed < 0", "seed float", "seed str"])
def test_arguments_of_the_wrong_kind_are_refused_naming_them(tmp_path, given, message):
    """Before: a TypeError or ValueError from pathlib or numpy that named no argument."""
    with pytest.raises(DataError, match=f"^{message}$"):
        load(**given)


def test_a_seed_of_numpys_integers_and_a_path_as_name_are_taken(tmp_path):
    assert_same_interactions(load("synthetic-tiny", seed=np.int64(2)),
                             synthetic("tiny", 2))
    (tmp_path / "ratings.csv").write_text("1,10,4\n2,10,3\n")
    assert load(tmp_path / "ratings.csv").nnz == 2


# ---- the download path --------------------------------------------------------------------------

def test_download_checks_extracts_and_reads(tmp_path, monkeypatch):
    served = serve(tmp_path, monkeypatch, "ml-100k", {"ml-100k/u.data": U_DATA,
                                                      "ml-100k/u1.base": U_DATA})
    cache = tmp_path / "cache"
    d = load("ml-100k", cache_dir=cache)
    assert (d.n_users, d.n_items, d.nnz) == (2, 2, 3)
    assert files_under(cache) == ["ml-100k.zip", "ml-100k/u.data", "ml-100k/u1.base"]
    served.unlink()                                     # now served from the cache alone
    assert load("ml-100k", cache_dir=cache).nnz == 3


def test_cache_from_environment(tmp_path, monkeypatch):
    serve(tmp_path, monkeypatch, "ml-100k", {"ml-100k/u.data": U_DATA})
    monkeypatch.setenv("NCAE_CUDA_CACHE", str(tmp_path / "env-cache"))
    assert load("ml-100k").nnz == 3
    assert (tmp_path / "env-cache" / "ml-100k" / "u.data").is_file()


def test_archive_put_in_the_cache_by_hand_is_used(tmp_path, monkeypatch):
    served = serve(tmp_path, monkeypatch, "ml-100k", {"ml-100k/u.data": U_DATA})
    cache = tmp_path / "cache"
    cache.mkdir()
    served.rename(cache / served.name)
    assert load("ml-100k", cache_dir=cache, download=False).nnz == 3


def test_flat_archive_extracts_into_its_folder(tmp_path, monkeypatch):
    serve(tmp_path, monkeypatch, "lastfm-2k", {
        "user_artists.dat": "userID\tartistID\tweight\n2\t51\t13883\n2\t52\t11690\n",
        "readme.txt": "HetRec"}, checksum="md5")
    cache = tmp_path / "cache"
    assert load("lastfm-2k", cache_dir=cache).nnz == 2
    assert "hetrec2011-lastfm-2k/user_artists.dat" in files_under(cache)


def test_checksum_mismatch_leaves_no_file(tmp_path, monkeypatch):
    serve(tmp_path, monkeypatch, "ml-100k", {"ml-100k/u.data": U_DATA}, size=False)
    entry = DATASETS["ml-100k"]
    monkeypatch.setitem(DATASETS, "ml-100k", replace(
        entry, archive=replace(entry.archive, checksum="sha256:" + "0" * 64)))
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="ml-100k.zip downloaded from file:.* has sha256 "
                                        "[0-9a-f]{64}, not the 0000"):
        load("ml-100k", cache_dir=cache)
    assert files_under(cache) == []


def test_size_mismatch_leaves_no_file(tmp_path, monkeypatch):
    serve(tmp_path, monkeypatch, "ml-100k", {"ml-100k/u.data": U_DATA})
    entry = DATASETS["ml-100k"]
    monkeypatch.setitem(DATASETS, "ml-100k", replace(
        entry, archive=replace(entry.archive, size=entry.archive.size + 1)))
    with pytest.raises(DataError, match="bytes, not the .* recorded for it, so it was not kept"):
        load("ml-100k", cache_dir=tmp_path / "cache")
    assert files_under(tmp_path / "cache") == []


def test_unreachable_url_names_file_and_folder(tmp_path, monkeypatch):
    entry = DATASETS["ml-20m"]
    monkeypatch.setitem(DATASETS, "ml-20m", replace(entry, archive=replace(
        entry.archive, url=(tmp_path / "offline" / "ml-20m.zip").as_uri())))
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as caught:
        load("ml-20m", cache_dir=cache)
    message = str(caught.value)
    assert message.startswith("ml-20m: downloading file://")
    for part in ("ml-20m.zip", str(cache), "ratings.csv", "--data-dir"):
        assert part in message
    assert files_under(cache) == []


def test_damaged_archive_in_the_cache_is_named(tmp_path, monkeypatch):
    served = serve(tmp_path, monkeypatch, "ml-100k", {"ml-100k/u.data": U_DATA})
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / served.name).write_bytes(served.read_bytes()[:-1])
    with pytest.raises(DataError, match=f"{cache / served.name} has .* bytes.*remove it"):
        load("ml-100k", cache_dir=cache)


@pytest.mark.parametrize("members, message", [
    ({"ml-100k/README": "no ratings here"}, r"ml-100k: .*ml-100k.zip holds no u.data: it is not "
                                            r"the ml-100k.zip of file:"),
    (None, r"ml-100k: cannot extract .*ml-100k.zip \(File is not a zip file\). Remove it and "
           r"try again."),
], ids=["without the data file", "not a zip"])
def test_an_archive_that_is_not_the_data_sets_is_named(tmp_path, monkeypatch, members,
                                                      message):
    """An archive whose checksum is the one recorded (the registry wrong, or a file put there
    by hand) but that holds no data file, or is no zip: a DataError naming it, no traceback,
    and no data file left in the cache."""
    served = serve(tmp_path, monkeypatch, "ml-100k", members or {"x": ""})
    if members is None:                                   # bytes of another kind, recorded
        served.write_bytes(b"<html>a login page, not the archive</html>")
        entry = DATASETS["ml-100k"]
        monkeypatch.setitem(DATASETS, "ml-100k", replace(entry, archive=replace(
            entry.archive, size=served.stat().st_size,
            checksum=f"sha256:{hashlib.sha256(served.read_bytes()).hexdigest()}")))
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match=message):
        load("ml-100k", cache_dir=cache)
    assert "ml-100k/u.data" not in files_under(cache)
    assert not list(cache.glob(".ml-100k.*"))            # the extraction's temporary folder


def test_a_data_folder_of_the_environment_without_the_data_set_is_named(tmp_path,
                                                                        monkeypatch):
    """$NCAE_CUDA_DATA (a typo in it, say) looked in, in vain: the error says so, where it
    said to set it as if it were not."""
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "dta"))
    with pytest.raises(DataError, match=(
            f"\\. \\${DATA_ENV} is {tmp_path / 'dta'}, which holds neither u.data nor "
            "ml-100k/u.data.$")):
        load("ml-100k", cache_dir=tmp_path / "cache", download=False)


def test_no_download_says_what_is_missing(tmp_path):
    with pytest.raises(DataError, match="downloading is off"):
        load("ml-10m", cache_dir=tmp_path, download=False)


def test_unrecorded_checksum_is_said(tmp_path, monkeypatch):
    serve(tmp_path, monkeypatch, "delicious-2k", {
        "user_taggedbookmarks-timestamps.dat": "userID\tbookmarkID\ttagID\ttimestamp\n"
                                               "8\t1\t1\t1289255362000\n"},
          checksum=None, size=False)
    with pytest.warns(UnverifiedArchiveWarning, match="no checksum is recorded for "
                                                      "hetrec2011-delicious-2k.zip.*unverified"):
        assert load("delicious-2k", cache_dir=tmp_path / "cache").nnz == 1


def test_recorded_checksums_are_well_formed():
    lengths = {"md5": 32, "sha256": 64}
    for entry in DATASETS.values():
        if isinstance(entry, datasets.Published) and entry.archive.checksum is not None:
            algorithm, digest = entry.archive.checksum.split(":")
            assert len(digest) == lengths[algorithm]
            int(digest, 16)
            assert entry.archive.url.endswith(".zip")


# ---- synthetic data ------------------------------------------------------------------------------

def test_synthetic_is_deterministic_per_seed():
    a, b, c = synthetic("tiny", 0), synthetic("tiny", 0), synthetic("tiny", 1)
    for field in ("users", "items", "ratings", "timestamps"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.items, c.items) or not np.array_equal(a.ratings, c.ratings)


def test_synthetic_is_the_same_whatever_the_threads(monkeypatch):
    """The noise is drawn in block order whatever the pool's size: one thread and eight give
    the same data, over many blocks (a block of 2 users here) finishing in any order."""
    monkeypatch.setattr(synthetic_module, "_BLOCK_CELLS", 2 * PRESETS["small"].n_items)
    drawn = []
    for cpus in (1, 8):
        monkeypatch.setattr(synthetic_module, "cores", lambda c=cpus: c)
        drawn.append(synthetic("small", 5))
    for field in ("users", "items", "ratings", "timestamps"):
        np.testing.assert_array_equal(getattr(drawn[0], field), getattr(drawn[1], field))


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_synthetic_shape_and_validity(preset):
    d = synthetic(preset, seed=3)
    shape = PRESETS[preset]
    assert (d.n_users, d.n_items) == (shape.n_users, shape.n_items)
    assert abs(d.nnz - shape.nnz) < 0.05 * shape.nnz
    pairs = d.users.astype(np.int64) * d.n_items + d.items
    assert len(np.unique(pairs)) == d.nnz                            # no duplicate pairs
    assert np.bincount(d.users, minlength=d.n_users).min() >= 3
    assert d.rating_scale == (1.0, 5.0)
    assert set(np.unique(d.ratings)) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    assert d.timestamps.dtype == np.int64
    same_user = d.users[1:] == d.users[:-1]
    assert (np.diff(d.timestamps)[same_user] >= 0).all()             # histories in time order
    d.to_csr()                                                       # the model's input form


def test_synthetic_activity_and_popularity_are_heavy_tailed():
    d = synthetic("small")
    per_user = np.bincount(d.users)
    assert per_user.max() > 5 * np.median(per_user)
    popularity = np.sort(np.bincount(d.items, minlength=d.n_items))[::-1]
    assert popularity[:d.n_items // 10].sum() > 0.3 * d.nnz         # top 10% of the items


def test_synthetic_taste_beats_popularity():
    """The latent structure decides what users pick: a rank-16 PureSVD on the training part
    ranks each user's latest item far better than popularity does (HR@10, leave-one-out)."""
    d = synthetic("small")
    latest = np.r_[d.users[1:] != d.users[:-1], True]                # histories are time-sorted
    train = d.subset(~latest).to_csr(implicit=True).toarray().astype(np.float64)
    # The top-16 right singular vectors by subspace iteration (dense LAPACK SVD can be slow
    # with a multi-threaded BLAS on a small machine).
    gram = train.T @ train                                            # (items, items)
    basis = np.random.default_rng(0).standard_normal((d.n_items, 16))
    for _ in range(10):
        basis, _ = np.linalg.qr(gram @ basis)

    def hit_rate(scores):
        scores = np.where(train > 0, -np.inf, scores)
        held = scores[d.users[latest], d.items[latest]]
        rank = (scores >= held[:, None]).sum(axis=1) - 1
        return np.mean(rank < 10)

    popular = hit_rate(np.broadcast_to(train.sum(axis=0), train.shape))
    taste = hit_rate(train @ basis @ basis.T)
    assert taste > 1.5 * popular


def test_synthetic_tiny_is_fast():
    synthetic("tiny")                                   # warm up
    seconds = []
    for seed in range(5):
        start = time.perf_counter()
        synthetic("tiny", seed)
        seconds.append(time.perf_counter() - start)
    assert min(seconds) < 0.05


def test_synthetic_names_in_the_registry():
    assert load().name == "synthetic" and load().n_users == PRESETS["small"].n_users
    assert load("synthetic-tiny", seed=4).nnz == synthetic("tiny", 4).nnz
    with pytest.raises(DataError, match="unknown synthetic preset"):
        synthetic("huge")


def assert_same_interactions(a, b):
    for field in ("users", "items", "ratings", "timestamps", "user_ids", "item_ids"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype, field
        np.testing.assert_array_equal(x, y, err_msg=field)
    assert (a.rating_scale, a.name) == (b.rating_scale, b.name)


def no_drawing(monkeypatch):
    """From here on a draw fails the test: what comes back was read from the cache."""
    def draw(preset, seed):
        raise AssertionError(f"drew {preset} seed {seed} again")
    monkeypatch.setattr(synthetic_cache.generator, "synthetic", draw)


def test_kept_synthetic_is_drawn_once_then_read_back(tmp_path, monkeypatch):
    first = synthetic_cache.kept_synthetic("tiny", 3, tmp_path)
    assert_same_interactions(first, synthetic("tiny", 3))
    kept = list((tmp_path / synthetic_cache.FOLDER).iterdir())
    assert [p.name for p in kept] == [f"tiny-seed3-{synthetic_cache.generator_digest()}.npz"]
    no_drawing(monkeypatch)
    assert_same_interactions(synthetic_cache.kept_synthetic("tiny", 3, tmp_path), first)
    with pytest.raises(AssertionError, match="drew tiny seed 4"):   # another seed: not kept
        synthetic_cache.kept_synthetic("tiny", 4, tmp_path)


def test_kept_synthetic_draws_over_a_damaged_file(tmp_path):
    path = tmp_path / synthetic_cache.FOLDER / (
        f"small-seed0-{synthetic_cache.generator_digest()}.npz")
    synthetic_cache.kept_synthetic("small", 0, tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[:len(whole) // 2])                       # as a killed writer's copy
    assert_same_interactions(synthetic_cache.kept_synthetic("small", 0, tmp_path),
                             synthetic("small", 0))
    assert path.read_bytes() == whole
    assert [p.name for p in path.parent.iterdir()] == [path.name]    # no temporary file left


def test_kept_synthetic_removes_what_killed_draws_of_it_left(tmp_path):
    # before, each draw killed while it wrote left its temporary file for good (one a kill:
    # about 200 MB for synthetic-ml20m)
    folder = tmp_path / synthetic_cache.FOLDER
    folder.mkdir()
    path = folder / f"tiny-seed3-{synthetic_cache.generator_digest()}.npz"
    left = [folder / f"{path.name}.{digits * 12}.tmp" for digits in ("0", "a")]
    other = folder / f"tiny-seed4-{synthetic_cache.generator_digest()}.npz.{'b' * 12}.tmp"
    for partial in (*left, other):
        partial.write_bytes(b"PK\x03\x04 cut short")
    assert_same_interactions(synthetic_cache.kept_synthetic("tiny", 3, tmp_path),
                             synthetic("tiny", 3))
    # another set's may be a writer's at work: it stays
    assert sorted(p.name for p in folder.iterdir()) == sorted([path.name, other.name])
    assert_same_interactions(synthetic_cache._read(path), synthetic("tiny", 3))


def test_kept_synthetic_without_a_writable_cache(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert_same_interactions(synthetic_cache.kept_synthetic("tiny", 0, blocked),
                             synthetic("tiny", 0))


def test_generator_digest_names_the_generator_and_numpy(monkeypatch):
    digest = synthetic_cache.generator_digest()
    synthetic_cache.generator_digest.cache_clear()
    monkeypatch.setattr(np, "__version__", "0.0.0")
    try:
        assert synthetic_cache.generator_digest() != digest
    finally:
        synthetic_cache.generator_digest.cache_clear()


def test_load_keeps_only_large_synthetic_sets(tmp_path, monkeypatch):
    load("synthetic-tiny", cache_dir=tmp_path)
    assert not (tmp_path / synthetic_cache.FOLDER).exists()         # below KEPT_FROM
    monkeypatch.setattr(datasets, "KEPT_FROM", PRESETS["tiny"].nnz)
    drawn = load("synthetic-tiny", cache_dir=tmp_path, seed=2)
    no_drawing(monkeypatch)
    kept = load("synthetic-tiny", cache_dir=tmp_path, seed=2)
    assert_same_interactions(kept, drawn)
    assert kept.name == "synthetic-tiny"


# ---- command line --------------------------------------------------------------------------------

def test_cli_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in DATASETS:
        assert name in out


def test_cli_describe_synthetic_in_a_subprocess():
    done = subprocess.run([sys.executable, "-m", "ncae_cuda.datasets", "describe",
                           "synthetic-tiny"], capture_output=True, text=True, check=True)
    assert "users         60" in done.stdout and "items         50" in done.stdout
    assert "sparsity" in done.stdout and "timestamps    yes" in done.stdout


def test_cli_errors_exit_2_without_traceback(tmp_path, capsys):
    assert main(["describe", "ml-9m"]) == 2
    assert main(["describe", "ml-1m", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown data set 'ml-9m'") and "Traceback" not in err
    assert "ratings.dat is in neither" in err
    assert main(["describe", str(tmp_path)]) == 2       # as train says it (before: "unknown")
    assert capsys.readouterr().err == (f"error: unknown data set {str(tmp_path)!r}: a folder, not "
                                       f"a data file: name a file in it, or a data set's name "
                                       f"with --data-dir {tmp_path}\n")


# ---- the real MovieLens 100K (skipped where the shared folder lacks it) -------------------------

def test_real_ml100k(shared_data):
    d = load("ml-100k", data_dir=shared_data, download=False)
    assert (d.n_users, d.n_items, d.nnz) == (943, 1682, 100_000)
    assert d.n_duplicates_merged == 0 and d.rating_scale == (1.0, 5.0)
    base, test = split_files("ml-100k", "u1", data_dir=shared_data / "ml-100k", download=False)
    assert (read_movielens_100k(base).nnz, read_movielens_100k(test).nnz) == (80_000, 20_000)


def test_real_ml100k_describe(shared_data, capsys):
    assert main(["describe", "ml-100k", "--data-dir", str(shared_data), "--no-download"]) == 0
    out = capsys.readouterr().out
    assert "users         943" in out and "items         1,682" in out
    assert "interactions  100,000" in out and "sparsity      93.70%" in out


# ---- Last.fm dated by its tag times --------------------------------------------------------------

LASTFM_PLAYS = ("userID\tartistID\tweight\n"
                "2\t51\t100\n2\t52\t90\n2\t53\t80\n2\t54\t70\n"      # user 2: 53 tagged last
                "3\t51\t5\n3\t55\t4\n3\t56\t0\n"                       # 3: 56 not played
                "4\t52\t9\n4\t53\t8\n4\t54\t7\n")                      # 4: nothing tagged
# userID artistID tagID timestamp (ms): several tags of one pair (the earliest dates it), a tag
# of an artist the user never played (ignored), a tagged user who played nothing (ignored)
LASTFM_TAGS = ("userID\tartistID\ttagID\ttimestamp\n"
               "2\t51\t1\t5000000\n2\t52\t7\t3000000\n2\t52\t8\t9000000\n2\t53\t1\t8000000\n"
               "2\t53\t2\t4000000\n2\t53\t3\t6000000\n"
               "3\t51\t1\t1000000\n3\t56\t1\t9900000\n3\t55\t4\t2000000\n"
               "9\t51\t1\t7000000\n")


def lastfm_folder(tmp_path, tags=True):
    folder = tmp_path / "hetrec2011-lastfm-2k"
    folder.mkdir()
    (folder / "user_artists.dat").write_text(LASTFM_PLAYS)
    if tags:
        (folder / "user_taggedartists-timestamps.dat").write_text(LASTFM_TAGS)
    return folder


def dated(data) -> dict:
    """{(user id, artist id): timestamp} of the loaded interactions."""
    return {(int(data.user_ids[u]), int(data.item_ids[i])): int(t)
            for u, i, t in zip(data.users, data.items, data.timestamps)}


def test_lastfm_plays_are_dated_by_their_earliest_tag(tmp_path):
    with pytest.warns(datasets.CatalogueWarning):
        data = load("lastfm-2k", data_dir=lastfm_folder(tmp_path))
    assert dated(data) == {(2, 51): 5000, (2, 52): 3000, (2, 53): 4000, (2, 54): NO_TIME,
                           (3, 51): 1000, (3, 55): 2000,
                           (4, 52): NO_TIME, (4, 53): NO_TIME, (4, 54): NO_TIME}


def test_lastfm_leave_one_out_holds_out_the_latest_tagged_artist(tmp_path):
    with pytest.warns(datasets.CatalogueWarning):
        data = load("lastfm-2k", data_dir=lastfm_folder(tmp_path))
    held = {}
    for seed in range(20):
        split = leave_one_out(data, seed=seed)
        test = split.test
        for u, i in zip(test.users, test.items):
            held.setdefault(int(data.user_ids[u]), set()).add(int(data.item_ids[i]))
    assert held[2] == {51} and held[3] == {55}               # by tag time, whatever the seed
    assert held[4] == {52, 53, 54}                           # none dated: at random
    assert any("4 interactions have no time" in note and "1 users have none dated" in note
               for note in split.notes)


def test_lastfm_without_its_tag_file_holds_out_at_random_and_says_so(tmp_path):
    with pytest.warns(datasets.NoTimesWarning, match="no user_taggedartists-timestamps.dat "
                                                     "beside .* holds out a random one"):
        data = load("lastfm-2k", data_dir=lastfm_folder(tmp_path, tags=False))
    assert data.timestamps is None
    assert any("random interaction per user" in note for note in leave_one_out(data).notes)
