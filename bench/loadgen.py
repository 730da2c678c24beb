"""Load generator: imitates N ranks streaming real hook frames to a collector.

Each simulated rank opens its own TCP connection and sends `frames` interval frames of
`peers` point-to-point records each — all at once (throughput) or paced at `--rate`
frames/s over all ranks (latency) — and reads every acknowledgement. Frames are encoded
with the real wire module before the clock starts, and each rank's first `--warmup`
frames are sent and acknowledged before it starts (a sustained rate, without start-up).

    python -m bench.loadgen --collector 127.0.0.1:7451 --ranks 64 --frames 50 --peers 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import numpy as np

from stacklens import wire

T0 = time.time_ns() - 600 * 10**9  # recent: today's partition


def p2p_records(rng: np.random.Generator, rank: int, ranks: int, peers: int) -> np.ndarray:
    """One interval of point-to-point records with realistic, varying counters.

    Messages per peer vary (0-200), sizes are log-uniform between 8 B and 1 MiB, and
    what is received mirrors what is sent up to noise: data that compresses the way real
    counters do, not constants.
    """
    p2p = np.zeros(peers, dtype=wire.SPEC.table("p2p").dtype)
    p2p["peer"] = (rank + 1 + np.arange(peers)) % ranks
    msgs = rng.integers(0, 200, peers)
    size = np.exp2(rng.uniform(3, 20, peers)).astype(np.int64)
    p2p["msgs_sent"] = msgs
    p2p["bytes_sent"] = msgs * size
    p2p["msgs_recv"] = msgs + rng.integers(0, 3, peers)
    p2p["bytes_recv"] = p2p["msgs_recv"] * size
    return p2p


def rank_frames(
    job: str, rank: int, ranks: int, frames: int, peers: int, token: str
) -> list[bytes]:
    """All frames of one simulated rank."""
    rng = np.random.default_rng(rank)
    return [
        wire.encode_frame(
            job_id=job,
            world_rank=rank,
            world_size=ranks,
            seq=seq,
            token=token,
            interval_start_ns=T0 + seq * 10**9,
            interval_end_ns=T0 + (seq + 1) * 10**9,
            tables={"p2p": p2p_records(rng, rank, ranks, peers)},
        )  # fmt: skip
        for seq in range(frames)
    ]


async def stream_rank(
    host: str, port: int, frames: list[bytes], period: float
) -> tuple[list[float], list[float]]:
    """Send one rank's frames (all at once, or one per `period` s) and read every ack.

    Returns (send times, ack times) per frame; an ack means the frame is committed, i.e.
    queryable. Unpaced, the frames go out back to back in one write (like a rank that
    delivers its backlog after a reconnect) and the acks are read as they come, many per
    read, so the generator spends little of the machine's CPU on its own side.
    """
    reader, writer = await asyncio.open_connection(host, port)
    sent: list[float] = []

    async def send() -> None:
        if not period:
            sent.extend([time.perf_counter()] * len(frames))
            writer.write(b"".join(frames))
            await writer.drain()
            return
        for i, frame in enumerate(frames):
            await asyncio.sleep(max(0.0, start + i * period - time.perf_counter()))
            sent.append(time.perf_counter())
            writer.write(frame)
            await writer.drain()

    start = time.perf_counter()
    sender = asyncio.create_task(send())
    acked: list[float] = []
    pending = b""
    while len(acked) < len(frames):
        chunk = await reader.read(1 << 16)
        if not chunk:
            raise RuntimeError("the collector closed the connection")
        pending += chunk
        whole = len(pending) // wire.ACK_SIZE * wire.ACK_SIZE
        acks = np.frombuffer(pending[:whole], dtype=wire.ACK_DTYPE)
        pending = pending[whole:]
        if (acks["status"] != wire.Status.COMMITTED).any():
            raise RuntimeError(f"frame rejected with status {acks['status'].max()}")
        acked.extend([time.perf_counter()] * len(acks))
    await sender
    writer.close()
    return sent, acked


async def run(args: argparse.Namespace) -> dict:
    """Drive the load and return its figures."""
    host, _, port = args.collector.rpartition(":")
    job = f"loadgen-{time.time_ns()}"
    payloads = [
        rank_frames(job, r, args.ranks, args.warmup + args.frames, args.peers, args.token)
        for r in range(args.ranks)
    ]
    # Warm-up, not timed: every rank's first frames (the job and its ranks get created,
    # the writer's connections are up, the collector's start-up maintenance is over).
    if args.warmup:
        await asyncio.gather(
            *(stream_rank(host, int(port), p[: args.warmup], 0.0) for p in payloads)
        )
    payloads = [p[args.warmup :] for p in payloads]
    period = args.ranks / args.rate if args.rate else 0.0
    start, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(stream_rank(host, int(port), p, period) for p in payloads))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    total_frames = args.ranks * args.frames
    latency = np.concatenate([np.subtract(acked, sent) for sent, acked in results])
    return {
        "job": job,
        "frames": total_frames,
        "rows": total_frames * args.peers,
        "seconds": elapsed,
        "cpu_s": cpu,  # the generator's own CPU while timed (sending, reading acks)
        "frames_per_s": total_frames / elapsed,
        "rows_per_s": total_frames * args.peers / elapsed,
        "latency_p50_s": float(np.percentile(latency, 50)),
        "latency_p99_s": float(np.percentile(latency, 99)),
    }


def main() -> None:
    """Command-line entry point; prints one JSON line of figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--collector", default="127.0.0.1:7451")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--peers", type=int, default=64)
    parser.add_argument(
        "--warmup", type=int, default=2, help="frames per rank sent and acknowledged untimed"
    )
    parser.add_argument("--token", default="")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="frames/s over all ranks; 0 = as fast as possible"
    )
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
