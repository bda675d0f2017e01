"""Named data sets: the published ones (download, checksum, cache) and the synthetic ones.

`load(name)` returns the `Interactions` of a named data set. A published one is read from an
extracted copy (`data_dir`), else from the cache (`cache_dir`, else $NCAE_CUDA_CACHE, else
~/.cache/ncae_cuda), downloading and checking its archive there when it is missing. The default
data set, `synthetic`, needs no file: ncae_cuda/data/synthetic.py draws users and items with
low-rank preferences, Zipf-like item popularity and heavy-tailed activity, in the shapes of the
paper's data sets; the large ones are kept in the cache once drawn (synthetic_cache.py).
`python -m ncae_cuda.datasets` lists and describes them (ncae_cuda/commands/datasets.py).
"""
from __future__ import annotations

import hashlib
import http.client
import numbers
import os
import shutil
import tempfile
import urllib.request
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from .interactions import DataError, Interactions, with_times
from .reader import (
    read_delicious,
    read_lastfm_artists,
    read_lastfm_tag_timestamps,
    read_movielens_100k,
    read_movielens_csv,
    read_movielens_dat,
    read_table,
    table_layout,
)
from .synthetic import PRESETS, synthetic
from .synthetic_cache import kept_synthetic
from .table_parser import ENCODING, codecs_name

DEFAULT = "synthetic"
KEPT_FROM = 1_000_000       # synthetic sets of this many interactions are kept once drawn
DATA_ENV = "NCAE_CUDA_DATA"          # where extracted copies of the published data sets are


class UnverifiedArchiveWarning(UserWarning):
    """An archive is used without a recorded checksum to check it against."""


@dataclass(frozen=True)
class Archive:
    url: str
    # "<hashlib algorithm>:<hex digest>" as recorded by others (source noted at each entry);
    # None where no record was found: the archive is then checked by size at most.
    checksum: str | None
    size: int | None = None         # bytes, where recorded

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Published:
    name: str
    description: str
    archive: Archive
    folder: str                     # the folder the archive's files extract to
    file: str                       # the file `read` reads, inside `folder`
    read: Callable[[Path], Interactions]
    feedback: str                   # default: "explicit" (ratings) or "implicit"
    interactions: int               # what the published file holds, duplicates merged
    splits: tuple[str, ...] = ()    # split files shipped as <split>.base / <split>.test
    # A file beside `file` that dates its interactions, and its reader (data.with_times pairs
    # them up); where it is missing the interactions stay undated, with a NoTimesWarning.
    times: tuple[str, Callable[[Path], Interactions]] | None = None


class CatalogueWarning(UserWarning):
    """A data file holds another number of interactions than its data set's catalogue entry."""


class NoTimesWarning(UserWarning):
    """A data set's file of interaction times is missing: leave-one-out holds out at random."""


@dataclass(frozen=True)
class Generated:
    name: str
    description: str
    preset: str                     # key of synthetic.PRESETS
    feedback: str


_GROUPLENS = "https://files.grouplens.org/datasets"
_ML_SPLITS = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")

