"""A process of sharded fits through the API, for tests/test_distributed.py: run by torchrun, it
fits NCAE(shard="columns") on the emulated GPU backend (the real kernels), for each CASE in turn
in one process group (one start of the job for all), and writes, from each rank, what the test
compares with one process into OUT_DIR/CASE/.

    torchrun --standalone --nproc-per-node 3 tests/shard_worker.py EMULATOR_DIR OUT_DIR CASE...
"""
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch.distributed as dist

from ncae_cuda import NCAE
from ncae_cuda.data import datasets, splits
from ncae_cuda.ops.emulator import emulated_backend
from ncae_cuda.ops.ledger import Ledger
from ncae_cuda.ops.plan import Planner, Schedule


def skewed() -> sp.csr_matrix:
    """30 users x 66 items: 6 items everyone has, 60 that only users 0-2 have. Split by entries
    among 3 ranks, the last holds only the 60, so in most batches of 4 users it has no entry."""
    dense = np.ones((30, 6), np.float32)
    rare = np.zeros((30, 60), np.float32)
    rare[:3] = 1
    return sp.csr_matrix(np.hstack([dense, rare]))


USERS, ITEMS = [0, 3, 17, 29], [1, 5, 44]          # positions in the model's id maps
CASES = {   # name: (data, split, settings)
    "explicit": ("synthetic-tiny", "random", dict(feedback="explicit", hidden=(12, 7),
                                                  epochs=2, batch_size=16, patience=0)),
    "implicit": ("synthetic-tiny", "loo", dict(feedback="implicit", hidden=(9,), epochs=2,
                                               batch_size=16, augment_eps=0.2, patience=0)),
    "skewed": (None, None, dict(feedback="implicit", hidden=(5,), epochs=2, batch_size=4,
                                variant="NCAE")),
}


def main(emulator: str, out: str, *cases: str) -> None:
    dist.init_process_group("gloo")
    backend = emulated_backend(Path(emulator))
    for case in cases:
        fit_case(case, backend, Path(out) / case)
    dist.destroy_process_group()


def fit_case(case: str, backend, out: Path) -> None:
    name, kind, settings = CASES[case]
    if name is None:
        train, valid, test = skewed(), None, None
    else:
        data = datasets.load(name)
        split = (splits.leave_one_out(data) if kind == "loo"
                 else splits.random_split(data, 0.1, 0.1))
        train, valid, test = split.train, split.valid, split.test
    model = NCAE(device=backend, shard="columns", **settings)
    ledger = Ledger()
    with ledger.recording():
        model.fit(train, validation=valid, verbose=False)
    result = {"losses": [h["loss"] for h in model.history],
              "columns": list(model.data.columns[:2]),
              "least_entries": least_entries(model),
              "collective_bytes_per_step": ledger.summary()["collective_bytes_per_step"]}
    if test is not None:
        result["test"] = model.evaluate(test, exclude=valid)
    if settings["feedback"] == "implicit":          # what a user asks of it, merged over ranks
        users, items = model.user_ids[USERS], model.item_ids[ITEMS]
        result["recommend"] = [x.tolist() for x in model.recommend(users, n=7)]
        result["similar"] = [x.tolist() for x in model.similar_items(items, n=4)]
    out.mkdir(exist_ok=True)
    model.save(out / "model.npz")
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(result))


def least_entries(model) -> int:
    """The fewest entries this rank holds in any batch of the first epoch."""
    csr, rows = model.data.training()
    c = model.config
    plan = Planner(csr, rows, Schedule(c.seed, c.batch_size, c.dropout)).plan(1)
    return int(min(plan.entries(s) for s in range(plan.steps)))


if __name__ == "__main__":
    main(*sys.argv[1:])
