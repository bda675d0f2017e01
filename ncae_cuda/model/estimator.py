"""NCAE as a Python object: fit, save, load; and, from Recommender (recommender.py), predict,
recommend, fold in new users, similar items.

    from ncae_cuda import NCAE
    from ncae_cuda.data import datasets
    data = datasets.load("synthetic-tiny")                # or any users x items scipy.sparse
    model = NCAE(feedback="implicit", hidden=(32,)).fit(data, epochs=5)
    items, scores = model.recommend(data.user_ids[:3], n=10)
    model.save("model.npz")
    model = NCAE.load("model.npz", device="cpu")

The data is users x items: users are who `recommend` ranks for, items what it ranks. `based`
chooses which of the two the autoencoder encodes (its rows); the other are its columns.
shard='columns' trains one model across the processes of a torch.distributed group, each
holding a share of the columns (ncae_cuda/ops/shard.py); every method is then called by every
process alike, and rank 0 writes what is saved. Ids are
the data set's own (Interactions.user_ids / item_ids) or, for a scipy matrix, its row and
column numbers. A saved model holds its settings, id maps, parameters and the interactions it
was fit on (users are encoded from them, and seen items filtered by them), so it recommends
without the training data at hand.
"""
from __future__ import annotations

import numbers
from dataclasses import asdict

import numpy as np

from ..data.interactions import DataError, Interactions
from ..errors import NcaeError
from ..ops import as_backend
from ..ops.layout import SHARDED, AdamConfig, NCAELayout
from ..ops.plan import Planner, Schedule
from . import modelfile, stopping
from .config import MULTINOMIAL, TF32, Config, SettingError, without_unread
from .fitdata import FitData, as_interactions
from .network import Network, Objective
from .base import Model, arguments_checked, check_callback, restored
from .recommender import NAME, RatingModel, Recommender
from .trainer import CHECKPOINT_EVERY, Checkpoint, ShardCheckpoint, Trainer, fingerprint
from .warmstart import WarmStart

SHARDS = (None, "columns")      # one process; the columns shared out among a process group's


class OutOfMemory(NcaeError, RuntimeError):
    """The device ran out of memory: the message names what needed it and what lowers it."""


