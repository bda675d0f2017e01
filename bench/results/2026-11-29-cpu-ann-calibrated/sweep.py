"""Recall of the approximate index of trained models at fixed probes and as calibrated: the
share of each user's exact top 10 and top 100 found through it, over every user of the model;
the table in docs/serving.md.

    python sweep.py MODEL.npz [...]
"""
import sys

import numpy as np

from ncae_cuda import load_model
from ncae_cuda.model.ann import IndexSettings, ItemIndex

PROBES = (16, 32, 64, 128, 256)            # fixed, not calibrated (recall_target 0)


def recall(model, exact: dict, n: int) -> float:
    """The mean over every user of the share of their exact top n found through the index."""
    found, _ = model.recommend(model.user_ids, n=n, index="approximate")     # (U, n)
    return float(np.mean([np.isin(f, e).mean() for f, e in zip(found, exact[n])]))


def main(paths: list[str]) -> None:
    print("| model | items | probes | lists scanned | recall@10 | recall@100 |")
    print("|---|---:|---|---:|---:|---:|")
    for path in paths:
        model = load_model(path, device="cpu")
        exact = {n: model.recommend(model.user_ids, n=n)[0] for n in (10, 100)}
        lists = IndexSettings().lists(len(model.item_ids))
        for probes in (*(p for p in PROBES if p <= lists), None):
            settings = (IndexSettings() if probes is None else
                        IndexSettings(probes=probes, recall_target=0))
            model._index = ItemIndex.for_model(model, None, settings)
            how = "calibrated (default)" if probes is None else "fixed"
            print(f"| {path} | {len(model.item_ids):,} | {how} | {model._index.probes} of "
                  f"{lists} | {recall(model, exact, 10):.3f} | {recall(model, exact, 100):.3f} |",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
