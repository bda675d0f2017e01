"""The CUDA emulator shows a kernel's missing __syncthreads: a warp that reads another warp's
shared memory before it is written, or after it is written again for the next round, reads
the wrong value, as it may on a GPU. Without the barrier the result is wrong; with it, right.
A vector access off its boundary aborts, as a GPU faults."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import REPOSITORY
from ncae_cuda.ops import conformance, gpu
from ncae_cuda.ops.emulator import CXX, EmulatedDevice, alignment_checked, build

pytestmark = pytest.mark.skipif(CXX is None, reason="no g++")

GRID, BLOCK, ROUNDS = 2, 64, 3      # two warps a block; blocks of both orders (emu.h)

# Each warp sums a value of its block, warp and round by shuffles (as block_dots does) and its
# lane 0 puts it in shared memory; every thread then adds up all the warps' values. Without
# `before` the __syncthreads before those reads is left out, without `after` the one after
# them (before the next round's writes).
SOURCE = r"""
extern "C" __global__ void warp_sums_kernel(float* out, int before, int after, int rounds) {
    __shared__ float cell[32];
    int warp = threadIdx.x / 32, warps = blockDim.x / 32;
    float total = 0.0f;
    for (int round = 0; round < rounds; round++) {
        int lane = threadIdx.x % 32;
        float v = lane == 0 ? 1000.0f * blockIdx.x + 100.0f * round + warp : 0.0f;
        for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
        if (lane == 0) cell[warp] = v;
        if (before) __syncthreads();
        for (int w = 0; w < warps; w++) total += cell[w];
        if (after) __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = total;
}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return build(tmp_path_factory.mktemp("emulator"), SOURCE)


def warp_sums(library, before: bool, after: bool) -> np.ndarray:
    out = np.full(GRID * BLOCK, np.nan, np.float32)
    library.emu_warp_sums_kernel(GRID, BLOCK, ctypes.c_void_p(out.ctypes.data), int(before),
                                 int(after), ROUNDS)
    return out.reshape(GRID, BLOCK)


def expected() -> np.ndarray:
    warps, rounds = np.arange(BLOCK // 32), np.arange(ROUNDS)
    block = np.arange(GRID)[:, None]
    per_block = (1000.0 * block * warps.size * ROUNDS + warps.size * 100.0 * rounds.sum()
                 + ROUNDS * warps.sum())
    return np.broadcast_to(per_block, (GRID, BLOCK))


def test_with_both_barriers_every_thread_gets_every_warps_values(library):
    np.testing.assert_array_equal(warp_sums(library, True, True), expected())


@pytest.mark.parametrize("before, after", [(False, True), (True, False)],
                         ids=["read-before-written", "overwritten-before-read"])
def test_a_missing_barrier_gives_a_wrong_sum(library, before, after):
    assert (warp_sums(library, before, after) != expected()).any()


def test_a_kernel_with_a_barrier_taken_out_fails_its_check(tmp_path):
    # block_dots' partial sums are rewritten by its next call: without the barrier between, a
    # warp that runs ahead overwrites them before the others have read them (the check passed
    # while emu.h ran a block's threads in turn, each to its next barrier)
    barrier = "    __syncthreads();    // partial is reused by the next call\n"
    source = gpu.module_source()
    assert source.count(barrier) == 1, "the barrier this test takes out is no longer there"
    planted = gpu.KernelOps(EmulatedDevice(build(tmp_path, source.replace(barrier, "")),
                                           lambda kernel: True))
    case = next(c for c in conformance.op_cases(planted) if c.op == "sparse_output_forward")
    assert not conformance.check_op(case).passed


# One float4 of `in` a thread, from `offset` floats past the array's start: at offset 1 it is
# misaligned, which a GPU faults at ("misaligned address") and x86 would run as any load.
VECTOR_SOURCE = r"""
extern "C" __global__ void copy4_kernel(float* out, const float* in, int offset) {
    float4 x = reinterpret_cast<const float4*>(in + offset)[threadIdx.x];
    out[4 * threadIdx.x] = x.x + x.y + x.z + x.w;
}
"""


@pytest.mark.skipif(CXX is None or not alignment_checked(),
                    reason="g++ cannot link UBSan's alignment check here (no libubsan)")
@pytest.mark.parametrize("offset, aborts", [(0, False), (4, False), (1, True)])
def test_a_misaligned_vector_access_aborts_as_a_gpu_faults(tmp_path, offset, aborts):
    """Before the alignment check, the load one float off ran and summed the next four."""
    script = f"""
import ctypes, sys
import numpy as np
from ncae_cuda.ops.emulator import build
library = build(__import__("pathlib").Path({str(tmp_path)!r}), {VECTOR_SOURCE!r})
data = np.zeros(64, np.float32)                 # numpy's buffers: 16-byte aligned at least
data[:] = np.arange(64)
out = np.zeros(8, np.float32)
library.emu_copy4_kernel(1, 2, ctypes.c_void_p(out.ctypes.data),
                         ctypes.c_void_p(data.ctypes.data), {offset})
print(f"{{out[0]:g}} {{out[4]:g}}")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPOSITORY)}, timeout=120)
    if aborts:
        assert done.returncode != 0 and "misaligned address" in done.stderr, done.stderr
    else:
        first = np.arange(offset, offset + 8, dtype=np.float32)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [f"{first[:4].sum():g}", f"{first[4:].sum():g}"]
