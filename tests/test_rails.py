"""The binding of ranks to rails (stacklens/rails.py): the devices a rank's environment
names, local ranks per host, the rails a rank uses and how a message splits over rail
pairs, with exact expected values."""

from __future__ import annotations

import pytest

from stacklens import rails
from stacklens.rails import Binding


@pytest.mark.parametrize(
    ("net", "expected"),
    [
        ("UCX_NET_DEVICES=mlx5_1:1", ("mlx5_1",)),
        ("UCX_NET_DEVICES=mlx5_1:1,mlx5_0:1,mlx5_1:2", ("mlx5_1", "mlx5_0")),
        ("UCX_NET_DEVICES=all", ()),
        ("OMPI_MCA_btl_openib_if_include=mlx5_0:1,mlx5_3", ("mlx5_0", "mlx5_3")),
        ("FI_VERBS_DEVICE_NAME=mlx5_2", ("mlx5_2",)),
        ("MV2_IBA_HCA=mlx5_0:mlx5_1", ("mlx5_0", "mlx5_1")),
        ("SOMETHING_ELSE=mlx5_0", ()),
        ("MPIR_CVAR_CH4_OFI_MAX_NICS=1", ()),  # a limit names no device
        ("", ()),
        (None, ()),
    ],
)
def test_the_devices_a_rank_was_told(net, expected):
    assert rails.devices(net) == expected


@pytest.mark.parametrize(
    ("net", "expected"),
    [
        ("MPIR_CVAR_CH4_OFI_MAX_NICS=1", 1),
        ("MPICH_CH4_OFI_MAX_NICS=2", 2),
        ("MPIR_CVAR_CH4_OFI_MAX_NICS=-1", 0),  # MPICH's default: as many as it finds
        ("MPIR_CVAR_CH4_OFI_MAX_NICS=0", 0),
        ("MPIR_CVAR_CH4_OFI_MAX_NICS=two", 0),
        ("UCX_NET_DEVICES=mlx5_0:1", 0),
        (None, 0),
    ],
)
def test_the_rails_a_ranks_mpi_may_choose_from(net, expected):
    assert rails.rail_limit(net) == expected


def test_local_ranks_are_numbered_per_run_and_host_by_world_rank():
    rows = [(7, 3, "b", None), (7, 0, "a", None), (7, 2, "a", "UCX_NET_DEVICES=mlx5_1:1"),
            (7, 1, "b", None), (8, 0, "a", None),
            (8, 1, "a", "MPIR_CVAR_CH4_OFI_MAX_NICS=1")]  # fmt: skip
    assert rails.bindings(rows) == {
        (7, 0): Binding(0), (7, 2): Binding(1, ("mlx5_1",)),
        (7, 1): Binding(0), (7, 3): Binding(1), (8, 0): Binding(0), (8, 1): Binding(1, (), 1),
    }  # fmt: skip


def test_rails_are_in_device_order_and_ranks_pick_theirs():
    devices = sorted(["mlx5_10", "mlx5_2", "mlx5_0"], key=rails.rail_key)
    assert devices == ["mlx5_0", "mlx5_2", "mlx5_10"]
    assert rails.device_of("host02 mlx5_1") == "mlx5_1"
    assert rails.device_of("host02") == ""
    assert [rails.lanes(devices, Binding(n)) for n in range(4)] == [[0], [1], [2], [0]]
    assert rails.lanes(devices, Binding(1, ("mlx5_10", "mlx5_0"))) == [2, 0]
    assert rails.lanes(devices, Binding(1, ("mlx5_7",))) == [1]  # not on the host: by rank
    assert rails.lanes([], Binding(1)) == []
    # MPICH ch4:ofi told MPIR_CVAR_CH4_OFI_MAX_NICS=n: local rank mod n of the first n rails
    assert [rails.lanes(devices, Binding(n, (), 1)) for n in range(3)] == [[0], [0], [0]]
    assert [rails.lanes(devices, Binding(n, (), 2)) for n in range(3)] == [[0], [1], [0]]
    assert rails.lanes(devices, Binding(2, (), 8)) == [2]  # more than the host has: all
    assert rails.lanes(devices, Binding(0, ("mlx5_2",), 1)) == [1]  # named devices win


def test_a_message_splits_evenly_over_rail_pairs():
    assert rails.split([1], [0], 10) == [(1, 0, 10)]
    assert rails.split([0, 1], [0, 1], 11) == [(0, 0, 6), (1, 1, 5)]  # rail i to rail i
    assert rails.split([0, 1], [1], 3) == [(0, 1, 2), (1, 1, 1)]
    assert rails.split([0, 1, 2], [0, 1, 2], 2) == [(0, 0, 1), (1, 1, 1)]  # no empty pair
