#!/usr/bin/env bash
# Last.fm 2K: 24 trials of depth around recipes/lastfm-2k-implicit.toml (its trial 0), every
# setting but the four in depth-space.toml kept at the recipe's.
set -u
OUT=${1:-runs/lastfm-depth}
python -m ncae_cuda.tune --config recipes/lastfm-2k-implicit.toml \
    --space bench/results/2026-11-28-lastfm-depth/depth-space.toml \
    --dataset lastfm-2k --trials 24 --budget 80 --out $OUT
