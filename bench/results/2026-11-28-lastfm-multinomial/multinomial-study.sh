#!/bin/bash
# NCAE's third Last.fm study: 40 trials of the multinomial loss, from the snapshot worktree
cd /work/wt/mult
export PYTHONPATH=/work/wt/mult NCAE_CUDA_DATA=/work/shared/data
date
/work/venv/bin/python -m ncae_cuda.tune --config /work/lastfm3/multinomial.toml --dataset lastfm-2k --trials 40 --out /work/lastfm3/tune-ncae
date
