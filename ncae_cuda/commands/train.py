"""Train and evaluate NCAE.

    python -m ncae_cuda.train                          # built-in synthetic ratings, explicit
    python -m ncae_cuda.train --dataset ml-100k --split u1         # data: --data-dir or
    python -m ncae_cuda.train --dataset ml-100k --feedback implicit   # $NCAE_CUDA_DATA
    python -m ncae_cuda.train --dataset ratings.csv    # a file: user,item[,rating[,timestamp]]
    python -m ncae_cuda.train --train u1.base --test u1.test --sep tab   # your own split
    python -m ncae_cuda.train --config recipes/ml-100k-explicit.toml --dataset ml-100k --split u1
    python -m ncae_cuda.train --out runs/a --resume    # continue an interrupted run
    torchrun --nproc-per-node 2 -m ncae_cuda.train --shard columns ...  # one model, 2 processes

The run (ncae_cuda/runs/protocol.py): the epoch chosen on validation, a refit on training +
validation, the test part scored once, in the run's own folder --out (run.json, checkpoints,
model.npz, metrics.json). The flags (ncae_cuda/commands/flags.py) are generated from the
model's settings (ncae_cuda.model.config.Config) and the data's and the run's
(ncae_cuda/runs/spec.py: DataSpec, RunSpec); --config
reads the model's from a recipe (a TOML file of the same names, recipes/), a flag overriding it
(the recipe's settings it leaves unread or contradicts left out, with a note).

--shard columns trains one model across the processes of a torch.distributed job (torchrun;
pip install -e ".[distributed]"), each holding a share of the columns (ncae_cuda/ops/shard.py):
rank 0 prints and writes the run's files, each rank its checkpoint files beside them (--out
shared by the machines, or the same path on each); --resume needs as many processes.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys

from ..cli import continued_by
from ..errors import NcaeError
from ..model import stopping
from ..ops import backend_name, cpu
from ..runs.protocol import run
from .flags import build_parser, run_spec


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(__doc__.split("\n\n")[0])
    spec, config = run_spec(parser, argv)
    world = int(os.environ.get("WORLD_SIZE", 1))
    if spec.shard == "none" and world > 1:
        # before: each process trained a model of its own into the one --out, and all but one
        # were told another run held the folder
        parser.error(f"this process is one of {world} of a torch.distributed job (torchrun): "
                     "one model across them takes --shard columns; without it, run one "
                     "process")
    rank = os.environ.get("RANK") if spec.shard != "none" else None
    # the first epoch waits seconds for Numba's compile on a fresh install: said (the job's
    # lines are rank 0's)
    says = rank in (None, "0")
    noted = cpu.compile_note() if says else contextlib.nullcontext()
    continued = f"continue with --resume --out {spec.out}"
    # (the job's one line is rank 0's: torchrun hands a Ctrl-C to every rank)
    with continued_by(continued if says else None):
        try:
            with joined(spec), noted:
                run(spec, config)
        except NcaeError as e:
            print(f"error{'' if rank is None else f' (rank {rank})'}: {e}", file=sys.stderr)
            return 2
        except stopping.Stopped as stop:        # (a KeyboardInterrupt: caught before continued_by)
            where = ("after the fit's last step, as it was scored" if stop.after_last_step
                     else "at the end of a training step")
            print(f"\n{stop.signal_name}: stopped {where}: {continued}", file=sys.stderr)
            return 128 + signal.Signals[stop.signal_name]
    return 0


def joined(spec):
    """The context a run of `spec` trains in: for --shard columns, this process one of its job
    (NCCL on the GPU, gloo on the CPU), once the device is known to be there (before, a missing
    GPU was CuPy's ImportError); for one process, none."""
    if spec.shard == "none":
        return contextlib.nullcontext()
    from ..model import distributed
    return distributed.joined(backend_name(spec.device), spec.shard_timeout)
