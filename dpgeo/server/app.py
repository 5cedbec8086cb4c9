"""The ASGI application: OGC API – Processes (Part 1: Core) and OGC API – Features (Part 1: Core, GeoJSON).

:func:`create_app` puts together the shared state (:class:`dpgeo.server.service.Service`),
the routers by concern (:mod:`dpgeo.server.routes`: landing, processes, jobs,
features), the error answers and the middleware (:mod:`dpgeo.server.guard`).
Privacy is the security property: no route returns anything computed from
the private data except a DP release, and every error describes the request,
the budget or the server, never the data (``docs/service.md``, "Security").
"""

from __future__ import annotations

import logging
import uuid
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._version import __version__
from .config import ServerConfig, seed_notice
from .guard import CallerGate, Guard, Methods, TooLarge, log_path, too_large_doc
from .problems import DPGEO, ApiError, problem
from .routes import ROUTERS
from .routes.landing import CONFORMANCE
from .service import Service, json_response

__all__ = ["CONFORMANCE", "create_app"]

LOG = logging.getLogger("dpgeo.server")


def create_app(config: ServerConfig):
    """The service as an ASGI application (run it with uvicorn: ``dpgeo serve CONFIG``)."""
    svc = Service(config)

    @asynccontextmanager
    async def lifespan(app):
        if seed_notice(config.server):  # for tests only: said before anything else, and again once serving
            LOG.warning("%s", seed_notice(config.server))
        await run_in_threadpool(svc.startup)
        LOG.info("dpgeo %s serving %d dataset(s) to %d analyst(s); releases in %s", __version__,
                 len(config.datasets), len(config.analysts), config.server.releases)
        if seed_notice(config.server):
            LOG.warning("%s", seed_notice(config.server))
        try:
            yield
        finally:
            await run_in_threadpool(svc.manager.stop)

    app = FastAPI(title=config.server.title, description=config.server.description, version=__version__,
                  openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.service = svc
    _error_answers(app, config.server.max_body_bytes)
    for router in ROUTERS:
        app.include_router(router)
    routes = [route for router in ROUTERS for route in router.routes]  # (included without a prefix)
    guard = Guard(CallerGate(Methods(app, routes), svc), config.server.max_body_bytes,
                  is_token=lambda seg: svc.auth.analyst(f"Bearer {seg}") is not None)
    guard.abort_jobs = svc.manager.abort  # the server is told to exit: its workers end now, not after a drain
    return guard


def _error_answers(app, max_body_bytes):
    """Every error as an OGC exception document; nothing the caller sent is echoed."""

    @app.exception_handler(ApiError)
    async def _api_error(request, exc: ApiError):
        return json_response(exc.doc, exc.status, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request, exc):
        titles = {404: "Not found", 405: "Method not allowed"}
        headers = dict(getattr(exc, "headers", None) or {})  # a 405's Allow, for one
        allow = next((k for k in headers if k.lower() == "allow"), None)
        if exc.status_code == 405 and allow is not None:  # as OPTIONS answers (HEAD with GET; OPTIONS always)
            methods = {m.strip() for m in headers[allow].split(",") if m.strip()}
            methods |= {"HEAD", "OPTIONS"} if "GET" in methods else {"OPTIONS"}
            headers[allow] = ", ".join(sorted(methods))
        return json_response(problem(exc.status_code, DPGEO + ("not-found" if exc.status_code == 404 else
                                                               "http-error"),
                                     titles.get(exc.status_code, "HTTP error")), exc.status_code, headers or None)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request, exc):
        names = sorted({str(e.get("loc", ("", "?"))[-1]) for e in exc.errors()})
        return json_response(problem(400, DPGEO + "invalid-parameter", "Invalid parameter",
                                     f"invalid value for {', '.join(n[:40] for n in names)}"), 400)

    @app.exception_handler(TooLarge)
    async def _too_large(request, exc):
        return json_response(too_large_doc(max_body_bytes), 413)

    @app.exception_handler(Exception)
    async def _unexpected(request, exc):  # the Guard keeps the traceback out of the log
        ref = uuid.uuid4().hex[:12]
        LOG.error("unexpected error %s on %s %s: %s", ref, request.method, log_path(request.url.path),
                  type(exc).__name__)
        return json_response(problem(500, DPGEO + "internal-error", "Internal server error",
                                     f"something went wrong on the server (reference {ref})"), 500)
