"""The collector's compiled helpers and their ctypes mirrors agree: struct sizes of the
codec (collector/csrc/slcodec.c vs collector/codec.py), row layout, counter order and
status bits of the fabric helper (collector/fabric/csrc/slfabric.c vs
collector/fabric/mad.py); a library built from other sources is refused."""

from __future__ import annotations

import ctypes
import subprocess

import pytest

from collector import codec
from collector.fabric import mad
from stacklens.constants import PORT_COUNTERS

#: A stand-in library whose ABI functions describe other layouts.
MISMATCHED = r"""
#include <stdint.h>
void sl_abi_sizes(uint32_t s[4]) { s[0] = 8; s[1] = 8; s[2] = 8; s[3] = 8; }
void slf_abi(uint32_t s[4]) { s[0] = 11; s[1] = 8; s[2] = 1; s[3] = 2; }
const char *slf_counter_name(int i)
{
    static const char *const names[] = { "rcv_bytes", "xmit_bytes", "xmit_pkts", "rcv_pkts",
        "xmit_wait", "symbol_errors", "link_error_recovery", "link_downed", "rcv_errors",
        "xmit_discards", "vl15_dropped" };
    return i >= 0 && i < 11 ? names[i] : 0;
}
"""


@pytest.fixture(scope="module")
def mismatched(tmp_path_factory) -> ctypes.CDLL:
    src = tmp_path_factory.mktemp("abi") / "mismatched.c"
    src.write_text(MISMATCHED)
    lib = src.with_suffix(".so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return ctypes.CDLL(str(lib))


def test_the_built_helpers_match_their_mirrors():
    codec.check_abi(codec.library())
    fabric = mad.load_library(build=False)
    mad.check_abi(fabric)
    assert [fabric.slf_counter_name(i).decode() for i in range(11)] == list(PORT_COUNTERS)
    assert fabric.slf_counter_name(11) is None


def test_a_codec_of_other_struct_sizes_is_refused(mismatched):
    with pytest.raises(RuntimeError, match="ABI sizes"):
        codec.check_abi(mismatched)


def test_a_fabric_helper_with_other_counter_columns_is_refused(mismatched):
    with pytest.raises(mad.MadError, match="rebuild"):
        mad.check_abi(mismatched)


def test_a_codec_library_older_than_its_sources_is_rebuilt(tmp_path, monkeypatch):
    """A libslcodec.so older than any of its sources (a build of an earlier checkout, whose
    functions take other arguments) counts as stale, like a missing one; once built again
    it does not."""
    import os
    import shutil

    root = codec.LIBRARY.parent.parent
    shutil.copytree(root / "csrc", tmp_path / "collector" / "csrc")
    shutil.copytree(root.parent / "contract", tmp_path / "contract")
    library = tmp_path / "collector" / "build" / "libslcodec.so"
    monkeypatch.setattr(codec, "LIBRARY", library)
    monkeypatch.setattr(codec, "_SOURCES", tmp_path / "collector" / "csrc")
    monkeypatch.setattr(codec, "_CONTRACT", tmp_path / "contract")
    assert codec._stale()
    subprocess.run(["make", "-s", "-C", str(tmp_path / "collector" / "csrc")], check=True)
    assert not codec._stale()
    built = library.stat().st_mtime
    os.utime(tmp_path / "contract" / "stacklens_wire.def", (built + 1, built + 1))
    assert codec._stale()
