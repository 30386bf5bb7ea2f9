"""The package's house plan, checked by parsing every labkit module's imports (no import runs).

Layers, lowest first; a module may import only from its own layer and the ones below:

    core  <-  policies  <-  envs  <-  credit  <-  learn  <-  top-level runner modules / course

``viz`` and ``scoring`` sit beside the stack and may import ``core`` only. ``survey`` is a
stand-alone leaf (data and drawing of the field's taxonomy) and imports nothing of labkit but itself.
A second rule: no module imports a private (``_name``) object from a module outside its own
package.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "labkit"
RANK = {"core": 0, "policies": 1, "envs": 2, "credit": 3, "learn": 4}
TOP = 5  # runner modules (experiments, agent_experiments, ...), transitional re-exports, course
ONLY_CORE = {"viz", "scoring"}


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def _imports(path: Path, module: str):
    """(imported module, imported names, line) for every labkit import, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "labkit":
                    yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "labkit":
                yield target, [a.name for a in node.names], node.lineno


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _rank(module: str) -> int:
    return RANK.get(_area(module), TOP)


MODULES = list(_modules())


def test_the_parser_sees_the_layers():
    areas = {_area(m) for _, m in MODULES}
    assert {"core", "policies", "envs", "credit", "learn", "viz"} <= areas


@pytest.mark.parametrize("path,module", MODULES, ids=[m for _, m in MODULES])
def test_imports_point_down_the_layers(path, module):
    area = _area(module)
    for target, names, line in _imports(path, module):
        # "from labkit import x" imports the submodules x: judge each of them
        targets = [f"labkit.{n}" for n in names] if target == "labkit" else [target]
        for t in targets:
            where = f"{path.relative_to(ROOT.parent)}:{line} imports {t}"
            if area == "survey":
                assert _area(t) == "survey", f"{where}: survey imports nothing of labkit but itself"
                continue
            if area in ONLY_CORE:
                assert _area(t) in ("core", area), f"{where}: {area} may import labkit.core only"
                continue
            if _area(t) in ONLY_CORE | {"survey"}:
                assert _rank(module) >= TOP or area == _area(t), f"{where}: only runner modules use {_area(t)}"
                continue
            if module == "labkit":  # the package root re-exports the core data structures
                assert _area(t) == "core", where
                continue
            assert _rank(t) <= _rank(module), f"{where}: {area or module} must not import a higher layer"


@pytest.mark.parametrize("path,module", MODULES, ids=[m for _, m in MODULES])
def test_no_private_imports_across_packages(path, module):
    own = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for target, names, line in _imports(path, module):
        target_pkg = target.rsplit(".", 1)[0] if not (ROOT.parent / target.replace(".", "/")).is_dir() else target
        private_module = any(p.startswith("_") and p != "__init__" for p in target.split("."))
        private_names = [n for n in names if n.startswith("_")]
        if target_pkg != own and not target.startswith(own + "."):
            assert not private_names, f"{module}:{line} imports private {private_names} from {target}"
            assert not private_module, f"{module}:{line} imports from the private module {target}"
