"""The run protocol every command follows: select on validation, refit, test once.

Protocol (docs/design.md): train on the training part and score the validation part after
every epoch, keeping the best epoch (early stopping after --patience epochs without
improvement); then retrain from scratch on training + validation for that many epochs and score
the test part once (--no-refit scores the best-validation model instead). Without a validation
part (--valid-ratio 0, or leave-one-out finding no user of 3 interactions) it trains --epochs
epochs; one asked for by --valid-ratio that the split leaves empty is refused. Explicit feedback
is scored by RMSE over held-out ratings, implicit by HR@M, Recall@M and NDCG@M of each user's
held-out items ranked against every item the user has not interacted with, next to the POP
baseline. Cold test entries (a time split's or split files': of users or items with no training
or validation entry) are scored apart, in their own table and keys (cold_test, cold_pop), never
mixed into the test figures.
--warm-start starts both fits from a saved model (run.json records its path and sha256).

Each run has its own folder, --out (default runs/<data set>-<date>-<time>): run.json (the
run's settings; a run never writes into another run's folder), checkpoint-select.npz and
checkpoint-refit.npz (what --resume continues from, saved at the end of an epoch once
--checkpoint-every seconds have passed), model.npz
(ncae_cuda.load_model reads it; so does python -m ncae_cuda.recommend) and metrics.json at the
end. The CLI is a thin layer over ncae_cuda.NCAE: the flags of the model are its settings
(ncae_cuda.model.config.Config), generated from them. --config reads them from a recipe (a TOML
file of the same names, recipes/); a flag on the command line overrides the recipe.
"""
from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..data import datasets, splits
from ..data.atomic_file import atomic_write
from ..data.cold import NO_ENTRY, refuse_all_cold
from ..data.digest import file_sha256
from ..data.interactions import DataError, Interactions
from ..data.reader import read_table
from ..model import metrics
from ..model.blend import BlendedNCAE
from ..model.cold_means import SHRINK
from ..model.base import Model
from ..model.config import Config, SettingError
from ..model.estimator import NCAE
from ..ops import BackendUnavailable
from . import effort, rundir
from .comparison import compare, recipe_paths, recipe_settings, tuned_by_study
from .factory import load_model, make_model
from .select_test import epochs_text, select_refit_test
from .spec import DataSpec, RunSpec, data_argv, given_data, recorded
from .study_storage import TuneError


# ---------------------------------------------------------------------------------------------
# data

def prepare(spec: RunSpec, config: Config, device: str,
            trained: str | None = None) -> tuple[Interactions, splits.Split]:
    """Load and split the run's data, and say what will be trained (default: the NCAE of
    config) on what."""
    data, split = (given_split(spec.data, config) if spec.data.train
                   else dataset_split(spec.data, config))
    unrated = [part.name for part in (split.train, split.valid, split.test)
               if part.ratings is None]
    if config.feedback == "explicit" and unrated:
        raise DataError(f"{unrated[0]} has no ratings: use --feedback implicit")
    trained = trained or (f"{config.feedback}, {config.based}-based, hidden "
                          f"{list(config.hidden)}")
    print(f"{data.name}: {data.n_users} users x {data.n_items} items, {data.nnz} interactions | "
          f"train {split.train.nnz}, valid {split.valid.nnz}, test {split.test.nnz} | "
          f"{trained}, device {device}")
    if data.n_duplicates_merged:
        print(f"note: {data.n_duplicates_merged} duplicate (user, item) records merged into "
              "others (rule: ncae_cuda.data.reader)")
    for note in split.notes + _cutoffs_past_catalogue(config, data.n_items):
        print(f"note: {note}")
    return data, split


def _cutoffs_past_catalogue(config: Config, n_items: int) -> list[str]:
    """A note where a cutoff M reaches the catalogue's size: every held-out item is in any
    model's top M, so HR@M and Recall@M are 1 and tell no models apart."""
    past = [m for m in config.cutoffs if m >= n_items] if config.implicit else []
    if not past:
        return []
    named = ", ".join(f"@{m}" for m in past)
    return [f"cutoff {named} at or above the {n_items} items: HR and Recall there are 1 for any "
            "model (--cutoffs sets smaller ones)"]


