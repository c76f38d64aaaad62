"""The check-back endpoint for WSGI: a plain WSGI application (any WSGI
server; in front of Django with ``fallback``), and a Flask blueprint.

    # Django's wsgi.py
    from trustmsg import barrier
    from trustmsg.wsgi import CheckBackWSGI
    application = CheckBackWSGI(SIGNING_SECRET, barrier.decider(connect), path="/trustmsg/check",
                                fallback=get_wsgi_application())

    # Flask
    app.register_blueprint(flask_blueprint(SIGNING_SECRET, barrier.decider(connect)))
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable, Optional

from .checkback import DEFAULT_PATH, DEFAULT_TOLERANCE, MAX_BODY, CheckBackHandler, Response, _error

if TYPE_CHECKING:
    import flask

__all__ = ["CheckBackWSGI", "flask_blueprint"]

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    500: "Internal Server Error",
}


class CheckBackWSGI:
    """A WSGI app answering trustmsg's check-back calls (POST) on ``path``
    (None: on any path). Requests for other paths go to ``fallback`` (e.g.
    Django's application) when given, else 404. ``decide`` is synchronous."""

    def __init__(
        self,
        secret: str,
        decide: Callable[..., str],
        *,
        path: Optional[str] = DEFAULT_PATH,
        fallback: Optional[WSGIApp] = None,
        tolerance: int = DEFAULT_TOLERANCE,
    ) -> None:
        self.handler = CheckBackHandler(secret, decide, tolerance=tolerance)
        self.path = path
        self.fallback = fallback

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if self.path is not None and environ.get("PATH_INFO", "") != self.path:
            if self.fallback is not None:
                return self.fallback(environ, start_response)
            return _respond(
                start_response, _error(404, "not_found", f"the check-back endpoint is {self.path}")
            )
        if environ.get("REQUEST_METHOD") != "POST":
            return _respond(start_response, _error(405, "method_not_allowed", "check-back calls are POST"))
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0:
            return _respond(start_response, _error(411, "length_required", "give a valid Content-Length"))
        if length > MAX_BODY:
            return _respond(
                start_response, _error(413, "too_large", f"a check-back call is at most {MAX_BODY} bytes")
            )
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {
            key[5:].replace("_", "-").lower(): value
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        return _respond(start_response, self.handler.handle(headers, body))


def _respond(start_response: Callable[..., Any], response: Response) -> list[bytes]:
    reason = _REASONS.get(response.status, "")
    start_response(
        f"{response.status} {reason}",
        [("Content-Type", response.content_type), ("Content-Length", str(len(response.body)))],
    )
    return [response.body]


def flask_blueprint(
    secret: str,
    decide: Callable[..., str],
    *,
    path: str = DEFAULT_PATH,
    name: str = "trustmsg_check",
    tolerance: int = DEFAULT_TOLERANCE,
) -> flask.Blueprint:
    """A Flask blueprint with the check-back endpoint at ``path``."""
    import flask

    handler = CheckBackHandler(secret, decide, tolerance=tolerance)
    bp = flask.Blueprint(name, __name__)

    @bp.route(path, methods=["POST"])
    def check() -> flask.Response:
        req = flask.request
        if req.content_length is not None and req.content_length > MAX_BODY:
            r = _error(413, "too_large", f"a check-back call is at most {MAX_BODY} bytes")
        else:
            r = handler.handle(dict(req.headers.items()), req.get_data(cache=False))
        return flask.Response(r.body, status=r.status, content_type=r.content_type)

    return bp
