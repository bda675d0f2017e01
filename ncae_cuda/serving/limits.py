"""What one request may ask of the server, and the answer to a request that asks too much or
is malformed: a RequestError carries the HTTP status it is answered with."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import NcaeError


class RequestError(NcaeError, ValueError):
    """A client's mistake: answered with `status` and the message as its one-line error."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """Each flag of python -m ncae_cuda.serve that bounds one request (its default here)."""
    max_n: int = 1000                 # items a user
    max_users: int = 1000             # users one POST /recommend asks for
    max_body_bytes: int = 1 << 20     # a request's JSON body

    def check_n(self, n: int) -> int:
        if n < 1 or n > self.max_n:
            raise RequestError(f"n must be from 1 to {self.max_n}; got {n}")
        return n

    def check_users(self, count: int) -> None:
        if count < 1 or count > self.max_users:
            raise RequestError(f"a request asks for 1 to {self.max_users} users; got {count}")

    def bounded(self, schema: dict) -> dict:
        """A request's JSON schema with these limits on its fields n and users (those of
        check_n and check_users), as the OpenAPI document states them."""
        bounds = {"n": {"minimum": 1, "maximum": self.max_n},
                  "users": {"minItems": 1, "maxItems": self.max_users}}
        for name, bound in bounds.items():
            if name in schema["properties"]:
                schema["properties"][name].update(bound)
        return schema


async def read_body(request, limit: int) -> bytes:
    """The request's body, refused with 413 once it is longer than `limit` bytes: by its
    Content-Length before any of it is read, else (chunked) as soon as it passes the limit."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large(limit)
    return bytes(body)


def too_large(limit: int) -> RequestError:
    return RequestError(f"the request body is over {limit} bytes (--max-body-bytes)", 413)
