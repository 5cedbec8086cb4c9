"""The values of one column of a batch, as Arrow arrays a reader can decode record by record.

Whatever one record holds — a value of another type, an object, bytes that
are not UTF-8, a JSON list in one GeoJSON feature — is that record's problem:
nothing here lets one value change how the column's other values are read,
or fail the column (``docs/privacy.md``, "The reader's part").
"""

from __future__ import annotations

import numpy as np

__all__ = ["plain_array", "arrow_of"]


def plain_array(col):
    """One Arrow array of plain values: chunks combined, a dictionary decoded, an extension type's storage.

    GDAL reads a GeoJSON property that holds an object or a list in any
    feature as JSON text (the ``arrow.json`` extension): its storage holds
    the other features' values as they are, so one feature changes no
    other's value. Text that is not all UTF-8 comes back as bytes.
    """
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(col.type, pa.ExtensionType) or isinstance(col, pa.ExtensionArray):
        col = col.storage
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        try:  # GDAL hands on a GeoPackage's text as it is stored, UTF-8 or not
            col.validate(full=True)
        except pa.ArrowInvalid:  # read as bytes instead: decoded record by record (text_of_binary)
            col = col.view(pa.large_binary() if pa.types.is_large_string(col.type) else pa.binary())
    return col


def arrow_of(values, kind="any"):
    """An Arrow array of values in memory (a pandas column, a list), whatever one of them holds.

    Values of one type become that Arrow type when it is one that ``kind``
    reads (``"number"``: numbers; ``"time"``: numbers, timestamps, dates;
    ``"any"``: those and booleans and bytes); a column that mixes types
    (numbers and text, bytes, objects) or holds another type becomes text,
    each value written alone (``str``; None and NaN stay missing), so one
    odd value is that record's problem, never the column's.
    """
    import pyarrow as pa

    try:
        arr = pa.array(values, from_pandas=True)
        t = arr.type
        ok = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t) or pa.types.is_null(t) \
            or pa.types.is_large_string(t)
        if kind != "number":
            ok = ok or pa.types.is_timestamp(t) or pa.types.is_date(t)
        if kind == "any":
            ok = ok or pa.types.is_boolean(t) or pa.types.is_binary(t)
        if ok:
            return arr
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    import pandas as pd

    obj = np.asarray(values, dtype=object).ravel()
    missing = np.asarray(pd.isna(obj), dtype=bool)
    text = np.full(obj.size, None, dtype=object)
    if (~missing).any():
        text[~missing] = np.frompyfunc(_one_text, 1, 1)(obj[~missing])
    return pa.array(text, type=pa.string())


def _one_text(v) -> str:
    """A value as valid UTF-8 text (bytes as ``b'..'``, never decoded; a lone surrogate escaped)."""
    s = str(v)
    return s if s.isascii() else s.encode("utf-8", "backslashreplace").decode("utf-8")
