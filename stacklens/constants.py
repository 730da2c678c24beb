"""Names and codes every layer shares: counter lists, traffic categories, flag bits, ids,
bucket rules.

Pure data (standard library only), so the collector, the server, the frontend and the
storage schema read the same definitions. Where the wire format defines a list too
(`contract/stacklens_wire.def`), tests/test_constants.py checks that both agree.
"""

from __future__ import annotations

from typing import NamedTuple

#: Point-to-point counters of a peer record, in wire order (table p2p).
P2P_COUNTERS = ("bytes_sent", "msgs_sent", "bytes_recv", "msgs_recv")

#: File-system I/O counters of a file record, in wire order (table io).
IO_COUNTERS = (
    "opens",
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    "read_time_ns",
    "write_time_ns",
    "meta_time_ns",
)

#: I/O layer ids of the wire's io records and their labels: the SL_IO_LAYER lines of
#: contract/stacklens_wire.def (this module stays pure data; tests/test_constants.py checks
#: that both agree).
IO_LAYERS = {1: "POSIX", 2: "stdio", 3: "MPI-IO"}

#: The file I/O layers of the slow-rank profile's file I/O time (POSIX, stdio; MPI-IO's time
#: is that of its MPI_File calls: server/jobs/profile.py).
FILE_IO_LAYERS = tuple(k for k, name in IO_LAYERS.items() if name in ("POSIX", "stdio"))


class Category(NamedTuple):
    """A traffic category: of MPI operations (each op's, from its spec class or `traffic=`
    key: stacklens.mpi_ops) and of the transfers attributed to links (server/traffic)."""

    key: str  #: its name in the API, the stored rollups and the spec's traffic= keys
    label: str  #: how the pages and the reports name it (the same words everywhere)
    mpi_time: bool  #: its time is a share of the time inside MPI (slow-rank profile, rollups)
    communication: bool  #: its time is communication ("time inside MPI" on the job page)
    moving: bool  #: its bytes move between ranks: the MPI slowdown detector's bytes
    on_links: bool  #: its transfers are attributed to the links they cross


#: Every traffic category, in display order: the one declaration of their keys, labels and
#: which views and detectors use them. The subsets below are derived from it, and
#: tests/test_constants.py fails when a module writes a list of categories of its own.
CATEGORY_TABLE = (
    Category("mpi_p2p", "point-to-point", mpi_time=True, communication=True, moving=True,
             on_links=True),
    Category("mpi_completion", "wait/test", mpi_time=True, communication=True, moving=False,
             on_links=False),  # the completion calls: the time inside them is waiting
    Category("mpi_coll", "collective", mpi_time=True, communication=True, moving=True,
             on_links=True),
    Category("mpi_rma", "RMA", mpi_time=True, communication=True, moving=True, on_links=True),
    # ops: the MPI-IO calls; links: every layer's file I/O to the file system's servers
    Category("io", "file I/O", mpi_time=False, communication=True, moving=False,
             on_links=True),
    # MPI_Init*, MPI_Finalize, MPI_Abort: no communication (docs/design.md, Operation ids)
    Category("mpi_startup", "start-up (MPI_Init, MPI_Finalize, MPI_Abort)", mpi_time=False,
             communication=False, moving=False, on_links=False),
    Category("other", "other", mpi_time=True, communication=True, moving=False,
             on_links=False),
)  # fmt: skip

