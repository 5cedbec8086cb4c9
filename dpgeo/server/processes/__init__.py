"""The processes of the service (OGC API – Processes), one module each, behind :class:`~.base.Process`."""

from .base import Process, validate_inputs
from .kmeans import KMeansProcess
from .preview import PreviewProcess
from .spans import SpansProcess
from .wavecluster import WaveClusterProcess

__all__ = ["PROCESSES", "KMeansProcess", "PreviewProcess", "Process", "SpansProcess", "WaveClusterProcess", "validate_inputs"]

#: Every process the service offers, by id.
PROCESSES = {p.id: p for p in (SpansProcess(), WaveClusterProcess(), KMeansProcess(), PreviewProcess())}
