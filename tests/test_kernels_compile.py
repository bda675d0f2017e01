"""The CUDA kernels compile, wherever the compilers are, GPU or not.

- nvcc: every kernels/*.cu as it stands, as a user would compile it (no -I, no -D: the numbers
  it shares with Python are in kernels/device_numbers.cuh), and the versions kept in dev/cuda
  (with kernels/ on the include path), for sm_80 and sm_90, warnings as errors; the register
  and spill report of each kernel is printed (CI shows it).
- NVRTC (what CuPy compiles with at run time): the one module ops/gpu.py assembles, with its
  options, where a libnvrtc can be found: the [nvrtc] extra's (CI's, no GPU) or CuPy's [ctk].
"""
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ncae_cuda.ops import gpu
from ncae_cuda.ops.common import MAX_WINDOW_THREADS

NVCC = shutil.which("nvcc")
ARCHS = ("sm_80", "sm_90")
SOURCES = sorted(gpu.KERNEL_DIR.glob("*.cu"))
# the kernels over K-vectors, launched with a warp per slab of K: up to MAX_WINDOW_THREADS
WINDOW_KERNELS = {"gather_forward_kernel", "scatter_backward_kernel",
                  "sparse_output_forward_kernel", "sparse_output_rows_kernel",
                  "sparse_output_cols_kernel"}
DEV_SOURCES = sorted((Path(__file__).resolve().parents[1] / "dev" / "cuda").glob("*.cu"))


def test_every_kernel_file_is_in_the_module():
    assert sorted(gpu.KERNEL_FILES) == [p.name for p in SOURCES]


def _nvcc(source: Path, arch: str) -> subprocess.CompletedProcess:
    include = [f"-I{gpu.KERNEL_DIR}"] if source in DEV_SOURCES else []
    return subprocess.run([NVCC, f"-arch={arch}", *include, "-cubin", "-o", os.devnull,
                           "-Werror", "all-warnings", "-Xptxas", "-v", str(source)],
                          capture_output=True, text=True)


@pytest.mark.skipif(NVCC is None, reason="no nvcc")
def test_kernels_compile_with_nvcc(capsys):
    jobs = [(source, arch) for source in SOURCES + DEV_SOURCES for arch in ARCHS]
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        results = list(pool.map(lambda job: _nvcc(*job), jobs))
    failed = [f"{s.name} ({a}):\n{r.stderr}" for (s, a), r in zip(jobs, results) if r.returncode]
    assert not failed, "\n".join(failed)
    # ptxas -v, per kernel: "Compiling entry function 'k'", "N bytes stack frame, N bytes spill
    # stores, N bytes spill loads", "Used N registers, ..."
    report, too_many = [], []
    for (source, arch), result in zip(jobs, results):
        for kernel, frame, usage in re.findall(
                r"Compiling entry function '(\w+)'.*?\n\s*(\d+ bytes stack frame.*?)\n"
                r".*?Used (\d+ registers[^\n]*)", result.stderr, re.S):
            report.append(f"{arch} {source.name:20} {kernel:36} {usage} | {frame}")
            # a block's registers (allocated 8 a thread at a time) must fit an SM's 64K
            threads = MAX_WINDOW_THREADS if kernel in WINDOW_KERNELS else gpu.BLOCK
            registers = -(-int(usage.split()[0]) // 8) * 8
            if registers * threads > 65536:
                too_many.append(f"{arch} {kernel}: {registers} x {threads} threads")
    with capsys.disabled():
        print("\nnvcc resource report (arch, file, kernel, registers ... | stack and spills)")
        print("\n".join(report))
    assert len(report) == len(ARCHS) * sum(s.read_text().count("__global__")
                                           for s in SOURCES + DEV_SOURCES)
    assert not any(re.search(r"[1-9]\d* bytes spill", line) for line in report)
    assert not too_many, f"blocks that cannot launch: {too_many}"


def _find_nvrtc() -> str | None:
    candidates = glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia",
                                        "*", "lib", "libnvrtc.so*"))
    candidates += glob.glob(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                         "lib64", "libnvrtc.so*"))
    found = [c for c in candidates if re.search(r"libnvrtc\.so(\.\d+)*$", c)]
    return found[0] if found else None


NVRTC = _find_nvrtc()


# optional: a GPU machine's CuPy may bring its libnvrtc without the [nvrtc] extra's wheel
@pytest.mark.extra("nvrtc", optional=True)
@pytest.mark.skipif(NVRTC is None, reason="no libnvrtc: needs the [nvrtc] extra: "
                                          "pip install -e '.[nvrtc]'")
@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_module_compiles_with_nvrtc(arch):
    nvrtc = ctypes.CDLL(NVRTC)
    program = ctypes.c_void_p()
    source = gpu.module_source().encode()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(program), source, b"ncae_kernels.cu",
                                    0, None, None) == 0
    options = [o.encode() for o in (*gpu.COMPILE_OPTIONS, f"--gpu-architecture={arch}")]
    status = nvrtc.nvrtcCompileProgram(program, len(options),
                                       (ctypes.c_char_p * len(options))(*options))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(program, log)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    assert status == 0, log.value.decode()
