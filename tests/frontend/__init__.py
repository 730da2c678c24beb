"""Tests of the frontend's pure pieces (components, figures, the fabric graph)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

_M = TypeVar("_M", bound=BaseModel)


def positional(model: type[_M]) -> Callable[..., _M]:
    """A constructor of the response model `model` that takes its fields in declaration
    order, as the tests' short form (`RmaOp("MPI_Put", 4, 64)`)."""

    def make(*values: object, **named: object) -> _M:
        return model(**dict(zip(model.model_fields, values, strict=False)), **named)

    return make
