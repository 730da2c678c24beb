"""Attaching the hooks by hand, as a batch script would: eval "$(stacklens env)" + mpirun -x."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from tests.conftest import mpi_env, query
from tests.hooks.patterns import p2p_pattern

RANKS = 4


def test_batch_script_with_exported_variables(collector, pg_url, hook_library, examples_built):
    job = f"batch-{uuid.uuid4().hex[:8]}"
    stacklens = Path(sys.executable).parent / "stacklens"
    script = f"""
set -e
eval "$({stacklens} env)"
mpirun -x LD_PRELOAD -x STACKLENS_COLLECTOR -x STACKLENS_INTERVAL_MS \\
       -x STACKLENS_INGEST_TOKEN -x STACKLENS_JOB_ID -np {RANKS} {examples_built / "p2p_pattern"}
"""
    env = mpi_env(
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INTERVAL_MS="100",
        STACKLENS_JOB_ID=job,
    )
    env.pop("LD_PRELOAD", None)
    result = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    sent = query(
        pg_url,
        "SELECT world_rank, peer, sum(bytes_sent), sum(msgs_sent) FROM p2p_deltas "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s GROUP BY 1, 2 "
        "HAVING sum(msgs_sent) > 0",
        (job,),
    )
    assert {(s, d): (b, m) for s, d, b, m in sent} == p2p_pattern(RANKS)