class NCAE(Recommender):
    """The Neural Collaborative Autoencoder recommender.

    Parameters
    ----------
    device : str or ops backend
        'auto' (the GPU when there is one), 'cpu', 'gpu', or an ops backend
        (ncae_cuda.ops.get_backend).
    shard : {None, 'columns'}
        None: one process. 'columns': a share of the columns in each process of an initialised
        torch.distributed group, every process calling the same methods (see the module's
        docstring).
    **settings
        The model's settings: ncae_cuda.model.config.Config's fields, the same names and
        defaults as the flags of python -m ncae_cuda.train (the settings page lists them).

    Raises
    ------
    SettingError
        A setting out of range, of the wrong kind, or contradicting another, named.

    Examples
    --------
    >>> from ncae_cuda import NCAE
    >>> NCAE(feedback="implicit", hidden=(64,), device="cpu")
    NCAE(feedback='implicit', hidden=(64,), device='cpu')
    """

    def __init__(self, device="auto", shard: str | None = None, **settings):
        if settings.get("based") == "both":
            raise SettingError("based", "'both' is a blend of an item- and a user-based NCAE: "
                               "make it with BlendedNCAE(...) or ncae_cuda.make_model(settings)")
        self.config = Config.from_dict(settings).resolved()
        if shard not in SHARDS:
            raise SettingError("shard", f"must be None or 'columns'; got {shard!r}")
        if shard and self.config.loss == MULTINOMIAL:
            raise SettingError("loss", "multinomial's softmax spans every column, and a "
                               "column-sharded model's processes each hold a share: it trains "
                               "the weighted_square loss")
        self.device, self.shard = device, shard
        self._patience_named = "patience" in settings
        self.ops = as_backend(device)
        self.data = None                              # FitData: what the fit derived from its
                                                      # data (ncae_cuda.model.fitdata)
        self.history, self.best_epoch = [], 0
        # the last fit ran out of epochs while validation was still improving (stopping.py)
        self.still_improving = False
        self._net = None
        self.comm = None                              # a sharded model's collectives
        if shard == "columns":
            from .distributed import Collectives
            self.comm = Collectives(self.ops)

    def __repr__(self) -> str:
        defaults = asdict(Config(feedback=self.config.feedback).resolved())
        changed = {k: v for k, v in asdict(self.config).items() if v != defaults[k]}
        settings = "".join(f", {k}={v!r}" for k, v in changed.items())
        return f"NCAE(feedback={self.config.feedback!r}{settings}, device={self.ops.name!r})"

    # -----------------------------------------------------------------------------------------
    # training

    def fit(self, X, validation=None, epochs: int | None = None, callback=None,
            checkpoint=None, resume: bool = False, checkpoint_every: float = CHECKPOINT_EVERY,
            verbose: bool = True, warm_start: NCAE | None = None) -> NCAE:
        """Train on X.

        Parameters
        ----------
        X : scipy.sparse matrix or Interactions
            Users x items (ncae_cuda.data.datasets, ncae_cuda.data.splits).
        validation : scipy.sparse matrix or Interactions, optional
            Held-out interactions of the same users and items, scored after every epoch
            (RMSE, or NDCG at the last cutoff); training stops after `patience` epochs without
            a better score, and the model keeps its best epoch's parameters.
            model.still_improving is True where it ran out of epochs with its best among the
            last few (ncae_cuda.model.stopping.still_improving): more epochs may help.
        epochs : int, optional
            Most epochs (default: the model's `epochs` setting; 0: pre-training only, for a
            pretrain other than BP).
        callback : callable, optional
            callback(model, record) after every epoch, with the epoch's record (loss, seconds,
            validation figures) before it is logged; what it adds to the record is kept in
            model.history.
        checkpoint : str or os.PathLike, optional
            A file to save the fit in (after pre-training, at the end of an epoch once
            checkpoint_every seconds have passed since the last save, and after the last
            epoch).
        resume : bool
            Continue the fit saved in `checkpoint` instead of starting over; it ends exactly
            where an uninterrupted fit does. The checkpoint must be this fit's: the same
            settings, epochs, data and backend; another's is refused, naming what differs. A
            fit that raises (Ctrl-C too) leaves the model as it was, so a stopped partial_fit
            resumes alike.
        checkpoint_every : float
            Seconds between checkpoints, the most training a kill can cost (0: after every
            epoch).
        verbose : bool
            Print one line per epoch.
        warm_start : NCAE, optional
            A fitted model (this one: partial_fit) to start from instead of a fresh draw
            (ncae_cuda.model.warmstart): each column of X's (items of a user-based model, users
            of an item-based one) whose id the model knows starts from the model's parameters
            of it, a new column as a fresh fit draws it, and the hidden layers are the model's;
            ids match by value (a scipy matrix's are its row and column numbers). The column
            weights, augmentation and the rating scale are X's; Adam's moments and step count
            start from zero, as in any fit (the model's, carried over, tested no better), and
            there is no pre-training (its stages train each layer against a freshly drawn
            temporary one, which would pull the model's layers away from what they learned).
            hidden, feedback, based, output and loss must be the model's; any other setting
            may change: a lower lr than a fresh fit's (a third, on MovieLens 100K cut by time)
            tests as well as a fresh fit, where a fresh fit's rate moves it off what it knew.

        Returns
        -------
        NCAE
            The model, fitted.

        Raises
        ------
        DataError
            Bad data (duplicate entries; negative, NaN or infinite values), a validation part
            of no entries or whose entries are all cold, or a checkpoint of another fit.
        SettingError
            A warm start whose hidden, feedback, based, output or loss differ from this
            model's, named; an epochs, checkpoint_every or callback that is none; resume
            without a checkpoint; no validation where NCAE(patience=...) named a patience,
            which would stop on nothing (a whole record's, make_model's, is kept).
        OutOfMemory
            The device's memory is too small: the message names what needed it and the setting
            that lowers it.
        Diverged
            A NaN or infinite loss, naming the epoch and step.

        Examples
        --------
        >>> from ncae_cuda import NCAE
        >>> from ncae_cuda.data import datasets, splits
        >>> split = splits.leave_one_out(datasets.load("synthetic-tiny"))
        >>> model = NCAE(feedback="implicit", hidden=(32,), device="cpu")
        >>> model = model.fit(split.train, validation=split.valid, epochs=3, verbose=False)
        >>> len(model.history)
        3
        """
        c, comm = self.config, self.comm
        check_callback(callback)
        self._check_patience_read(validation)
        if resume and checkpoint is None:     # (before, the fit started over, unsaid)
            raise SettingError("resume", "needs checkpoint=, the file a fit resumes from (the "
                                         "one the interrupted fit was given)")
        start = None if warm_start is None else self._warm_start(warm_start)
        epochs = c.epochs if epochs is None else epochs
        pretraining = c.pretrain if start is None else "BP"
        # 0 epochs train nothing but pre-training: without it (BP), a fit of 0 is no fit
        least = 1 if pretraining == "BP" else 0
        if isinstance(epochs, bool) or not isinstance(epochs, numbers.Integral) or epochs < least:
            raise SettingError("epochs", f"must be an integer >= 1 (0: pre-training only, "
                                         f"where pretrain is not BP); got {epochs!r}")
        if isinstance(checkpoint_every, bool) or not (isinstance(checkpoint_every, numbers.Real)
                                                      and checkpoint_every >= 0):
            raise SettingError("checkpoint_every", f"must be a number of seconds >= 0 (0: "
                                                   f"after every epoch); got {checkpoint_every!r}")
        fit = as_interactions(X, "X")
        data = FitData.of(fit, c, self.ops)
        if comm is not None:
            data.shard(comm.rank, comm.world)
        valid = None if validation is None else data.validation(validation, self.validation_use)
        known = None if start is None else start.known(data.column_ids, c.based)
        verbose = verbose and self.leader
        B = c.batch_size                # the batch, until the rows it is capped at are known
        with self._as_it_was_unless_fitted(), self.ops.session():
            self.data = data
            # the model is no longer the file it was loaded from: its index is not saved beside
            # it (model/ann.py), where it would replace the one of the file's model
            self.source = None
            try:
                self._net = self._new_network(start)
                if known is not None and verbose:
                    print(f"note: warm start: {known}")
                csr, rows = data.training(verbose)
                # a batch of more rows than there are is all of them (the same training: the
                # padding rows are empty), so its memory is the rows' and a batch_size of a
                # billion asks for no terabytes; the ops still take a B over the rows
                B = max(1, min(c.batch_size, len(rows)))
                planner = Planner(csr, rows, Schedule(c.seed, B, c.dropout))
                self._net.prepare(planner.geometry)
                identity = {"settings": {**c.as_dict(), "epochs": int(epochs)},
                            "data": fingerprint(*_entries(fit, c), *_entries(valid, c)),
                            "backend": self.ops.name}
                if comm is not None:
                    identity["shard"] = {"processes": comm.world, "rank": comm.rank,
                                         "columns": list(data.columns[:2])}
                if start is not None:
                    identity["warm_start"] = fingerprint(start.params, start.column_ids)
                trainer = Trainer(
                    self._net, csr, planner, AdamConfig(c.lr, weight_decay=c.weight_decay,
                                                         lr_decay=c.lr_decay),
                    pretraining, c.pretrain_epochs, c.patience, self.selection_metric,
                    score=None if valid is None else self.evaluator(valid),
                    on_epoch=None if callback is None else lambda record: callback(self, record),
                    checkpoint=None if checkpoint is None else (
                        Checkpoint(checkpoint, identity) if comm is None
                        else ShardCheckpoint(checkpoint, identity, comm)),
                    checkpoint_every=checkpoint_every, verbose=verbose)
                progress = trainer.run(int(epochs), resume)
            except MemoryError as e:      # CuPy's OutOfMemoryError is a MemoryError too
                raise OutOfMemory(self._out_of_memory(e, B)) from None
        # without validation nothing was chosen: the model is that of every epoch run, as
        # iALS's and BPR's is of every iteration (refit runs as many)
        self.history = progress.history
        self.best_epoch = progress.best_epoch if valid is not None else progress.epoch
        self.still_improving = stopping.still_improving(self.history, self.best_epoch,
                                                        int(epochs), c.patience)
        return self

    def refit(self, X, **fitting) -> NCAE:
        """A new model of the same settings fit on X for best_epoch epochs: the run protocol's
        refit on training + validation of the epoch chosen on validation. **fitting: fit's
        other keywords. NotFitted before a fit, which has chosen no epoch yet."""
        self._check_fitted()
        refuse_epochs(fitting, self.best_epoch)
        model = NCAE.of_settings(asdict(self.config), device=self.ops, shard=self.shard)
        return model.fit(X, epochs=self.best_epoch, **fitting)

    @property
    def best_validation(self) -> dict | None:
        """The validation figures of the best epoch of the last fit (None without one)."""
        return next((h["valid"] for h in self.history
                     if h["epoch"] == self.best_epoch and "valid" in h), None)

    def partial_fit(self, X, validation=None, epochs: int | None = None, **fitting) -> NCAE:
        """fit() of X starting from this model's own parameters (fit's warm_start).

        A model of yesterday's interactions trained on to today's: the columns it knows keep
        their parameters, new ones are drawn fresh.

        Parameters
        ----------
        X, validation, epochs
            As fit's.
        **fitting
            fit's other keywords.

        Returns
        -------
        NCAE
            The model, fitted on from where it was.
        """
        if "warm_start" in fitting:
            raise SettingError("warm_start", "is this model itself in partial_fit: start from "
                                             "another with fit(X, warm_start=model)")
        return self.fit(X, validation, epochs, warm_start=self, **fitting)

    def check_warm_start(self, model) -> None:
        """SettingError where a fit of this model can not start from `model` (fit's
        warm_start): another network's shape, a blend, or no NCAE at all."""
        self._warm_start(model)

    def _warm_start(self, model: NCAE) -> WarmStart:
        """What a fit warm-started from `model` starts from, taken before the fit replaces any
        of it (model may be self); SettingError where the network's shape would change."""
        if isinstance(model, RatingModel) and model.config.based == "both":
            raise SettingError("based", f"must be the warm start's model's (both there, "
                               f"{self.config.based} here): a blend starts only a blend")
        if isinstance(model, Model) and not isinstance(model, NCAE):
            raise SettingError("warm_start", f"must be an NCAE, whose parameters a fit starts "
                                             f"from; got {model.title}")
        if not isinstance(model, NCAE):
            raise SettingError("warm_start", f"must be a fitted NCAE; got "
                                             f"{type(model).__name__}")
        model._check_fitted()
        start = WarmStart(model.config, model._whole_params(), model.data.column_ids)
        start.check(self.config)
        return start

    @property
    def selection_metric(self) -> tuple[str, bool]:
        """(name, higher is better) of the validation figure early stopping follows."""
        return self.config.selection_metric

    def _new_network(self, start: WarmStart | None = None) -> Network:
        """The network of the fit data, freshly drawn, or from `start` (a warm start)."""
        columns = self.data.columns
        layout = NCAELayout(columns.n, self.config.hidden, columns)
        params = layout.xavier_init(np.random.default_rng(self.config.seed))
        if start is not None:
            params = start.start(layout, self.data.column_ids, params)
        return Network(layout, self.ops, self._objective(), params, self.data.column_weights(),
                       comm=self.comm, tf32=self.config.matmul == TF32)

    def _objective(self) -> Objective:
        c = self.config
        if c.implicit:
            return Objective.implicit(c.loss)
        return Objective.explicit(*self.data.rating_scale, c.alpha, c.beta,
                                  identity=c.output == "identity", row_norm=c.row_norm)

    def _out_of_memory(self, error: MemoryError, B: int) -> str:
        """What needed the memory at a batch of B rows, with the sizes, and the setting that
        lowers each."""
        c, mib = self.config, 4 / 2**20                                 # float32 MiB
        size = NCAELayout(self.data.n_cols, c.hidden).size
        lines = [f"out of memory on the {self.ops.name} backend ({error})",
                 f"  parameters, gradients and Adam's m, v: 4 x {size:,} floats = "
                 f"{4 * size * mib:,.0f} MiB (lower --hidden)"]
        N = self.data.n_cols
        if c.implicit:
            lines.append(f"  dense output of a batch: about 3 x {B} x {N:,} floats = "
                         f"{3 * B * N * mib:,.0f} MiB (lower --batch-size)")
        else:
            K = sum(c.hidden)
            lines.append(f"  a batch's hidden layers and their gradients: about 2 x {B} x {K:,} "
                         f"floats = {2 * B * K * mib:,.0f} MiB (lower --batch-size)")
        if self.ops.name != "cpu":
            lines.append("  or train with --device cpu")
        return "\n".join(lines)

    # -----------------------------------------------------------------------------------------
    # saving and loading

    def contents(self) -> tuple[dict, dict]:
        """(meta, arrays): what save() writes beside the settings: the parameters (a sharded
        model's gathered), id maps and the fit interactions (users are encoded from them, and
        seen items filtered by them), so the model recommends without the training data at
        hand."""
        net = self._net
        meta = {"rating_scale": self.rating_scale and list(self.rating_scale),
                "history": self.history, "best_epoch": self.best_epoch, "steps": net.steps}
        arrays = {"params": self._whole_params(), **self.data.arrays()}
        if net.col_weights is not None:
            arrays["col_weights"] = self._all_columns(net.col_weights)
        return meta, arrays

    def _whole_params(self) -> np.ndarray:
        """(parameters,) the network's parameters as one process holds them, on the host: a
        shard's columns gathered with every other rank's."""
        net = self._net
        if self.comm is None:
            return self.ops.to_host(net.params)
        layout = NCAELayout(self.data.n_cols, self.config.hidden)
        params = np.zeros(layout.size, np.float32)
        for key, view in layout.views(params).items():
            view[...] = (self._all_columns(net.p[key]) if key in SHARDED
                         else self.ops.to_host(net.p[key]))
        return params

    def _all_columns(self, rows) -> np.ndarray:
        """(n_cols, ...) on the host: a per-column device array of a shard's columns gathered
        with every other rank's (each padded to the widest share for the gather)."""
        comm, bounds = self.comm, self.data.bounds
        if comm is None:
            return self.ops.to_host(rows)
        widths = np.diff(bounds)
        padded = self.ops.xp.zeros((int(widths.max()), *rows.shape[1:]), rows.dtype)
        padded[:len(rows)] = rows
        every = self.ops.to_host(comm.gather(padded, "columns"))        # (ranks, widest, ...)
        return np.concatenate([every[r, :widths[r]] for r in range(comm.world)])

    @classmethod
    @arguments_checked
    def load(cls, path, device: str = "auto") -> NCAE:
        """An NCAE saved by save() (ncae_cuda.load_model reads any model's file).

        Parameters
        ----------
        path : str or os.PathLike
            A file NCAE.save() wrote.
        device : str
            Where the model runs: any, whatever it was saved from ('auto', 'cpu', 'gpu'); a GPU
            model loads on the CPU and back.

        Returns
        -------
        NCAE
            The model, fitted, as it was saved.

        Raises
        ------
        DataError
            A file that is missing, not a model file, of another format version, damaged, or
            of another model (a blend's, a baseline's: ncae_cuda.load_model reads those),
            named.
        SettingError
            A device name it does not know, named.
        """
        meta, arrays = modelfile.read(path, "model")
        settings = dict(meta.get("settings") or {})
        kind = settings.pop("model", None)
        if kind != NAME or settings.get("based") == "both":
            what = "BlendedNCAE" if kind == NAME else kind
            raise DataError(f"{path}: the file of a {what} model, not of one NCAE: load it "
                            "with ncae_cuda.load_model")
        # as load_model: a setting an older file holds that its others leave unread, unset
        return restored(path, meta, arrays, lambda ops: cls.of_settings(asdict(
            Config.from_dict(without_unread(settings))), device=ops), device)

    def restore(self, meta: dict, a: dict) -> None:
        """Take the fitted state of contents()' (meta, arrays); KeyError, ValueError or
        TypeError where they do not fit together or these settings."""
        self.data = FitData.from_arrays(self.config, self.ops, a, meta["rating_scale"]
                                        and tuple(meta["rating_scale"]))
        layout = NCAELayout(self.data.n_cols, self.config.hidden)
        if a["params"].shape != (layout.size,):
            raise ValueError(f"{a['params'].shape[0]} parameters where the settings need "
                             f"{layout.size}")
        self._net = Network(layout, self.ops, self._objective(), a["params"],
                            a.get("col_weights"), tf32=self.config.matmul == TF32)
        self._net.counter[0] = meta["steps"]
        self.history, self.best_epoch = meta["history"], meta["best_epoch"]


def refuse_epochs(fitting: dict, chosen) -> None:
    """SettingError where refit's keywords `fitting` give epochs: refit trains those the fit
    chose (`chosen`, its best_epoch), which a number of one's own is not."""
    if "epochs" in fitting:
        raise SettingError("epochs", f"is refit's own: it trains the {chosen} epochs the fit "
                                     "chose (best_epoch); fit() trains a number given")


def _entries(part: Interactions | None, config: Config) -> tuple:
    """What a fit trains or validates on, for its checkpoint's fingerprint: the entries, and
    their times where the fit scores rows weighted by them (recency_boost > 0); otherwise the
    times change nothing, and a checkpoint stays valid whatever they are."""
    names = ("users", "items", "ratings") + (("timestamps",) if config.recency_boost else ())
    return tuple(None if part is None else getattr(part, name) for name in names)