def dataset_split(spec: DataSpec, config: Config) -> tuple[Interactions, splits.Split]:
    """--dataset, split as --split says."""
    with warnings.catch_warnings(record=True) as caught:
        for kind in (datasets.CatalogueWarning, datasets.NoTimesWarning):
            warnings.simplefilter("always", kind)
        data = datasets.load(spec.dataset, data_dir=spec.data_dir, cache_dir=spec.cache_dir,
                             sep=spec.sep, encoding=spec.encoding,
                             rating_scale=given_scale(config))
    for warning in caught:
        print(f"warning: {warning.message}")
    if datasets.is_file(spec.dataset):
        say_how_it_was_read(config, spec.dataset, data)
    return data, make_split(spec, data, config.based)


def given_scale(config: Config) -> tuple[float, float] | None:
    """--rating-scale where the feedback is explicit (implicit feedback has no scale)."""
    return config.rating_scale if config.feedback == "explicit" else None


def say_how_it_was_read(config: Config, path, data: Interactions, scaled: bool = True) -> None:
    """The columns a file was read by, and where `scaled`, the rating scale it was read on."""
    scale = ""
    if scaled and data.ratings is not None:
        origin = ("--rating-scale" if given_scale(config) else
                  "read off the file: give --rating-scale LOW,HIGH if the scale is wider")
        scale = f"; ratings {data.rating_scale[0]:g} to {data.rating_scale[1]:g} ({origin})"
    print(f"{path}: {data.columns}{scale}")


def given_split(spec: DataSpec, config: Config) -> tuple[Interactions, splits.Split]:
    """--train, --test and --valid, each read as a table, on the id maps of all of them; a
    validation part carved from --train where --valid is not given. Explicit feedback reads
    them on one rating scale, --rating-scale or else the training file's: a held-out rating
    outside it is refused with its file and line, and nothing of the held-out files reaches
    the model."""
    scale, parts = given_scale(config), {}
    for name in ("train", "valid", "test"):       # train first: the others read on its scale
        path = getattr(spec, name)
        if path is not None:
            parts[name] = read_table(path, spec.sep, scale, spec.encoding)
            say_how_it_was_read(config, path, parts[name], scaled=name == "train")
            if name == "train" and config.feedback == "explicit":
                scale = parts[name].rating_scale
    data, split = splits.given_split(**parts)
    # a --valid file whose entries are all cold stays the validation part, which the run then
    # refuses (refuse_all_cold): before, a carved part replaced it unsaid
    if spec.valid is None and spec.valid_ratio > 0:
        split = splits.carve_validation(split, spec.valid_ratio, seed=spec.split_seed)
    return data, subsampled(spec, split, config.based)


def make_split(spec: DataSpec, data: Interactions, based: str) -> splits.Split:
    """The split --split names of `data`, trained on by rows of `based` (users or items: the
    rows --data-ratio samples)."""
    if spec.split == "loo":
        split = splits.leave_one_out(data, seed=spec.split_seed, valid_item=spec.valid_item)
    elif spec.split == "random":
        split = splits.random_split(data, spec.test_ratio, spec.valid_ratio, seed=spec.split_seed)
    elif spec.split == "time":
        split = splits.by_time(data, spec.test_ratio, spec.valid_ratio)
    else:
        base, test = datasets.load_split(spec.dataset, spec.split, spec.data_dir, spec.cache_dir)
        split = splits.file_split(data, base, test)
        if spec.valid_ratio > 0:
            split = splits.carve_validation(split, spec.valid_ratio, seed=spec.split_seed)
    return subsampled(spec, split, based)


def refuse_without_validation(spec: DataSpec, data: Interactions, split: splits.Split,
                              use: str) -> None:
    """DataError where `split` (of `data`, by the data flags `spec`) has no validation entry to
    `use`, saying why it has none and what gives it one: before, every such refusal said
    'give --valid-ratio above 0', also where it was 0.1 and leave-one-out found no user to hold
    a validation item out of."""
    if split.valid.nnz:
        return
    refuse_all_cold(split.cold_valid, "validation", use, bool(spec.valid))
    if spec.split == "loo":
        why = ("leave-one-out holds out a validation item of each user with 3 or more "
               "interactions; there are none",
               "use --split time" if data.timestamps is not None else
               "use --split time on data with timestamps, or --split random for explicit "
               "feedback")
    elif spec.valid_ratio == 0:
        why = "--valid-ratio 0", "give --valid-ratio above 0"
    elif spec.split == "time" and (asked := splits.held_out_counts(
            data.nnz, spec.test_ratio, spec.valid_ratio)[1]):       # the test cut took them
        why = (f"the {asked} entries --valid-ratio {spec.valid_ratio:g} of {data.nnz} asks for "
               "are at the test cut's time, which goes to test", "raise --valid-ratio")
    else:
        entries = (f"{data.nnz} entries" if spec.split in ("random", "time")
                   else f"the training part's {split.train.nnz} entries")
        why = f"--valid-ratio {spec.valid_ratio:g} of {entries} is none", "raise --valid-ratio"
    raise DataError(f"{data.name}: this split has no validation entry to {use} ({why[0]}): "
                    f"{why[1]}")


