"""The share of each user's exact top n that the default approximate index finds, for a
trained model: every user, n = 10 and 100; the table in docs/serving.md.

    python recall.py MODEL.npz [...]
"""
import sys

import numpy as np

from ncae_cuda import load_model


def recall(model, n: int) -> float:
    """The mean over every user of the share of the exact top n found through the index."""
    users = model.user_ids
    exact, _ = model.recommend(users, n=n)                              # (U, n)
    found, _ = model.recommend(users, n=n, index="approximate")         # (U, n)
    return float(np.mean([np.isin(f, e).mean() for f, e in zip(found, exact)]))


def main(paths: list[str]) -> None:
    print("| model | items | lists scanned | recall@10 | recall@100 |")
    print("|---|---:|---:|---:|---:|")
    for path in paths:
        model = load_model(path, device="cpu")
        index = model.item_index()
        print(f"| {path} | {len(model.item_ids):,} | {index.probes} of "
              f"{index.settings.lists(len(model.item_ids))} "
              f"| {recall(model, 10):.3f} | {recall(model, 100):.3f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
