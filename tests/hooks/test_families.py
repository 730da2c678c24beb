"""Communicator families on real MPI jobs under the hooks (Open MPI and MPICH): how every
communicator was made (wire table comm) and its messages (comm_p2p), exact, from
mpi_pmpi_hooks/tests/families.c (its header comment gives the pattern).

8 ranks, ranks 0-3 on host hA and 4-7 on hB (STACKLENS_HOST, one MPMD context per host).
"""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import query
from tests.hooks import jobs

#: wire comm.made codes (contract/stacklens_wire.def)
WORLD, SPLIT, CART_CREATE, CART_SUB, DUP = 1, 2, 4, 5, 8
HOSTS = ("hA", "hB")


def run_on_hosts(collector, mpi: str, argv: list[str], job: str, per_host: int = 4, **extra):
    """argv on per_host ranks of each host in HOSTS (rank order = host order)."""
    env = jobs.job_env(collector, mpi, job, **extra)
    cmd = ["mpirun"] if mpi == "openmpi" else ["mpirun.mpich", "-genvall"]
    for i, host in enumerate(HOSTS):
        place = ["-x", f"STACKLENS_HOST={host}"]
        if mpi == "mpich":
            place = ["-env", "STACKLENS_HOST", host]
        cmd += ([":"] if i else []) + ["-np", str(per_host), *place, *argv]
    return jobs.finish(jobs.start(cmd, env), 120)


def descriptions(pg_url: str, job: str) -> dict[int, list[tuple]]:
    """world rank -> [(made, size, rank in it, colour, key, kept, grid, name, family id,
    comm id)] of the latest description of each of its communicators."""
    rows = query(
        pg_url,
        "SELECT DISTINCT ON (world_rank, comm_id) world_rank, made, comm_size, comm_rank, color, "
        "key, kept, grid, name, family_id, comm_id, site_module, site_offset FROM comm_made "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s "
        "ORDER BY world_rank, comm_id, t_end_ns DESC",
        (job,),
    )
    out: dict[int, list[tuple]] = {}
    for rank, *rest in rows:
        out.setdefault(rank, []).append(tuple(rest))
    return out


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_every_communicator_is_described_and_its_messages_counted(collector, pg_url, mpi):
    job = f"families-{mpi}-{uuid.uuid4().hex[:8]}"
    result = run_on_hosts(collector, mpi, [jobs.program(mpi, "families")], job)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    described = descriptions(pg_url, job)
    assert sorted(described) == list(range(8))
    families: dict[int, set] = {}
    for rank, comms in described.items():
        made = sorted(c[:8] for c in comms)
        row, col = divmod(rank, 4)  # the 2x4 grid, row-major (no reorder)
        assert made == sorted([
            (WORLD, 8, rank, 0, 0, 0, "", ""),
            (CART_CREATE, 8, rank, 0, 0, 0, "2x4", ""),
            (CART_SUB, 4, col, 0, 0, 0b10, "2x4", ""),  # a row keeps dimension 1
            (CART_SUB, 2, row, 0, 0, 0b01, "2x4", ""),  # a column keeps dimension 0
            (SPLIT, 4, rank % 4, rank // 4, rank, 0, "", ""),  # node: colour rank / 4
            (SPLIT, 2, 1 - rank // 4, rank % 4, -rank, 0, "", ""),  # cross: key -rank
            (DUP, 8, rank, 0, 0, 0, "", "pp"),
        ])  # fmt: skip
        for c in comms:
            families.setdefault(c[8], set()).add(c[9])  # family id -> its communicators
            if c[0] != WORLD:  # the call site: in the program itself, at an offset in it
                assert c[10].endswith("/families") and c[11] > 0
    # one family per creating call: rows (2 communicators), columns (4), node (2), cross (4)
    assert sorted(len(c) for c in families.values()) == [1, 1, 1, 2, 2, 4, 4]

    # the pipeline's messages, per stage: 4 x 1000 bytes to the next, 4 from the previous
    rows = query(
        pg_url,
        "SELECT world_rank, name, peer, sum(msgs), sum(bytes) FROM comm_p2p_deltas "
        "JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
        "WHERE job_key = %s GROUP BY 1, 2, 3",
        (job,),
    )
    expected = {(r, "MPI_Send", r + 1): (4, 4000) for r in range(7)}
    expected |= {(r, "MPI_Recv", r - 1): (4, 4000) for r in range(1, 8)}
    assert {(r, n, p): (m, b) for r, n, p, m, b in rows} == expected
