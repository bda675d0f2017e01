"""Recipes (--config): TOML files of the model's settings, read under the command line's flags;
the files in recipes/ hold settings only and each is behind a README result."""
import json
from pathlib import Path

import pytest
from test_user_errors import TINY, refused

from ncae_cuda import NCAE, make_model
from ncae_cuda.commands import train
from ncae_cuda.commands.flags import build_parser, run_spec
from ncae_cuda.errors import NcaeError, RecipeError
from ncae_cuda.model.config import DEFAULTS, Config, given_way, read_recipe
from ncae_cuda.runs import factory

REPO = Path(__file__).resolve().parents[1]
RECIPES = sorted((REPO / "recipes").glob("*.toml"))


def recipe(tmp_path, text: str) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    return path


def test_the_recipe_sets_what_the_command_line_leaves(tmp_path):
    path = recipe(tmp_path, 'hidden = [6, 4]\noutput = "identity"\nrow_norm = 0.25\n'
                            'lr_decay = 0.9\nweight_decay = 0.02\ndropout = 0.3\n')
    out = tmp_path / "run"
    assert train.main([*TINY, "--config", str(path), "--dropout", "0.4", "--epochs", "1",
                       "--out", str(out)]) == 0
    settings = json.loads((out / "metrics.json").read_text())["config"]
    assert settings["output"] == "identity" and settings["row_norm"] == 0.25
    assert settings["lr_decay"] == 0.9 and settings["weight_decay"] == 0.02
    assert settings["dropout"] == 0.4                          # the flag over the recipe
    assert settings["hidden"] == [8]                           # TINY's --hidden 8 too
    assert "config" not in settings                            # its settings, not its name
    assert NCAE.load(out / "model.npz").config.output == "identity"


def test_a_parser_read_with_a_recipe_keeps_none_of_it_for_the_next_line(tmp_path):
    """One parser, two command lines: the recipe of the first is not the second's (before, the
    recipe was set as the parser's defaults, and a line without --config took its dropout)."""
    path = recipe(tmp_path, "dropout = 0.3\n")
    parser = build_parser()
    assert run_spec(parser, [*TINY, "--config", str(path)])[1].dropout == 0.3
    assert run_spec(parser, TINY)[1].dropout == run_spec(build_parser(), TINY)[1].dropout != 0.3


@pytest.mark.parametrize("text, message", [
    ("seed = 3\n", "seed: a recipe holds the model's settings, not the data, split or seed"),
    ('split = "u1"\n', "split: a recipe holds the model's settings"),
    ("hiden = [8]\n", "hiden: no such setting (settings: alpha,"),
    ('variant = "NCAE"\n', 'variant: is for implicit feedback (a recipe for implicit feedback '
                           'says feedback = "implicit")'),
    ("hidden = [\n", "not TOML"),
    ("epochs = 2.5\n", "epochs: must be an integer >= 1; got 2.5"),
    # each value as TOML writes it: before, as Python does ('high', (0,))
    ('dropout = "high"\n', 'dropout: must be a number; got "high"'),
    ('feedback = "implicit"\ncutoffs = [0]\n',
     "cutoffs: must be positive integers, e.g. [10, 100]; got [0]"),
    ("hidden = [3, -1]\n", "hidden: must be positive integers, e.g. [500, 500]; got [3, -1]"),
    ("rating_scale = [5, 1]\n", "rating_scale: must be (low, high) with low < high; got [5, 1]"),
    ('feedback = "implicitt"\n', 'feedback: must be one of explicit, implicit; got "implicitt"'),
    ("[model]\nhidden = [8]\n", "model: no such setting"),
])
def test_a_bad_recipe_is_refused_by_name(tmp_path, capsys, text, message):
    path = recipe(tmp_path, text)
    refused(train.main, [*TINY, "--config", str(path), "--out", str(tmp_path / "r")], capsys,
            f"--config {path}: {message}")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("reader", [read_recipe, factory.read_recipe],
                         ids=["ncae", "any-model"])
@pytest.mark.parametrize("text, reason", [
    ("seed = 3\n", "seed: a recipe holds the model's settings, not the data, split or seed"),
    ("hidden = [3, -1]\n", "hidden: must be positive integers, e.g. [500, 500]; got [3, -1]"),
    ("hidden = [8\n", "not TOML: "),
    (None, "cannot read it (No such file or directory)"),
])
def test_a_recipe_refused_in_python_is_an_ncae_error_naming_its_file(tmp_path, reader, text,
                                                                      reason):
    """Both readers of the API raise the package's error, naming the file (before: a plain
    ValueError of the reason alone, which `except NcaeError` let through)."""
    path = recipe(tmp_path, text) if text is not None else tmp_path / "none.toml"
    with pytest.raises(NcaeError) as refused_by:
        reader(path)
    assert isinstance(refused_by.value, RecipeError) and isinstance(refused_by.value, ValueError)
    assert refused_by.value.path == path and refused_by.value.reason.startswith(reason)
    assert str(refused_by.value).startswith(f"{path}: {reason}")


