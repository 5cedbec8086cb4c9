"""The basemap under an HTML map: OpenStreetMap's standard tiles, any XYZ tiles, or none.

OpenStreetMap's tile usage policy (https://operations.osmfoundation.org/policies/tiles/) asks for its
licence attribution on the map, a valid Referer from a web page and a User-Agent (a browser sends both),
and forbids bulk downloading; the map asks for tiles only as a viewer looks at it. Tiles come from a third
party: its server sees who views the map (address, browser) and which part of it, never the clusters.
``basemap="none"`` makes a map that requests nothing from any host.
"""

from __future__ import annotations

import html
from urllib.parse import urlsplit

from ..errors import ParameterError

__all__ = ["basemap_config", "check_basemap", "OSM_TILES", "OSM_ATTRIBUTION", "OSM_COPYRIGHT", "DEFAULT_BASEMAP"]

#: OpenStreetMap's standard tiles (https://operations.osmfoundation.org/policies/tiles/).
OSM_TILES = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
#: The attribution OpenStreetMap's licence asks for, and the page it links to.
OSM_ATTRIBUTION = "© OpenStreetMap contributors"
OSM_COPYRIGHT = "https://www.openstreetmap.org/copyright"
#: The basemap of a map unless told otherwise: OpenStreetMap's standard tiles.
DEFAULT_BASEMAP = "osm"


def basemap_config(basemap=DEFAULT_BASEMAP, attribution=None) -> dict | None:
    """What the page needs to draw a basemap, or None for a map that requests nothing from any host.

    Parameters
    ----------
    basemap : str or None
        ``"osm"`` (the default): OpenStreetMap's standard tiles, credited
        "© OpenStreetMap contributors" with a link to their copyright page;
        their tile server gets the page's origin as Referer, as its usage
        policy asks (a map opened from a file sends none). ``"none"`` or
        None: no basemap. Else an XYZ tile URL template
        (``https://.../{z}/{x}/{y}.png``), asked without a Referer.
    attribution : str, optional
        The credit of a URL template's tiles (shown as text, escaped).

    Returns
    -------
    dict or None
        ``url``, ``attribution`` (escaped), ``link`` (or None),
        ``referrerPolicy`` and ``csp`` (the Content-Security-Policy source
        of the tiles).

    Examples
    --------
    >>> basemap_config()["csp"], basemap_config("none")
    ('https://tile.openstreetmap.org', None)
    >>> basemap_config("https://t.example.org/{z}/{x}/{y}.png", "© <Example>")["attribution"]
    '© &lt;Example&gt;'
    """
    key = basemap.strip().lower() if isinstance(basemap, str) else basemap
    if key in (None, "none"):
        if attribution is not None:
            raise ParameterError("attribution is the credit of a basemap: give basemap=URL_TEMPLATE too")
        return None
    if key == "osm":
        if attribution is not None:
            raise ParameterError("the OpenStreetMap basemap carries its own attribution; give attribution only "
                                 "with basemap=URL_TEMPLATE")
        return {"url": OSM_TILES, "attribution": html.escape(OSM_ATTRIBUTION), "link": OSM_COPYRIGHT,
                "referrerPolicy": "strict-origin-when-cross-origin", "csp": check_basemap(OSM_TILES)}
    csp = check_basemap(basemap, attribution)
    return {"url": basemap.strip(), "attribution": html.escape(attribution or "", quote=True), "link": None,
            "referrerPolicy": "no-referrer", "csp": csp}


def check_basemap(url, attribution=None) -> str:
    """Check an XYZ tile URL template; return the Content-Security-Policy source that allows its tiles.

    Raises
    ------
    ParameterError
        Not an http(s) URL with ``{z}``, ``{x}`` and ``{y}`` (or ``{-y}``), or
        an attribution without a basemap.

    Examples
    --------
    >>> check_basemap("https://{s}.tile.example.org/{z}/{x}/{y}.png", "© Example")
    'https://*.tile.example.org'
    """
    if url is None and attribution is not None:
        raise ParameterError("attribution is the credit of a basemap: give basemap=URL_TEMPLATE too")
    if not isinstance(url, str) or not url.strip():
        raise ParameterError(f"basemap must be 'osm', 'none' or an XYZ tile URL template, got {url!r}")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ParameterError("basemap must be 'osm', 'none' or an http(s) URL template like "
                             f"https://tile.example.org/{{z}}/{{x}}/{{y}}.png, got {url!r}")
    if not all(k in url for k in ("{z}", "{x}")) or not ("{y}" in url or "{-y}" in url):
        raise ParameterError(f"basemap URL template needs {{z}}, {{x}} and {{y}} placeholders, got {url!r}")
    if attribution is not None and not isinstance(attribution, str):
        raise ParameterError(f"attribution must be text, got {type(attribution).__name__}")
    host = parts.netloc.rsplit("@", 1)[-1]
    if "{s}." in host and host.startswith("{s}."):
        host = "*." + host[4:]
    if "{" in host or "}" in host or any(c in host for c in " ;,'\""):
        return parts.scheme + ":"  # a placeholder elsewhere in the host: allow the scheme only
    return f"{parts.scheme}://{host}"
