"""Two users' jobs, sent through the real collector, for the access tests: alice's job and
bob's, each with every kind of record (point-to-point, ops, sizes, collectives, RMA, file
I/O), and names that must never reach anyone but bob and the admins."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from server.access import tokens
from stacklens import wire
from stacklens.mpi_ops import op_names
from tests.collector.test_ingest import T0, exchange

#: Everything of bob's job that names it, its user, its command, its files or its hosts.
BOB_NAMES = ("bob-secret-job", "bob_secret_solver", "bob-secret-output", "bobnode", "bob")
ALICE_JOB = "alice-job-1"
BOB_JOB = "bob-secret-job"


def _frame(job: str, user: str, rank: int, seq: int, command: str, path: str, host: str) -> bytes:
    op = op_names().index("MPI_Send")
    bcast = op_names().index("MPI_Bcast")
    put = op_names().index("MPI_Put")
    tables = {
        "p2p": wire.records(
            "p2p",
            [
                {
                    "peer": 1 - rank,
                    "bytes_sent": 4096,
                    "msgs_sent": 4,
                    "bytes_recv": 4096,
                    "msgs_recv": 4,
                }
            ],
        ),  # fmt: skip
        "op": wire.records("op", [{"op_id": op, "calls": 4, "bytes": 4096, "time_ns": 5000}]),
        "hist": wire.records("hist", [{"op_id": op, "bucket": 11, "count": 4}]),
        "coll": wire.records(
            "coll",
            [
                {
                    "op_id": bcast,
                    "comm_id": 7,
                    "comm_size": 2,
                    "root": 0,
                    "calls": 1,
                    "bytes": 64,
                    "time_ns": 900,
                }
            ],
        ),  # fmt: skip
        "rma": wire.records("rma", [{"target": 1 - rank, "op_id": put, "calls": 2, "bytes": 32}]),
        "io": wire.records(
            "io",
            [
                {
                    "layer": 1,
                    "phase": 0,
                    "opens": 1,
                    "writes": 1,
                    "bytes_written": 100,
                    "path": path.encode(),
                    "mount": b"/scratch",
                    "fstype": b"ext4",
                }
            ],
        ),  # fmt: skip
    }
    if seq == 0:
        tables["rank_info"] = wire.records(
            "rank_info", [{"command": command.encode(), "user": user.encode()}]
        )
    return wire.encode_frame(job_id=job, world_rank=rank, world_size=2, seq=seq, host=host,
                             pid=200 + rank, interval_start_ns=T0 + seq * 10**9,
                             interval_end_ns=T0 + (seq + 1) * 10**9, token="secret",
                             tables=tables)  # fmt: skip


def send_two_users_jobs(collector) -> None:
    """alice's two-rank job and bob's, two intervals each, committed."""
    frames = [
        _frame(ALICE_JOB, "alice", rank, seq, "./alice_app", "/scratch/a/out.dat", f"anode{rank}")
        for rank in (0, 1) for seq in (0, 1)
    ] + [
        _frame(BOB_JOB, "bob", rank, seq, "/home/bob/bob_secret_solver --deck x",
               "/scratch/bob/bob-secret-output.dat", f"bobnode{rank}")
        for rank in (0, 1) for seq in (0, 1)
    ]  # fmt: skip
    acks = exchange(collector.address, b"".join(frames), acks=len(frames))
    assert [status for status, _ in acks] == [0] * len(frames)


def token_for(engine: Engine, user: str, days: float = 1.0) -> str:
    """A new API token acting as `user`."""
    with Session(engine) as session:
        return tokens.create(session, user, "test", days)[0]


def save_two_users_incident(engine: Engine) -> int:
    """An ended congestion incident on the small fabric's spine1[1] - leaf1[3] link
    (tests/server/fabric_data.py, written first) from T0 + 5 s to T0 + 6 s (the sweep of
    fabric_data.CONGESTED): bob's job its likely aggressor, alice's its victim (ranks, a
    file, her slowdown's evidence). Its id."""
    from server.fabric import repository as fabric
    from server.incidents import repository as incidents
    from stacklens.schema import Job

    with Session(engine) as session, session.begin():
        jobs = {key: job for key, job in session.execute(select(Job.job_key, Job.id))}
        link = next(lk for lk in fabric.links(session)
                    if {lk["a"]["name"], lk["b"]["name"]} == {"spine1", "leaf1"})  # fmt: skip
        ends = {k: link[k] for k in ("a", "b")}
        evidence = [{"t_ns": T0 + 6 * 10**9, "utilisation": 0.04, "xmit_wait_per_s": 5e6,
                     "errors": 0, "down": False}]  # fmt: skip
        row = {"key": f"congestion:{link['id']}:{T0 + 5 * 10**9}", "kind": "congestion",
               "severity": "major", "title": "Congestion on spine1[1] – leaf1[3]",
               "start_ns": T0 + 5 * 10**9, "end_ns": T0 + 6 * 10**9,
               "detected_ns": T0 + 6 * 10**9, "updated_ns": T0 + 6 * 10**9,
               "link_ids": [link["id"]],
               "signals": ["congestion", "mpi_slowdown"], "lost_ns": 6 * 10**9, "hit": 1,
               "links": [{"id": link["id"], **ends, "capacity_bytes_per_s": 4_000_000_000,
                          "signals": ["congestion"], "peak": 5.0, "evidence": evidence}],
               "members": [{"role": "aggressor"}, {"role": "victim"}]}  # fmt: skip
        series = [{"t_ns": T0 + 6 * 10**9, "time_ns": 10**9, "bytes": 8192,
                   "per_byte_ns": 10**9 / 8192, "baseline_per_byte_ns": 1.0}]  # fmt: skip
        members = [
            {"slot": 0, "job_id": jobs[BOB_JOB], "role": "aggressor", "signals": [],
             "ranks": [0, 1], "files": ["POSIX:/scratch/bob/bob-secret-output.dat"],
             "link_bytes": 8192, "evidence": {}},
            {"slot": 1, "job_id": jobs[ALICE_JOB], "role": "victim",
             "signals": ["mpi_slowdown"], "ranks": [1, 0], "files": ["POSIX:/scratch/a/out.dat"],
             "link_bytes": 4096, "evidence": {"mpi_slowdown": {
                 "baseline_per_byte_ns": 1.0, "peak_factor": 122.0, "lost_ns": 6 * 10**9,
                 "unobserved_ns": None, "series": series}}},
        ]  # fmt: skip
        return incidents.save(session, row, members)
