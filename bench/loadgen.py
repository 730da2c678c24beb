"""Load generator: imitates N ranks streaming real hook frames to a collector.

Each simulated rank opens its own TCP connection and sends `frames` interval frames of
`peers` point-to-point records each, pipelined, then waits for every acknowledgement.
Frames are encoded with the real wire module before the clock starts.

    python -m bench.loadgen --collector 127.0.0.1:7451 --ranks 64 --frames 50 --peers 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import numpy as np

from stacklens import wire

T0 = time.time_ns() - 3600 * 10**9


def rank_frames(job: str, rank: int, ranks: int, frames: int, peers: int, token: str) -> bytes:
    """All frames of one simulated rank, concatenated."""
    p2p = np.zeros(peers, dtype=wire.SPEC.table("p2p").dtype)
    p2p["peer"] = (rank + 1 + np.arange(peers)) % ranks
    p2p["bytes_sent"] = 4096
    p2p["msgs_sent"] = 1
    out = []
    for seq in range(frames):
        out.append(
            wire.encode_frame(
                job_id=job,
                world_rank=rank,
                world_size=ranks,
                seq=seq,
                token=token,
                interval_start_ns=T0 + seq * 10**9,
                interval_end_ns=T0 + (seq + 1) * 10**9,
                tables={"p2p": p2p},
            )
        )
    return b"".join(out)


async def stream_rank(host: str, port: int, payload: bytes, frames: int) -> list[float]:
    """Send one rank's frames and wait for its acks; returns per-frame ack times."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(payload)
    await writer.drain()
    acked = []
    for _ in range(frames):
        status, _seq = wire.decode_ack(await reader.readexactly(wire.ACK_SIZE))
        if status != wire.Status.COMMITTED:
            raise RuntimeError(f"frame rejected with status {status}")
        acked.append(time.perf_counter())
    writer.close()
    return acked


async def run(args: argparse.Namespace) -> dict:
    """Drive the load and return its figures."""
    host, _, port = args.collector.rpartition(":")
    job = f"loadgen-{time.time_ns()}"
    payloads = [
        rank_frames(job, r, args.ranks, args.frames, args.peers, args.token)
        for r in range(args.ranks)
    ]
    start = time.perf_counter()
    acks = await asyncio.gather(*(stream_rank(host, int(port), p, args.frames) for p in payloads))
    elapsed = time.perf_counter() - start
    total_frames = args.ranks * args.frames
    return {
        "job": job,
        "frames": total_frames,
        "rows": total_frames * args.peers,
        "seconds": elapsed,
        "frames_per_s": total_frames / elapsed,
        "rows_per_s": total_frames * args.peers / elapsed,
        "last_ack_s": max(a[-1] for a in acks) - start,
    }


def main() -> None:
    """Command-line entry point; prints one JSON line of figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--collector", default="127.0.0.1:7451")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--peers", type=int, default=64)
    parser.add_argument("--token", default="")
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