def subsampled(spec: DataSpec, split: splits.Split, based: str) -> splits.Split:
    """The split with --data-ratio of each row's training entries (the paper's D)."""
    if spec.data_ratio == 1:
        return split
    train = splits.subsample(split.train, spec.data_ratio, seed=spec.split_seed, based=based)
    return split.trained_on(train, f"D = {spec.data_ratio:g}: trained on {train.nnz} of "
                                   f"{split.train.nnz} entries")


# ---------------------------------------------------------------------------------------------
# the protocol: select the epoch on validation, refit, test once

def new_model(spec: RunSpec, config: Config, ops=None) -> NCAE | BlendedNCAE:
    """The model of the run's settings, on its device (or backend) and shard (a BlendedNCAE
    for based='both')."""
    return make_model(config.as_dict(), ops or spec.device,
                      None if spec.shard == "none" else spec.shard)


@dataclass(frozen=True)
class Parent:
    """--warm-start's model, which both fits of a run start from, and its file as run.json
    records it: the path and the file's sha256 (a resume continues only a warm start from the
    same bytes)."""
    model: NCAE
    path: Path
    sha256: str

    @classmethod
    def load(cls, path: Path) -> Parent:
        """The model file at `path`, read on the CPU (a warm start takes its parameters on the
        host); DataError where it is not a model file."""
        return cls(load_model(path, device="cpu"), path, file_sha256(path))

    def record(self) -> dict:
        return {"path": str(self.path), "sha256": self.sha256}


def run(spec: RunSpec, config: Config, on_epoch=None) -> dict:
    """The run of `spec` and the model's settings `config` (both resolved), in its folder;
    returns what metrics.json holds. on_epoch(record), where given, hears every epoch of the
    selection fit with its validation figures (tune's pruner): what it raises ends the run,
    resumable."""
    parent = None if spec.warm_start is None else Parent.load(spec.warm_start)
    model = new_model(spec, config)
    if parent is not None:
        model.check_warm_start(parent.model)          # before any work
    if spec.cuda_graphs is not None:
        if model.ops.name != "gpu":
            raise BackendUnavailable(f"--cuda-graphs is for the GPU backend; this run is on the "
                                     f"{model.ops.name} backend")
        if spec.shard != "none" and spec.cuda_graphs == "on":
            raise BackendUnavailable("--cuda-graphs on: a sharded step is not captured yet")
        model.ops.graphs = spec.cuda_graphs == "on"
    comm = model.comm
    run_id = {"settings": recorded(spec, config), "backend": model.ops.name}
    if comm is not None:
        run_id["processes"] = comm.world
    if parent is not None:
        run_id["warm_start"] = parent.record()
    folder = rundir.RunDirectory(spec.out, run_id)
    with contextlib.ExitStack() as stack:
        if not model.leader:                # the other ranks work in step, silently
            stack.enter_context(contextlib.redirect_stdout(open(os.devnull, "w")))
        # before the data is read: rank 0 takes the folder, the others find it (their own, on
        # a machine of their own)
        take = (lambda: folder.open(resume=spec.resume, overwrite=spec.overwrite)) \
            if model.leader else (lambda: folder.join(spec.overwrite, spec.resume))
        comm.together(take, "opening the run folder") if comm else take()
        stack.callback(folder.release)          # a process running many runs (tune) lets go
        print(f"run folder: {spec.out}" + (" (resumed)" if spec.resume else ""))
        try:
            with model.ops.session():
                data, split = prepare(spec, config, model.ops.name)
            # the files go where the folder says: an overwriting run's, beside the old run's
            summary = train_and_test(replace(spec, out=folder.work), config, model, data, split,
                                     on_epoch, parent)
        except (DataError, BackendUnavailable, SettingError):    # (a warm start's shape)
            if model.leader:
                folder.abandon()
            raise
        if model.leader:
            folder.finish()
        print(f"wrote {spec.out / rundir.MODEL} and {spec.out / 'metrics.json'}")
    return summary


