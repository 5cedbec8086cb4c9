"""The processes of the service (OGC API – Processes): one per declared mechanism offered on the service.

Each is a :class:`~.declared.DeclaredProcess` generated from the mechanism's
declaration (:mod:`dpgeo.declarations.registry`), behind the small base class
:class:`~.base.Process`.
"""

from ...declarations.registry import MECHANISMS
from .base import Process, validate_inputs
from .declared import DeclaredProcess

__all__ = ["PROCESSES", "DeclaredProcess", "Process", "validate_inputs"]

#: Every process the service offers, by id.
PROCESSES = {p.id: p for p in (DeclaredProcess(m) for m in MECHANISMS if "service" in m.fronts)}
