"""The manual shows what runs: every page (README.md and docs/) has its commands run as written,
where they need no downloaded data and no GPU, and its Python blocks too; what a page installs
is what CI installs; every flag it gives a command is one the command has; no two of its
commands write one folder that the second would be refused; its performance tables are what
bench/results give; and the site builds with --strict, every link, heading and API reference
resolved."""
import contextlib
import functools
import importlib
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ncae_cuda import ops
from ncae_cuda.commands import experiments
from ncae_cuda.data import datasets
from ncae_cuda.model.config import tomllib

ROOT = Path(__file__).resolve().parents[1]
MANUAL = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PUBLISHED = [name for name, entry in datasets.DATASETS.items()
             if isinstance(entry, datasets.Published)]
QUICK_START_TRAIN = ".venv/bin/python -m ncae_cuda.train"     # CI runs it first, as written
TORCHRUN = ".venv/bin/torchrun"      # a sharded job: where the [distributed] extra is installed
INSTALL = re.compile(r"\.venv/bin/pip install -e \"\.\[(\w+)\]\"")
# a GPU's extras change nothing for the commands that run here, which run on the CPU
NOT_NEEDED_HERE = re.compile(r"cuda\d+")


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """(section heading, language, text) of each fenced block of the page, in order."""
    found, section = [], ""
    for part in re.split(r"^(```\w*\n.*?^```)$", page.read_text(), flags=re.S | re.M):
        if part.startswith("```"):
            language, text = part[3:-3].split("\n", 1)
            found.append((section, language, text))
        else:
            section = ([section] + re.findall(r"^##? (.*)$", part, re.M))[-1]
    return found


def commands(text: str) -> list[str]:
    """A bash block's commands, continuation lines joined, comments dropped."""
    lines = (line.split("#")[0].strip() for line in text.replace("\\\n", " ").splitlines())
    return [line for line in lines if line]


def runs_here(command: str) -> bool:
    """A command this test runs: the package's, or a sharded job's through torchrun; not one
    that reads a published data set or needs a GPU, nor the quick start's training."""
    words = command.split()
    return (command.startswith((".venv/bin/python -m ncae_cuda.", TORCHRUN))
            and not any(name in words for name in PUBLISHED) and "gpu" not in words
            and command != QUICK_START_TRAIN)


def steps(page: Path) -> list[tuple[frozenset, str, str]]:
    """(the extras it needs, language, code) of each command and Python block this test runs,
    in the page's order: an extra a section installs is needed by what follows it there."""
    found, installed, section = [], set(), None
    for heading, language, text in blocks(page):
        if heading != section:
            installed, section = set(), heading
        if language == "python":
            found.append((frozenset(installed), language, text))
        elif language == "bash":
            for command in commands(text):
                installed |= {name for name in INSTALL.findall(command)
                              if not NOT_NEEDED_HERE.fullmatch(name)}
                if runs_here(command):
                    found.append((frozenset(installed), language, command))
    return found


def run_name(page: Path, extras: frozenset) -> str:
    """The test id of a page's steps that need `extras`: docs/own-data.md[tune]."""
    return page.relative_to(ROOT).as_posix() + "".join(f"[{e}]" for e in sorted(extras))


def page_runs() -> list:
    """A test a page and set of extras: the page's steps that need exactly those extras."""
    return [pytest.param(page, extras, id=run_name(page, extras),
                         marks=[pytest.mark.extra(e) for e in sorted(extras)])
            for page in MANUAL for extras in dict.fromkeys(needs for needs, _, _ in steps(page))]


def write_inputs(folder: Path) -> None:
    """The files the pages name as the user's own: ratings (explicit), clicks with times
    (implicit), and a split of the ratings into two files."""
    data = datasets.load("synthetic-tiny")
    users, items = data.user_ids[data.users], data.item_ids[data.items]
    ratings = [f"{u},{i},{r:g}\n" for u, i, r in zip(users, items, data.ratings)]
    clicks = [f"{u},{i},{t}\n" for u, i, t in zip(users, items, data.timestamps)]
    # the split in a random order: in the data's, the last 100 are new users alone (cold)
    mixed = [ratings[k] for k in np.random.default_rng(0).permutation(len(ratings))]
    for name, header, lines in (("ratings.csv", "user,item,rating", ratings),
                                ("train.csv", "user,item,rating", mixed[:500]),
                                ("test.csv", "user,item,rating", mixed[500:]),
                                ("clicks.csv", "user,item,timestamp", clicks)):
        (folder / name).write_text(header + "\n" + "".join(lines))


def main_of(module: str):
    """The main(argv) of what `python -m module` runs: ncae_cuda.NAME's is the command's,
    ncae_cuda/commands/NAME.py's (cli.run_command); another's is the module's, or its
    package's __main__'s."""
    package, _, name = module.partition(".")
    if package == "ncae_cuda":
        module = f"ncae_cuda.commands.{name}"
    elif importlib.util.find_spec(module).submodule_search_locations:
        module += ".__main__"
    return importlib.import_module(module).main


