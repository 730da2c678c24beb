"""Attaching the hooks by hand, as a batch script would (the README's recipe): eval
"$(stacklens env)" and the launcher options it leaves in $stacklens_forward (Open MPI's -x,
MPICH's -genv/-genvlist), which preload the hooks in the ranks only."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.hooks import jobs
from tests.hooks.patterns import p2p_pattern

RANKS = 4
LAUNCHERS = {"openmpi": "mpirun", "mpich": "mpirun.mpich"}


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_batch_script_with_exported_variables(collector, pg_url, mpi):
    job = f"batch-{mpi}-{uuid.uuid4().hex[:8]}"
    stacklens = Path(sys.executable).parent / "stacklens"
    # The launcher gets only the variables $stacklens_forward names.
    script = f"""
set -e
eval "$({stacklens} env --mpi {mpi})"
{LAUNCHERS[mpi]} $stacklens_forward -np {RANKS} {jobs.example(mpi, "p2p_pattern")}
"""
    result = subprocess.run(
        ["bash", "-c", script],
        env=jobs.user_env(collector, job),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    sent, _ = jobs.p2p(pg_url, job)
    assert sent == p2p_pattern(RANKS)