# Checksums: SHA-256 and sizes from tensorflow/datasets
# (tensorflow_datasets/url_checksums/movielens.txt); MD5 of ml-10m.zip from
# eli-osherovich/papers_with_code (datasets/movielens/dl_config.py), matching GroupLens'
# ml-10m.zip.md5; MD5 of the Last.fm archive from sisinflab/DataRec
# (datarec/datasets/lastfm/lastfm_2011.py). None was found for the Delicious archive.
_REGISTRY = [
    Published(
        "ml-100k", "MovieLens 100K: 100,000 ratings (1-5 stars), 943 users, 1,682 movies",
        Archive(f"{_GROUPLENS}/movielens/ml-100k.zip",
                "sha256:50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229",
                4_924_029),
        "ml-100k", "u.data", read_movielens_100k, "explicit", 100_000, _ML_SPLITS),
    Published(
        "ml-1m", "MovieLens 1M: 1,000,209 ratings (1-5 stars), 6,040 users, 3,706 movies",
        Archive(f"{_GROUPLENS}/movielens/ml-1m.zip",
                "sha256:a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20",
                5_917_549),
        "ml-1m", "ratings.dat", partial(read_movielens_dat, rating_scale=(1.0, 5.0)),
        "explicit", 1_000_209),
    Published(
        "ml-10m", "MovieLens 10M: 10,000,054 ratings (0.5-5 stars), 69,878 users, "
                  "10,677 movies",
        Archive(f"{_GROUPLENS}/movielens/ml-10m.zip", "md5:ce571fd55effeba0271552578f2648bd"),
        "ml-10M100K", "ratings.dat", partial(read_movielens_dat, rating_scale=(0.5, 5.0)),
        "explicit", 10_000_054),
    Published(
        "ml-20m", "MovieLens 20M: 20,000,263 ratings (0.5-5 stars), 138,493 users, "
                  "26,744 movies",
        Archive(f"{_GROUPLENS}/movielens/ml-20m.zip",
                "sha256:96f243c338a8665f6bcc89c53edf6ee39162a846940de6b7c8c48aeada765ff3",
                198_702_078),
        "ml-20m", "ratings.csv", partial(read_movielens_csv, rating_scale=(0.5, 5.0)),
        "explicit", 20_000_263),
    Published(
        "lastfm-2k", "HetRec 2011 Last.fm: 92,834 user-artist plays, 1,892 users, "
                     "17,632 artists, dated by their earliest tag where tagged",
        Archive(f"{_GROUPLENS}/hetrec2011/hetrec2011-lastfm-2k.zip",
                "md5:296d61afe4e8632b173fc2dd3be20ce2"),
        "hetrec2011-lastfm-2k", "user_artists.dat", read_lastfm_artists, "implicit", 92_834,
        times=("user_taggedartists-timestamps.dat", read_lastfm_tag_timestamps)),
    Published(
        "delicious-2k", "HetRec 2011 Delicious: 104,799 user-bookmark pairs with tag times, "
                        "1,867 users, 69,226 URLs",
        Archive(f"{_GROUPLENS}/hetrec2011/hetrec2011-delicious-2k.zip", None),
        "hetrec2011-delicious-2k", "user_taggedbookmarks-timestamps.dat", read_delicious,
        "implicit", 104_799),
    Generated("synthetic", "synthetic, ML-100K-like: 1,000 users x 800 items, ~60,000 "
                           "ratings (the default)", "small", "explicit"),
    Generated("synthetic-tiny", "synthetic: 60 users x 50 items, ~600 ratings (for tests)",
              "tiny", "explicit"),
    Generated("synthetic-ml10m", "synthetic in the ML-10M shape: 69,878 users x 10,073 items, "
                                 "~10M ratings", "ml10m", "explicit"),
    Generated("synthetic-lastfm", "synthetic in the Last.fm shape: 1,892 users x 17,632 items, "
                                  "~93K interactions", "lastfm", "implicit"),
    Generated("synthetic-delicious", "synthetic in the Delicious shape: 1,867 users x 69,226 "
                                     "items, ~105K interactions", "delicious", "implicit"),
    Generated("synthetic-ml20m", "synthetic in ML-20M's shape as Mult-VAE trains on it (ratings "
                                 ">= 4): 136,677 users x 20,108 items, ~10M interactions",
              "ml20m", "implicit"),
]
DATASETS: dict[str, Published | Generated] = {entry.name: entry for entry in _REGISTRY}


