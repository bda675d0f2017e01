"""The package imports on any OS: the POSIX-only modules (fcntl, resource) are imported where
they are used, never at a module's top, so `import ncae_cuda` and the commands' modules load on
Windows, where the CPU backend runs. And a command starts without the libraries only some of
its work needs (pyarrow's CSV reader, scipy.linalg): every process pays for what it imports."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# in a fresh interpreter, fcntl and resource made unimportable (a None in sys.modules is how
# Python marks a module that is not there), then every module of the package and its commands
IMPORT_ALL = """
import importlib, pkgutil, sys
sys.modules.update(fcntl=None, resource=None)
import ncae_cuda
names = [m.name for m in pkgutil.walk_packages(ncae_cuda.__path__, "ncae_cuda.")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def test_every_module_imports_without_fcntl_and_resource():
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout) >= 30                  # the package's modules, every one of them


# what the commands' processes must not import before they need it: pyarrow (a file's reading)
# and scipy.linalg (EASE's solve), a large share of a process's start
STARTUP = """
import sys
import ncae_cuda.commands.train, ncae_cuda.commands.tune, ncae_cuda.commands.recommend
print(",".join(sorted(name for name in ("pyarrow", "scipy.linalg") if name in sys.modules)))
"""


def test_a_command_starts_without_what_only_some_of_its_work_needs():
    done = subprocess.run([sys.executable, "-c", STARTUP], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == ""


# the package's face read in a fresh interpreter: what `import ncae_cuda` loaded, then each name
# of __all__ as `from ncae_cuda import *` gives it, and whether dir() lists them all
FACE = """
import importlib, sys
import ncae_cuda
print(",".join(sorted(name for name in ("numpy", "numba", "scipy") if name in sys.modules)))
namespace = {}
exec("from ncae_cuda import *", namespace)
print(",".join(f"{name}:{getattr(namespace[name], '__module__', '')}"
               for name in ncae_cuda.__all__))
print(set(ncae_cuda.__all__) <= set(dir(ncae_cuda)))
"""


def test_the_package_face_loads_its_names_as_they_are_read():
    """`import ncae_cuda` loads no library: `python -m ncae_cuda.NAME` imports the package
    before the command's shim can end a Ctrl-C in a line (before, numpy, Numba and SciPy, most
    of a command's start, loaded with the face's NCAE: a Ctrl-C there was a traceback); each
    name of __all__ is still there, the one its module defines."""
    done = subprocess.run([sys.executable, "-c", FACE], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded, names, listed = done.stdout.splitlines()
    assert loaded == ""
    assert names.split(",") == [
        "NCAE:ncae_cuda.model.estimator", "BlendedNCAE:ncae_cuda.model.blend",
        "make_model:ncae_cuda.runs.factory", "load_model:ncae_cuda.runs.factory",
        "NotFitted:ncae_cuda.model.base", "Unsupported:ncae_cuda.model.base", "__version__:"]
    assert listed == "True"
