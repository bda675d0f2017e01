"""A tuning study's machinery, below python -m ncae_cuda.tune: what a study tunes (its
TuneSpec's recipe, space, data and score, checked), the study (in its storage:
study_storage.py), and its trials: a worker's loop, each trial a trainer run scored on
validation, the trials of dead workers marked failed, a full disk stopping the study.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import io
import math
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from numba.core import event as numba_event

from ..data.interactions import DataError
from ..errors import RecipeError
from ..model import stopping
from ..model.blend import MEMBERS
from ..model.config import DEFAULTS, Config, SettingError, checked_cutoffs, read_where
from ..model.estimator import OutOfMemory
from ..model.loop import Diverged
from ..model.modelfile import differences, json_ready
from ..ops import BackendUnavailable, backend_name, get_backend
from . import factory, pool, protocol, rundir, space
from .spec import (RunSpec, SpecError, as_used, data_argv, flag_named, given_data,
                   given_settings, resolved)
from .study_storage import POLL, TuneError, _shown, import_optuna
from .select_test import epochs_text, select_refit_test
from .tune_spec import NCAE, TuneSpec

PRUNE_AFTER_TRIALS = 5           # the pruners compare a trial with at least this many earlier
PRUNE_AFTER_EPOCHS = 10          # ones, and never before this epoch
FAILS_IN_A_ROW = 10              # a worker whose trials all fail this often stops
# --metric: the figures at the last cutoff an implicit study may be scored by (the first: the
# one a trial's early stopping follows, Config.selection_metric)
RANKING_FIGURES = ("ndcg", "recall")
TRIALS, WORKERS, ASK = "trials", "workers", ".ask"
COMPILED = "compile_seconds"     # a trial's note: its seconds of Numba's compile (CompileClock)
# what a trial's run can fail of, its settings' fault: the trial fails, the study goes on
TRIAL_ERRORS = (SettingError, DataError, rundir.RunFolderError, BackendUnavailable, Diverged,
                OutOfMemory)
# ...but a full disk is no trial's fault: it stops the study (errno.EDQUOT: a quota's)
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# how a baseline's trial reads its data: implicit feedback, a user's row each (as the
# baselines command and the trainer's --baselines read it)
BASELINE_DATA = {"feedback": "implicit", "based": "user"}
HOST = socket.gethostname()


# ---------------------------------------------------------------------------------------------
# what a command tunes: the recipe, the space, the data, the score and the study

@dataclass
class Setup:
    recipe: dict                   # the settings the space leaves
    dimensions: list               # the space (space.Dimension)
    metric: str                    # the validation figure, e.g. rmse or ndcg@100
    higher: bool                   # whether more is better
    data: dict                     # the data flags given (not their defaults, nor folders)
    split_seeds: tuple             # a trial's score: the mean over these splits' validation
    storage: str                   # how the storage is shown (no password)
    study: str
    feedback: str = DEFAULTS.feedback   # the trials' (the recipe's, or else the data's)
    model: str = NCAE                   # what the trials fit (ncae_cuda.runs.factory.MODELS)
    cutoffs: tuple = DEFAULTS.cutoffs   # a baseline's trials' (NCAE's: the recipe's)

    def identity(self, spec: TuneSpec) -> dict:
        """What makes two commands one study: their trials are comparable, pruned alike, and
        timed alike (as many workers sharing the cores, on one backend: the minutes tune.json
        and the baselines tuned beside it follow) (NCAE's studies as they were before other
        models were tuned; a dimension's kind follows its name)."""
        return json_ready({"metric": self.metric, "data": as_used(self.data, self.feedback),
                           "recipe": self.recipe,
                           "space": [{k: v for k, v in asdict(d).items() if k != "integer"}
                                     for d in self.dimensions], "seed": spec.seed,
                           "split_seeds": self.split_seeds, **run_by(spec),
                           **({} if self.model == NCAE else {"model": self.model})})

    @property
    def base(self) -> dict:
        """The settings a trial's are drawn over: the recipe, and NCAE's feedback (under)."""
        return under(self.model, self.recipe, self.feedback)

    @property
    def step(self) -> str | None:
        """What a trial's fit counts and chooses on validation, as its lines name it (the
        model's Model.step): NCAE's epochs, iALS's and BPR's iterations; None for a model
        solved at once."""
        return factory.step(self.model)

    def data_text(self) -> str:
        """The data flags given, as a command line has them."""
        return " ".join(data_argv(self.data))


def run_by(spec: TuneSpec) -> dict:
    """How a study's trials run: their pruner, the workers sharing the cores, the backend (auto
    resolved): each joined a study's identity after the first studies were made."""
    return {"pruner": spec.pruner, "jobs": spec.jobs, "device": backend_name(spec.device)}


def setup(spec: TuneSpec) -> Setup:
    """What the study tunes, each part checked; SpecError names the flag that is wrong, and
    BackendUnavailable a --device that is not here."""
    # before any work: every trial would fail on it (before, ten did, and the command asked
    # whether the space's range was too wide)
    device = backend_name(spec.device)
    try:
        recipe = factory.read_recipe(spec.recipe) if spec.recipe else {}
    except RecipeError as e:
        raise SpecError(f"--config {e}") from None
    model = recipe.pop("model", NCAE)
    if spec.model is not None and spec.recipe and spec.model != model:
        raise SpecError(f"--model {spec.model}: --config {spec.recipe} is a recipe of {model}")
    named = f"--model {spec.model}" if spec.model else f"--config {spec.recipe}: a recipe of"
    model = spec.model or model
    if model not in space.TUNED:
        raise SpecError(f"{named} {model}: it has no setting to tune (tuned: "
                        f"{', '.join(space.TUNED)})")
    probe, config = trainer_spec(spec, recipe if model == NCAE else BASELINE_DATA, {},
                                 spec.out / TRIALS)
    if model == NCAE and spec.cutoffs:
        raise SpecError(f"--cutoffs: an NCAE study's are its recipe's (cutoffs = "
                        f"{list(config.cutoffs)}); --cutoffs gives a baseline's, which its "
                        "recipe does not hold")
    if spec.cutoffs:    # by the models' rule, said once (before, first as a note's reason)
        flag_named(checked_cutoffs, spec.cutoffs)
    with contextlib.redirect_stdout(io.StringIO()):          # each trial says how it was read
        data, split = protocol.prepare(probe, config, device)
    # a trial is scored on validation: without it every trial would fail (before, ten did, and
    # the command asked whether the space's range was too wide)
    protocol.refuse_without_validation(probe.data, data, split, "score the trials on")
    default = space.default(config.feedback, model, config.loss)
    named = (f"--space {spec.space}" if spec.space else
             f"the default space (ncae_cuda/runs/spaces/{default.name})")
    try:
        tables = space.read_tables(spec.space or default)
    except ValueError as e:
        raise SpecError(f"{named}: {e}") from None
    timed = [name for name in space.TIMED if name in tables]
    if model != NCAE:                   # the recency weights a baseline's recipe scores by
        config = replace(config, **{k: v for k, v in recipe.items() if k in space.TIMED},
                         **({"cutoffs": tuple(spec.cutoffs)} if spec.cutoffs else {}))
    unweighted = (_unweighted(spec, config, split) if timed or config.recency_boost
                  else None)
    if timed and unweighted:
        tables = {k: v for k, v in tables.items() if k not in timed}
        if spec.worker is None:
            fixed = ", ".join(f"{name} {getattr(config, name):g}" for name in timed)
            print(f"{', '.join(timed)}: not searched ({unweighted}): each trial has the "
                  f"recipe's {fixed}", flush=True)
    base = under(model, recipe, config.feedback)
    if spec.space is None and model == NCAE:
        tables = _without_given_way(spec, tables, base)
    try:
        dimensions = space.dimensions(tables, base, model)
    except ValueError as e:
        raise SpecError(f"{named}: {e}") from None
    for name in tables:
        if (where := read_where(name, tables)) and spec.worker is None:
            print(f"{name}: drawn only where {where}; elsewhere unread, at its default "
                  f"{space.searched(model).defaults[name]:g}", flush=True)
    metric, higher = selection(spec.metric, config.resolved())
    seeds = ",".join(map(str, spec.split_seeds))
    if spec.split_seeds and min(spec.split_seeds) < 0:
        raise SpecError(f"--split-seeds must be >= 0; got {seeds}")
    if len(set(spec.split_seeds)) < len(spec.split_seeds):
        raise SpecError("--split-seeds: each split once")
    given = given_data(spec.data)
    if spec.split_seeds and "split_seed" in given:
        raise SpecError("--split-seed and --split-seeds: give one")
    if spec.split_seeds and (why := probe.data.seed_unread()):
        # (before, each trial fitted the one split once a seed, and its score was their mean)
        raise SpecError(f"--split-seeds {seeds}: {why}: each seed makes the same split: leave "
                        "them out")
    return Setup(recipe, dimensions, metric, higher, given,
                 spec.split_seeds or (probe.data.split_seed,), _shown(spec),
                 spec.study, config.feedback, model, config.cutoffs)


def _without_given_way(spec: TuneSpec, tables: dict, base: dict) -> dict:
    """The package's space `tables` less the settings the recipe `base` leaves unread or holds
    at one value (space.left_out: NCAE-'s c0), said in a line: the package's space is no
    user's choice (a space of the user's naming one is refused)."""
    left_out = space.left_out(tables, base)
    by_recipe: dict[tuple[str, ...], list[str]] = {}
    for name, recipe_settings in left_out.items():
        by_recipe.setdefault(recipe_settings, []).append(name)
    for recipe_settings, names in by_recipe.items():
        if spec.worker is None:
            leave, hold = ("leaves", "holds") if len(recipe_settings) == 1 else ("leave", "hold")
            them = "it" if len(names) == 1 else "them"
            print(f"{', '.join(names)}: not searched (the recipe's "
                  f"{space.shown({k: base[k] for k in recipe_settings})} {leave} {them} unread "
                  f"or {hold} {them} at one value)", flush=True)
    return {name: table for name, table in tables.items() if name not in left_out}


def under(model: str, recipe: dict, feedback: str) -> dict:
    """The settings a space's values are checked on top of: the recipe, and for NCAE the
    trials' feedback (a baseline's is always implicit, and no setting of it)."""
    return recipe if model != NCAE else {**recipe, "feedback": feedback}


def selection(metric: str | None, config: Config) -> tuple[str, bool]:
    """(the validation figure a trial is scored by, whether more is better): the model's own
    (Config.selection_metric), or for implicit feedback `metric`'s (--metric) at the last
    cutoff; SpecError where `metric` is given for explicit feedback."""
    if metric is None:
        return config.selection_metric
    if not config.implicit:
        raise SpecError(f"--metric {metric}: explicit feedback is scored by RMSE; --metric "
                        "chooses among the ranking figures of implicit feedback")
    return f"{metric}@{config.cutoffs[-1]}", True


def _unweighted(spec: TuneSpec, config: Config, split) -> str | None:
    """Why the trials' model cannot weigh a user's interactions by their time (recency_boost):
    its settings, or data without timestamps (`split`: as a trial reads them); None where it
    can.
    SpecError where the recipe weighs by time and the data has no timestamps: every trial
    would fail."""
    try:
        replace(config, recency_boost=1.0).resolved()
    except SettingError as e:
        return f"{e.setting} {e.reason}"
    if split.train.timestamps is not None:
        return None
    if config.recency_boost:
        raise SpecError(f"--config {spec.recipe}: recency_boost {config.recency_boost:g} weighs "
                        "a user's interactions by their time, and the data has no timestamps: "
                        "set recency_boost = 0 (e.g. recipes/ml-100k-implicit-no-time.toml)")
    return "the data has no timestamps"


def trainer_spec(spec: TuneSpec, recipe: dict, settings: dict, out: Path,
                 split_seed: int | None = None) -> tuple[RunSpec, Config]:
    """A trial's run, resolved as the trainer resolves its flags: the study's data (split_seed,
    where given, for its split seed), device, the trial's folder, validation only; the model's
    settings: `recipe` (a trial's: Setup.base), the trial's settings over it, the study's
    seed. SpecError names a data flag that is wrong."""
    data = spec.data if split_seed is None else replace(spec.data, split_seed=split_seed)
    run = RunSpec(data=data, device=spec.device, out=out, validation_only=True)
    config = given_settings(**space.trial_point(recipe, settings), seed=spec.seed)
    return resolved(run, config)


def open_study(spec: TuneSpec, found: Setup, storage):
    """The study, made where it is not; TuneError where it holds another command's trials."""
    optuna = import_optuna()
    study = optuna.create_study(storage=storage, study_name=found.study, load_if_exists=True,
                                direction="maximize" if found.higher else "minimize",
                                pruner=_pruner(optuna, spec.pruner))
    identity = found.identity(spec)
    made = study.user_attrs.get("ncae_cuda")
    if made is not None and not run_by(spec).keys() <= made.keys():
        # a study made before its pruner, workers or device were recorded: this command's,
        # from now on (before, each command ran by its own and tune.json said the last's)
        made = {**run_by(spec), **made}
        study.set_user_attr("ncae_cuda", made)
    if made is None:
        study.set_user_attr("ncae_cuda", identity)
        point = space.recipe_point(found.dimensions, found.base, found.model)
        study.enqueue_trial(point, skip_if_exists=True)   # (two machines may both make it)
        unread = space.unread_in(found.dimensions, point, found.base, found.model)
        outside = [d.name for d in found.dimensions
                   if d.name not in point and d.name not in unread]
        if outside:
            # without --config, the first trial is the defaults'
            recipe = "the recipe" if spec.recipe else "the defaults"
            whose = f"{recipe}'s" if spec.recipe else f"{recipe}'"
            print(f"note: {whose} {', '.join(outside)} outside the space: the first trial "
                  f"draws them, so the best may fall behind {recipe} on validation", flush=True)
        return study
    # a study made before its data was recorded as used may spell out a default (--split
    # random): the same data and split
    made = {**made, "data": as_used(made["data"], found.feedback)}
    if made != identity:
        changed = "; ".join(_changes(made, identity)[:3])
        # (an --out holds one study's trials: another --study there is refused; a database
        # holds many, each of its --study)
        other = "--out" if spec.storage is None else "--study and --out"
        raise TuneError(f"study {found.study} in {found.storage} tunes other settings "
                        f"({changed}): tune with those, choose another {other}, or start over "
                        "with --overwrite")
    return study


def _changes(made: dict, identity: dict) -> list[str]:
    """What differs between a study's identity and this command's, in a few words: the space by
    its settings, those that one of them searches alone named, the others' changed bounds
    given (before, both spaces were written out whole, on one line)."""
    before, now = ({d["name"]: d for d in study["space"]} for study in (made, identity))
    kept = [name for name in now if name in before]
    said = [f"space: {', '.join(names)} {what}"
            for names, what in (([n for n in before if n not in now], "no longer searched"),
                                ([n for n in now if n not in before], "searched now")) if names]
    said += differences({n: before[n] for n in kept}, {n: now[n] for n in kept}, "space.")
    if not said and list(before) != list(now):
        said = ["space: the same settings in another order"]
    return differences({**made, "space": None}, {**identity, "space": None}) + said


def _pruner(optuna, name: str):
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=PRUNE_AFTER_TRIALS,
                                           n_warmup_steps=PRUNE_AFTER_EPOCHS)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=PRUNE_AFTER_EPOCHS)
    return optuna.pruners.NopPruner()


