"""What a run is, declared once: the data it trains and scores on with its split (DataSpec), and
how it runs (RunSpec: the device, the folder, refit or not, the baselines beside it), each a
frozen record whose fields carry their flag's help, as the model's settings (Config) carry
theirs. The commands' flags are generated from these fields (ncae_cuda.commands.flags, wired
by ncae_cuda.cli), and the protocol (protocol.py) takes a RunSpec and a Config. Below them: the
settings as given resolved (a bad one named by its flag), and a DataSpec as the data flags of
a command another command starts.
"""
from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ..data import datasets, splits
from ..data.interactions import DataError
from ..data.table_parser import ENCODING, codecs_name
from .. import naming
from ..errors import NcaeError
from ..model.config import DEFAULTS, Config, SettingError
from ..model.estimator import SHARDS
from ..model.trainer import CHECKPOINT_EVERY
from . import effort, rundir
from .comparison import beside_ncae, tuned_by_study

DEVICES = ("auto", "cpu", "gpu")      # --device: auto is the GPU where there is one
IMPLICIT_SPLITS = ("loo", "time")     # the splits that hold out items a user to rank
# Model settings whose default comes from the data (their flag's default None): (help of the
# default)
FROM_THE_DATA = {"feedback": "the data set's own: explicit where it has ratings, implicit for "
                             "HetRec data and files without a rating column"}


class SpecError(NcaeError, ValueError):
    """A flag's value out of range, or two flags that contradict each other: the message names
    the flags."""


def flag(default, help: str, parse=None, choices=None, metavar=None, action=None,
         name: str | None = None, identity: bool = True):
    """A spec's field: its default, its flag's help, the function that parses the flag's text
    (a ValueError's message says what was wrong; ncae_cuda.cli wires it as argparse's type),
    choices, metavar and action of the flag, the flag's name where it is not the field's
    (--no-refit), and whether it bears on the run's result (identity: recorded in run.json and
    metrics.json; where the data is kept, or how often a checkpoint is saved, is not what a run
    is)."""
    return field(default=default, metadata={
        "help": help, "parse": parse, "choices": choices, "metavar": metavar, "action": action,
        "flag": name, "identity": identity})


# ---------------------------------------------------------------------------------------------
# the flags' parse functions: ValueError where the text is not one

def separator(text: str) -> str:
    """--sep: the field separator as written, or a name for one that is hard to type."""
    sep = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";"}.get(text, text)
    if not sep:
        raise ValueError("expected a separator (e.g. , ; tab ::), got ''")
    return sep


