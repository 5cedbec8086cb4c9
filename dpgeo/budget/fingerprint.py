"""Content fingerprints of input files: which declared dataset a file holds, whatever it is called.

The ledger keys a dataset on what the owner declares, and finds it again
from the bytes of an input: a copy of a declared file under another name
or in another folder has the same **digest** (SHA-256 of its content, a
file set's digest over its members' digests) and is charged to the same
dataset. A *near*-copy (rows added or removed, a file re-saved) has a
different digest, so each fingerprint also holds a **sketch**: the
``SKETCH_SIZE`` smallest 64-bit hashes of its content-defined chunks.

Chunks end where a rolling sum over the last ``WINDOW`` bytes has its low
bits zero (about one position in ``1 << CHUNK_BITS``), so an insertion or
deletion changes the chunks around it only; the rest of the file yields
the same chunk hashes. Two sketches estimate the Jaccard similarity of the
two files' chunk sets (the bottom-k estimator). This works for text (CSV,
GeoJSON) and mostly for GeoPackage and other SQLite files, whose unchanged
pages stay byte-identical; it finds nothing in files that are re-encoded
as a whole when one row changes (Parquet or any compressed file rewritten
by a writer: other row groups, other compression blocks).

Everything here stays with the owner: fingerprints are kept in the ledger,
never in any output, and one is computed from the file's bytes before any
record is parsed. The work is one streamed pass (SHA-256 and the chunking,
about 130 MB/s on one loaded core; ``benchmarks/bench_fingerprint.py``),
done once per file: the result is cached in the ledger under the file's
path, size, modification time and inode.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

__all__ = ["SKETCH_SIZE", "Fingerprint", "combine", "fingerprint_file", "input_files", "similarity"]

#: Bytes read at a time (the chunking's working memory is about 7 bytes per byte of this).
BLOCK_BYTES = 8 << 20
#: Bytes in the rolling window that decides chunk ends.
WINDOW = 48
#: Chunks end where the low CHUNK_BITS bits of the rolling sum are zero: about 8 KiB per chunk.
CHUNK_BITS = 13
#: Chunk hashes kept per fingerprint (the smallest ones): 8 bytes each.
SKETCH_SIZE = 1024
_MIN_CHUNK = 256
# 16-bit sums (mod 2**16) decide as 32-bit ones would: only their low CHUNK_BITS bits count; half the memory traffic
_TABLE = np.random.default_rng(0x64706765).integers(0, 1 << 16, 256, dtype=np.uint64).astype(np.uint16)
_MASK = np.uint16((1 << CHUNK_BITS) - 1)


@dataclass(frozen=True)
class Fingerprint:
    """The content of one file or file set: ``digest`` (hex), ``size`` (bytes) and ``sketch`` (sorted uint64)."""

    digest: str
    size: int
    sketch: np.ndarray

    def sketch_bytes(self) -> bytes:
        return np.asarray(self.sketch, dtype="<u8").tobytes()

    @staticmethod
    def sketch_from(blob) -> np.ndarray:
        return np.frombuffer(blob or b"", dtype="<u8").astype(np.uint64)


def input_files(path) -> list:
    """The files whose bytes make up an input: one file, a glob's or a folder's files, a shapefile's parts."""
    from ..counting.sources import expand_paths

    files, _ = expand_paths(path)
    out = []
    for f in files:
        if os.path.isdir(f):  # a folder GDAL opens as one dataset (a file geodatabase)
            out += sorted(os.path.join(r, n) for r, _, names in os.walk(f) for n in names)
        elif f.lower().endswith(".shp"):
            stem = f[:-4]
            out += [f] + [stem + ext for ext in (".dbf", ".shx", ".prj") if os.path.isfile(stem + ext)]
        else:
            out.append(f)
    return [os.path.realpath(f) for f in out]


def fingerprint_file(path) -> Fingerprint:
    """Stream one file once: its SHA-256 and the sketch of its content-defined chunks.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> rows = [f"{i},{i * 7 % 1000}" for i in range(20000)]
    >>> def csv(name, lines):
    ...     p = os.path.join(folder, name)
    ...     open(p, "w").write("\\n".join(lines))
    ...     return fingerprint_file(p)
    >>> a, b = csv("a.csv", rows), csv("b.csv", rows[:15000] + rows[15100:])   # 100 rows removed
    >>> a.digest == b.digest, similarity(a, b) > 0.8
    (False, True)
    """
    sha = hashlib.sha256()
    hashes = []
    chunk = hashlib.blake2b(digest_size=8)
    chunk_len = 0
    tail = np.zeros(0, dtype=np.uint8)  # the last WINDOW - 1 bytes of the previous block
    buf = bytearray(BLOCK_BYTES)
    view = memoryview(buf)
    size = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            block = view[:n]
            sha.update(block)
            size += n
            data = np.frombuffer(block, dtype=np.uint8)
            joined = np.concatenate([tail, data]) if tail.size else data
            sums = np.cumsum(np.take(_TABLE, joined), dtype=np.uint16)
            window = sums[WINDOW - 1:].copy()
            window[1:] -= sums[:-WINDOW]
            # window[j] sums the bytes joined[j .. j + WINDOW - 1]; a chunk ends after its last byte
            ends = np.flatnonzero((window & _MASK) == 0) + (WINDOW - 1) - tail.size + 1
            start = 0
            for end in ends.tolist():
                if end <= start or chunk_len + end - start < _MIN_CHUNK:
                    continue
                chunk.update(block[start:end])
                hashes.append(chunk.digest())
                chunk = hashlib.blake2b(digest_size=8)
                chunk_len, start = 0, end
            chunk.update(block[start:])
            chunk_len += n - start
            tail = joined[-(WINDOW - 1):].copy()
    if chunk_len:
        hashes.append(chunk.digest())
    return Fingerprint(sha.hexdigest(), size, _sketch(hashes))


def _sketch(hashes) -> np.ndarray:
    if not hashes:
        return np.zeros(0, dtype=np.uint64)
    values = np.unique(np.frombuffer(b"".join(hashes), dtype="<u8"))
    return values[:SKETCH_SIZE].astype(np.uint64)


def combine(parts) -> Fingerprint:
    """The fingerprint of a file set (a glob or a folder of Parquet files) from its members' fingerprints.

    The digest covers the members' digests in sorted order, so renaming or
    moving the files changes nothing; the sketch is the bottom of the union
    of the members' sketches, so a set with one file added or removed is a
    near-copy of the other.
    """
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    sha = hashlib.sha256()
    for d in sorted(p.digest for p in parts):
        sha.update(bytes.fromhex(d))
    union = np.unique(np.concatenate([p.sketch for p in parts])) if parts else np.zeros(0, np.uint64)
    return Fingerprint("set:" + sha.hexdigest(), sum(p.size for p in parts), union[:SKETCH_SIZE])


def similarity(a: Fingerprint, b: Fingerprint) -> float:
    """Estimated Jaccard similarity of two inputs' chunk sets, in [0, 1] (1.0 for identical content).

    The bottom-k estimator: among the ``k`` smallest hashes of the union of
    the two sketches, the share found in both.
    """
    if a.digest == b.digest:
        return 1.0
    if not a.sketch.size or not b.sketch.size:
        return 0.0
    k = min(SKETCH_SIZE, max(a.sketch.size, b.sketch.size))
    union = np.union1d(a.sketch, b.sketch)[:k]
    both = np.intersect1d(np.intersect1d(union, a.sketch, assume_unique=True), b.sketch, assume_unique=True)
    return float(both.size) / float(union.size)
