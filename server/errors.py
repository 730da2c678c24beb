"""The error answers of the API: one JSON shape, documented on every route that returns it,
for bad requests, unknown paths and validation errors alike (never a 500 for bad input)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.routing import Match

#: What each documented error status means, for the OpenAPI document.
_MEANINGS = {
    400: "the request is malformed or the client left before sending it whole",
    401: "missing or wrong token (Authorization: Bearer ...)",
    403: "not allowed from this address",
    404: "no such resource",
    409: "the job id names jobs of several owners: say which with `owner` (the answer lists them)",
    413: "request body over the size cap",
    503: "the service cannot answer now; retry later",
}


class ValidationIssue(BaseModel):
    """One reason a request's parameters or body are invalid (without the value sent)."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every refusal: `detail` is the reason (a list of reasons when several; a list of
    issues for parameters or a body that do not validate)."""

    detail: str | list[str] | list[ValidationIssue]


def error_responses(*statuses: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: each status with the ErrorBody model; `described` adds
    statuses (as strings) with their own description, also with ErrorBody."""
    responses: dict[int | str, dict[str, Any]] = {
        s: {"model": ErrorBody, "description": _MEANINGS[s]} for s in statuses
    }
    for status, description in described.items():
        responses[int(status)] = {"model": ErrorBody, "description": description}
    return responses


_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

#: The 422 every route can answer (server/query_params.py refuses unknown parameters).
_UNPROCESSABLE = "an unknown query parameter, or parameters or a body that do not validate"


def document_refusals(app: FastAPI) -> None:
    """The OpenAPI document says, for every operation, that a 422 carries ErrorBody: every
    route refuses unknown query parameters (a reason string), and FastAPI would otherwise
    document its own validation-error shape there, which the answers do not have."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        shapes = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(shapes.pop("$defs", {}))
        components["ErrorBody"] = shapes
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                described = responses.get("422", {}).get("description", _UNPROCESSABLE)
                responses["422"] = {
                    "description": described,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                    },
                }
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _encodable(value: Any) -> Any:
    """A string that encodes as UTF-8 (lone surrogates escaped); other values as they are."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def install_error_handlers(app: FastAPI) -> None:
    """Validation errors without the values sent (they may hold what cannot be encoded,
    like a lone surrogate, or a secret), and a JSON 404 for any unknown /api/ path
    (instead of the dashboard's HTML page), 405 for a known one with another method; the
    document lists the 422 of every route (document_refusals)."""
    document_refusals(app)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": [_encodable(part) for part in e["loc"]], "msg": _encodable(e["msg"]),
             "type": e["type"]}
            for e in exc.errors()
        ]  # fmt: skip
        return JSONResponse(status_code=422, content={"detail": jsonable_encoder(errors)})

    @app.api_route("/api/{rest:path}", methods=_METHODS, include_in_schema=False)
    async def unknown_api_path(rest: str, request: Request) -> JSONResponse:
        allowed = [
            method
            for method in _METHODS
            if any(
                route.matches({**request.scope, "method": method})[0] == Match.FULL
                for route in request.app.router.routes[: request.app.router.routes.index(
                    request.scope["route"])]
            )
        ]  # fmt: skip
        if allowed:  # a real path, another method
            detail = {"detail": f"{request.method} not allowed here"}
            return JSONResponse(detail, 405, headers={"Allow": ", ".join(allowed)})
        return JSONResponse(status_code=404, content={"detail": f"unknown API path /api/{rest}"})
