"""`stacklens report`: a job's, an incident's, a fabric window's or a run comparison's
report as an HTML or PDF file, with a progress bar.

It asks the running server over HTTP (`GET /api/reports/...?progress=true`), never the
database: the report is then the one the dashboard's buttons download, made by the same
code, and it holds only what the caller may read (the server's owner filter, with the
caller's API token from STACKLENS_API_TOKEN; without one, the local viewer of
auth_mode=none). It works from any machine that reaches the server, for any user, without
database credentials.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path
from typing import IO
from urllib.parse import quote

import httpx

from stacklens.settings import LOOPBACK_HOSTS, Settings
from stacklens_cli.helptext import subcommand

#: Longest a report may take before the command gives up (s).
TIMEOUT_S = 600.0
#: Width of the progress bar in characters.
BAR = 30


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The `report` command."""
    report = subcommand(
        sub,
        "report",
        "Write the report of a job, an incident, a fabric window or a comparison of two runs "
        "as an HTML or a PDF file.",
        [
            "stacklens report --job 4242 -o job4242.pdf",
            "stacklens report --job 4242 --run 2 --from 2026-12-01T10:00:00Z -o run2.html",
            "stacklens report --incident 17 -o incident17.pdf",
            "stacklens report --compare 4242:1 4250 -o compare.pdf",
            "stacklens report --compare 4242:1 4242:1 --a-to 2026-12-01T10:05:00Z "
            "--b-from 2026-12-01T10:55:00Z -o phases.html",
            "stacklens report --from 2026-12-01T10:00:00Z --to 2026-12-01T11:00:00Z "
            "--hosts node01,node02 -o window.html",
        ],
        "The running server (`stacklens up`) makes it, exactly as the dashboard's download "
        "buttons do, with what your API token (STACKLENS_API_TOKEN) may read; the format "
        "follows the file name (.html or .pdf).",
    )
    what = report.add_mutually_exclusive_group()
    what.add_argument("--job", help="the job id")
    what.add_argument("--incident", type=int, help="the incident id")
    what.add_argument(
        "--compare",
        nargs=2,
        metavar=("JOB_A[:RUN]", "JOB_B[:RUN]"),
        help="two runs, each a job id with its run ordinal after a colon (default: the "
        "job's newest MPI run): run b against run a, call site by call site; "
        "--a-from/--a-to and --b-from/--b-to compare a window of either",
    )
    for side in ("a", "b"):
        for end, bound in (("from", "start"), ("to", "end")):
            report.add_argument(
                f"--{side}-{end}",
                dest=f"{side}_{end}",
                metavar="TIME",
                help=f"with --compare: the {bound} of run {side}'s window (RFC 3339 or epoch "
                f"seconds, as GET /api/compare's {side}_{end}); default: the run's {bound}",
            )
    report.add_argument(
        "--owner", help="the job's owner (its user), when the id names jobs of several owners"
    )
    report.add_argument("--run", type=int, help="one run of the job (ordinal); default: all")
    report.add_argument("--from", dest="start", help="window start: RFC 3339 or epoch seconds")
    report.add_argument("--to", dest="end", help="window end (same forms)")
    report.add_argument("--hosts", help="a window's hosts, comma-separated (default: all)")
    report.add_argument(
        "-o", "--output", type=Path, required=True, help="the file to write: NAME.html or NAME.pdf"
    )
    report.add_argument(
        "--server",
        help="the server's URL (default: from STACKLENS_HTTP_HOST and STACKLENS_HTTP_PORT)",
    )
    report.set_defaults(func=cmd_report)


def api_base_url(settings: Settings, given: str | None = None) -> str:
    """The server's URL: `given` (--server), else from STACKLENS_HTTP_HOST and _PORT (a
    wildcard address reached on the loopback)."""
    if given:
        return given.rstrip("/")
    host = settings.http_host if settings.http_host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    host = f"[{host}]" if ":" in host and host in LOOPBACK_HOSTS else host
    return f"http://{host}:{settings.http_port}"


#: The windows of the two runs of --compare: their arguments' names, which are also the
#: query parameters of GET /api/compare and /api/reports/compare (server/compare/sides.py).
_SIDE_WINDOWS = ("a_from", "a_to", "b_from", "b_to")


def run_of(text: str) -> tuple[str, str | None]:
    """(job, run ordinal or None) of `JOB[:RUN]`; a job id may hold colons itself, so only
    a last part made of digits is a run."""
    job, colon, run = text.rpartition(":")
    if colon and job and run.isdigit():
        return job, run
    return text, None


