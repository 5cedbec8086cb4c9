"""Parquet and CSV inputs, read in batches with pyarrow.

* **Parquet**: GeoParquet (a WKB or GeoArrow point geometry column and its
  ``geo`` metadata) or a plain table with coordinate columns, one file, a
  glob of files or a folder of them (hive partitions such as ``year=2024/``
  included). Read row group by row group, so a file of any size streams.
* **CSV** (also ``.csv.gz``, ``.bz2``, ``.xz``, ``.zip``, ``.tsv``): pyarrow's
  streaming CSV reader; the coordinate columns are read as text and parsed
  without ever failing on a value, so one bad record is dropped and counted,
  not shown. A UTF-8 byte-order mark is accepted; a file whose first row is
  data instead of column names is refused without showing that row.

Arrays with 64-bit offsets (``large_binary``, ``large_string``) are read
as they come, and no column is ever concatenated into one array, so there is
no 2 GB limit.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from ..errors import InputError
from ..formats import input_error_text
from .decode import (
    PointBatch,
    check_time_column,
    column_list,
    declared_geometry_check,
    decode_wkb,
    finish_batch,
    geoarrow_points,
    geoparquet_crs,
    person_from_arrow,
    pick_columns,
    resolve_crs,
    table_batch,
)
from .csvlines import CHUNK_BYTES, ESCAPED_UTF8, line_chunks, parse_lines
from .sources import DEFAULT_BATCH_ROWS, PointSource

__all__ = ["ParquetSource", "CsvSource"]


def _name(files, label):
    return os.path.basename(files[0]) if len(files) == 1 else label


# -- Parquet -----------------------------------------------------------------------------------

class ParquetSource(PointSource):
    """GeoParquet or plain Parquet file(s), read by row groups.

    ``row_groups``: for a fragment, ``{file: [row group indices]}`` to read
    (default: all).
    """

    def __init__(self, files, *, label, x=None, y=None, input_crs=None, person=None,
                 batch_rows=DEFAULT_BATCH_ROWS, row_groups=None, _spec=None, time=None):
        self.files = list(files)
        self.label = label
        self.person = person
        self.time = time
        self.batch_rows = int(batch_rows)
        self.row_groups = row_groups
        self._x, self._y, self._input_crs = x, y, input_crs
        self._spec = _spec or self._open()
        self.crs = self._spec["crs"]
        self.total_rows = self._spec.get("total_rows") if row_groups is None else None

    def _open(self):
        import pyarrow.parquet as pq

        what = _name(self.files, self.label)
        try:
            pf = pq.ParquetFile(self.files[0])
        except Exception as exc:
            raise InputError(f"cannot read {what!r} as Parquet: {input_error_text(exc, *self.files)}") from None
        schema = pf.schema_arrow
        names = list(schema.names)
        hive = _hive_keys(self.files[0], self.label)
        md = schema.metadata or {}
        geo = md.get(b"geo")
        spec = {"what": what}
        if geo is not None and self._x is None and self._y is None:
            try:
                geo = json.loads(geo)
                gcol = geo.get("primary_column", "geometry")
                cmeta = geo.get("columns", {}).get(gcol, {})
            except (ValueError, AttributeError):
                raise InputError(f"{what!r} has GeoParquet 'geo' metadata that is not valid JSON") from None
            if gcol not in names:
                raise InputError(f"{what!r}: the GeoParquet geometry column {gcol!r} is missing")
            enc = str(cmeta.get("encoding", "WKB")).lower()
            if enc not in ("wkb", "point"):
                raise InputError(f"{what!r}: geometry encoding {enc!r} is not points; dpgeo needs point geometries")
            declared = [str(t) for t in cmeta.get("geometry_types") or []]
            if not any(t.replace(" Z", "").replace(" M", "").strip() == "Point" for t in declared):
                for t in declared:  # a layer of points among other types: the others are dropped, counted
                    declared_geometry_check(t)
            spec.update(kind="geo", gcol=gcol, encoding=enc,
                        crs=resolve_crs(geoparquet_crs(cmeta), self._input_crs, repr(what)))
            if self.person is not None and self.person not in names and self.person not in hive:
                raise InputError(f"person column {self.person!r} is not in {what} ({column_list(names)})")
            if names.count(gcol) > 1:
                raise InputError(f"column name {gcol!r} appears {names.count(gcol)} times in {what}; "
                                 "give each column a distinct name")
        else:
            xcol, ycol, crs = pick_columns(names + [k for k in hive if k not in names], self._x, self._y,
                                           self.person, self._input_crs, what)
            spec.update(kind="xy", xcol=xcol, ycol=ycol, crs=crs)
        if self.time is not None:
            check_time_column(names + [k for k in hive if k not in names], self.time.column, repr(what))
        if len(self.files) <= 64:
            try:
                spec["total_rows"] = sum(pq.ParquetFile(f).metadata.num_rows for f in self.files)
            except Exception:
                spec["total_rows"] = None
        return spec

    def _columns(self):
        s = self._spec
        cols = [s["gcol"]] if s["kind"] == "geo" else [s["xcol"], s["ycol"]]
        if self.person is not None and self.person not in cols:
            cols.append(self.person)
        if self.time is not None and self.time.column not in cols:
            cols.append(self.time.column)
        return cols

    def batches(self):
        import pyarrow.parquet as pq

        for f in self.files:
            groups = None if self.row_groups is None else self.row_groups.get(f)
            if groups is not None and not groups:
                continue
            try:
                pf = pq.ParquetFile(f)
            except Exception as exc:
                raise InputError(f"cannot read {os.path.basename(f)!r} as Parquet: "
                                 f"{input_error_text(exc, f)}") from None
            names = pf.schema_arrow.names
            hive = _hive_keys(f, self.label)
            wanted = self._columns()
            missing = [c for c in wanted if c not in names and c not in hive]
            if missing:
                raise InputError(f"column {missing[0]!r} is not in {os.path.basename(f)} (one of the files of "
                                 f"{self.label!r})")
            read_cols = [c for c in wanted if c in names]
            try:
                it = pf.iter_batches(batch_size=self.batch_rows, row_groups=groups, columns=read_cols,
                                     use_threads=True)
                for rb in it:
                    yield self._batch(rb, hive)
            except InputError:
                raise
            except Exception as exc:
                raise InputError(f"cannot read {os.path.basename(f)!r}: {input_error_text(exc, f)}") from None

    def _batch(self, rb, hive) -> PointBatch:
        import pyarrow as pa

        s = self._spec
        n = rb.num_rows

        def column(name):
            if name in rb.schema.names:
                return rb.column(rb.schema.get_field_index(name))
            return pa.array([hive[name]] * n, type=pa.string())

        pcol = column(self.person) if self.person is not None else None
        tcol = column(self.time.column) if self.time is not None else None
        if s["kind"] == "xy":
            return table_batch(column(s["xcol"]), column(s["ycol"]), n, s["crs"], person_col=pcol, time_col=tcol,
                               time=self.time)
        g = column(s["gcol"])
        if s["encoding"] == "point" and pa.types.is_struct(g.type):
            x, y, valid, drops, kinds = geoarrow_points(g)
        elif pa.types.is_binary(g.type) or pa.types.is_large_binary(g.type):
            x, y, valid, drops, kinds = decode_wkb(g)
        else:
            raise InputError(f"{s['what']!r}: the geometry column has type {g.type}, not WKB points")
        person = person_null = None
        if pcol is not None:
            person, person_null = person_from_arrow(pcol)
        period = self.time.period_of(tcol)[0] if tcol is not None else None
        return finish_batch(x, y, n, s["crs"], person=person, person_null=person_null, drops=drops, valid=valid,
                            kinds=kinds, period=period)

    def fragments(self, target_rows):
        """Groups of consecutive row groups of about ``target_rows`` records, file by file."""
        import pyarrow.parquet as pq

        out = []
        for f in self.files:
            md = pq.ParquetFile(f).metadata
            cur, rows = [], 0
            for i in range(md.num_row_groups):
                cur.append(i)
                rows += md.row_group(i).num_rows
                if rows >= target_rows:
                    out.append({f: cur})
                    cur, rows = [], 0
            if cur or md.num_row_groups == 0:
                out.append({f: cur})
        return [ParquetSource([next(iter(g))], label=self.label, person=self.person, batch_rows=self.batch_rows,
                              row_groups=g, _spec=self._spec, time=self.time) for g in out]


def _hive_keys(path, root) -> dict:
    """``key=value`` folder names between the input's root and ``path`` (hive partitioning)."""
    rel = os.path.relpath(os.path.dirname(path), root) if os.path.isdir(root) else os.path.dirname(path)
    out = {}
    for part in re.split(r"[\\/]", rel):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v
    return out


