#!/usr/bin/env bash
# The shipped implicit recipes trained with their dense products in float32 and on TF32
# (--matmul tf32: the CPU backend rounds the products' inputs as a GPU's tensor cores take
# them), at split seeds 0, 1, 2; each run's metrics.json and train.log under
# OUT/<recipe>-<matmul>-s<seed>/, then table.py's table of them.
#     bench/results/2026-11-29-cpu-tf32-accuracy/run.sh OUT     (NCAE_CUDA_DATA: the data)
set -euo pipefail
out=${1:?usage: run.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
train() {     # train NAME FLAGS...: one run, its log moved into its folder
    local name=$1
    shift
    python -m ncae_cuda.train "$@" --device cpu --out "$out/$name" --overwrite \
        > "$out/$name.log" 2>&1
    mv "$out/$name.log" "$out/$name/train.log"
}
mkdir -p "$out"
for seed in 0 1 2; do
    for matmul in float32 tf32; do
        train "ml-100k-$matmul-s$seed" --config recipes/ml-100k-implicit.toml \
            --dataset ml-100k --valid-item latest --split-seed "$seed" --matmul "$matmul"
        train "lastfm-2k-$matmul-s$seed" --config recipes/lastfm-2k-implicit.toml \
            --dataset lastfm-2k --split-seed "$seed" --matmul "$matmul"
    done
done
python "$here/table.py" "$out" > "$out/table.md"
