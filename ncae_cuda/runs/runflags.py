"""A training run's settings on the command line: the model's flags (generated from
ncae_cuda.model.config.Config), the data and split's (from spec.DataSpec) and the run's (from
spec.RunSpec), parsed into those records and checked before any data is read. The trainer's
flags, and those of every command that starts trainer runs or scores the same split (tune,
experiments, baselines, the benches): one declaration for all of them.
"""
from __future__ import annotations

import argparse
from dataclasses import fields, replace
from pathlib import Path

from ..cli import Parser
from ..data import datasets
from ..model.ann import INDEXES
from ..model.config import DEFAULTS, Config, SettingError, read_recipe
from . import rundir
from .spec import DataSpec, RunSpec, SpecError, identity

# Model settings whose CLI default comes from the data: (help of the default).
FROM_THE_DATA = {"feedback": "the data set's own: explicit where it has ratings, implicit for "
                             "HetRec data and files without a rating column"}


# ---------------------------------------------------------------------------------------------
# the flags, generated from the records' fields

def add_model_file(parser) -> None:
    """The saved model a command reads: the file, or the run folder that holds it (read as
    its file)."""
    parser.add_argument("model", type=lambda text: rundir.model_file(Path(text)),
                        help=f"{rundir.MODEL} written by ncae_cuda.train or NCAE.save, or the "
                             "run folder that holds it")


def add_index(parser) -> None:
    """How a command finds a user's best items: --index exact or approximate."""
    parser.add_argument("--index", choices=INDEXES, default=INDEXES[0],
                        help="exact: every item scored (default); approximate: a faiss "
                             "inner-product index of the items ([ann] extra, CPU only), "
                             "saved beside the model file (MODEL.ann) and rebuilt when the "
                             "model changes")


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


def add_fields(group, spec: type, names=None, helps: dict | None = None) -> None:
    """A flag for each field of `spec` (DataSpec, RunSpec) in `names` (default: every field
    with a flag), in `group`, generated from the field: its default, help, type, choices,
    metavar and action. helps: {name: help} where a command's flag says more than the field's
    (its own device, its own folder)."""
    for f in fields(spec):
        meta = f.metadata
        if not meta or names is not None and f.name not in names:
            continue
        kwargs = {"default": f.default, "help": (helps or {}).get(f.name, meta["help"])}
        if meta["action"]:
            kwargs.update(action=meta["action"], dest=f.name)
        else:
            kwargs.update(type=meta["type"], choices=meta["choices"], metavar=meta["metavar"])
        group.add_argument(meta["flag"] or _flag(f.name), **kwargs)


def add_file_flags(parser) -> None:
    """--sep and --encoding, how a data file given by its path is read (reader.read_table)."""
    add_fields(parser, DataSpec, ("sep", "encoding"))


def add_data_flags(p: argparse.ArgumentParser) -> None:
    """The flags that say what a run trains and scores on (the data set, or files, and the
    split): spec.DataSpec's."""
    add_fields(p.add_argument_group("data"), DataSpec)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The trainer's parser (python -m ncae_cuda.train's, with its `description`)."""
    p = Parser(
        prog="python -m ncae_cuda.train", description=description,
        epilog="Data sets: " + ", ".join(datasets.names()) + ". Defaults follow the paper "
               "where it states them.")
    add_fields(p, RunSpec, ("config",))
    add_data_flags(p)
    add_settings(p)
    add_fields(p.add_argument_group("run"), RunSpec,
               [f.name for f in fields(RunSpec) if f.name not in ("data", "config")])
    return p


# ---------------------------------------------------------------------------------------------
# parsed: the records

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


def data_spec(args) -> DataSpec:
    """args' data flags (add_data_flags), as given."""
    return DataSpec(**{f.name: getattr(args, f.name) for f in fields(DataSpec)})


def from_args(args) -> tuple[RunSpec, Config]:
    """The trainer's flags, parsed, as the run's spec and the model's settings, as given (the
    defaults that depend on the data not yet filled: resolved() fills them)."""
    run = {f.name: getattr(args, f.name) for f in fields(RunSpec) if f.name != "data"}
    return (RunSpec(data=data_spec(args), **run),
            Config(**{f.name: getattr(args, f.name) for f in fields(Config)}))


def given_settings(**settings) -> Config:
    """The model's settings where the trainer's flags give none (the data's defaults left to
    resolved()), with `settings` over them."""
    return replace(DEFAULTS, **{**dict.fromkeys(FROM_THE_DATA), **settings})


def resolved(parser, spec: RunSpec, config: Config) -> tuple[RunSpec, Config]:
    """RunSpec.resolved(config), a bad flag or combination refused by parser.error with the
    flag's name."""
    try:
        return spec.resolved(config)
    except SpecError as e:
        parser.error(str(e))
    except SettingError as e:
        parser.error(f"{_flag(e.setting)}: {e.reason}")


def resolved_data(parser, data: DataSpec, feedback: str | None) -> tuple[DataSpec, str]:
    """DataSpec.resolved(feedback), a bad flag or combination refused by parser.error."""
    try:
        return data.resolved(feedback)
    except SpecError as e:
        parser.error(str(e))


def run_spec(parser, argv: list[str] | None) -> tuple[RunSpec, Config]:
    """The run a command line of the trainer's flags describes, parsed and resolved; a bad flag
    is refused by parser.error."""
    return resolved(parser, *from_args(parse(parser, argv)))


def given_data(data: DataSpec) -> dict:
    """The data flags that differ from their defaults, by name, as text, but the folders (where
    the data is kept is not what a run is): what another command hands on to the runs it
    starts."""
    defaults = DataSpec()
    return {k: str(v) for k, v in identity(data).items() if v != getattr(defaults, k)}


def data_argv(given: dict) -> list[str]:
    """given_data()'s flags as a command line has them."""
    return [x for k, v in given.items() for x in (_flag(k), v)]
