"""A training run's settings on the command line: the model's flags (generated from
ncae_cuda.model.config.Config), the data and split's, and the run's, parsed and checked before any
data is read. The trainer's flags, and those of every command that starts trainer runs or scores
the same split (tune, experiments, baselines, the benches): one declaration for all of them.
"""
from __future__ import annotations

import argparse
import datetime
import math
from dataclasses import fields
from pathlib import Path

from ..baselines.models import beside_ncae
from ..cli import Parser
from ..data import datasets, splits
from ..data.interactions import DataError
from ..data.table_parser import ENCODING, codecs_name
from ..model.config import Config, SettingError, read_recipe
from ..model.estimator import SHARDS
from ..model.trainer import CHECKPOINT_EVERY
from . import rundir

# Model settings whose CLI default comes from the data: (help of the default).
FROM_THE_DATA = {"feedback": "the data set's own: explicit where it has ratings, implicit for "
                             "HetRec data and files without a rating column"}
# The flags that steer a run but not its result: left out of the run's identity (run.json).
# (A recipe's settings are recorded one by one, not its file's name.)
DEVICES = ("auto", "cpu", "gpu")      # --device: auto is the GPU where there is one
NOT_THE_RESULT = ("out", "resume", "overwrite", "data_dir", "cache_dir", "curves",
                  "cuda_graphs", "config", "checkpoint_every")



# ---------------------------------------------------------------------------------------------
# command line

def _separator(text: str) -> str:
    """--sep: the field separator as written, or a name for one that is hard to type."""
    sep = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";"}.get(text, text)
    if not sep:
        raise argparse.ArgumentTypeError("expected a separator (e.g. , ; tab ::), got ''")
    return sep


def _encoding(text: str) -> str:
    try:
        return codecs_name(text)
    except DataError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_file_flags(parser) -> None:
    """--sep and --encoding, how a data file given by its path is read (reader.read_table)."""
    parser.add_argument("--sep", type=_separator,
                        help="a data file's field separator: a character, 'tab' or '::' "
                             "(default: the first of tab, comma and semicolon on its first "
                             "line)")
    parser.add_argument("--encoding", type=_encoding, default=ENCODING,
                        help="a data file's text encoding, e.g. latin-1 (default: %(default)s)")


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def _float_pair(text: str) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH, got {text!r}")
    return low, high


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return seconds


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def add_settings(p: argparse.ArgumentParser) -> None:
    """A flag for every model setting (Config), its help and default taken from the field."""
    groups = {name: p.add_argument_group(name) for name in ("model", "training", "evaluation")}
    for f in fields(Config):
        meta = f.metadata
        kind = {"ints": int_list, "range": _float_pair}.get(meta["kind"])
        if kind is None and not meta["choices"]:
            kind = float if "float" in str(f.type) else int
        default = None if f.name in FROM_THE_DATA else f.default
        shown = FROM_THE_DATA.get(f.name, None if default is None else _shown(default))
        help_ = meta["help"] + ("" if shown is None else f" (default: {shown})")
        groups[meta["group"]].add_argument(
            _flag(f.name), type=kind, choices=meta["choices"], default=default, help=help_,
            metavar={"ints": "K1,K2,...", "range": "LOW,HIGH"}.get(meta["kind"]))


def add_data_flags(p: argparse.ArgumentParser) -> None:
    """The flags that say what a run trains and scores on (the data set, or files, and the
    split): the trainer's, and those of the commands that start trainer runs or score the
    baselines (the same split by construction)."""
    g = p.add_argument_group("data")
    g.add_argument("--dataset",
                   help="a named data set (see below), or a CSV/TSV file of user,item[,rating"
                        f"[,timestamp]] (default: {datasets.DEFAULT})")
    g.add_argument("--train", type=Path, metavar="FILE",
                   help="your own split instead of --dataset: train on this file, score --test "
                        "(a validation part is --valid, or carved from it by --valid-ratio)")
    g.add_argument("--test", type=Path, metavar="FILE", help="the test part of --train's split")
    g.add_argument("--valid", type=Path, metavar="FILE",
                   help="the validation part of --train's split")
    add_file_flags(g)
    g.add_argument("--data-dir", type=Path,
                   help="folder with an extracted copy of a published data set (default: "
                        f"${datasets.DATA_ENV}; else the download cache)")
    g.add_argument("--cache-dir", type=Path, help="download cache (default: $NCAE_CUDA_CACHE, "
                   "else ~/.cache/ncae_cuda)")
    g.add_argument("--split", choices=(*splits.KINDS, *datasets.split_names()),
                   help="random hold-out, leave-one-out by time, or a data set's own split "
                        "files (ml-100k's u1..u5, ua, ub) (default: random for explicit, loo "
                        "for implicit feedback)")
    g.add_argument("--test-ratio", type=float, default=0.1,
                   help="random split: the share of all entries held out for test (default: "
                        "%(default)g)")
    g.add_argument("--valid-ratio", type=float, default=0.1,
                   help="the share held out for validation: of all entries (random split) or "
                        "of the training file (u1..ub, --train); 0 = no validation, train "
                        "--epochs (default: %(default)g)")
    g.add_argument("--valid-item", choices=splits.VALID_ITEMS, default="random",
                   help="leave-one-out: the validation item is a random other interaction, or "
                        "the latest other one (by time: the test item is the latest, so "
                        "validation then asks for the next item as test does) (default: "
                        "%(default)s)")
    g.add_argument("--data-ratio", type=float, default=1.0,
                   help="the paper's D: keep this share of each row's training entries "
                        "(default: %(default)g)")
    g.add_argument("--split-seed", type=int, default=0,
                   help="seed of the split and the D-sample (default: %(default)s)")


