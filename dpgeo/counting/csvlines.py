"""CSV records one physical line each, and text fields decoded record by record.

The reader's part of the guarantee (``docs/privacy.md``, "One record in, at
most one record out"): nothing one record holds may change how another
record is read, or whether the run succeeds. For CSV that takes two things
a CSV parser does not give by itself:

* **Framing.** By default a record is one physical line (ended by ``\\n``,
  ``\\r\\n`` or ``\\r``). A parser that follows quotes across line ends lets
  one field that opens a quote and never closes it swallow every later line
  of its block. Here the text is cut into chunks at line ends, each chunk is
  parsed by pyarrow, and the number of rows it gives is checked against the
  number of non-empty lines of the chunk (one vectorised pass). Only when
  they differ are the lines that leave a quote open found (a regular
  expression of the parser's own quoting rules, applied to the lines that
  hold a quote) and dropped, each counted as ``malformed_row``, and the chunk
  is parsed again. A line of the wrong number of fields is dropped and
  counted the same way, by the parser.
* **Text.** Columns are read as bytes; a field that is not UTF-8 makes its
  record's coordinate or time ``unparsed`` (and a person identifier is kept
  with its bytes escaped), instead of failing the file.

An owner whose export has line breaks inside quoted fields says so
(``quoted_newlines=True``, ``--quoted-newlines``): records then follow the
quotes, and one field that opens a quote without closing it swallows the
lines after it up to the end of its block of 48 MiB — the cost of that choice.
"""

from __future__ import annotations

import codecs
import re

import numpy as np

__all__ = ["line_chunks", "count_lines", "parse_lines", "text_of_binary", "is_utf8", "ESCAPED_UTF8"]

#: The encoding pyarrow reads a CSV with quoted line breaks in: UTF-8, each byte that is not UTF-8 written
#: ``\xNN`` (its record keeps its place; a coordinate or time with one is then not a number or time).
ESCAPED_UTF8 = "dpgeo-utf-8-escaped"


class _EscapedDecoder(codecs.BufferedIncrementalDecoder):
    def _buffer_decode(self, data, errors, final):
        return codecs.utf_8_decode(data, "backslashreplace", final)


def _find_codec(name):
    if name.replace("_", "-") != ESCAPED_UTF8:
        return None
    utf8 = codecs.lookup("utf-8")
    return codecs.CodecInfo(utf8.encode, lambda b, errors="strict": codecs.utf_8_decode(b, "backslashreplace", True),
                            incrementalencoder=utf8.incrementalencoder, incrementaldecoder=_EscapedDecoder,
                            name=ESCAPED_UTF8)


codecs.register(_find_codec)


def is_utf8(buf) -> bool:
    """Whether ``buf`` is UTF-8 (one vectorised validation by Arrow)."""
    import pyarrow as pa

    data = pa.py_buffer(buf)
    arr = pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(np.array([0, len(data)], np.int32)), data])
    try:
        arr.cast(pa.string())
    except pa.ArrowInvalid:
        return False
    return True

#: Bytes of CSV text per chunk (≈ 1–2 million short records).
CHUNK_BYTES = 48 << 20


def line_chunks(stream, chunk_bytes=CHUNK_BYTES, first=b""):
    """Chunks of whole physical lines of a binary stream (each ends at a line end, or at the end of the text).

    The next block is read (and decompressed) on another thread while the caller parses this one.
    """
    from concurrent.futures import ThreadPoolExecutor

    tail = first
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(stream.read, chunk_bytes)
        while True:
            data = pending.result()
            if not data:
                if tail:
                    yield tail
                return
            pending = pool.submit(stream.read, chunk_bytes)
            buf = tail + data if tail else data
            nl = buf.rfind(b"\n")
            cut = max(nl, buf.rfind(b"\r", max(nl, 0))) + 1
            if cut == 0:  # no line end yet: one line longer than a block
                tail = buf
                continue
            tail = buf[cut:]
            yield buf[:cut] if cut < len(buf) else buf


def count_lines(buf) -> int:
    """Non-empty physical lines of ``buf`` (``\\n``, ``\\r\\n`` and ``\\r`` end a line; pyarrow skips empty ones)."""
    if not buf:
        return 0
    a = np.frombuffer(buf, dtype=np.uint8)
    n = 0
    for end in (np.flatnonzero(a == 10), np.flatnonzero(a == 13)):
        if end.size:  # a line end right after another (or a \n after \r) ends no line of its own
            prev = np.where(end > 0, a[np.maximum(end - 1, 0)], 10)
            n += int(np.count_nonzero((prev != 10) & (prev != 13)))
    if a[-1] not in (10, 13):
        n += 1
    return n


def _line_re(delimiter: str):
    """A line that pyarrow reads as one row: its quoted fields all close (``""`` is a quote inside one)."""
    d = re.escape(delimiter.encode())
    field = rb'(?:"(?:[^"]|"")*+"[^' + d + rb']*|[^' + d + rb'"][^' + d + rb']*|)'
    return re.compile(field + rb"(?:" + d + field + rb")*")