def run_command(command: str, capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a page's command. `python -m M ...` runs M's main in
    this process: the same parsing and work, less a fresh interpreter's start (every entry
    module runs as a process elsewhere in the suite); a sharded job through torchrun."""
    words = shlex.split(command)
    if words[0] == TORCHRUN:
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", *words[1:]],
                              capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr
    try:
        code = main_of(words[2])(words[3:])             # .venv/bin/python -m M ARGS...
    except SystemExit as e:
        code = e.code
    printed = capsys.readouterr()
    return code, printed.out, printed.err


# figures a page quotes of what its own commands print, on the CPU backend (the same there
# with any thread count, BLAS kernel or Numba target; a GPU's sums differ by float32
# rounding, and the study's draws after them): {run_name: [(a pattern over what that run's
# commands print, the page's words with the pattern's groups in the {})]}
QUOTED = {"docs/own-data.md[tune]": [
    (r"blend: validation rmse (\S+),.*?\| NCAE +\| (\S+) \|",
     "{} on its 60 validation entries against a test RMSE of {}")]}


def check_quoted(page: Path, extras: frozenset, printed: str) -> None:
    """The page's words of its commands' figures are what its commands printed."""
    words = " ".join(page.read_text().split())
    for pattern, quoted in QUOTED.get(run_name(page, extras), []):
        found = re.search(pattern, printed, re.S)
        assert found, f"the commands printed no {pattern}"
        printed_words = quoted.format(*found.groups())
        assert printed_words in words, f"the commands print: {printed_words}"


@pytest.mark.parametrize("page, extras", page_runs())
def test_every_page_runs_as_written(page, extras, tmp_path, monkeypatch, capsys):
    """Each page in a folder of its own, so a page shows all that its commands need."""
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))         # for the processes a command starts
    monkeypatch.delenv(datasets.DATA_ENV, raising=False)
    printed = []
    for needs, language, code in steps(page):
        if needs != extras:
            continue
        if language == "python":
            exec(compile(code, str(page), "exec"), {})
            continue
        status, stdout, stderr = run_command(code, capsys)
        assert status == 0, f"{code}\n{stderr[-2000:]}"
        printed.append(stdout)
    if not ops.HAS_CUDA:                    # the commands ran on the CPU backend
        check_quoted(page, extras, "".join(printed))


def test_the_pages_run_the_commands_they_are_meant_to():
    """The filter above leaves every page something to run that it should: a page's commands
    on the user's own files and on synthetic data, and the sharded job."""
    ran = {page.relative_to(ROOT).as_posix(): [code for _, _, code in steps(page)]
           for page in MANUAL}
    assert any("--dataset clicks.csv" in c and "--baselines" in c for c in ran["docs/own-data.md"])
    assert any("--train train.csv --test test.csv" in c for c in ran["docs/training.md"])
    assert any(c.startswith(TORCHRUN) for c in ran["docs/distributed.md"])
    assert not any(" ml-100k" in c for codes in ran.values() for c in codes)
    assert sum(map(len, ran.values())) >= 20


# a command of this repository a page names: `python -m MODULE ...` (torchrun's `-m MODULE`), or
# in the text a package command by its name alone (`train --baselines ...`)
MODULE = re.compile(r"(?:^|\s)-m ((?:ncae_cuda|bench|dev)(?:\.\w+)+)")
COMMAND_NAME = re.compile(r"(train|tune|recommend|serve|baselines|experiments|datasets|check) ")
RUN_FLAGS = "ncae_cuda.train"               # what follows an experiment's -- reaches each run


@functools.cache
def flags_of(module: str, *subcommand: str) -> frozenset:
    """The flags `python -m module [subcommand] --help` lists."""
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
        main_of(module)([*subcommand, "--help"])
    return frozenset(re.findall(r"--[a-z][a-z0-9-]*", help_text.getvalue()))


def named_commands(page: Path) -> list[str]:
    """Every command of this repository's that the page shows, in its blocks (a console
    block's `$ ` lines) and its text's code spans."""
    found = []
    for _, language, text in blocks(page):
        lines = commands(text) if language == "bash" else [
            line[2:] for line in text.splitlines() if line.startswith("$ ")]
        found += [line for line in lines if MODULE.search(line)]
    prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M).replace("\n", " ")
    for span in re.findall(r"`([^`]+)`", prose):
        if MODULE.search(span):
            found.append(span)
        elif COMMAND_NAME.match(span):
            found.append("-m ncae_cuda." + span)
    return found