def retry_recipe(study, found: Setup) -> int | None:
    """Where every trial of the recipe's own values (the one enqueued trial of a study, its
    first) has failed, e.g. its worker died or its disk was full: they are enqueued again, so
    the best is never behind the recipe. Once a command, and only where no trial of them is
    waiting, running or finished: a recipe that always fails costs a trial a rerun, never a
    loop. The failed trial's number, where enqueued."""
    from optuna.trial import TrialState
    recipe = [t for t in study.get_trials(deepcopy=False) if "fixed_params" in t.system_attrs]
    if not recipe or any(t.state != TrialState.FAIL for t in recipe):
        return None
    study.enqueue_trial(space.recipe_point(found.dimensions, found.base, found.model))
    return recipe[-1].number


# ---------------------------------------------------------------------------------------------
# the study's trials

@dataclass
class Census:
    finished: int                  # complete or pruned
    running: int
    failed: int
    total: int
    seconds: list                  # of the finished trials


def census(study) -> Census:
    """The study's trials by state, once those whose worker died are marked failed."""
    from optuna.trial import TrialState
    fail_dead_trials(study)
    trials = study.get_trials(deepcopy=False)
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    return Census(len(finished), sum(t.state == TrialState.RUNNING for t in trials),
                  sum(t.state == TrialState.FAIL for t in trials), len(trials),
                  [own_seconds(t) for t in finished])