def load(name: str = DEFAULT, data_dir: str | os.PathLike | None = None,
         cache_dir: str | os.PathLike | None = None, download: bool = True,
         seed: int = 0, sep: str | None = None, encoding: str = ENCODING,
         rating_scale: tuple[float, float] | None = None) -> Interactions:
    """Read a named data set, or a file of your own.

    Parameters
    ----------
    name : str
        A name of the catalogue (`DATASETS`, `names()`), or the path of a CSV/TSV file of
        user, item[, rating[, timestamp]] (read by `reader.read_table`).
    data_dir : str or os.PathLike, optional
        An extracted copy of a published data set: either the folder holding the files
        (.../ml-100k/u.data) or its parent (.../ml-100k/ under it). Without it, an extracted
        copy in $NCAE_CUDA_DATA is used where there is one, else the cache.
    cache_dir : str or os.PathLike, optional
        The download cache (else $NCAE_CUDA_CACHE, else ~/.cache/ncae_cuda), which also keeps
        the synthetic sets of `KEPT_FROM` interactions or more once drawn
        (`synthetic_cache`).
    download : bool
        Download a published archive into the cache when it is missing there.
    seed : int
        The seed of a synthetic data set; nothing else reads it.
    sep : str, optional
        A file's field separator: a character, 'tab' or '::' (default: the first of tab, comma
        and semicolon on its first line).
    encoding : str
        A file's text encoding, e.g. 'latin-1'.
    rating_scale : (float, float), optional
        A file's lowest and highest rating (default: its ratings' range); a named data set has
        its own scale.

    Returns
    -------
    Interactions
        The users, items, ratings (None for implicit feedback) and timestamps, with the data
        set's own ids.

    Raises
    ------
    DataError
        A name, folder or seed of the wrong kind, an unknown name, a file that cannot be read
        as a table (naming its file and line), a named data set given `sep` or `encoding`
        (read in its own format), or a published data set that is neither extracted nor in
        the cache where `download` is off or the download fails (naming the file to fetch and
        where to put it).

    Warns
    -----
    CatalogueWarning
        A published file holds another number of interactions than the catalogue says.

    Examples
    --------
    >>> from ncae_cuda.data import datasets
    >>> data = datasets.load("synthetic-tiny")
    >>> data.n_users > 0 and data.ratings is not None
    True
    """
    _refuse_other_kinds(name, data_dir, cache_dir)
    if is_file(name):
        return read_table(name, sep, rating_scale, encoding)
    entry = _entry(name)
    _refuse_table_options(name, sep, encoding)
    if isinstance(entry, Generated):
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
            raise DataError(f"seed is a synthetic data set's seed: an integer >= 0, not "
                            f"{seed!r}")
        drawn = (kept_synthetic(entry.preset, seed, cache_dir_path(cache_dir)) if cached(name)
                 else synthetic(entry.preset, seed))
        return replace(drawn, name=entry.name)
    path = _locate(entry, entry.file, data_dir, cache_dir, download)
    data = replace(entry.read(path), name=entry.name)
    if data.nnz != entry.interactions:
        warnings.warn(f"{path} holds {data.nnz:,} interactions where {entry.name}'s catalogue "
                      f"lists {entry.interactions:,}: another release, or a damaged copy?",
                      CatalogueWarning, stacklevel=2)
    return _dated(entry, data, path) if entry.times else data


def _dated(entry: Published, data: Interactions, path: Path) -> Interactions:
    """`data` dated by the file of times beside `path`, or undated with a NoTimesWarning."""
    file, read = entry.times
    if not (path.parent / file).is_file():
        warnings.warn(f"{entry.name}: no {file} beside {path}, so its interactions have no "
                      "times and leave-one-out holds out a random one per user",
                      NoTimesWarning, stacklevel=3)
        return data
    return with_times(data, read(path.parent / file))


def is_file(name: str) -> bool:
    """Whether `name` is a path to a data file rather than a data set's name."""
    return name not in DATASETS and Path(name).expanduser().is_file()


def _extracted(entry: Published, file: str, folder: Path) -> Path | None:
    """`file` of the data set in an extracted copy under `folder` (in it, or in the data set's
    own folder there), or None."""
    for place in (folder, folder / entry.folder):
        if (place / file).is_file():
            return place / file
    return None


