"""The candidates for predicting MovieLens 100K's cold test entries after a cut by time, each's
RMSE on them, in float64 numpy apart from the package: the table in docs/growing-data.md.

    python cold_candidates.py sorted.tsv     (u.data sorted by timestamp, ties in file order)

A cold entry's user or item has no entry before the cut. Candidates: the scale's midpoint, the
training mean, and the item's mean (the user's for a new item; the training mean where both
are new), shrunk toward the training mean by k pseudo-ratings: (sum + k mean) / (count + k).
"""
import sys

import numpy as np

CUTS = {"first 80% -> next 10%": (80_000, 90_000), "first 90% -> last 10%": (90_000, 100_000)}
SHRINKS = (0, 2, 5, 10, 25)


def candidates(train: np.ndarray, test: np.ndarray) -> dict[str, float]:
    """{candidate: RMSE on `test`'s cold entries}, and their count; rows (user, item, rating)."""
    mean = train[:, 2].mean()
    by = {side: {} for side in (0, 1)}                  # {side: {id: [ratings]}}
    for row in train:
        for side in (0, 1):
            by[side].setdefault(row[side], []).append(row[2])
    cold = [row for row in test if row[0] not in by[0] or row[1] not in by[1]]
    ratings = np.array([row[2] for row in cold])        # (n_cold,)

    def rmse(predicted) -> float:
        return float(np.sqrt(np.mean((np.asarray(predicted, float) - ratings) ** 2)))

    found = {"cold entries": len(cold), "the scale's midpoint (3)": rmse([3.0] * len(cold)),
             "the training mean": rmse([mean] * len(cold))}
    for k in SHRINKS:
        predicted = []
        for user, item, _ in cold:
            if user not in by[0]:
                known = by[1].get(item, [])             # the item's (none: both new)
            else:
                known = by[0][user]                     # a new item: the user's
            predicted.append((sum(known) + k * mean) / (len(known) + k) if known or k else mean)
        name = "the item's mean" + (f", shrunk by {k} ratings" if k else "")
        found[name] = rmse(predicted)
    return found


def main(path: str) -> None:
    data = np.loadtxt(path, dtype=float)[:, :3]         # (100000, 3): user, item, rating
    columns = {cut: candidates(data[:a], data[a:b]) for cut, (a, b) in CUTS.items()}
    print("| cold entries predicted by | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name in next(iter(columns.values())):
        cells = [f"{c[name]:.4f}" if isinstance(c[name], float) else f"{c[name]:,}"
                 for c in columns.values()]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
