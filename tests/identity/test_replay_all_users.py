"""`stacklens replay --all-users` (root, node epilog) writes only into each frame's proven
owner's jobs (issue #24, finding 2), attacked by a real second Unix user.

User A fills her default spool with 3,000 frames naming B's job id (command
`INJECTED-BY-ALICE`), watches it with inotify, and the moment root's replay opens the
first file she renames her spool away and puts a symlink to a directory B owns in its
place. Replay worked by path after that point (the owner of each frame looked up again
through the symlink: B), so root stored A's frames in B's job as its run 2. Now every
operation goes through the descriptors opened before the swap: B's job keeps exactly its
own run and frames, A's frames land in A's own job of that id, her spool (where she moved
it) is emptied through its descriptor, and B's directory is untouched.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from stacklens import wire
from stacklens.sender import open_connection
from stacklens.settings import Settings
from tests.collector.test_ingest import T0
from tests.conftest import query
from tests.identity.attacker import start_attacker
from tests.identity.test_proven_senders import proven_collector

JOB = "bobs-job"
#: A's frames: RANKS ranks × SEQS sequence numbers, the issue's 3,000.
RANKS, SEQS = 2, 1500

#: Runs as user A: waits for the first spool file to be opened, then swaps her spool for a
#: symlink to B's directory and says how many spool files were still there (none of them
#: delivered yet: the swap came before replay's first acknowledgement).
ATTACKER = r"""
spool, target = sys.argv[1], sys.argv[2]
wait(spool, IN_OPEN, lambda opened: opened.endswith(b".slf"))
os.rename(spool, spool + ".moved")
os.symlink(target, spool)
left = [n for n in os.listdir(spool + ".moved") if n.endswith(".slf")]
print("swapped", len(left), flush=True)
"""


def user_frame(job: str, rank: int, seq: int, user: str, command: bytes, run_id: int) -> bytes:
    """A two-rank frame of `job` (`run_id`) sending 1000 + seq bytes to the other rank; at
    seq 0 the rank information names `command` and `user`."""
    tables = {"p2p": wire.records("p2p", [{"peer": 1 - rank, "bytes_sent": 1000 + seq,
                                           "msgs_sent": 1}])}  # fmt: skip
    if seq == 0:
        tables["rank_info"] = wire.records("rank_info", [{"command": command,
                                                          "user": user.encode()}])  # fmt: skip
    return wire.encode_frame(
        job_id=job, world_rank=rank, world_size=2, seq=seq, run_id=run_id, host="node0",
        interval_start_ns=T0 + seq * 10**9, interval_end_ns=T0 + (seq + 1) * 10**9,
        tables=tables,
    )  # fmt: skip


def job_totals(pg_url: str, owner: int) -> list[tuple]:
    """(run ordinal, command, frames, bytes sent) of every run of JOB owned by `owner`."""
    return query(pg_url, """
        SELECT r.ordinal, r.command,
               (SELECT count(*) FROM received_frames f WHERE f.run_id = r.id),
               (SELECT sum(d.bytes_sent)::bigint FROM p2p_deltas d
                WHERE d.job_id = j.id AND d.run_id = r.id)
        FROM runs r JOIN jobs j ON j.id = r.job_id
        WHERE j.owner_uid = %s AND j.job_key = %s ORDER BY r.ordinal""", (owner, JOB))  # fmt: skip


def test_a_spool_swapped_for_a_symlink_mid_replay_writes_nothing_into_another_users_job(
    pg_url, shared_dir, munge_socket, users
):
    a, b = users
    tmp = shared_dir / "tmp"  # the node's TMPDIR, like /tmp
    tmp.mkdir()
    tmp.chmod(0o1777)
    spool = tmp / f"stacklens-spool-{a.pw_uid}"
    spool.mkdir(mode=0o700)
    for rank in range(RANKS):
        for seq in range(SEQS):
            raw = user_frame(JOB, rank, seq, a.pw_name, b"INJECTED-BY-ALICE", run_id=0xA11CE)
            path = spool / f"{JOB}.{rank:010d}.{seq:020d}.1.slf"
            path.write_bytes(raw)
            os.chown(path, a.pw_uid, a.pw_gid)
    os.chown(spool, a.pw_uid, a.pw_gid)
    bobs = shared_dir / "bob-dir"  # any directory B owns
    bobs.mkdir(mode=0o700)
    (bobs / "notes").write_text("bob's\n")
    os.chown(bobs, b.pw_uid, b.pw_gid)
    unix = str(shared_dir / "ingest.sock")
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        settings = Settings(collector=collector.endpoint, collector_socket=unix)
        bob_frames = [user_frame(JOB, 0, seq, b.pw_name, b"./bobs-solver", run_id=0xB0B)
                      for seq in range(3)]  # fmt: skip
        with open_connection(settings, owner_uid=b.pw_uid, timeout=30) as sock:
            sock.sendall(b"".join(bob_frames))  # B's own job, as his hooks send it
            acks = [wire.decode_ack(sock.recv(wire.ACK_SIZE, socket.MSG_WAITALL))
                    for _ in bob_frames]  # fmt: skip
        assert acks == [(wire.Status.COMMITTED, seq) for seq in range(3)]
        attacker = start_attacker(a.pw_name, shared_dir / "attacker.py", ATTACKER, str(spool),
                                  str(bobs))  # fmt: skip
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
            env.update(STACKLENS_COLLECTOR=collector.endpoint, STACKLENS_COLLECTOR_SOCKET=unix,
                       STACKLENS_MUNGE_SOCKET=munge_socket, TMPDIR=str(tmp))  # fmt: skip
            replayed = subprocess.run(
                [sys.executable, "-m", "stacklens_cli", "replay", "--all-users"],
                env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            swapped = attacker.communicate(timeout=60)[0]
        finally:
            attacker.kill()
            attacker.wait()
    # The swap came after the first open and before the first frame was acknowledged.
    assert swapped == f"swapped {RANKS * SEQS}\n"
    assert spool.is_symlink()
    assert replayed.returncode == 0, replayed.stderr + replayed.stdout
    assert f"replayed {RANKS * SEQS} frames from {spool}" in replayed.stdout
    # B's job: exactly his one run; not one frame of A's.
    assert job_totals(pg_url, b.pw_uid) == [(1, "./bobs-solver", 3, 1000 + 1001 + 1002)]
    # A's frames: her own job of that id.
    sent = RANKS * sum(1000 + seq for seq in range(SEQS))
    assert job_totals(pg_url, a.pw_uid) == [(1, "INJECTED-BY-ALICE", RANKS * SEQS, sent)]
    assert not list(Path(f"{spool}.moved").iterdir())  # delivered: deleted where it is now
    assert sorted(p.name for p in bobs.iterdir()) == ["notes"]
    assert (bobs / "notes").read_text() == "bob's\n"
