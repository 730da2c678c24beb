"""The package layers: what each may import (docs/architecture.md).

Bottom to top: `contract` (data + the generator, standard library only); the base of
`stacklens` (settings, paths, db, schema, wire, mpi_ops); `collector` and `server`
beside each other (the server talks to a collector over its control channel; it does not
know the frontend: the command line mounts the dashboard beside the API);
`presentation` (what the pages and the reports show of the API's data: the job card
registry, figures, formatting; of stacklens it may import only the API contract,
`stacklens.api_models`, and the shared names and codes, `stacklens.constants`, both pure
data); `frontend` (talks to the server over HTTP only, over `presentation` and those);
`emulator` (a test and demo tool over the sampler's MAD access); and the command line,
`stacklens_cli`, a package of its own at the top. A module may import its own layer and
the layers below it, never one above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = (
    "stacklens",
    "contract",
    "collector",
    "server",
    "presentation",
    "frontend",
    "emulator",
    "stacklens_cli",
)
#: Modules of stacklens' base that are pure data, checked apart: the frontend may use them.
PURE = ("stacklens.api_models", "stacklens.constants", "stacklens.modes")

#: For each layer (a package, or stacklens' base), the first-party packages it may import.
ALLOWED = {
    "contract": {"contract"},
    "stacklens": {"contract", "stacklens", *PURE},
    "collector": {"contract", "stacklens", "collector", *PURE},
    "presentation": {"presentation", *PURE},
    "frontend": {"frontend", "presentation", *PURE},
    "server": {"contract", "stacklens", "collector", "server", "presentation", *PURE},
    "emulator": {"contract", "stacklens", "collector", "emulator", *PURE},
    "stacklens_cli": set(FIRST_PARTY) | {*PURE},
}


def _layer(path: Path) -> str:
    return path.relative_to(ROOT).parts[0]


def _unit(name: str) -> str:
    """The layer unit of an imported name: a PURE module, or the package."""
    for unit in PURE:
        if name == unit or name.startswith(unit + "."):
            return unit
    return name.split(".")[0]


def _imported_names(path: Path) -> set[str]:
    """Every module (or `module.name`) a file imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _imports(path: Path) -> set[str]:
    """First-party units a file imports (the PURE modules kept apart from `stacklens`)."""
    return {_unit(n) for n in _imported_names(path) if n.split(".")[0] in FIRST_PARTY}


MODULES = sorted(p for layer in ALLOWED for p in (ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_imports_only_its_layer_and_below(path):
    layer = _layer(path)
    assert _imports(path) <= ALLOWED[layer], f"{layer} may import only {sorted(ALLOWED[layer])}"


def test_every_package_is_in_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - {"tests", "bench", "migrations"} == set(FIRST_PARTY)


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_only_the_standard_library_pydantic_and_each_other(module):
    path = ROOT / (module.replace(".", "/") + ".py")
    tops = {n.split(".")[0] for n in _imported_names(path)}
    assert tops <= {"__future__", "typing", "pydantic"} | {"stacklens"}
    assert _imports(path) <= set(PURE)


def test_route_modules_are_imported_only_by_the_app():
    """A domain's routes are the HTTP face the app mounts (server/app.py): no other module,
    the reports included, calls a route or takes a route module's internals; what two
    domains share lives beside the routes (answers, sections, target, query parameters)."""
    app = ROOT / "server" / "app.py"
    for path in MODULES:
        routes = sorted(n for n in _imported_names(path) if n.split(".")[2:3] == ["routes"])
        assert path == app or routes == [], f"{path.relative_to(ROOT)} imports {routes}"
