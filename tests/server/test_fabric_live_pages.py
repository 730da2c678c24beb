"""Live pages of the fabric links list across a sweep that reorders the links: a live
cursor is a position in the newest sweep's order, so the next page after a new sweep holds
the links that follow the new order's first pages (a sort key of the old order listed
links again or skipped them, and could point past every row); a live page is shared by
every viewer until the next sweep, with its ETag, compressed once."""

from __future__ import annotations

import gzip

import brotli
from fastapi.testclient import TestClient

from collector.fabric.counters import DeltaTracker
from collector.fabric.store import FabricStore
from server.compression import COMPRESS_FROM_BYTES
from tests.conftest import route_path
from tests.server.fabric_data import (
    CONGESTED,
    LATER,
    SECOND,
    SWEEP2,
    T0,
    _sweep,
    topology,
    turn_order_round,
    write_small_fabric,
)


def _page(api_client: TestClient, **params: str | int) -> dict:
    response = api_client.get(route_path(api_client, "fabric_links"), params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _ends(page: dict) -> list[tuple[str, str, float | None]]:
    return [(x["a"]["name"], x["b"]["name"], x["utilisation"]) for x in page["links"]]


def test_next_live_page_follows_the_newest_order(pg_url, api_client):
    write_small_fabric(pg_url)
    # By errors: host1's link (4 errors), spine1-leaf1 (none, 0.5), host2's (down).
    first = _page(api_client, sort="errors", limit=2)
    assert _ends(first) == [("host1", "leaf1", 0.1), ("spine1", "leaf1", 0.5)]
    turn_order_round(pg_url)
    # No errors in the newest sweep: host1's link (0.9), spine1-leaf1 (0.1), host2's. The
    # next page is what follows the first two of this order; spine1-leaf1's old sort key
    # would have listed it again.
    second = _page(api_client, sort="errors", limit=2, cursor=first["page"]["next_cursor"])
    assert _ends(second) == [("host2", "leaf1", None)]
    assert second["page"] == {"total": 3, "limit": 2, "next_cursor": None}
    assert _ends(_page(api_client, limit=3)) == [
        ("host1", "leaf1", 0.9), ("spine1", "leaf1", 0.1), ("host2", "leaf1", None),
    ]  # fmt: skip


def test_a_live_page_is_answered_anew_after_each_sweep(pg_url, api_client):
    """A live page is built once per sweep for every viewer: the same bytes and ETag (304
    to a client that has them) until the next sweep, then that sweep's loads."""
    path = route_path(api_client, "fabric_links")
    store = FabricStore(pg_url)
    try:
        store.write_topology(topology(with_host2=False), T0, [])
        tracker = DeltaTracker()
        store.write_samples(tracker.update(_sweep(SWEEP2, T0 + SECOND)))
        later = _added(SWEEP2, LATER)
        store.write_samples(tracker.update(_sweep(later, T0 + 2 * SECOND)))
        first = api_client.get(path, params={"limit": 2})
        assert _ends(first.json()) == [("host1", "leaf1", 0.9), ("spine1", "leaf1", 0.1)]
        again = api_client.get(path, params={"limit": 2})
        assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
        unchanged = api_client.get(path, params={"limit": 2},
                                   headers={"If-None-Match": first.headers["etag"]})  # fmt: skip
        assert unchanged.status_code == 304 and unchanged.content == b""
        # the next sweep: spine1 -> leaf1 at 0.04, leaf1 -> host1 idle
        store.write_samples(tracker.update(_sweep(_added(later, CONGESTED), T0 + 3 * SECOND)))
        after = api_client.get(path, params={"limit": 2},
                               headers={"If-None-Match": first.headers["etag"]})  # fmt: skip
        assert after.status_code == 200 and after.headers["etag"] != first.headers["etag"]
        assert _ends(after.json()) == [("spine1", "leaf1", 0.04), ("host1", "leaf1", 0.0)]
        assert after.json()["freshness"]["last_sweep_ns"] == T0 + 3 * SECOND
    finally:
        store.close()


def test_a_shared_page_is_compressed_once_and_equal_to_the_plain_one(pg_url, api_client):
    write_small_fabric(pg_url)
    path = route_path(api_client, "fabric_links")
    plain = api_client.get(path, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and len(plain.content) >= COMPRESS_FROM_BYTES
    for coding, decode in (("gzip", gzip.decompress), ("br", brotli.decompress)):
        with api_client.stream("GET", path, headers={"Accept-Encoding": coding}) as raw:
            assert raw.headers["content-encoding"] == coding
            assert raw.headers["vary"] == "Accept-Encoding"
            assert raw.headers["etag"] == plain.headers["etag"]
            wire = b"".join(raw.iter_raw())
        assert int(raw.headers["content-length"]) == len(wire)
        assert decode(wire) == plain.content


def _added(values: dict, more: dict) -> dict:
    """Counter values with `more` words added to them."""
    out = {end: dict(v) for end, v in values.items()}
    for end, extra in more.items():
        for name, words in extra.items():
            out.setdefault(end, {})[name] = out.get(end, {}).get(name, 0) + words
    return out
