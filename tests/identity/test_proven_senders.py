"""Proven senders and job ownership (#13 points 1, 2, 5): real Unix users, a real munged,
real MPI jobs through the hook library, a collector in proven mode.

Two users are created for the module (removed afterwards) and a munged of the test's own
runs with its own key and socket. User A's job arrives over the collector's Unix socket
(SO_PEERCRED) and over TCP with MUNGE; user B reusing A's job id gets a job of its own and
A's bytes stay exact; B claiming A as the owner is refused (`not_owner`, counted); a port
squatter (user B listening on the collector's port while it is down) receives hellos but
no frame, the hooks spool, and root's replay stores the spool under A.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from collector.service import BackgroundCollector
from server.app import create_app
from stacklens import wire
from stacklens.db import make_engine
from stacklens.sender import ProofError, open_connection
from stacklens.settings import Settings
from tests.conftest import free_port, query
from tests.hooks import jobs, test_sanitizers
from tests.identity.daemons import as_user

RANKS, SIZE, ITERATIONS = 4, 4096, 5


def proven_collector(pg_url: str, shared_dir: Path, munge_socket: str, port: int = 0):
    """A collector in proven mode with its Unix socket in shared_dir, root the only admin."""
    return BackgroundCollector(
        pg_url, listen=f"127.0.0.1:{port}", ingest_auth="proven",
        collector_socket=str(shared_dir / "ingest.sock"), munge_socket=munge_socket,
        admin_uids="0",
    )  # fmt: skip


def user_job_env(
    collector_endpoint: str, user, job: str, mpi: str = "openmpi", **extra: str
) -> dict[str, str]:
    """The environment of an MPI job of `user` under the hooks, proven mode."""
    env = jobs.job_env(type("C", (), {"endpoint": collector_endpoint}), mpi, job, interval_ms=100)
    for key in ("STACKLENS_INGEST_TOKEN", "STACKLENS_INGEST_AUTH"):
        env.pop(key)
    env.update(HOME="/tmp", USER=user.pw_name, LOGNAME=user.pw_name, TMPDIR="/tmp", **extra)
    for key in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
        env.pop(key, None)
    return env


def ring_as(
    user, env: dict[str, str], mpi: str = "openmpi", size: int = SIZE
) -> subprocess.CompletedProcess:
    """examples' ring_allreduce on RANKS ranks of `mpi` (messages of `size` + rank bytes),
    run as `user` under the hooks."""
    argv = [jobs.example(mpi, "ring_allreduce"), str(ITERATIONS), str(size), "20"]
    command = jobs.mpirun(mpi, RANKS, argv)
    return jobs.finish(jobs.start(as_user(user.pw_name) + command, env), timeout=120)


#: What ring_allreduce sends: rank r passes SIZE + r bytes to r + 1, once per iteration.
EXPECTED = {(r, (r + 1) % RANKS): (ITERATIONS * (SIZE + r), ITERATIONS) for r in range(RANKS)}


def job_p2p(pg_url: str, owner: int, job: str) -> dict[tuple[int, int], tuple[int, int]]:
    """{(rank, peer): (bytes sent, messages)} of the job `job` of `owner`."""
    rows = query(pg_url, """
        SELECT d.world_rank, d.peer, sum(d.bytes_sent)::bigint, sum(d.msgs_sent)::bigint
        FROM p2p_deltas d JOIN jobs j ON j.id = d.job_id
        WHERE j.owner_uid = %s AND j.job_key = %s AND d.bytes_sent > 0
        GROUP BY 1, 2""", (owner, job))  # fmt: skip
    return {(r, p): (b, m) for r, p, b, m in rows}


def owners_of(pg_url: str, job: str) -> list[int]:
    return [r[0] for r in query(pg_url, "SELECT owner_uid FROM jobs WHERE job_key = %s "
                                        "ORDER BY owner_uid", (job,))]  # fmt: skip


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_unix_socket_attributes_by_peer_credentials(pg_url, shared_dir, munge_socket, users, mpi):
    a, _ = users
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        env = user_job_env(collector.endpoint, a, "ident-unix", mpi,
                           STACKLENS_COLLECTOR_SOCKET=str(shared_dir / "ingest.sock"))  # fmt: skip
        result = ring_as(a, env, mpi)
        assert result.returncode == 0, result.stderr
        assert "stacklens:" not in result.stderr, result.stderr
    assert owners_of(pg_url, "ident-unix") == [a.pw_uid]
    assert job_p2p(pg_url, a.pw_uid, "ident-unix") == EXPECTED


def test_munge_over_tcp_and_another_users_job_id_is_kept_apart(
    pg_url, shared_dir, munge_socket, users
):
    a, b = users
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        tcp = {"STACKLENS_COLLECTOR_SOCKET": "off", "STACKLENS_MUNGE_SOCKET": munge_socket}
        # B claims the id first, then A runs its job under it: A's frames are A's job.
        # B's environment even claims A's name: the job's user is B's proven name.
        claimed = {"USER": a.pw_name, "LOGNAME": a.pw_name}
        spoof = ring_as(
            b, {**user_job_env(collector.endpoint, b, "ident-shared", **tcp), **claimed}
        )
        assert spoof.returncode == 0 and "stacklens:" not in spoof.stderr, spoof.stderr
        real = ring_as(a, user_job_env(collector.endpoint, a, "ident-shared", **tcp))
        assert real.returncode == 0 and "stacklens:" not in real.stderr, real.stderr
        rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
    assert owners_of(pg_url, "ident-shared") == sorted([a.pw_uid, b.pw_uid])
    named = query(pg_url, 'SELECT owner_uid, "user" FROM jobs WHERE job_key = %s ORDER BY 1',
                  ("ident-shared",))  # fmt: skip
    assert named == sorted([(a.pw_uid, a.pw_name), (b.pw_uid, b.pw_name)])
    assert job_p2p(pg_url, a.pw_uid, "ident-shared") == EXPECTED
    assert job_p2p(pg_url, b.pw_uid, "ident-shared") == EXPECTED
    assert rejected == {}


def credential_of(user, munge_socket: str, payload: bytes) -> bytes:
    """A MUNGE credential of `user` carrying `payload` (made by the munge tool, as `user`)."""
    return subprocess.run(as_user(user.pw_name) + ["munge", "-S", munge_socket], input=payload,
                          capture_output=True, check=True, timeout=30).stdout.strip()  # fmt: skip


def challenge(sock: socket.socket, owner: int) -> wire.Welcome:
    """Send a MUNGE hello for `owner`; the collector's challenge (its credential read)."""
    sock.sendall(wire.Hello(wire.Proof.MUNGE, owner, os.urandom(16)).encode())
    answer = wire.Welcome.decode(sock.recv(wire.WELCOME_SIZE, socket.MSG_WAITALL))
    assert answer.status == wire.Status.COMMITTED and answer.cred_len > 0
    assert len(sock.recv(answer.cred_len, socket.MSG_WAITALL)) == answer.cred_len
    return answer