def request_of(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """(path, query parameters) of the report the arguments ask for; ValueError with a
    one-line reason when they ask for none or for something inconsistent."""
    suffix = args.output.suffix.lower().lstrip(".")
    if suffix not in ("html", "pdf"):
        raise ValueError(f"-o {args.output}: the file name must end in .html or .pdf")
    params = {"format": suffix, "progress": "true"}
    for key, value in (("from", args.start), ("to", args.end)):
        if value:
            params[key] = value
    windows = {name: getattr(args, name) for name in _SIDE_WINDOWS}
    if args.compare is not None:
        if args.hosts or args.start or args.end or args.run is not None or args.owner:
            raise ValueError("--compare takes no --from/--to, hosts, --run or --owner: "
                             "JOB[:RUN] names each run, --a-from/--a-to and --b-from/--b-to "
                             "a window of either")  # fmt: skip
        for side, text in zip(("a", "b"), args.compare, strict=True):
            job, run = run_of(text)
            params[side] = job
            if run is not None:
                params[f"{side}_run"] = run
        params.update({name: value for name, value in windows.items() if value})
        return "/api/reports/compare", params
    if any(windows.values()):
        raise ValueError("--a-from, --a-to, --b-from and --b-to go with --compare: a window "
                         "of run a or run b")  # fmt: skip
    if args.job is not None:
        if args.hosts:
            raise ValueError("--hosts goes with a window (--from/--to), not with --job")
        if args.run is not None:
            params["run"] = str(args.run)
        if args.owner is not None:
            params["owner"] = args.owner
        return f"/api/reports/jobs/{quote(args.job, safe='')}", params
    if args.run is not None or args.owner is not None:
        raise ValueError("--run and --owner go with --job")
    if args.incident is not None:
        if args.hosts or args.start or args.end:
            raise ValueError("--incident takes no window or hosts: the incident has its own")
        return f"/api/reports/incidents/{args.incident}", params
    if not (args.start and args.end):
        raise ValueError(
            "say what to report: --job J, --incident I, --compare A B, or --from T --to T"
        )
    if args.hosts:
        params["hosts"] = args.hosts
    return "/api/reports/window", params


def draw(out: IO[str], done: int, total: int, what: str, started: float) -> None:
    """One progress bar line, redrawn in place: `[#####-----] 3/7 what (12 s)`."""
    filled = BAR * done // total if total else 0
    out.write(
        f"\r[{'#' * filled}{'-' * (BAR - filled)}] {done}/{total} {what[:40]:<40} "
        f"({time.monotonic() - started:.0f} s)"
    )
    out.flush()


def cmd_report(settings: Settings, args: argparse.Namespace) -> int:
    """Ask the server for the report, show its progress, write the file."""
    try:
        path, params = request_of(args)
    except ValueError as exc:
        print(f"stacklens: {exc}", file=sys.stderr)
        return 2
    base = api_base_url(settings, args.server)
    headers = {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token else {}
    started = time.monotonic()
    total = 1
    try:
        with httpx.stream(
            "GET", base + path, params=params, headers=headers, timeout=TIMEOUT_S
        ) as answer:
            if answer.status_code != 200:
                answer.read()
                print(
                    f"stacklens: {base}{path}: {answer.status_code} {_detail(answer)}",
                    file=sys.stderr,
                )
                return 1
            for line in answer.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                if "error" in event:
                    sys.stderr.write("\n")
                    print(f"stacklens: {event['status']} {event['error']}", file=sys.stderr)
                    return 1
                if "file" in event:
                    body = base64.b64decode(event["file"])
                    args.output.write_bytes(body)
                    draw(sys.stderr, total, total, "written", started)
                    sys.stderr.write("\n")
                    print(f"{args.output}: {len(body):,} bytes ({event['media_type']})")
                    return 0
                total = max(total, event["total"])
                draw(sys.stderr, event["done"], total, event["what"], started)
    except httpx.HTTPError as exc:
        print(
            f"stacklens: {base}: {exc} (is `stacklens up` running? --server URL)", file=sys.stderr
        )
        return 1
    print("stacklens: the server ended the answer without the file", file=sys.stderr)
    return 1


def _detail(answer: httpx.Response) -> str:
    try:
        detail = answer.json().get("detail", answer.text)
    except ValueError:
        detail = answer.text
    return str(detail)[:300]