def _suspect_lines(buf, delimiter, parse):
    """``(buf without the lines that cannot be a row alone, number of such lines)``.

    A line is dropped when it leaves a quote open (:func:`_line_re`), or when
    it is not UTF-8 and does not parse alone (pyarrow hands a row with the
    wrong number of fields to its handler as text, and fails the whole chunk
    when that text is not UTF-8).
    """
    line_ok = _line_re(delimiter).fullmatch
    keep, bad = [], 0
    for line in buf.splitlines(keepends=True):
        if b'"' in line and not line_ok(line.rstrip(b"\r\n")):
            bad += 1
        elif not line.isascii() and not _utf8(line) and not _alone(parse, line):
            bad += 1
        else:
            keep.append(line)
    return b"".join(keep), bad


def _utf8(b) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _alone(parse, line) -> bool:
    """Whether ``line`` parses by itself as one well-formed row (no handler of invalid rows: it gets their text)."""
    got = _try(parse, line, threads=False, strict=True)
    return got is not None and got[0].num_rows == 1 and got[1] == 0


def _one_row_lines(buf, parse):
    """The last resort, never needed if :func:`_suspect_lines` knows pyarrow's rules: every line with a quote or a
    byte ≥ 0x80 parsed alone, and kept only when it is one well-formed row."""
    keep, bad = [], 0
    for line in buf.splitlines(keepends=True):
        if b'"' not in line and line.isascii():
            keep.append(line)
        elif _alone(parse, line):
            keep.append(line if line.endswith((b"\n", b"\r")) else line + b"\n")
        else:
            bad += 1
    return b"".join(keep), bad


def _try(parse, buf, **kw):
    """``parse(buf)``, or None when the parser fails on it (a quoted field across its internal blocks)."""
    import pyarrow as pa

    try:
        return parse(buf, **kw)
    except (pa.ArrowInvalid, pa.ArrowException):
        return None


def parse_lines(buf, parse, delimiter):
    """Parse a chunk of whole lines so that each row is one physical line: ``(table, rows dropped as malformed)``.

    ``parse(buf, threads=True) -> (table, rows the parser skipped)`` parses
    CSV text without a header into binary columns; a chunk that is all
    UTF-8 (one vectorised validation) has them viewed as text at no cost.
    """
    utf8 = is_utf8(buf)
    if not utf8 or b'"' in buf:  # a quote: a row may take several lines; count them
        n_lines = count_lines(buf)
    else:  # no quote: no row can take two lines
        n_lines = None if buf.strip(b"\r\n") else 0
    if n_lines == 0:
        return None, 0
    got = _try(parse, buf) if utf8 else None  # a row handed to the handler must be UTF-8 text
    if got is not None and (n_lines is None or got[0].num_rows + got[1] == n_lines):
        return _as_text(got[0]), got[1]
    clean, open_quote = _suspect_lines(buf, delimiter, parse)
    got = _try(parse, clean) if count_lines(clean) else None
    if got is None or got[0].num_rows + got[1] != count_lines(clean):
        clean, open_quote = _one_row_lines(buf, parse)
        got = parse(clean) if count_lines(clean) else None
    if got is None:
        return None, open_quote
    return got[0], got[1] + open_quote


def _as_text(table):
    """Binary columns of UTF-8 text viewed as strings (no copy, no second validation)."""
    import pyarrow as pa

    if len(set(table.column_names)) != table.num_columns:
        return table
    return pa.table({name: pa.chunked_array([c.view(pa.string()) for c in table.column(i).chunks], type=pa.string())
                     for i, name in enumerate(table.column_names)})


def text_of_binary(col):
    """A binary column as UTF-8 text, record by record: ``(string array, not_utf8 mask or None, raw values)``.

    Fields that are not UTF-8 are null in the string array, True in the
    mask; ``raw`` maps their row to their bytes. The whole column is
    validated in one vectorised cast; only when that fails are the values
    with bytes ≥ 0x80 checked one by one.
    """
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    target = pa.large_string() if pa.types.is_large_binary(col.type) else pa.string()
    try:
        return col.cast(target), None, {}
    except (pa.ArrowInvalid, UnicodeDecodeError):
        pass
    n = len(col)
    off_dtype = np.int64 if pa.types.is_large_binary(col.type) else np.int32
    bufs = col.buffers()
    offsets = np.frombuffer(bufs[1], dtype=off_dtype, count=n + 1, offset=col.offset * np.dtype(off_dtype).itemsize)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    high = np.concatenate([[0], np.cumsum(data >= 0x80, dtype=np.int64)])
    rows = np.flatnonzero(high[offsets[1:]] - high[offsets[:-1]] > 0)
    bad = np.zeros(n, dtype=bool)
    raw = {}
    for i, v in zip(rows.tolist(), col.take(pa.array(rows)).to_pylist()):
        if v is None:
            continue
        try:
            v.decode("utf-8")
        except UnicodeDecodeError:
            bad[i] = True
            raw[i] = v
    # the same values with the bad ones null, built from the buffers (pyarrow's if_else mishandles a slice)
    keep = ~bad if not col.null_count else ~bad & np.asarray(col.is_valid())
    clean = pa.Array.from_buffers(col.type, n, [pa.py_buffer(np.packbits(keep, bitorder="little")),
                                                pa.py_buffer(np.ascontiguousarray(offsets)), bufs[2]])
    return clean.cast(target), bad, raw