def own_seconds(trial) -> float:
    """A finished trial's wall time, its Numba compile left out (CompileClock)."""
    return ((trial.datetime_complete - trial.datetime_start).total_seconds()
            - trial.user_attrs.get(COMPILED, 0.0))


class CompileClock(numba_event.TimingListener):
    """The seconds Numba has compiled for in this process while installed (its compile event
    fires for a compile, not for a load from its cache): a fresh install's first trial
    compiles the kernels, which a trial's time and the budget leave out, so that every model's
    study is clocked alike (before, NCAE's first trial paid 10 s of compile on a fresh install
    and a baseline's hardly any)."""

    @property
    def seconds(self) -> float:
        return self.duration if self.done else 0.0


def fail_dead_trials(study) -> None:
    """Mark failed the running trials whose worker has died: on this machine, those whose
    worker's lock is free; elsewhere (a database storage), those whose heartbeat is stale."""
    optuna = import_optuna()
    from optuna.trial import TrialState
    optuna.storages.fail_stale_trials(study)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get("worker")
        if worker and worker["host"] == HOST and not alive(Path(worker["lock"])):
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)


def alive(lock: Path) -> bool:
    """Whether the worker process holding `lock` still runs."""
    if not lock.exists():
        return False
    try:
        rundir.lock(lock).close()
    except rundir.Held:
        return True
    return False


