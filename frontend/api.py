# frontend/api.py — HTTP client (httpx) of the stacklens server API, the frontend's only source.
"""Typed, synchronous client for the server's `/api` endpoints used by the Dash pages.

Every failure (server unreachable, HTTP error, malformed body) is raised as `ApiError` with
a message meant to be shown to the user as-is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import flask
import httpx

_FLASK_EXTENSION = "stacklens_api"
_FILE_IO_COUNTERS = (
    "ranks",
    "opens",
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    "read_time_ns",
    "write_time_ns",
    "meta_time_ns",
)


#: comm_id of the collectives' overflow key.
OVERFLOW_COMM_ID = 0xFFFFFFFF
_COLLECTIVE_COUNTERS = ("comm_id", "comm_size", "root", "ranks", "calls", "bytes", "time_ns")
_COMMUNICATOR_COUNTERS = ("comm_id", "comm_size", "ranks", "ops", "calls", "bytes", "time_ns")
_RANK_COUNTERS = (
    "rank",
    "pid",
    "first_seen_ns",
    "last_seen_ns",
    "keys_dropped",
    "frames_dropped",
    "frames_spooled",
)


class ApiError(Exception):
    """The server could not be reached or did not answer as agreed; str() is user-facing."""


@dataclass(frozen=True)
class Job:
    """One row of `GET /api/jobs`."""

    job: str
    world_size: int
    command: str
    user: str
    status: str  # "running" | "finished" | "killed" (a rank ended by a signal) | "aborted" (a
    # rank called MPI_Abort) | "lost" (silent)
    started_ns: int
    last_seen_ns: int
    ranks_seen: int
    bytes_sent: int
    messages_sent: int


@dataclass(frozen=True)
class MatrixCell:
    """Point-to-point traffic sent from world rank `src` to world rank `dst`."""

    src: int
    dst: int
    bytes: int
    messages: int


@dataclass(frozen=True)
class Matrix:
    """`GET /api/jobs/{job}/matrix`: the non-zero cells of a job's rank x rank traffic."""

    job: str
    world_size: int
    cells: tuple[MatrixCell, ...]


@dataclass(frozen=True)
class OpTotal:
    """One MPI operation of a job, summed over its ranks and intervals."""

    op: str  # MPI function name, e.g. "MPI_Send"
    category: str  # mpi_p2p | mpi_completion | mpi_coll | mpi_rma | io | mpi_startup | other
    calls: int
    bytes: int
    time_ns: int  # time inside the call, summed over ranks
    ranks: int  # ranks that called it


@dataclass(frozen=True)
class CategoryTotal:
    """Calls, bytes and time of all the MPI operations of one traffic category."""

    category: str
    calls: int
    bytes_sent: int  # each message once, at its sender (and collective contributions)
    bytes_received: int  # receives, RMA gets, MPI-IO reads: not added to bytes_sent
    time_ns: int
    communication: bool  # its time is communication (not start-up)


@dataclass(frozen=True)
class JobOps:
    """`GET /api/jobs/{job}/ops`: the ops called (heaviest time first) and every category's
    totals (fixed order, zeros included)."""

    job: str
    categories: tuple[CategoryTotal, ...]
    ops: tuple[OpTotal, ...]


@dataclass(frozen=True)
class FileIo:
    """File-system I/O of a job on one file through one layer, summed over ranks and
    intervals."""

    layer: str  # "POSIX" | "stdio" | "MPI-IO"
    path: str
    mount: str
    fstype: str
    ranks: int
    opens: int
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    read_time_ns: int
    write_time_ns: int
    meta_time_ns: int  # open/close/seek/sync


@dataclass(frozen=True)
class JobIo:
    """`GET /api/jobs/{job}/io`: the job's files per (layer, path), most bytes first."""

    job: str
    files: tuple[FileIo, ...]
    startup_files: tuple[FileIo, ...] = ()  # I/O before MPI_Init (imports), kept apart


