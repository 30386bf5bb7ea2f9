"""The package's house plan, checked by parsing every labkit module's imports (no import runs).

Layers, lowest first; a module may import only from its own layer and the ones below:

    core  <-  policies  <-  envs  <-  credit  <-  learn  <-  bench  <-  course

``viz``, ``scoring`` and ``io`` (reading and writing trajectories: the import/export boundary,
whose readers end in the validated ``Rollouts``) sit beside the stack and may import ``core``
only. ``survey`` is a
stand-alone leaf (data and drawing of the field's taxonomy) and imports nothing of labkit but itself.
``course`` (one runner module per notebook) is the top layer and the only one that may import
several of them at once (the stack, ``scoring``, ``viz``, ``survey``); no runner module lives
outside it. Every runner module (a lesson, ``course/nbNN_*.py``) is a leaf: no module of labkit,
``scripts/`` or ``benchmarks/`` imports one (only the lesson's own notebook and tests do), so what
two lessons or a script and a lesson share lives below, in ``course.presets`` (a drawing the
lessons share in its own course module, such as ``course.step_heatmaps``) or the library.
``bench`` (the survey's benchmark protocol: tasks with exact truth, estimators scored on them)
sits above ``learn`` and may also use ``scoring`` (its metrics); ``course`` may import it.
``bridges`` (labkit's estimators inside other engines, e.g. verl) sits on top beside ``course``:
it may import the whole stack, and nothing of labkit imports it (it needs optional extras).
``diagnose`` (a user's own rollouts: measured setup, decision tree, estimators compared) sits on
top beside ``course`` too: it may import the stack, ``survey``, ``viz`` and ``scoring``, and only
``course`` imports it.
A second rule: no module imports a private (``_name``) object from a module outside its own
package.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "labkit"
# bench scores estimators on the envs with scoring's metrics: above learn, below the course
RANK = {"core": 0, "policies": 1, "envs": 2, "credit": 3, "learn": 4, "bench": 5}
TOP = 6  # course: the runner module of every notebook
ONLY_CORE = {"viz", "scoring", "io"}
TOP_LEVEL_FILES = {"__init__.py"}  # everything else lives in a package (scoring included)
# bridges: adapters to training engines that are optional extras (verl); top of the stack like the
# course, and no other area may import them, so labkit imports without those engines
BESIDE_COURSE = {"bridges"}
# diagnose: a user-facing tool beside the course; uses what the course uses, imported only by it
TOOLS = {"diagnose"}


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
            if area == "survey":  # the inventory reads data/ through the one path rule
                assert _area(t) == "survey" or t == "labkit.core.paths", \
                    f"{where}: survey imports nothing of labkit but itself (and core.paths)"
                continue
            if area in ONLY_CORE:
                assert _area(t) in ("core", area), f"{where}: {area} may import labkit.core only"
                continue
            if _area(t) in ONLY_CORE | {"survey"}:
                # bench reports scoring's metrics and fills the survey's checklist from the
                # inventory; viz stays the course's alone
                assert area in {"course"} | TOOLS or area == _area(t) or (area == "bench" and _area(t) in ("scoring", "survey")), \
                    f"{where}: only labkit.course (and labkit.bench, for scoring and survey) uses {_area(t)}"
                continue
            if module == "labkit":  # the package root re-exports the core data structures
                assert _area(t) == "core", where
                continue
            if _area(t) in TOOLS:
                assert area in (_area(t), "course"), f"{where}: only labkit.course imports {_area(t)}"
                continue
            if _area(t) in BESIDE_COURSE:
                assert area == _area(t), f"{where}: only {_area(t)} itself imports {_area(t)} (optional extras)"
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


def test_no_runner_module_outside_the_course():
    top = {p.name for p in ROOT.glob("*.py")}
    assert top <= TOP_LEVEL_FILES, f"labkit/ top level holds {sorted(top - TOP_LEVEL_FILES)}: runners go in labkit/course/"
    assert not list(ROOT.rglob("*_experiments.py")), "runner modules are named after their notebook, in labkit/course/"
    for path, module in MODULES:
        if module != "labkit" and _area(module) not in RANK and _area(module) not in ONLY_CORE | {"survey"} | BESIDE_COURSE | TOOLS:
            assert _area(module) == "course", f"{module}: a module above bench must live in labkit.course"


COURSE = [(p, m) for p, m in MODULES if _area(m) == "course" and m.rsplit(".", 1)[-1].startswith("nb")]


def test_the_course_has_one_runner_module_per_notebook():
    notebooks = {p.stem.split("_", 1)[0] for p in (ROOT.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")} - {"00"}
    modules = {m.rsplit(".", 1)[-1][2:4] for _, m in COURSE}
    assert modules == notebooks


REPO = ROOT.parent
# every Python file that is code others build on: the package, the data-writing and tool scripts,
# the speed benchmarks (notebooks and tests may import a lesson: it is what they run or check)
NOT_LESSON_USERS = sorted([*ROOT.rglob("*.py"), *(REPO / "scripts").rglob("*.py"), *(REPO / "benchmarks").rglob("*.py")])


def _lesson_imports(path: Path):
    """(line, imported module) for every import of a lesson (``labkit.course.nbNN_*``) in ``path``;
    ``from labkit.course import nb03_vineppo`` counts (the lesson is imported as a name)."""
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else Path(path.name)
    for target, names, line in _imports(path, ".".join(where.with_suffix("").parts)):
        for t in [target] if target.startswith("labkit.course.nb") else [f"{target}.{n}" for n in names]:
            if t.startswith("labkit.course.nb"):
                yield line, t


def test_the_lesson_import_check_sees_every_form(tmp_path):
    """The parser catches the ways a lesson can be imported (a regression guard for the test below)."""
    f = tmp_path / "uses_lessons.py"
    f.write_text("import labkit.course.nb01_reinforce_variance\n"
                 "from labkit.course import nb03_vineppo as nb03\n"
                 "from labkit.course.nb05_why_agents_harder import noisy_world\n"
                 "from labkit.course import presets\n")
    found = [t for _, t in _lesson_imports(f)]
    assert found == ["labkit.course.nb01_reinforce_variance", "labkit.course.nb03_vineppo",
                     "labkit.course.nb05_why_agents_harder"]


@pytest.mark.parametrize("path", NOT_LESSON_USERS, ids=[str(p.relative_to(REPO)) for p in NOT_LESSON_USERS])
def test_no_module_imports_a_lesson(path):
    for line, target in _lesson_imports(path):
        raise AssertionError(f"{path.relative_to(REPO)}:{line} imports {target}: a lesson is a leaf; move what it "
                             "shares to labkit.course.presets or down into the library")