class AskLock:
    """Held by one worker of this --out at a time, from its look at the study to the values of
    its next trial drawn: the workers of a machine neither run more than --trials nor draw
    from one state of the sampler."""

    def __init__(self, folder: Path):
        self.file = open(folder / ASK, "a")

    def __enter__(self) -> AskLock:
        rundir.exclusive(self.file)
        return self

    def release(self) -> None:
        rundir.unlock(self.file)

    def __exit__(self, *error) -> None:
        self.release()


def work(spec: TuneSpec, found: Setup, study) -> None:
    """A worker: trials until the study has spec.trials finished ones, or its budget has
    passed (after its first), Numba's compile left out of it (CompileClock)."""
    compiling = CompileClock()
    with numba_event.install_listener("numba:compile", compiling):
        _work(spec, found, study, compiling)


def _work(spec: TuneSpec, found: Setup, study, compiling: CompileClock) -> None:
    optuna = import_optuna()
    (spec.out / WORKERS).mkdir(parents=True, exist_ok=True)
    held = rundir.lock(spec.out / WORKERS / f"{HOST}-{os.getpid()}.lock")
    me = {"host": HOST, "pid": os.getpid(), "lock": str(Path(held.name).resolve())}
    asking, fails, started = AskLock(spec.out), 0, 0
    while True:
        if stopping.asked():            # between trials (tune_study.work_on): none under way
            return
        clocked = replace(spec, started=spec.started + compiling.seconds)
        with asking:
            now = census(study)
            if now.finished >= spec.trials or started and budget_left(clocked) <= 0:
                return
            if now.finished + now.running < spec.trials:
                started += 1
                # seeded by the trials so far: one worker draws the same each time, and two
                # never from one state
                study.sampler = optuna.samplers.TPESampler(seed=spec.seed + now.total,
                                                           constant_liar=True)
                outcome = []
                study.optimize(lambda trial: objective(clocked, found, study, trial, me,
                                                       asking, outcome, compiling),
                               n_trials=1, catch=())
                fails = fails + 1 if outcome else 0
                if fails >= FAILS_IN_A_ROW:
                    raise TuneError(f"{fails} trials in a row failed, the last: {outcome[0]} "
                                    f"(see their log.txt under {spec.out / TRIALS}): is the "
                                    "space's range too wide?")
                continue
        if budget_left(clocked) <= 0:  # the trials left run in other workers: none to start
            return
        time.sleep(POLL)              # ... or wait for them, in case they fail