def split_files(name: str, split: str, data_dir: str | os.PathLike | None = None,
                cache_dir: str | os.PathLike | None = None,
                download: bool = True) -> tuple[Path, Path]:
    """(base, test) paths of a data set's own split, e.g. ml-100k 'u1' -> u1.base, u1.test."""
    _refuse_other_kinds(name, data_dir, cache_dir)
    entry = _entry(name)
    if not isinstance(entry, Published) or not entry.splits:
        with_splits = [key for key, value in DATASETS.items()
                       if isinstance(value, Published) and value.splits]
        raise DataError(f"{name} has no split files (data sets with them: "
                        f"{', '.join(with_splits)})")
    if split not in entry.splits:
        raise DataError(f"{name} has no split {split!r}; its splits are {', '.join(entry.splits)}")
    base, test = (_locate(entry, f"{split}.{part}", data_dir, cache_dir, download)
                  for part in ("base", "test"))
    return base, test


def load_split(name: str, split: str, data_dir: str | os.PathLike | None = None,
               cache_dir: str | os.PathLike | None = None,
               download: bool = True) -> tuple[Interactions, Interactions]:
    """(base, test) of a data set's own split, read by the data set's reader. Each has its own
    id maps: splits.file_split maps them onto the whole data set's. A data set without split
    files raises DataError naming it (split_files'), before its reader is asked for."""
    base, test = split_files(name, split, data_dir, cache_dir, download)
    reader = _entry(name).read
    return reader(base), reader(test)


def names() -> list[str]:
    """The names `load` takes, published ones first."""
    return list(DATASETS)


def split_names() -> tuple[str, ...]:
    """Every split a data set ships files of (ml-100k's u1..u5, ua, ub)."""
    return tuple(dict.fromkeys(split for entry in DATASETS.values()
                               if isinstance(entry, Published) for split in entry.splits))


def published(name: str) -> bool:
    """Whether `name` is a published data set's, read from its files (data_dir's, the cache's),
    not drawn (synthetic) nor a file's path."""
    return isinstance(DATASETS.get(name), Published)


def cached(name: str) -> bool:
    """Whether `name`'s data is read through the cache folder: a published data set's
    download, or a synthetic set of KEPT_FROM interactions or more, kept once drawn."""
    entry = DATASETS.get(name)
    return isinstance(entry, Published) or (isinstance(entry, Generated)
                                            and PRESETS[entry.preset].nnz >= KEPT_FROM)


def folder_unread(name: str | None, data_dir: object, cache_dir: object,
                  shown: str) -> str | None:
    """Why a folder given (data_dir, cache_dir: None where not) is one that `name`'s data is
    never read from, naming its flag and the data as `shown`; None where each given is read:
    given and unread, it would seem to say where the data came from."""
    if data_dir is not None and not published(name):
        return f"--data-dir {data_dir}: is where a published data set is kept; {shown} is not one"
    if cache_dir is not None and not cached(name):
        return (f"--cache-dir {cache_dir}: is where a published data set is downloaded and a "
                f"synthetic one of {KEPT_FROM:,} interactions or more kept once drawn; {shown} "
                "is neither")
    return None


def has_split(name: str, split: str) -> bool:
    entry = DATASETS.get(name)
    return isinstance(entry, Published) and split in entry.splits


def default_feedback(name: str, sep: str | None = None, encoding: str = ENCODING) -> str:
    """"explicit" (train on ratings) or "implicit" (on who interacted with what); a file is
    explicit when it has a rating column."""
    if is_file(name):
        return "explicit" if "rating" in table_layout(name, sep, encoding).columns else "implicit"
    feedback = _entry(name).feedback
    _refuse_table_options(name, sep, encoding)
    return feedback


def _refuse_other_kinds(name: object, data_dir: object, cache_dir: object) -> None:
    """DataError naming an argument that is not a path where one is wanted, where pathlib's
    TypeError would name none (the folders may be None: not given)."""
    folders = {"data_dir": data_dir, "cache_dir": cache_dir}
    paths = [("name", name, "a data set's name or a file's path"),
             *((argument, value, "a folder") for argument, value in folders.items()
               if value is not None)]
    for argument, value, what in paths:
        if not isinstance(value, (str, os.PathLike)):
            raise DataError(f"{argument} is {what}: a str or os.PathLike, not {value!r}")


