#!/usr/bin/env bash
# Everything a lent GPU machine is for, in phases that each fit one call of the device tool (10
# minutes) and come back whole: the tool returns at most 8 files from $OUT, so each phase packs
# its logs and results into $OUT/<phase>.tar.gz and prints its summary last.
#
# A lent session has 15 minutes of device time in all, its start included: `first`, then `more`
# at once where 4 minutes remain. The other phases wait for a later session.
#
#     bench/gpu_check.sh first   "$OUT"  # the device's facts, ncae_cuda.check, the GPU's test
#                                        # cases, epochs at the ML-10M and ML-20M shapes beside
#                                        # floors and the torch peer, recommend at ML-20M (7 min)
#     bench/gpu_check.sh more    "$OUT"  # launch ledger, kernel versions, kernels beside the
#                                        # libraries', the server under load (4 min)
#     bench/gpu_check.sh tests   "$OUT"  # ncae_cuda.check; the GPU test cases, then the suite
#     bench/gpu_check.sh epochs  "$OUT"  # seconds per epoch beside floors, CPU and torch peer
#     bench/gpu_check.sh kernels "$OUT"  # launch ledger, kernel versions, kernels beside the
#                                        # libraries' (kernel_peers), time to recommend
#     bench/gpu_check.sh profile "$OUT"  # ncu over two steps at the ML-10M and Last.fm shapes
#     bench/gpu_check.sh scale   "$OUT"  # the K x D table (the paper's Table 7) on the GPU
#     bench/gpu_check.sh sanitize "$OUT" # the kernels' tests under compute-sanitizer: memcheck,
#                                        # then racecheck, initcheck and synccheck (4 min)
#
# A phase's steps' time limits add up to its minutes above, or to at most 9.
# --dry (after OUT; `first`, `more` and `sanitize`): every step with the same flags on tiny data
# (--quick, and the tiny sets and widths in place of the shapes' values the steps name),
# the GPU's steps on the emulated backend where they have one and on the CPU where not, the GPU's
# test cases collected but not run (CI's suite runs them; `sanitize` runs its selections on the
# emulated backend, without compute-sanitizer), writing the same files and printing the same
# summary, so that a renamed flag or a missing file fails CI (tests/test_device_phases.py)
# rather than the device's window.
# COMMIT names the commit measured (the device gets the working tree, not .git). Runs from the
# repository as it is (PYTHONPATH), installing nothing: the machine's image has CuPy, Numba,
# torch, SciPy, pytest (with xdist) and ncu. Each step has a time limit of its own, so one that
# hangs leaves the others their time.
set -uo pipefail
usage="usage: bench/gpu_check.sh first|more|tests|epochs|kernels|profile|scale|sanitize \
OUTPUT_FOLDER [--dry]"
phase=${1:?$usage}
out=${2:?$usage}
dry=${3:-}
case $dry/$phase in     # --dry: first, more and sanitize only
/first|/more|/tests|/epochs|/kernels|/profile|/scale|/sanitize) ;;
--dry/first|--dry/more|--dry/sanitize) ;;
*) echo "$usage (--dry: first, more and sanitize only)" >&2; exit 2 ;;
esac
mkdir -p "$out" && out=$(cd "$out" && pwd)     # as the caller named it, before the cd below
cd "$(dirname "$0")/.." || exit 2
# (a caller's PYTHONPATH kept behind the repository's: where carried wheels were unpacked)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 COMMIT=${COMMIT:-unknown}
python=${PYTHON:-python3}
work=$(mktemp -d)/$phase
mkdir -p "$work"
# the device each step names: the GPU's; on a dry run the emulated backend where the command has
# one (emulated), else the CPU (gpu); tiny data where the command has it; the GPU's test cases
# only collected (--collect-only: the suite itself runs them, emulated or skipped, where there
# is no GPU), so that a renamed file, a -k that selects none (pytest's exit 5) or a bad flag
# still fails the step
# (a dry run's limits 4 times the device's: the emulator on a busy CI machine's 2 cores is no
# GPU, and the dry run checks the commands, not their time)
# The shapes' values a step names itself (data, widths, clients) are tiny ones on a dry run:
# a bench's --quick changes only what its flags leave to their defaults.
if [ -z "$dry" ]; then
    gpu=gpu emulated=gpu epoch_devices=gpu,gpu-graphs quick='' collect='' slack=1
    drawn="synthetic-ml10m synthetic-ml20m"
    ml10m=synthetic-ml10m ml20m=synthetic-ml20m ml10m_hidden=500,500 ml20m_hidden=600
    clients=1,64
