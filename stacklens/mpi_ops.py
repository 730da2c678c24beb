"""MPI operation ids and names: the Python mirror of the generated `sl_ops.h`.

Op id n is the n-th entry of `mpi_pmpi_hooks/spec/mpi_functions.spec`. The spec is read
with the wrapper generator's own parser, so C and Python can never disagree.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache

from stacklens.paths import HOOKS_DIR, MPI_SPEC


def _generator():
    path = HOOKS_DIR / "gen" / "generate.py"
    spec = importlib.util.spec_from_file_location("stacklens_wrapper_generator", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@cache
def op_names() -> tuple[str, ...]:
    """MPI function names indexed by op id."""
    return tuple(entry.name for entry in _generator().parse_spec(MPI_SPEC))


def op_name(op_id: int) -> str:
    """The MPI function name of an op id (raises IndexError for an unknown id)."""
    return op_names()[op_id]
