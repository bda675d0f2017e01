"""A training run's settings on the command line: the model's flags (generated from
ncae_cuda.model.config.Config), the data and split's (from spec.DataSpec) and the run's (from
spec.RunSpec), parsed into those records and checked before any data is read. The trainer's
flags, and those of every command that starts trainer runs or scores the same split (tune,
experiments, baselines, the benches): one declaration for all of them, which ncae_cuda.cli
wires into argparse.
"""
from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

from .. import cli
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


def add_file_flags(parser) -> None:
    """--sep and --encoding, how a data file given by its path is read (reader.read_table)."""
    cli.add_fields(parser, DataSpec, ("sep", "encoding"))


def add_data_flags(p) -> None:
    """The flags that say what a run trains and scores on (the data set, or files, and the
    split): spec.DataSpec's."""
    cli.add_fields(p.add_argument_group("data"), DataSpec)


def add_settings(p) -> None:
    """A flag for every model setting (Config), its help and default taken from the field."""
    cli.add_settings(p, Config, FROM_THE_DATA)


def build_parser(description: str | None = None) -> cli.Parser:
    """The trainer's parser (python -m ncae_cuda.train's, with its `description`)."""
    p = cli.Parser(
        prog="python -m ncae_cuda.train", description=description,
        epilog="Data sets: " + ", ".join(datasets.names()) + ". Defaults follow the paper "
               "where it states them.")
    cli.add_fields(p, RunSpec, ("config",))
    add_data_flags(p)
    add_settings(p)
    cli.add_fields(p.add_argument_group("run"), RunSpec,
                   [f.name for f in fields(RunSpec) if f.name not in ("data", "config")])
    return p


# ---------------------------------------------------------------------------------------------
# parsed: the records

def parse(parser, argv: list[str] | None):
    """The flags, over the recipe's settings where --config names one."""
    return cli.parse(parser, argv, read_recipe)


def data_spec(args) -> DataSpec:
    """args' data flags (add_data_flags), as given."""
    return DataSpec(**cli.values(args, DataSpec))


def from_args(args) -> tuple[RunSpec, Config]:
    """The trainer's flags, parsed, as the run's spec and the model's settings, as given (the
    defaults that depend on the data not yet filled: resolved() fills them)."""
    return (RunSpec(data=data_spec(args), **cli.values(args, RunSpec)),
            Config(**cli.values(args, Config)))


def given_settings(**settings) -> Config:
    """The model's settings where the trainer's flags give none (the data's defaults left to
    resolved()), with `settings` over them."""
    return replace(DEFAULTS, **{**dict.fromkeys(FROM_THE_DATA), **settings})


def resolved(spec: RunSpec, config: Config) -> tuple[RunSpec, Config]:
    """RunSpec.resolved(config); SpecError names the flag of a bad value or combination (a
    model's setting's too)."""
    try:
        return spec.resolved(config)
    except SettingError as e:
        raise SpecError(f"{cli.flag(e.setting)}: {e.reason}") from None


def run_spec(parser, argv: list[str] | None) -> tuple[RunSpec, Config]:
    """The run a command line of the trainer's flags describes, parsed and resolved; a bad flag
    is refused by parser.error."""
    return cli.refused(parser, resolved, *from_args(parse(parser, argv)))


def given_data(data: DataSpec) -> dict:
    """The data flags that differ from their defaults, by name, as text, but the folders (where
    the data is kept is not what a run is): what another command hands on to the runs it
    starts."""
    defaults = DataSpec()
    return {k: str(v) for k, v in identity(data).items() if v != getattr(defaults, k)}


def data_argv(given: dict) -> list[str]:
    """given_data()'s flags as a command line has them."""
    return [x for k, v in given.items() for x in (cli.flag(k), v)]