def train_and_test(spec: RunSpec, config: Config, model: NCAE | BlendedNCAE, data: Interactions,
                   split: splits.Split, on_epoch=None, parent: Parent | None = None) -> dict:
    """The run's protocol (select_test.select_refit_test) for NCAE or a blend, with the
    trainer's checkpoints, --curves, --baselines beside it, the report, model.npz and
    metrics.json; returns what metrics.json holds."""
    has_valid = split.valid.nnz > 0
    seen = split.fold_validation().train         # what --curves' test figures exclude
    warm_start = None if parent is None else parent.model
    if not split.test.nnz and not spec.validation_only:     # (a split's files are never empty)
        refuse_all_cold(split.cold_test, "test", "test the model on", bool(spec.data.train))
        why = (f"--test-ratio {spec.data.test_ratio:g} of {data.nnz} entries is none"
               if spec.data.split in ("random", "time") else
               "leave-one-out tests the users with 2 or more interactions; there are none")
        raise DataError(f"{data.name}: the split has no test entries ({why}): there is nothing "
                        "to score")
    if not has_valid:       # asked for, all cold or none: not a fit of --epochs without it
        refuse_all_cold(split.cold_valid, "validation", "choose the epoch on",
                        bool(spec.data.valid))
        if spec.data.valid_ratio and spec.data.split != "loo":   # (loo reads no ratio)
            refuse_without_validation(spec.data, data, split, "choose the epoch on")
    if spec.validation_only:
        refuse_without_validation(spec.data, data, split, "choose the epoch on")
    if spec.baselines:          # before NCAE trains
        refuse_without_validation(spec.data, data, split, "choose the baselines' settings on")

    def logged(phase: str, part: Interactions, then=None):
        """callback of a fit: the phase in each record; with --curves, test (and explicit:
        training) figures after every epoch, never used to choose anything; then `then`."""
        scorers = {}

        def callback(fitted: NCAE, record: dict) -> None:
            record["phase"] = phase
            if spec.curves and not scorers:
                scorers["test"] = fitted.evaluator(split.test, exclude=seen)
                if not fitted.config.implicit:
                    scorers["train"] = fitted.evaluator(part)
            for name, score in scorers.items():
                record[name] = score()
            if then is not None:
                then(record)
        return callback

    def fitting(phase: str, part: Interactions) -> dict:
        """NCAE's fit keywords of a phase: the epochs, its checkpoint, its callback."""
        return {"callback": logged(phase, part, on_epoch if phase == "select" else None),
                "checkpoint": spec.out / f"checkpoint-{phase}.npz", "resume": spec.resume,
                "checkpoint_every": spec.checkpoint_every, "warm_start": warm_start,
                **({"epochs": config.epochs} if phase == "select" else {})}

    model, result = select_refit_test(model, split, fitting, spec.refit,
                                      test=not spec.validation_only)
    if spec.validation_only:
        result["valid"] = result["best_validation"]
    elif spec.baselines:
        result["search"] = effort.of_study(spec.config)
        result["baselines"] = beside(spec, split, model.config.cutoffs, model.ops, config.seed)
    cold = cold_parts(split)
    report(model, result, cold.get("cold_test"))
    model.save(spec.out / rundir.MODEL)
    summary = {**header(spec, recorded(spec, config), model, data, split), **result,
               **epoch_seconds(result),
               "peak_rss_mb": peak_rss_mb(),
               **({} if parent is None else {"warm_start": parent.record()})}
    if model.comm is not None:
        comm = model.comm
        summary["shard"] = {"processes": comm.world, "columns": model.data.bounds.tolist(),
                            "collective_bytes_per_step":
                                result["history"][-1].get("collective_bytes")}
    if model.leader:
        text = json.dumps(summary, indent=2, default=float).encode()
        atomic_write(spec.out / "metrics.json", lambda f: f.write(text))
    return summary


def header(spec: RunSpec, settings: dict, model: Model, data: Interactions,
           split: splits.Split) -> dict:
    """What metrics.json says first, whatever the model: the data set, the device, the run's
    settings (`settings`, as recorded: the data's, the model's, the run's), the data's and the
    split's sizes, the split's notes."""
    return {"dataset": spec.data.dataset, "device": model.ops.name, "config": settings,
            "data": sizes(data, split), "notes": split.notes}


