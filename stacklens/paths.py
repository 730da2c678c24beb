"""Where stacklens finds its own files: the source tree, the hook library, the wire definition."""

from __future__ import annotations

from pathlib import Path

#: Root of the stacklens source tree (the package is installed in editable mode from it).
SOURCE_ROOT = Path(__file__).resolve().parent.parent

#: Directory of the C hook library sources.
HOOKS_DIR = SOURCE_ROOT / "mpi_pmpi_hooks"

#: The X-macro file that defines the wire format and counter tables for C and Python.
WIRE_DEF = HOOKS_DIR / "include" / "stacklens_wire.def"

#: The MPI function spec the wrappers are generated from (op ids are its line order).
MPI_SPEC = HOOKS_DIR / "spec" / "mpi_functions.spec"

#: The hook library built by `make -C mpi_pmpi_hooks` (Open MPI build).
DEFAULT_LIBRARY = HOOKS_DIR / "build" / "libstacklens.so"

#: Alembic configuration.
ALEMBIC_INI = SOURCE_ROOT / "alembic.ini"
MIGRATIONS_DIR = SOURCE_ROOT / "migrations"

#: Example MPI workloads.
EXAMPLES_DIR = SOURCE_ROOT / "examples"