def test_claiming_another_owner_is_refused_and_counted(pg_url, shared_dir, munge_socket, users):
    a, b = users
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        # B proves to be B but names A as the owner: refused.
        with socket.create_connection(collector.address, timeout=30) as sock:
            nonce = challenge(sock, a.pw_uid).nonce
            cred = credential_of(b, munge_socket, nonce)
            sock.sendall(wire.encode_cred(cred))
            final = wire.Welcome.decode(sock.recv(wire.WELCOME_SIZE, socket.MSG_WAITALL))
            assert (final.status, final.cred_len) == (wire.Status.NOT_OWNER, 0)
            assert sock.recv(1) == b""  # the collector ends the connection
        # The same credential again (munged saw it decoded once): proves nothing.
        with socket.create_connection(collector.address, timeout=30) as sock:
            challenge(sock, b.pw_uid)
            sock.sendall(wire.encode_cred(cred))
            final = wire.Welcome.decode(sock.recv(wire.WELCOME_SIZE, socket.MSG_WAITALL))
            assert final.status == wire.Status.UNPROVEN
        # A frame without a hello proves nothing: refused with an ack.
        with socket.create_connection(collector.address, timeout=30) as sock:
            sock.sendall(struct.pack("<I", wire.MAGIC) + bytes(wire.HEADER_SIZE - 4))
            ack = sock.recv(wire.ACK_SIZE, socket.MSG_WAITALL)
            assert wire.decode_ack(ack) == (wire.Status.UNPROVEN, 0)
        rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
    assert rejected == {"not_owner": 1, "unproven": 2}
    assert query(pg_url, "SELECT count(*) FROM jobs")[0][0] == 0


