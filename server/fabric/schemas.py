"""Response models of the fabric API (bytes, bytes/s, ns since the Unix epoch).

GUIDs are strings `0x` + 16 lowercase hex digits (the 64-bit GUID, unsigned), the form
fabric events use too: JSON numbers cannot carry 64 bits exactly in a browser.
A counter that is unknown (no sample, first sample, counter reset) is `null`, never 0.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from stacklens.schema import PORT_COUNTERS

#: Error counters of a port: those of `stacklens.schema.PORT_COUNTERS` after the data and
#: congestion counters (bytes, packets, xmit_wait), in that order.
ERROR_COUNTERS = PORT_COUNTERS[PORT_COUNTERS.index("xmit_wait") + 1 :]


class FabricNode(BaseModel):
    """A switch, HCA or router, as last discovered."""

    guid: str = Field(description="node GUID, e.g. 0x0002c90300000001")
    name: str = Field(description="NodeDescription, e.g. leaf01 or host07")
    type: Literal["switch", "hca", "router"]
    nports: int
    lid: int
    gone: bool = Field(description="missing from the latest discovery")
    gone_ns: int | None = Field(description="when it went missing; null while present")
    last_seen_ns: int


class LinkEnd(BaseModel):
    """One end of a link: a port of a node."""

    guid: str
    port: int
    name: str = Field(description="the node's name ('' if the node is unknown)")


class FabricLink(BaseModel):
    """A cable between two ports (a < b by GUID, then port)."""

    id: int
    a: LinkEnd
    b: LinkEnd
    state: Literal["up", "down"] = Field(description="down: missing from the latest discovery")
    down_ns: int | None = Field(description="when it went down; null while up")
    capacity_bytes_per_s: int | None = Field(
        description="data capacity (active width x speed; the smaller of the two ends known); "
        "null if unknown"
    )


class Topology(BaseModel):
    """Everything needed to draw the fabric: nodes (by GUID) and links (up and down)."""

    nodes: list[FabricNode]
    links: list[FabricLink]


class PortSample(BaseModel):
    """The latest counter sample of one end of a link, as stored (deltas since the
    previous sample of that port)."""

    ts_ns: int = Field(description="end of the sweep that read it")
    dt_ns: int | None = Field(description="time since the port's previous sample; null: first")
    xmit_bytes: int | None
    rcv_bytes: int | None
    xmit_wait: int | None = Field(description="ticks the port had data but could not send")
    errors: dict[str, int | None] = Field(description="delta of each error counter")
    saturated: list[str] = Field(
        description="counters stuck at their maximum: their delta is only a lower bound"
    )
    reset: list[str] = Field(description="counters that went down (reset): delta unknown")


class LinkLoad(BaseModel):
    """Load and errors of one link in the latest sample of each of its two ends."""

    id: int
    a: LinkEnd
    b: LinkEnd
    state: Literal["up", "down"]
    capacity_bytes_per_s: int | None
    ts_ns: int | None = Field(description="newest sample time of the two ends; null: none")
    a_to_b_bytes_per_s: float | None = Field(
        description="bytes a sent / dt (a's PortXmitData); null if unknown"
    )
    b_to_a_bytes_per_s: float | None
    utilisation: float | None = Field(
        description="the busier direction's bytes/s / capacity (0..1); null if unknown"
    )
    errors: dict[str, int | None] = Field(
        description="each error counter's delta summed over both ends in their latest "
        "sample; null if either end's delta is unknown"
    )
    errors_total: int = Field(description="sum of the known error deltas")
    unknown: list[str] = Field(
        description="counters (error counters, xmit_wait, a_to_b/b_to_a bytes) whose value "
        "is unknown"
    )
    xmit_wait: int | None = Field(description="PortXmitWait ticks of both ends; null if unknown")
    a_sample: PortSample | None = Field(
        default=None,
        description="latest sample of end a; null: none; left out with samples=false",
    )
    b_sample: PortSample | None = Field(default=None, description="the same of end b")


class FabricEvent(BaseModel):
    """A topology change or fault seen by the fabric sampler."""

    id: int
    ts_ns: int
    kind: str = Field(description="link_down | link_up | node_gone | node_new")
    subject: str = Field(description="e.g. 'host17[1] - leaf03[1]' or 'host17'")
    details: dict
