"""Where stacklens finds its own files: the source tree, the hook library, migrations, examples.

The wire definition and the MPI spec are in the `contract` package (contract/__init__.py).
"""

from __future__ import annotations

from pathlib import Path

#: Root of the stacklens source tree (the package is installed in editable mode from it).
SOURCE_ROOT = Path(__file__).resolve().parent.parent

#: Directory of the C hook library sources.
HOOKS_DIR = SOURCE_ROOT / "mpi_pmpi_hooks"

#: The hook library built for each MPI (`make -C mpi_pmpi_hooks variants` builds both).
LIBRARIES = {
    "openmpi": HOOKS_DIR / "build" / "libstacklens.so",
    "mpich": HOOKS_DIR / "build-mpich" / "libstacklens.so",
}

#: Alembic configuration.
ALEMBIC_INI = SOURCE_ROOT / "alembic.ini"
MIGRATIONS_DIR = SOURCE_ROOT / "migrations"

#: Example MPI workloads.
EXAMPLES_DIR = SOURCE_ROOT / "examples"
