"""Vector layers read through GDAL (GeoPackage, GeoJSON, Shapefile, FlatGeobuf, ...), in batches.

With pyogrio (the default engine) a layer is read as GDAL's Arrow stream
(:func:`pyogrio.raw.open_arrow`): record batches of WKB geometries, decoded
straight into numpy arrays. With fiona, features are read one Python object
at a time, in batches of the same size. Either way the layer is checked
first from its metadata alone: one layer chosen, points declared, a CRS, the
person column present.
"""

from __future__ import annotations

import os
import warnings

from ..errors import InputError
from ..formats import input_error_text
from .decode import (
    check_time_column,
    column_list,
    PointBatch,
    declared_geometry_check,
    decode_geojson,
    decode_wkb,
    finish_batch,
    person_from_arrow,
)
from .decode import resolve_crs
from .sources import DEFAULT_BATCH_ROWS, PointSource

__all__ = ["GdalSource", "FionaSource"]


#: Tables without geometry that GIS tools add to a file beside its layers (QGIS's and dpgeo's default styles):
#: never taken for the layer of points when no --layer is given.
STYLE_TABLES = ("layer_styles",)


def _layers(path):
    """The layers of ``path``, without the style tables GIS tools add (a GeoPackage saved with its QGIS style
    is still a one-layer file)."""
    import pyogrio

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            listed = pyogrio.list_layers(path)
            return [str(n) for n, geom in listed if not (geom is None and str(n) in STYLE_TABLES)]
    except Exception as exc:
        raise InputError(f"cannot read {path!r} as a vector layer: {input_error_text(exc, path)}") from None


def _pick_layer(path, layer):
    names = _layers(path)
    if layer is None:
        if len(names) > 1:
            shown = ", ".join(names[:10]) + (f", ... ({len(names)} in all)" if len(names) > 10 else "")
            raise InputError(f"{os.path.basename(path)} has {len(names)} layers ({shown}); "
                             "choose one with --layer NAME")
        return names[0] if names else None
    if names and str(layer) not in names:
        raise InputError(f"{os.path.basename(path)} has no layer {layer!r} (layers: {', '.join(names[:10])})")
    return layer


def _quiet_gdal():
    """GDAL's own error lines (they may quote a feature's values) go nowhere: the reasons a feature is dropped are
    counted instead. GDAL reads ``CPL_LOG`` at its first message, so this is set before reading any feature."""
    import pyogrio

    if pyogrio.get_gdal_config_option("CPL_LOG") is None:
        pyogrio.set_gdal_config_options({"CPL_LOG": os.devnull})