#: The category keys, in display order.
CATEGORIES = tuple(c.key for c in CATEGORY_TABLE)
#: How the pages and the reports name each category.
CATEGORY_LABELS = {c.key: c.label for c in CATEGORY_TABLE}
#: The MPI categories a slow-rank profile's share splits a step's MPI time into (start-up
#: and file I/O apart; server/jobs/profile.py). Their order is stored: the rollups' share
#: classes index it (stacklens/schema.py SHARE_CLASSES).
MPI_CATEGORIES = tuple(c.key for c in CATEGORY_TABLE if c.mpi_time)
#: The categories whose time is communication ("time inside MPI" on the page).
COMMUNICATION = tuple(c.key for c in CATEGORY_TABLE if c.communication)
#: The categories whose bytes move data between ranks: the MPI traffic the MPI slowdown
#: detector weighs its time against (server/incidents/repository.py).
MOVING = tuple(c.key for c in CATEGORY_TABLE if c.moving)
#: The categories of the transfers attributed to links (server/traffic, the reports'
#: attribution table; the API's TrafficCategory).
ON_LINKS = tuple(c.key for c in CATEGORY_TABLE if c.on_links)

#: Time spans in nanoseconds (the unit of every timestamp): the rollups' steps (a second, a
#: minute, five minutes) and the storage partitions' day.
SECOND_NS = 10**9
MINUTE_NS = 60 * SECOND_NS
FIVE_NS = 5 * MINUTE_NS
DAY_NS = 86_400 * SECOND_NS

#: comm_id of the collectives' overflow key (communicators beyond STACKLENS_MAX_KEYS).
OVERFLOW_COMM_ID = 0xFFFFFFFF

#: InfiniBand port counters and their kinds (data, packets, wait, error), in the order every
#: fabric source delivers them, the bit order of `valid` in the wire table hca and of the
#: fabric sample flags: the rows of contract/port_counters.def, repeated here as pure data
#: (tests/test_constants.py checks that both agree).
PORT_COUNTER_KINDS = {
    "xmit_bytes": "data",
    "rcv_bytes": "data",
    "xmit_pkts": "packets",
    "rcv_pkts": "packets",
    "xmit_wait": "wait",
    "symbol_errors": "error",
    "link_error_recovery": "error",
    "link_downed": "error",
    "rcv_errors": "error",
    "xmit_discards": "error",
    "vl15_dropped": "error",
}
PORT_COUNTERS = tuple(PORT_COUNTER_KINDS)

#: Error counters of a port: the counters of kind error.
ERROR_COUNTERS = tuple(c for c, kind in PORT_COUNTER_KINDS.items() if kind == "error")

#: Span of the fabric's finer rollups (`fabric_port_10s`), beside the minute ones: the whole
#: 10 s of a window's partial first and last minutes, steps of 10 s.
TEN_S_NS = 10 * 10**9

#: Counters of a port read as rates (per second of the sampled time that knows them): the
#: data, packet and congestion (wait) counters.
RATE_COUNTERS = tuple(c for c, kind in PORT_COUNTER_KINDS.items() if kind != "error")

#: Flag bits of a fabric port sample: bit SATURATED_SHIFT + i = counter i saturated (stuck
#: at its width's maximum: delta unknown), bit RESET_SHIFT + i = counter i reset (delta
#: unknown).
SATURATED_SHIFT = 0
RESET_SHIFT = 16
#: Flag bit of a fabric port sample: data/packet counters from the 64-bit PortCountersExtended.
FLAG_EXTENDED = 1 << 30


def flagged_counters(flags: int, shift: int) -> list[str]:
    """Names of the port counters whose bit is set in `flags` at `shift` (SATURATED_SHIFT or
    RESET_SHIFT)."""
    bits = flags >> shift & (1 << len(PORT_COUNTERS)) - 1
    return [c for i, c in enumerate(PORT_COUNTERS) if bits >> i & 1]


def bucket_bounds(bucket: int) -> tuple[int, int]:
    """Byte range [lower, upper) of a log2 message-size bucket: 0 holds empty messages,
    b >= 1 holds [2^(b-1), 2^b)."""
    return (0, 1) if bucket == 0 else (1 << (bucket - 1), 1 << bucket)


#: The header by which the dashboard reads the API as the viewer of the page request it
#: answers: the server's access gate puts a signed pass in every dashboard request, and
#: the dashboard's API client sends it on (server/access/gate.py, frontend/api.py).
VIEWER_PASS_HEADER = "X-Stacklens-Viewer-Pass"