def test_root_may_send_for_anyone_and_the_collector_proves_itself(
    pg_url, shared_dir, munge_socket, users
):
    a, _ = users
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        for unix in ("off", str(shared_dir / "ingest.sock")):
            settings = Settings(collector=collector.endpoint, collector_socket=unix,
                                munge_socket=munge_socket)  # fmt: skip
            with open_connection(settings, owner_uid=a.pw_uid, timeout=30):
                pass  # root is an admin: it may send for A
        # A collector user other than the one that runs it: not the collector.
        settings = Settings(collector=collector.endpoint, collector_socket="off",
                            munge_socket=munge_socket, collector_user=a.pw_name)  # fmt: skip
        with pytest.raises(ProofError, match="runs as uid 0, not as the collector user"):
            open_connection(settings, owner_uid=0, timeout=30)


SQUATTER = r"""
import socket, struct, sys, threading
# Answers every connection as a collector would (a welcome, status committed, at once) and
# records every byte it receives.
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1]))); srv.listen(64)
out = open(sys.argv[2], "ab", buffering=0)
lock = threading.Lock()
def serve(conn):
    conn.settimeout(10)
    conn.sendall(struct.pack("<IHHIIQQ", 0x45574C53, 0, 0, 0, 0, 0, 0))
    try:
        while data := conn.recv(65536):
            with lock:
                out.write(data)
    except OSError:
        pass
    conn.close()
print("listening", flush=True)
while True:
    threading.Thread(target=serve, args=(srv.accept()[0],), daemon=True).start()
"""