def sizes(data: Interactions, split: splits.Split) -> dict:
    """The data's users, items and interactions, and the entries of each part of its split (a
    time split's cold parts' counts too)."""
    return {"users": data.n_users, "items": data.n_items, "interactions": data.nnz,
            "train": split.train.nnz, "valid": split.valid.nnz, "test": split.test.nnz,
            **cold_parts(split)}


def epoch_seconds(result: dict) -> dict:
    """The seconds of the first epoch (or iteration) of a run's fits, which also compiles the
    kernels (Numba's, or NVRTC's), and the median of the others; None where there are none."""
    trained = [h["seconds"] for h in result["history"] if h["epoch"] > 0]
    return {"seconds_first_epoch": trained[0] if trained else None,
            "seconds_per_epoch": statistics.median(trained[1:]) if len(trained) > 1 else None}


def beside(spec: RunSpec, split: splits.Split, cutoffs: tuple[int, ...], ops,
           seed: int) -> dict:
    """--baselines on the run's split (comparison.compare): each at its recipe's settings, a
    recipe given or the best of a study of --baseline-trials trials run here (tuned_recipe),
    or else by its grid, then refit as NCAE is (--no-refit: tested as fit on the training
    part); each result's 'search' says what chose its settings. The studies run on the run's
    device (`ops`), and a note says so where NCAE's study (--config's) ran on another."""
    names, recipes = recipe_paths(spec.baselines)
    if spec.baseline_trials:
        ran_on = (effort.scoring(spec.config) or {}).get("device", ops.name)
        if ran_on != ops.name and tuned_by_study(spec.baselines):
            print(f"note: --config's study ran NCAE's trials on the {ran_on}, and this run "
                  f"tunes the baselines' on the {ops.name} (--device {spec.device}): the "
                  "minutes columns compare the two, and the table names a study's device "
                  "where it is not the run's", flush=True)
        for name in tuned_by_study(spec.baselines):
            recipes[name] = tuned_recipe(name, spec, seed, cutoffs)
    results = compare(split, names, cutoffs, ops, seed,
                      recipes={name: recipe_settings(path, name, "--baselines")[1]
                               for name, path in recipes.items()}, refit=spec.refit)
    for name, path in recipes.items():
        results[name]["search"] = effort.of_study(path)
    return results


def tuned_recipe(model: str, spec: RunSpec, seed: int, cutoffs: tuple[int, ...]) -> Path:
    """The best.toml of `model` tuned by python -m ncae_cuda.tune --model with
    spec.baseline_trials trials on the run's data (the study's: RunSpec.resolved refuses
    other), its trials scored as NCAE's study (--config's) scored its own: by its figure at
    its cutoff (NCAE's `cutoffs` below it beside), on its split seeds, pruned by its pruner,
    its sampler and fits seeded by its --seed, its trials run by as many workers as its
    --jobs, so that their minutes are taken on the same share of the cores (effort.scoring;
    `seed`, the run's, where the study's record has none; one worker, said, where it has no
    --jobs); in --out/tune-MODEL (a study there is continued), its lines on this process's
    output; TuneError where the study fails."""
    study = spec.out / f"tune-{model}"
    data, scored = given_data(spec.data), effort.scoring(spec.config)
    alike = []
    if scored:  # the study's figure, cutoff, split seeds, seed and workers, not the run's own
        data.pop("split_seed", None)
        seed = scored.get("seed", seed)
        figure, _, cutoff = scored["metric"].partition("@")
        cutoffs = (*(m for m in cutoffs if m < int(cutoff)), int(cutoff))
        alike += ["--metric", figure,
                  "--split-seeds", ",".join(map(str, scored["split_seeds"])),
                  *(["--pruner", scored["pruner"]] if "pruner" in scored else []),
                  *(["--jobs", str(scored["jobs"])] if "jobs" in scored else [])]
        if "jobs" not in scored:
            print(f"note: --config's study records no --jobs (its tune.json is older): "
                  f"{model}'s study runs 1 worker, which NCAE's may not have", flush=True)
    alike += ["--cutoffs", ",".join(map(str, cutoffs))]
    command = ["ncae_cuda.tune", "--model", model, *data_argv(data), *alike,
               "--trials", str(spec.baseline_trials), "--seed", str(seed),
               "--device", spec.device, "--out", str(study)]
    print(f"{model}: tuned as the NCAE it is compared with, {spec.baseline_trials} trials: "
          f"python -m {' '.join(command)}", flush=True)
    done = subprocess.run([sys.executable, "-m", *command])
    if done.returncode:
        raise TuneError(f"--baselines: the study of {model} ended with exit "
                        f"{done.returncode}: see {study}")
    return study / "best.toml"


