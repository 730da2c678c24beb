"""The InfiniBand port counter table, read from `contract/port_counters.def`.

That file is the one declaration of the port counters: each line gives a counter's name,
kind (data, packets, wait, error), widths, unit scale and its field in every source (MAD,
sysfs, the simulator). The C readers (the fabric sampler's libslfabric, the hooks' local
HCA counters) expand it as X-macros; the Python readers (collector/fabric/counters.py,
sysfs.py, emulator/ibsim.py) take it from here. `stacklens.constants` keeps the names and
kinds as pure data for the frontend, checked against this table by tests/test_constants.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contract import PORT_COUNTERS_DEF

#: The kinds a counter may have; every kind but "error" is read as a rate.
KINDS = ("data", "packets", "wait", "error")


@dataclass(frozen=True)
class PortCounter:
    """One line of the table."""

    name: str  #: stacklens's name (hca wire field, fabric columns d_/t_<name>)
    kind: str  #: data, packets, wait or error
    basic_bits: int  #: width in PortCounters
    extended_bits: int  #: width with PortCountersExtended
    scale: int  #: factor from the sources' unit to bytes/packets/ticks (4: 4-octet words)
    mad: str  #: libibmad field of PortCounters
    mad_extended: str | None  #: libibmad field of PortCountersExtended, None if none
    sysfs: str  #: file under /sys/class/infiniband/<dev>/ports/<n>/counters/
    ibsim: str  #: the simulator's PortCounters(Extended) field


def _parse() -> tuple[PortCounter, ...]:
    text = re.sub(r"/\*.*?\*/", "", PORT_COUNTERS_DEF.read_text(encoding="utf-8"), flags=re.S)
    rows = []
    for m in re.finditer(r"SL_PORT_COUNTER\(([^)]*)\)", text):
        parts = [p.strip() for p in m.group(1).split(",")]
        name, kind, basic, extended, scale, mad, mad_ext, sysfs, ibsim = parts
        if kind not in KINDS:
            raise ValueError(f"{PORT_COUNTERS_DEF}: {name}: unknown kind {kind}")
        rows.append(
            PortCounter(
                name,
                kind,
                int(basic),
                int(extended),
                int(scale),
                mad,
                None if mad_ext == "IB_NO_FIELD" else mad_ext,
                sysfs.strip('"'),
                ibsim.strip('"'),
            )  # fmt: skip
        )
    return tuple(rows)


#: Every port counter, in the table's order (the hca record's field order).
PORT_COUNTER_TABLE = _parse()