def trial_count(text: str) -> int:
    """--baseline-trials: an integer >= 1."""
    value = int(text) if text.strip().isdigit() else 0
    if value < 1:
        raise ValueError(f"expected a number of trials >= 1, got {text!r}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise ValueError(f"expected a number of seconds >= 0, got {text!r}")
    return value


# --shard-timeout's most, in whole seconds: torch.distributed holds a timeout in int64
# nanoseconds (a longer one wraps round and times out at once)
LONGEST_WAIT = (2**63 - 1) // 10**9


def timeout_seconds(text: str) -> float:
    """--shard-timeout: a number of seconds > 0 that torch.distributed can wait."""
    value = seconds(text)
    if not 0 < value <= LONGEST_WAIT:
        raise ValueError(f"expected a number of seconds in (0, {LONGEST_WAIT}], got {text!r}")
    return value


# ---------------------------------------------------------------------------------------------
# the records

@dataclass(frozen=True)
class DataSpec:
    """What a run trains and scores on (a named data set, a file, or the user's own split) and
    how it is split: the trainer's data flags, and those of every command that starts trainer
    runs or scores the baselines (the same split by construction)."""
    dataset: str | None = flag(
        None, "a named data set (see below), or a CSV/TSV file of user,item[,rating"
        f"[,timestamp]] (default: {datasets.DEFAULT})")
    train: Path | None = flag(
        None, "your own split instead of --dataset: train on this file, score --test (a "
        "validation part is --valid, or carved from it by --valid-ratio)", Path, metavar="FILE")
    test: Path | None = flag(None, "the test part of --train's split", Path, metavar="FILE")
    valid: Path | None = flag(None, "the validation part of --train's split", Path,
                              metavar="FILE")
    sep: str | None = flag(None, "a data file's field separator: a character, 'tab' or '::' "
                                 "(default: the first of tab, comma and semicolon on its first "
                                 "line)", separator)
    encoding: str = flag(ENCODING, "a data file's text encoding, e.g. latin-1 (default: "
                                   "%(default)s)", codecs_name)
    data_dir: Path | None = flag(
        None, "folder with an extracted copy of a published data set (default: "
        f"${datasets.DATA_ENV}; else the download cache)", Path, identity=False)
    cache_dir: Path | None = flag(None, "download cache (default: $NCAE_CUDA_CACHE, else "
                                        "~/.cache/ncae_cuda)", Path, identity=False)
    split: str | None = flag(
        None, "random hold-out, leave-one-out by time, one cut by time for everyone (time: "
        "the latest --test-ratio of the interactions are test, the --valid-ratio before them "
        "validation; held-out entries of users or items new at a cut are scored apart), or a "
        "data set's own split files (ml-100k's u1..u5, ua, ub) (default: random for explicit, "
        "loo for implicit feedback)",
        choices=(*splits.KINDS, *datasets.split_names()))
    test_ratio: float = flag(0.1, "random and time splits: the share of all entries held out "
                                  "for test (default: %(default)g)", float)
    valid_ratio: float = flag(
        0.1, "the share held out for validation: of all entries (random and time splits) or of "
        "the training file (u1..ub, --train); 0 = no validation, train --epochs (default: "
        "%(default)g)", float)
    valid_item: str = flag(
        "random", "leave-one-out: the validation item is a random other interaction, or the "
        "latest other one (by time: the test item is the latest, so validation then asks for "
        "the next item as test does) (default: %(default)s)", choices=splits.VALID_ITEMS)
    data_ratio: float = flag(1.0, "the paper's D: keep this share of each row's training "
                                  "entries (default: %(default)g)", float)
    split_seed: int = flag(0, "seed of the split and the D-sample (default: %(default)s)", int)

    def resolved(self, feedback: str | None) -> tuple[DataSpec, str]:
        """The data set's and the split's defaults filled, and the feedback's (the data's own
        where `feedback` is None); SpecError names a bad value or combination, before any data
        is read."""
        spec = self
        if self.train or self.test or self.valid:
            self._check_given_split()
        else:
            spec = replace(spec, dataset=self.dataset or datasets.DEFAULT)
            why = datasets.unknown(spec.dataset)
            if why:
                raise SpecError(f"--dataset {spec.dataset}: {why}")
        source = "--train" if spec.train else "--dataset"
        # (before, accepted and unread: they seemed to say where the data came from)
        if why := datasets.folder_unread(spec.dataset, spec.data_dir, spec.cache_dir,
                                         f"{source} {spec.train or spec.dataset}"):
            raise SpecError(f"{why}: leave it out")
        try:
            feedback = feedback or datasets.default_feedback(
                str(spec.train or spec.dataset), spec.sep, spec.encoding)
        except DataError as e:
            raise SpecError(f"{source}: {e}") from None
        if not spec.train:
            spec = replace(spec, split=spec.split or default_split(feedback))
            if feedback == "implicit" and spec.split not in IMPLICIT_SPLITS:
                raise SpecError("implicit feedback is evaluated by leave-one-out or a time "
                                "split: use --split loo or time")
            if spec.valid_item != "random" and spec.split != "loo":
                raise SpecError(f"--valid-item {spec.valid_item} chooses leave-one-out's "
                                "validation item: use it with --split loo")
            if spec.split not in splits.KINDS and not datasets.has_split(spec.dataset,
                                                                         spec.split):
                raise SpecError(f"--split {spec.split}: {spec.dataset} has no such split files "
                                "(they ship with ml-100k); use --split random, loo or time")
            spec._check_ratios_read()
        ratios = [("--test-ratio", spec.test_ratio, 0 < spec.test_ratio < 1, "in (0, 1)"),
                  ("--valid-ratio", spec.valid_ratio, 0 <= spec.valid_ratio < 1, "in [0, 1)"),
                  ("--data-ratio", spec.data_ratio, 0 < spec.data_ratio <= 1, "in (0, 1]")]
        for name, value, ok, wanted in ratios:
            if not ok:
                raise SpecError(f"{name} must be {wanted}; got {value:g}")
        if spec.split in ("random", "time") and spec.test_ratio + spec.valid_ratio >= 1:
            raise SpecError(f"--test-ratio + --valid-ratio must be < 1 to leave training data; "
                            f"got {spec.test_ratio:g} + {spec.valid_ratio:g}")
        if spec.split_seed < 0:
            raise SpecError(f"--split-seed must be >= 0; got {spec.split_seed}")
        if spec.split_seed != type(self)().split_seed and (why := spec.seed_unread()):
            raise SpecError(f"--split-seed {spec.split_seed}: {why}: leave it out")
        return spec, feedback

    def seed_unread(self) -> str | None:
        """Why no draw reads this split's seed (a split seed given is then refused, not
        ignored), or None where one does: a time split cuts by time, a data set's split files
        and --train's split are their files; the seed then draws only --data-ratio's sample,
        and a validation part carved by --valid-ratio from the files' training part."""
        if self.split in ("random", "loo"):
            return None
        if self.split == "time":
            parts, carved = "--split time cuts by time", False
        elif self.train:
            parts = ("--train, --test and --valid are the parts" if self.valid else
                     "--train and --test are the parts")
            carved = self.valid is None and self.valid_ratio > 0
        else:
            parts, carved = f"--split {self.split}'s parts are its files", self.valid_ratio > 0
        if carved or self.data_ratio < 1:
            return None
        carves = ("" if self.split == "time" else "the validation part --valid-ratio carves "
                  f"from {'--train' if self.train else 'the training part'}, and ")
        return (f"{parts}, and nothing is drawn at random here (the seed draws {carves}"
                "--data-ratio's sample below 1)")

    def _check_ratios_read(self) -> None:
        """A ratio given that --split does not read is refused, not ignored: leave-one-out
        holds out entries of each user, a data set's split files their own test part."""
        defaults, split = type(self)(), self.split
        if split == "loo" and self.test_ratio != defaults.test_ratio:
            raise SpecError(f"--test-ratio {self.test_ratio:g}: --split loo holds out each "
                            "user's latest interaction, not a share of the entries (--split "
                            "time holds out the latest share)")
        if split == "loo" and self.valid_ratio != defaults.valid_ratio:
            raise SpecError(f"--valid-ratio {self.valid_ratio:g}: --split loo holds out a "
                            "validation item of each user with 3 or more interactions, not a "
                            "share of the entries (--valid-item chooses which)")
        if split not in ("random", "time", "loo") and self.test_ratio != defaults.test_ratio:
            raise SpecError(f"--test-ratio {self.test_ratio:g}: --split {split}'s test part is "
                            "its test file")

    def _check_given_split(self) -> None:
        """--train FILE --test FILE [--valid FILE]: the files are there, and no other data
        source or split is named beside them."""
        if not (self.train and self.test):
            raise SpecError("--train and --test name your own split together (--valid beside "
                            "them)")
        for name, other in (("--dataset", self.dataset), ("--split", self.split)):
            if other is not None:
                raise SpecError(f"{name} {other}: with --train and --test the data and split "
                                "are those files")
        if self.valid_item != "random":
            raise SpecError(f"--valid-item {self.valid_item}: with --train and --test the "
                            "validation part is --valid, or carved from --train by "
                            "--valid-ratio")
        defaults = type(self)()             # a ratio given that the files' parts leave unread
        if self.test_ratio != defaults.test_ratio:
            raise SpecError(f"--test-ratio {self.test_ratio:g}: with --train and --test the "
                            "test part is the --test file")
        if self.valid is not None and self.valid_ratio != defaults.valid_ratio:
            raise SpecError(f"--valid-ratio {self.valid_ratio:g}: with --valid the validation "
                            "part is that file")
        for name, path in (("--train", self.train), ("--test", self.test),
                           ("--valid", self.valid)):
            if path is not None and not path.is_file():
                why = "a folder, not a data file" if path.is_dir() else "no such file"
                raise SpecError(f"{name} {path}: {why}")

    def validation_unheld(self) -> str | None:
        """Why this split (resolved) holds out no validation part, or None where it does: a
        run then trains --epochs, and nothing stops it early."""
        if self.valid is None and self.valid_ratio == 0:
            return "--valid-ratio 0 holds out no validation part (the run trains --epochs)"
        return None

    @property
    def name(self) -> str:
        """The data's name in a run folder's: the data set's, or the training file's stem."""
        return Path(self.train or self.dataset).stem


@dataclass(frozen=True)
class RunSpec:
    """How a run runs, beside its data (DataSpec) and the model's settings (Config): the
    trainer's run flags."""
    data: DataSpec = field(default_factory=DataSpec)
    config: Path | None = flag(
        None, "read the model's settings from this TOML file (recipes/ has the ones behind "
        "the README's results); flags given here override it", Path, metavar="RECIPE",
        identity=False)     # a recipe's settings are recorded one by one, not its file's name
    device: str = flag("auto", "auto: the GPU when there is one (default: %(default)s)",
                       choices=DEVICES, identity=False)
    shard: str = flag(
        "none", "columns: one model across the processes of a torch.distributed job "
        "(launched by torchrun --nproc-per-node R -m ncae_cuda.train ...), each holding a "
        "share of the columns; on GPUs over NCCL, on CPUs over gloo (default: %(default)s: one "
        "process)", choices=tuple(str(s).lower() for s in SHARDS))
    shard_timeout: float | None = flag(
        None, "--shard columns: how long a process waits for the others in a step's "
        "collective before it ends the job, so that one that hangs without ending (stopped, a "
        "machine that stops answering) holds the job no longer; more than the longest a "
        "process works alone (reading the data, rank 0 writing the run's files) (default: "
        "torch.distributed's: 30 minutes over gloo, 10 over NCCL)", timeout_seconds,
        metavar="SECONDS", identity=False)
    cuda_graphs: str | None = flag(
        None, "GPU: replay each training step from a CUDA graph captured once, instead of "
        "launching its kernels one by one (default: off, until a GPU measurement shows it "
        "pays)", choices=("on", "off"), identity=False)
    baselines: tuple = flag(
        (), "implicit feedback: also these of ease, ials, bpr, item-knn, rp3beta on the same "
        "split, each chosen on validation by its grid, or at the settings of a recipe given as "
        "ials=runs/tune-ials/best.toml (python -m ncae_cuda.tune --model's: the models tuned "
        "alike), refit (unless --no-refit, as NCAE) and scored on test as python -m "
        "ncae_cuda.baselines does (POP is always there; default: none)", beside_ncae,
        metavar="M1,M2=RECIPE,...")
    baseline_trials: int | None = flag(
        None, "--baselines given no recipe: tune each by python -m ncae_cuda.tune --model with "
        "this many trials on this run's data (in --out/tune-MODEL; a study there is "
        "continued), its best recipe then run as a given one (default: where --config is a "
        "study's best.toml, that study's number of finished trials, so that every model is "
        "tuned alike; else each baseline's grid)", trial_count, metavar="TRIALS")
    warm_start: Path | None = flag(
        None, "start the fits from this model (its model.npz, or a run folder holding one) "
        "instead of a fresh draw: the columns whose ids it knows keep its parameters, new ones "
        "are drawn; hidden, feedback, based, output and loss must be its own; run.json records "
        "the file and its sha256; a lower --lr than a fresh fit's suits it (docs: Data that "
        "grows) (default: a fresh draw)", Path, metavar="MODEL", identity=False)
    refit: bool = flag(True, "score test with the best-validation model instead of retraining "
                             "on training + validation", action="store_false",
                       name="--no-refit")
    validation_only: bool = flag(
        False, "select the epoch on validation and stop there: no refit, and the test part is "
        "never scored (python -m ncae_cuda.tune's trials); metrics.json holds the best "
        "epoch's validation figures", action="store_true")
    curves: bool = flag(False, "also score the training (explicit) and test parts after every "
                               "epoch, for learning curves; never used to choose anything",
                        # of the run: its history holds the figures, and a resume that changed
                        # it would leave them for only some of the epochs
                        action="store_true")
    out: Path | None = flag(None, "the run's folder (default: runs/<data set>-<date>-<time>)",
                            Path, identity=False)
    resume: bool = flag(False, "continue the run in --out where it stopped",
                        action="store_true", identity=False)
    overwrite: bool = flag(False, "start over in an --out that holds another run's files: "
                                  "they are replaced once the new run has finished, and kept "
                                  "where it is refused or stopped", action="store_true",
                           identity=False)
    checkpoint_every: float = flag(
        CHECKPOINT_EVERY, "save the run's checkpoint at the end of an epoch once this many "
        "seconds have passed since the last (and after pre-training and the last epoch): the "
        "most training a kill costs (default: %(default)g; 0: every epoch)", seconds,
        metavar="SECONDS", identity=False)

    def resolved(self, config: Config) -> tuple[RunSpec, Config]:
        """The defaults that depend on the data set and the feedback filled, in the spec and in
        the model's settings as given (Config's own defaults are filled where the model is
        made: the record keeps what was given); SpecError, or the settings' SettingError,
        refuses a bad combination before any data is read."""
        data, feedback = self.data.resolved(config.feedback)
        config = replace(config, feedback=feedback)
        trained = config.resolved()
        config = replace(config, **{name: getattr(trained, name)        # the defaults, as
                                    for name in ("based", "weighting", "augment_eps")})  # trained
        if self.baselines and config.feedback != "implicit":
            raise SpecError("--baselines: the baselines rank items: they are for implicit "
                            "feedback")
        if self.baselines and self.shard != "none":
            raise SpecError("--baselines run in one process: leave out --shard")
        if self.shard != "none" and self.out is None:
            # (before, each process dated a folder of its own, a second apart or one taken
            # given a suffix, and the ranks' checkpoint files were split among them)
            raise SpecError("--shard columns: name the run's folder with --out, the same for "
                            "every process (a folder every machine sees, or the same path on "
                            "each)")
        if self.shard_timeout is not None and self.shard == "none":
            raise SpecError("--shard-timeout: is for --shard columns")
        if config.based == "both" and data.data_ratio < 1:
            # (the paper's D samples each row of the one model; before, the run started and
            # failed in splits.subsample: "based must be 'user' or 'item', not 'both'")
            raise SpecError(f"--data-ratio {data.data_ratio:g}: keeps a share of each row's "
                            "training entries, and based both blends an item- and a user-based "
                            "NCAE, whose rows differ: give --based item or user")
        if config.based == "both" and self.shard != "none":
            raise SpecError("--based both trains its two NCAEs in one process: leave out "
                            "--shard")
        if self.baselines and self.validation_only:
            raise SpecError("--baselines are scored on the test part; --validation-only never "
                            "scores it")
        if self.resume and self.overwrite:
            # (before, the run resumed and --overwrite was ignored, unsaid)
            raise SpecError("--resume continues the run in --out, --overwrite starts another "
                            "there: give one")
        if self.validation_only and self.curves:
            raise SpecError("--curves scores the test part after every epoch; "
                            "--validation-only never scores it")
        if self.baseline_trials and not self.baselines:
            raise SpecError("--baseline-trials: the trials of the --baselines' studies: name "
                            "the baselines")
        study = effort.of_study(self.config)
        trials = self.baseline_trials or (study["trials"] if study and self.baselines
                                          else None)
        if trials and tuned_by_study(self.baselines):
            self._check_scored_alike(data, feedback)
        spec = replace(self, data=data, warm_start=self.warm_start and self.parent_model(),
                       baseline_trials=trials).with_folder(data.name)
        if spec.warm_start and spec.warm_start.resolve() == rundir.model_file(spec.out).resolve():
            # with --overwrite the run would replace the model it starts from (run.json then
            # recording the old file's sha256 under the new one's path)
            raise SpecError(f"--warm-start {self.warm_start}: the model in --out {spec.out}, "
                            "which this run would replace: give the new run another --out")
        return spec, config

    def _check_scored_alike(self, data: DataSpec, feedback: str) -> None:
        """SpecError where the baselines' studies beside NCAE (protocol.tuned_recipe) cannot
        score their trials as --config's study scored NCAE's (effort.scoring): a study of
        explicit feedback, or this run's data (`data`, resolved) other than the study's, the
        split seed aside (the studies take the study's). Before, they were tuned on this run's
        validation part, another than NCAE's, and the table said every model was tuned
        alike."""
        scored = effort.scoring(self.config)
        if not scored:
            return
        if "@" not in scored["metric"]:
            raise SpecError(f"--baselines: --config's study scored NCAE by {scored['metric']}, "
                            "and the baselines' studies score a ranking figure: tune NCAE on "
                            "implicit feedback, or give each baseline a recipe")
        if "data" not in scored:                 # a study's record before it held its data
            return
        study, run = ({k: v for k, v in flags.items() if k != "split_seed"}
                      for flags in (scored["data"], as_used(given_data(data), feedback)))
        if located(study) != located(run):
            said = [" ".join(data_argv(flags)) or "the default data" for flags in (study, run)]
            raise SpecError(f"--baselines: --config's study tuned NCAE on {said[0]}, and this "
                            f"run reads {said[1]}: give the study's data flags (any split "
                            "seed), so that the baselines' studies score the validation part "
                            "NCAE's did")

    def parent_model(self) -> Path:
        """--warm-start's model file: the path given, or the model.npz in the folder given;
        SpecError where there is none."""
        path = rundir.model_file(self.warm_start)
        if not path.is_file():
            raise SpecError(f"--warm-start {self.warm_start}: no such model file (a model.npz, "
                            "or a run folder holding one)")
        return path

    def with_folder(self, name: str) -> RunSpec:
        """--out, or where none is given, a new folder runs/<name>-<date>-<time>; SpecError
        where --resume has no folder to continue."""
        if self.resume and self.out is None:
            raise SpecError("--resume continues the run in --out: name it")
        return replace(self, out=self.out or new_folder(name))


def new_folder(name: str) -> Path:
    """runs/<name>-<date>-<time>, with a suffix where that is taken."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{name}-{stamp}"
    return next(folder for folder in (Path(f"{base}{suffix}")
                                      for suffix in ("", *(f"-{k}" for k in range(2, 99))))
                if not folder.exists())


def identity(spec) -> dict:
    """The fields of a spec (DataSpec, RunSpec but its data) that bear on a run's result."""
    return {f.name: getattr(spec, f.name) for f in fields(spec)
            if f.metadata and f.metadata["identity"]}


def recorded(spec: RunSpec, config: Config) -> dict:
    """Every setting of the run that bears on its result, for run.json and metrics.json: what
    another run needs to repeat it (the data's, the model's as given, the run's)."""
    model = {f.name: getattr(config, f.name) for f in fields(Config)}
    return as_recorded({**identity(spec.data), **model, **identity(spec)})


def as_recorded(settings: dict) -> dict:
    """Settings as a run's record holds them: tuples as lists, paths as text."""
    return {k: list(v) if isinstance(v, tuple) else (str(v) if isinstance(v, Path) else v)
            for k, v in settings.items()}


# ---------------------------------------------------------------------------------------------
# a run's settings as given, resolved, and handed on to a command another command starts

def given_settings(**settings) -> Config:
    """The model's settings where the trainer's flags give none (the data's defaults left to
    resolved()), with `settings` over them."""
    return replace(DEFAULTS, **{**dict.fromkeys(FROM_THE_DATA), **settings})


def resolved(spec: RunSpec, config: Config) -> tuple[RunSpec, Config]:
    """RunSpec.resolved(config); SpecError names the flag of a bad value or combination (a
    model's setting's too)."""
    return flag_named(spec.resolved, config)


def flag_named(call, *args, given_by: str | None = None):
    """call(*args), a model's setting's SettingError it raises a SpecError naming the setting's
    flag, each value in it as the flag is written: "--cutoffs: must be positive integers, e.g.
    10,100; got 0", as every command says it. given_by: the flag that gave the values, where it
    is not the setting's own (experiments topm's --ms, its runs' --cutoffs)."""
    try:
        return call(*args)
    except SettingError as e:
        raise SpecError(f"{given_by or naming.flag(e.setting)}: {e.reason_as_written()}") from None


def refuse_unread(spec: RunSpec, given: dict) -> None:
    """SpecError naming a flag a command line gives (`given`: commands.flags.given_flags')
    that the run of `spec` (resolved) never reads: --patience without a validation part. A
    recipe's patience is not refused: a recipe is a whole, run on any split."""
    if "patience" in given and (why := spec.data.validation_unheld()):
        flag, value = given["patience"]
        raise SpecError(f"{flag} {value}: stops on the validation score, and {why}: leave it "
                        "out")


def given_data(data: DataSpec) -> dict:
    """The data flags that differ from their defaults, by name, as text, but the folders (where
    the data is kept is not what a run is): what another command hands on to the runs it
    starts."""
    defaults = DataSpec()
    return {k: str(v) for k, v in identity(data).items() if v != getattr(defaults, k)}


def default_split(feedback: str) -> str:
    """The split where --split is not given: random hold-out for explicit feedback,
    leave-one-out for implicit."""
    return "random" if feedback == "explicit" else "loo"


def as_used(given: dict, feedback: str) -> dict:
    """given_data()'s flags less those at the value their absence resolves to (--dataset
    synthetic; --split random of explicit `feedback`): one data and split, however a command
    spells them."""
    implied = {"dataset": datasets.DEFAULT, "split": default_split(feedback)}
    return {k: v for k, v in given.items() if implied.get(k) != v}


def located(given: dict) -> dict:
    """given_data()'s flags with each file they name (a data set's, a part's) as its absolute
    path: one file however a command spells it, from wherever it runs."""
    def where(name: str, value: str) -> str:
        named = name in ("dataset", "train", "valid", "test") and value not in datasets.names()
        return str(Path(value).resolve()) if named and Path(value).is_file() else value
    return {k: where(k, v) for k, v in given.items()}


def data_argv(given: dict) -> list[str]:
    """given_data()'s flags as a command line has them."""
    return [x for k, v in given.items() for x in (naming.flag(k), v)]
