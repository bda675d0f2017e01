#!/usr/bin/env bash
# Three implicit models trained on the CPU (hidden 128, the other settings their defaults),
# then recall.py over them. From the repository root: bench/results/<this folder>/run.sh OUT
set -euo pipefail
out=$1
here=$(dirname "$0")
for spec in ml-100k:40 synthetic-lastfm:60 synthetic-delicious:20; do
    data=${spec%:*}
    python -m ncae_cuda.train --dataset "$data" --feedback implicit --hidden 128 \
        --epochs "${spec#*:}" --device cpu --out "$out/$data" > "$here/train-$data.log" 2>&1
done
python "$here/recall.py" "$out"/{ml-100k,synthetic-lastfm,synthetic-delicious}/model.npz \
    > "$here/recall.md"
