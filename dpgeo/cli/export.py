"""``dpgeo export``: an existing release in another format or CRS — no private data, no budget."""

from __future__ import annotations

import argparse
import sys

__all__ = ["register"]

_EXAMPLES = """\
examples:
  dpgeo export spans.gpkg -o spans.geojson            # GeoPackage -> GeoJSON (EPSG:4326)
  dpgeo export spans.geojson -o spans.gpkg --out-crs EPSG:26915
  dpgeo export spans.gpkg -o a.geojson -o b.gpkg      # several at once

Exporting reads only the release file: the private points are not touched and no privacy budget is
spent. Post-processing a differentially private output is free; the privacy metadata is carried over.
"""


def register(sub):
    """Add ``dpgeo export`` to the command line's sub-commands."""
    ex = sub.add_parser(
        "export", help="write an existing dpgeo release in another format or CRS (free: no data, no budget)",
        description="Write a release made by dpgeo (a GeoPackage or GeoJSON from the command line, the Python API "
                    "or the QGIS plugin) to other files, carrying its privacy metadata over. Reads no private data "
                    "and spends no privacy budget.",
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ex.add_argument("release", help="a .gpkg or .geojson written by dpgeo")
    ex.add_argument("-o", "--output", required=True, action="append", metavar="OUTPUT",
                    help="output .gpkg, .geojson, .html or .png (written atomically); repeat -o for several")
    ex.add_argument("--out-crs", default=None, metavar="CRS",
                    help="CRS of a GeoPackage output (default: the release's); GeoJSON is always EPSG:4326")
    from .args import _ENGINES

    ex.add_argument("--engine", choices=_ENGINES, default="auto",
                    help="GDAL binding that reads and writes GeoPackages (default auto)")
    ex.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    from .args import _add_map_args

    _add_map_args(ex)
    ex.set_defaults(func=_cmd_export)


def _cmd_export(args):
    from ..formats import check_engine
    from ..release import read_release
    from .outputs import _basemap_for, check_out_crs, check_output_paths, output_crs_for

    check_output_paths(args.output, args)
    check_out_crs(args.output, args.out_crs)
    for out in args.output:  # an output that is the release itself is refused by check_output_paths
        check_engine(args.engine, write=out)
    release = read_release(args.release, engine=args.engine)
    written = [release.to_file(out, crs=output_crs_for(out, args.out_crs), engine=args.engine,
                               basemap=_basemap_for(out, args), title=args.title,
                               attribution=_basemap_for(out, args, "basemap_attribution"))
               for out in args.output]
    if not args.quiet:
        md = release.metadata
        private = str(md.get("differentially_private")).lower()
        from ..io.palette import feature_words

        print(f"wrote {', '.join(written)}: {feature_words(release.layer, len(release.layer))} of release "
              f"{md.get('release_id', '?')} "
              f"(epsilon={md.get('epsilon')}, differentially_private={private}); no budget spent", file=sys.stderr)
        if not md.get("differentially_private"):
            print("WARNING: NOT differentially private: " + "; ".join(md.get("not_private_reasons") or []),
                  file=sys.stderr)
    return 0
