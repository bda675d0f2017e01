#!/usr/bin/env bash
# Everything a lent GPU machine is for, in one call: the device's facts, the whole test suite
# (the GPU cases run instead of skipping), the launch ledger with the real counts, the kernel
# versions kept in dev/cuda timed side by side, the epoch benchmark (CPU, GPU launching each
# kernel, GPU replaying CUDA graphs) and the time to recommend for every user, each logged under
# the folder given. Runs from the repository as it
# is (PYTHONPATH), installing nothing: the machine's image has CuPy, Numba, SciPy, tqdm,
# threadpoolctl and pytest.
#
#     COMMIT=$(git rev-parse --short HEAD) bench/gpu_check.sh "$OUT"
set -uo pipefail
out=${1:?usage: bench/gpu_check.sh OUTPUT_FOLDER}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python=${PYTHON:-python3}

{
    echo "commit ${COMMIT:-unknown}, $(date -u +%F)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $python -c "import sys, cupy, numba, numpy; print('python', sys.version.split()[0], \
'cupy', cupy.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__)"
} 2>&1 | tee "$out/device.txt"

$python -m pytest -q -rs -p no:cacheprovider --junitxml="$out/tests.xml" 2>&1 \
    | tee "$out/tests.log" | tail -25
tests=${PIPESTATUS[0]}

$python -m bench.launches --device gpu --out "$out/launches" > "$out/launches.log" 2>&1
launches=$?
tail -6 "$out/launches.log"

for op in gather_forward scatter_backward; do             # the kernel versions, side by side
    for shape in ml10m lastfm; do $python -m dev.cuda.run $op --shape $shape; done
done > "$out/versions.log" 2>&1
versions=$?
cat "$out/versions.log"

$python -m bench.epoch_time --devices gpu,gpu-graphs,cpu --out "$out/bench" > "$out/bench.log" 2>&1
bench=$?
tail -8 "$out/bench.log"
cp "$out/bench/epoch_time.json" "$out/bench/epoch_time.md" "$out" 2>/dev/null

$python -m bench.recommend_time --dataset synthetic-lastfm --devices gpu,cpu \
    --out "$out/recommend" > "$out/recommend.log" 2>&1
recommend=$?
tail -4 "$out/recommend.log"
echo "tests exit $tests, ledger exit $launches, versions exit $versions, benchmark exit $bench," \
     "recommend exit $recommend"
exit $(( tests || launches || versions || bench || recommend ))
