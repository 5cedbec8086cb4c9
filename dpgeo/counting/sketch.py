"""A keyed sketch of the records of an input: which dataset it holds, from its records rather than its bytes.

A :class:`RecordSketch` is filled while the input is counted, batch by
batch, from the records' **normalised** coordinates: longitude and latitude
(EPSG:4326, whatever the input's CRS) rounded to :data:`PRECISION_DEG`
degrees (about 1.1 m), through 10⁻⁶ degree (so that coordinates printed with
6 decimals or more round alike). The same records in another file, format, order,
column order or line ending give the same sketch; records added or removed
change it by their share.

Each normalised record is hashed with **SipHash-2-4** under a 128-bit secret
key (the ledger's: :mod:`dpgeo.budget.sketches`), vectorised over a batch.
The sketch keeps the ``k`` smallest distinct hashes (a bottom-k sample of the
distinct normalised locations, uniform because the hash is a PRF) and, for
each, how many records have it; a hash that is kept was kept from its first
occurrence on (the threshold only falls), so its count is exact. With the
number of records added and the distinct-count estimate, that is enough to
estimate how much of one input's records are in another (:func:`containment`)
without holding any coordinate: without the key, a hash says nothing about
where its records are.

Only coordinates enter the record: every run reads them, whereas a time or a
person column is read only by the runs that use one, and two sketches of the
same file must compare whatever the runs' options were.

The API is for any reader: :meth:`RecordSketch.add_lonlat` takes records
already normalised to lon/lat degrees; :meth:`RecordSketch.add_points` takes
coordinates in any CRS (as a :class:`~dpgeo.counting.decode.PointBatch`
holds them); :meth:`RecordSketch.merge` joins the sketches of fragments
(Dask workers, database partitions) into the sketch of the whole.

Examples
--------
>>> import numpy as np
>>> key = bytes(range(16))
>>> lon, lat = np.linspace(-93.3, -93.2, 5000), np.linspace(44.9, 45.0, 5000)
>>> a, b = RecordSketch(key), RecordSketch(key)
>>> a.add_lonlat(lon, lat)
>>> b.add_lonlat(lon[::-1][:4000], lat[::-1][:4000])       # reordered, 1000 records fewer
>>> round(containment(b, a), 2), round(containment(a, b), 1)
(1.0, 0.8)
"""

from __future__ import annotations

import hashlib
import struct
import threading

import numpy as np

__all__ = ["PRECISION_DEG", "SKETCH_K", "RecordSketch", "containment", "siphash24"]

#: Normalised coordinates: lon/lat rounded to this many degrees (1e-5: about 1.1 m of latitude).
PRECISION_DEG = 1e-5
#: Distinct record hashes a sketch keeps (8 + 8 bytes each).
SKETCH_K = 1024
_FORMAT = b"dpgeo-records-1"
_U64 = np.uint64


#: Elements hashed at a time (the working arrays stay in the CPU's cache).
_BLOCK = 1 << 15
_C = tuple(_U64(c) for c in (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573))


def _rotl(x, b, tmp):
    """``x`` rotated left by ``b`` bits, in place (``tmp``: a scratch array of its shape)."""
    np.right_shift(x, _U64(64 - b), out=tmp)
    np.left_shift(x, _U64(b), out=x)
    x |= tmp


def _rounds(v, n, tmp):
    v0, v1, v2, v3 = v
    for _ in range(n):
        v0 += v1
        _rotl(v1, 13, tmp)
        v1 ^= v0
        _rotl(v0, 32, tmp)
        v2 += v3
        _rotl(v3, 16, tmp)
        v3 ^= v2
        v0 += v3
        _rotl(v3, 21, tmp)
        v3 ^= v0
        v2 += v1
        _rotl(v1, 17, tmp)
        v1 ^= v2
        _rotl(v2, 32, tmp)


