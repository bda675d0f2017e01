#!/usr/bin/env bash
# Each baseline's Last.fm 2K study of 40 trials (2026-11-28-lastfm-tuned-alike) continued to 80:
# the same command with --trials 80 (tune continues a study in its --out).
set -u
R=${1:-runs/lastfm}
for M in ease item-knn rp3beta ials bpr; do
    start=$(date +%s)
    python -m ncae_cuda.tune --model $M --dataset lastfm-2k --trials 80 --out $R/tune-$M > $R/tune80-$M.log 2>&1
    echo "$M tune80 rc=$? seconds=$(( $(date +%s) - start ))"
done