else
    gpu=cpu emulated=emulated epoch_devices=cpu quick=--quick collect=--collect-only slack=4
    drawn=synthetic-tiny
    ml10m=synthetic-tiny ml20m=synthetic-tiny ml10m_hidden=16 ml20m_hidden=16 clients=1,4
fi

# step NAME SECONDS COMMAND...: logged to NAME.log; a failure is named at the end (in a file,
# so that a step run in the background, in a subshell of its own, is named too)
step() {
    local name=$1 seconds=$(($2 * slack)) start=$SECONDS code=0
    shift 2
    timeout "$seconds" "$@" > "$work/$name.log" 2>&1 || code=$?
    [ $code = 0 ] || echo "$name (exit $code)" >> "$work/failed.txt"
    # each step's wall time beside its limit: how much room the next window's plan has
    echo "$name: $((SECONDS - start)) s of $seconds, exit $code" >> "$work/steps.txt"
}

# TOOL's line of the sanitize phase's summary: the errors compute-sanitizer's summaries in
# TOOL.log count, over every process it tracked, the kernels its reports name, and pytest's count
# of the tests (a sanitizer stopped before its summary is named, not counted as none)
found() {
    local tool=$1 log=$work/$1.log pattern="ERROR SUMMARY: [0-9]+ error" errors ran where=''
    ran=$(grep -E "^[0-9]+ [a-z].* in [0-9.]+s|^no tests ran" "$log" | tail -n 1)
    if [ -n "$dry" ]; then
        errors="0 (a dry run: no compute-sanitizer)"
    else
        # racecheck's summary: "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)"
        [ "$tool" != racecheck ] || pattern="RACECHECK SUMMARY: .*\([0-9]+ error"
        errors=$(grep -oE "$pattern" "$log" | grep -oE "[0-9]+ error" | awk '{n += $1}
            END {print n + 0 " (" NR " sanitized process" (NR == 1 ? ")" : "es)")}')
        [ "${errors% (0 sanitized processes)}" = "$errors" ] \
            || errors="unknown: no compute-sanitizer summary in $tool.log"
        where=$(grep "^=========" "$log" | grep -oE " at [A-Za-z_][A-Za-z0-9_]*\+0x" \
                | sed -E 's/ at (.*)\+0x/\1/' | sort | uniq -c | sort -rn | head -n 5 \
                | awk '{printf "%s%s x%s", (NR > 1 ? ", " : " in "), $2, $1}')
    fi
    echo "$tool: errors found: $errors$where; pytest: ${ran:-no count (see $tool.log)}"
}

{
    echo "commit $COMMIT, $(date -u +%F), phase $phase${dry:+ (dry run: no GPU)}"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
        || echo "nvidia-smi: none here"
    "$python" - <<'FACTS'
import importlib, sys
found = [f"python {sys.version.split()[0]}"]
for name in ("cupy", "numba", "numpy", "torch"):
    try:
        found.append(f"{name} {importlib.import_module(name).__version__}")
    except ImportError:
        found.append(f"{name} absent")
try:
    import cupy
    found.append(f"cuda runtime {cupy.cuda.runtime.runtimeGetVersion()}")
except Exception as e:                  # no CuPy, or no driver: a dry run's machine
    found.append(f"cuda runtime: none ({type(e).__name__})")
print(", ".join(found))
FACTS
} > "$work/device.txt" 2>&1

case $phase in
first)
    # what matters most, in order; the limits add up to 7 minutes. The synthetic sets the timed
    # steps read are drawn first and kept (ncae_cuda/data/synthetic_cache.py: a fresh machine
    # has none, and in the first window each process drew its own, 40 s a time), on the CPU's
    # cores beside the two steps that time nothing; their limit, within those two's, keeps the
    # phase's sum
    drawing=()
    for name in $drawn; do
        step "data-$name" 90 "$python" -m ncae_cuda.datasets describe "$name" &
        drawing+=($!)
    done
    step check 35 "$python" -m ncae_cuda.check --device $emulated --json "$work/check.json"
    # (nvcc's compile of every kernel is CI's: the device's own compiler is NVRTC); on 8
    # workers, as the H200 ran them in 34 s: in one process their time was never measured
    step gpu-tests 70 "$python" -m pytest -q -rs -p no:cacheprovider -n 8 $collect \
        --junitxml="$work/gpu-tests.xml" -k "(gpu and not emulated) or cublas or nvrtc"
    wait "${drawing[@]}"
    # ML-10M (item-based, hidden 500,500) and VAE-CF's ML-20M shape (user-based implicit, hidden
    # 600: training users/s and the output layer's TFLOP/s), at 128 and 1,024 users a step, and
    # at 1,024 on TF32, beside their floors (the synthetic sets drawn once, then read back)
    step epoch-time 180 "$python" -m bench.epoch_time --devices $epoch_devices --epochs 4 \
        --cases ml10m,ml20m,ml20m-batch1024,ml20m-tf32 $quick --out "$work/epoch-time"
    step peer-ml10m 45 "$python" -m bench.peer_torch --device $gpu --dataset $ml10m \
        --feedback explicit --based item --hidden $ml10m_hidden --epochs 3 $quick \
        --out "$work/peer-ml10m"
    step peer-ml20m 45 "$python" -m bench.peer_torch --device $gpu --dataset $ml20m \
        --feedback implicit --based user --hidden $ml20m_hidden --epochs 3 $quick \
        --out "$work/peer-ml20m"
    step recommend 45 "$python" -m bench.recommend_time --dataset $ml20m \
        --devices $gpu --epochs 1 --repeats 3 $quick --out "$work/recommend"
    # each peer's two rows (seconds per epoch, test figures) and its ratio, or, where a limit
    # stopped it, the model it kept and its "unfinished" line
    summary=$(tail -n 4 "$work/check.log"; tail -n 1 "$work/gpu-tests.log"
              cat "$work"/epoch-time/*.md "$work"/recommend/*.md
              cd "$work" && grep -H "^> unfinished\|^| ncae_cuda\|^| torch\|torch / ncae_cuda" \
                  peer-*/*.md) ;;