class GdalSource(PointSource):
    """A point layer (or several files of the same kind) read as GDAL's Arrow stream through pyogrio.

    ``feature_range``: for a fragment, ``(skip, count)`` features of the one file.
    """

    def __init__(self, files, *, label, layer=None, input_crs=None, person=None, batch_rows=DEFAULT_BATCH_ROWS,
                 feature_range=None, _spec=None, time=None):
        self.files = list(files)
        self.label = label
        self.person = person
        self.time = time
        self.batch_rows = int(batch_rows)
        self.feature_range = feature_range
        self._layer_arg, self._input_crs = layer, input_crs
        self._spec = _spec or self._open()
        self.crs = self._spec["crs"]
        self.total_rows = self._spec.get("total_rows") if feature_range is None else feature_range[1]

    def _open(self):
        import pyogrio

        spec = {"layers": {}, "total_rows": 0}
        crs0 = None
        for f in self.files:
            layer = _pick_layer(f, self._layer_arg)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    info = pyogrio.read_info(f, layer=layer)
            except Exception as exc:
                raise InputError(f"cannot read {f!r} as a vector layer: {input_error_text(exc, f)}") from None
            name = os.path.basename(f)
            if info.get("geometry_type") in (None, "None") and not info.get("geometry_name"):
                raise InputError(f"{name} has no geometry column; for a table of coordinates use CSV or Parquet "
                                 "with --x/--y")
            declared_geometry_check(info.get("geometry_type"))
            fields = [str(c) for c in info.get("fields", [])]
            if self.person is not None:
                if self.person not in fields:
                    raise InputError(f"person column {self.person!r} is not in {name} ({column_list(fields)})")
                if fields.count(self.person) > 1:
                    raise InputError(f"column name {self.person!r} appears {fields.count(self.person)} times in "
                                     f"{name}; give each column a distinct name")
            if self.time is not None:
                check_time_column(fields, self.time.column, name)
            crs = resolve_crs(info.get("crs"), self._input_crs, name)
            if crs0 is None:
                crs0 = crs
            elif not crs.equals(crs0, ignore_axis_order=True):
                raise InputError(f"the files of {self.label!r} have different CRSs ({crs0.name}, {crs.name}); "
                                 "reproject them to one")
            n = info.get("features")
            spec["layers"][f] = layer
            spec.setdefault("drivers", {})[f] = info.get("driver")
            spec.setdefault("features", {})[f] = None if n is None or n < 0 else int(n)
            spec["total_rows"] = None if (n is None or n < 0 or spec["total_rows"] is None) else \
                spec["total_rows"] + int(n)
        spec["crs"] = crs0
        return spec

    def batches(self):
        for f in self.files:
            start, count = (0, None) if self.feature_range is None else (int(self.feature_range[0]),
                                                                         int(self.feature_range[1]))
            yield from self._file_batches(f, start, count)

    def _stream(self, f, skip, size):
        from pyogrio.raw import open_arrow

        kw = {"skip_features": int(skip)} if skip else {}
        if self._spec.get("drivers", {}).get(f) == "GeoJSON":  # a list in one feature keeps the field text
            kw["ARRAY_AS_STRING"] = "YES"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return open_arrow(f, layer=self._spec["layers"][f], columns=self._attributes(), batch_size=max(1, size),
                              use_pyarrow=True, return_fids=False, **kw)

    def _file_batches(self, f, start, count):
        """The batches of features ``[start, start + count)`` of ``f``; a feature GDAL fails on is dropped alone.

        GDAL's Arrow stream fails as a whole when it meets a feature it cannot
        read (text that is not UTF-8 in a GeoPackage, a broken geometry blob);
        the stream is then opened again after the features already read and
        the failing batch is read in halves until the feature is found and
        dropped (counted as ``unreadable_feature``). Messages of GDAL and of
        pyogrio about a feature (they may quote its values) are not shown.
        """
        _quiet_gdal()
        end = None if count is None else start + count
        pos, size = start, self.batch_rows
        while end is None or pos < end:
            want = size if end is None else min(size, end - pos)
            try:
                ctx = self._stream(f, pos, want)
            except Exception as exc:  # the file itself, not a feature
                raise InputError(f"cannot read {os.path.basename(f)!r} as a vector layer: "
                                 f"{input_error_text(exc, f)}") from None
            failed = False
            with ctx as (meta, reader):
                gcol = meta.get("geometry_name") or "wkb_geometry"
                it = iter(reader)
                while end is None or pos < end:
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            rb = next(it, None)
                    except Exception:  # noqa: BLE001 - a feature GDAL cannot read
                        failed = True
                        break
                    if rb is None:
                        return
                    if end is not None:
                        rb = rb.slice(0, end - pos)
                    pos += rb.num_rows
                    yield self._batch(rb, gcol)
            if not failed:
                return
            n_seen = 0
            for b in self._window(f, pos, want, gcol):
                n_seen += b.n_read
                yield b
            total = self._spec.get("features", {}).get(f)
            if n_seen == 0 or (total is not None and pos + want >= total):
                return
            pos += want

    def _window(self, f, pos, n, gcol):
        """Features ``[pos, pos + n)`` read in halves until each part reads; a single feature that fails is
        dropped and counted."""
        parts = []
        try:
            with self._stream(f, pos, n) as (meta, reader):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rb = next(iter(reader), None)
                if rb is not None:
                    parts.append(rb.slice(0, n))
        except Exception:  # noqa: BLE001
            if n == 1:
                import numpy as np

                e = np.zeros(0)
                yield PointBatch(e, e, None if self.person is None else np.zeros(0, dtype=object), 1,
                                 {"unreadable_feature": 1},
                                 period=None if self.time is None else np.zeros(0, dtype=np.int64))
                return
            yield from self._window(f, pos, n // 2, gcol)
            yield from self._window(f, pos + n // 2, n - n // 2, gcol)
            return
        for rb in parts:
            yield self._batch(rb, gcol)

    def _attributes(self):
        cols = [self.person] if self.person else []
        if self.time is not None and self.time.column not in cols:
            cols.append(self.time.column)
        return cols

    def _batch(self, rb, gcol):
        n = rb.num_rows
        names = rb.schema.names
        if gcol not in names:
            raise InputError(f"{self.label!r} has no geometry column")
        x, y, valid, drops, kinds = decode_wkb(rb.column(names.index(gcol)))
        person = person_null = None
        if self.person is not None:
            person, person_null = person_from_arrow(rb.column(names.index(self.person)))
        period = None
        if self.time is not None:
            period = self.time.period_of(rb.column(names.index(self.time.column)))[0]
        return finish_batch(x, y, n, self.crs, person=person, person_null=person_null, drops=drops, valid=valid,
                            kinds=kinds, period=period)

    def fragments(self, target_rows):
        """Ranges of about ``target_rows`` features of each file (files whose size GDAL cannot tell: whole)."""
        import pyogrio

        out = []
        for f in self.files:
            layer = self._spec["layers"][f]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                n = pyogrio.read_info(f, layer=layer).get("features")
            if n is None or n < 0:
                out.append(GdalSource([f], label=self.label, person=self.person, batch_rows=self.batch_rows,
                                      _spec=self._spec, time=self.time))
                continue
            for a in range(0, max(int(n), 1), int(target_rows)):
                out.append(GdalSource([f], label=self.label, person=self.person, batch_rows=self.batch_rows,
                                      feature_range=(a, min(int(target_rows), int(n) - a)), _spec=self._spec,
                                      time=self.time))
        return out


class FionaSource(PointSource):
    """A point layer read through fiona, one Python object per feature (slower than pyogrio, same points)."""

    def __init__(self, files, *, label, layer=None, input_crs=None, person=None, batch_rows=DEFAULT_BATCH_ROWS,
                 time=None):
        self.files = list(files)
        self.label = label
        self.person = person
        self.time = time
        self.batch_rows = int(batch_rows)
        self._layer, self._input_crs = layer, input_crs
        self.crs = None
        self._layers = {}
        for f in self.files:
            crs = self._check(f)
            if self.crs is None:
                self.crs = crs
            elif not crs.equals(self.crs, ignore_axis_order=True):
                raise InputError(f"the files of {self.label!r} have different CRSs; reproject them to one")

    def _check(self, path):
        import fiona

        name = os.path.basename(path)
        try:
            layers = fiona.listlayers(path)
        except Exception as exc:
            raise InputError(f"cannot read {path!r} as a vector layer: {input_error_text(exc, path)}") from None
        layers = [n for n in layers if n not in STYLE_TABLES]
        layer = self._layer
        if layer is None and len(layers) > 1:
            raise InputError(f"{name} has {len(layers)} layers ({', '.join(layers[:10])}); choose one with "
                             "--layer NAME")
        if layer is not None and str(layer) not in layers:
            raise InputError(f"{name} has no layer {layer!r} (layers: {', '.join(layers[:10])})")
        self._layers[path] = layer
        try:
            with fiona.Env(), fiona.open(path, layer=layer) as src:
                fields = list(src.schema["properties"])
                gtype = src.schema.get("geometry")
                crs = src.crs_wkt or None
        except Exception as exc:
            raise InputError(f"cannot read {path!r} as a vector layer: {input_error_text(exc, path)}") from None
        if gtype in (None, "None"):
            raise InputError(f"{name} has no geometry column; for a table of coordinates use CSV or Parquet "
                             "with --x/--y")
        declared_geometry_check(gtype if gtype != "Any" else None)
        if self.person and self.person not in fields:
            raise InputError(f"person column {self.person!r} is not in {name} ({column_list(fields)})")
        if self.time is not None:
            check_time_column(fields, self.time.column, name)
        return resolve_crs(crs, self._input_crs, name)

    def batches(self):
        import fiona

        for f in self.files:
            layer = self._layers[f]
            try:
                with fiona.Env():
                    tcol = None if self.time is None else self.time.column
                    wanted = ([self.person] if self.person else []) + ([tcol] if tcol and tcol != self.person else [])
                    try:
                        src = fiona.open(f, layer=layer, include_fields=wanted)
                    except fiona.errors.DriverError:  # drivers that cannot skip fields (GeoJSON) read them all
                        src = fiona.open(f, layer=layer)
                    with src:
                        geoms, pers, times = [], [], []
                        for feat in src:
                            geoms.append(feat.geometry)
                            if self.person:
                                pers.append(feat.properties[self.person])
                            if tcol:
                                times.append(feat.properties[tcol])
                            if len(geoms) >= self.batch_rows:
                                yield self._batch(geoms, pers, times)
                                geoms, pers, times = [], [], []
                        if geoms:
                            yield self._batch(geoms, pers, times)
            except InputError:
                raise
            except Exception as exc:
                raise InputError(f"cannot read {f!r} as a vector layer: {input_error_text(exc, f)}") from None

    def _batch(self, geoms, pers, times=()):
        x, y, valid, drops, kinds = decode_geojson(geoms)
        person = None
        if self.person:
            import pandas as pd

            person = pd.Series(pers).to_numpy()  # the same dtypes as the arrow path
        period = None
        if self.time is not None:
            from .sources import _time_array

            period = self.time.period_of(_time_array(times, len(geoms)))[0]
        return finish_batch(x, y, len(geoms), self.crs, person=person, drops=drops, valid=valid, kinds=kinds,
                            period=period)
