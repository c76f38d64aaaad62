"""The check-back endpoint as an ASGI application: FastAPI, Starlette, or
any ASGI server (uvicorn, hypercorn) on its own.

    from trustmsg import barrier
    from trustmsg.asgi import CheckBackASGI

    check = CheckBackASGI(SIGNING_SECRET, barrier.decider(engine))
    app.routes.append(check.route("/trustmsg/check"))   # FastAPI / Starlette

A synchronous ``decide`` (the barrier's) runs in a worker thread, so the
event loop never waits on the database; an ``async def decide`` is awaited.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Callable, Optional

from .checkback import DEFAULT_PATH, DEFAULT_TOLERANCE, MAX_BODY, CheckBackHandler, Decide, Response, _error

if TYPE_CHECKING:
    from starlette.routing import Route

__all__ = ["CheckBackASGI"]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class CheckBackASGI:
    """An ASGI app answering trustmsg's check-back calls (POST). ``path``
    limits it to one path (404 elsewhere); None answers on any path, as
    when it is mounted or added as a route."""

    def __init__(
        self,
        secret: str,
        decide: Decide,
        *,
        path: Optional[str] = None,
        tolerance: int = DEFAULT_TOLERANCE,
    ) -> None:
        self.handler = CheckBackHandler(secret, decide, tolerance=tolerance)
        self.path = path

    def route(self, path: str = DEFAULT_PATH) -> Route:
        """A Starlette/FastAPI route (POST ``path``) to this app:
        ``app.routes.append(check.route())``."""
        from starlette.routing import Route

        return Route(path, endpoint=self, methods=["POST"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if self.path is not None and scope.get("path") != self.path:
            await _send(send, _error(404, "not_found", f"the check-back endpoint is {self.path}"))
            return
        if scope.get("method") != "POST":
            await _send(send, _error(405, "method_not_allowed", "check-back calls are POST"))
            return
        body = bytearray()
        while True:
            event = await receive()
            if event["type"] == "http.disconnect":
                return
            body += event.get("body", b"")
            if len(body) > MAX_BODY:
                await _send(send, _error(413, "too_large", f"a check-back call is at most {MAX_BODY} bytes"))
                return
            if not event.get("more_body", False):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        await _send(send, await self.handle(headers, bytes(body)))

    async def handle(self, headers: dict[str, str], body: bytes) -> Response:
        h = self.handler
        request = h.authenticate(headers, body)
        if isinstance(request, Response):
            return request
        try:
            if inspect.iscoroutinefunction(h.decide):
                decision: Any = await h.decide(request)
            else:
                loop = asyncio.get_running_loop()
                decision = await loop.run_in_executor(None, functools.partial(h.decide, request))
                if inspect.isawaitable(decision):
                    decision = await decision
        except Exception as e:  # noqa: BLE001
            return h.failed(request, e)
        return h.respond(request, decision)


async def _send(send: Send, response: Response) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": response.status,
            "headers": [
                (b"content-type", response.content_type.encode()),
                (b"content-length", str(len(response.body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": response.body})