def data_defaults() -> dict:
    """The data flags (add_data_flags) with their defaults, by name."""
    p = argparse.ArgumentParser()
    add_data_flags(p)
    return vars(p.parse_args([]))


def data_flags(args) -> dict:
    """The values of args' data flags (add_data_flags), by name."""
    return {name: getattr(args, name) for name in data_defaults()}


def given_data(args) -> dict:
    """args' data flags that differ from their defaults, by name, as text, but the folders
    (where the data is kept is not what a run is): what another command hands on to the runs
    it starts."""
    return {k: str(getattr(args, k)) for k, default in data_defaults().items()
            if getattr(args, k) != default and k not in ("data_dir", "cache_dir")}


def data_argv(given: dict) -> list[str]:
    """given_data()'s flags as a command line has them."""
    return [x for k, v in given.items() for x in (f"--{k.replace('_', '-')}", v)]


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The trainer's parser (python -m ncae_cuda.train's, with its `description`)."""
    p = Parser(
        prog="python -m ncae_cuda.train", description=description,
        epilog="Data sets: " + ", ".join(datasets.names()) + ". Defaults follow the paper "
               "where it states them.")
    p.add_argument("--config", type=Path, metavar="RECIPE",
                   help="read the model's settings from this TOML file (recipes/ has the ones "
                        "behind the README's results); flags given here override it")
    add_data_flags(p)
    add_settings(p)
    g = p.add_argument_group("run")
    g.add_argument("--device", choices=DEVICES, default="auto",
                   help="auto: the GPU when there is one (default: %(default)s)")
    g.add_argument("--shard", choices=[str(s).lower() for s in SHARDS], default="none",
                   help="columns: one model across the processes of a torch.distributed job "
                        "(launched by torchrun --nproc-per-node R -m ncae_cuda.train ...), each "
                        "holding a share of the columns; on GPUs over NCCL, on CPUs over gloo "
                        "(default: %(default)s: one process)")
    g.add_argument("--cuda-graphs", choices=("on", "off"),
                   help="GPU: replay each training step from a CUDA graph captured once, instead "
                        "of launching its kernels one by one (default: off, until a GPU "
                        "measurement shows it pays)")
    g.add_argument("--baselines", type=beside_ncae, default=(), metavar="M1,M2,...",
                   help="implicit feedback: also these of ease, ials, bpr on the same split, "
                        "each chosen on validation by its grid, refit and scored on test as "
                        "python -m ncae_cuda.baselines does (POP is always there; default: "
                        "none)")
    g.add_argument("--no-refit", dest="refit", action="store_false",
                   help="score test with the best-validation model instead of retraining on "
                        "training + validation")
    g.add_argument("--validation-only", action="store_true",
                   help="select the epoch on validation and stop there: no refit, and the test "
                        "part is never scored (python -m ncae_cuda.tune's trials); metrics.json "
                        "holds the best epoch's validation figures")
    g.add_argument("--curves", action="store_true",
                   help="also score the training (explicit) and test parts after every epoch, "
                        "for learning curves; never used to choose anything")
    g.add_argument("--out", type=Path,
                   help="the run's folder (default: runs/<data set>-<date>-<time>)")
    rundir.add_flags(g, resume="continue the run in --out where it stopped")
    g.add_argument("--checkpoint-every", type=_seconds, default=CHECKPOINT_EVERY,
                   metavar="SECONDS",
                   help="save the run's checkpoint at the end of an epoch once this many seconds "
                        "have passed since the last (and after pre-training and the last epoch): "
                        "the most training a kill costs (default: %(default)g; 0: every epoch)")
    return p


def resolve_defaults(parser, args) -> None:
    """Fill the defaults that depend on the data set and feedback; refuse bad combinations
    with the flag's name, before any data is read."""
    resolve_data(parser, args)
    try:
        config = Config(**model_settings(args)).resolved()
    except SettingError as e:
        parser.error(f"{_flag(e.setting)}: {e.reason}")
    for name in ("based", "weighting", "augment_eps"):       # the defaults, as trained
        setattr(args, name, getattr(config, name))
    if args.baselines and args.feedback != "implicit":
        parser.error("--baselines: the baselines rank items: they are for implicit feedback")
    if args.baselines and args.shard != "none":
        parser.error("--baselines run in one process: leave out --shard")
    if args.baselines and args.validation_only:
        parser.error("--baselines are scored on the test part; --validation-only never scores it")
    if args.validation_only and args.curves:
        parser.error("--curves scores the test part after every epoch; --validation-only never "
                     "scores it")
    rundir.check_flags(parser, args)
    args.out = args.out or new_folder(Path(args.train or args.dataset).stem)


