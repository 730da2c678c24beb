"""Which rails (HCAs) of its host a rank's traffic leaves and arrives on: the binding
policy shared by the traffic attribution (server/traffic) and the fabric emulator's job
feed (emulator/jobtraffic.py). Pure; docs/families.md "Ranks on rails" says why.

A host's rails are its HCAs in device-name order (`rail_key`: "host02 mlx5_0" before
"host02 mlx5_1", then by node GUID). A rank is bound, in this order:

1. **pinned**: its MPI was told devices (`ranks.net_devices`, "NAME=value" of
   UCX_NET_DEVICES, OMPI_MCA_btl_openib_if_include, FI_VERBS_DEVICE_NAME or MV2_IBA_HCA,
   as the hooks read them): the named devices the host has, in the order named. Several
   share its bytes evenly (UCX splits a large message over the devices it may use,
   Open MPI's ob1 stripes over its BTLs);
2. **local rank round-robin**: rail (local rank mod rails), the local rank being the
   rank's position among its run's ranks on the host by world rank (what Open MPI and
   the launchers number as the local rank when ranks are mapped by slot). This is
   MPICH ch4:ofi's default (each rank gets a preferred NIC, handed out round-robin over
   the node's NICs, used for all its traffic; striping and hashing off by default;
   MPIR_CVAR_CH4_OFI_MAX_NICS=n, also spelt MPICH_CH4_OFI_MAX_NICS, limits them to the
   first n, here the first n rails: n = 1 puts every rank on rail 0),
   Intel MPI's NIC pinning and the usual site wrapper that sets UCX_NET_DEVICES from
   the local rank. UCX left to choose with every device allowed splits large
   messages over up to UCX_MAX_RNDV_RAILS (2) rails: that is not modelled unless the
   devices are named (1.).

A message from rank a to rank b goes from one of a's rails to one of b's: with lanes
La and Lb (the rails of each), it is split evenly over max(|La|, |Lb|) pairs
(La[i mod |La|], Lb[i mod |Lb|]) (the first pairs take the remainder's bytes), so two
ranks striped over the same rails pair rail i with rail i.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: The variables the hooks report (mpi_pmpi_hooks/src/identity.c), and how each lists
#: devices: separators between entries; a ":port" suffix is dropped.
_LISTS = {
    "UCX_NET_DEVICES": ",",
    "OMPI_MCA_btl_openib_if_include": ",",
    "FI_VERBS_DEVICE_NAME": ",",
    "MV2_IBA_HCA": ":",
}


@dataclass(frozen=True)
class Binding:
    """What binds a rank to rails: its local rank on its host, the devices its MPI was
    told to use (empty: not pinned) and how many of its host's rails it may choose from,
    the first in rail order (0: all)."""

    local_rank: int = 0
    devices: tuple[str, ...] = ()
    limit: int = 0


#: The variables that limit how many of its host's NICs a rank's MPI uses (MPICH ch4:ofi:
#: a positive number; -1, the default, any other value or none: no limit).
_LIMITS = ("MPIR_CVAR_CH4_OFI_MAX_NICS", "MPICH_CH4_OFI_MAX_NICS")


#: A host endpoint without ranks of its own (a storage server): its first rail.
UNBOUND = Binding()


def devices(net_devices: str | None) -> tuple[str, ...]:
    """The device names in a rank's `net_devices` ("UCX_NET_DEVICES=mlx5_1:1,mlx5_0:1" ->
    ("mlx5_1", "mlx5_0")); () when none is named, the value is "all" or the variable is
    not one of the reported ones."""
    if not net_devices or "=" not in net_devices:
        return ()
    name, value = net_devices.split("=", 1)
    sep = _LISTS.get(name)
    if sep is None:
        return ()
    out: list[str] = []
    for entry in value.split(sep):
        device = entry.strip() if sep == ":" else entry.split(":", 1)[0].strip()
        if device and device.lower() != "all" and device not in out:
            out.append(device)
    return tuple(out)


def rail_limit(net_devices: str | None) -> int:
    """How many rails a rank's `net_devices` lets its MPI use ("MPIR_CVAR_CH4_OFI_MAX_NICS=1"
    -> 1); 0 (no limit) when it names no limit, or not a positive whole number."""
    if not net_devices or "=" not in net_devices:
        return 0
    name, value = net_devices.split("=", 1)
    value = value.strip()
    if name not in _LIMITS or not value.isdigit():
        return 0
    return int(value)


def bindings(ranks: Iterable[tuple[int, int, str, str | None]]) -> dict[tuple[int, int], Binding]:
    """(run, world rank) -> its Binding, from (run, world rank, host, net_devices) rows:
    local ranks numbered per (run, host) by world rank."""
    on: dict[tuple[int, str], list[int]] = defaultdict(list)
    named: dict[tuple[int, int], tuple[str, ...]] = {}
    limits: dict[tuple[int, int], int] = {}
    for run, rank, host, net in ranks:
        on[(run, host)].append(rank)
        named[(run, rank)] = devices(net)
        limits[(run, rank)] = rail_limit(net)
    out = {}
    for (run, _), members in on.items():
        for local, rank in enumerate(sorted(set(members))):
            out[(run, rank)] = Binding(local, named[(run, rank)], limits[(run, rank)])
    return out


def device_of(node_name: str) -> str:
    """The device of an HCA node's description ("host02 mlx5_1" -> "mlx5_1"; "" when it
    names none)."""
    parts = node_name.split(None, 1)
    return parts[1].strip() if len(parts) == 2 else ""


def rail_key(device: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key of a device name in rail order: numbers in it compare as numbers (mlx5_2
    before mlx5_10)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", device))


def lanes(rails: Sequence[str], binding: Binding) -> list[int]:
    """The indices into `rails` (a host's devices in rail order) the bound rank uses."""
    if not rails:
        return []
    pinned = [rails.index(d) for d in binding.devices if d in rails]
    usable = min(binding.limit, len(rails)) if binding.limit > 0 else len(rails)
    return pinned or [binding.local_rank % usable]


def split(src: Sequence[int], dst: Sequence[int], nbytes: int) -> list[tuple[int, int, int]]:
    """(source rail, destination rail, bytes) of a message of `nbytes` between ranks using
    the rails `src` and `dst` (indices, see the module's doc); exact in integers."""
    pairs = max(len(src), len(dst))
    base, extra = divmod(nbytes, pairs)
    out: dict[tuple[int, int], int] = {}
    for i in range(pairs):
        key = (src[i % len(src)], dst[i % len(dst)])
        out[key] = out.get(key, 0) + base + (1 if i < extra else 0)
    return [(a, b, n) for (a, b), n in out.items() if n > 0]
