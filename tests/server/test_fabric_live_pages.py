"""Live pages of the fabric links list across a sweep that reorders the links: a live
cursor is a position in the newest sweep's order, so the next page after a new sweep holds
the links that follow the new order's first pages (a sort key of the old order listed
links again or skipped them, and could point past every row)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.conftest import route_path
from tests.server.fabric_data import turn_order_round, write_small_fabric


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
