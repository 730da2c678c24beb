"""Ingest isolation benchmark: does a full-rate upload of the largest frames hold the API
back? (issue #24 finding 4: a frame set naming 10^6 files stalled /api/health 4-7 s.)

Starts the real stack (`stacklens up`, its embedded PostgreSQL in a scratch state
directory, fabric discovery off), then, in one run:

1. the sender processes encode their load (untimed) and send one frame each, acknowledged,
   so their jobs exist; the probes below run 3 s untimed;
2. for ``--seconds`` s without ingest, a prober asks GET /api/health (every 50 ms) and
   GET /api/jobs (every 200 ms), one request at a time each, and records how long each
   answer took;
3. the same for ``--seconds`` s while every sender sends as fast as the collector takes
   (the senders stand for other nodes: they run at niceness 19, on CPU the server leaves):
   - ``--senders`` over TCP (two frames in flight per connection, trusted mode with a
     token), each frame at the maximum body size of the settings
     (STACKLENS_MAX_FRAME_BYTES), all of it file records, each naming another file
     (``--distinct`` frames per sender, then their names come again with new sequence
     numbers and intervals);
   - ``--http-senders`` over the HTTP ingest, one batch at a time, each batch as large as
     the HTTP body cap allows (STACKLENS_HTTP_MAX_BODY_MB) of such frames in JSON.

It prints p50/p99/max of both routes without and with ingest and their ratios, the
ingest rates while the clock ran (frames, MB and file records acknowledged = committed
per second), and the targets: /api/health p99 <= 100 ms and /api/jobs p99 <= 500 ms
under ingest.

    .venv/bin/python -m bench.ingest_isolation [--senders 3 --http-senders 1 --seconds 30]
    # the same load against `up` of another commit (a worktree with its codec built):
    git worktree add /tmp/before COMMIT && make -C /tmp/before codec
    .venv/bin/python -m bench.ingest_isolation --up-tree /tmp/before
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path

import httpx
import numpy as np

from stacklens import wire
from stacklens.paths import SOURCE_ROOT
from stacklens.settings import Settings

TOKEN = "bench-token"
#: The two routes measured, and how often each is asked (s between answers).
PROBES = {"/api/health": 0.05, "/api/jobs": 0.2}
#: Targets under ingest (p99, seconds).
TARGETS = {"/api/health": 0.1, "/api/jobs": 0.5}
#: Frames each sender keeps in flight (sent, not yet acknowledged).
WINDOW = 2
#: Seconds of probing, untimed, before the figures without ingest.
WARMUP_S = 3.0
#: The senders stand for other nodes: on this machine they take only CPU nobody else
#: wants (the figures are the server's, not the load generator's).
SENDER_NICENESS = 19
_SECTION_BYTES = wire.SECTION_HEADER.itemsize
_RECORD_BYTES = wire.SPEC.table("io").dtype.itemsize


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def file_records(max_body: int, sender: str, frame: int) -> np.ndarray:
    """As many I/O records as one frame body of `max_body` bytes holds, each naming its
    own file (a POSIX write of 1 MiB to /scratch/bench/<sender>/f<frame>_<i>.dat)."""
    count = (max_body - _SECTION_BYTES) // _RECORD_BYTES
    records = np.zeros(count, dtype=wire.SPEC.table("io").dtype)
    records["layer"], records["opens"], records["writes"] = 1, 1, 1
    records["bytes_written"], records["write_time_ns"] = 1 << 20, 250_000
    records["path"] = [f"/scratch/bench/{sender}/f{frame:04d}_{i:06d}.dat".encode()
                       for i in range(count)]  # fmt: skip
    records["mount"], records["fstype"] = b"/scratch", b"lustre"
    return records


def stamp(frame: bytes, seq: int, start_ns: int) -> bytes:
    """`frame` with another sequence number and a one-second interval from `start_ns`."""
    header = np.frombuffer(frame[: wire.HEADER_SIZE], dtype=wire.HEADER_DTYPE).copy()
    header["seq"], header["interval_start_ns"] = seq, start_ns
    header["interval_end_ns"] = start_ns + 10**9
    return header.tobytes() + frame[wire.HEADER_SIZE :]


@dataclass
class Sent:
    """What one sender got acknowledged (committed): when (time.monotonic, the same clock
    in every process of the machine), and the frames, file records and bytes each
    acknowledgement stands for."""

    kind: str  # "tcp" or "http"
    acked_at: list[float]
    frames: int
    records: int
    bytes: int
    refused: int = 0

    def within(self, start: float, end: float) -> int:
        """Acknowledgements between `start` and `end`."""
        return sum(start <= t <= end for t in self.acked_at)


def tcp_sender(
    index: int, address: tuple[str, int], max_body: int, distinct: int,
    ready: Event, go: Event, stop: Event, results: multiprocessing.Queue,
) -> None:  # fmt: skip
    """One TCP sender process: encode `distinct` frames, send one (its job then exists),
    set `ready`; from `go` until `stop`, stream frames with WINDOW in flight; put its
    Sent."""
    os.nice(SENDER_NICENESS)
    t0 = time.time_ns() - 3600 * 10**9  # today's partition, an hour back
    frames = [
        wire.encode_frame(
            job_id=f"bench-tcp-{index}",
            world_rank=0,
            world_size=1,
            seq=0,
            interval_start_ns=t0,
            interval_end_ns=t0 + 10**9,
            token=TOKEN,
            tables={"io": file_records(max_body, f"t{index}", i)},
        )  # fmt: skip
        for i in range(distinct)
    ]
    records = (len(frames[0]) - wire.HEADER_SIZE - _SECTION_BYTES) // _RECORD_BYTES
    sent = Sent("tcp", [], 1, records, len(frames[0]))
    sock = socket.create_connection(address)
    sock.sendall(frames[0])
    status, _ = wire.decode_ack(sock.recv(wire.ACK_SIZE, socket.MSG_WAITALL))
    assert status == wire.Status.COMMITTED, status
    ready.set()
    go.wait()
    seq, in_flight = 1, 0
    while not stop.is_set():
        sock.sendall(stamp(frames[seq % distinct], seq, t0 + seq * 10**9))
        seq, in_flight = seq + 1, in_flight + 1
        if in_flight < WINDOW:
            continue
        status, _ = wire.decode_ack(sock.recv(wire.ACK_SIZE, socket.MSG_WAITALL))
        in_flight -= 1
        if status == wire.Status.COMMITTED:
            sent.acked_at.append(time.monotonic())
        else:
            sent.refused += 1
    sock.close()  # what is still in flight is left unacknowledged
    results.put(sent)


def json_tables(max_body: int, sender: str, frame: int) -> str:
    """The JSON `tables` of a frame holding file_records(max_body, sender, frame)."""
    paths = file_records(max_body, sender, frame)["path"]
    rows = ",".join(
        f'{{"layer":1,"opens":1,"writes":1,"bytes_written":1048576,"write_time_ns":250000,'
        f'"path":"{path.decode()}","mount":"/scratch","fstype":"lustre"}}'
        for path in paths
    )
    return f'{{"io":[{rows}]}}'


def http_sender(
    index: int, base: str, max_body: int, http_body: int,
    ready: Event, go: Event, stop: Event, results: multiprocessing.Queue,
) -> None:  # fmt: skip
    """One HTTP ingest sender process: frames like the TCP senders', in JSON, as many per
    batch as `http_body` bytes hold; one batch (its job then exists), `ready`, then from
    `go` until `stop` batches back to back; put its Sent."""
    os.nice(SENDER_NICENESS)
    t0 = time.time_ns() - 3600 * 10**9
    first = json_tables(max_body, f"h{index}", 0)
    per_batch = max(1, int(http_body * 0.98) // (len(first) + 200))
    tables = [first, *(json_tables(max_body, f"h{index}", i) for i in range(1, per_batch))]
    records = len(file_records(max_body, f"h{index}", 0))

    def batch(seq: int) -> bytes:
        frames = ",".join(
            f'{{"job":"bench-http-{index}","run_id":1,"world_rank":0,"world_size":1,'
            f'"seq":{seq + i},"interval_start_ns":{t0 + (seq + i) * 10**9},'
            f'"interval_end_ns":{t0 + (seq + i + 1) * 10**9},"tables":{t}}}'
            for i, t in enumerate(tables)
        )
        return f'{{"frames":[{frames}]}}'.encode()

    url = f"{base}/api/ingest/frames"
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with httpx.Client(timeout=600, headers=headers) as client:
        body = batch(0)
        answer = client.post(url, content=body)
        assert answer.status_code == 200, answer.text
        sent = Sent("http", [], per_batch, per_batch * records, len(body))
        ready.set()
        go.wait()
        seq = per_batch
        while not stop.is_set():
            answer = client.post(url, content=batch(seq))
            seq += per_batch
            if answer.status_code == 200:
                sent.acked_at.append(time.monotonic())
            else:
                sent.refused += 1
    results.put(sent)


class Prober(threading.Thread):
    """Asks `path` every `period` s, one request at a time, until `until` is set; keeps
    each answer's duration (s) and the failures."""

    def __init__(self, base: str, path: str, period: float, until: threading.Event):
        super().__init__(daemon=True)
        self.url, self.period, self.until = base + path, period, until
        self.durations: list[float] = []
        self.failures = 0

    def run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self.until.is_set():
                started = time.perf_counter()
                try:
                    ok = client.get(self.url).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.durations.append(time.perf_counter() - started)
                self.failures += not ok
                self.until.wait(max(0.0, self.period - (time.perf_counter() - started)))


