#!/usr/bin/env bash
# MovieLens 100K cut by time: its first 90% of ratings (by timestamp, ties in file order) to
# train on, the last 10% to test; and the first 80% -> next 10% cut the cold predictions'
# shrinkage was chosen on. Run from the repository root: bench/results/<this folder>/run.sh OUT
set -euo pipefail
out=$1
here=$(dirname "$0")
mkdir -p "$out"
sort -s -n -k4,4 "$NCAE_CUDA_DATA/ml-100k/u.data" > "$out/sorted.tsv"
head -n 90000 "$out/sorted.tsv" > "$out/first90.csv"
tail -n 10000 "$out/sorted.tsv" > "$out/last10.csv"
python -m ncae_cuda.train --config recipes/ml-100k-explicit.toml --train "$out/first90.csv" \
    --test "$out/last10.csv" --out "$out/run" > "$here/train.log" 2>&1
cp "$out/run/metrics.json" "$here/metrics.json"
python "$here/cold_candidates.py" "$out/sorted.tsv" > "$here/cold_candidates.md"