def objective(spec: TuneSpec, found: Setup, study, trial, me: dict, asking: AskLock,
              outcome: list, compiling: CompileClock) -> float:
    """A trial's validation score: its trainer run (one a split, their mean), pruned where it
    falls behind; a trial that fails appends its error to `outcome`. Its seconds of Numba's
    compile (`compiling`'s) are noted, and left out of its time and spec's clock."""
    optuna = import_optuna()
    trial.set_user_attr("worker", me)
    settings = space.draw(found.dimensions, trial, found.base, found.model)
    asking.release()
    folder = spec.out / TRIALS / f"{trial.number:04d}"
    folder.mkdir(parents=True, exist_ok=True)
    start, compiled_before = time.monotonic(), compiling.seconds

    def said(what: str, finished: bool, value: float | None = None) -> None:
        compiled = compiling.seconds - compiled_before
        trial.set_user_attr(COMPILED, compiled)
        _said(replace(spec, started=spec.started + compiled), trial, what, start + compiled,
              study, found, finished, value, compiled)

    def heard(record: dict) -> None:
        if record.get("member", MEMBERS[0]) != MEMBERS[0]:
            return              # a blend's pruner follows its first member (epochs restart)
        trial.report(record["valid"][found.metric], record["epoch"])
        if trial.should_prune():
            raise optuna.TrialPruned(f"{found.step} {record['epoch']}")
    several = len(found.split_seeds) > 1
    try:
        space.searched(found.model).check(space.trial_point(found.base, settings,
                                                            found.model))
        summaries = []
        for split_seed in found.split_seeds:     # the pruner hears the first split's epochs
            on_epoch = None if summaries else heard
            with open(folder / pool.LOG, "a") as log, contextlib.redirect_stdout(log):
                if found.model == NCAE:
                    run, config = trainer_spec(spec, found.base, settings,
                                               folder / f"split{split_seed}" if several
                                               else folder, split_seed)
                    summaries.append(protocol.run(run, config, on_epoch=on_epoch))
                else:
                    summaries.append(baseline_trial(spec, found, settings, split_seed,
                                                    on_epoch))
    except optuna.TrialPruned as e:
        said(f"pruned at {e}", True)
        raise
    except KeyboardInterrupt:     # a signal (stopping.py): Optuna fails the trial, which says
        # so in trials.csv, apart from a trial whose worker died, which says nothing
        trial.set_user_attr("error", "stopped by Ctrl-C or SIGTERM; the same command continues "
                            "the study")
        raise
    except OSError as e:
        if e.errno not in DISK_FULL:
            raise
        _stop_full(trial, f"{e.filename or folder}: cannot write it ({e.strerror})")
    except TRIAL_ERRORS as e:
        if e.errno in DISK_FULL:         # a write's (a file's, the run folder's) OSError
            _stop_full(trial, str(e))
        trial.set_user_attr("error", str(e))
        outcome.append(str(e))
        said(f"failed: {e}", False)
        return math.nan                # Optuna marks the trial failed
    epochs = "/".join(epochs_text(summary["best_epoch"]) for summary in summaries)
    trial.set_user_attr("best_epoch", epochs)
    values = [summary["valid"][found.metric] for summary in summaries]
    trial.set_user_attr("valid_by_split", values)
    value = sum(values) / len(values)
    said(f"{found.metric} {value:.4f}" + (f" ({found.step} {epochs})" if found.step else ""),
         True, value)
    return value


