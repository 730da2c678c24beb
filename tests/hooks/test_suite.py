"""The wrapper-family suite (issue #32 point 4): every program of examples/suite drives one
family of wrapped MPI calls and prints, per rank, the calls and payload bytes it made of
each op (counted by the program itself, examples/suite/suite.h) and the checks of its
results. Each runs without and with the hooks under Open MPI and MPICH: the exit codes and
the outputs are equal, every check passes (a program of MPI-4 sessions where the MPI has
none says so: then nothing is stored), and what the collector stored per rank and op
(calls and bytes) is exactly what the program printed, no op more or less. Real MPI, a real
collector and database.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import mpi_env, query
from tests.hooks import jobs
from tests.hooks.test_families import descriptions
from tests.hooks.test_monitored import monitoring_dump, stored_bytes

#: The families and the ranks each runs on (the node has 2 cores).
FAMILIES = {
    "p2p": 2,
    "coll": 2,
    "neighbor": 3,
    "neighbor_graph": 3,
    "rma_fence": 2,
    "rma_pscw": 2,
    "rma_lock": 2,
    "rma_atomic": 2,
    "mpiio": 2,
    "threads": 2,
    "sessions": 2,
}

#: Programs that count nothing under one MPI: sessions.c where mpi.h has no sessions (Open
#: MPI 4.1; it says so and ends): there the hooks have no session wrappers, and the
#: program runs as without them, and nothing is stored.
COUNT_NOTHING = {("sessions", "openmpi")}

#: The MPI's own settings a family needs under one MPI, with the hooks or not: Open MPI
#: 4.1.4 here dies of SIGSEGV in MPI_Compare_and_swap (osc/rdma's emulated atomics over
#: vader, mca_btl_vader_emu_acswap) while vader copies through CMA, without stacklens too.
RUNTIME_ENV = {("rma_atomic", "openmpi"): {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}}

#: The hooks' warning when this job's own Open MPI monitoring (coll/monitoring with it)
#: is on as a graph communicator is made.
GRAPH_WARNING = (
    "stacklens: this job switched on Open MPI's monitoring (pml_monitoring_enable) and with "
    "it coll/monitoring, which crashes (SIGFPE or SIGSEGV) in neighbourhood collectives on "
    "this graph communicator, a fault of Open MPI 4.1 with or without stacklens; "
    "OMPI_MCA_coll=^monitoring keeps it out"
)


#: The source of the graph family and its three creating calls (comm.made 11, "graph").
GRAPH_SOURCE = Path(__file__).resolve().parents[2] / "examples" / "suite" / "neighbor_graph.c"
GRAPH_CALLS = ("MPI_Dist_graph_create_adjacent", "MPI_Graph_create", "MPI_Dist_graph_create")
GRAPH = 11


def suite_program(mpi: str, family: str) -> str:
    """Path of a built suite program."""
    path = jobs.EXAMPLES[mpi] / "suite" / family
    assert path.is_file(), f"{path} is not built: run `make examples` (make test does)"
    return str(path)


def printed_counts(stdout: str) -> dict[tuple[int, str], tuple[int, int]]:
    """(rank, op) -> (calls, bytes) of the `rank R op NAME CALLS BYTES` lines."""
    counts = {}
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 6 and words[0] == "rank" and words[2] == "op":
            counts[(int(words[1]), words[3])] = (int(words[4]), int(words[5]))
    return counts


@pytest.mark.parametrize(
    ("family", "mpi"),
    [(family, mpi) for family in sorted(FAMILIES) for mpi in ("openmpi", "mpich")],
)
def test_family_counts_are_the_programs_own(collector, pg_url, tmp_path, mpi, family):
    ranks = FAMILIES[family]
    argv = [suite_program(mpi, family), str(tmp_path)]
    runtime = RUNTIME_ENV.get((family, mpi), {})
    plain = jobs.finish(jobs.start(jobs.mpirun(mpi, ranks, argv), mpi_env(**runtime)), 90)
    job = f"suite-{family}-{mpi}-{uuid.uuid4().hex[:6]}"
    hooked = jobs.run_job(collector, mpi, argv, job, ranks=ranks, **runtime)
    assert (plain.returncode, hooked.returncode) == (0, 0), plain.stderr + hooked.stderr
    assert sorted(hooked.stdout.splitlines()) == sorted(plain.stdout.splitlines())
    assert " FAILED" not in hooked.stdout
    printed = printed_counts(hooked.stdout)
    counting = (family, mpi) not in COUNT_NOTHING
    assert {rank for rank, _ in printed} == (set(range(ranks)) if counting else set())
    stored = {key: value for key, value in jobs.ops(pg_url, job).items() if value != (0, 0)}
    assert stored == printed


def test_graph_neighbourhood_collectives_are_monitored_exactly_and_never_crash(
    collector, pg_url, tmp_path
):
    """Under Open MPI the hooks switch its monitoring on and keep coll/monitoring out of it
    (it reads a graph communicator's topology as a Cartesian one in its neighbourhood
    collectives: SIGFPE or SIGSEGV in mca_topo_base_cart_shift). The graph program, run 3
    times with the hooks' defaults: exit 0 and the plain run's output every time, every
    frame monitored, and the monitored bytes and messages per (rank, peer) exactly what
    pml/monitoring dumps in a run where the job asks for its dump and leaves coll/monitoring
    out itself (which the hooks make safe: pml/monitoring then looks every freed
    communicator up in coll/monitoring's table, which does not exist)."""
    ranks = FAMILIES["neighbor_graph"]
    argv = [suite_program("openmpi", "neighbor_graph"), str(tmp_path)]
    plain = jobs.finish(jobs.start(jobs.mpirun("openmpi", ranks, argv), mpi_env()), 90)
    assert plain.returncode == 0, plain.stderr
    prefix = tmp_path / "prof"
    dumped = f"suite-graph-dump-{uuid.uuid4().hex[:6]}"
    result = jobs.run_job(
        collector, "openmpi", argv, dumped, ranks, OMPI_MCA_pml_monitoring_enable="1",
        OMPI_MCA_pml_monitoring_enable_output="3", OMPI_MCA_pml_monitoring_filename=str(prefix),
        OMPI_MCA_coll="^monitoring",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = monitoring_dump(prefix, ranks)
    # every rank sent the neighbourhood collectives' messages to the next rank at least
    for r in range(ranks):
        assert expected[(r, (r + 1) % ranks)][0] >= 16 + 8 + 12 + 8 + 4 + 20 + 12
    assert stored_bytes(pg_url, dumped) == expected
    for attempt in range(3):
        job = f"suite-graph-monitored-{attempt}-{uuid.uuid4().hex[:6]}"
        hooked = jobs.run_job(collector, "openmpi", argv, job, ranks)
        assert hooked.returncode == 0, hooked.stderr
        assert sorted(hooked.stdout.splitlines()) == sorted(plain.stdout.splitlines())
        assert jobs.library_warnings(hooked.stderr) == []
        assert stored_bytes(pg_url, job) == expected
        [(frames, monitored_rows)] = query(
            pg_url,
            "SELECT (SELECT count(*) FROM received_frames f JOIN jobs ON jobs.id = f.job_id "
            "WHERE job_key = %s), (SELECT count(*) FROM monitored_frames w JOIN jobs ON "
            "jobs.id = w.job_id WHERE job_key = %s)",
            (job, job),
        )
        assert monitored_rows == frames >= ranks


def test_the_jobs_own_coll_monitoring_on_a_graph_communicator_is_warned_about(collector, tmp_path):
    """A job that switches Open MPI's monitoring on itself gets coll/monitoring as it asked
    (the crash is then Open MPI's, with or without stacklens): making a graph communicator
    prints the hooks' warning once, from its rank 0, naming the way out (its exit is not the
    point here: the component may kill it right after)."""
    argv = [suite_program("openmpi", "neighbor_graph"), str(tmp_path)]
    job = f"suite-graph-warning-{uuid.uuid4().hex[:6]}"
    hooked = jobs.run_job(collector, "openmpi", argv, job, ranks=FAMILIES["neighbor_graph"],
                          OMPI_MCA_pml_monitoring_enable="1")  # fmt: skip
    assert hooked.stderr.count(GRAPH_WARNING) == 1, hooked.stderr


def call_line(source: Path, call: str) -> int:
    """The line of source where the one call of `call` is written."""
    lines = [i + 1 for i, text in enumerate(source.read_text().splitlines()) if f"{call}(" in text]
    assert len(lines) == 1, (call, lines)
    return lines[0]


def site_line(program: str, offset: int) -> int:
    """The source line of the call before return address `offset` of `program` (addr2line:
    an oracle here)."""
    out = subprocess.run(["addr2line", "-e", program, hex(offset - 1)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return int(out.strip().rsplit(":", 1)[1].split()[0])


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_each_graph_making_call_is_a_family_with_its_call_site(collector, pg_url, api_client,
                                                               mpi):  # fmt: skip
    """neighbor_graph.c makes one communicator by each of MPI_Dist_graph_create_adjacent,
    MPI_Graph_create and MPI_Dist_graph_create: every rank describes each as made "graph",
    3 ranks, at the call in the program (its return address, read back with addr2line), one
    family per call the same on every rank; the families API gives each its neighbourhood
    collectives exactly, and labels each "graph at" its line."""
    program = suite_program(mpi, "neighbor_graph")
    ranks = FAMILIES["neighbor_graph"]
    job = f"suite-graph-families-{mpi}-{uuid.uuid4().hex[:6]}"
    result = jobs.run_job(collector, mpi, [program], job, ranks=ranks)
    assert result.returncode == 0, result.stderr
    lines = {call_line(GRAPH_SOURCE, call): call for call in GRAPH_CALLS}
    families: dict[str, set[int]] = {}
    described = descriptions(pg_url, job)
    assert sorted(described) == list(range(ranks))
    for rank, comms in described.items():
        graphs = [c for c in comms if c[0] == GRAPH]
        assert sorted((c[1], c[2]) for c in graphs) == [(ranks, rank)] * 3
        for c in graphs:  # (made, size, rank, ..., family id, comm id, module, offset)
            assert c[10].endswith("/neighbor_graph"), c
            families.setdefault(lines[site_line(program, c[11])], set()).add(c[8])
    assert sorted(families) == sorted(GRAPH_CALLS)
    assert all(len(ids) == 1 for ids in families.values()), families  # one family per call
    assert len({fid for ids in families.values() for fid in ids}) == 3

    answer = api_client.get(api_client.app.url_path_for("job_families", job=job)).json()
    graphs = {
        frozenset((o["op"], o["calls"], o["bytes"]) for o in f["ops"]): (
            f["label"], sorted(g["members"] for g in f["groups"]))
        for f in answer["families"] if f["made"] == "graph"
    }  # fmt: skip
    at = {c: f"graph at neighbor_graph.c:{call_line(GRAPH_SOURCE, c)}" for c in GRAPH_CALLS}
    whole = [[0, 1, 2]]
    assert graphs == {
        # adjacent: one out-neighbour; 4, 2 and 3 ints per call and rank
        frozenset({("MPI_Neighbor_alltoall", 3, 48), ("MPI_Neighbor_allgather", 3, 24),
                   ("MPI_Ineighbor_alltoall", 3, 36)}):
            (at["MPI_Dist_graph_create_adjacent"], whole),
        # graph: an undirected ring, two neighbours; 2 and 1 ints to each
        frozenset({("MPI_Neighbor_allgather", 3, 48), ("MPI_Ineighbor_allgather", 3, 24)}):
            (at["MPI_Graph_create"], whole),
        # dist: one edge per rank, to the next; 5 and 3 ints
        frozenset({("MPI_Neighbor_alltoall", 3, 60), ("MPI_Neighbor_allgatherv", 3, 36)}):
            (at["MPI_Dist_graph_create"], whole),
    }  # fmt: skip