# -- CSV -----------------------------------------------------------------------------------------

#: Bytes of CSV text per block of the streaming reader (≈ 1–2 million short records).
_CSV_BLOCK_BYTES = CHUNK_BYTES


class CsvSource(PointSource):
    """CSV file(s) with coordinate columns, one record per physical line (:mod:`~dpgeo.counting.csvlines`).

    ``quoted_newlines``: the owner's export has line breaks inside quoted
    fields; records then follow the quotes (an unclosed quote swallows the
    lines after it up to the end of its 48 MiB block).
    """

    def __init__(self, files, *, label, x=None, y=None, input_crs=None, person=None,
                 batch_rows=DEFAULT_BATCH_ROWS, _spec=None, time=None, quoted_newlines=False):
        self.files = list(files)
        self.label = label
        self.person = person
        self.time = time
        self.batch_rows = int(batch_rows)
        self.quoted_newlines = bool(quoted_newlines)
        self._x, self._y, self._input_crs = x, y, input_crs
        self._spec = _spec or self._open()
        self.crs = self._spec["crs"]

    def _open(self):
        what = _name(self.files, self.label)
        names, delim = _csv_header(self.files[0], what)
        xcol, ycol, crs = pick_columns(names, self._x, self._y, self.person, self._input_crs, what)
        if self.time is not None:
            check_time_column(names, self.time.column, repr(what))
        return {"what": what, "names": names, "delimiter": delim, "xcol": xcol, "ycol": ycol, "crs": crs}

    def batches(self):
        s = self._spec
        cols = [s["xcol"], s["ycol"]] + ([self.person] if self.person not in (None, s["xcol"], s["ycol"]) else [])
        tcol = None if self.time is None else self.time.column
        if tcol is not None and tcol not in cols:
            cols.append(tcol)
        for f in self.files:
            names, delim = (s["names"], s["delimiter"]) if f == self.files[0] else _csv_header(f, self.label)
            if f != self.files[0]:
                missing = [c for c in cols if c not in names]
                if missing:
                    raise InputError(f"column {missing[0]!r} is not in {os.path.basename(f)} (one of the files of "
                                     f"{self.label!r})")
            stream = _open_text(f)
            try:
                tables = (_quoted_tables if self.quoted_newlines else _line_tables)(stream, f, names, delim, cols)
                for table, n_bad in tables:
                    yield from self._table_batches(table, cols, n_bad)
            finally:
                stream.close()

    def _table_batches(self, table, cols, n_bad):
        s = self._spec
        tcol = None if self.time is None else self.time.column
        if table is None or table.num_rows == 0:
            if n_bad:
                e = np.zeros(0)
                yield PointBatch(e, e, None if self.person is None else np.zeros(0, dtype=object), n_bad,
                                 {"malformed_row": n_bad}, period=None if tcol is None else np.zeros(0, dtype=np.int64))
            return
        for a in range(0, table.num_rows, self.batch_rows):
            part = table.slice(a, self.batch_rows)
            b = table_batch(part.column(0), part.column(1), part.num_rows, s["crs"],
                            person_col=None if self.person is None else part.column(cols.index(self.person)),
                            time_col=None if tcol is None else part.column(cols.index(tcol)), time=self.time)
            if n_bad:  # lines that do not parse as a row (wrong number of fields, a quote left open)
                b.n_read += n_bad
                b.drops["malformed_row"] = n_bad
                n_bad = 0
            yield b

    def fragments(self, target_rows):
        """One fragment per file (a compressed CSV cannot be split)."""
        return [CsvSource([f], label=self.label, person=self.person, batch_rows=self.batch_rows, _spec=self._spec,
                          time=self.time, quoted_newlines=self.quoted_newlines) for f in self.files]


