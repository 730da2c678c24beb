"""Building this folder's test programs: MPI programs with known lines (each with the MPI's
compiler wrapper, for its hook library) and the slow file system (slowfs.c, a plain
shared library)."""

from __future__ import annotations

import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPILERS = {"openmpi": "mpicc", "mpich": "mpicc.mpich"}


def line_of(source: str, marker: str) -> int:
    """The line of `source` (in this folder) holding `/* site:<marker> */`."""
    lines = (HERE / source).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if f"/* site:{marker} */" in text)


def build(source: str, mpi: str, out: Path) -> Path:
    """`source` (in this folder) built for `mpi` into `out`, with line tables."""
    program = out / f"{Path(source).stem}.{mpi}"
    subprocess.run([COMPILERS[mpi], "-g", "-O2", "-fno-optimize-sibling-calls", "-Wall",
                    "-Werror", "-o", program, HERE / source], check=True)  # fmt: skip
    return program


def slowfs(out: Path) -> Path:
    """The slow file system's preload library (slowfs.c) built into `out`."""
    library = out / "libslowfs.so"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-fPIC", "-shared", "-o", library,
                    HERE / "slowfs.c", "-ldl"], check=True)  # fmt: skip
    return library
