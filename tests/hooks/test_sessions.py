"""MPI-4 sessions (mpi_pmpi_hooks/tests/sessions.c, MPICH 4): a program that never calls
MPI_Init, with two sessions open at once, is recorded like an MPI_Init one: its run, both
ranks (world ranks from the mpi://WORLD process set), the session calls, the traffic on
both sessions' communicators, and the final frame at the last MPI_Session_finalize; the same
from Fortran (mpi_pmpi_hooks/tests/f_sessions.f90, `use mpi`). Open MPI 4.1 has no sessions:
the library built for it has no session wrappers (and a sessions program of the suite runs
with it unchanged: tests/hooks/test_suite.py)."""

from __future__ import annotations

import socket
import subprocess
import uuid

from stacklens.paths import LIBRARIES
from tests.conftest import mpi_env, query
from tests.hooks import jobs
from tests.hooks.test_families import WORLD, descriptions

SESSION_FUNCTIONS = ("MPI_Session_init", "MPI_Comm_create_from_group", "MPI_Session_finalize")


def test_a_session_program_is_recorded_exactly(collector, pg_url, api_client):
    job = f"sessions-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(
        collector, "mpich", [jobs.program("mpich", "sessions")], job, interval_ms=3600000
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["rank 0 of 2: done", "rank 1 of 2: done"]
    calls = {k: v[0] for k, v in jobs.ops(pg_url, job).items()}
    for rank in (0, 1):
        assert {op: calls.get((rank, op)) for op in (
            "MPI_Session_init", "MPI_Group_from_session_pset", "MPI_Comm_create_from_group",
            "MPI_Session_finalize", "MPI_Comm_free", "MPI_Barrier", "MPI_Allreduce",
        )} == {
            "MPI_Session_init": 2, "MPI_Group_from_session_pset": 2,
            "MPI_Comm_create_from_group": 2, "MPI_Session_finalize": 2, "MPI_Comm_free": 2,
            "MPI_Barrier": 1, "MPI_Allreduce": 5,
        }  # fmt: skip
    assert (calls[(0, "MPI_Send")], calls[(1, "MPI_Recv")]) == (10, 10)
    sent, received = jobs.p2p(pg_url, job)
    assert (sent, received) == ({(0, 1): (1000, 10)}, {(1, 0): (1000, 10)})
    assert query(
        pg_url,
        "SELECT runs.world_size, runs.status FROM runs JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s",
        (job,),
    ) == [(2, "finished")]
    body = api_client.get(api_client.app.url_path_for("job_ranks", job=job)).json()
    assert [(r["rank"], r["status"]) for r in body["ranks"]] == [(0, "finished"), (1, "finished")]


def test_a_fortran_session_program_is_recorded_exactly(collector, pg_url):
    """MPICH's Fortran bindings (mpi_session_init_ ...) reach the C session wrappers or
    the Fortran ones of the hooks: either way each call is counted once."""
    job = f"f-sessions-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(
        collector, "mpich", [jobs.program("mpich", "f_sessions")], job, interval_ms=3600000
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["rank 0 of 2: done", "rank 1 of 2: done"]
    ops = {key: value for key, value in jobs.ops(pg_url, job).items() if value != (0, 0)}
    both = {"MPI_Session_init": (1, 0), "MPI_Session_get_num_psets": (1, 0),
            "MPI_Session_get_nth_pset": (1, 0), "MPI_Group_from_session_pset": (1, 0),
            "MPI_Comm_create_from_group": (1, 0), "MPI_Allreduce": (3, 12),
            "MPI_Comm_free": (1, 0), "MPI_Session_finalize": (1, 0)}  # fmt: skip
    assert ops == {
        **{(rank, op): value for rank in (0, 1) for op, value in both.items()},
        (0, "MPI_Send"): (4, 400),
        (1, "MPI_Recv"): (4, 400),
    }
    assert jobs.p2p(pg_url, job) == ({(0, 1): (400, 4)}, {(1, 0): (400, 4)})
    assert query(
        pg_url,
        "SELECT runs.world_size, runs.status FROM runs JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s",
        (job,),
    ) == [(2, "finished")]


def test_mpi_init_and_a_session_in_one_process_end_at_the_session_finalize(collector, pg_url):
    """mixed_sessions.c: MPI_Finalize with a session still open goes on counting; the
    final frame comes at MPI_Session_finalize, with every call of both."""
    job = f"mixed-sessions-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(
        collector, "mpich", [jobs.program("mpich", "mixed_sessions")], job, interval_ms=3600000
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["rank 0: done", "rank 1: done"]
    ops = {key: value for key, value in jobs.ops(pg_url, job).items() if value != (0, 0)}
    each = {"MPI_Init": (1, 0), "MPI_Barrier": (2, 0), "MPI_Session_init": (1, 0),
            "MPI_Group_from_session_pset": (1, 0), "MPI_Comm_create_from_group": (1, 0),
            "MPI_Allreduce": (4, 16), "MPI_Comm_free": (1, 0), "MPI_Finalize": (1, 0),
            "MPI_Session_finalize": (1, 0)}  # fmt: skip
    assert ops == {(rank, op): value for rank in (0, 1) for op, value in each.items()}
    assert query(
        pg_url,
        "SELECT runs.world_size, runs.status FROM runs JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s",
        (job,),
    ) == [(2, "finished")]


