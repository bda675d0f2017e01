"""NCAE beside the baselines, every model tuned alike: the same study (python -m ncae_cuda.tune
--model, the same sampler, pruner and number of trials) on the first split seed's validation
part, then each best recipe run through the protocol at every split seed (select the epoch or
iteration count on that split's validation, refit on training + validation, score the test part
once).

    python -m bench.tuned_alike --dataset lastfm-2k --trials 40 --out bench/results/run
    python -m bench.tuned_alike --dataset ml-100k --valid-item latest \
        --ncae-config recipes/ml-100k-implicit.toml --out bench/results/run
    python -m bench.tuned_alike --dataset synthetic-tiny --quick --out /tmp/t     # a smoke test

Every model learns from implicit feedback, as the baselines do (of data with ratings: who rated
what), so NCAE's study starts from --ncae-config's recipe on implicit feedback, which it writes
to --work's ncae-start.toml.

The runs go to --work (default: --out/runs): tune-MODEL/ (the study, trials.csv, best.toml)
and test-MODEL-sS/ (python -m ncae_cuda.train's or ncae_cuda.baselines' folder, and beside it
test-MODEL-sS.toml, the recipe it ran). A step whose output is there is not run again, so the
same command continues where it stopped: a study with fewer finished trials than --trials is
continued to them (the same tune command, which continues a study in its --out), and a test
folder is run again where the recipe it ran is not the model's chosen one; a --work whose runs
are of other data flags, or whose NCAE study started from other settings, is refused (its
runs would be tabled as this command's). --also MODEL=STUDY counts an earlier study of the
model (its space since changed, say) in the model's --trials and minutes; the model's recipe
is then the best of its studies on validation; a study whose tune.json says it scored its
trials otherwise (another figure, data, split seed, pruner, seed, --jobs or device) is refused.
Writes tuned_alike.json and tuned_alike.md under --out, with the commit, the date and the
machine (its CPU, and the GPU NCAE trains on where there is one): for each model the trials
finished, their minutes (the trials' own time, as trials.csv has it), the settings chosen,
validation and test NDCG at the last cutoff per split seed and their mean, and NCAE's margin
over the best baseline's mean test figure.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

from bench.cli import add_quick, integers, out_folder, parse, said_when_interrupted, write_results
from bench.epoch_time import machine, provenance, provenance_line
from ncae_cuda import cli
from ncae_cuda.commands import flags, tune
from ncae_cuda.errors import RecipeError
from ncae_cuda.model.modelfile import differences
from ncae_cuda.ops import backend_name
from ncae_cuda.runs import effort, pool
from ncae_cuda.runs.factory import read_recipe, recipe_text
from ncae_cuda.runs.spec import as_used, given_data, located

MODELS = ("ncae", "ease", "item-knn", "rp3beta", "ials", "bpr")
METRIC = "ndcg@100"                    # what every study and table is scored by
FEEDBACK = "implicit"                  # what every model learns from here
QUICK = {"trials": 2, "split_seeds": "0"}
RUNS_OF = "data.json"                  # in --work: the data flags its runs are of


def run(command: list[str], log: Path) -> None:
    """A package command, its output added to `log`; SystemExit naming the log where it fails.
    A Ctrl-C reaches it once, handed on by the pool's Processes, and is waited for: the command
    stops where it stops cleanly (a study, once its workers have; before, subprocess.run killed
    it 0.25 s after the terminal's Ctrl-C, perhaps within a write to its journal); then
    KeyboardInterrupt. A second Ctrl-C is handed on too, and stops it at once."""
    with open(log, "a") as out:
        print(f"$ python -m {' '.join(command)}", file=out, flush=True)
    with pool.Processes(1, []) as processes:
        processes.start(command[0], [sys.executable, "-m", *command], log=log)
        [(_, code, _)] = processes.wait()
    if processes.stopped:
        raise KeyboardInterrupt
    if code:
        sys.exit(f"error: python -m {' '.join(command)} exited {code}: see {log}")


def tuned(model: str, data: list[str], trials: int, work: Path, recipe: Path | None) -> Path:
    """The study of `model` from `recipe` (None: the model's defaults) in work/tune-MODEL, run
    or continued until `trials` of its trials have finished."""
    study = work / f"tune-{model}"
    best = study / "best.toml"
    if not best.exists() or effort.of_study(best)["trials"] < trials:
        run(["ncae_cuda.tune", "--model", model, *data, "--trials", str(trials), "--out",
             str(study), *(["--config", str(recipe)] if recipe else [])],
            work / f"tune-{model}.log")
    return study


def best_of(studies: list[Path]) -> Path:
    """The study whose best trial scored highest on validation (tune.json's)."""
    return max(studies, key=lambda study: json.loads(
        (study / "tune.json").read_text())["best"]["value"])


def tested(model: str, recipe: Path, data: list[str], seed: int, work: Path) -> dict:
    """{'valid', 'test'}: figures of `recipe` through the protocol at split seed `seed`, run
    where work/test-MODEL-sS ran no recipe, or another one."""
    folder = work / f"test-{model}-s{seed}"
    ran = folder.with_name(folder.name + ".toml")          # the recipe the folder ran
    command = "train" if model == "ncae" else "baselines"
    result = folder / "metrics.json"                        # of the same keys for every model
    if not (result.exists() and ran.exists() and read_recipe(ran) == read_recipe(recipe)):
        run([f"ncae_cuda.{command}", "--config", str(recipe), *data, "--split-seed", str(seed),
             "--out", str(folder), "--overwrite"], work / f"test-{model}-s{seed}.log")
        shutil.copyfile(recipe, ran)
    summary = json.loads(result.read_text())
    return {"valid": summary["best_validation"][METRIC], "test": summary["test"][METRIC]}


def study_row(model: str, studies: list[Path]) -> dict:
    """The trials finished by the model's studies, their minutes, and the chosen settings (the
    best study's best.toml)."""
    searched = [effort.of_study(study / "best.toml") for study in studies]
    best = best_of(studies)
    chosen = {name: value for name, value in read_recipe(best / "best.toml").items()
              if name != "model"}
    return {"model": model, "studies": [str(study) for study in studies], "recipe":
            str(best / "best.toml"), "trials": sum(s["trials"] for s in searched),
            "minutes": sum(s["minutes"] for s in searched),
            "chosen": ", ".join(f"{name} {shown(value)}" for name, value in chosen.items())}


def runs_of_data(p: argparse.ArgumentParser, work: Path, data: list[str]) -> None:
    """work/RUNS_OF, the data flags of the runs there, written by the first command; p.error
    where they are of other data: a study of enough trials and a test of the same recipe are
    not run again, so this data's table would hold that data's figures."""
    record = work / RUNS_OF
    if not record.exists():
        record.write_text(json.dumps(data) + "\n")
    elif (ran := json.loads(record.read_text())) != data:
        p.error(f"--work {work} holds runs on other data ({' '.join(ran)}): rerun with those "
                "flags, or choose another --out or --work")


def ncae_start(p: argparse.ArgumentParser, given: Path | None, work: Path) -> Path:
    """work/ncae-start.toml, the recipe NCAE's study starts from: --ncae-config's settings (None:
    the trainer's defaults) on implicit feedback, as the baselines learn (they rank the items
    each user interacted with, ratings or not) and as METRIC scores; p.error where the recipe
    cannot be read, says explicit feedback or has cutoffs that do not end at METRIC's, or
    where work's study of NCAE started from other settings (a study of enough trials is not
    run again: the new start would tune nothing)."""
    try:
        settings = read_recipe(given) if given else {}
    except RecipeError as e:
        p.error(f"--ncae-config {e}")
    if settings.setdefault("feedback", FEEDBACK) != FEEDBACK:
        p.error(f"--ncae-config {given}: feedback {settings['feedback']}: every model here is "
                f"tuned alike on implicit feedback, scored by {METRIC}")
    cutoff = int(METRIC.partition("@")[2])      # NCAE's study scores NDCG at its last cutoff
    if settings.get("cutoffs", [cutoff])[-1] != cutoff:
        p.error(f"--ncae-config {given}: cutoffs {list(settings['cutoffs'])}: every model here is "
                f"tuned and tested by {METRIC}: end them at {cutoff}, or leave them out")
    start, study = work / "ncae-start.toml", work / "tune-ncae"
    if study.exists() and start.exists() and read_recipe(start) != settings:
        p.error(f"--ncae-config {given or '(none)'}: {study} was tuned from other settings "
                f"({start}): rerun with those, or choose another --out or --work")
    start.write_text(recipe_text(settings, f"NCAE's study starts from: {given or 'defaults'}, "
                                           "on implicit feedback"))
    return start


def scored_here(tuning: list[str]) -> dict:
    """How this command's studies, on the data flags `tuning`, score their trials, as their
    tune.json records it (effort.scoring): by METRIC on the split seed's validation part, at
    tune's default pruner, seed, --jobs and --device, resolved (their minutes taken on the
    same share of the cores, on the same device)."""
    args = tune.build_parser().parse_args([*tuning, "--out", "."])
    cli.check_slots(args)
    return {"metric": METRIC, "split_seeds": [args.split_seed],
            "data": located(as_used(given_data(flags.data_spec(args)), FEEDBACK)),
            "pruner": args.pruner, "seed": args.seed, "jobs": args.jobs,
            "device": backend_name(args.device)}


def scored_otherwise(record: dict | None, here: dict) -> list[str]:
    """How a study's record of its scoring (effort.scoring; None: a record before it held one)
    differs from `here` (scored_here), the split seed named once, by split_seeds; what an older
    record does not hold is taken as alike."""
    if record is None:
        return ["no record of how it scored its trials"]
    aside = [{**scored, "data": {k: v for k, v in scored.get("data", {}).items()
                                 if k != "split_seed"}} for scored in (record, here)]
    return differences(*({k: v for k, v in scored.items() if k in record} for scored in aside))


def earlier_studies(p: argparse.ArgumentParser, given: list[str], models: list[str],
                    here: dict) -> dict[str, list[Path]]:
    """{model: [study folder]} of the --also MODEL=STUDY given; p.error where one is not a
    listed model's finished study, or scored its trials otherwise than `here` (scored_here):
    its best on validation would be compared with others' on another figure or part."""
    earlier: dict[str, list[Path]] = {}
    for text in given:
        model, _, folder = text.partition("=")
        if model not in models:
            p.error(f"--also {text}: {model!r} is not one of --models ({', '.join(models)})")
        study = Path(folder)
        if not ((study / "best.toml").is_file() and (study / "tune.json").is_file()
                and effort.of_study(study / "best.toml")):
            p.error(f"--also {text}: {study} holds no finished study (best.toml, tune.json, "
                    f"{effort.TABLE})")
        changed = scored_otherwise(effort.scoring(study / "best.toml"), here)
        if changed:
            p.error(f"--also {text}: {study} scored its trials otherwise ({'; '.join(changed)}):"
                    " tune it as this command's studies are, or leave it out")
        earlier.setdefault(model, []).append(study)
    return earlier


def shown(value) -> str:
    """A setting's value as the table prints it: a number to 3 significant digits."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(shown, value)) + "]"
    return str(value)


def table(rows: list[dict], seeds: list[int]) -> str:
    """The markdown table of the rows, and NCAE's margin over the best baseline."""
    lines = [f"| model | trials | minutes | valid {METRIC} (seeds {' / '.join(map(str, seeds))})"
             f" | test {METRIC} | mean test | chosen on seed {seeds[0]}'s validation |",
             "|---|---:|---:|---|---|---:|---|"]
    for r in rows:
        studies = f" ({len(r['studies'])} studies)" if len(r["studies"]) > 1 else ""
        lines.append(f"| {r['model']} | {r['trials']}{studies} | {r['minutes']:.1f} | "
                     + " / ".join(f"{v:.4f}" for v in r["valid"]) + " | "
                     + " / ".join(f"{v:.4f}" for v in r["test"])
                     + f" | {r['mean_test']:.4f} | {r['chosen']} |")
    ncae = [r for r in rows if r["model"] == "ncae"]
    others = [r for r in rows if r["model"] != "ncae"]
    if ncae and others:
        best = max(others, key=lambda r: r["mean_test"])
        margin = ncae[0]["mean_test"] / best["mean_test"] - 1
        lines.append(f"\nNCAE's mean test {METRIC} is {100 * margin:+.1f}% against the best "
                     f"baseline's ({best['model']}, {best['mean_test']:.4f}).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tuned_alike", allow_abbrev=False,
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, help="a data set's name or file, as train's")
    p.add_argument("--data-dir", help="where the data set is kept, as train's --data-dir")
    p.add_argument("--split", help="as train's --split (default: train's)")
    p.add_argument("--valid-item", choices=("random", "latest"),
                   help="as train's --valid-item (default: train's)")
    p.add_argument("--models", default=",".join(MODELS),
                   help="which models, NCAE among them (default: %(default)s)")
    p.add_argument("--trials", type=cli.count, default=40,
                   help="each model's, its --also studies' counted (default: %(default)s)")
    p.add_argument("--ncae-config", type=Path, metavar="RECIPE",
                   help="the recipe NCAE's study starts from and leaves what its space does "
                        "not search at, its feedback implicit where it does not say (default: "
                        "the trainer's defaults, on implicit feedback)")
    p.add_argument("--split-seeds", type=integers(0), default="0,1,2",
                   help="the studies tune on the first's validation; each is tested "
                        "(default: %(default)s)")
    add_quick(p, "a smoke test", QUICK)
    p.add_argument("--also", action="append", default=[], metavar="MODEL=STUDY",
                   help="an earlier study of MODEL (a tune --out folder) on the same data, "
                        "validation part and score: its trials count in MODEL's --trials and "
                        "minutes, and MODEL's recipe is the best of its studies on validation; "
                        "one scored otherwise (its tune.json) is refused (repeatable)")
    p.add_argument("--work", type=Path, help="the runs' folders (default: --out/runs)")
    p.add_argument("--out", type=Path, required=True, help="tuned_alike.json and .md")
    args = parse(p, argv, QUICK)
    out = out_folder(p, args.out)
    work = out_folder(p, args.work or out / "runs")
    with said_when_interrupted(out, "tuned_alike"):
        models = [m.strip() for m in args.models.split(",")]
        unknown = [m for m in models if m not in MODELS]
        if unknown:
            p.error(f"--models: {unknown[0]!r} is not one of {', '.join(MODELS)}")
        seeds, trials = args.split_seeds, args.trials
        data = ["--dataset", args.dataset]
        for flag in ("data_dir", "split", "valid_item"):
            if getattr(args, flag) is not None:
                data += [f"--{flag.replace('_', '-')}", getattr(args, flag)]
        tuning = [*data, "--split-seed", str(seeds[0])]        # every study on the first's split
        earlier = earlier_studies(p, args.also, models, scored_here(tuning))
        runs_of_data(p, work, data)
        start = ncae_start(p, args.ncae_config, work) if "ncae" in models else None
        own = {model: trials - sum(effort.of_study(study / "best.toml")["trials"]
                                   for study in earlier.get(model, [])) for model in models}
        for model, left in own.items():
            if left < 1:
                p.error(f"--also: {model}'s earlier studies hold --trials {trials} or more: "
                        "no study of its own is left to run")
        rows = []
        for model in models:
            studies = [*earlier.get(model, []), tuned(model, tuning, own[model], work,
                                                      start if model == "ncae" else None)]
            row = study_row(model, studies)
            figures = [tested(model, Path(row["recipe"]), data, seed, work) for seed in seeds]
            rows.append({**row, "valid": [f["valid"] for f in figures],
                         "test": [f["test"] for f in figures],
                         "mean_test": statistics.mean(f["test"] for f in figures)})
            print(f"{model}: mean test {METRIC} {rows[-1]['mean_test']:.4f}", flush=True)
        shown = table(rows, seeds)
        result = {"dataset": args.dataset, "split_seeds": seeds, "trials": trials,
                  **provenance(machine()), "metric": METRIC, "models": rows}
        write_results(out, "tuned_alike", result, f"# Every model tuned alike on {args.dataset}\n\n"
                                                  f"{provenance_line(result)}\n\n{shown}")
        print(shown)
        return 0


if __name__ == "__main__":
    sys.exit(main())
