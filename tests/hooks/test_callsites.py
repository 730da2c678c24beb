"""Call sites on real MPI jobs under the hooks (Open MPI and MPICH), exact, from
mpi_pmpi_hooks/tests/callsites.c (its header comment gives the pattern): calls, bytes and
time per call site, per rank, kept as (module, build-id, offset) and found again at the
program's marked lines; STACKLENS_CALLSITE_DEPTH 2 keeps the caller, 0 switches call
sites off; STACKLENS_MAX_CALLSITES folds the sites beyond it into one overflow site with
the totals exact.

3 ranks. The lines of the marked sites are read from the source; a site's frame is
checked with addr2line on its offset - 1 (an oracle here; stacklens's own resolution is
server-side).
"""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import query
from tests.hooks import jobs

SOURCE = Path(__file__).resolve().parents[2] / "mpi_pmpi_hooks" / "tests" / "callsites.c"
RANKS = 3
OVERFLOW_SITE = 2**32 - 1
NO_COMM = 2**32 - 1
POSIX = 1


def marked_lines() -> dict[str, int]:
    """SITE name -> its line in callsites.c."""
    lines = SOURCE.read_text().splitlines()
    return {
        m.group(1): i + 1
        for i, line in enumerate(lines)
        if (m := re.search(r"/\* SITE (\w+) \*/", line))
    }