def test_a_session_program_starting_on_mpi_self_is_one_run_of_world_ranks(collector, pg_url):
    """pset_sessions.c on 3 ranks: its first communicator is over mpi://SELF (1 rank each),
    yet every process is recorded under its mpi://WORLD rank and size, all three in one
    run (its id derived from the launch, with no collective the program did not make), the
    calls and the ring's messages exact."""
    job = f"pset-sessions-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, "mpich", [jobs.program("mpich", "pset_sessions")], job,
                          ranks=3, interval_ms=3600000)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    assert sorted(result.stdout.splitlines()) == [f"rank {r} of 3: done" for r in range(3)]
    ops = {key: value for key, value in jobs.ops(pg_url, job).items() if value != (0, 0)}
    each = {"MPI_Session_init": (1, 0), "MPI_Group_from_session_pset": (2, 0),
            "MPI_Comm_create_from_group": (2, 0), "MPI_Allreduce": (3, 12),
            "MPI_Sendrecv": (4, 400), "MPI_Comm_free": (2, 0),
            "MPI_Session_finalize": (1, 0)}  # fmt: skip
    assert ops == {(rank, op): value for rank in range(3) for op, value in each.items()}
    sent, received = jobs.p2p(pg_url, job)
    assert sent == {(r, (r + 1) % 3): (400, 4) for r in range(3)}
    assert received == {(r, (r + 2) % 3): (400, 4) for r in range(3)}
    assert query(
        pg_url,
        "SELECT runs.world_size, runs.status FROM runs JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s",
        (job,),
    ) == [(3, "finished")]
    # the hooks' world communicator (a duplicate of the first, over mpi://SELF) is no world
    described = descriptions(pg_url, job)
    assert [c for comms in described.values() for c in comms if c[0] == WORLD] == []


def test_two_launches_of_one_job_starting_on_mpi_self_are_two_runs(collector, pg_url):
    """pset_sessions.c launched twice (3 ranks, then 2) under one job id, each with its own
    `stacklens run` launch id (the first launch key): two runs, each of its launch's
    world size and ranks, none mixed with the other's."""
    job = f"pset-launches-{uuid.uuid4().hex[:8]}"
    for ranks, launch in ((3, "00000000000000a1"), (2, "00000000000000b2")):
        result = jobs.run_job(collector, "mpich", [jobs.program("mpich", "pset_sessions")],
                              job, ranks=ranks, interval_ms=3600000,
                              STACKLENS_LAUNCH_ID=launch)  # fmt: skip
        assert result.returncode == 0, result.stderr
    rows = query(
        pg_url,
        "SELECT runs.world_size, runs.status, runs.launch_key, count(DISTINCT ranks.world_rank), "
        "min(ranks.world_rank), max(ranks.world_rank) FROM runs JOIN jobs ON jobs.id = runs.job_id "
        "JOIN ranks ON ranks.run_id = runs.id WHERE job_key = %s GROUP BY runs.id "
        "ORDER BY runs.world_size",
        (job,),
    )
    assert rows == [(2, "finished", 0xB2, 2, 0, 1), (3, "finished", 0xA1, 3, 0, 2)]


def test_a_first_communicator_over_a_subgroup_of_world_is_one_run(collector, pg_url):
    """pset_sessions.c incl on 3 ranks: each process's first communicator is over a
    subgroup of mpi://WORLD made with MPI_Group_incl (itself alone: the one subgroup MPICH
    4.0.2 makes a communicator of; see the next test), not a process set: the same output as
    without the hooks, one run of the 3 world ranks, the calls and the ring's messages exact."""
    argv = [jobs.program("mpich", "pset_sessions"), "incl"]
    plain = jobs.finish(jobs.start(jobs.mpirun("mpich", 3, argv), mpi_env()), 60)
    job = f"pset-incl-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, "mpich", argv, job, ranks=3, interval_ms=3600000)
    assert (plain.returncode, result.returncode) == (0, 0), plain.stderr + result.stderr
    assert jobs.library_warnings(result.stderr) == []
    assert sorted(result.stdout.splitlines()) == sorted(plain.stdout.splitlines()) == [
        f"rank {r} of 3: done" for r in range(3)]  # fmt: skip
    ops = {key: value for key, value in jobs.ops(pg_url, job).items() if value != (0, 0)}
    each = {"MPI_Session_init": (1, 0), "MPI_Group_from_session_pset": (1, 0),
            "MPI_Comm_create_from_group": (2, 0), "MPI_Allreduce": (3, 12),
            "MPI_Sendrecv": (4, 400), "MPI_Comm_free": (2, 0),
            "MPI_Session_finalize": (1, 0)}  # fmt: skip
    assert ops == {(rank, op): value for rank in range(3) for op, value in each.items()}
    sent, _ = jobs.p2p(pg_url, job)
    assert sent == {(r, (r + 1) % 3): (400, 4) for r in range(3)}
    assert query(
        pg_url,
        "SELECT runs.world_size, runs.status FROM runs JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s",
        (job,),
    ) == [(3, "finished")]


