"""Content coding of the answers (server/compression.py): Accept-Encoding read with its
q-values; JSON and CSV answers of 1 KiB or more in br or gzip, decoded equal to the plain
answer, with exact headers; smaller ones as they are; answers compressed once by their
route passed as they are; streamed answers chunk by chunk; HEAD; over a real database and
fabric, and the real middleware over a small app of its own for the streamed answers."""

from __future__ import annotations

import gzip

import brotli
import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from server.compression import COMPRESS_FROM_BYTES, Compression, negotiate
from server.export import SplicedJson
from tests.conftest import route_path
from tests.server.fabric_data import write_small_fabric
from tests.server.test_job_windows import M0, S, job  # noqa: F401 (fixture)

DECODE = {"br": brotli.decompress, "gzip": gzip.decompress}


@pytest.mark.parametrize(("header", "large", "small"), [
    (None, "identity", "identity"),  # no header: no coding
    ("", "identity", "identity"),
    ("identity", "identity", "identity"),
    ("gzip", "gzip", "identity"),
    ("x-gzip", "gzip", "identity"),
    ("GZip", "gzip", "identity"),
    ("br", "br", "identity"),
    ("gzip, br", "br", "identity"),  # a tie: br
    ("gzip, deflate, br, zstd", "br", "identity"),
    ("br;q=0.2, gzip;q=0.2", "br", "identity"),  # identity unnamed: after them
    ("gzip;q=0.001", "gzip", "identity"),
    ("gzip;q=1.0, br;q=0.9", "gzip", "identity"),
    ("br;q=0.5, gzip;q=0.6", "gzip", "identity"),
    ("gzip;q=0.5, identity", "identity", "identity"),  # identity preferred
    ("gzip;q=0.5, identity;q=0.4", "gzip", "identity"),
    ("*", "br", "identity"),
    ("br;q=0, *", "gzip", "identity"),
    ("*;q=0.3, gzip;q=0.4", "gzip", "identity"),
    ("br;q=0, gzip;q=0", "identity", "identity"),
    ("deflate", "identity", "identity"),
    ("identity;q=0, gzip", "gzip", "gzip"),  # identity refused: small answers compressed
    ("*;q=0, br", "br", "br"),
    ("*;q=0, identity, gzip", "gzip", "identity"),
    ("identity;q=0", "identity", "identity"),  # nothing acceptable: as it is (RFC 9110)
    ("br;q=2, gzip", "gzip", "identity"),  # a malformed q-value: the entry ignored
    ("br;q=0.1234, gzip;q=0.5", "gzip", "identity"),
    ("br;q=abc", "identity", "identity"),
    (" br ; q=0.001 , gzip ; q=0 ", "br", "identity"),
])  # fmt: skip
def test_accept_encoding_is_read_with_its_q_values(header, large, small):
    accepted = negotiate(header)
    assert accepted.for_size(COMPRESS_FROM_BYTES) == large
    assert accepted.for_size(COMPRESS_FROM_BYTES - 1) == small


def _wire(client: TestClient, path: str, accept: str, method: str = "GET"):
    """The answer's headers and its bytes as sent (the test client decodes otherwise)."""
    with client.stream(method, path, headers={"Accept-Encoding": accept}) as raw:
        return raw.status_code, raw.headers, b"".join(raw.iter_raw())


def _assert_coded(client: TestClient, path: str, media_type: str) -> int:
    """`path`'s answer in br and gzip: exact headers, decoded equal to the plain answer (its
    length returned); the plain answer exact too."""
    status, plain_headers, plain = _wire(client, path, "identity")
    assert status == 200 and len(plain) >= COMPRESS_FROM_BYTES
    assert "content-encoding" not in plain_headers
    assert plain_headers["vary"] == "Accept-Encoding"
    assert plain_headers["content-type"] == media_type
    assert int(plain_headers["content-length"]) == len(plain)
    for accept, coding in (("br", "br"), ("gzip", "gzip"), ("gzip, br", "br"),
                           ("br;q=0.5, gzip", "gzip")):  # fmt: skip
        status, headers, wire = _wire(client, path, accept)
        assert status == 200
        assert headers["content-encoding"] == coding
        assert headers["vary"] == "Accept-Encoding"
        assert headers["content-type"] == media_type
        assert int(headers["content-length"]) == len(wire) < len(plain)
        assert DECODE[coding](wire) == plain  # once: no double compression
    return len(plain)


def test_json_answers_of_every_kind_are_coded(pg_url, api_client):
    """Compressed by the app's middleware (the OpenAPI document), and by the route once for
    every viewer (the topology, the live links page)."""
    write_small_fabric(pg_url)
    _assert_coded(api_client, "/openapi.json", "application/json")
    for name in ("fabric_topology", "fabric_links"):
        _assert_coded(api_client, route_path(api_client, name), "application/json")


def test_csv_answers_are_coded(job, api_client):  # noqa: F811
    """A job's series per rank as CSV (made in the database)."""
    path = f"/api/jobs/windows/series?by=rank&from={M0 // S}&to={M0 // S + 200}&format=csv"
    _assert_coded(api_client, path, "text/csv; charset=utf-8")


def test_small_answers_go_as_they_are_unless_identity_is_refused(pg_url, api_client):
    status, headers, body = _wire(api_client, "/api/health", "gzip, br")
    assert status == 200 and len(body) < COMPRESS_FROM_BYTES
    assert "content-encoding" not in headers
    assert headers["vary"] == "Accept-Encoding"
    assert int(headers["content-length"]) == len(body)
    status, headers, wire = _wire(api_client, "/api/health", "identity;q=0, gzip")
    assert headers["content-encoding"] == "gzip"
    assert int(headers["content-length"]) == len(wire)
    assert gzip.decompress(wire) == body


