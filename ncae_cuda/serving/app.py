"""The HTTP face of a served model: FastAPI endpoints, JSON in and out, every client mistake a
4xx with a one-line {"error": ...} (an unknown user or item 404, naming it).

    GET  /healthz             the model that answers (file, sha256, kind, shape, device), batches;
                              503 once the batcher has stopped, its error saying why
    GET  /recommend?user=ID&n=N[&keep_seen=true]           the model's recommend, batched
    POST /recommend      {"users": [...], "n": N, "exclude": [...], "keep_seen": false}
    POST /recommend/new  {"items": [...], "n": N, "ratings": [...], "times": [...]}
    GET  /similar?item=ID&n=N                              the model's similar_items

/recommend goes through the batcher; /recommend/new and /similar are scored one request at a
time on the model's thread. FastAPI's /docs page lists them all, with the limits on n and users
and every error answer; a method a path does not have is a 405 naming those it has (Allow).
"""
import functools
import inspect
import json
import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..data.interactions import DataError, UnknownIds, from_matrix
from ..data.table_parser import TIMESTAMP_FORMS, unix_seconds
from ..errors import NcaeError
from ..model.base import Model, Unsupported
from .batcher import Batcher, ranked
from .limits import Limits, RequestError, read_body

# FastAPI and pydantic are imported where they are used, so that the package's modules import
# without the [serve] extra; no `from __future__ import annotations` either: FastAPI reads an
# endpoint's annotations, which name what create_app imported

log = logging.getLogger("ncae_cuda.serve")
N = inspect.signature(Model.recommend).parameters["n"].default       # recommend's own default
Id = int | str                                 # as the model's ids are: integers or text
Time = float | str                             # Unix seconds, or ISO 8601 text
# a member of a union, as pydantic names it in an error, and the union said whole, by field
UNION_MEMBERS = ("int", "float", "str")
UNIONS = {"times": f"a time is {TIMESTAMP_FORMS}"}
ANY_ID = "an id is an integer or a string"
SHOWN_INPUT = 80                               # characters of a wrong value an error shows
# pydantic refuses a field or query name a request does not have (a misspelt one is not
# silently left out: ?keep-seen=true, the command line's spelling, kept nothing); the bodies it
# validates strictly too (no "3" for 3), a URL's query being text
FORBID_OTHERS = {"extra": "forbid"}
STRICT = {"strict": True, **FORBID_OTHERS}


@dataclass
class OneUserAsk:             # GET /recommend's query: text, as a URL's, read into these types
    __pydantic_config__ = FORBID_OTHERS
    user: str
    n: int = N
    keep_seen: bool = False


@dataclass
class SimilarAsk:             # GET /similar's query
    __pydantic_config__ = FORBID_OTHERS
    item: str
    n: int = N


@dataclass
class ErrorAnswer:            # every answer but a 200: {"error": one line}
    error: str


@dataclass
class UsersAsk:
    __pydantic_config__ = STRICT
    users: list[Id]
    n: int = N
    exclude: list[Id] = field(default_factory=list)
    keep_seen: bool = False


@dataclass
class NewUserAsk:
    __pydantic_config__ = STRICT
    items: list[Id]
    n: int = N
    ratings: list[float] | None = None           # explicit models: each item's rating
    times: list[Time] | None = None              # models with recency_boost: each item's time
    keep_seen: bool = False


# the error answers each endpoint may give, for /docs (the status and when)
CLIENT_ERRORS = {400: "a value out of range, or a request the model cannot answer",
                 404: "a user or item the model does not know", 422: "a malformed field"}
TOO_LARGE = {413: "a body over --max-body-bytes"}
UNAVAILABLE = {503: "the device cannot answer (its memory), or the batcher has stopped"}