def new_folder(name: str) -> Path:
    """runs/<name>-<date>-<time>, with a suffix where that is taken."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{name}-{stamp}"
    return next(folder for folder in (Path(f"{base}{suffix}")
                                      for suffix in ("", *(f"-{k}" for k in range(2, 99))))
                if not folder.exists())


def resolve_data(parser, args) -> None:
    """The data flags' defaults (add_data_flags), the feedback's where args has none; a bad
    combination is refused with the flag's name, before any data is read."""
    if args.train or args.test or args.valid:
        _check_given_split(parser, args)
    else:
        args.dataset = args.dataset or datasets.DEFAULT
        if args.dataset not in datasets.names() and not datasets.is_file(args.dataset):
            parser.error(f"--dataset {args.dataset}: neither a data set's name nor a file "
                         f"(names: {', '.join(datasets.names())})")
    source = "--train" if args.train else "--dataset"
    try:
        args.feedback = args.feedback or datasets.default_feedback(
            str(args.train or args.dataset), args.sep, args.encoding)
    except DataError as e:
        parser.error(f"{source}: {e}")
    if not args.train:
        args.split = args.split or ("random" if args.feedback == "explicit" else "loo")
        if args.feedback == "implicit" and args.split != "loo":
            parser.error("implicit feedback is evaluated by leave-one-out: use --split loo")
        if args.valid_item != "random" and args.split != "loo":
            parser.error(f"--valid-item {args.valid_item} chooses leave-one-out's validation "
                         "item: use it with --split loo")
        if args.split not in splits.KINDS and not datasets.has_split(args.dataset, args.split):
            parser.error(f"--split {args.split}: {args.dataset} has no such split files (they "
                         "ship with ml-100k); use --split random or loo")
    ratios = [("--test-ratio", args.test_ratio, 0 < args.test_ratio < 1, "in (0, 1)"),
              ("--valid-ratio", args.valid_ratio, 0 <= args.valid_ratio < 1, "in [0, 1)"),
              ("--data-ratio", args.data_ratio, 0 < args.data_ratio <= 1, "in (0, 1]")]
    for flag, value, ok, wanted in ratios:
        if not ok:
            parser.error(f"{flag} must be {wanted}; got {value:g}")
    if args.split == "random" and args.test_ratio + args.valid_ratio >= 1:
        parser.error(f"--test-ratio + --valid-ratio must be < 1 to leave training data; got "
                     f"{args.test_ratio:g} + {args.valid_ratio:g}")
    if args.split_seed < 0:
        parser.error(f"--split-seed must be >= 0; got {args.split_seed}")


def _check_given_split(parser, args) -> None:
    """--train FILE --test FILE [--valid FILE]: the files are there, and no other data source
    or split is named beside them."""
    if not (args.train and args.test):
        parser.error("--train and --test name your own split together (--valid beside them)")
    for flag, other in (("--dataset", args.dataset), ("--split", args.split)):
        if other is not None:
            parser.error(f"{flag} {other}: with --train and --test the data and split are "
                         "those files")
    if args.valid_item != "random":
        parser.error(f"--valid-item {args.valid_item}: with --train and --test the validation "
                     "part is --valid, or carved from --train by --valid-ratio")
    for flag, path in (("--train", args.train), ("--test", args.test), ("--valid", args.valid)):
        if path is not None and not path.is_file():
            parser.error(f"{flag} {path}: no such file")


def model_settings(args) -> dict:
    """The flags that are settings of the model (ncae_cuda.model.config.Config)."""
    return {f.name: getattr(args, f.name) for f in fields(Config) if hasattr(args, f.name)}


def recorded(args) -> dict:
    """Every setting of the run that bears on its result, for run.json and metrics.json: what
    another run needs to repeat it."""
    return {k: list(v) if isinstance(v, tuple) else (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items() if k not in NOT_THE_RESULT and k != "device"}


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The flags, over the recipe's settings where --config names one."""
    args = parser.parse_args(argv)
    if args.config is not None:
        try:
            recipe = read_recipe(args.config)
        except ValueError as e:
            parser.error(f"--config {args.config}: {e}")
        parser.set_defaults(**recipe)
        args = parser.parse_args(argv)
    return args