def test_already_compressed_media_are_left_alone(job, api_client):  # noqa: F811
    path = f"/api/jobs/windows/series?by=rank&from={M0 // S}&to={M0 // S + 200}&format=parquet"
    status, headers, body = _wire(api_client, path, "br, gzip")
    assert status == 200 and len(body) >= COMPRESS_FROM_BYTES
    assert "content-encoding" not in headers and "vary" not in headers
    assert body[:4] == b"PAR1"


def test_a_not_modified_answer_says_it_varies(pg_url, api_client):
    write_small_fabric(pg_url)
    path = route_path(api_client, "fabric_topology")
    etag = api_client.get(path).headers["etag"]
    unchanged = api_client.get(path, headers={"If-None-Match": etag, "Accept-Encoding": "br"})
    assert unchanged.status_code == 304
    assert unchanged.headers["vary"] == "Accept-Encoding"
    assert "content-encoding" not in unchanged.headers


def test_head_says_the_coding_a_get_would_have(pg_url, api_client):
    """A file served by StaticFiles answers HEAD with no body: the coding a GET would have,
    no Content-Length (its compressed length is not known without compressing)."""
    path = "/docs-assets/swagger-ui-bundle.js"
    _, plain_headers, plain = _wire(api_client, path, "identity")
    status, headers, body = _wire(api_client, path, "br", method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["content-encoding"] == "br"
    assert headers["vary"] == "Accept-Encoding"
    assert "content-length" not in headers
    status, headers, body = _wire(api_client, path, "identity", method="HEAD")
    assert (status, body) == (200, b"")
    assert "content-encoding" not in headers
    assert int(headers["content-length"]) == len(plain)


def test_a_shared_page_in_every_coding_is_its_head_and_tail():
    """SplicedJson: the head compressed once, each tail spliced on (a brotli tail of more
    than one 64 KiB meta-block too), decoded equal to the plain answer."""
    page = SplicedJson({"rows": [{"id": i, "name": f"link{i}"} for i in range(3000)]})
    for tail in ({"to_ns": 5}, {"to_ns": 7, "notes": "x" * 70_000}):
        plain = page.response("identity", tail)
        assert "content-encoding" not in plain.headers
        for coding in ("br", "gzip"):
            coded = page.response(coding, tail)
            assert coded.headers["content-encoding"] == coding
            assert coded.headers["vary"] == "Accept-Encoding"
            assert int(coded.headers["content-length"]) == len(coded.body)
            assert DECODE[coding](coded.body) == plain.body
    small = SplicedJson({"rows": []}).response("br", {"to_ns": 5})
    assert "content-encoding" not in small.headers and small.body == b'{"rows":[],"to_ns":5}'


#: A CSV of 2,000 rows, streamed in chunks of 100 rows.
ROWS = [f"{i},link{i},{i * 0.5}\r\n".encode() for i in range(2000)]


def _streamed_app() -> Starlette:
    """The middleware over a small app: a CSV streamed in chunks, a short streamed answer,
    and a whole answer (which Starlette sends on HEAD too)."""

    async def chunks(rows: list[bytes]):
        for start in range(0, len(rows), 100):
            yield b"".join(rows[start : start + 100])

    routes = [
        Route("/big.csv", lambda _: StreamingResponse(chunks(ROWS), media_type="text/csv")),
        Route("/short.csv", lambda _: StreamingResponse(chunks(ROWS[:3]), media_type="text/csv")),
        # one chunk of 128 KiB or more: coded in a worker thread
        Route("/file.csv", lambda _: StreamingResponse(iter([b"".join(ROWS) * 8]),
                                                       media_type="text/csv")),
        Route("/whole.csv", lambda _: Response(b"".join(ROWS), media_type="text/csv"),
              methods=["GET", "HEAD"]),
    ]  # fmt: skip
    app = Starlette(routes=routes)
    app.add_middleware(Compression)
    return app


def test_streamed_answers_are_coded_chunk_by_chunk():
    with TestClient(_streamed_app()) as client:
        for coding in ("br", "gzip"):
            status, headers, wire = _wire(client, "/big.csv", coding)
            assert status == 200
            assert headers["content-encoding"] == coding
            assert headers["vary"] == "Accept-Encoding"
            assert "content-length" not in headers
            assert DECODE[coding](wire) == b"".join(ROWS)
            _, headers, wire = _wire(client, "/file.csv", coding)
            assert headers["content-encoding"] == coding and "content-length" not in headers
            assert DECODE[coding](wire) == b"".join(ROWS) * 8
        status, headers, body = _wire(client, "/short.csv", "br")  # under 1 KiB when it ended
        assert "content-encoding" not in headers and body == b"".join(ROWS[:3])
        assert headers["vary"] == "Accept-Encoding"


def test_head_of_a_whole_answer_has_the_length_of_its_get():
    with TestClient(_streamed_app()) as client:
        _, got, wire = _wire(client, "/whole.csv", "br")
        status, headers, body = _wire(client, "/whole.csv", "br", method="HEAD")
        assert (status, body) == (200, b"")
        assert headers["content-encoding"] == "br"
        assert headers["content-length"] == got["content-length"] == str(len(wire))
