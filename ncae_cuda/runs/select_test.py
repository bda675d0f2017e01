"""The run protocol's one function, the same for every model of the contract
(ncae_cuda.model.base.Model: NCAE, BlendedNCAE and every baseline): select on validation,
refit on training + validation, score the test part once.

The model's fit chooses on the validation part what it counts (NCAE's epoch, iALS's and BPR's
iteration; a model solved at once chooses nothing); a new model of its settings and that count
is fit on training + validation (refit=False: the selected model is tested); the test part is
scored once by the one evaluator (Model.evaluate): the same candidates, exclusions and tie rule
for every model, the cold entries apart (those a split holds apart, or those the evaluator sets
apart), and for implicit feedback POP beside. What a search chose (tune's study, the
baselines' grids) comes in as the model's settings: this function chooses nothing else.
"""
from __future__ import annotations

import time

from ..data import splits
from ..model import metrics
from ..model.base import Model


def no_options(phase: str, part) -> dict:
    """A fit's keywords beyond X and validation: none (the baselines')."""
    return {}


def select_refit_test(model: Model, split: splits.Split, fitting=no_options, refit: bool = True,
                      test: bool = True) -> tuple[Model, dict]:
    """(the tested model, its result): the protocol of the module's docstring for `model`
    (unfit) on `split`.

    fitting(phase, part) gives a fit's other keywords ('select' on the training part, 'refit'
    on training + validation: NCAE's epochs, checkpoints and callback). test=False stops after
    the selection (validation only). The result, whatever the model: 'best_epoch',
    'best_validation', 'still_improving', 'history' (the epochs or iterations of both fits),
    'seconds_select' and 'seconds_fit' (the fit whose model is tested); with test, 'test', and
    where there are cold test entries 'cold_test' (explicit: 'all_test', every entry); implicit
    feedback: 'pop' (and 'cold_pop')."""
    has_valid = split.valid.nnz > 0
    # train + validation (a time split's cold validation too): never a test item, and what a
    # user has done before the test, whichever fit is tested
    seen = split.fold_validation().train
    scored = f"after every {model.step}" if model.step else "once fit"
    print("select: training on the training part" + (
        f", scoring validation {scored}" if has_valid else ""), flush=True)
    start = time.perf_counter()
    model.fit(split.train, validation=split.valid if has_valid else None,
              **fitting("select", split.train))
    seconds = time.perf_counter() - start
    result = {"best_epoch": model.best_epoch, "best_validation": model.best_validation,
              "still_improving": model.still_improving, "history": list(model.history),
              "seconds_select": seconds, "seconds_fit": seconds}
    if model.still_improving:   # a best epoch within --patience of the end (stopping.py)
        config = model.config
        why = (f"--epochs ran out before --patience {config.patience} could end the fit"
               if config.patience else "validation was still improving")
        print(f"note: the best epoch is {epochs_text(model.best_epoch)} of {config.epochs}: "
              f"{why}; more --epochs may help", flush=True)
    if not test:
        return model, result
    if has_valid and refit:
        if model.best_epoch is not None:
            print(f"refit: best validation {model.step} {epochs_text(model.best_epoch)}: "
                  f"retraining on training + validation for as many {model.step}s", flush=True)
        start = time.perf_counter()
        model = model.refit(seen, **fitting("refit", seen))
        result["seconds_fit"] = time.perf_counter() - start
        result["history"] += model.history
    return model, {**result, **tested(model, split, seen)}


def tested(model: Model, split: splits.Split, seen) -> dict:
    """The test figures of a fitted model (select_refit_test's keys): the test part scored
    once, excluding `seen` (train + validation); cold entries scored apart, never mixed."""
    result = {"test": model.evaluate(split.test, exclude=seen, per_user=True)}
    cold = split.cold_test if split.cold_test is not None and split.cold_test.nnz else None
    if cold is not None and "cold" in result["test"]:
        # test entries cold to this model though not at the cut (without the refit, those of
        # users who came during validation): scored with the cut's cold ones, none left out
        cold = cold.concat(split.test)
    if cold is not None:
        result["cold_test"] = model.evaluate(cold, exclude=seen)["cold"]
        result["test"].pop("cold", None)
    elif "cold" in result["test"]:
        result["cold_test"] = result["test"].pop("cold")
    if "cold_test" in result and not model.config.implicit:
        # a data set's published figures score every test entry, cold ones too
        result["all_test"] = metrics.pooled_rmse(result["test"], result["cold_test"])
    if model.config.implicit:
        test = model.evaluate(split.test, exclude=seen, popularity=True)
        result["pop"] = {k: v for k, v in test.items() if k not in ("clusters", "cold")}
        if "cold_test" in result:
            result["cold_pop"] = model.evaluate(split.test if cold is None else cold,
                                                exclude=seen, popularity=True)["cold"]
    return result


def epochs_text(best_epoch: int | dict) -> str:
    """A model's best epoch as a line says it: 73, or a blend's 'item 73, user 104'."""
    if isinstance(best_epoch, dict):
        return ", ".join(f"{name} {epoch}" for name, epoch in best_epoch.items())
    return str(best_epoch)
