"""The comparison map (PNG): the reference and the private layer side by side, clusters matched by colour."""

from __future__ import annotations

import os

import numpy as np

from ..errors import OutputError
from .report import NOT_DP_ALGORITHMS, _pct

__all__ = ["check_png_path"]

_MAX_PLOT_POINTS = 100_000


def check_png_path(path) -> str:
    """Fail before reading any data if a PNG cannot be written at ``path``."""
    p = os.fspath(path)
    if not p.lower().endswith(".png"):
        raise OutputError(f"the comparison map is written as PNG; give a path ending in .png, got {p!r}")
    folder = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(folder):
        raise OutputError(f"output folder {folder!r} does not exist")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise OutputError("writing the comparison map needs matplotlib: pip install matplotlib") from None
    return p


def _matched_colours(lab_r, lab_p):
    """Colour index per reference and per private cluster id; matched clusters share a colour."""
    from scipy.optimize import linear_sum_assignment

    ur = np.unique(lab_r[lab_r > 0])
    up = np.unique(lab_p[lab_p > 0])
    col_r = {int(c): i for i, c in enumerate(ur)}
    col_p = {}
    both = (lab_r > 0) & (lab_p > 0)
    if ur.size and up.size and both.any():
        i = np.searchsorted(ur, lab_r[both])
        j = np.searchsorted(up, lab_p[both])
        table = np.zeros((ur.size, up.size), dtype=np.int64)
        np.add.at(table, (i, j), 1)
        rows, cols = linear_sum_assignment(table, maximize=True)
        for r_, c_ in zip(rows, cols):
            if table[r_, c_] > 0:
                col_p[int(up[c_])] = col_r[int(ur[r_])]
    nxt = len(ur)
    for c in up:
        if int(c) not in col_p:
            col_p[int(c)] = nxt
            nxt += 1
    return col_r, col_p


def _draw(path, rep, x, y, ref_layer, area):
    # a bare Figure: no pyplot state and no backend switch (safe inside QGIS and notebooks)
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    lab_r, lab_p = rep.reference_labels, rep.private_labels
    col_r, col_p = _matched_colours(lab_r, lab_p)
    cmap = colormaps["tab20"]

    def colour(i):
        return cmap(i % 20)

    sel = np.arange(x.size)
    if x.size > _MAX_PLOT_POINTS:
        sel = np.sort(np.random.default_rng(0).choice(x.size, _MAX_PLOT_POINTS, replace=False))
    poly = area.polygon
    b = poly.bounds
    aspect = (b[2] - b[0]) / max(b[3] - b[1], 1e-9)
    panel_h = 6.0
    panel_w = min(max(panel_h * aspect, 3.5), 9.0)
    fig = Figure(figsize=(max(2 * panel_w + 1.2, 11.0), panel_h + 1.6))
    axes = fig.subplots(1, 2, sharex=True, sharey=True)
    crs_label = rep.private.metadata.get("working_crs", "")
    for ax in axes:
        for g in getattr(poly, "geoms", [poly]):
            ax.plot(*g.exterior.xy, color="0.4", lw=0.8)
        ax.scatter(x[sel], y[sel], s=0.6, color="0.75", lw=0, rasterized=True)
        ax.set_aspect("equal")
        ax.ticklabel_format(useOffset=False, style="plain")
        ax.tick_params(labelsize=7)
        ax.set_xlabel(f"x (m, {crs_label})", fontsize=8)
    axes[0].set_ylabel(f"y (m, {crs_label})", fontsize=8)
    ax = axes[0]
    if ref_layer is None:
        keep = sel[lab_r[sel] > 0]
        ax.scatter(x[keep], y[keep], s=1.2, lw=0, rasterized=True,
                   color=[colour(col_r[int(c)]) for c in lab_r[keep]])
    else:
        _draw_layer(ax, ref_layer.layer, {int(k): colour(v) for k, v in col_r.items()})
    ax.set_title(f"non-private reference: {rep.reference['name']}\n{rep.measures['n_clusters_reference']} clusters",
                 fontsize=9)
    if rep.private.layer is None:  # a per-record release: colour the points by their cluster
        keep = sel[lab_p[sel] > 0]
        axes[1].scatter(x[keep], y[keep], s=1.2, lw=0, rasterized=True,
                        color=[colour(col_p[int(c)]) for c in lab_p[keep]])
    else:
        _draw_layer(axes[1], rep.private.layer, {int(k): colour(v) for k, v in col_p.items()})
    md = rep.private.metadata
    eps = f", ε = {md['epsilon']:g}" if md.get("epsilon") is not None else ""
    if rep.algorithm in NOT_DP_ALGORITHMS:
        title = f"{md.get('mechanism')}\nNOT DIFFERENTIALLY PRIVATE{eps}"
    else:
        title = f"private ({md.get('mechanism')}){eps}"
    axes[1].set_title(f"{title}\n{rep.measures['n_clusters_private']} clusters", fontsize=9)
    m = rep.measures
    top = 1.0 - 1.0 / fig.get_figheight()
    fig.text(0.5, 0.985, "NOT PRIVATE — computed from the exact data — for the data owner only, do not publish",
             ha="center", va="top", fontsize=11, color="white", weight="bold",
             bbox=dict(boxstyle="round", facecolor="firebrick", edgecolor="none"))
    fig.text(0.5, top + 0.02, f"ARI {m['ari']:.3f}   AMI {m['ami']:.3f}   F {m['f_measure']:.3f}   "
             f"recall {_pct(m['recall'])}   precision {_pct(m['precision'])}", ha="center", va="bottom", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, top))
    _save_atomic(fig, path)


def _draw_layer(ax, layer, colours):
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as MPath

    for cid, geom in zip(layer["cluster_id"].to_numpy(), layer.geometry):
        if geom is None or geom.is_empty:
            continue
        verts, codes = [], []
        for poly in getattr(geom, "geoms", [geom]):
            for ring in [poly.exterior, *poly.interiors]:
                xy = np.asarray(ring.coords)
                verts.append(xy)
                codes.append(np.r_[MPath.MOVETO, np.full(len(xy) - 2, MPath.LINETO), MPath.CLOSEPOLY])
        patch = PathPatch(MPath(np.concatenate(verts), np.concatenate(codes)),
                          facecolor=colours.get(int(cid), "tab:red"), edgecolor="k", lw=0.3, alpha=0.75)
        ax.add_patch(patch)


def _save_atomic(fig, path):
    """Write the PNG under a temporary name (usual permissions) and rename it into place."""
    from ..io.files import atomic_write

    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png", bbox_inches="tight", pad_inches=0.15))