def site_line(program: str, offset: int) -> int:
    """The source line of the call before return address `offset` of `program`."""
    out = subprocess.run(["addr2line", "-e", program, hex(offset - 1)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return int(out.strip().rsplit(":", 1)[1].split()[0])


def build_id(program: str) -> str:
    """The GNU build-id of program (readelf -n)."""
    out = subprocess.run(["readelf", "-n", program], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def callsites(pg_url: str, job: str) -> list[tuple]:
    """(rank, site id, layer, op name (or I/O function index), comm id, calls, bytes,
    time) summed over the job per site, layer, op and communicator."""
    return query(
        pg_url,
        "SELECT world_rank, site_id, layer, CASE WHEN layer = 0 THEN name ELSE op_id::text END, "
        "comm_id, sum(calls)::bigint, sum(bytes)::bigint, sum(time_ns)::bigint "
        "FROM callsite_deltas c JOIN jobs ON jobs.id = c.job_id "
        "LEFT JOIN mpi_ops ON mpi_ops.id = op_id AND layer = 0 "
        "WHERE job_key = %s GROUP BY 1, 2, 3, 4, 5",
        (job,),
    )


def frames(pg_url: str, job: str) -> dict[tuple[int, int], list[tuple]]:
    """(rank, site id) -> [(frame, depth, module, build-id, offset)] in frame order (one row
    per frame even when a resent frame repeated them)."""
    rows = query(
        pg_url,
        "SELECT DISTINCT world_rank, site_id, frame, depth, module, build_id, site_offset "
        "FROM callsite_paths p JOIN jobs ON jobs.id = p.job_id WHERE job_key = %s "
        "ORDER BY 1, 2, 3",
        (job,),
    )
    out: dict[tuple[int, int], list[tuple]] = {}
    for rank, site, *rest in rows:
        out.setdefault((rank, site), []).append(tuple(rest))
    return out


def run(collector, mpi: str, job: str, tmp_path: Path, **extra: str) -> str:
    """Runs callsites on RANKS ranks of mpi with the settings in extra; returns its path."""
    program = jobs.program(mpi, "callsites")
    env = jobs.job_env(collector, mpi, job, 100, **extra)
    argv = jobs.mpirun(mpi, RANKS, [program, str(tmp_path / "out")])
    result = jobs.finish(jobs.start(argv, env), 90)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    return program


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_two_sites_of_one_op_are_kept_apart_exactly(collector, pg_url, mpi, tmp_path):
    job = f"callsites-{mpi}-{uuid.uuid4().hex[:8]}"
    program = run(collector, mpi, job, tmp_path)
    lines = marked_lines()
    where = frames(pg_url, job)
    ident = build_id(program)
    by_rank: dict[int, dict[tuple, tuple]] = {}
    comm_ids = set()
    for rank, site, layer, op, comm, calls, nbytes, time_ns in callsites(pg_url, job):
        path = where[(rank, site)]
        assert len(path) == 1  # depth 1: the caller only
        frame, depth, module, bid, offset = path[0]
        assert (frame, depth) == (0, 1)
        assert time_ns >= 0
        if module != program:  # calls from the MPI library or libc (Finalize's own, ...)
            continue
        assert bid == ident
        line = site_line(program, offset)
        name = next((n for n, n_line in lines.items() if n_line == line), f"line {line}")
        key = (layer, op, name)
        assert key not in by_rank.setdefault(rank, {})  # one site per marked line
        by_rank[rank][key] = (calls, nbytes)
        if op == "MPI_Allreduce":
            comm_ids.add(comm)
        elif layer == 0 and op != "MPI_Allreduce":
            assert comm == NO_COMM
    assert sorted(by_rank) == list(range(RANKS))
    for rank, sites in by_rank.items():
        marked = {k: v for k, v in sites.items() if not k[2].startswith("line")}
        write = next(k for k in marked if k[0] == POSIX)
        assert marked == {
            (0, "MPI_Allreduce", "small"): (3, 3 * 64),
            (0, "MPI_Allreduce", "large"): (5, 5 * 4000),
            (0, "MPI_Send", "send"): (2, 200),
            (0, "MPI_Recv", "recv"): (2, 200),
            write: (3, 3 * 4096),
        }, rank
        assert write[2] == "write"
    assert len(comm_ids) == 1 and NO_COMM not in comm_ids  # MPI_COMM_WORLD's id


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_depth_two_keeps_the_caller_and_depth_zero_switches_off(collector, pg_url, mpi,
                                                                tmp_path):  # fmt: skip
    lines = marked_lines()
    job = f"callsites-d2-{uuid.uuid4().hex[:8]}"
    program = run(collector, mpi, job, tmp_path, STACKLENS_CALLSITE_DEPTH="2")
    reductions = {}
    for rank, site, _layer, op, _comm, calls, nbytes, _t in callsites(pg_url, job):
        if op != "MPI_Allreduce":
            continue
        path = frames(pg_url, job)[(rank, site)]
        assert [f[:2] for f in path] == [(0, 2), (1, 2)]
        called_at = tuple(site_line(program, f[4]) for f in path)
        reductions[(rank, called_at)] = (calls, nbytes)
    assert reductions == {
        **{(r, (lines["small"], lines["call_small"])): (3, 192) for r in range(RANKS)},
        **{(r, (lines["large"], lines["call_large"])): (5, 20000) for r in range(RANKS)},
    }

    job = f"callsites-off-{uuid.uuid4().hex[:8]}"
    run(collector, mpi, job, tmp_path, STACKLENS_CALLSITE_DEPTH="0")
    assert callsites(pg_url, job) == []
    assert frames(pg_url, job) == {}
    assert jobs.ops(pg_url, job)[(0, "MPI_Allreduce")] == (8, 3 * 64 + 5 * 4000)


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_sites_beyond_the_bound_fold_into_one_exact_overflow_site(collector, pg_url, mpi,
                                                                  tmp_path):  # fmt: skip
    job = f"callsites-max-{uuid.uuid4().hex[:8]}"
    run(collector, mpi, job, tmp_path, STACKLENS_MAX_CALLSITES="2")
    rows = callsites(pg_url, job)
    per_rank_sites: dict[int, set] = {}
    totals: dict[tuple[int, str], list[int]] = {}
    for rank, site, layer, op, _comm, calls, nbytes, _t in rows:
        per_rank_sites.setdefault(rank, set()).add(site)
        if layer == 0:
            t = totals.setdefault((rank, op), [0, 0])
            t[0] += calls
            t[1] += nbytes
    for rank in range(RANKS):
        assert per_rank_sites[rank] - {OVERFLOW_SITE} <= {0, 1}  # two sites, then overflow
        assert OVERFLOW_SITE in per_rank_sites[rank]
    described = frames(pg_url, job)
    assert all(site != OVERFLOW_SITE for _, site in described)
    # every MPI call of every op is at some site: the op table's totals, exactly
    expected = {k: [c, b] for k, (c, b) in jobs.ops(pg_url, job).items() if c}
    assert totals == expected


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_a_reading_sees_each_moving_count_once(mpi):
    """site_seqlock.c: the library's call-site code without MPI, one thread counting at
    1,024 sites that keep taking each other's cache slots (so counts keep moving from a
    slot into a row) while the main thread reads every count as the sender does: every
    reading totals between the calls ended before it and those begun after it. The churn
    test above cannot see a torn reading (the next frame puts its count right); this one
    fails within milliseconds when block_load does not read the sequence count again
    (checked by hand: 6 of 6 runs failed)."""
    result = subprocess.run([jobs.program(mpi, "site_seqlock"), "1"], capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    readings, calls = map(int, re.fullmatch(r"site_seqlock: (\d+) readings, (\d+) calls\n",
                                            result.stdout).groups())  # fmt: skip
    assert readings >= 100 and calls >= 100_000, result.stdout


CHURN_ITERS = 400
CHURN_SITES = 500  # site_churn.c's SITES
CHURN_THREADS = 2


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_sites_that_keep_taking_each_others_cache_slots_stay_exact(collector, pg_url, mpi,
                                                                    tmp_path):  # fmt: skip
    """site_churn.c: 2 threads, 500 sites each on its own communicator, more keys than
    cache slots, so calls keep moving a slot's counts into the thread's row while the
    sender reads the blocks every 20 ms: every frame's reading is consistent (each key's
    delta between 1 and ITERS calls) and the sums are exact."""
    job = f"callsites-churn-{mpi}-{uuid.uuid4().hex[:8]}"
    program = jobs.program(mpi, "site_churn")
    env = jobs.job_env(collector, mpi, job, 20, STACKLENS_MAX_CALLSITES="1024")
    argv = jobs.mpirun(mpi, 1, [program, str(CHURN_ITERS)])
    result = jobs.finish(jobs.start(argv, env), 120)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    rows = query(
        pg_url,
        "SELECT t_end_ns, site_id, comm_id, bucket, calls, bytes FROM callsite_deltas c "
        "JOIN jobs ON jobs.id = c.job_id JOIN mpi_ops ON mpi_ops.id = op_id AND layer = 0 "
        "WHERE job_key = %s AND name = 'MPI_Barrier'",
        (job,),
    )
    totals: dict[tuple[int, int], int] = {}
    for _t_end, site, comm, bucket, calls, nbytes in rows:
        assert (bucket, nbytes) == (0, 0)
        assert 1 <= calls <= CHURN_ITERS, (site, comm, calls)
        totals[(site, comm)] = totals.get((site, comm), 0) + calls
    assert totals == {key: CHURN_ITERS for key in totals}
    sites = {site for site, _ in totals}
    comms = {comm for _, comm in totals}
    assert len(sites) == CHURN_SITES and OVERFLOW_SITE not in sites
    assert len(comms) == CHURN_THREADS and NO_COMM not in comms
    assert len(totals) == CHURN_SITES * CHURN_THREADS
    offsets = {path[0][4] for (_, site), path in frames(pg_url, job).items() if site in sites}
    assert len(offsets) == CHURN_SITES  # each its own return address in the program
    assert len({t_end for t_end, *_ in rows}) >= 5  # frames read the blocks mid-churn