def _csv_options(names, delim, cols, *, quoted, threads=True, header=False, strict=False):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    skipped = []
    ro = pcsv.ReadOptions(block_size=_CSV_BLOCK_BYTES if quoted else 4 << 20, use_threads=threads,
                          column_names=None if header else names, encoding=ESCAPED_UTF8 if quoted else "utf8")
    po = pcsv.ParseOptions(delimiter=delim, newlines_in_values=quoted,
                           invalid_row_handler=None if strict else (lambda row: skipped.append(1) or "skip"))
    co = pcsv.ConvertOptions(include_columns=cols, column_types={c: pa.binary() for c in cols},
                             strings_can_be_null=True)
    return ro, po, co, skipped


def _line_tables(stream, path, names, delim, cols):
    """``(table, rows dropped as malformed)`` per chunk: one record per physical line."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    def parse(buf, threads=True, strict=False):
        ro, po, co, skipped = _csv_options(names, delim, cols, quoted=False, threads=threads, strict=strict)
        return pcsv.read_csv(pa.py_buffer(buf), read_options=ro, parse_options=po, convert_options=co), len(skipped)

    try:
        for chunk in line_chunks(stream, first=_after_header(stream)):
            yield parse_lines(chunk, parse, delim)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(_csv_error(exc, path)) from None


def _after_header(stream):
    """The bytes after the first line (the header), read from ``stream``."""
    head = b""
    while True:
        data = stream.read(1 << 16)
        if not data:
            return b""
        head += bytes(data)
        ends = [i for i in (head.find(b"\n"), head.find(b"\r")) if i >= 0]
        if ends:
            i = min(ends)
            return head[i + 2:] if head[i:i + 2] == b"\r\n" else head[i + 1:]


def _quoted_tables(stream, path, names, delim, cols):
    """``(record batch, rows dropped as malformed)``: records follow the quotes (``quoted_newlines``)."""
    import pyarrow.csv as pcsv

    ro, po, co, skipped = _csv_options(names, delim, cols, quoted=True, header=True)
    try:
        reader = pcsv.open_csv(stream, read_options=ro, parse_options=po, convert_options=co)
    except Exception as exc:
        raise InputError(_csv_error(exc, path)) from None
    while True:
        try:
            rb = reader.read_next_batch()
        except StopIteration:
            if skipped:
                yield _empty_table(cols), len(skipped)
            return
        except Exception as exc:
            raise InputError(_csv_error(exc, path)) from None
        n_bad, skipped[:] = len(skipped), []
        yield rb, n_bad


def _empty_table(cols):
    import pyarrow as pa

    return pa.table({c: pa.array([], pa.binary()) for c in dict.fromkeys(cols)})


def _open_text(path):
    """A pyarrow input stream of a possibly compressed text file."""
    import pyarrow as pa

    low = path.lower()
    if low.endswith(".gz"):
        return pa.input_stream(path, compression="gzip")
    if low.endswith(".bz2"):
        return pa.input_stream(path, compression="bz2")
    if low.endswith(".xz"):
        import lzma

        return pa.PythonFile(lzma.open(path, "rb"), mode="r")
    if low.endswith(".zip"):
        import zipfile

        z = zipfile.ZipFile(path)
        members = [n for n in z.namelist() if not n.endswith("/")]
        if len(members) != 1:
            raise InputError(f"{os.path.basename(path)} holds {len(members)} files; a zipped CSV must hold one")
        return pa.PythonFile(z.open(members[0]), mode="r")
    return pa.input_stream(path)


def _csv_header(path, what):
    """Column names and delimiter from the first line (a UTF-8 byte-order mark is skipped)."""
    import csv
    import io

    try:
        stream = _open_text(path)
        try:
            raw = stream.read(1 << 16)
        finally:
            stream.close()
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"cannot read {what!r} as CSV: {input_error_text(exc, path)}") from None
    ends = [i for i in (raw.find(b"\n"), raw.find(b"\r")) if i >= 0]
    line = raw[:min(ends)] if ends else raw
    try:  # the header line only: a record's bytes never decide whether the file is read
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"the first line of {what!r} (its column names) is not UTF-8 text; save the file as UTF-8 "
                         "CSV") from None
    first = text.splitlines()[0] if text.strip() else ""
    if not first.strip():
        raise InputError(f"input {what!r} has no records (the file is empty)")
    if path.lower().endswith((".tsv", ".tsv.gz", ".tab")):
        delim = "\t"
    else:
        counts = {d: first.count(d) for d in (",", ";", "\t", "|")}
        delim = max(counts, key=counts.get) if max(counts.values()) else ","
    return next(csv.reader(io.StringIO(first), delimiter=delim)), delim


def _csv_error(exc, path):
    """An error of the CSV parser, without the record it quotes."""
    msg = input_error_text(exc, path)
    m = re.search(r"Expected (\d+) columns, got (\d+)", msg)
    if m:
        return (f"{os.path.basename(path)}: a row has {m.group(2)} fields where the header has {m.group(1)}; "
                "fix the file (quote fields that contain the delimiter)")
    if "Empty CSV file" in msg or "Empty file" in msg:
        return f"input {os.path.basename(path)!r} has no records (the file is empty)"
    return f"cannot read {os.path.basename(path)!r} as CSV ({type(exc).__name__})"
