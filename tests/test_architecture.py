"""The package layout holds: the model core is pure, layers import only downwards, and each framework's folder
(``autotuner/frameworks/<name>/``) knows no other framework; the test suite loads nothing of ``research/``.

docs/explanation/architecture.md draws the layers; these tests fail when an import breaks them.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "autotuner"
#: modules whose import means I/O, clocks, processes or global random state
IMPURE = {"os", "io", "pathlib", "json", "tomllib", "gzip", "subprocess", "socket", "shutil", "tempfile",
          "random", "time", "signal", "importlib", "matplotlib", "pandas", "rich", "typer"}
#: Horovod's pure core: its knob table, the simulator of its background loop and the question asked of it
HVD = "frameworks.horovod"
HVD_CORE = f"{HVD}.knobs", f"{HVD}.simulator", f"{HVD}.fastsim", f"{HVD}.scenario"
#: what each layer may import inside the package (the layer itself always). The shared parts know no framework:
#: the cost model, readers, writers, the fits every framework shares, tune's decision core,
#: the shared views and the real-run launcher and testbed; each framework's own fit, search and views live in its
#: folder (docs/explanation/architecture.md, "Frameworks").
ALLOWED = {
    "model": {"errors"},
    "schemas": {"errors", "model"},
    "readers": {"errors", "schemas", "model"},
    "writers": {"errors", "readers"},
    "fit": {"errors", "schemas", "model", "readers", "writers"},
    "search": {"errors", "model"},
    "views": {"errors", "schemas", "model", "readers", "writers", "search", "fit"},
    "realrun": {"errors", "schemas", "model", "readers", "writers", "search"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, absolute-ish target) of every import in ``path``; relative ones resolved in the package."""
    rel = path.relative_to(PKG).with_suffix("").parts
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(0, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((0, node.module or ""))
            else:
                base = list(rel[:-1])[: len(rel) - node.level] if node.level > 1 else list(rel[:-1])
                out.append((node.level, ".".join(["autotuner", *base, *(node.module or "").split(".")]).rstrip(".")))
    return out


PURE = [*sorted((PKG / "model").glob("*.py")), *(PKG / (m.replace(".", "/") + ".py") for m in HVD_CORE),
        *(PKG / "frameworks" / "ddp" / f for f in ("knobs.py", "reducer.py", "fastsim.py", "fit.py")), PKG / "errors.py",
        PKG / "fit" / "collective.py", PKG / "search" / "tune.py", PKG / "frameworks" / "horovod" / "tune_space.py"]


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(PKG)))
def test_model_core_does_no_io(path):
    for _, mod in _imports(path):
        assert mod.split(".")[0] not in IMPURE, f"{path.name} imports {mod}"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in {"open", "print", "input", "exec", "eval", "__import__"}, \
                f"{path.name} calls {node.func.id}()"


def _target(parts: list[str]) -> str:
    """The layer an import lands in: ``model``, or ``frameworks.horovod.knobs`` for a framework's module."""
    return ".".join(parts[1:4]) if parts[1] == "frameworks" and len(parts) > 3 else parts[1]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layers_import_only_downwards(layer):
    for path in sorted((PKG / layer).rglob("*.py")):
        for _, mod in _imports(path):
            parts = mod.split(".")
            if parts[0] != "autotuner" or len(parts) < 2:
                continue
            assert _target(parts) in ALLOWED[layer] | {layer}, f"{path.relative_to(PKG)} imports {mod}"


#: the application layer, which may import any framework: the public API's entry (``__init__.py``), the command
#: line, the option parsing it uses, the integrations a training script imports, and the replay workload's entry
#: point (``python -m autotuner.replay``)
APPLICATION = {"__init__.py", "options.py", "replay.py", "cli", "integrations"}


def _shared_modules() -> list[Path]:
    return [p for p in sorted(PKG.rglob("*.py"))
            if p.relative_to(PKG).parts[0] not in APPLICATION | {"frameworks"}]