def probe(base: str, seconds: float) -> dict[str, Prober]:
    """Every route of PROBES asked for `seconds` s, in parallel."""
    until = threading.Event()
    probers = {path: Prober(base, path, period, until) for path, period in PROBES.items()}
    for p in probers.values():
        p.start()
    time.sleep(seconds)
    until.set()
    for p in probers.values():
        p.join()
    return probers


def figures(p: Prober) -> str:
    """p50 / p99 / max of a prober's answers, in ms, and how many."""
    d = np.array(p.durations) * 1000
    fails = f", {p.failures} failed" if p.failures else ""
    return (f"p50 {np.percentile(d, 50):7.1f} ms  p99 {np.percentile(d, 99):7.1f} ms  "
            f"max {d.max():7.1f} ms  ({len(d)} answers{fails})")  # fmt: skip


def start_up(tree: Path, state: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`stacklens up` of the source tree `tree` (run from there: its packages come first)
    with `env`; returns it and its base URL once it says it is up (its output in
    state/up.log)."""
    log = state / "up.log"
    with log.open("w") as out:
        up = subprocess.Popen([sys.executable, "-m", "stacklens_cli", "up"], env=env,
                              stdout=out, stderr=out, cwd=tree)  # fmt: skip
    deadline = time.monotonic() + 180
    while "stacklens is up" not in log.read_text():
        if up.poll() is not None or time.monotonic() > deadline:
            up.kill()
            raise SystemExit(f"stacklens up did not come up:\n{log.read_text()}")
        time.sleep(0.2)
    return up, f"http://127.0.0.1:{env['STACKLENS_HTTP_PORT']}"


def rate(sent: list[Sent], start: float, end: float) -> str:
    """The ingest rate of `sent` between `start` and `end`, in words."""
    if not sent:
        return "none"
    acks = sum(s.within(start, end) for s in sent)
    frames, seconds = acks * sent[0].frames, end - start
    refused = sum(s.refused for s in sent)
    return (f"{frames / seconds:.2f} frames/s, {acks * sent[0].bytes / seconds / 1e6:.1f} MB/s, "
            f"{acks * sent[0].records / seconds:,.0f} file records/s ({frames} frames in "
            f"{seconds:.1f} s{f', {refused} refused' if refused else ''})")  # fmt: skip


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--senders", type=int, default=3, help="TCP sender processes")
    parser.add_argument("--http-senders", type=int, default=1, help="HTTP ingest sender processes")
    parser.add_argument("--seconds", type=float, default=30.0, help="each phase's length")
    parser.add_argument(
        "--distinct",
        type=int,
        default=4,
        help="frames of distinct file names each TCP sender encodes",
    )
    parser.add_argument(
        "--up-tree",
        type=Path,
        default=SOURCE_ROOT,
        help="the source tree whose `stacklens up` runs (default: this one)",
    )
    args = parser.parse_args()  # fmt: skip
    settings = Settings()
    max_body, http_body = settings.max_frame_bytes, settings.http_max_body_mb << 20
    scratch = Path(tempfile.mkdtemp(prefix="stacklens-bench-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_CONFIG_FILE=str(scratch / "none.env"), STACKLENS_STATE_DIR=str(scratch),
        STACKLENS_HTTP_PORT=str(free_port()), STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_INGEST_AUTH="trusted", STACKLENS_INGEST_TOKEN=TOKEN,
        STACKLENS_COLLECTOR_SOCKET="off", STACKLENS_FABRIC_SOURCE="none",
        STACKLENS_MAX_FRAME_BYTES=str(max_body),
        STACKLENS_HTTP_MAX_BODY_MB=str(settings.http_max_body_mb),
    )  # fmt: skip
    up, base = start_up(args.up_tree, scratch, env)
    spawn = multiprocessing.get_context("spawn")
    go, stop, results = spawn.Event(), spawn.Event(), spawn.Queue()
    address = ("127.0.0.1", int(env["STACKLENS_COLLECTOR"].rpartition(":")[2]))
    ready = [spawn.Event() for _ in range(args.senders + args.http_senders)]
    senders = [
        spawn.Process(target=tcp_sender, args=(i, address, max_body, args.distinct, ready[i],
                                               go, stop, results))
        for i in range(args.senders)
    ] + [
        spawn.Process(target=http_sender, args=(i, base, max_body, http_body,
                                                ready[args.senders + i], go, stop, results))
        for i in range(args.http_senders)
    ]  # fmt: skip
    try:
        for s in senders:
            s.start()
        for r in ready:
            if not r.wait(900):
                raise SystemExit("a sender did not get ready")
        probe(base, WARMUP_S)  # untimed: the first answers of a fresh server
        quiet = probe(base, args.seconds)
        go.set()
        start = time.monotonic()
        loaded = probe(base, args.seconds)
        end = time.monotonic()
        stop.set()
        sent: list[Sent] = [results.get(timeout=900) for _ in senders]
        for s in senders:
            s.join(60)
    finally:
        stop.set()
        go.set()
        up.terminate()
        up.wait(60)
        shutil.rmtree(scratch, ignore_errors=True)
    tcp = [s for s in sent if s.kind == "tcp"]
    http = [s for s in sent if s.kind == "http"]
    print(f"machine              : {platform.node()}, {os.cpu_count()} CPUs, "
          f"{platform.platform()}, load average {os.getloadavg()[0]:.1f}; `up` from "
          f"{args.up_tree}")  # fmt: skip
    one = sent[0].records // sent[0].frames
    batches = f"{http[0].bytes / 1e6:.1f} MB, {http[0].frames} frames" if http else "none"
    print(f"load                 : {args.senders} TCP senders x {WINDOW} frames in flight, "
          f"{args.http_senders} HTTP senders x 1 batch; frames of {max_body:,} B "
          f"(STACKLENS_MAX_FRAME_BYTES), each naming {one:,} files; HTTP batches of "
          f"{batches} (cap {http_body:,} B)")  # fmt: skip
    print(f"TCP ingest rate      : {rate(tcp, start, end)}")
    print(f"HTTP ingest rate     : {rate(http, start, end)}")
    for path in PROBES:
        print(f"{path:<12} no ingest: {figures(quiet[path])}")
        print(f"{path:<12}    ingest: {figures(loaded[path])}")
    for path, target in TARGETS.items():
        p99 = np.percentile(loaded[path].durations, 99)
        ratio = p99 / np.percentile(quiet[path].durations, 99)
        verdict = "met" if p99 <= target else "MISSED"
        print(f"{path:<12} p99 under ingest / without: {ratio:.1f}x; target "
              f"<= {target * 1000:.0f} ms {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
