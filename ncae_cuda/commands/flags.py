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
from dataclasses import dataclass, fields
from pathlib import Path

from .. import cli
from ..data import datasets
from ..errors import RecipeError
from ..model.ann import INDEXES
from ..model.config import Config, as_toml, given_way, read_recipe
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

@dataclass(frozen=True)
class CommandLine:
    """A command line of the trainer's flags, read once (read): what the run takes, and what
    its note (recipe_given_way), refuse_unread and the experiments' checks of it say."""
    args: argparse.Namespace    # the flags, over the recipe's settings less given_way's
    given: dict[str, tuple[str, object]]    # the flags it gives (given_flags)
    recipe: dict                # the settings of the recipe --config names; {} without one
    # the recipe's settings the flags leave unread or contradict, which the run goes without
    # (model.config.given_way: {setting: the destinations of the flags it gives way to})
    given_way: dict[str, tuple[str, ...]]

    def recipe_given_way(self) -> list[tuple[tuple[str, ...], str]]:
        """What of the recipe gives way to the flags (a flag beats its recipe, --variant NCAE-
        its augment_eps), said: for each set of flags it gives way to, (their destinations,
        'FILE sets augment_eps = 0.02, which --variant NCAE- leaves unread or contradicts');
        none without a recipe."""
        given, recipe = self.given, self.recipe
        groups: dict[tuple[str, ...], list[str]] = {}
        for name, dests in self.given_way.items():
            groups.setdefault(dests, []).append(name)
        said = []
        for dests, names in groups.items():
            flags = " ".join(f"{given[dest][0]} {cli.as_written(given[dest][1])}" for dest in dests)
            verbs = ("leaves unread or contradicts" if len(dests) == 1 else
                     "leave unread or contradict")
            settings = ", ".join(f"{name} = {as_toml(recipe[name])}" for name in names)
            said.append((dests, f"{given['config'][1]} sets {settings}, which {flags} {verbs}"))
        return said


def read(argv: list[str] | None, parser: argparse.ArgumentParser | None = None) -> CommandLine:
    """A command line of the trainer's flags, read with `parser` (the trainer's; a new one
    where None): the flags, over the recipe's settings where --config names one, less those
    the flags leave unread or contradict; a bad flag, or a recipe that cannot be read, refused
    by parser.error."""
    parser = parser or build_parser()
    given = given_flags(argv, parser)
    recipe, way = {}, {}
    if "config" in given:
        path = given["config"][1]
        try:
            recipe = read_recipe(path)
        except RecipeError as e:
            parser.error(f"--config {e}")
        way = given_way(recipe, {dest: value for dest, (_, value) in given.items()
                                 if dest in CONFIG_SETTINGS})
    # the recipe's values stand where a flag gives none (argparse's defaults fill only what the
    # namespace lacks), the parser left as it was: its defaults set, a later line read with it
    # would have taken them without --config
    kept = argparse.Namespace(**{name: value for name, value in recipe.items() if name not in way})
    return CommandLine(parser.parse_args(argv, kept), given, recipe, way)


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
    return from_args(read(argv).args)


def given_flags(argv: list[str] | None,
                parser: argparse.ArgumentParser | None = None) -> dict[str, tuple[str, object]]:
    """The trainer's flags a command line gives, {destination: (the flag, its value as the
    trainer reads it: the last given)}: --hidden=8 and --hidden 8 alike; those it leaves out
    absent, though given their default. parser: the trainer's to read them with (a new one
    where None); a bad flag refused by it."""
    parser = parser or build_parser()
    unset = object()        # argparse fills in a default only where the namespace has no value
    args = parser.parse_args(argv, argparse.Namespace(**{a.dest: unset for a in parser._actions}))
    flags = {action.dest: action.option_strings[-1] for action in parser._actions}
    return {dest: (flags[dest], value) for dest, value in vars(args).items() if value is not unset}


def run_spec(parser, argv: list[str] | None) -> tuple[RunSpec, Config]:
    """The run a command line of the trainer's flags describes, parsed and resolved; a bad flag
    is refused by parser.error (one it gives that the run never reads, too). A recipe's setting
    a flag leaves unread or contradicts is left out, with a note (a flag beats its recipe)."""
    line = read(argv, parser)
    for _, said in line.recipe_given_way():
        print(f"note: {said}: left out of the run (a flag beats its recipe)", flush=True)
    spec, config = cli.refused(parser, resolved, *from_args(line.args))
    cli.refused(parser, refuse_unread, spec, line.given)
    return spec, config


def run_flags(argv: list[str]) -> dict:
    """The run a command line of the trainer's flags describes (parsed and checked as
    python -m ncae_cuda.train does), for the programs that start one themselves, the benches:
    what metrics.json holds. A user's mistake raises (NcaeError; SystemExit for a flag)."""
    return protocol.run(*run_spec(build_parser(), argv))