def test_a_missing_recipe(tmp_path, capsys):
    refused(train.main, [*TINY, "--config", str(tmp_path / "none.toml")], capsys,
            "none.toml: cannot read it (No such file or directory)")


def test_a_model_file_given_for_a_recipe_is_refused_as_no_text(tmp_path, capsys):
    """A run's model.npz beside its recipe, given to --config: binary, not TOML's UTF-8."""
    model = tmp_path / "model.npz"
    model.write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x00\x00\xf8\xff")   # a zip's start
    refused(train.main, [*TINY, "--config", str(model)], capsys,
            f"--config {model}: not TOML: not UTF-8 text (byte 0xf8 at 10): give a TOML text "
            "file of settings, not a model's .npz (see --help)\n")


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_each_recipe_is_settings_only_and_valid(path):
    settings = read_recipe(path)
    assert settings and "seed" not in settings
    Config(**settings).resolved()
    assert make_model(settings, device="cpu").config.hidden == settings["hidden"]


def test_each_recipe_is_behind_a_result_of_the_manual():
    """Named by the README or a page of the site (docs/), beside the figures it gave."""
    manual = "".join(path.read_text() for path in [REPO / "README.md",
                                                  *sorted((REPO / "docs").glob("*.md"))])
    assert len(RECIPES) >= 6
    for path in RECIPES:
        assert f"recipes/{path.name}" in manual, path.name


def test_a_flag_beats_the_recipe_settings_it_leaves_unread_with_a_note(tmp_path, capsys):
    """--variant NCAE- over an NCAE+ recipe: the recipe's augmentation (NCAE- has none) and its
    popularity weighting's c0 and omega (NCAE- weighs uniformly) are left out, said in a note,
    and the rest of the recipe taken (before: refused, "--variant: NCAE- has no augmentation:
    leave augment_eps unset", though the user never gave augment_eps)."""
    path = recipe(tmp_path, 'feedback = "implicit"\nvariant = "NCAE+"\naugment_eps = 0.02\n'
                            'c0 = 100.0\nomega = 0.3\nlr = 0.005\n')
    spec, config = run_spec(build_parser(), [*TINY, "--config", str(path), "--variant", "NCAE-",
                                             "--out", str(tmp_path / "run")])
    assert capsys.readouterr().out.splitlines() == [
        f"note: {path} sets c0 = 100.0, omega = 0.3, augment_eps = 0.02, which --variant NCAE- "
        "leaves unread or contradicts: left out of the run (a flag beats its recipe)"]
    assert (config.model_name, config.weighting, config.augment_eps) == ("NCAE-", "uniform", 0)
    assert (config.c0, config.omega, config.lr) == (DEFAULTS.c0, DEFAULTS.omega, 0.005)


def test_flags_that_contradict_each_other_are_refused_over_a_recipe(tmp_path, capsys):
    """Only a recipe's setting gives way: two flags of the user's that disagree are refused."""
    path = recipe(tmp_path, 'feedback = "implicit"\nc0 = 100.0\n')
    refused(train.main, [*TINY, "--config", str(path), "--variant", "NCAE-", "--augment-eps",
                         "0.02"], capsys, "--variant: NCAE- has no augmentation")


@pytest.mark.parametrize("given, way", [
    # NCAE-: no augmentation, uniform weighting (c0 and omega are popularity weighting's)
    ({"variant": "NCAE-"}, {"c0": ("variant",), "omega": ("variant",),
                            "augment_eps": ("variant",)}),
    ({"variant": "NCAE"}, {"augment_eps": ("variant",)}),
    # explicit: every implicit setting, the recency's halflife after its boost
    ({"feedback": "explicit", "hidden": (8,)},
     {name: ("feedback",) for name in ("variant", "c0", "omega", "augment_eps",
                                       "recency_boost", "recency_halflife")}),
    ({"recency_boost": 0.0}, {"recency_halflife": ("recency_boost",)}),
    ({"lr": 0.1, "variant": "NCAE+"}, {})])
def test_the_recipe_settings_given_flags_leave_unread(given, way):
    recipe = {"feedback": "implicit", "variant": "NCAE+", "c0": 100.0, "omega": 0.3,
              "augment_eps": 0.02, "recency_boost": 2.0, "recency_halflife": 3.0, "lr": 0.005}
    assert given_way(recipe, given) == way


def test_an_explicit_recipe_gives_way_to_the_flags_of_an_implicit_variant_together():
    """output and row_norm are explicit feedback's: neither --feedback implicit nor --variant
    alone over the recipe reads them, both do."""
    recipe = {"feedback": "explicit", "output": "identity", "row_norm": 0.2, "lr": 0.005}
    assert given_way(recipe, {"feedback": "implicit", "variant": "NCAE"}) == {
        "output": ("feedback", "variant"), "row_norm": ("feedback", "variant")}
