"""Seconds of a call, the median of `repeats` after `warmup` calls (kernel compilation,
first-touch allocation): on a GPU by CUDA events on the current stream around each call, on the
CPU by the wall clock. Before each timed call a 256 MiB buffer is written, outside the timing,
so a call whose inputs would fit in the cache (a GPU's L2 holds 50 MB) does not find them there
from the call before: in training, the step between two calls of an op streams every parameter
through Adam (triton's do_bench clears the cache the same way)."""
from __future__ import annotations

import time

import numpy as np

FLUSH_WORDS = 64 * 2**20                   # int32 words: 256 MiB, beyond any cache


def gpu_seconds(fn, repeats: int = 20, warmup: int = 3) -> float:
    import cupy
    scratch = cupy.empty(FLUSH_WORDS, np.int32)
    for _ in range(warmup):
        fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats):
        scratch.fill(0)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return float(np.median(times))


def cpu_seconds(fn, repeats: int = 20, warmup: int = 3) -> float:
    scratch = np.empty(FLUSH_WORDS, np.int32)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        scratch.fill(0)
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))
