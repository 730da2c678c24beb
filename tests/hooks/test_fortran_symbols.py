"""Every Fortran entry point that Open MPI and MPICH export for a wrapped function is
exported by the hook library built for that MPI.

The Fortran libraries are the ones a real `use mpi_f08` program of each MPI loads (they
hold the `mpif.h`/`use mpi` routines too): Open MPI's libmpi_mpifh and libmpi_usempif08,
MPICH's libmpifort. A function's Fortran names are the four manglings of `mpif.h`
(mpi_send_, mpi_send__, MPI_SEND, mpi_send) and those of `use mpi_f08` (mpi_send_f08_,
and MPICH's mpi_send_f08ts_ for routines with a choice buffer).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from contract import MPI_SPEC, generate
from tests.hooks import jobs

MPIS = ["openmpi", "mpich"]


def exported(library: Path | str) -> set[str]:
    """The names of the functions and data a shared library defines (dynamic symbols)."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def fortran_libraries(program: str) -> list[str]:
    """The libraries program loads that define Fortran MPI routines."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    paths = [line.split("=>")[1].split()[0] for line in out.splitlines() if "=>" in line]
    return [p for p in paths if {"mpi_finalize_", "mpi_finalize_f08_"} & exported(p)]


def fortran_names(name: str) -> set[str]:
    """Every Fortran symbol name an MPI library may give the function name."""
    lower = name.lower()
    return {lower, f"{lower}_", f"{lower}__", name.upper(), f"{lower}_f08_", f"{lower}_f08ts_"}


@pytest.mark.parametrize("mpi", MPIS)
def test_library_exports_every_fortran_entry_point_of_the_mpi(mpi):
    libraries = fortran_libraries(jobs.program(mpi, "f08_complete"))
    assert libraries, f"no Fortran MPI library found for {mpi}"
    theirs = set().union(*(exported(lib) for lib in libraries))
    ours = exported(jobs.LIBRARIES[mpi])
    entries = generate.parse_spec(MPI_SPEC)
    required = {entry.name: fortran_names(entry.name) & theirs for entry in entries}
    missing = {name: sorted(names - ours) for name, names in required.items() if names - ours}
    assert missing == {}
    # The MPI has Fortran bindings for exactly the entries the generator gives Fortran entry
    # points (no mpi= key, or fortran=yes) and its mpi.h has (the C wrapper is built: MPI-4
    # sessions are not under Open MPI 4.1), five names each: four manglings and one f08
    # (or f08ts) name.
    assert {name for name, names in required.items() if names} == {
        e.name for e in entries if e.fortran and e.name in ours
    }
    assert {len(names) for names in required.values() if names} == {5}
    assert "mpi_waitall_f08_" in required["MPI_Waitall"]
    f08_sendrecv = "mpi_sendrecv_f08ts_" if mpi == "mpich" else "mpi_sendrecv_f08_"
    assert f08_sendrecv in required["MPI_Sendrecv"]
