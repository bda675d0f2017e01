"""The CUDA emulator shows a kernel's missing __syncthreads: a warp that reads another warp's
shared memory before it is written, or after it is written again for the next round, reads
the wrong value, as it may on a GPU. Without the barrier the result is wrong; with it, right.
A vector access off its boundary, or an access off an array, ends its launch with a
KernelFault, as a GPU faults, and leaves the process running."""
import ctypes

import numpy as np
import pytest

from ncae_cuda.ops import conformance, gpu, guarded
from ncae_cuda.ops.emulator import CXX, EmulatedDevice, KernelFault, alignment_checked, build

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


@pytest.fixture(scope="module")
def vector_device(tmp_path_factory):
    return EmulatedDevice(build(tmp_path_factory.mktemp("vector"), VECTOR_SOURCE),
                          lambda kernel: True)


@pytest.mark.skipif(CXX is None or not alignment_checked(),
                    reason="g++ does not take UBSan's alignment check here")
@pytest.mark.parametrize("offset", [0, 4, 1])
def test_a_misaligned_vector_access_faults_as_on_a_gpu(vector_device, offset):
    """Before the alignment check, the load one float off ran and summed the next four; then
    the check aborted the process (the test ran in a subprocess): now the launch raises."""
    data = np.arange(64, dtype=np.float32)          # numpy's buffers: 16-byte aligned at least
    out = np.zeros(8, np.float32)
    launch = lambda: vector_device.launch("copy4_kernel", 1, 2, (out, data, np.int32(offset)))
    if offset % 4:
        with pytest.raises(KernelFault, match=r"copy4_kernel: misaligned address.* by thread "
                                              r"\(0,0,0\) in block \(0,0,0\)"):
            launch()
    else:
        launch()
        first = data[offset:offset + 8]
        np.testing.assert_array_equal(out[[0, 4]], [first[:4].sum(), first[4:].sum()])


# Thread i of the grid reads in[i + shift_in] and writes out[i + shift_out], or divides by d.
FAULTY_SOURCE = r"""
extern "C" __global__ void shifted_copy_kernel(float* out, const float* in, int shift_in,
                                               int shift_out, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i + shift_out] = in[i + shift_in] + i / d;
}
"""


@pytest.fixture(scope="module")
def faulty_device(tmp_path_factory):
    return EmulatedDevice(build(tmp_path_factory.mktemp("faulty"), FAULTY_SOURCE),
                          lambda kernel: True)


@pytest.mark.parametrize("shift_in, shift_out, d, says", [
    (1, 0, 1, r"invalid __global__ read at 0x[0-9a-f]+, 0 bytes after the end of the 256-byte "
              r"allocation of argument 1"),
    (0, 1, 1, r"invalid __global__ write at 0x[0-9a-f]+, 0 bytes after the end of the 256-byte "
              r"allocation of argument 0"),
    (0, 100_000, 1, r"invalid __global__ write at 0x[0-9a-f]+, 399744 bytes after the end of "
                    r"the 256-byte allocation of argument 0"),
    (0, 0, 0, r"arithmetic fault \(an integer division by zero\)"),
], ids=["read-past-the-end", "write-past-the-end", "write-far-past-it", "division-by-zero"])
def test_a_faulting_thread_ends_its_launch_with_an_error_naming_it(faulty_device, shift_in,
                                                                   shift_out, d, says):
    """Before, the read one past the array read whatever the heap held there, the write
    corrupted the heap (a bound check of the kernels mutated to `<=` killed pytest with a
    segmentation fault, every test's report lost) and the division killed the process."""
    out, data = np.zeros(64, np.float32), np.arange(64, dtype=np.float32)
    args = (out, data, np.int32(shift_in), np.int32(shift_out), np.int32(d))
    # the last thread of the last block is the first off the arrays, unless every one is off
    # them (or divides by 0): then the first
    thread, block = (31, 1) if d and shift_in + shift_out == 1 else (0, 0)
    with pytest.raises(KernelFault, match=rf"shifted_copy_kernel: {says}, by thread "
                                          rf"\({thread},0,0\) in block \({block},0,0\)"):
        faulty_device.launch("shifted_copy_kernel", 2, 32, args)
    # the device goes on: the next launch runs every thread anew
    faulty_device.launch("shifted_copy_kernel", 2, 32, (out, data, *map(np.int32, (0, 0, 1))))
    np.testing.assert_array_equal(out, data + np.arange(64))


def test_views_of_one_array_are_one_allocation_for_the_launch():
    """A kernel given two views of one array sees them alias, as on a GPU: both lie in one
    copy; another array lies in its own."""
    whole, other = np.zeros(16, np.float32), np.zeros(4, np.float32)
    spans = guarded.allocations((whole[:8], np.int32(3), other, whole[4:], None))
    assert sorted((s.nbytes, s.arguments) for s in spans) == [(16, [2]), (64, [0, 3])]
