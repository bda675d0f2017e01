"""Random test inputs, one planned training step on any backend, the float32-vs-float64
comparison, a read-only file system, which package extras are installed, and whether a bench's
results say where they were measured, shared by the test files."""
import builtins
import errno
import importlib.metadata
import json
import os
import re
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bench import epoch_time
from ncae_cuda.data import atomic_file
from ncae_cuda.model.config import tomllib
from ncae_cuda.ops.common import CSR, Batch
from ncae_cuda.ops.conformance import TOLERANCE as F32_RTOL  # noqa: F401 (for tests)
from ncae_cuda.ops.conformance import long_row_matrix  # noqa: F401 (for tests)
from ncae_cuda.ops.layout import NCAELayout
from ncae_cuda.ops.memory import StepMemory
from ncae_cuda.ops.plan import Planner, Schedule

REPOSITORY = Path(__file__).resolve().parents[1]


def missing_extra(name: str) -> str:
    """Why a test that needs the package's extra `name` cannot run here, naming the extra and
    its install command; '' where every requirement the extra adds is installed.

    The extras are read from the repository's pyproject.toml, not the installed package's
    metadata: the suite also runs from a checkout that is only on PYTHONPATH (a GPU machine's
    image, bench/gpu_check.sh)."""
    with open(REPOSITORY / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert name in extras, f"the package has no extra [{name}]"
    for requirement in extras[name]:
        dist = re.match(r"[A-Za-z0-9_.-]+", requirement).group()
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return f"needs the [{name}] extra ({dist} is not installed): pip install -e '.[{name}]'"
    return ""


def random_matrix(rng, n_rows, n_cols, density=0.15, empty_share=0.2) -> sp.csr_matrix:
    """Ratings 1..5 at random entries, a share of the rows left empty."""
    m = sp.random(n_rows, n_cols, density=density, random_state=rng, format="csr",
                  data_rvs=lambda n: rng.integers(1, 6, n).astype(np.float32))
    m = sp.csr_matrix(sp.diags((rng.random(n_rows) >= empty_share).astype(np.float32)) @ m,
                      dtype=np.float32)
    m.eliminate_zeros()
    m.sort_indices()
    return m


def random_rows(rng, n_rows, n_cols, n_batch) -> tuple[sp.csr_matrix, np.ndarray]:
    """A random matrix (some rows empty) and n_batch distinct random rows of it, (n_batch,)
    int32."""
    m = random_matrix(rng, n_rows, n_cols)
    return m, rng.choice(n_rows, n_batch, replace=False).astype(np.int32)


def one_step(backend, m, rows, batch_size, hidden, feedback="explicit", q=0.5, seed=0,
             dtype=np.float32):
    """The first step of an epoch over `rows` of m on the backend, batch_size >= len(rows):
    (its batch, the step memory it was cut into, the backend's CSR of m)."""
    csr = CSR.from_scipy(backend, m)
    planner = Planner(csr, rows, Schedule(seed, batch_size, q))
    memory = StepMemory(backend, NCAELayout(m.shape[1], hidden), feedback, planner.geometry,
                        dtype)
    return cut_first(backend, memory, csr, planner.plan(1)), memory, csr


def cut_first(backend, memory, csr, plan) -> Batch:
    """The plan loaded and its first step cut into the memory."""
    backend.load_plan(memory, plan)
    return backend.cut_batch(memory, csr, plan, 0)


def host_batch(backend, batch) -> Batch:
    """A backend's batch as numpy arrays, for the reference ops."""
    return Batch(*(None if x is None else np.asarray(backend.to_host(x)) for x in batch[:-1]))


def host(backend, x):
    return np.asarray(backend.to_host(x), dtype=np.float64)


def assert_close(actual, expected, rtol=F32_RTOL):
    expected = np.asarray(expected, np.float64)
    scale = max(np.abs(expected).max(initial=0.0), 1.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * scale)


def read_only(monkeypatch, since: str = "open") -> None:
    """ncae_cuda.data.atomic_file's writes fail as on a read-only file system (EROFS) from `since`
    on: "open", a file opened to write; "replace", the rename of a file written (a file system
    remounted read-only meanwhile). Unlink always fails: Linux refuses it there even for a file
    that is not there."""
    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    def opened(file, mode="r", *args, **kwargs):
        if since == "open" and set(mode) & set("wxa+"):
            refuse()
        return builtins.open(file, mode, *args, **kwargs)
    monkeypatch.setattr(atomic_file, "open", opened, raising=False)
    monkeypatch.setattr(atomic_file.os, "replace", refuse)
    monkeypatch.setattr(Path, "unlink", refuse)


def provenance_said(json_file: Path, markdown_file: Path) -> bool:
    """Whether a bench's results say where and when they were measured: the JSON's commit, date
    and machine (this one's: its CPU, its cores), and the markdown's line of them."""
    result = json.loads(json_file.read_text())
    cpu = epoch_time.device_name("cpu")
    return (result["commit"] == epoch_time.commit() and result["machine"].startswith(cpu)
            and f"commit {result['commit']}, {result['date']}; {result['machine']}"
            in markdown_file.read_text())