#: MPICH 4.0.2's words when MPI_Comm_create_from_group is given a group that is neither the
#: world's nor a process's own (src/mpi/comm/comm_impl.c).
NOT_SELF = "Assertion failed in file src/mpi/comm/comm_impl.c at line 792: is_self_group"


def test_mpich_aborts_on_a_first_communicator_over_two_of_three_ranks_hooks_or_not(collector):
    """pset_sessions.c pair: a first communicator over world ranks 0 and 1 is MPICH 4.0.2's
    own abort (docs/design.md, "Sessions not starting on the world"), without the hooks and
    with them alike; stacklens adds nothing to it."""
    argv = [jobs.program("mpich", "pset_sessions"), "pair"]
    plain = jobs.finish(jobs.start(jobs.mpirun("mpich", 3, argv), mpi_env()), 60)
    job = f"pset-pair-{uuid.uuid4().hex[:8]}"
    hooked = jobs.run_job(collector, "mpich", argv, job, ranks=3, interval_ms=3600000)
    assert plain.returncode != 0 and hooked.returncode != 0
    assert NOT_SELF in plain.stderr and NOT_SELF in hooked.stderr, hooked.stderr
    assert "rank" not in plain.stdout + hooked.stdout  # no process got past it


def free_port() -> int:
    """A TCP port no one listens on now (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_plain_mpiexec_launches_on_one_control_port_are_two_runs(collector, pg_url):
    """pset_sessions.c launched twice back to back with plain mpiexec (no `stacklens run`)
    under one job id, Hydra made to listen on the same control port both times
    (MPIEXEC_PORT_RANGE: the port an ephemeral bind may give again once the first mpiexec
    ended, and the launch key the run id was derived from before): the preloaded library
    gives each mpiexec a launch id of its own, which its ranks inherit, so the launches are
    two runs of 3 ranks each with distinct launch keys, both finished, none of the second's
    frames taken for a duplicate of the first's."""
    job = f"pset-mpiexec-{uuid.uuid4().hex[:8]}"
    port = free_port()
    for _ in range(2):
        result = jobs.run_job(collector, "mpich", [jobs.program("mpich", "pset_sessions")],
                              job, ranks=3, interval_ms=3600000,
                              MPIEXEC_PORT_RANGE=f"{port}:{port}")  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert jobs.library_warnings(result.stderr) == []
    rows = query(
        pg_url,
        "SELECT runs.ordinal, runs.world_size, runs.status, runs.launch_key, "
        "count(DISTINCT ranks.world_rank) FROM runs JOIN jobs ON jobs.id = runs.job_id "
        "JOIN ranks ON ranks.run_id = runs.id WHERE job_key = %s GROUP BY runs.id "
        "ORDER BY runs.ordinal",
        (job,),
    )
    assert [(o, size, status, ranks) for o, size, status, _, ranks in rows] == [
        (1, 3, "finished", 3), (2, 3, "finished", 3)]  # fmt: skip
    keys = [key for _, _, _, key, _ in rows]
    assert 0 not in keys and keys[0] != keys[1]
    # each run has all of its ranks' calls: 4 MPI_Sendrecv of 100 bytes per rank and run
    sendrecv = {rank: value for (rank, op), value in jobs.ops(pg_url, job).items()
                if op == "MPI_Sendrecv"}  # fmt: skip
    assert sendrecv == {rank: (2 * 4, 2 * 400) for rank in range(3)}


def test_an_mpi_without_sessions_gets_no_session_wrappers():
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(LIBRARIES["openmpi"])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "MPI_Send" in symbols
    assert [f for f in SESSION_FUNCTIONS if f" {f}\n" in symbols] == []
    mpich = subprocess.run(
        ["nm", "-D", "--defined-only", str(LIBRARIES["mpich"])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert [f for f in SESSION_FUNCTIONS if f" {f}\n" in mpich] == list(SESSION_FUNCTIONS)
