"""The sample's map with and without a radius: docs/img/auto_minneapolis.png (the README's figure).

Left: spans at radius 150 m and MinPts 40 (the parameters ``./dev/run-sample`` used to
guess), ε = 1. Right: spans without a radius (auto), ε = 1: the flat map's clusters in
colour; and the tree of levels (every level a region, coloured by the density where it
separates, the clusters outlined). Both seeded (seed 1), so not private — a figure, not a release.

Usage::

    python benchmarks/sample_auto_map.py                  # writes docs/img/auto_minneapolis.png
    python benchmarks/sample_auto_map.py --out /tmp/x.png --epsilon 0.5

It also prints what a reader checks: pairs of clusters that touch, clusters of several parts, and the
clusters within 250 m of Lake Street (a corridor of the city; docs/results.md §1b, "The sample").
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STOPS = ROOT / "sample_layers" / "minneapolis_police_stops_2017.gpkg"
AREA = ROOT / "sample_layers" / "minneapolis_study_area.geojson"
#: Lake Street from Bde Maka Ska to the river (longitude, latitude): a corridor of the city, public.
LAKE_STREET = [(-93.3215, 44.9484), (-93.2065, 44.9484)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "img" / "auto_minneapolis.png"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    args = ap.parse_args(argv)

    import geopandas as gpd
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import dpgeo

    warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)
    kw = {"epsilon": args.epsilon, "domain": str(AREA), "seed": 1, "ledger": False}
    fixed = dpgeo.dbscan_spans(str(STOPS), radius_m=150, min_points=40, **kw)
    auto = dpgeo.dbscan_spans(str(STOPS), **kw)
    crs = auto.layer.crs
    pts = gpd.read_file(STOPS).to_crs(crs)
    area = gpd.read_file(AREA).to_crs(crs)
    n = len(pts)
    fig, axes = plt.subplots(1, 3, figsize=(18, 9.0))
    for ax in axes:
        area.boundary.plot(ax=ax, color="0.4", linewidth=0.8)
        pts.plot(ax=ax, markersize=0.15, color="0.55", alpha=0.5)
        ax.set_axis_off()
    big = int(fixed.layer["dp_count"].max()) if len(fixed.layer) else 0
    fixed.layer.plot(ax=axes[0], column="cluster_id", cmap="tab20", alpha=0.65, edgecolor="k", linewidth=0.3)
    axes[0].set_title(f"radius 150 m, MinPts 40: {len(fixed.layer)} spans,\n"
                      f"the largest holds {big:,} of {n:,} stops", fontsize=11)
    lv = auto.levels
    auto.layer.plot(ax=axes[1], column="cluster_id", cmap="tab20", alpha=0.75, edgecolor="k", linewidth=0.3)
    # the tree: every level as a polygon, shallow levels drawn first, coloured by the density where it separates
    import numpy as np

    order = lv.sort_values("depth")
    order.plot(ax=axes[2], column=np.log10(order["level"].clip(lower=1)), cmap="magma_r", alpha=0.85,
               edgecolor="none")
    auto.layer.boundary.plot(ax=axes[2], color="k", linewidth=0.5)
    axes[2].set_title(f"the tree of levels: {len(lv)} nested regions coloured by the density where each\n"
                      f"separates (darker: denser); black: the clusters of the map", fontsize=11)
    md = auto.metadata
    big = int(auto.layer["dp_count"].max()) if len(auto.layer) else 0
    axes[1].set_title(f"no radius (auto): {len(auto.layer)} clusters on {md['cell_width_m']:.0f} m cells, "
                      f"the largest holds {big:,}",
                      fontsize=11)
    fig.suptitle(f"Minneapolis police stops 2017, ε = {args.epsilon:g} (seeded: a figure, not a release)",
                 fontsize=12)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=80)
    # the reader's checks: clusters that touch, and the clusters along Lake Street (a corridor of the city)
    import shapely

    g = auto.layer.geometry.values
    a, b = shapely.STRtree(g).query(g, predicate="intersects")
    band = gpd.GeoSeries([shapely.LineString(LAKE_STREET)], crs="EPSG:4326").to_crs(crs).iloc[0].buffer(250)
    along = auto.layer[auto.layer.intersects(band)]
    covered = shapely.union_all(along.geometry.intersection(band).values).area / band.area if len(along) else 0.0
    print(f"touching pairs {int((a < b).sum())}, clusters of several parts {int((auto.layer['parts'] > 1).sum())}, "
          f"stops held {int(auto.layer['dp_count'].sum()):,}; within 250 m of Lake Street {len(along)} clusters, "
          f"covering {covered:.0%} of that band")
    print(f"wrote {args.out}: fixed {len(fixed.layer)} spans (largest {int(fixed.layer['dp_count'].max()):,}); "
          f"auto {len(auto.layer)} clusters (largest {big:,}), {len(lv)} levels, cells {md['cell_width_m']:.1f} m")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
