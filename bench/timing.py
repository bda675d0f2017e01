"""Seconds of a GPU call: CUDA events on the current stream around each of `repeats` calls,
after `warmup` calls (kernel compilation and first-touch allocation), median of the repeats."""
from __future__ import annotations

import numpy as np


def gpu_seconds(fn, repeats: int = 20, warmup: int = 3) -> float:
    import cupy
    for _ in range(warmup):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return float(np.median(times))
