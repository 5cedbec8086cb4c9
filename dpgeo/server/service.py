"""What every route shares: the configuration, authentication, limits, ledger, jobs and releases (:class:`Service`).

The routes (:mod:`dpgeo.server.routes`) find it as ``request.app.state.service``
(:func:`service`) and answer with :func:`json_response`.
"""

from __future__ import annotations

import json
import logging
import os

from fastapi import Request
from fastapi.responses import Response

from .auth import Authenticator, RateLimiter
from .config import ServerConfig
from .guard import ANALYST
from .jobs import JobStore
from .manager import JobManager
from .problems import ApiError
from .releases import ReleaseStore

__all__ = ["JSON", "REL", "Service", "json_response", "service"]

LOG = logging.getLogger("dpgeo.server")
JSON = "application/json"
REL = "http://www.opengis.net/def/rel/ogc/1.0/"


def json_response(doc, status=200, headers=None, media_type=JSON):
    body = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    return Response(body, status_code=status, headers=headers, media_type=media_type)


def service(request: Request) -> Service:
    """The :class:`Service` of the application answering ``request``."""
    return request.app.state.service


class Service:
    """Everything a request needs: configuration, authentication, limits, ledger, jobs, releases."""

    def __init__(self, config: ServerConfig):
        from ..budget import Ledger

        from .limits import Limits

        self.config = config
        self.limits = config.limits or Limits()
        s = config.server
        self.settings = s
        self.auth = Authenticator({a.name: a.token_sha256 for a in config.analysts.values()})
        self.requests = RateLimiter(s.requests_per_minute)
        self.executions = RateLimiter(s.executions_per_minute)
        self.ledger = Ledger(s.ledger)
        self.jobs = JobStore(s.jobs)
        self.manager = JobManager(s, self.jobs, self.ledger, self.limits)
        os.makedirs(s.releases, exist_ok=True)
        self.releases = ReleaseStore(s.releases, self.limits.release_cache_bytes)

    def startup(self):
        """The configuration's totals into the ledger; the job records; the job manager (which settles what a
        previous run left)."""
        from ..budget import format_exact
        from ..counting.inputs import PointFile

        for ds in self.config.datasets.values():  # the configuration's totals are the owner's declaration
            b = self.ledger.budget(ds.name)
            if b.total_epsilon != ds.total_epsilon:
                self.ledger.set_total(ds.name, ds.total_epsilon, by="dpgeo serve configuration")
                LOG.info("dataset %s: total epsilon set to %s (was %s)", ds.name, format_exact(ds.total_epsilon),
                         "none" if b.total_epsilon is None else format_exact(b.total_epsilon))
            if ds.path is None:  # a PostGIS input: known by its declared name (no file content to fingerprint)
                continue
            # its file, by content and by records (read with its options, once): a run on it, or on its records in
            # another file, from the command line, Python or QGIS is charged to it too
            self.ledger.declare(ds.name, [PointFile(ds.path, **ds.read_options())], total_epsilon=ds.total_epsilon,
                                by="dpgeo serve configuration")
            others = [n for n in self.ledger.declared_for(ds.path) if n != ds.name]
            if others:  # (no path in the service log)
                LOG.warning("dataset %s: its input is also declared as dataset %s: a release of either spends the "
                            "privacy of the same people, and neither total protects them from the other's releases",
                            ds.name, ", ".join(others))
        self.jobs.initialise()
        self.manager.start()

    # -- who is calling ----------------------------------------------------------------------------------------------

    def caller(self, request: Request):
        """The analyst of a request, None without an Authorization header (a bad one never gets this far)."""
        return request.scope.get(ANALYST)

    def require(self, request: Request):
        analyst = self.caller(request)
        if analyst is None:
            raise ApiError.unauthorized()
        return analyst

    def granted(self, analyst):
        return set(self.config.analysts[analyst].datasets) if analyst else set()

    def dataset_for(self, analyst, name):
        """The configured dataset ``name`` if granted to ``analyst``; one answer for 'not granted' and 'no such'."""
        if name in self.granted(analyst):
            return self.config.datasets[name]
        raise ApiError.invalid(f"input 'dataset': no dataset {str(name)[:64]!r} is available to you")

    def visible(self, rec, analyst) -> bool:
        ds = self.config.datasets.get(rec.get("dataset"))
        private = ds.private_releases if ds is not None else rec.get("private", True)
        return not private or rec.get("dataset") in self.granted(analyst)

    def base(self, request: Request) -> str:
        return self.settings.url or str(request.base_url).rstrip("/")
