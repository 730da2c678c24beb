"""HTTP ingest: a JSON batch of frames, handed whole to the collector, which validates it
like hook frames and stores it with the same writer (collector/ingest/json_frames.py).

The body is neither parsed nor stored in this process: under `stacklens up` the collector
runs in a process of its own, and a batch at the body cap must not hold the API's answers
back. The door (token, size cap) is server/ingest/gate.py.
"""

from __future__ import annotations

import email.message
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPBearer

from collector.control import CollectorUnavailable
from collector.ingest.json_frames import JsonBatch
from server.errors import error_responses
from server.ingest.schemas import IngestResult

router = APIRouter(prefix="/api/ingest", tags=["ingest"])

#: The request body the OpenAPI document declares (the route reads it as bytes).
_BODY = {
    "required": True,
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JsonBatch"}}},
}


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type announces JSON (application/json or application/*+json), the
    rule FastAPI applies to a body it parses."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


@router.post(
    "/frames",
    response_model=IngestResult,
    dependencies=[Security(HTTPBearer(auto_error=False, description="the ingest token"))],
    responses=error_responses(
        400, 401, 403, 413, 503, **{"422": "a frame is invalid: every reason, nothing stored"}
    ),
    openapi_extra={"requestBody": _BODY},
)
async def ingest_frames(request: Request) -> IngestResult:
    """Validate every frame of the batch (JsonBatch), then store them all; answer after
    COMMIT.

    Authorization: `Bearer <STACKLENS_INGEST_TOKEN>` (checked, with the body size cap
    STACKLENS_HTTP_MAX_BODY_MB, before the body is read: server/ingest/gate.py); with no
    token configured, only clients on the loopback interface are accepted (403 otherwise).
    Trusted mode only (STACKLENS_INGEST_AUTH=trusted): a token proves no Unix user, so a
    collector in proven mode answers 403 (docs/identity.md); the frames belong to the
    collector's user. A batch with any invalid frame is rejected whole (422, with each
    reason) and stores nothing; so is a batch that needs more days without a partition
    than its owner may still bring this hour (STACKLENS_MAX_NEW_DAYS_PER_HOUR, shared with
    the owner's TCP connections); a batch beyond the bytes its owner may have stored this
    hour (STACKLENS_MAX_MB_PER_HOUR, shared likewise) is answered 503: resend it later.
    Resent frames are stored once. The body must be sent as
    JSON (Content-Type: application/json). 503: the collector is not answering
    (restarting): resend later.
    """
    if not is_json(request.headers.get("content-type")):
        raise RequestValidationError([{
            "loc": ["body"], "type": "model_attributes_type",
            "msg": "the body must be a JSON batch (Content-Type: application/json)",
        }])  # fmt: skip
    try:
        answer = await request.app.state.collector.ingest(await request.body())
    except CollectorUnavailable as exc:  # said without the socket's path
        raise HTTPException(503, "the collector is not answering: resend later") from exc
    if answer.errors is not None:
        raise RequestValidationError(answer.errors)
    if answer.status != 200:
        raise HTTPException(answer.status, answer.detail)
    return IngestResult(stored=answer.stored)


def document_batch(app: FastAPI) -> None:
    """The OpenAPI document describes the JSON batch the ingest route takes (JsonBatch and
    the models it holds among the components), as if the route parsed it itself."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        shapes = JsonBatch.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(shapes.pop("$defs", {}))
        components["JsonBatch"] = shapes
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
