"""Recipes (--config): TOML files of the model's settings, read under the command line's flags;
the files in recipes/ hold settings only and each is behind a README result."""
import json
from pathlib import Path

import pytest
from test_user_errors import TINY, refused

from ncae_cuda import NCAE, make_model
from ncae_cuda.commands import train
from ncae_cuda.model.config import Config, read_recipe

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


@pytest.mark.parametrize("text, message", [
    ("seed = 3\n", "seed: a recipe holds the model's settings, not the data, split or seed"),
    ('split = "u1"\n', "split: a recipe holds the model's settings"),
    ("hiden = [8]\n", "hiden: no such setting (settings: alpha,"),
    ('variant = "NCAE"\n', 'variant: is for implicit feedback (a recipe for implicit feedback '
                           'says feedback = "implicit")'),
    ("hidden = [\n", "not TOML"),
    ("epochs = 2.5\n", "epochs: must be an integer >= 1; got 2.5"),
    ('dropout = "high"\n', "dropout: must be a number; got 'high'"),
    ("[model]\nhidden = [8]\n", "model: no such setting"),
])
def test_a_bad_recipe_is_refused_by_name(tmp_path, capsys, text, message):
    path = recipe(tmp_path, text)
    refused(train.main, [*TINY, "--config", str(path), "--out", str(tmp_path / "r")], capsys,
            f"--config {path}: {message}")
    assert not (tmp_path / "r").exists()


def test_a_missing_recipe(tmp_path, capsys):
    refused(train.main, [*TINY, "--config", str(tmp_path / "none.toml")], capsys,
            "none.toml: cannot read it (No such file or directory)")


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