@dataclass(frozen=True)
class CollectiveTotal:
    """One collective op on one communicator with one root, summed over ranks and intervals."""

    op: str
    comm_id: int  # same on every member; OVERFLOW_COMM_ID = communicators beyond the key limit
    comm_size: int
    root: int  # world rank, -1 when the op has none
    ranks: int  # ranks that called it
    calls: int
    bytes: int
    time_ns: int


@dataclass(frozen=True)
class CommunicatorTotal:
    """All the collective calls on one communicator of a job."""

    comm_id: int
    comm_size: int
    overflow: bool  # the overflow key, not one communicator
    ranks: int
    ops: int  # distinct (op, root) rows on it
    calls: int
    bytes: int
    time_ns: int


@dataclass(frozen=True)
class JobCollectives:
    """`GET /api/jobs/{job}/collectives`: per communicator and per (communicator, op, root),
    heaviest time first."""

    job: str
    communicators: tuple[CommunicatorTotal, ...]
    collectives: tuple[CollectiveTotal, ...]


@dataclass(frozen=True)
class SizeBucket:
    """Messages of `lower_bytes` <= size < `upper_bytes` (log2 bucket; 0 = empty messages)."""

    bucket: int
    lower_bytes: int
    upper_bytes: int
    count: int


@dataclass(frozen=True)
class OpSizes:
    """The message-size histogram of one op (only buckets with messages, smallest first)."""

    op: str
    category: str
    messages: int
    buckets: tuple[SizeBucket, ...]


@dataclass(frozen=True)
class JobSizes:
    """`GET /api/jobs/{job}/sizes`: histograms per op, most messages first."""

    job: str
    ops: tuple[OpSizes, ...]


@dataclass(frozen=True)
class RmaOp:
    """One-sided calls and bytes of one op."""

    op: str
    calls: int
    bytes: int


@dataclass(frozen=True)
class RmaCell:
    """One-sided traffic from world rank `origin` to world rank `target`, with its ops."""

    origin: int
    target: int
    calls: int
    bytes: int
    ops: tuple[RmaOp, ...]


@dataclass(frozen=True)
class JobRma:
    """`GET /api/jobs/{job}/rma`: per op (most bytes first) and per (origin, target) pair."""

    job: str
    world_size: int
    ops: tuple[RmaOp, ...]
    cells: tuple[RmaCell, ...]


@dataclass(frozen=True)
class RankInfo:
    """Where one rank ran, its status and what the hook library could not account for."""

    rank: int
    host: str
    pid: int
    first_seen_ns: int
    last_seen_ns: int
    finished: bool
    killed: bool
    status: str  # "running" | "finished" | "killed" | "aborted" | "lost"
    abort_code: int | None  # MPI_Abort's error code
    keys_dropped: int  # new keys folded into an overflow key (STACKLENS_MAX_KEYS)
    frames_dropped: int  # frames lost (sender dropped, or collector rejected): counts missing
    frames_spooled: int  # frames that went through the spool directory


@dataclass(frozen=True)
class JobRanks:
    """`GET /api/jobs/{job}/ranks`: the ranks that reported, by world rank."""

    job: str
    world_size: int
    ranks: tuple[RankInfo, ...]


@dataclass(frozen=True)
class FabricNode:
    """A switch, HCA or router of `GET /api/fabric/topology`."""

    guid: str  # "0x" + 16 hex digits
    name: str
    type: str  # "switch" | "hca" | "router"
    nports: int
    lid: int
    gone: bool  # missing from the latest discovery
    gone_ns: int | None
    last_seen_ns: int


@dataclass(frozen=True)
class LinkEnd:
    """One end of a fabric link: port `port` of node `guid` (named `name`)."""

    guid: str
    port: int
    name: str

    def label(self) -> str:
        """`name[port]`, as fabric events write an end."""
        return f"{self.name or self.guid}[{self.port}]"


@dataclass(frozen=True)
class FabricLink:
    """A cable of `GET /api/fabric/topology` (up or down)."""

    id: int
    a: LinkEnd
    b: LinkEnd
    state: str  # "up" | "down"
    down_ns: int | None
    capacity_bytes_per_s: int | None  # None = unknown


