"""Communicator families on real MPI jobs under the hooks (Open MPI and MPICH): how every
communicator was made (wire table comm) and its messages (comm_p2p), exact, from
mpi_pmpi_hooks/tests/families.c (its header comment gives the pattern).

8 ranks, ranks 0-3 on host hA and 4-7 on hB (STACKLENS_HOST, one MPMD context per host).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from tests.conftest import query
from tests.hooks import jobs

#: wire comm.made codes (contract/stacklens_wire.def)
WORLD, SPLIT, SPLIT_TYPE, CART_CREATE, CART_SUB, CREATE, CREATE_GROUP, DUP = 1, 2, 3, 4, 5, 6, 7, 8
INTERCOMM_CREATE, INTERCOMM_MERGE = 9, 10
HOSTS = ("hA", "hB")
#: The program's source: its call sites are labelled by its lines.
SOURCE = Path(__file__).resolve().parents[2] / "mpi_pmpi_hooks" / "tests" / "families.c"


def line_of(text: str) -> int:
    """The line of families.c that holds `text` (once)."""
    lines = [i + 1 for i, line in enumerate(SOURCE.read_text().splitlines()) if text in line]
    assert len(lines) == 1, (text, lines)
    return lines[0]


def run_on_hosts(collector, mpi: str, argv: list[str], job: str, per_host: int = 4,
                 hosts: tuple[str, ...] = HOSTS, **extra):  # fmt: skip
    """argv on per_host ranks of each of `hosts` (rank order = host order)."""
    env = jobs.job_env(collector, mpi, job, **extra)
    cmd = ["mpirun"] if mpi == "openmpi" else ["mpirun.mpich", "-genvall"]
    for i, host in enumerate(hosts):
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
        "SELECT world_rank, name, peer, received, sum(msgs), sum(bytes) FROM comm_p2p_deltas "
        "JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
        "WHERE job_key = %s GROUP BY 1, 2, 3, 4",
        (job,),
    )
    expected = {(r, "MPI_Send", r + 1, 0): (4, 4000) for r in range(7)}
    expected |= {(r, "MPI_Recv", r - 1, 1): (4, 4000) for r in range(1, 8)}
    assert {(r, n, p, d): (m, b) for r, n, p, d, m, b in rows} == expected


def _by_family(answer: dict) -> dict[str, dict]:
    """label -> ops as {op: (calls, bytes)}, reach as {(reach, provenance): bytes}, groups
    (sorted) and unmodelled bytes, of every family."""
    return {
        f["label"]: {
            "ops": {o["op"]: (o["calls"], o["bytes"]) for o in f["ops"]},
            "reach": {(r["reach"], r["provenance"]): r["bytes"] for r in f["reach"]},
            "groups": sorted(g["members"] for g in f["groups"]),
            "unmodelled": f["unmodelled_bytes"],
        }
        for f in answer["families"]
    }


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_traffic_and_reach_per_family(collector, api_client, mpi):
    """Per family: its label (the name; else how it was made, the splits at their lines of
    families.c), calls and bytes by op exact, members in world ranks, and its bytes in a
    host or between hosts (no fabric here: "unplaced") from the placement; collectives by
    the model (rows: ring allreduce of 8 KiB; the rest recursive doubling or a binomial
    broadcast), point-to-point routed."""
    job = f"families-api-{mpi}-{uuid.uuid4().hex[:8]}"
    result = run_on_hosts(collector, mpi, [jobs.program(mpi, "families")], job)
    assert result.returncode == 0, result.stderr
    url = api_client.app.url_path_for("job_families", job=job)
    answer = api_client.get(url).json()
    families = _by_family(answer)
    host, off = ("host", "modelled"), ("unplaced", "modelled")
    node = f"split at families.c:{line_of('rank / 4, rank, &node')}, 2 groups of 4"
    cross = f"split at families.c:{line_of('rank % 4, -rank, &cross')}, 4 groups of 2"
    assert families == {
        "cart 2×4 dim 1 kept": {
            "ops": {"MPI_Allreduce": (80, 80 * 8192)},
            # ring: 2 (n - 1) / n of 8 KiB to the next rank, per call and rank, in a host
            "reach": {host: 8 * 10 * 2 * 3 * 8192 // 4},
            "groups": [[0, 1, 2, 3], [4, 5, 6, 7]],
            "unmodelled": 0,
        },
        "cart 2×4 dim 0 kept": {
            "ops": {"MPI_Allreduce": (40, 40 * 512)},
            "reach": {off: 8 * 5 * 512},
            "groups": [[0, 4], [1, 5], [2, 6], [3, 7]],
            "unmodelled": 0,
        },
        "cart 2×4": {"ops": {}, "reach": {}, "groups": [list(range(8))], "unmodelled": 0},
        "pp": {
            "ops": {"MPI_Send": (28, 28_000), "MPI_Recv": (28, 28_000)},
            "reach": {("host", "routed"): 24_000, ("unplaced", "routed"): 4_000},
            "groups": [list(range(8))],
            "unmodelled": 0,
        },
        "world": {
            "ops": {"MPI_Allreduce": (8, 64)},
            "reach": {host: 8 * 2 * 8, off: 8 * 8},  # partners r^1, r^2 here, r^4 there
            "groups": [list(range(8))],
            "unmodelled": 0,
        },
        # node: recursive doubling on 4 ranks of one host, 64 bytes to 2 partners
        node: {"ops": {"MPI_Allreduce": (24, 24 * 64)}, "reach": {host: 8 * 3 * 2 * 64},
               "groups": [[0, 1, 2, 3], [4, 5, 6, 7]], "unmodelled": 0},
        # cross: a binomial broadcast on 2 ranks: the root (world rank 4..7, key -rank)
        # sends 256 bytes
        cross: {"ops": {"MPI_Bcast": (16, 16 * 256)}, "reach": {off: 4 * 2 * 256},
                "groups": [[4, 0], [5, 1], [6, 2], [7, 3]], "unmodelled": 0},
    }  # fmt: skip
    sites = {f["label"]: f["site"] for f in answer["families"] if f["made"] == "split"}
    assert sites[node].startswith("families+0x") and sites[cross] != sites[node]
    assert answer["page"]["total"] == len(answer["families"]) == 7
    csv = api_client.get(url, params={"format": "csv"})
    assert csv.status_code == 200 and csv.text.startswith("family,label,made,")


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_a_split_type_is_named_by_its_type(collector, pg_url, api_client, tmp_path, mpi):
    """split_type.c (its header comment gives the pattern): every rank describes its
    node-local communicator as made split_type with the type's wire code 1 (shared; the MPI
    libraries number the types differently) and key its rank; the API labels the family by
    its type and line, with its collectives exact. The line is the stored answer of the
    creating call's frame (as the call-site table's): the program, run from a copy, is gone
    when the API is asked, and no request reads a module file."""
    job = f"families-split-type-{mpi}-{uuid.uuid4().hex[:8]}"
    program = tmp_path / "split_type"
    shutil.copy2(jobs.program(mpi, "split_type"), program)
    result = jobs.run_job(collector, mpi, [str(program)], job, ranks=4)
    program.unlink()  # the collector's resolver answered before run_job returned
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    described = descriptions(pg_url, job)
    assert {rank: sorted(c[:8] for c in comms) for rank, comms in described.items()} == {
        rank: [(WORLD, 4, rank, 0, 0, 0, "", ""), (SPLIT_TYPE, 4, rank, 1, rank, 0, "", "")]
        for rank in range(4)
    }
    answer = api_client.get(api_client.app.url_path_for("job_families", job=job)).json()
    source = SOURCE.with_name("split_type.c")
    (line,) = [i + 1 for i, text in enumerate(source.read_text().splitlines())
               if "MPI_Comm_split_type(" in text]  # fmt: skip
    node = [f for f in answer["families"] if f["made"] == "split_type"]
    assert [(f["label"], [g["members"] for g in f["groups"]],
             [(o["op"], o["calls"], o["bytes"]) for o in f["ops"]]) for f in node] == [
        (f"split_type shared at split_type.c:{line}, 1 group of 4", [[0, 1, 2, 3]],
         [("MPI_Allreduce", 12, 12 * 128)]),
    ]  # fmt: skip


def test_a_communicator_made_from_a_group_is_a_family(collector, api_client):
    """MPI_Comm_create_from_group (MPI 4: MPICH here; Open MPI 4.1 has none):
    mixed_sessions.c's communicator over mpi://WORLD, made after MPI_Init, is a family of
    its own, made from_group at its call, its 4 allreduces of one int per rank exact."""
    job = f"families-from-group-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, "mpich", [jobs.program("mpich", "mixed_sessions")], job)
    assert result.returncode == 0, result.stderr
    got = api_client.get(api_client.app.url_path_for("job_families", job=job))
    assert got.status_code == 200, got.text
    (fam,) = [f for f in got.json()["families"] if f["made"] == "from_group"]
    source = SOURCE.with_name("mixed_sessions.c").read_text().splitlines()
    (call,) = [i + 1 for i, line in enumerate(source) if "MPI_Comm_create_from_group(" in line]
    # the call spans two lines: the return address's line is either, as the compiler chose
    lines = {f"from_group at mixed_sessions.c:{n}, 1 group of 2" for n in (call, call + 1)}
    assert fam["label"] in lines, fam["label"]
    assert [sorted(g["members"]) for g in fam["groups"]] == [[0, 1]]
    assert [(o["op"], o["calls"], o["bytes"]) for o in fam["ops"]] == [("MPI_Allreduce", 8, 32)]


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_groups_and_inter_communicators_are_families(collector, pg_url, api_client, mpi):
    """families_inter.c (its header comment gives the pattern), ranks 0, 1 on hA and 2, 3
    on hB: a communicator made by MPI_Comm_create_group (the evens), one by MPI_Comm_create
    (the odds; the evens get none), an inter-communicator between them and its merge, each
    described as made (an inter-communicator's size the remote group's, its rank the local
    one), each a family of its own at its line with its members in world ranks (the
    inter-communicator's: both groups) and its traffic exact."""
    job = f"families-inter-{mpi}-{uuid.uuid4().hex[:8]}"
    program = [jobs.program(mpi, "families_inter")]
    result = run_on_hosts(collector, mpi, program, job, per_host=2)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    described = descriptions(pg_url, job)
    merged = {0: 0, 2: 1, 1: 2, 3: 3}  # the evens low, the odds high
    assert {rank: sorted(c[:8] for c in comms) for rank, comms in described.items()} == {
        rank: sorted([
            (WORLD, 4, rank, 0, 0, 0, "", ""),
            (CREATE_GROUP if rank % 2 == 0 else CREATE, 2, rank // 2, 0, 0, 0, "", ""),
            (INTERCOMM_CREATE, 2, rank // 2, 0, 0, 0, "", ""),
            (INTERCOMM_MERGE, 4, merged[rank], 0, 0, 0, "", ""),
        ])
        for rank in range(4)
    }  # fmt: skip
    # both sides agree on the inter-communicator's id, its family and its merge's family
    for made in (INTERCOMM_CREATE, INTERCOMM_MERGE):
        assert len({c[8:10] for comms in described.values() for c in comms if c[0] == made}) == 1

    answer = api_client.get(api_client.app.url_path_for("job_families", job=job)).json()
    source = SOURCE.with_name("families_inter.c").read_text().splitlines()

    def at(call: str) -> int:
        (line,) = [i + 1 for i, text in enumerate(source) if f"{call}(" in text]
        return line

    host, off = ("host", "modelled"), ("unplaced", "modelled")
    got = {f["label"]: ([g["members"] for g in f["groups"]],
                        {o["op"]: (o["calls"], o["bytes"]) for o in f["ops"]},
                        {(r["reach"], r["provenance"]): r["bytes"] for r in f["reach"]},
                        f["unmodelled_bytes"])
           for f in answer["families"]}  # fmt: skip
    assert got == {
        # 2 ranks on two hosts: each sends its 64 B to the other, 3 times
        f"create_group at families_inter.c:{at('MPI_Comm_create_group')}, 1 group of 2":
            ([[0, 2]], {"MPI_Allreduce": (6, 6 * 64)}, {off: 2 * 3 * 64}, 0),
        # world rank 1 broadcasts 128 B to world rank 3, twice
        f"create at families_inter.c:{at('MPI_Comm_create')}, 1 group of 2":
            ([[1, 3]], {"MPI_Bcast": (4, 4 * 128)}, {off: 2 * 128}, 0),
        # 0 <-> 1 and 2 <-> 3 (a host each): 2 x 500 B each way
        f"intercomm_create at families_inter.c:{at('MPI_Intercomm_create')}, 1 group of 4":
            ([[0, 1, 2, 3]], {"MPI_Sendrecv": (8, 8 * 500)}, {("host", "routed"): 8 * 500}, 0),
        # recursive doubling over ranks 0, 2, 1, 3 of the merge: 8 B to partners i^1
        # (across the hosts) and i^2 (in a host)
        f"intercomm_merge at families_inter.c:{at('MPI_Intercomm_merge')}, 1 group of 4":
            ([[0, 2, 1, 3]], {"MPI_Allreduce": (4, 32)}, {host: 32, off: 32}, 0),
        "world": ([[0, 1, 2, 3]], {}, {}, 0),
    }  # fmt: skip


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_communicators_beyond_the_bound_fold_exactly(collector, pg_url, api_client, mpi):
    """many_comms.c (20 duplicates of the world, one 8-byte allreduce on each) with
    STACKLENS_MAX_KEYS=16: each rank caches and describes the world and the first 15
    duplicates; the last 5 are not described, their allreduces fold into the overflow key
    and the API gives them as the family "not described" (20 calls, 160 bytes: nothing
    lost); every fold counts in keys_dropped, 3 per such duplicate and rank (its
    description and its allreduce's look-up find the handle cache full; the allreduce
    folds)."""
    job = f"families-bound-{mpi}-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, mpi, [jobs.program(mpi, "many_comms")], job, ranks=4,
                          STACKLENS_MAX_KEYS="16")  # fmt: skip
    assert result.returncode == 0, result.stderr
    described = descriptions(pg_url, job)
    assert {rank: sorted(c[0] for c in comms) for rank, comms in described.items()} == {
        rank: [WORLD] + [DUP] * 15 for rank in range(4)
    }
    dropped = query(pg_url, "SELECT world_rank, keys_dropped FROM ranks JOIN jobs ON jobs.id "
                    "= job_id WHERE job_key = %s ORDER BY 1", (job,))  # fmt: skip
    assert dropped == [(rank, 5 * 3) for rank in range(4)]
    url = api_client.app.url_path_for("job_families", job=job)
    answer = api_client.get(url, params={"limit": 100}).json()
    got = sorted((f["label"], f["groups_total"], [(o["op"], o["calls"], o["bytes"])
                                                  for o in f["ops"]])
                 for f in answer["families"])  # fmt: skip
    assert got == sorted(
        [("dup of world", 1, [("MPI_Allreduce", 4, 32)])] * 15
        + [("not described", 0, [("MPI_Allreduce", 20, 160)]), ("world", 1, [])]
    )
    assert answer["page"]["total"] == 17


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_a_freed_communicators_id_taken_by_one_made_another_way_keeps_its_figures(
    collector, api_client, mpi
):
    """comm_reuse.c on 4 ranks: a split of the world (3 allreduces of 4 bytes) freed, then
    a dup of the world (5 of 8 bytes) that takes the id the split gave back, then two
    splits at another line (1 allreduce each), each freed. Every communicator's figures
    stay under how it was made: the first split's 12 calls and 48 bytes, the dup's 20 and
    160, and the loop's splits, made alike, sharing one id and one label, 8 and 32 (before,
    all 40 calls were shown under the last description made)."""
    source = SOURCE.with_name("comm_reuse.c").read_text().splitlines()
    first, loop = (next(i + 1 for i, line in enumerate(source) if mark in line)
                   for mark in ("/* the split */", "/* the loop's split */"))  # fmt: skip
    job = f"families-reuse-{mpi}-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, mpi, [jobs.program(mpi, "comm_reuse")], job, ranks=4)
    assert result.returncode == 0, result.stderr
    url = api_client.app.url_path_for("job_families", job=job)
    answer = api_client.get(url, params={"limit": 100}).json()
    got = sorted((f["label"], [(o["op"], o["calls"], o["bytes"]) for o in f["ops"]])
                 for f in answer["families"])  # fmt: skip
    assert got == sorted([
        (f"split at comm_reuse.c:{first}, 1 group of 4", [("MPI_Allreduce", 12, 48)]),
        ("dup of world", [("MPI_Allreduce", 20, 160)]),
        (f"split at comm_reuse.c:{loop}, 1 group of 4", [("MPI_Allreduce", 8, 32)]),
        ("world", []),
    ])  # fmt: skip


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_messages_on_a_reused_handle_count_for_the_new_communicator(collector, pg_url, mpi):
    """comm_p2p_reuse.c on 4 ranks: 3 messages of 8 bytes from every rank to world rank 0
    on a split A, freed; then 2 from every rank to world rank 3 on a split B with the
    ranks reversed, which gets A's handle (both MPIs reuse it, the program says so). Each
    communicator's messages are counted under its own id with its own world peers: the
    hooks' per-thread cache of (handle, rank, op) -> entry must not count B's sends to
    its rank 0 as A's."""
    job = f"families-p2p-reuse-{mpi}-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, mpi, [jobs.program(mpi, "comm_p2p_reuse")], job, ranks=4)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("handle reused: 1") == 4, result.stdout
    rows = query(
        pg_url,
        "SELECT world_rank, comm_id, name, peer, sum(msgs), sum(bytes) FROM comm_p2p_deltas "
        "JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
        "WHERE job_key = %s GROUP BY 1, 2, 3, 4",
        (job,),
    )
    by_comm: dict[int, set[tuple]] = {}
    for rank, comm, name, peer, msgs, nbytes in rows:
        by_comm.setdefault(comm, set()).add((rank, name, peer, msgs, nbytes))
    a = {(r, "MPI_Send", 0, 3, 24) for r in (1, 2, 3)} | {
        (0, "MPI_Recv", p, 3, 24) for p in (1, 2, 3)
    }
    b = {(r, "MPI_Send", 3, 2, 16) for r in (0, 1, 2)} | {
        (3, "MPI_Recv", p, 2, 16) for p in (0, 1, 2)
    }
    assert sorted(map(sorted, by_comm.values())) == sorted([sorted(a), sorted(b)]), rows
