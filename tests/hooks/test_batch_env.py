"""Attaching the hooks by hand, as a batch script would: eval "$(stacklens env)" and the
launcher options it prints (Open MPI's -x, MPICH's -genvlist)."""

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
    # The launcher gets only the variables the printed options name.
    script = f"""
set -e
out="$({stacklens} env --mpi {mpi})"
eval "$out"
options="$(printf '%s\\n' "$out" | sed -n 's/^# .* launcher options //p')"
{LAUNCHERS[mpi]} $options -np {RANKS} {jobs.example(mpi, "p2p_pattern")}
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
