"""Which MPI a command runs under, Open MPI or MPICH, so that `stacklens run` and
`stacklens env` attach the hook library built for it.

The two have different ABIs, so a library is built for each (stacklens.paths.LIBRARIES).
What decides, in order: the launcher (`mpirun`, `mpiexec`, `mpirun.openmpi`,
`mpirun.mpich`, `mpiexec.hydra`, ... by the executable it resolves to, else by its
`--version`); else the program (the first argument that is an executable linked with an
MPI library: what `srun ./app` or a plain `./app` runs); else MPI4PY_MPIABI (mpi4py
loads the MPI it names); else the `mpirun` (or `mpiexec`) on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

OPENMPI = "openmpi"
MPICH = "mpich"
MPIS = (OPENMPI, MPICH)

#: Executables (symbolic links resolved) that launch Open MPI or MPICH jobs.
LAUNCHERS = {
    "orterun": OPENMPI,
    "prterun": OPENMPI,
    "prte": OPENMPI,
    "mpirun.openmpi": OPENMPI,
    "mpiexec.openmpi": OPENMPI,
    "mpiexec.hydra": MPICH,
    "mpirun.mpich": MPICH,
    "mpiexec.mpich": MPICH,
}
#: What each launcher's `--version` says.
VERSION_MARKS = {"Open MPI": OPENMPI, "OpenRTE": OPENMPI, "HYDRA": MPICH, "MPICH": MPICH}
#: Shared library names (sonames) of each MPI's C library.
LIBRARY_MARKS = {
    "libmpi.so.40": OPENMPI,
    "libopen-rte.so": OPENMPI,
    "libmpich.so": MPICH,
    "libmpi.so.12": MPICH,
}
#: MPI4PY_MPIABI values (compared without " -_", case-insensitive) -> MPI.
MPI4PY_ABIS = {"openmpi": OPENMPI, "mpich": MPICH, "impi": MPICH}


def _which(name: str, env: Mapping[str, str]) -> Path | None:
    """The executable `name` runs, as a shell would find it on env's PATH."""
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    return Path(found) if found else None


def launcher_mpi(executable: Path) -> str | None:
    """The MPI an `mpirun`-like launcher starts, or None if it is not one."""
    real = executable.resolve()
    if real.name in LAUNCHERS:
        return LAUNCHERS[real.name]
    if not executable.name.startswith(("mpirun", "mpiexec")):
        return None
    try:
        out = subprocess.run(
            [str(executable), "--version"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stdout + out.stderr
    return next((mpi for mark, mpi in VERSION_MARKS.items() if mark in text), None)


def program_mpi(executable: Path) -> str | None:
    """The MPI whose library an ELF executable is linked with (ldd), or None."""
    try:
        with executable.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
        out = subprocess.run(["ldd", str(executable)], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        for mark, mpi in LIBRARY_MARKS.items():
            if name.startswith(mark):
                return mpi
    return None


def mpi4py_mpi(env: Mapping[str, str]) -> str | None:
    """The MPI that MPI4PY_MPIABI selects, or None."""
    abi = env.get("MPI4PY_MPIABI", "").lower().translate({ord(c): None for c in " -_"})
    return MPI4PY_ABIS.get(abi)


def path_mpi(env: Mapping[str, str]) -> str | None:
    """The MPI of the `mpirun` (else `mpiexec`) on env's PATH, or None."""
    for name in ("mpirun", "mpiexec"):
        found = _which(name, env)
        if found is not None:
            return launcher_mpi(found)
    return None


def command_mpi(command: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The MPI that command runs under (see the module's docstring), or None."""
    first = _which(command[0], env) if command else None
    mpi = launcher_mpi(first) if first is not None else None
    if mpi is not None:
        return mpi
    for arg in command:
        found = _which(arg, env) if not arg.startswith("-") else None
        mpi = program_mpi(found) if found is not None else None
        if mpi is not None:
            return mpi
    return mpi4py_mpi(env) or path_mpi(env)
