"""``dpgeo serve``: a private-map service over OGC API – Processes and OGC API – Features.

The data owner keeps the private points on the server and declares, per
dataset, a public study area and a total privacy budget; analysts with a
token run the DP mechanisms on the datasets granted to them and get DP
releases only, which are published as Features collections and web maps.
See ``docs/service.md``.

A front end: it calls :mod:`dpgeo.pipeline` and :mod:`dpgeo.budget` and
nothing in the library imports it. Needs the ``serve`` extra (FastAPI,
uvicorn).
"""

from .auth import hash_token, new_token
from .config import ConfigError, load_config

__all__ = ["ConfigError", "create_app", "hash_token", "load_config", "new_token"]


def create_app(config):
    """The ASGI application for a loaded configuration (see :func:`dpgeo.server.app.create_app`)."""
    from .app import create_app as _create

    return _create(config)