def baseline_trial(spec: TuneSpec, found: Setup, settings: dict, split_seed: int,
                   on_epoch) -> dict:
    """A baseline's trial on one split: fit on the training part, its validation figures and
    (iALS, BPR) the iteration chosen on them, each iteration heard by on_epoch, as a trainer
    run's summary has them (protocol.run's, validation only). The split is made as a trainer
    run's, once a worker."""
    data, split = _split(spec, split_seed, found.model, found.cutoffs)
    model = factory.make_model({"model": found.model, "cutoffs": found.cutoffs,
                                **space.trial_point(found.base, settings, found.model),
                                **factory.seeded(found.model, spec.seed)}, spec.device)
    print(f"{data.name}: {model!r} on split seed {split_seed}")

    def heard(_, record: dict) -> None:
        # a baseline's fit takes no signal itself (NCAE's loop does, stopping.py): asked to
        # stop, the trial ends at an iteration's end (a fit of one go, once it is done)
        if stopping.asked():
            raise stopping.Stopped(stopping.asked(), [])
        if on_epoch is not None:
            on_epoch(record)
    result = select_refit_test(model, split, lambda phase, part: {"callback": heard},
                               test=False)[1]
    print(f"validation {found.metric} {result['best_validation'][found.metric]:.4f}")
    return {"valid": result["best_validation"], "best_epoch": result["best_epoch"] or ""}