def _refuse_table_options(name: str, sep: str | None, encoding: str) -> None:
    """DataError where a named data set is given how to read a file of one's own, which its
    reader never reads: given and unsaid, a separator would seem to have been used."""
    given = [setting for setting, value in (("sep", sep), ("encoding", encoding))
             if value is not None and (setting == "sep" or codecs_name(value) != ENCODING)]
    if given:
        flags = " and ".join(f"--{setting}" for setting in given)
        raise DataError(f"{name} is read in its own format: {flags} ({', '.join(given)} in "
                        f"datasets.load) {'is' if len(given) == 1 else 'are'} for a data file "
                        "given by its path")


def cache_dir_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache folder: `cache_dir`, else $NCAE_CUDA_CACHE, else ~/.cache/ncae_cuda."""
    chosen = cache_dir or os.environ.get("NCAE_CUDA_CACHE") or Path.home() / ".cache" / "ncae_cuda"
    return Path(chosen).expanduser()


def _entry(name: str) -> Published | Generated:
    if name not in DATASETS:
        raise DataError(f"unknown data set {name!r}: {not_a_data_set(name)}")
    return DATASETS[name]


def unknown(name: str) -> str | None:
    """Why `name` is neither a data set's name nor a data file (not_a_data_set), or None."""
    return None if name in DATASETS or is_file(name) else not_a_data_set(name)


def not_a_data_set(name: str) -> str:
    """Why `name`, neither a data set's name nor a data file, is not read, and what to give."""
    if Path(name).expanduser().is_dir():
        return (f"a folder, not a data file: name a file in it, or a data set's name with "
                f"--data-dir {name}")
    return f"neither a data set's name nor a file (names: {', '.join(DATASETS)})"


# ---- files: extracted copy, cache, download --------------------------------------------------

def _locate(entry: Published, file: str, data_dir: str | os.PathLike | None,
            cache_dir: str | os.PathLike | None, download: bool) -> Path:
    """Path of `file` of the data set: in `data_dir` (which must hold it), else in
    $NCAE_CUDA_DATA (where it may not be), else in the cache, downloading and extracting its
    archive there if need be."""
    cache = cache_dir_path(cache_dir)
    if data_dir is not None:
        return _in_data_dir(entry, file, Path(data_dir).expanduser(), cache)
    if os.environ.get(DATA_ENV):
        found = _extracted(entry, file, Path(os.environ[DATA_ENV]).expanduser())
        if found is not None:
            return found
    extracted = cache / entry.folder / file
    if extracted.is_file():
        return extracted
    archive = cache / entry.archive.filename
    if not archive.is_file() and not download:
        raise DataError(f"{entry.name}: {extracted} is missing and downloading is off. "
                        + _how_to_provide(entry, file, cache))
    try:
        if archive.is_file():
            problem = _verify(entry, archive)
            if problem:
                raise DataError(f"{entry.name}: {archive} {problem}: remove it and try again. "
                                + _how_to_provide(entry, file, cache))
        else:
            _download(entry, archive, file)
        _extract(entry, archive, file)
    except OSError as error:
        raise DataError(f"{entry.name}: cannot write into {cache} ({error})",
                        errno=error.errno) from None
    if not extracted.is_file():
        raise DataError(f"{entry.name}: {archive} holds no {file}: it is not the "
                        f"{entry.archive.filename} of {entry.archive.url}")
    return extracted


