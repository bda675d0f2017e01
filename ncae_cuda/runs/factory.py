"""Every model of the package, made of its settings or read from its file: the one place that
knows them all (NCAE and BlendedNCAE of model/, the baselines of baselines/estimators.py), so
that a recipe, a run, a command and the server take any of them alike.

    model = make_model({"model": "ials", "factors": 64})     # 'model' absent: NCAE
    model = make_model({"based": "both", "hidden": (300,)})  # a BlendedNCAE
    model = load_model("model.npz")                          # whatever the file holds
    model = load_model("runs/demo")                          # the run folder's model.npz
    model = make_model(read_recipe("recipes/lastfm-2k-implicit.toml"))   # any model's recipe
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from ..baselines.estimators import MODELS as BASELINES
from ..model import modelfile
from ..model.base import Model, arguments_checked, restored
from ..model.blend import BlendedNCAE
from ..model import config
from ..model.config import Config, SettingError, without_unread
from ..model.estimator import NCAE
from ..model.recommender import NAME
from . import rundir

MODELS = (NAME, *BASELINES)              # the names `model` takes


@arguments_checked
def make_model(settings: dict | None = None, device="auto", shard: str | None = None
               ) -> Model:
    """The model of `settings`, unfit.

    Parameters
    ----------
    settings : dict, optional
        'model' names the model (MODELS: 'ncae', the default, 'ease', 'ials', 'bpr', 'pop',
        'item-knn', 'rp3beta'); the others are its settings: NCAE's Config fields (a recipe's,
        ncae_cuda.model.config.read_recipe; based='both' makes a BlendedNCAE), or a baseline's
        (its class's `defaults`). A model's `settings` record is such a dict.
    device : str or ops backend
        'auto', 'cpu', 'gpu', or an ops backend.
    shard : {None, 'columns'}
        An item- or user-based NCAE's columns shared among processes (NCAE's shard).

    Returns
    -------
    Model
        NCAE, BlendedNCAE, or a baseline (ncae_cuda.baselines.estimators).

    Raises
    ------
    SettingError
        An unknown model or setting, a value out of range, or a shard of a model that has
        none, named.
    """
    if not isinstance(settings, (Mapping, type(None))):
        raise SettingError("settings", f"must be a dict such as {{'model': 'ease'}}; got "
                                       f"{type(settings).__name__}")
    settings = dict(settings or {})
    name = settings.pop("model", NAME)
    if name not in MODELS:
        raise SettingError("model", f"must be one of {', '.join(MODELS)}; got {name!r}")
    if name == NAME:
        settings = asdict(Config.from_dict(settings))          # every setting, its default
        if settings["based"] != "both":
            return NCAE.of_settings(settings, device=device, shard=shard)
        model_class = BlendedNCAE
    else:
        model_class = BASELINES[name]
    if shard is not None:
        raise SettingError("shard", f"is for an item- or user-based NCAE, not "
                                    f"{model_class.__name__}: it trains in one process")
    if model_class is BlendedNCAE:
        return BlendedNCAE.of_settings(settings, device=device)
    return model_class(device=device, **settings)


@arguments_checked
def load_model(path, device="auto") -> Model:
    """The model a model file holds, whichever it is (save() of any model wrote it).

    Parameters
    ----------
    path : str or os.PathLike
        A model file, or the run folder that holds one (its model.npz), as the recommend and
        serve commands take it.
    device : str or ops backend
        Where the model runs, whatever it was saved from ('auto', 'cpu', 'gpu').

    Returns
    -------
    Model
        The model, fitted, as it was saved: it scores bit for bit as it did.

    Raises
    ------
    DataError
        A file that is missing, not a model file, of another format version, or damaged,
        named.
    SettingError
        A device name it does not know, named.
    """
    # the folder's file: the model's source, its index beside it (model.ann), not the folder
    path = rundir.model_file(Path(path))
    meta, arrays = modelfile.read(path, "model")

    def make(ops) -> Model:
        # a setting its others leave unread, from a file of before it was refused: the
        # default (a baseline's, by the rules of its own settings)
        kind = BASELINES.get(meta["settings"].get("model"))
        return make_model(without_unread(meta["settings"], kind and kind.defaults), ops)
    return restored(path, meta, arrays, make, device)


def read_recipe(path) -> dict:
    """The settings of a recipe file of any model, as make_model takes them.

    Parameters
    ----------
    path : str or os.PathLike
        A TOML file: `model = "ials"` and a baseline's settings, or NCAE's settings
        (ncae_cuda.model.config.read_recipe), where `model` is absent or "ncae".

    Returns
    -------
    dict
        {setting: value}: a baseline's with 'model' naming it; NCAE's without it.

    Raises
    ------
    RecipeError
        A ValueError naming the file and an unknown model or setting, a value the model
        refuses, or that the file cannot be read or is not TOML.
    """
    with config.refused_as_a_recipe(path):
        values = config.read_toml(path)
        name = values.pop("model", NAME)
        if name == NAME:
            return config.recipe_of(values)
        config.refuse_run_settings(values)
        try:
            make_model({"model": name, **values}, device="cpu")
        except SettingError as e:
            raise ValueError(config.as_in_a_recipe(e)) from None
        return {"model": name, **values}


def recipe_text(settings: dict, comment: str) -> str:
    """A recipe file of `settings` (make_model's, of any model) under `comment`'s lines: what
    read_recipe reads back."""
    name = settings.get("model", NAME)
    if name == NAME:
        return config.recipe_text({k: v for k, v in settings.items() if k != "model"}, comment)
    return config.recipe_text(settings, comment, ("model", *BASELINES[name].defaults))


def step(model: str) -> str | None:
    """What the fit of `model` (a name of MODELS) counts and chooses on validation, as lines
    name it (Model.step): NCAE's epoch, iALS's and BPR's iteration; None for a model fit in
    one go."""
    return (NCAE if model == NAME else BASELINES[model]).step


def seeded(model: str, seed: int) -> dict:
    """{'seed': seed} where the model takes one (NCAE; iALS's and BPR's initialisation), else
    {}: a recipe holds no seed, a run or a study gives it."""
    return {"seed": seed} if model == NAME or "seed" in BASELINES[model].defaults else {}
