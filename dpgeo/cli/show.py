"""``dpgeo preview`` and ``dpgeo info`` for people: grouped sections, units, what Γ and MinPts′ mean.

Both print a dictionary of public facts (a noise preview, a release's privacy metadata). Scripts read
the same dictionary with ``--json``; this module only lays it out. What each key is called, its section,
its unit and what it means are declared with the mechanism that publishes it (``Mechanism.outputs``) or
with the fields every release shares (:mod:`dpgeo.metadata_fields`, which writes the values); keys
nobody declared are listed at the end, so nothing in the dictionary is hidden.
"""

from __future__ import annotations

from ..metadata_fields import describe_text, release_text

__all__ = ["format_preview", "format_info"]

# -- the two commands ------------------------------------------------------------------------------------------------

def format_preview(p: dict, explain=False) -> str:
    """A noise preview (``dpgeo.noise_preview``) for people (``explain``: every field's meaning under it).

    Examples
    --------
    >>> text = format_preview({"epsilon": 1.0, "radius_m": 100.0, "min_points": 30, "gamma": 49.07,
    ...                        "min_points_prime": 128.15, "theta": None, "spends_budget": False})
    >>> print(text.splitlines()[0])
    Noise preview: what a run with these parameters would have (reads no data, spends no budget)
    >>> "MinPts′" in text and "128.2 points" in text and "None" not in text
    True
    """
    title = "Noise preview: what a run with these parameters would have (reads no data, spends no budget)"
    return describe_text(dict(p), title, skip=("spends_budget",), explain=explain)


def format_info(md: dict, explain=False) -> str:
    """A release's privacy metadata (``dpgeo.io.read_layer_metadata``) for people (``explain``: every field's
    meaning under it).

    Examples
    --------
    >>> text = format_info({"mechanism": "DP-DBSCAN spans", "differentially_private": True, "epsilon": 1.0,
    ...                     "delta": 0.0, "domain": {"crs": "EPSG:4326", "bounds": [-93.33, 44.89, -93.19, 45.06],
    ...                     "wkt": "POLYGON ((0 0, 1 0, 1 1, 0 0))"}})
    >>> print(text.splitlines()[0])
    DP-DBSCAN spans: differentially private, ε = 1
    >>> "Polygon of 4 vertices" in text and "POLYGON ((" not in text
    True
    """
    return release_text(dict(md), explain=explain)