def siphash24(key: bytes, *words) -> np.ndarray:
    """SipHash-2-4 of messages of ``len(words)`` little-endian 64-bit words, one message per array element.

    ``key`` is 16 bytes; each of ``words`` a uint64 array (all the same shape).
    Equals the reference SipHash-2-4 of the ``8 * len(words)`` message bytes
    (tested against the reference vectors). Vectorised, in blocks of
    :data:`_BLOCK` elements computed in place.
    """
    if len(key) != 16:
        raise ValueError("a SipHash key is 16 bytes")
    k0, k1 = (_U64(v) for v in struct.unpack("<QQ", key))
    words = [np.asarray(w, dtype=_U64) for w in words]
    shape = words[0].shape if words else ()
    flat = [w.ravel() for w in words]
    n = int(np.prod(shape)) if shape else 1
    out = np.empty(n, dtype=_U64)
    last = _U64((8 * len(words) & 0xFF) << 56)
    init = (k0 ^ _C[0], k1 ^ _C[1], k0 ^ _C[2], k1 ^ _C[3])
    with np.errstate(over="ignore"):
        for lo in range(0, n, _BLOCK):
            m = min(_BLOCK, n - lo)
            v = [np.full(m, c, dtype=_U64) for c in init]
            tmp = np.empty(m, dtype=_U64)
            for w in flat:
                part = w[lo:lo + m]
                v[3] ^= part
                _rounds(v, 2, tmp)
                v[0] ^= part
            v[3] ^= last
            _rounds(v, 2, tmp)
            v[0] ^= last
            v[2] ^= _U64(0xFF)
            _rounds(v, 4, tmp)
            np.bitwise_xor(v[0], v[1], out=out[lo:lo + m])
            out[lo:lo + m] ^= v[2]
            out[lo:lo + m] ^= v[3]
    return out.reshape(shape) if shape else out[0]


def _quantise(deg):
    """Degrees in units of :data:`PRECISION_DEG`: rounded to a tenth of it first, then (in integers, half up) to
    it, so that a copy whose coordinates were printed with 6 or more decimals rounds to the same unit."""
    fine = np.rint(deg * (10.0 / PRECISION_DEG)).astype(np.int64)
    return np.floor_divide(fine + 5, 10)


def _pack(qx, qy):
    """One 64-bit word per normalised record: longitude units in bits 25..50, latitude units in bits 0..24."""
    return ((qx + np.int64(1 << 25)).astype(_U64) << _U64(25)) | (qy + np.int64(1 << 24)).astype(_U64)


