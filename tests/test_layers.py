"""The package layers: what each may import (docs/architecture.md).

Bottom to top: `contract` (data + the generator, standard library only); the base of
`stacklens` (settings, paths, db, schema, wire, mpi_ops); `collector` and `server`
beside each other (the server hosts a collector and the frontend in one process);
`frontend` (talks to the server over HTTP only); `emulator` (a test and demo tool over the
sampler's MAD access); and `stacklens.cli` at the top. A module may import its own layer
and the layers below it, never one above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = ("stacklens", "contract", "collector", "server", "frontend", "emulator")

#: For each layer (a package, or stacklens' base), the first-party packages it may import.
ALLOWED = {
    "contract": {"contract"},
    "stacklens": {"contract", "stacklens"},
    "collector": {"contract", "stacklens", "collector"},
    "frontend": {"frontend"},
    "server": {"contract", "stacklens", "collector", "server", "frontend"},
    "emulator": {"contract", "stacklens", "collector", "emulator"},
    "stacklens.cli": set(FIRST_PARTY) | {"stacklens.cli"},
}


def _layer(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return "stacklens.cli" if parts[:2] == ("stacklens", "cli") else parts[0]


def _imports(path: Path) -> set[str]:
    """First-party modules a file imports (`stacklens.cli` kept apart from `stacklens`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top in FIRST_PARTY:
                found.add("stacklens.cli" if name.startswith("stacklens.cli") else top)
    return found


MODULES = sorted(p for layer in ALLOWED for p in (ROOT / layer.replace(".", "/")).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_imports_only_its_layer_and_below(path):
    layer = _layer(path)
    assert _imports(path) <= ALLOWED[layer], f"{layer} may import only {sorted(ALLOWED[layer])}"


def test_every_package_is_in_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - {"tests", "bench", "migrations"} == set(FIRST_PARTY)