@pytest.mark.parametrize("path", _shared_modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_the_shared_layer_imports_no_framework(path):
    """The cost model, testbed, readers, writers, render, specs, schemas and the other shared modules serve every
    framework and import none: a framework's knob table, simulator, fit, schemas and results live in its folder."""
    for _, mod in _imports(path):
        assert not mod.startswith("autotuner.frameworks."), f"{path.relative_to(PKG)} imports {mod}"


def test_the_shared_layer_is_every_module_outside_the_frameworks_and_the_application():
    shared = {str(p.relative_to(PKG)) for p in _shared_modules()}
    assert {"specs.py", "render.py", "paths.py", "schemas/core.py", "model/costmodel.py", "readers/timeline.py",
            "realrun/launcher.py"} <= shared
    assert not any(s.startswith(("frameworks/", "cli/", "integrations/")) for s in shared)


@pytest.mark.parametrize("framework", ["ddp", "horovod"])
def test_a_framework_knows_no_other_framework(framework):
    """Each framework is one folder; DDP's code imports nothing of Horovod's, nor the other
    way round (they share the cost model, testbed, search, tune's core, readers and views)."""
    files = sorted((PKG / "frameworks" / framework).rglob("*.py"))
    assert len(files) >= 8
    for path in files:
        for _, mod in _imports(path):
            parts = mod.split(".")
            if parts[:2] == ["autotuner", "frameworks"] and len(parts) > 2:
                assert parts[2] == framework, f"{path.relative_to(PKG)} imports {mod}"


def test_cli_imports_only_the_public_api_and_its_own_rendering():
    """The command line (the package ``autotuner/cli/``) parses its options (:mod:`autotuner.options`),
    calls the public API (the names of ``autotuner.__all__``) and renders (:mod:`autotuner.render`): nothing else of
    the package but its own modules and the program's Ctrl-C while loading (:mod:`autotuner._sigint`, which
    ``autotuner/__init__.py`` installs first)."""
    import autotuner

    own = {"autotuner", "autotuner.options", "autotuner.render", "autotuner._sigint"}
    files = sorted((PKG / "cli").glob("*.py"))
    assert len(files) >= 5 and not (PKG / "cli.py").exists()
    used = set()
    for path in files:
        tree = ast.parse(path.read_text())
        for _, mod in _imports(path):
            if mod.split(".")[0] == "autotuner" and not mod.startswith("autotuner.cli"):
                assert mod in own, f"cli/{path.name} imports {mod}"
        used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                 and n.value.id == "autotuner"}
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "autotuner"
                 for a in n.names}
    assert used and used <= set(autotuner.__all__), sorted(used - set(autotuner.__all__))


def test_no_command_line_module_is_over_600_lines():
    for path in sorted((PKG / "cli").glob("*.py")):
        n = len(path.read_text().splitlines())
        assert n <= 600, f"cli/{path.name}: {n} lines"


def test_every_public_name_resolves_and_no_module_shadows_one():
    """A public name equal to a subpackage's (``autotuner.fit``) resolves to the module once it is imported."""
    import autotuner

    modules = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    for name in autotuner.__all__:
        assert name not in modules, f"autotuner.{name} is also a module of the package"
        assert getattr(autotuner, name) is not None, name


def test_ci_runs_exactly_the_readmes_test_command():
    """README section 2's one command is what .ci/run executes."""
    root = PKG.parent
    readme = (root / "README.md").read_text()
    section = readme.split("## 2. ", 1)[1].split("## ", 1)[0]
    command = section.split("```bash\n", 1)[1].split("\n```", 1)[0].strip()
    assert "install_horovod.sh" in command and "pytest" in command
    ci_lines = [line.strip() for line in (root / ".ci" / "run").read_text().splitlines()]
    assert command in ci_lines


def test_no_test_loads_research():
    """Experiments live in ``research/`` (scripts, their own checks and notes), outside the package and the suite:
    no file under ``tests/`` builds a path into it or imports from it, and no module of the package imports it."""
    import re

    root = PKG.parent
    into = re.compile(r"""["']research["']|research/(scripts|tests)|^\s*(from|import)\s+research\b""", re.M)
    files = [f for f in sorted((root / "tests").rglob("*.py")) if f != Path(__file__).resolve()]  # this one names it
    assert len(files) >= 50
    for path in files:
        m = into.search(path.read_text())
        assert m is None, f"{path.relative_to(root)} reaches into research/: {m.group(0)!r}"
    for path in sorted(PKG.rglob("*.py")):
        for _, mod in _imports(path):
            assert mod.split(".")[0] != "research", f"{path.relative_to(PKG)} imports {mod}"


@pytest.mark.parametrize("framework", ["horovod", "ddp"])
def test_each_framework_has_every_part_of_the_contract(framework):
    """Both frameworks have the same parts (autotuner.frameworks.FRAMEWORKS), each a module or package of its
    folder, and the contract names every framework folder there is."""
    import dataclasses

    from autotuner.frameworks import FRAMEWORKS

    assert set(FRAMEWORKS) == {p.name for p in (PKG / "frameworks").iterdir() if (p / "__init__.py").is_file()}
    parts = FRAMEWORKS[framework]
    folder = PKG / "frameworks" / framework
    for field in dataclasses.fields(parts):
        names = getattr(parts, field.name)
        for name in (names,) if isinstance(names, str) else names:
            assert (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file(), \
                f"{framework}: {field.name} {name!r} is not a module of {folder.relative_to(PKG)}"
