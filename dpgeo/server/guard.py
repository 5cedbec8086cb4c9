"""ASGI middleware in front of the service's routes.

* :class:`Guard` (outermost): the access log (one line per request, every
  answer included, never the query string), the cap on request bodies (413),
  security headers, ``HEAD`` served as ``GET`` without the body, and the last
  word on an unexpected error: a 500 exception document and one log line with
  a reference, never a traceback (it could quote the data).
* :class:`CallerGate`: whoever sends an ``Authorization`` header is
  authenticated before any route is looked at, so a wrong token gets 401 on
  every path (the API definition, a path that does not exist, ``OPTIONS``);
  the analyst's request rate is limited here.
* :class:`Methods`: ``OPTIONS`` answers 204 with ``Allow`` for the path's
  routes (``HEAD`` and ``OPTIONS`` included).
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

from .problems import DPGEO, ApiError, problem

__all__ = ["ANALYST", "CallerGate", "Guard", "Methods", "TooLarge", "log_path", "too_large_doc"]

ACCESS_LOG = logging.getLogger("dpgeo.server.access")
LOG = logging.getLogger("dpgeo.server")
#: The scope key under which :class:`CallerGate` leaves the authenticated analyst (or None).
ANALYST = "dpgeo.analyst"


def _client(scope):
    """The client's address as the log shows it: an IP address and port, never a header's text as sent."""
    import ipaddress

    c = scope.get("client")
    if not c:
        return "-"
    try:
        host = str(ipaddress.ip_address(str(c[0])))
    except ValueError:
        return "-"
    return f"{host}:{c[1]}" if isinstance(c[1], int) else host


#: A path segment that may be a secret: 16 or more characters of the token alphabets, with a digit and a letter.
_SECRETISH = re.compile(r"^(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9_\-.~+=%]{16,}$")
#: The ids the service itself puts in paths (releases, jobs): 32 lowercase hex digits.
_ID = re.compile(r"^[0-9a-f]{32}$")


def log_path(path, is_token=None) -> str:
    """``path`` as the log shows it: a segment that is a configured token (``is_token``), or looks like one
    (long, with letters and digits, and not one of the service's own ids), is replaced by ``<redacted>``.

    Examples
    --------
    >>> log_path("/collections/Fh3x_9kQ2LmZpR7tWbV1yN4sA8dE6gUoJcHiTfXqKe0/items")
    '/collections/<redacted>/items'
    >>> log_path("/jobs/0123456789abcdef0123456789abcdef/results"), log_path("/processes/dp-dbscan-spans")
    ('/jobs/0123456789abcdef0123456789abcdef/results', '/processes/dp-dbscan-spans')
    """
    out = []
    for seg in path.split("/"):
        if seg and not _ID.match(seg) and (_SECRETISH.match(seg) or (is_token is not None and is_token(seg))):
            seg = "<redacted>"
        out.append(seg)
    return "/".join(out).encode("unicode_escape", "replace").decode("ascii")[:300]


class TooLarge(Exception):
    pass


def too_large_doc(limit):
    return problem(413, DPGEO + "body-too-large", "Request body too large",
                   f"request bodies are limited to {limit} bytes")


async def send_json(send, status, doc, headers=None):
    """Answer with an exception document from middleware (no route involved)."""
    body = json.dumps(doc, separators=(",", ":")).encode()
    hs = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    hs += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": hs})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Pure ASGI middleware: access log, body cap (413), security headers, HEAD, unexpected errors (500).

    A body a little over the limit is read and dropped before the answer, so
    that the client reads a clean 413 rather than a reset connection; one more
    than ``DRAIN_FACTOR`` times the limit is refused without reading it.
    """

    DRAIN_FACTOR = 16

    def __init__(self, app, max_body_bytes, is_token=None):
        self.app = app
        self.max = max_body_bytes
        self.is_token = is_token

    async def _drain(self, receive, msg, seen):
        while msg.get("more_body") and seen <= self.max * self.DRAIN_FACTOR:
            msg = await receive()
            seen += len(msg.get("body", b""))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        state = {"started": False, "status": 500}
        t0 = time.perf_counter()
        try:
            await self._handle(scope, receive, self._sender(scope, send, state), state)
        finally:  # the access log: never the query string, nor a path segment that may be a token
            path = log_path(scope.get("path", ""), self.is_token)
            ACCESS_LOG.info("%s %s %s %d %.0f ms", _client(scope), scope.get("method", "-"), path, state["status"],
                            1000 * (time.perf_counter() - t0))

    async def _handle(self, scope, receive, send, state):
        headers = dict(scope.get("headers") or [])
        cl = headers.get(b"content-length")
        if cl is not None and (not cl.isdigit() or int(cl) > self.max):
            if cl.isdigit() and int(cl) <= self.max * self.DRAIN_FACTOR:
                await self._drain(receive, {"more_body": True}, 0)
            return await send_json(send, 413, too_large_doc(self.max))
        seen = 0

        async def limited_receive():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max:
                    await self._drain(receive, msg, seen)
                    raise TooLarge
            return msg

        inner = dict(scope, method="GET") if scope.get("method") == "HEAD" else scope
        try:
            await self.app(inner, limited_receive, send)
        except TooLarge:
            if not state["started"]:
                await send_json(send, 413, too_large_doc(self.max))
        except Exception as exc:  # noqa: BLE001 - one line in the log, never a traceback
            if not state["started"]:
                ref = uuid.uuid4().hex[:12]
                LOG.error("unexpected error %s on %s %s: %s", ref, scope.get("method"),
                          log_path(scope.get("path", ""), self.is_token), type(exc).__name__)
                await send_json(send, 500, problem(500, DPGEO + "internal-error", "Internal server error",
                                                   f"something went wrong on the server (reference {ref})"))

    def _sender(self, scope, send, state):
        head = scope.get("method") == "HEAD"

        async def guarded_send(msg):
            if msg["type"] == "http.response.start":
                state["started"] = True
                state["status"] = msg["status"]
                hs = list(msg.get("headers", []))
                names = {k.lower() for k, _ in hs}
                extra = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
                ctype = dict(hs).get(b"content-type", b"")
                if not ctype.startswith(b"text/html") and b"content-security-policy" not in names:
                    extra.append((b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"))
                if scope.get("method") in ("GET", "HEAD") and scope.get("path", "").startswith("/collections"):
                    # releases are read by web maps on other sites; tokens travel in a header, never in a cookie,
                    # so no page can borrow a visitor's access
                    extra.append((b"access-control-allow-origin", b"*"))
                msg = dict(msg, headers=hs + [h for h in extra if h[0] not in names])
            elif msg["type"] == "http.response.body" and head:  # HEAD: the headers of GET, no body
                if msg.get("more_body"):
                    return
                msg = {"type": "http.response.body", "body": b""}
            await send(msg)

        return guarded_send


class CallerGate:
    """Authenticate every request that carries an ``Authorization`` header, before routing; limit its rate.

    ``service`` provides ``auth`` (an :class:`~dpgeo.server.auth.Authenticator`)
    and ``requests`` (a :class:`~dpgeo.server.auth.RateLimiter`). The analyst
    (or None, for a request without the header) is left in the scope under
    :data:`ANALYST` for the routes.
    """

    def __init__(self, app, service):
        self.app = app
        self.service = service

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        header = None
        for k, v in scope.get("headers") or []:
            if k == b"authorization":
                header = v.decode("latin-1")
                break
        analyst = None
        if header is not None:
            analyst = self.service.auth.analyst(header)
            err = None
            if analyst is None:
                err = ApiError.unauthorized()
            elif not self.service.requests.allow(analyst):
                err = rate_limited(self.service.requests.retry_after(analyst))
            if err is not None:
                return await send_json(send, err.status, err.doc, err.headers)
            send = _no_store(send)
        await self.app(dict(scope, **{ANALYST: analyst}), receive, send)


def _no_store(send):
    """``send`` with ``Cache-Control: private, no-store`` on the response: what an analyst's credentials fetched
    is for that request alone. A client's cache must neither keep it nor answer another request with it (QGIS
    3.22 answered a layer opened with a wrong token from the documents the right token had fetched)."""
    async def wrapped(message):
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers") or [] if k.lower() != b"cache-control"]
            message = dict(message, headers=[*headers, (b"cache-control", b"private, no-store")])
        await send(message)
    return wrapped


def rate_limited(retry):
    return ApiError(429, DPGEO + "rate-limited", "Too many requests",
                    f"this analyst's rate limit is reached; retry in {retry} s", headers={"Retry-After": str(retry)})


class Methods:
    """``OPTIONS`` on a path the application serves: 204 with ``Allow`` (its methods, with HEAD and OPTIONS)."""

    def __init__(self, app, routes):
        self.app = app
        self.routes = routes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "OPTIONS":
            return await self.app(scope, receive, send)
        from starlette.routing import Match

        allowed = set()
        for route in self.routes:
            methods = getattr(route, "methods", None)
            if methods and route.matches(dict(scope, method=next(iter(methods))))[0] == Match.FULL:
                allowed |= set(methods)
        if not allowed:
            return await self.app(scope, receive, send)
        if "GET" in allowed:
            allowed.add("HEAD")
        allowed.add("OPTIONS")
        await send({"type": "http.response.start", "status": 204,
                    "headers": [(b"allow", ", ".join(sorted(allowed)).encode())]})
        await send({"type": "http.response.body", "body": b""})
