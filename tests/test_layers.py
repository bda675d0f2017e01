"""The subpackages are layers: each imports only the ones below it (and the base modules
errors.py and cli.py), so the folder tree shows which room a change belongs in and no
circle can form between rooms. The entry modules (ncae_cuda/train.py, ...) and the package's
face (ncae_cuda/__init__.py) stand above them all."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ncae_cuda"
# lowest first; a layer may import any layer before it in this list, never one after it
LAYERS = ["data", "ops", "model", "baselines", "runs", "serving", "commands"]
BASE = {"errors", "cli", "__version__"}      # __version__: the package's, set before any import


def imported(path: Path, package: Path = PACKAGE) -> set[str]:
    """The ncae_cuda modules a file imports, as dotted names under ncae_cuda."""
    here = list(path.relative_to(package).parent.parts)
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[:len(here) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
            names |= ({module} if node.module else
                      {".".join(filter(None, [module, a.name])) for a in node.names})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ncae_cuda."):
            names.add(node.module.removeprefix("ncae_cuda."))
        elif isinstance(node, ast.Import):
            names |= {a.name.removeprefix("ncae_cuda.") for a in node.names
                      if a.name.startswith("ncae_cuda.")}
    return names


def layer_of(module: str) -> str:
    return module.split(".")[0]


def upward_imports(package: Path) -> list[str]:
    """Each import of a layer's module from a layer above it, as 'FILE imports MODULE'."""
    wrong = []
    for layer in LAYERS:
        for path in sorted((package / layer).rglob("*.py")):
            if path.name == "__main__.py":           # an entry point: it calls a command
                continue
            for module in sorted(imported(path, package)):
                target = layer_of(module)
                if target in BASE or target == layer:
                    continue
                if target not in LAYERS or LAYERS.index(target) > LAYERS.index(layer):
                    wrong.append(f"{path.relative_to(package)} imports {module}")
    return wrong


def test_each_layer_imports_only_the_layers_below_it():
    wrong = upward_imports(PACKAGE)
    assert not wrong, "\n".join(wrong)


def test_the_base_modules_import_no_layer():
    for name in ("errors", "cli"):
        assert not {layer_of(m) for m in imported(PACKAGE / f"{name}.py")} & set(LAYERS)


def test_the_check_finds_an_upward_import_and_the_package_face(tmp_path):
    """The check can fail: an ops module importing model, or a model module importing the
    package's face (which imports model), is reported; an import downward is not."""
    for layer in ("ops", "model"):
        (tmp_path / layer).mkdir()
    (tmp_path / "ops" / "bad.py").write_text("from ..model.loop import run_epoch\n"
                                             "from .plan import Planner\n")
    (tmp_path / "model" / "face.py").write_text("from .. import NCAE\n"
                                                "from ..ops.plan import Planner\n")
    assert upward_imports(tmp_path) == ["ops/bad.py imports model.loop",
                                        "model/face.py imports NCAE"]


def test_a_command_imports_no_other_command():
    """What two commands share lives in a layer below them (runs/, ...), never in one of them."""
    wrong = [f"{path.name} imports {module}"
             for path in sorted((PACKAGE / "commands").glob("*.py"))
             for module in imported(path) if layer_of(module) == "commands"]
    assert not wrong, "\n".join(wrong)


LIBRARY = [layer for layer in LAYERS if layer != "commands"]


def argparse_imports(package: Path) -> list[str]:
    """Each import of argparse in a library layer's module (any import statement, in a
    function too), as 'FILE imports argparse': the flags belong to commands/ and cli.py."""
    wrong = []
    for layer in LIBRARY:
        for path in sorted((package / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module]
                else:
                    continue
                if any(name.split(".")[0] == "argparse" for name in names):
                    wrong.append(f"{path.relative_to(package)}:{node.lineno} imports argparse")
    return wrong


def test_no_library_layer_imports_argparse():
    wrong = argparse_imports(PACKAGE)
    assert not wrong, "\n".join(wrong)


def test_the_argparse_check_finds_each_kind_of_import(tmp_path):
    """The check can fail: a module-level, a function-level and a from-import of argparse in
    the library layers are reported; a command's, and a name that only starts alike, are not."""
    for layer in ("runs", "baselines", "commands"):
        (tmp_path / layer).mkdir()
    (tmp_path / "runs" / "flags.py").write_text("import os, argparse as ap\n")
    (tmp_path / "baselines" / "types.py").write_text(
        "import argparse_extra\n\ndef count(text):\n    from argparse import ArgumentTypeError\n"
        "    raise ArgumentTypeError(text)\n")
    (tmp_path / "commands" / "train.py").write_text("import argparse\n")
    assert argparse_imports(tmp_path) == ["baselines/types.py:4 imports argparse",
                                          "runs/flags.py:1 imports argparse"]
