"""JSON answers at any depth (issue 14, item 8).

The contracts now refuse values nested deeper than 32 levels (``chaincode.limits``), but a record
committed before that cannot be refused any more, and pydantic's serialiser gives up at 256 levels
(``Maximum serialization depth exceeded``), which made ``GET /api/v1/processes`` a 500 for every
member of a process whose hyper-parameters were nested 900 levels deep. :class:`DepthSafeRoute`
serialises a route's answer through its response model as FastAPI would (validation, aliases,
defaults, fields a model drops) and, only when pydantic cannot, converts the validated models field
by field -- the JSON values inside are passed on untouched -- and encodes the result with the
depth-safe :func:`chaincode.canonical.canonical_json`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from fastapi.datastructures import DefaultPlaceholder
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError
from starlette.responses import Response

from ledger.client import Record
from wire.canonical import canonical_json


def plain(value: Any) -> Any:
    """Validated response models as plain dicts (by alias, extras included; a ledger record as
    :meth:`Record.to_dict` gives it). Only models and the lists holding them are descended into; every
    other value is passed on as it is."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, BaseModel):
        out = {}
        for name, info in type(value).model_fields.items():
            out[info.alias or name] = plain(getattr(value, name))
        out.update(value.model_extra or {})
        return out
    if isinstance(value, (list, tuple)) and any(isinstance(v, BaseModel) for v in value):
        return [plain(v) for v in value]
    return value


def encode(adapter: TypeAdapter, data: Any) -> bytes:
    """The JSON of ``data`` through ``adapter``'s type, at any depth."""
    validated = adapter.validate_python(data)
    try:
        return adapter.dump_json(validated, by_alias=True)
    except PydanticSerializationError:
        return canonical_json(plain(validated))


class DepthSafeRoute(APIRoute):
    """An ``APIRoute`` whose JSON answer is produced by :func:`encode` (same body as FastAPI's
    serialisation whenever pydantic can serialise it; the response model still documents it)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any):
        model = kwargs.get("response_model")
        wrapped = getattr(endpoint, "_depth_safe", False)  # a router's route included in the app
        if model is not None and not isinstance(model, DefaultPlaceholder) and not wrapped:
            endpoint = _encoded(endpoint, TypeAdapter(model), kwargs.get("status_code") or 200)
        super().__init__(path, endpoint, **kwargs)


def _encoded(endpoint: Callable[..., Any], adapter: TypeAdapter, status: int) -> Callable[..., Any]:
    def answer(data: Any) -> Any:
        if isinstance(data, Response):
            return data
        return Response(encode(adapter, data), status_code=status, media_type="application/json")

    if asyncio.iscoroutinefunction(endpoint):

        @functools.wraps(endpoint)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return answer(await endpoint(*args, **kwargs))

        run_async._depth_safe = True  # type: ignore[attr-defined]
        return run_async

    @functools.wraps(endpoint)
    def run(*args: Any, **kwargs: Any) -> Any:
        return answer(endpoint(*args, **kwargs))

    run._depth_safe = True  # type: ignore[attr-defined]
    return run