@functools.lru_cache(maxsize=4)
def _split(spec: TuneSpec, split_seed: int, model: str, cutoffs: tuple[int, ...]):
    """The data and split of a baseline's trials on `split_seed`, read as a trainer run reads
    them (its notes of the trials' cutoffs): one reading a worker, every trial of it fit on the
    same."""
    run, config = trainer_spec(spec, BASELINE_DATA, {}, spec.out / TRIALS, split_seed)
    return protocol.prepare(run, replace(config, cutoffs=cutoffs), get_backend(spec.device).name,
                            model)


def disk_full(what: str) -> TuneError:
    """The error that stops a study whose disk is full."""
    return TuneError(f"{what}: the disk is full: free some space and run the same command "
                     "again (the study goes on)")


def _stop_full(trial, what: str) -> None:
    """The trial under way fails, and the study stops: a full disk is no fault of the space's
    values (the trial's note may itself not be written, where the storage is on that disk)."""
    full = disk_full(what)
    trial.set_user_attr("error", str(full))
    raise full from None


def _said(spec: TuneSpec, trial, what: str, start: float, study, found: Setup, finished: bool,
          value: float | None = None, compiled: float = 0.0) -> None:
    """A worker's line at the end of a trial (`finished`: complete or pruned, not failed;
    `value`: its score, where complete): its settings, what it scored, its seconds (and the
    `compiled` ones of Numba's compile, left out), the best so far, the study's progress, the
    time since the command started, and the time left: at the mean trial's pace over the
    workers running, for the trials left, or the budget's where less."""
    now = census(study)                      # this trial still runs: Optuna files it after
    done, others = now.finished + finished, now.running - 1
    scores = sorted([(t.value, t.number) for t in study.get_trials(deepcopy=False)
                     if t.state.name == "COMPLETE"]
                    + ([(value, trial.number)] if value is not None else []),
                    key=lambda pair: pair[1])
    # the first trial of equal scores, as Optuna's best_trial (best.toml's) is
    best = (max if found.higher else min)(scores, key=lambda pair: pair[0], default=None)
    left = max(spec.trials - done - others, 0)
    budget, eta = budget_left(spec), ""
    if left and budget <= 0:
        eta = ", --budget passed: no trial starts"
    elif left:
        seconds = (sum(now.seconds) / len(now.seconds) * left / (others + 1) if now.seconds
                   else math.inf)
        if seconds < math.inf and seconds <= budget:
            eta = f", about {pool.duration(seconds)} left"
        elif budget < math.inf:
            eta = f", about {pool.duration(budget)} left (--budget)"
    line = (f"worker {spec.worker}: trial {trial.number} "
            f"[{space.shown(space.settings(found.dimensions, trial.params))}] {what} "
            f"in {time.monotonic() - start:.1f} s"
            + (f" (and {compiled:.1f} s compiling the kernels, not counted)" if compiled else "")
            + (f" | best {found.metric} {best[0]:.4f} (trial {best[1]})" if best else "")
            + f" | {done} of {spec.trials} finished, {others} running | "
            f"{pool.duration(time.monotonic() - spec.started)} elapsed{eta}\n")
    # one write, newline included: the workers share the command's output, and print's two
    # writes (the text, then the newline) interleave with another worker's line where the
    # output is unbuffered (PYTHONUNBUFFERED)
    sys.stdout.write(line)
    sys.stdout.flush()


def budget_left(spec: TuneSpec) -> float:
    """Seconds of the study's budget left to this command (< 0: passed; inf: no budget)."""
    if spec.budget is None:
        return math.inf
    return spec.started + 60 * spec.budget - time.monotonic()