more)
    # for the still-warm machine, at most 4 minutes: what a step asks of the device, the
    # kernels' versions and peers, the server
    step launches 30 "$python" -m bench.launches --device $emulated --shapes ml10m $quick \
        --out "$work/launches"
    for op in gather_forward scatter_backward adam; do
        step "versions-$op" 25 "$python" -m dev.cuda.run $op --shape ml10m --device $emulated
    done
    step kernel-peers 60 "$python" -m bench.kernel_peers --device $gpu --shapes ml10m $quick \
        --repeats 5 --out "$work/kernel-peers"
    step serve-load 70 "$python" -m bench.serve_load --device $gpu --clients $clients --seconds 3 \
        $quick --out "$work/serve-load"
    summary=$(cat "$work"/launches/*.md "$work"/kernel-peers/*.md "$work"/serve-load/*.md
              tail -q -n 5 "$work"/versions-*.log) ;;
tests)
    # the package's own check of the device first (what a user runs), then the real GPU's test
    # cases (the emulated ones run in CI), then the whole suite beside them
    step check 120 "$python" -m ncae_cuda.check --device gpu --json "$work/check.json"
    step gpu-tests 240 "$python" -m pytest -q -rs -p no:cacheprovider -n 0 \
        --junitxml="$work/gpu-tests.xml" -k "(gpu and not emulated) or cublas or nvrtc or nvcc"
    step all-tests 300 "$python" -m pytest -q -rs -p no:cacheprovider -n 8 \
        --junitxml="$work/all-tests.xml"
    summary=$(cat "$work/check.log"; tail -3 "$work/gpu-tests.log"
              tail -3 "$work/all-tests.log") ;;
epochs)
    # 4 GPU epochs: the first runs the step uncaptured, the second captures it (gpu-graphs)
    step epoch-time 270 "$python" -m bench.epoch_time --devices gpu,gpu-graphs,cpu --epochs 4 \
        --cases ml10m,lastfm,delicious --out "$work/epoch-time"
    # VAE-CF's shape on the GPU only (a CPU epoch there is minutes), beside the PyTorch peer
    step epoch-time-ml20m 200 "$python" -m bench.epoch_time --devices gpu,gpu-graphs --epochs 3 \
        --cases ml20m --out "$work/epoch-time-ml20m"
    step peer-ml20m 200 "$python" -m bench.peer_torch --device gpu --dataset synthetic-ml20m \
        --feedback implicit --based user --hidden 600 --epochs 3 --out "$work/peer-ml20m"
    step peer-ml10m 120 "$python" -m bench.peer_torch --device gpu --dataset synthetic-ml10m \
        --feedback explicit --based item --hidden 500,500 --epochs 3 --out "$work/peer-ml10m"
    for shape in lastfm delicious; do
        step "peer-$shape" 60 "$python" -m bench.peer_torch --device gpu \
            --dataset "synthetic-$shape" --feedback implicit --based user --hidden 128 \
            --epochs 4 --out "$work/peer-$shape"
    done
    summary=$(cat "$work"/epoch-time*/*.md; grep -h "torch / ncae_cuda" "$work"/peer-*/*.md) ;;
kernels)
    step launches 60 "$python" -m bench.launches --device gpu --out "$work/launches"
    for op in gather_forward scatter_backward; do               # the kernel versions
        for shape in ml10m lastfm; do
            step "versions-$op-$shape" 40 "$python" -m dev.cuda.run $op --shape $shape
        done
    done
    mkdir -p "$work/kernels"                                    # every op, checked and timed
    step microbenchmarks 90 "$python" -m pytest bench/ -q -p no:cacheprovider --benchmark-only \
        -k gpu --benchmark-json="$work/kernels/kernels.json"
    step kernel-peers 150 "$python" -m bench.kernel_peers --device gpu --out "$work/kernel-peers"
    step recommend 60 "$python" -m bench.recommend_time --dataset synthetic-lastfm \
        --devices gpu,cpu --out "$work/recommend"
    summary=$(cat "$work"/kernel-peers/*.md "$work"/launches/*.md
              tail -q -n 3 "$work"/versions-*.log) ;;
scale)
    step scalability 540 "$python" -m bench.scalability --device gpu --out "$work/scalability"
    summary=$(cat "$work"/scalability/scalability.md 2>/dev/null | head -20) ;;
profile)
    # every kernel of two steps after the first epoch's start (cuBLAS's too), clocks as found
    for shape in ml10m lastfm; do
        case $shape in
        ml10m) flags=(--dataset synthetic-ml10m --feedback explicit --based item --hidden "500,500"
                      --valid-ratio 0) ;;
        lastfm) flags=(--dataset synthetic-lastfm --feedback implicit --based user --hidden 128
                       --patience 0 --no-refit) ;;
        esac
        step "ncu-$shape" 240 ncu --clock-control none --launch-skip 200 --launch-count 40 \
            --section SpeedOfLight --section Occupancy --section LaunchStats \
            --section WarpStateStats --section MemoryWorkloadAnalysis \
            -f -o "$work/ncu-$shape" "$python" -m ncae_cuda.train "${flags[@]}" --device gpu \
            --epochs 1 --out "$(mktemp -d)/run"
        ncu --import "$work/ncu-$shape.ncu-rep" --page details > "$work/ncu-$shape-details.txt"
        ncu --import "$work/ncu-$shape.ncu-rep" --page raw --csv > "$work/ncu-$shape.csv"
        "$python" -m bench.ncu_summary "$work/ncu-$shape.csv" > "$work/ncu-$shape.md"
    done
    summary=$(cat "$work"/ncu-*.md) ;;
sanitize)
    # what the emulator cannot see (docs/gpu.md#how-the-kernels-are-checked): an access out of
    # bounds that lands in valid memory, shared memory raced for or read before it is written, a
    # barrier misused. The kernels' tests under compute-sanitizer, with any process a test
    # starts, each CuPy array an allocation of its own (--cuda-unpooled: in the pool a read past
    # an array's end lands in the next one's block), in one process (a worker would load and
    # instrument the kernels again); the limits add up to 4 minutes. memcheck over every op's
    # test and the network's steps; the slower tools over one case of each kernel, at the shapes
    # whose rows or columns share their sums among windows (long-row, long-runs), stride a
    # block's threads over a row (N700) or span two warps' slabs (K260). A dry run runs the same
    # selections on the emulated backend, without the sanitizer.
    if [ -z "$dry" ]; then
        sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
        timeout 10 "$sanitizer" --version > "$work/sanitizer.txt" 2>&1 \
            || echo "compute-sanitizer: none at $sanitizer" >> "$work/sanitizer.txt"
        cases="gpu and not emulated" backend=gpu
    else
        echo "compute-sanitizer: none on a dry run" > "$work/sanitizer.txt"
        cases=emulated backend=gpu-emulated
    fi
    ops=tests/test_ops.py
    each_kernel=("$ops::test_cut_batch_matches_reference[$backend-long-runs]"
                 "$ops::test_cut_rows_matches_reference[$backend]"
                 "$ops::test_dropout_keep_matches_reference_and_rate[$backend-0.5]"
                 "$ops::test_gather_forward[$backend-long-row]"
                 "$ops::test_scatter_backward[$backend-long-runs]"
                 "$ops::test_sparse_output_forward[$backend-tanh-K260]"
                 "$ops::test_sparse_output_backward[$backend-identity-norm0.15-long-row]"
                 "$ops::test_implicit_error[$backend-reweighted_error-True-N700]"
                 "$ops::test_implicit_error[$backend-multinomial_error-False-N700]"
                 "$ops::test_bias_tanh_and_bias_backward[$backend-64-300]"
                 "$ops::test_step_loss_sums_every_row[$backend]"
                 "$ops::test_adam[$backend-decayed-4099]"
                 "$ops::test_adam_uses_the_corrections_filed_a_step_ahead[$backend]"
                 "$ops::test_rank_heldout[$backend-N700]"
                 "$ops::test_topk[$backend-40-K260]"
                 "$ops::test_topk_radix_select_at_scale[$backend]")
    summary=$(tail -n 1 "$work/sanitizer.txt")
    for tool in memcheck racecheck initcheck synccheck; do
        case $tool in
        memcheck) seconds=120 tests=("$ops" tests/test_network.py -k "$cases") ;;
        synccheck) seconds=30 tests=("${each_kernel[@]}") ;;
        *) seconds=45 tests=("${each_kernel[@]}") ;;
        esac
        under=()
        [ -n "$dry" ] \
            || under=("$sanitizer" --tool "$tool" --target-processes all --error-exitcode 1)
        step $tool $seconds "${under[@]}" "$python" -m pytest -q -rs -p no:cacheprovider -n 0 \
            --cuda-unpooled --junitxml="$work/$tool.xml" "${tests[@]}"
        summary+=$'\n'$(found $tool)
    done ;;
esac

tar -czf "$out/$phase.tar.gz" -C "$(dirname "$work")" "$phase"
cat "$work/device.txt" "$work/steps.txt"
echo "$summary"
failed=()
[ ! -f "$work/failed.txt" ] || mapfile -t failed < "$work/failed.txt"
echo "phase $phase: ${#failed[@]} failed${failed:+: ${failed[*]}};" \
    "everything is in $out/$phase.tar.gz"
exit $(( ${#failed[@]} > 0 ))
