"""Access benchmark: what the access gate and the owner filter cost a request.

Seeds --jobs jobs through the real collector (bench.jobs_page's frames), gives the
odd-numbered jobs to bob (the owner column), serves the API on a uvicorn thread of this
process three times and prints the median of --repeat requests of `GET /api/overview`
(the Jobs page's one request per refresh) and `GET /api/jobs/<job>/matrix` as:
- the local viewer of auth_mode=none (no filter: the cost before access control);
- alice through the proxy header (the owner filter only);
- alice with an API token (a token look-up per request, then the filter).

    .venv/bin/python -m bench.access [--jobs 1000 --ranks 4 --intervals 30 --repeat 9]
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import tempfile
import time
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.orm import Session

from bench.fabric_api import timed
from bench.jobs_page import seed_jobs
from server.access import tokens
from server.access.viewer import Access
from server.app import create_app
from stacklens.db import make_engine, migrate, start_embedded
from tests.conftest import serving


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--intervals", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        migrate(database.url)
        t = time.perf_counter()
        seed_jobs(database.url, args.jobs, args.ranks, args.intervals)
        engine = make_engine(database.url)
        with engine.begin() as conn:
            odd = "right(job_key, 1)::int % 2 = 1"  # bench-00001, bench-00003, ...
            conn.execute(text(f"UPDATE jobs SET \"user\" = 'bob' WHERE {odd}"))
        with Session(engine) as session:
            token = tokens.create(session, "alice", "bench", 1)[0]
        print(f"seeded {args.jobs} jobs (half alice's, half bob's) in "
              f"{time.perf_counter() - t:.1f} s")  # fmt: skip
        newest_alice = f"bench-{(args.jobs - 1) // 2 * 2:05d}"  # the newest even-numbered

        cases = [
            ("none (no filter)", Access(), {}),
            ("proxy header", Access(mode="proxy", proxies=(ipaddress.ip_network("127.0.0.1"),)),
             {"X-Forwarded-User": "alice"}),
            ("API token", Access(mode="oidc"), {"Authorization": f"Bearer {token}"}),
        ]  # fmt: skip
        for name, access, headers in cases:
            app = create_app(engine, access=access)
            with serving(app) as port:
                http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers,
                                    timeout=120)  # fmt: skip
                figures = []
                for path in ("/api/overview", f"/api/jobs/{newest_alice}/matrix"):
                    seconds, response = timed(functools.partial(http.get, path), args.repeat)
                    assert response.status_code == 200, response.text
                    figures.append(f"GET {path.split('/')[2]}: {seconds * 1e3:.1f} ms")
                total = http.get("/api/overview").json()["jobs"]["page"]["total"]
                print(f"{name:18} {', '.join(figures)} ({total} jobs visible)")
        engine.dispose()
        database.stop()


if __name__ == "__main__":
    main()