def _in_data_dir(entry: Published, file: str, folder: Path, cache: Path) -> Path:
    """`file` of the data set in `folder`, a --data-dir, which must hold it: the cache is not
    looked in, so the error says to extract the archive there, or to leave the flag out."""
    if folder.is_file():
        raise DataError(f"{entry.name}: --data-dir {folder} is a file: give the folder that "
                        f"holds {file} (or its parent, which holds {entry.folder}/)")
    found = _extracted(entry, file, folder)
    if found is None:
        raise DataError(f"{entry.name}: {file} is in neither {folder} nor "
                        f"{folder / entry.folder}. To provide it, extract "
                        f"{entry.archive.filename} (from {entry.archive.url}) into {folder}, "
                        f"or leave out --data-dir to read it from the cache, {cache}")
    return found


def _how_to_provide(entry: Published, file: str, cache: Path) -> str:
    """What to do when `file` is nowhere, and, where $NCAE_CUDA_DATA is set, that it was looked
    in: a folder mistyped there reads as if the variable were unset."""
    looked_in = os.environ.get(DATA_ENV)
    return (f"To provide it, either put {entry.archive.filename} (from {entry.archive.url}) "
            f"into {cache}, or extract it and pass the folder that holds {file} (or its "
            f"parent, which holds {entry.folder}/) with --data-dir or ${DATA_ENV}."
            + (f" ${DATA_ENV} is {looked_in}, which holds neither {file} nor "
               f"{entry.folder}/{file}." if looked_in else ""))


def _download(entry: Published, target: Path, file: str) -> None:
    """Fetch the archive to a temporary file beside `target`, check it, then rename it: an
    interrupted or corrupt download never leaves a file under the archive's name."""
    url = entry.archive.url
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    part = Path(name)
    try:
        try:
            with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=60) as got:
                shutil.copyfileobj(got, out, 1 << 20)
        except (OSError, ValueError, http.client.HTTPException) as error:
            reason = getattr(error, "reason", None) or error
            raise DataError(f"{entry.name}: downloading {url} failed ({reason}). "
                            + _how_to_provide(entry, file, target.parent)) from None
        problem = _verify(entry, part)
        if problem:
            raise DataError(f"{entry.name}: the {target.name} downloaded from {url} {problem}, "
                            "so it was not kept. " + _how_to_provide(entry, file, target.parent))
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def _verify(entry: Published, path: Path) -> str | None:
    """What is wrong with an archive by its recorded size and checksum (None: nothing). With no
    checksum recorded, says so in an UnverifiedArchiveWarning."""
    archive = entry.archive
    size = path.stat().st_size
    if archive.size is not None and size != archive.size:
        return f"has {size:,} bytes, not the {archive.size:,} recorded for it"
    if archive.checksum is None:
        checked = "checked by size only" if archive.size is not None else "unverified"
        warnings.warn(f"{entry.name}: no checksum is recorded for {archive.filename} "
                      f"({archive.url}); it is used {checked}", UnverifiedArchiveWarning,
                      stacklevel=3)
        return None
    algorithm, expected = archive.checksum.split(":")
    digest = _digest(path, algorithm)
    if digest != expected:
        return f"has {algorithm} {digest}, not the {expected} recorded for it"
    return None


def _digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(partial(f.read, 1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _extract(entry: Published, archive: Path, file: str) -> None:
    """Extract into a temporary folder, then move the files into cache/<folder>: an interrupted
    extraction never leaves a truncated data file where the next run would read it."""
    cache = archive.parent
    work = Path(tempfile.mkdtemp(dir=cache, prefix=f".{entry.name}."))
    try:
        try:
            with zipfile.ZipFile(archive) as opened:
                opened.extractall(work)
        except (zipfile.BadZipFile, OSError) as error:
            raise DataError(f"{entry.name}: cannot extract {archive} ({error}). Remove it and "
                            "try again. " + _how_to_provide(entry, file, cache)) from None
        # MovieLens archives hold a folder (ml-100k/u.data); HetRec archives hold bare files.
        source = work / entry.folder if (work / entry.folder).is_dir() else work
        destination = cache / entry.folder
        destination.mkdir(exist_ok=True)
        for path in source.iterdir():
            os.replace(path, destination / path.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