@dataclass(frozen=True)
class FabricTopology:
    """`GET /api/fabric/topology`: every node (switches first) and link (by id)."""

    nodes: tuple[FabricNode, ...]
    links: tuple[FabricLink, ...]


@dataclass(frozen=True)
class LinkLoad:
    """One row of `GET /api/fabric/links`: a link's load and errors in the latest sample of
    each of its ends. None = unknown (never shown as 0)."""

    id: int
    a: LinkEnd
    b: LinkEnd
    state: str  # "up" | "down"
    capacity_bytes_per_s: int | None
    ts_ns: int | None  # newest sample of the two ends
    a_to_b_bytes_per_s: float | None
    b_to_a_bytes_per_s: float | None
    utilisation: float | None  # busier direction / capacity, 0..1
    errors: tuple[tuple[str, int | None], ...]  # (counter, delta in the last sweep)
    errors_total: int  # sum of the known error deltas
    unknown: tuple[str, ...]  # names of the unknown values
    xmit_wait: int | None  # PortXmitWait ticks of both ends


@dataclass(frozen=True)
class FabricEvent:
    """One row of `GET /api/fabric/events` (newest first)."""

    id: int
    ts_ns: int
    kind: str  # link_down | link_up | node_gone | node_new
    subject: str  # e.g. "host17[1] - leaf03[1]"


