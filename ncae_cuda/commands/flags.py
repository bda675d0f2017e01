"""A training run's settings on the command line: the model's flags (generated from
ncae_cuda.model.config.Config), the data and split's (from runs.spec.DataSpec) and the run's
(from runs.spec.RunSpec), parsed into those records and checked before any data is read. The
trainer's flags, and those of every command that starts trainer runs or scores the same split
(tune, experiments, baselines, the benches): one declaration for all of them, which
ncae_cuda.cli wires into argparse. The one module the commands share (a flag is the same flag
in each), so it lives beside them.
"""
from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from .. import cli
from ..data import datasets
from ..model.ann import INDEXES
from ..model.config import Config, given_way, read_recipe
from ..runs import protocol, rundir
from ..runs.spec import FROM_THE_DATA, DataSpec, RunSpec, refuse_unread, resolved

CONFIG_SETTINGS = {f.name for f in fields(Config)}


# ---------------------------------------------------------------------------------------------
# the flags, generated from the records' fields

def add_model_file(parser) -> None:
    """The saved model a command reads: the file, or the run folder that holds it (read as
    its file)."""
    parser.add_argument("model", type=lambda text: rundir.model_file(Path(text)),
                        help=f"any model's file (NCAE, a blend or a baseline: the {rundir.MODEL} "
                             "of ncae_cuda.train or of baselines --config, or a model's save()), "
                             "or the run folder that holds it")


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
    """The flags, over the recipe's settings where --config names one, less those the flags
    leave unread or contradict (recipe_given_way)."""
    def kept(path) -> dict:
        recipe = read_recipe(path)
        left_out = given_way(recipe, given_settings(argv))
        return {name: value for name, value in recipe.items() if name not in left_out}
    return cli.parse(parser, argv, kept)


def data_spec(args) -> DataSpec:
    """args' data flags (add_data_flags), as given."""
    return DataSpec(**cli.values(args, DataSpec))


def from_args(args) -> tuple[RunSpec, Config]:
    """The trainer's flags, parsed, as the run's spec and the model's settings, as given (the
    defaults that depend on the data not yet filled: runs.spec.resolved fills them)."""
    return (RunSpec(data=data_spec(args), **cli.values(args, RunSpec)),
            Config(**cli.values(args, Config)))


def trainer_run(argv: list[str]) -> tuple[RunSpec, Config]:
    """The run a command line of the trainer's flags describes, parsed, as given (not
    resolved); a bad flag is refused by the parser."""
    return from_args(parse(build_parser(), argv))


def given_flags(argv: list[str]) -> dict[str, tuple[str, object]]:
    """The trainer's flags a command line gives, {destination: (the flag, its value as the
    trainer reads it: the last given)}: --hidden=8 and --hidden 8 alike; those it leaves out
    absent, though given their default."""
    parser = build_parser()
    unset = object()        # argparse fills in a default only where the namespace has no value
    args = parser.parse_args(argv, argparse.Namespace(**{a.dest: unset for a in parser._actions}))
    flags = {action.dest: action.option_strings[-1] for action in parser._actions}
    return {dest: (flags[dest], value) for dest, value in vars(args).items() if value is not unset}


def given_settings(argv: list[str] | None) -> dict:
    """The model's settings a command line gives as flags (given_flags), {setting: value}."""
    return {dest: value for dest, (_, value) in given_flags(argv).items()
            if dest in CONFIG_SETTINGS}


def recipe_given_way(argv: list[str] | None) -> list[tuple[tuple[str, ...], str]]:
    """The settings of the recipe --config names that the flags given over it leave unread or
    contradict (model.config.given_way: a flag beats its recipe, --variant NCAE- its
    augment_eps), which the run goes without: for each set of flags they give way to, (their
    destinations, 'FILE sets augment_eps = 0.02, which --variant NCAE- leaves unread or
    contradicts'); none without a recipe."""
    given = given_flags(argv)
    if "config" not in given:
        return []
    path = given["config"][1]
    recipe = read_recipe(path)
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, dests in given_way(recipe, given_settings(argv)).items():
        groups.setdefault(dests, []).append(name)
    said = []
    for dests, names in groups.items():
        flags = " ".join(f"{given[dest][0]} {cli.as_written(given[dest][1])}" for dest in dests)
        verbs = "leaves unread or contradicts" if len(dests) == 1 else "leave unread or contradict"
        settings = ", ".join(f"{name} = {cli.as_written(recipe[name])}" for name in names)
        said.append((dests, f"{path} sets {settings}, which {flags} {verbs}"))
    return said


def run_spec(parser, argv: list[str] | None) -> tuple[RunSpec, Config]:
    """The run a command line of the trainer's flags describes, parsed and resolved; a bad flag
    is refused by parser.error (one it gives that the run never reads, too). A recipe's setting
    a flag leaves unread or contradicts is left out, with a note (a flag beats its recipe)."""
    args = parse(parser, argv)
    for _, said in recipe_given_way(argv):
        print(f"note: {said}: left out of the run (a flag beats its recipe)", flush=True)
    spec, config = cli.refused(parser, resolved, *from_args(args))
    cli.refused(parser, refuse_unread, spec, given_flags(argv))
    return spec, config


def run_flags(argv: list[str]) -> dict:
    """The run a command line of the trainer's flags describes (parsed and checked as
    python -m ncae_cuda.train does), for the programs that start one themselves, the benches:
    what metrics.json holds. A user's mistake raises (NcaeError; SystemExit for a flag)."""
    return protocol.run(*run_spec(build_parser(), argv))
