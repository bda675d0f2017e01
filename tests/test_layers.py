"""The subpackages are layers: each imports only the ones below it (and the base modules
errors.py, naming.py, machine.py, interrupts.py and cli.py; cli.py, argparse's, only the
commands), so the folder tree shows which room a change belongs in and no circle can form
between rooms. The entry modules (ncae_cuda/train.py, ...) and the package's face
(ncae_cuda/__init__.py) stand above them all. Within a room no circle forms either: no module
imports, at its top or inside a function, one that imports it back."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ncae_cuda"
# lowest first; a layer may import any layer before it in this list, never one after it
LAYERS = ["data", "ops", "model", "baselines", "runs", "serving", "commands"]
# __version__: set first
BASE = {"errors", "naming", "machine", "interrupts", "cli", "__version__"}


def imports(path: Path, package: Path = PACKAGE):
    """(line, the ncae_cuda modules, the other top-level modules) each import statement of a
    file names, at its top or inside a function; the package's modules as dotted names under
    ncae_cuda ('NCAE' for the package face's, from .. import NCAE)."""
    here = list(path.relative_to(package).parent.parts)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
            yield (node.lineno, {n.removeprefix("ncae_cuda.") for n in names
                                 if n.startswith("ncae_cuda.")},
                   {n.split(".")[0] for n in names if n.split(".")[0] != "ncae_cuda"})
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)] + ([node.module] if node.module else [])
            elif node.module.split(".")[0] == "ncae_cuda":
                base = node.module.split(".")[1:]
            else:
                yield node.lineno, set(), {node.module.split(".")[0]}
                continue
            module = ".".join(base)
            # from . import rundir, from ncae_cuda import cli: each name is a module (or the
            # face's: NCAE); from .spec import RunSpec: the module is spec
            yield node.lineno, ({".".join(filter(None, [module, a.name])) for a in node.names}
                                if node.module in (None, "ncae_cuda") else {module}), set()


def imported(path: Path, package: Path = PACKAGE) -> set[str]:
    """The ncae_cuda modules a file imports, as dotted names under ncae_cuda."""
    return {name for _, package_names, _ in imports(path, package) for name in package_names}


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
    for name in ("errors", "naming", "machine", "interrupts", "cli"):
        assert not {layer_of(m) for m in imported(PACKAGE / f"{name}.py")} & set(LAYERS)
    assert not imported(PACKAGE / "naming.py")         # every layer may import it: cli too


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


# The one module of commands/ the commands share: the trainer's flags. A flag (--dataset,
# --split-seed, a model setting's) is one flag in every command that has it, and argparse is
# the commands' alone, so its one declaration lives beside them, not in a layer below.
SHARED_FLAGS = "commands.flags"


def test_a_command_imports_no_other_command():
    """What two commands share lives in a layer below them (runs/, ...), never in one of them;
    the flags they share (SHARED_FLAGS) are no command, and import none."""
    wrong = [f"{path.name} imports {module}"
             for path in sorted((PACKAGE / "commands").glob("*.py"))
             for module in imported(path)
             if layer_of(module) == "commands" and module != SHARED_FLAGS]
    assert not wrong, "\n".join(wrong)


LIBRARY = [layer for layer in LAYERS if layer != "commands"]


def flag_imports(package: Path) -> list[str]:
    """Each import of argparse or of ncae_cuda.cli in a library layer's module (any import
    statement, in a function too), as 'FILE:LINE imports argparse' (or 'imports cli'): the
    flags belong to commands/ and cli.py, and a library layer is used without a parser (a
    layer's __main__.py is an entry point, a command's)."""
    wrong = []
    for layer in LIBRARY:
        for path in sorted((package / layer).rglob("*.py")):
            if path.name == "__main__.py":
                continue
            for line, modules, others in imports(path, package):
                for name in sorted({"argparse"} & others | {"cli"} & set(map(layer_of, modules))):
                    wrong.append(f"{path.relative_to(package)}:{line} imports {name}")
    return wrong


def test_no_library_layer_imports_argparse_or_cli():
    wrong = flag_imports(PACKAGE)
    assert not wrong, "\n".join(wrong)


def test_the_flags_check_finds_each_kind_of_import(tmp_path):
    """The check can fail: argparse or cli imported at the top, inside a function, by a
    from-import, relative or absolute, in the library layers, is reported; a command's, a
    name that only starts alike, and naming (the flag's name, a base module) are not."""
    for layer in ("runs", "baselines", "serving", "data", "commands"):
        (tmp_path / layer).mkdir()
    (tmp_path / "runs" / "flags.py").write_text("import os, argparse as ap\n")
    (tmp_path / "baselines" / "types.py").write_text(
        "import argparse_extra\n\ndef count(text):\n    from argparse import ArgumentTypeError\n"
        "    raise ArgumentTypeError(text)\n")
    (tmp_path / "runs" / "wired.py").write_text(
        "from .. import naming, cli\n\ndef parse():\n    from ncae_cuda import cli\n")
    (tmp_path / "serving" / "parser.py").write_text("from ..cli import Parser\n"
                                                    "import ncae_cuda.cli as c\n")
    (tmp_path / "data" / "rows.py").write_text("from ..naming import flag\n"
                                               "from .cli_rows import read\n")
    (tmp_path / "commands" / "train.py").write_text("import argparse\nfrom .. import cli\n")
    assert flag_imports(tmp_path) == [
        "baselines/types.py:4 imports argparse", "runs/flags.py:1 imports argparse",
        "runs/wired.py:1 imports cli", "runs/wired.py:4 imports cli",
        "serving/parser.py:1 imports cli", "serving/parser.py:2 imports cli"]


def import_graph(package: Path) -> dict[str, set[str]]:
    """{module: the package's modules it imports}, every import of it (inside functions too),
    as dotted names under the package ('' the package's face). A name imported from a module
    (from .config import Config) is an import of that module; __version__ is the face's, set
    before it imports anything, so importing it is no circle."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        graph[name] = set()
        for module in imported(path, package) - BASE:
            while module not in modules:                     # a name in a module: the module
                module = module.rpartition(".")[0]
            if module != name:
                graph[name].add(module)
    return graph


def import_cycle(package: Path) -> list[str]:
    """A circle of imports among the package's modules, as [a, b, ..., a]; [] where none."""
    graph, state, path = import_graph(package), {}, []

    def visit(module: str) -> list[str]:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = "done"
        return []
    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return []


def test_no_module_imports_itself_back():
    cycle = import_cycle(PACKAGE)
    assert not cycle, "import circle: " + " -> ".join(name or "ncae_cuda" for name in cycle)


def test_the_check_finds_a_circle_through_a_function_level_import(tmp_path):
    """The check can fail: model/a.py imports model/b.py, whose function imports a back (as
    estimator.py and blend.py did); the package's __version__ taken from its face is none."""
    (tmp_path / "__init__.py").write_text("__version__ = '0'\nfrom .model.a import f\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "__init__.py").write_text("")
    (tmp_path / "model" / "a.py").write_text("from .. import __version__\n"
                                             "from .b import g\n")
    (tmp_path / "model" / "b.py").write_text("def g():\n    from .a import f\n")
    assert import_cycle(tmp_path) == ["model.a", "model.b", "model.a"]
    (tmp_path / "model" / "b.py").write_text("def g():\n    from . import c\n")
    (tmp_path / "model" / "c.py").write_text("")
    assert import_cycle(tmp_path) == []