def test_a_port_squatter_gets_no_frame_and_the_hooks_spool(pg_url, shared_dir, munge_socket, users):
    a, b = users
    port = free_port()
    squat_dir = shared_dir / "squatter"
    squat_dir.mkdir(mode=0o700)
    os.chown(squat_dir, b.pw_uid, b.pw_gid)
    captured = squat_dir / "squatted.bin"
    script = shared_dir / "squatter.py"
    script.write_text(SQUATTER)
    script.chmod(0o644)
    spool = shared_dir / "spool-a"
    spool.mkdir(mode=0o700)
    os.chown(spool, a.pw_uid, a.pw_gid)
    argv = ["/usr/bin/python3", str(script), str(port), str(captured)]
    squatter = subprocess.Popen(as_user(b.pw_name) + argv, stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout is not None and squatter.stdout.readline() == "listening\n"
        env = user_job_env(
            f"127.0.0.1:{port}", a, "ident-squat", STACKLENS_COLLECTOR_SOCKET="off",
            STACKLENS_MUNGE_SOCKET=munge_socket, STACKLENS_SPOOL_DIR=str(spool),
            STACKLENS_FINALIZE_TIMEOUT_MS="3000",
        )  # fmt: skip
        result = ring_as(a, env)
    finally:
        squatter.kill()
        squatter.wait()
    assert result.returncode == 0, result.stderr
    warnings = jobs.library_warnings(result.stderr)
    assert warnings and all("did not prove itself (no credential)" in w for w in warnings)
    assert len(warnings) <= RANKS  # one per rank at most
    data = captured.read_bytes()
    hello_magic = struct.pack("<I", wire.HELLO_MAGIC)
    assert data.count(hello_magic) >= RANKS  # every rank tried...
    assert struct.pack("<I", wire.MAGIC) not in data  # ...and sent no frame
    assert b"ident-squat" not in data and b"MUNGE:" not in data  # nor any credential
    spooled = sorted(p.name for p in spool.glob("*.slf"))
    assert len(spooled) >= RANKS
    # Root replays A's spool (as in an epilog): the frames keep their owner, A.
    with proven_collector(pg_url, shared_dir, munge_socket, port=port):
        env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
        env.update(STACKLENS_COLLECTOR=f"127.0.0.1:{port}", STACKLENS_COLLECTOR_SOCKET="off",
                   STACKLENS_MUNGE_SOCKET=munge_socket)  # fmt: skip
        replayed = subprocess.run(
            [sys.executable, "-m", "stacklens_cli", "replay", str(spool)],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert replayed.returncode == 0, replayed.stderr + replayed.stdout
    assert owners_of(pg_url, "ident-squat") == [a.pw_uid]
    assert job_p2p(pg_url, a.pw_uid, "ident-squat") == EXPECTED
    assert not list(spool.glob("*.slf"))


def test_without_libmunge_the_program_runs_warns_once_and_spools(pg_url, shared_dir, munge_socket):
    """A node without libmunge (hidden here in a mount namespace of the program's own)
    still runs the program: it warns once, and its frames wait in the spool."""
    spool = shared_dir / "spool-nomunge"
    spool.mkdir(mode=0o700)
    data = shared_dir / "input.bin"
    data.write_text("ident-nomunge\n")
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        env = jobs.job_env(collector, "openmpi", "ident-nomunge", interval_ms=100)
        for key in ("STACKLENS_INGEST_TOKEN", "STACKLENS_INGEST_AUTH"):
            env.pop(key)
        env.update(STACKLENS_COLLECTOR_SOCKET="off", STACKLENS_MUNGE_SOCKET=munge_socket,
                   STACKLENS_SPOOL_DIR=str(spool))  # fmt: skip
        hide = "mount --bind /dev/null $(readlink -f /usr/lib/x86_64-linux-gnu/libmunge.so.2)"
        reader = f"read -r line < {data}; echo $line"  # the shell opens the file itself
        result = subprocess.run(["unshare", "-m", "sh", "-c", f"{hide} && exec sh -c '{reader}'"],
                                env=env, capture_output=True, timeout=60)  # fmt: skip
    assert result.returncode == 0 and result.stdout == b"ident-nomunge\n", result.stderr
    warnings = jobs.library_warnings(result.stderr.decode())
    assert len(warnings) == 1, warnings
    assert "libmunge is not available" in warnings[0] and str(spool) in warnings[0]
    assert len(list(spool.glob("*.slf"))) == 1  # its one (final) frame
    assert owners_of(pg_url, "ident-nomunge") == []


def test_refusals_show_on_metrics_and_the_http_ingest_is_closed(
    pg_url, shared_dir, munge_socket, users, control_socket
):
    """The refusals are on /metrics by reason; the HTTP ingest, whose bearer token proves
    no user, answers 403 in proven mode."""
    a, b = users
    engine = make_engine(pg_url)
    with (
        BackgroundCollector(pg_url, token="secret", ingest_auth="proven", collector_socket="off",
                            munge_socket=munge_socket, control_socket=control_socket) as running,
        TestClient(create_app(engine, collector=running.link),
                   base_url="http://127.0.0.1") as client,
    ):  # fmt: skip
        with socket.create_connection(running.address, timeout=30) as sock:
            cred = credential_of(b, munge_socket, challenge(sock, a.pw_uid).nonce)
            sock.sendall(wire.encode_cred(cred))
            final = wire.Welcome.decode(sock.recv(wire.WELCOME_SIZE, socket.MSG_WAITALL))
            assert final.status == wire.Status.NOT_OWNER
        metrics = client.get("/metrics").text
        assert 'stacklens_ingest_frames_rejected_total{reason="not_owner"} 1.0' in metrics
        refused = client.post("/api/ingest/frames", json={"frames": []},
                              headers={"Authorization": "Bearer secret"})  # fmt: skip
        assert refused.status_code == 403
        reason = ("the HTTP ingest proves no Unix user: it takes frames only in trusted mode "
                  "(STACKLENS_INGEST_AUTH=trusted)")  # fmt: skip
        assert refused.json() == {"detail": reason}
        metrics = client.get("/metrics").text
        assert 'stacklens_ingest_frames_rejected_total{reason="unproven"} 1.0' in metrics
    engine.dispose()


@pytest.mark.parametrize("route", ["unix", "munge"])
def test_the_proof_is_clean_under_the_sanitizers(pg_url, shared_dir, munge_socket, route):
    """The hooks' proof (proof.c: SO_PEERCRED, libmunge by dlopen) under the ASan + UBSan
    build: exact results, no sanitizer report in stacklens code."""
    job = f"ident-asan-{route}"
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        env = test_sanitizers.sanitizer_env(collector, job)
        for key in ("STACKLENS_INGEST_TOKEN", "STACKLENS_INGEST_AUTH"):
            env.pop(key)
        socket_path = str(shared_dir / "ingest.sock") if route == "unix" else "off"
        env.update(STACKLENS_COLLECTOR_SOCKET=socket_path, STACKLENS_MUNGE_SOCKET=munge_socket)
        argv = [jobs.example("openmpi", "ring_allreduce"), str(ITERATIONS), str(SIZE), "20"]
        result = jobs.finish(jobs.start(jobs.mpirun("openmpi", RANKS, argv), env), 180)
    assert result.returncode == 0, result.stderr
    ours = [r for r in test_sanitizers.reports(result.stderr) if test_sanitizers.OURS.search(r)]
    assert ours == []
    assert "stacklens:" not in result.stderr, result.stderr
    assert owners_of(pg_url, job) == [0]
    assert job_p2p(pg_url, 0, job) == EXPECTED