class RecordSketch:
    """The bottom-``k`` keyed hashes of an input's normalised records, with their counts.

    Parameters
    ----------
    key : bytes
        The 16-byte secret key (the ledger's; never in any output).
    k : int
        Distinct hashes kept (default :data:`SKETCH_K`).

    Attributes
    ----------
    n_records : int
        Records added.
    hashes : numpy.ndarray
        The kept hashes, sorted (uint64).
    counts : numpy.ndarray
        Records with each kept hash (int64).
    """

    def __init__(self, key: bytes, k: int = SKETCH_K):
        if len(key) != 16:
            raise ValueError("a record sketch key is 16 bytes")
        self._key = bytes(key)
        self.k = int(k)
        self.n_records = 0
        self.hashes = np.zeros(0, dtype=_U64)
        self.counts = np.zeros(0, dtype=np.int64)
        self._lock = threading.Lock()
        self._to_lonlat = {}

    def __getstate__(self):  # picklable for the Dask workers (the key goes with it: they read the data anyway)
        d = dict(self.__dict__)
        d.pop("_lock")
        d["_to_lonlat"] = {}
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)
        self._lock = threading.Lock()

    def empty(self) -> "RecordSketch":
        """A new empty sketch under the same key (for one fragment of the input)."""
        return RecordSketch(self._key, self.k)

    def __repr__(self):
        return f"<RecordSketch of {self.n_records:,} records, {self.hashes.size} hashes kept>"

    @property
    def key_id(self) -> str:
        """A public name of the key (a hash of it): sketches compare only under the same key."""
        return hashlib.blake2b(self._key, digest_size=8, person=b"dpgeo-key-id").hexdigest()

    @property
    def threshold(self) -> int:
        """Every distinct hash at or below this one is kept (2**64 - 1 while fewer than ``k`` are)."""
        return int(self.hashes[-1]) if self.hashes.size >= self.k else (1 << 64) - 1

    def n_distinct(self) -> float:
        """Estimated distinct normalised records (exact below ``k``; the KMV estimate ``(k - 1) / h_k`` above)."""
        if self.hashes.size < self.k:
            return float(self.hashes.size)
        return (self.k - 1) / ((float(self.hashes[-1]) + 1.0) / 2.0 ** 64)

    def add_lonlat(self, lon, lat):
        """Add records given by longitude and latitude in degrees (EPSG:4326); non-finite ones are skipped."""
        lon = np.asarray(lon, dtype=np.float64).ravel()
        lat = np.asarray(lat, dtype=np.float64).ravel()
        ok = np.isfinite(lon) & np.isfinite(lat) & (np.abs(lat) <= 90) & (np.abs(lon) <= 360)
        if not ok.all():
            lon, lat = lon[ok], lat[ok]
        if not lon.size:
            return
        lon = np.where(lon > 180, lon - 360, lon)  # one longitude for one place
        self.add_hashes(siphash24(self._key, _pack(_quantise(lon), _quantise(lat))))

    def add_points(self, x, y, crs):
        """Add records given in ``crs`` (a pyproj CRS): projected to lon/lat first."""
        x = np.asarray(x, dtype=np.float64)
        if not x.size:
            return
        if not getattr(crs, "is_geographic", False) or crs.to_epsg() != 4326:
            from pyproj import CRS, Transformer

            ident = threading.get_ident()
            tr = self._to_lonlat.get((ident, crs.srs))
            if tr is None:
                tr = self._to_lonlat[(ident, crs.srs)] = Transformer.from_crs(crs, CRS.from_epsg(4326),
                                                                              always_xy=True)
            x, y = tr.transform(x, np.asarray(y, dtype=np.float64), errcheck=False)
        self.add_lonlat(x, y)

    def add_hashes(self, h):
        """Add records by their keyed hashes (uint64): for a reader that hashes its own normalised records."""
        h = np.asarray(h, dtype=_U64).ravel()
        with self._lock:
            self.n_records += int(h.size)
            thr = self.threshold
            if self.hashes.size >= self.k:
                h = h[h <= _U64(thr)]
            if not h.size:
                return
            self._keep(*np.unique(h, return_counts=True))

    def _keep(self, values, counts):
        """Fold distinct ``values`` with ``counts`` into the kept sample (under the lock)."""
        allv = np.concatenate([self.hashes, values])
        allc = np.concatenate([self.counts, counts.astype(np.int64)])
        u, inv = np.unique(allv, return_inverse=True)
        c = np.bincount(inv, weights=allc, minlength=u.size).astype(np.int64)
        self.hashes, self.counts = u[:self.k], c[:self.k]

    def merge(self, other: "RecordSketch") -> "RecordSketch":
        """Add the records of ``other`` (a sketch of other records under the same key); returns self."""
        if other.key_id != self.key_id or other.k != self.k:
            raise ValueError("record sketches merge only under the same key and size")
        with self._lock:
            self.n_records += other.n_records
            if other.hashes.size:
                self._keep(other.hashes, other.counts)
        return self

    # -- storage (the ledger's: owner-side only) --------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The sketch without its key: a header, the kept hashes and their counts."""
        head = struct.pack("<16sIQ", _FORMAT.ljust(16, b"\0"), self.k, self.n_records)
        return head + self.hashes.astype("<u8").tobytes() + self.counts.astype("<i8").tobytes()

    @classmethod
    def from_bytes(cls, blob: bytes) -> "Stored":
        """A stored sketch (no key: it compares, it cannot add records)."""
        fmt, k, n = struct.unpack_from("<16sIQ", blob)
        if fmt.rstrip(b"\0") != _FORMAT:
            raise ValueError("not a dpgeo record sketch")
        body = memoryview(blob)[struct.calcsize("<16sIQ"):]
        m = len(body) // 16
        hashes = np.frombuffer(body[:8 * m], dtype="<u8").astype(_U64)
        counts = np.frombuffer(body[8 * m:16 * m], dtype="<i8").astype(np.int64)
        return Stored(k, n, hashes, counts)


class Stored:
    """A record sketch read back from the ledger: ``k``, ``n_records``, ``hashes``, ``counts``; no key."""

    def __init__(self, k, n_records, hashes, counts):
        self.k, self.n_records, self.hashes, self.counts = int(k), int(n_records), hashes, counts

    threshold = RecordSketch.threshold
    n_distinct = RecordSketch.n_distinct


def containment(a, b) -> float:
    """Estimated share of ``a``'s records that are also ``b``'s records, in [0, 1] (records as a multiset).

    Below ``t = min(threshold(a), threshold(b))`` both sketches hold every
    distinct hash of their input with its exact count, so the estimate is
    ``Σ min(count_a, count_b) / Σ count_a`` over the hashes of ``a`` up to
    ``t``: a ratio over a uniform sample of ``a``'s distinct locations
    (weighted by their records). 0.0 when ``a`` has no sampled record.
    The sample is at least ``min(k, k · |a| / |b|)`` distinct locations on
    average: a small part of a much larger input is judged on fewer.
    """
    if not a.hashes.size or not b.hashes.size:
        return 0.0
    t = _U64(min(a.threshold, b.threshold))
    ha, ca = a.hashes[a.hashes <= t], a.counts[a.hashes <= t]
    if not ha.size:
        return 0.0
    pos = np.searchsorted(b.hashes, ha)
    pos = np.minimum(pos, b.hashes.size - 1)
    hit = b.hashes[pos] == ha
    both = np.where(hit, np.minimum(ca, b.counts[pos]), 0)
    return float(both.sum()) / float(ca.sum())
