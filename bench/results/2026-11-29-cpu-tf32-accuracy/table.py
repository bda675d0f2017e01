"""The runs of run.sh side by side: per recipe and split seed, float32's and TF32's best
validation epoch and NDCG@100, and test NDCG@100 and HR@10; the test means over the seeds.

    python bench/results/2026-11-29-cpu-tf32-accuracy/table.py OUT > table.md
"""
import json
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
print("| recipe | seed | matmul | best epoch | valid NDCG@100 | test NDCG@100 | test HR@10 "
      "| s/epoch (this CPU) |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
means = {}
for recipe in ("ml-100k", "lastfm-2k"):
    for seed in (0, 1, 2):
        for matmul in ("float32", "tf32"):
            m = json.loads((out / f"{recipe}-{matmul}-s{seed}" / "metrics.json").read_text())
            assert m["config"]["matmul"] == matmul
            test = m["test"]
            means.setdefault((recipe, matmul), []).append(test["ndcg@100"])
            print(f"| {recipe} | {seed} | {matmul} | {m['best_epoch']} | "
                  f"{m['best_validation']['ndcg@100']:.4f} | {test['ndcg@100']:.4f} | "
                  f"{test['hr@10']:.4f} | {m['seconds_per_epoch']:.2f} |")
print()
print("| recipe | matmul | mean test NDCG@100 |")
print("|---|---|---:|")
for (recipe, matmul), values in means.items():
    print(f"| {recipe} | {matmul} | {statistics.mean(values):.4f} |")