def create_app(holder, limits: Limits, max_batch: int, max_wait_s: float):
    """The app serving holder's model; the batcher runs while the app does."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    batcher = Batcher(holder, max_batch, max_wait_s)

    @asynccontextmanager
    async def lifespan(app):
        scoring = batcher.start()
        yield                 # at shutdown, once uvicorn has answered the requests in flight
        scoring.cancel()
        holder.close()

    app = FastAPI(title="ncae_cuda", lifespan=lifespan)
    add_error_answers(app)

    def answers(*groups: dict) -> dict:
        return {status: {"model": ErrorAnswer, "description": why}
                for group in (CLIENT_ERRORS, *groups, UNAVAILABLE)
                for status, why in group.items()}

    @app.get("/healthz", responses={503: {"description": "the batcher has stopped: /recommend "
                                                          "cannot be answered (error: why)"}})
    async def healthz() -> dict:
        facts = {**holder.current.facts(), "batches": batcher.batches,
                 "users_scored": batcher.users}
        if batcher.failure is not None:
            return JSONResponse({"status": "failing", "error": batcher.failure, **facts}, 503)
        return {"status": "ok", **facts}

    # The rankings are answered as JSONResponse, plain lists of numbers that need no check
    # on their way out: FastAPI's serializer walks every number of an answer it is handed,
    # which cost a served request more than its share of the scoring.
    # ... and its query is read by pydantic directly: FastAPI's parameters machinery cost a
    # request a sixth of the server's time under load
    @app.get("/recommend", openapi_extra=query_schema(OneUserAsk, limits), responses=answers())
    async def recommend_one(request: Request) -> dict:
        ask = validated(OneUserAsk, once_each(request.query_params))
        rows = await batcher.recommend([ask.user], limits.check_n(ask.n), not ask.keep_seen, [])
        return JSONResponse(rows[0])

    @app.post("/recommend", openapi_extra=body_schema(UsersAsk, limits),
              responses=answers(TOO_LARGE))
    async def recommend_many(request: Request) -> dict:
        ask = await parsed(request, UsersAsk, limits)
        limits.check_users(len(ask.users))
        return JSONResponse({"results": await batcher.recommend(
            ask.users, limits.check_n(ask.n), not ask.keep_seen, ask.exclude)})

    @app.post("/recommend/new", openapi_extra=body_schema(NewUserAsk, limits),
              responses=answers(TOO_LARGE))
    async def recommend_new(request: Request) -> dict:
        ask = await parsed(request, NewUserAsk, limits)
        limits.check_n(ask.n)
        return await holder.run(fold_in, ask)

    @app.get("/similar", openapi_extra=query_schema(SimilarAsk, limits), responses=answers())
    async def similar(request: Request) -> dict:
        ask = validated(SimilarAsk, once_each(request.query_params))
        return await holder.run(similar_to, ask.item, limits.check_n(ask.n))

    return app


def fold_in(model: Model, ask: NewUserAsk) -> dict:
    """recommend_new for the one user of `ask` (on the model's thread): an explicit model's
    ratings on its rating scale, an implicit model's items each an interaction (as fit reads
    them), no ratings or times the model would not read; no items, a user with no history."""
    config = model.config
    if config.based != "user":
        what = "item-based" if config.based == "item" else "a blend with an item-based member"
        raise RequestError(f"this model is {what}: it has no encoder for a new user's row, so "
                           "/recommend/new needs a user-based model (retrain with --based "
                           "user, or refit with the user)")
    for name, given in (("ratings", ask.ratings), ("times", ask.times)):
        if given is not None and len(given) != len(ask.items):
            raise RequestError(f"{name} has {len(given)} values for {len(ask.items)} items")
    if config.implicit and ask.ratings is not None:
        raise RequestError("an implicit model reads each item given as an interaction, whatever "
                           "its value: leave out \"ratings\"")
    if not config.implicit and ask.ratings is None and ask.items:
        raise RequestError("an explicit model folds a new user in from ratings: give "
                           "\"ratings\", one per item")
    if not config.recency_boost and ask.times is not None:
        raise RequestError("the model does not weigh a user's items by recency: leave out "
                           "\"times\"")
    if config.recency_boost and ask.times is None and ask.items:
        raise RequestError("the model weighs a user's items by recency: give \"times\", one "
                           "per item")
    columns = model.data.item_lookup(ask.items)                                   # (k,)
    if len(np.unique(columns)) < len(columns):
        raise RequestError("items names an item more than once")
    shape, at = (1, len(model.item_ids)), (np.zeros(len(columns), np.int32), columns)

    def row(values) -> sp.csr_matrix:                                            # (1, items)
        return sp.csr_matrix((np.asarray(values, np.float64).reshape(-1), at), shape=shape)
    X_new = row(np.ones(len(columns)) if ask.ratings is None else ask.ratings)
    # the ratings checked here too, so that the error names them as the request does
    model.data.check_ratings(from_matrix(X_new, "ratings", item_ids=model.item_ids), "ratings")
    times = row(seconds(ask.times or [])) if config.recency_boost else None
    items, scores = model.recommend_new(X_new, n=ask.n, filter_seen=not ask.keep_seen,
                                        times=times)
    return ranked(items[0], scores[0], ask.n)


def seconds(times: list) -> list[float]:
    """Each time as a number of seconds: a number as it is, ISO 8601 text as Unix seconds."""
    read = []
    for k, time in enumerate(times):
        try:
            read.append(unix_seconds(time) if isinstance(time, str) else time)
        except ValueError:
            raise RequestError(f"times.{k}: {shown(time)} is not {TIMESTAMP_FORMS}",
                               422) from None
    return read


def similar_to(model: Model, item: str, n: int) -> dict:
    """similar_items for one item (on the model's thread)."""
    column = model.data.item_lookup([item])
    items, scores = model.similar_items(model.item_ids[column], n=n)
    return {"item": model.item_ids[column].tolist()[0], **ranked(items[0], scores[0], n)}


async def parsed(request, shape: type, limits: Limits):
    """The request's JSON body as `shape`, read within --max-body-bytes."""
    return validated(shape, await read_body(request, limits.max_body_bytes))


def once_each(query) -> dict:
    """A URL's query as {name: text}, a RequestError where a name comes more than once: a GET
    asks for one user or item, and a second would be dropped unseen (?user=1&user=2: user 2)."""
    read = {}
    for name, text in query.multi_items():
        if name in read:
            raise RequestError(f"{name}: given more than once; a GET asks for one (POST "
                               "/recommend takes a list of users)")
        read[name] = text
    return read


def validated(shape: type, value: bytes | dict):
    """`value` as `shape`, a RequestError in a line where it is not one: a JSON body (bytes),
    or a URL's query (text values: '5' an int, 'true' a bool; a name the shape has not is
    refused, as a body's field is)."""
    from pydantic import ValidationError
    check = adapter(shape)
    try:
        return (check.validate_json(value) if isinstance(value, bytes)
                else check.validate_python(value))
    except ValidationError as e:
        raise validation_error(e.errors()) from None


def query_schema(shape: type, limits: Limits) -> dict:
    """The OpenAPI entries of a query read by `validated` rather than by FastAPI, for /docs."""
    schema = limits.bounded(adapter(shape).json_schema())
    return {"parameters": [{"name": name, "in": "query", "schema": field,
                            "required": name in schema.get("required", ())}
                           for name, field in schema["properties"].items()]}


def validation_error(errors: list) -> RequestError:
    """The first of pydantic's errors in a line: malformed JSON 400, a wrong field 422."""
    first = errors[0]
    if first["type"] == "json_invalid":
        return RequestError(f"malformed JSON: {first['msg']}")
    where = [str(part) for part in first["loc"] if part != "body"]
    message = first["msg"]
    if where and where[-1] in UNION_MEMBERS:         # a member of a union: say it whole
        where, message = where[:-1], UNIONS.get(where[0], ANY_ID)
    return RequestError(f"{'.'.join(where) or 'body'}: {message} (got "
                        f"{shown(first.get('input'))})", 422)


def shown(value) -> str:
    """A value of a request as JSON writes it ("3" a text, 3 a number), cut to SHOWN_INPUT."""
    text = json.dumps(value, default=str)
    if len(text) <= SHOWN_INPUT:
        return text
    return f"{text[:SHOWN_INPUT]}... ({len(text)} characters)"


def body_schema(shape: type, limits: Limits) -> dict:
    """The OpenAPI entry of a body read by `parsed` rather than by FastAPI, for /docs."""
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": limits.bounded(adapter(shape).json_schema())}}}}


@functools.cache
def adapter(shape: type):
    """pydantic's validator of a request's shape (a body's or a query's), built once."""
    from pydantic import TypeAdapter
    return TypeAdapter(shape)


def add_error_answers(app) -> None:
    """Every error a JSON {"error": one line}: the client's mistakes 4xx; a machine's fault
    (the device's memory) 503; a bug 500, logged with its traceback."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    def answer(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": " ".join(str(message).split())}, status_code=status)

    @app.exception_handler(NcaeError)
    async def ncae_error(request, e: NcaeError):
        if isinstance(e, RequestError):
            return answer(e.status, e)
        if isinstance(e, UnknownIds):
            return answer(404, e)
        return answer(400 if isinstance(e, (DataError, Unsupported)) else 503, e)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, e: RequestValidationError):
        error = validation_error(e.errors())
        return answer(error.status, error)

    @app.exception_handler(HTTPException)
    async def http_error(request, e: HTTPException):
        reply = answer(e.status_code, e.detail)
        if e.status_code == 405:      # starlette's Allow names the methods of one route only
            reply.headers["Allow"] = ", ".join(allowed_methods(app, request.scope))
        return reply

    @app.exception_handler(Exception)
    async def bug(request, e: Exception):
        log.exception("a request failed: %s %s", request.method, request.url.path)
        return answer(500, f"internal error: {type(e).__name__}: {e}")


def allowed_methods(app, scope: dict) -> list[str]:
    """The methods of every route at the request's path (a 405's Allow)."""
    from starlette.routing import Match
    return sorted({method for route in app.routes if route.matches(scope)[0] != Match.NONE
                   for method in getattr(route, "methods", None) or ()})
