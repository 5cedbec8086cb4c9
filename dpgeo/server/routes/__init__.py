"""The service's routes, one router per concern: the landing page and conformance (:mod:`.landing`), the
processes (:mod:`.processes`), the jobs (:mod:`.jobs`) and the published releases as features (:mod:`.features`).

Routes are thin: they authenticate (the analyst is already known, see
:class:`dpgeo.server.guard.CallerGate`), check the request against public
bounds, and hand a release to the job manager or read a published release.
"""

from . import features, jobs, landing, processes

#: Every router, in the order they are included.
ROUTERS = (landing.router, processes.router, jobs.router, features.router)

__all__ = ["ROUTERS"]