def peak_rss_mb() -> float | None:
    """This process's peak resident memory in MiB; None where the OS does not say (resource is
    POSIX's: Windows has none)."""
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cold_parts(split: splits.Split) -> dict:
    """{'cold_valid': .., 'cold_test': ..} of a split that holds its cold entries apart (a time
    split), each {'entries', 'users', 'items', 'new_users', 'new_items'}: the part's entries,
    the users and items they are of, and those of them with no entry before the part's cut (in
    train; for test, in train and validation); {} for any other split."""
    if split.cold_valid is None:
        return {}
    before_test = split.fold_validation().train
    return {name: _counts(part, before)
            for name, part, before in (("cold_valid", split.cold_valid, split.train),
                                       ("cold_test", split.cold_test, before_test))}


def _counts(part: Interactions, before: Interactions) -> dict:
    users, items = np.unique(part.users), np.unique(part.items)
    return {"entries": part.nnz, "users": len(users), "items": len(items),
            "new_users": int(np.count_nonzero(~np.isin(users, before.users))),
            "new_items": int(np.count_nonzero(~np.isin(items, before.items)))}


def cold_title(counts: dict) -> str:
    """A cold test part's table's title: what it holds, and that it is scored apart."""
    return (f"cold test, scored apart: {counts['entries']} entries of {counts['users']} users "
            f"and {counts['items']} items, of which {counts['new_users']} users and "
            f"{counts['new_items']} items have {NO_ENTRY['test']}")


def cold_heading(counts: dict | None) -> str:
    """A cold test table's title: a time split's counts (cold_title), or where the evaluator
    set the cold entries apart itself (`counts` None: a held-out item no fit has seen), what
    they are: cold to the data the model was fit on, training + validation after a refit, as
    the split's note counts them too."""
    return (cold_title(counts) if counts else "cold test, scored apart: entries of users or "
            "items with no entry in the data the model was fit on")


def cold_predictions(model: NCAE | BlendedNCAE) -> str:
    """What the model gave the cold test entries, in words."""
    if model.config.implicit:
        return ("ranked by the model from what it has (a new user: an empty row; a new item: "
                "its untrained parameters), POP beside")
    return (f"predicted by the training data's means, shrunk by {SHRINK} ratings toward the "
            "overall mean (a new user: the item's; a new item: the user's; both new: the "
            "overall mean)")


def report(model: NCAE | BlendedNCAE, result: dict, cold: dict | None = None) -> None:
    """The test tables (or validation's, for --validation-only); where a time split holds cold
    test entries apart (`cold`: their counts), their table apart."""
    if "valid" in result:
        print(f"\nvalidation, best epoch {epochs_text(model.best_epoch)}\n"
              + metrics.format_table([{"model": model.config.model_name,
                                       **{k: v for k, v in result["valid"].items()
                                          if k != "cold"}}]))
        return
    test = result["test"]
    if model.config.implicit:
        # beside baselines, what chose each model's settings
        def searched(r: dict) -> dict:
            return (effort.columns(r.get("search"), model.ops.name) if "baselines" in result
                    else {})
        rows = [{"model": model.config.model_name,
                 **{k: v for k, v in test.items() if k != "clusters"}, **searched(result)},
                {"model": "POP", **result["pop"]},
                *({"model": r["name"], **{k: v for k, v in r["test"].items() if k != "clusters"},
                   **searched(r)} for r in result.get("baselines", {}).values())]
    else:
        rows = [{"model": "NCAE", "rmse": test["rmse"], "entries": test["entries"]}]
    print(("\nwarm test" if "cold_test" in result else "\ntest") + "\n"
          + metrics.format_table(rows))
    print("\ntest by user's number of training entries\n"
          + metrics.format_table(test["clusters"]))
    if "cold_test" in result:
        print(f"\n{cold_heading(cold)}; {cold_predictions(model)}")
        rows = [{"model": model.config.model_name, **result["cold_test"]}]
        if model.config.implicit:
            rows += [{"model": "POP", **result["cold_pop"]},
                     *({"model": r["name"], **r["cold_test"]}
                       for r in result.get("baselines", {}).values() if "cold_test" in r)]
        print(metrics.format_table(rows))
    if "all_test" in result:
        print("\nall test entries, warm and cold together (as a data set's published figures "
              "score them)\n" + metrics.format_table([{"model": model.config.model_name,
                                                       **result["all_test"]}]))