def flags_named(command: str) -> list[tuple[str, tuple[str, ...], str]]:
    """(module, subcommand, flag) of each flag the command gives its module (a subcommand:
    the datasets command's first word), and each flag after an experiment's `--`, which its
    runs read."""
    module = MODULE.search(command)
    words = command[module.end():].split()
    cut = words.index("--") if "--" in words else len(words)
    own, runs = words[:cut], words[cut + 1:]
    subcommand = tuple(own[:1]) if module.group(1) == "ncae_cuda.datasets" else ()
    return ([(module.group(1), subcommand, word) for word in own if word.startswith("--")]
            + [(RUN_FLAGS, (), word) for word in runs if word.startswith("--")])


def test_every_flag_a_page_gives_a_command_is_one_it_has():
    """The pages' commands on published data sets, on a GPU, of the benchmarks, and those in
    the text run nowhere in the suite: a flag renamed or removed would stay on the page."""
    unknown = [f"{page.name}: {module} {' '.join(sub)} {flag}: {command}"
               for page in MANUAL for command in named_commands(page)
               for module, sub, flag in flags_named(command)
               if flag.split("=")[0] not in flags_of(module, *sub)]
    assert not unknown, unknown


# the commands whose folder a later command finds: a run's, a study's, an experiment's
KEEPS_A_FOLDER = ("ncae_cuda.train", "ncae_cuda.tune", "ncae_cuda.baselines",
                  "ncae_cuda.experiments")
CONTINUED_BY_THE_SAME_COMMAND = ("ncae_cuda.tune", "ncae_cuda.experiments")


def output_folder(command: str) -> str | None:
    """The folder a page's command writes its run, study or experiment in (an experiment's
    runs and tables: one per NAME under its --out); None where it writes a new one each time
    (train and baselines without --out) or is no such command."""
    words = shlex.split(command)
    if words[:2] != [".venv/bin/python", "-m"] or words[2] not in KEEPS_A_FOLDER:
        return None
    own = words[3:words.index("--")] if "--" in words else words[3:]   # not a run's flags
    out = own[own.index("--out") + 1] if "--out" in own else None
    if words[2] == "ncae_cuda.experiments":                 # python -m ... experiments NAME
        return f"{out or experiments.build_parser().get_default('out')}/{own[0]}"
    return out


def test_no_two_commands_of_a_page_write_one_folder():
    """A reader runs a page's commands one after another in one folder: a command into a
    folder an earlier one wrote is refused (another run's files, an experiment's runs of other
    settings) unless it continues that one (--resume; a study's or an experiment's command
    again) or starts it over (--overwrite)."""
    clashes = []
    for page in MANUAL:
        first = {}
        for _, language, text in blocks(page):
            for command in commands(text) if language == "bash" else ():
                folder = output_folder(command)
                if folder is None or first.setdefault(folder, command) is command:
                    continue
                words = shlex.split(command)
                again = command == first[folder] and words[2] in CONTINUED_BY_THE_SAME_COMMAND
                if not again and not {"--resume", "--overwrite"} & set(words):
                    clashes.append(f"{page.name}: {folder}: {command}")
    assert not clashes, clashes


def test_every_install_a_page_shows_is_what_ci_runs():
    """All but the GPU's (CuPy): CI has no GPU."""
    installs = [command for page in MANUAL for heading, language, text in blocks(page)
                if language == "bash" for command in commands(text)
                if command.startswith(".venv/bin/pip install") and "cuda" not in command]
    ci = [line.split("#")[0].strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert installs and all(command in ci for command in installs), installs
    assert '.venv/bin/pip install -e ".[docs]"' in installs


def test_the_extras_table_names_every_extra_the_package_has():
    """Getting started's table of the extras: one the package adds (pyproject.toml) is a row
    there, and a row is one it has."""
    page = (ROOT / "docs" / "getting-started.md").read_text()
    table = re.search(r"^\| extra \| brings \| for \|\n(.*?)\n\n", page, re.S | re.M)
    assert table, "docs/getting-started.md needs its table of the extras"
    named = re.findall(r"`([\w-]+)`", "".join(row.split("|")[1] for row in
                                               table.group(1).splitlines()))
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert sorted(named) == sorted(extras), set(named) ^ set(extras)


def test_the_readme_links_to_files_that_exist():
    """The site checks its own links (--strict); the README, read on the repository's host, is
    not part of it."""
    text = (ROOT / "README.md").read_text()
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)#][^)]*)\)", text)
             if "://" not in link]
    assert len(links) >= 10 and all((ROOT / link).is_file() for link in links), links


def test_performance_tables_are_generated_from_the_results_files():
    from bench import report
    assert report.main(["--check"]) == 0


@pytest.mark.extra("docs")
def test_the_site_builds_strict(tmp_path):
    """mkdocs build --strict fails on a broken link or heading, a page left out of the nav and
    an API reference that does not resolve; the reference is generated, not an empty page."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "ncae" / "index.html").read_text()
    assert all(method in reference for method in ("recommend_new", "similar_items", "save"))
    plot = tmp_path / "site" / "bench" / "results" / "2026-11-22-cpu-scalability"
    assert (plot / "scalability.png").is_file()