class StacklensApi:
    """Client of one stacklens server, e.g. `StacklensApi("http://127.0.0.1:7450")`."""

    def __init__(self, base_url: str, timeout_s: float = 5.0) -> None:
        """Connect lazily to `base_url` (the server root; endpoints live under /api)."""
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def jobs(self) -> list[Job]:
        """All known jobs, newest first."""
        body = self._get("/api/jobs")
        try:
            return [_job(row) for row in body]
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent an unexpected job list: {exc!r}") from exc

    def matrix(self, job: str) -> Matrix:
        """The rank x rank point-to-point matrix of `job` (the key is URL-quoted here)."""
        body = self._get(f"/api/jobs/{quote(job, safe='')}/matrix")
        try:
            cells = tuple(
                MatrixCell(
                    src=int(c["src"]),
                    dst=int(c["dst"]),
                    bytes=int(c["bytes"]),
                    messages=int(c["messages"]),
                )
                for c in body["cells"]
            )
            return Matrix(job=str(body["job"]), world_size=int(body["world_size"]), cells=cells)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent an unexpected matrix: {exc!r}") from exc

    def ops(self, job: str) -> JobOps:
        """Calls, bytes and time per MPI operation and per traffic category of `job`."""
        body = self._get(f"/api/jobs/{quote(job, safe='')}/ops")
        try:
            return JobOps(
                job=str(body["job"]),
                categories=tuple(
                    CategoryTotal(
                        category=str(c["category"]),
                        calls=int(c["calls"]),
                        bytes_sent=int(c["bytes_sent"]),
                        bytes_received=int(c["bytes_received"]),
                        time_ns=int(c["time_ns"]),
                        communication=bool(c["communication"]),
                    )
                    for c in body["categories"]
                ),
                ops=tuple(
                    OpTotal(
                        op=str(o["op"]),
                        category=str(o["category"]),
                        calls=int(o["calls"]),
                        bytes=int(o["bytes"]),
                        time_ns=int(o["time_ns"]),
                        ranks=int(o["ranks"]),
                    )
                    for o in body["ops"]
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent unexpected MPI operations: {exc!r}") from exc

    def io(self, job: str) -> JobIo:
        """File-system I/O per (layer, path) of `job`."""
        body = self._get(f"/api/jobs/{quote(job, safe='')}/io")
        try:
            files, startup = (
                tuple(
                    FileIo(
                        **{k: str(f[k]) for k in ("layer", "path", "mount", "fstype")},
                        **{k: int(f[k]) for k in _FILE_IO_COUNTERS},
                    )
                    for f in body[key]
                )
                for key in ("files", "startup_files")
            )
            return JobIo(job=str(body["job"]), files=files, startup_files=startup)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent unexpected file I/O: {exc!r}") from exc

    def collectives(self, job: str) -> JobCollectives:
        """Collective calls, bytes and time of `job` per communicator and per (communicator,
        op, root)."""
        body = self._get(f"/api/jobs/{quote(job, safe='')}/collectives")
        try:
            return JobCollectives(
                job=str(body["job"]),
                communicators=tuple(
                    CommunicatorTotal(
                        overflow=bool(c["overflow"]), **_ints(c, _COMMUNICATOR_COUNTERS)
                    )
                    for c in body["communicators"]
                ),
                collectives=tuple(
                    CollectiveTotal(op=str(c["op"]), **_ints(c, _COLLECTIVE_COUNTERS))
                    for c in body["collectives"]
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent unexpected collectives: {exc!r}") from exc

    def sizes(self, job: str) -> JobSizes:
        """The message-size histogram per MPI operation of `job`."""
        body = self._get(f"/api/jobs/{quote(job, safe='')}/sizes")
        try:
            return JobSizes(
                job=str(body["job"]),
                ops=tuple(
                    OpSizes(
                        op=str(o["op"]),
                        category=str(o["category"]),
                        messages=int(o["messages"]),
                        buckets=tuple(
                            SizeBucket(
                                **_ints(b, ("bucket", "lower_bytes", "upper_bytes", "count"))
                            )
                            for b in o["buckets"]
                        ),
                    )
                    for o in body["ops"]
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent unexpected message sizes: {exc!r}") from exc

    def rma(self, job: str) -> JobRma:
        """One-sided (RMA) calls and bytes of `job` per op and per (origin, target) pair."""
        body = self._get(f"/api/jobs/{quote(job, safe='')}/rma")
        try:
            return JobRma(
                job=str(body["job"]),
                world_size=int(body["world_size"]),
                ops=tuple(_rma_op(o) for o in body["ops"]),
                cells=tuple(
                    RmaCell(
                        **_ints(c, ("origin", "target", "calls", "bytes")),
                        ops=tuple(_rma_op(o) for o in c["ops"]),
                    )
                    for c in body["cells"]
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent unexpected RMA traffic: {exc!r}") from exc

    def ranks(self, job: str) -> JobRanks:
        """Host, pid, status and health counters of every rank of `job` that reported."""
        body = self._get(f"/api/jobs/{quote(job, safe='')}/ranks")
        try:
            return JobRanks(
                job=str(body["job"]),
                world_size=int(body["world_size"]),
                ranks=tuple(
                    RankInfo(
                        host=str(r["host"]),
                        status=str(r["status"]),
                        finished=bool(r["finished"]),
                        killed=bool(r["killed"]),
                        abort_code=None if r["abort_code"] is None else int(r["abort_code"]),
                        **_ints(r, _RANK_COUNTERS),
                    )
                    for r in body["ranks"]
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent unexpected ranks: {exc!r}") from exc

    def fabric_topology(self) -> FabricTopology:
        """Every fabric node and link the sampler discovered (gone and down ones included)."""
        body = self._get("/api/fabric/topology")
        try:
            nodes = tuple(
                FabricNode(
                    guid=str(n["guid"]),
                    name=str(n["name"]),
                    type=str(n["type"]),
                    nports=int(n["nports"]),
                    lid=int(n["lid"]),
                    gone=bool(n["gone"]),
                    gone_ns=_int_or_none(n["gone_ns"]),
                    last_seen_ns=int(n["last_seen_ns"]),
                )
                for n in body["nodes"]
            )
            links = tuple(
                FabricLink(
                    id=int(lk["id"]),
                    a=_link_end(lk["a"]),
                    b=_link_end(lk["b"]),
                    state=str(lk["state"]),
                    down_ns=_int_or_none(lk["down_ns"]),
                    capacity_bytes_per_s=_int_or_none(lk["capacity_bytes_per_s"]),
                )
                for lk in body["links"]
            )
            return FabricTopology(nodes=nodes, links=links)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent an unexpected fabric topology: {exc!r}") from exc

    def fabric_links(self, sort: str = "utilisation", limit: int | None = None) -> list[LinkLoad]:
        """Load and errors of the fabric's links; `sort` "utilisation" or "errors" (without
        the per-end raw samples, which the pages do not show)."""
        query = f"?sort={quote(sort)}&samples=false"
        query += f"&limit={int(limit)}" if limit is not None else ""
        body = self._get(f"/api/fabric/links{query}")
        try:
            return [
                LinkLoad(
                    id=int(x["id"]),
                    a=_link_end(x["a"]),
                    b=_link_end(x["b"]),
                    state=str(x["state"]),
                    capacity_bytes_per_s=_int_or_none(x["capacity_bytes_per_s"]),
                    ts_ns=_int_or_none(x["ts_ns"]),
                    a_to_b_bytes_per_s=_float_or_none(x["a_to_b_bytes_per_s"]),
                    b_to_a_bytes_per_s=_float_or_none(x["b_to_a_bytes_per_s"]),
                    utilisation=_float_or_none(x["utilisation"]),
                    errors=tuple((str(k), _int_or_none(v)) for k, v in x["errors"].items()),
                    errors_total=int(x["errors_total"]),
                    unknown=tuple(str(u) for u in x["unknown"]),
                    xmit_wait=_int_or_none(x["xmit_wait"]),
                )
                for x in body
            ]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ApiError(f"stacklens server sent unexpected fabric links: {exc!r}") from exc

    def fabric_events(self, limit: int = 20) -> list[FabricEvent]:
        """The newest `limit` fabric events, newest first."""
        body = self._get(f"/api/fabric/events?limit={int(limit)}")
        try:
            return [
                FabricEvent(
                    id=int(e["id"]),
                    ts_ns=int(e["ts_ns"]),
                    kind=str(e["kind"]),
                    subject=str(e["subject"]),
                )
                for e in body
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(f"stacklens server sent unexpected fabric events: {exc!r}") from exc

    def _get(self, path: str) -> Any:
        try:
            response = self._http.get(path)
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            url = f"{self.base_url}{path}"
            raise ApiError(f"stacklens server unreachable: {url}: {reason}") from exc
        if response.is_error:
            raise ApiError(
                f"stacklens server error: GET {path} returned HTTP {response.status_code}: "
                f"{_detail(response)}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(f"stacklens server sent invalid JSON for GET {path}") from exc


def attach_client(server: flask.Flask, client: StacklensApi) -> None:
    """Make `client` the API client of the Dash app whose Flask server is `server`."""
    server.extensions[_FLASK_EXTENSION] = client


def current_client() -> StacklensApi:
    """The API client of the Dash app handling the current request (for callbacks)."""
    return flask.current_app.extensions[_FLASK_EXTENSION]


def _job(row: dict[str, Any]) -> Job:
    return Job(
        job=str(row["job"]),
        world_size=int(row["world_size"]),
        command=str(row["command"]),
        user=str(row["user"]),
        status=str(row["status"]),
        started_ns=int(row["started_ns"]),
        last_seen_ns=int(row["last_seen_ns"]),
        ranks_seen=int(row["ranks_seen"]),
        bytes_sent=int(row["bytes_sent"]),
        messages_sent=int(row["messages_sent"]),
    )


def _ints(row: dict[str, Any], keys: tuple[str, ...]) -> dict[str, int]:
    return {k: int(row[k]) for k in keys}


def _rma_op(row: dict[str, Any]) -> RmaOp:
    return RmaOp(op=str(row["op"]), calls=int(row["calls"]), bytes=int(row["bytes"]))


def _link_end(end: dict[str, Any]) -> LinkEnd:
    return LinkEnd(guid=str(end["guid"]), port=int(end["port"]), name=str(end["name"]))


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _detail(response: httpx.Response) -> str:
    """FastAPI's {"detail": ...} if present, else the start of the body."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail is not None else response.text[:200] or response.reason_phrase
