"""ASGI middleware in front of the service: a cap on request bodies (413) and security headers; the access log.

The access log line names the client, method, path, status and time taken,
never the query string (a careless client may put a token there).
"""

from __future__ import annotations

import json
import logging
import time

from .problems import DPGEO, problem

__all__ = ["Guard", "TooLarge", "too_large_doc"]

ACCESS_LOG = logging.getLogger("dpgeo.server.access")


def _client(scope):
    c = scope.get("client")
    return f"{c[0]}:{c[1]}" if c else "-"


class TooLarge(Exception):
    pass


def too_large_doc(limit):
    return problem(413, DPGEO + "body-too-large", "Request body too large",
                   f"request bodies are limited to {limit} bytes")


class Guard:
    """Pure ASGI middleware: refuse bodies over ``max_body_bytes`` (413) and add security headers.

    A body a little over the limit is read and dropped before the answer, so
    that the client reads a clean 413 rather than a reset connection; one more
    than ``DRAIN_FACTOR`` times the limit is refused without reading it.
    """

    DRAIN_FACTOR = 16

    def __init__(self, app, max_body_bytes):
        self.app = app
        self.max = max_body_bytes

    async def _drain(self, receive, msg, seen):
        while msg.get("more_body") and seen <= self.max * self.DRAIN_FACTOR:
            msg = await receive()
            seen += len(msg.get("body", b""))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        cl = headers.get(b"content-length")
        if cl is not None and (not cl.isdigit() or int(cl) > self.max):
            if cl.isdigit() and int(cl) <= self.max * self.DRAIN_FACTOR:
                await self._drain(receive, {"more_body": True}, 0)
            return await self._refuse(send)
        seen = 0
        started = False
        status = 500
        t0 = time.perf_counter()

        async def limited_receive():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max:
                    await self._drain(receive, msg, seen)
                    raise TooLarge
            return msg

        async def guarded_send(msg):
            nonlocal started, status
            if msg["type"] == "http.response.start":
                started = True
                status = msg["status"]
                hs = list(msg.get("headers", []))
                names = {k.lower() for k, _ in hs}
                extra = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
                ctype = dict(hs).get(b"content-type", b"")
                if not ctype.startswith(b"text/html") and b"content-security-policy" not in names:
                    extra.append((b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"))
                if scope.get("method") == "GET" and scope.get("path", "").startswith("/collections"):
                    # releases are read by web maps on other sites; tokens travel in a header, never in a cookie,
                    # so no page can borrow a visitor's access
                    extra.append((b"access-control-allow-origin", b"*"))
                msg = dict(msg, headers=hs + [h for h in extra if h[0] not in names])
            await send(msg)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except TooLarge:
            if not started:
                status = 413
                await self._refuse(send)
        finally:  # the access log: never the query string (a careless client may put a token there)
            path = scope.get("path", "").encode("unicode_escape", "replace").decode("ascii")[:300]
            ACCESS_LOG.info("%s %s %s %d %.0f ms", _client(scope), scope.get("method", "-"), path, status,
                            1000 * (time.perf_counter() - t0))

    async def _refuse(self, send):
        body = json.dumps(too_large_doc(self.max)).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
