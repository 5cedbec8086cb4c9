"""WaveCluster and its differentially private variants on count grids.

WaveCluster (Sheikholeslami, Chatterjee & Zhang, VLDB 1998) counts points on
a grid, takes the level-1 approximation of a 2-D wavelet transform of the
count grid, keeps the *significant* coefficients (the positive coefficients
above the p-th percentile of the positive ones) and returns the
8-connected components of the significant coefficients, mapped back to grid
cells. Chen, Yu & Chirkova (EDBT 2016) make it differentially private in
four ways, all implemented here on numpy count grids:

``"privqt"``
    discrete Laplace noise on every count (all of ε), then WaveCluster on
    the noisy counts.
``"privthr"``
    noise on the counts with ``α·ε`` (α = 0.9), plus a noisy count ``|Z|′``
    of the non-positive coefficients with ``(1-α)·ε``. The number of
    significant coefficients is then estimated from ``|Z|′`` alone
    (``|L| = N_W - |Z|`` with ``N_W`` public; ``k_rule="direct"``), or by the
    paper's rule of discarding the smallest noisy positive coefficients
    (``k_rule="prune"`` discards ``π·|Z|′``, π being the probability that
    the integer noise lifts a zero coefficient above 0; ``"prune-half"``
    discards ``|Z|′/2`` as in the paper, which is right for continuous noise
    only).
``"privthr-em"``
    noise on the counts with ``α·ε`` (α = 0.7); the threshold is drawn by
    the exponential mechanism with ``(1-α)·ε`` from a *public* list of
    candidate thresholds, scored by how far the number of true coefficients
    above the candidate is from the target ``k``.
``"baseline"``
    DP synthetic points from adaptive grids (Qardaji, Yang & Li, ICDE 2013),
    then non-private WaveCluster on the synthetic counts
    (:func:`wavecluster_baseline`).

``"exact"`` is the non-private reference.

Definitions used throughout (they fix what "|Z|" and "k" mean here)
------------------------------------------------------------------
*Coefficients.* For a lowpass decomposition filter ``h = s·(a + √3·b)``
with integer vectors ``a``, ``b`` (``b = 0`` for Haar and the biorthogonal
wavelets, ``a = [1, 3, 3, 1]``, ``b = [-1, -1, 1, 1]`` for db2) the 2-D
level-1 approximation is ``s²·(P + √3·Q)`` where ``P`` and ``Q`` are
*integer* arrays (PyWavelets run with integer filter taps on integer counts:
every intermediate value is an integer below 2**53, so float64 is exact).
Signs and comparisons with integer thresholds are decided exactly. Haar
uses the same layout as PyWavelets' ``"zero"`` mode, computed directly as
2×2 block sums of the grid padded with zeros to even size.

*Normalised value.* Coefficients are reported as ``4·(P + √3·Q)/G`` where
``G`` is the filter's DC gain, so that a region of uniform density ρ points
per cell has value ``4ρ`` for every wavelet (for Haar: the 2×2 block sum).

*L, Z, k.* ``L`` is the set of coefficients with exact value ``> 0`` and
``Z`` the set with exact value ``<= 0``; ``|L| + |Z|`` is the (public)
number of coefficients. With ``m = |L|`` and ``p`` the percentile,
``n0 = floor(p·m/100)`` positives are non-significant and ``k = m - n0``;
the threshold is the ``k``-th largest positive value (the p-th percentile
of ``L``) and the significant coefficients are the positive ones ``>=`` it:
the ``k`` largest, plus any ties with the ``k``-th (as in WaveCluster, where
values *below* the percentile are not significant).

*Mapping to cells.* Coefficient ``o`` (per axis) covers cells ``2o - d`` and
``2o - d + 1`` where ``d = floor(c)`` and ``c`` is the centre of mass of the
filter's taps (``d = 0`` for Haar, 3 for bior2.2, 2 for bior1.3 and db2),
so that the labelled cells sit where the coefficient's support is centred.

The privacy argument for every mechanism is in ``docs/privacy.md`` (section 5);
:func:`approximation_sensitivity` computes the sensitivities used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pywt
from scipy import ndimage

from .errors import ParameterError
from .noise import NoiseSource, make_generator, sample_discrete_laplace, sum_sf

__all__ = [
    "WAVELETS",
    "SAFE_MODES",
    "METHODS",
    "WaveClusterCells",
    "SyntheticGrid",
    "approximation",
    "approximation_sensitivity",
    "significant_coefficients",
    "label_coefficients",
    "coefficients_to_cells",
    "em_candidates",
    "wavecluster_cells",
    "adaptive_grid_counts",
    "wavecluster_baseline",
]

SQRT3 = math.sqrt(3.0)

#: Wavelets supported, with the integer parts ``(a, b)`` of their lowpass
#: decomposition filter ``h ∝ a + √3·b`` in PyWavelets' tap order.
_FILTERS: dict[str, tuple[tuple[int, ...], tuple[int, ...] | None]] = {
    "haar": ((1, 1), None),
    "bior2.2": ((0, -1, 2, 6, 2, -1), None),
    "bior1.3": ((-1, 1, 8, 8, 1, -1), None),
    "db2": ((1, 3, 3, 1), (-1, -1, 1, 1)),
}
WAVELETS = tuple(_FILTERS)

#: Signal-extension modes allowed: each extends the grid by a fixed integer
#: combination of cells near the same edge (their effect on the sensitivities
#: is in the impulse response). The wrap-around modes ("periodic",
#: "periodization") are refused: they join opposite edges of the map.
SAFE_MODES = ("zero", "constant", "symmetric", "reflect", "smooth", "antisymmetric", "antireflect")
_WRAP_MODES = ("periodic", "periodization")

METHODS = ("exact", "privqt", "privthr", "privthr-em", "baseline")
_K_RULES = ("direct", "prune", "prune-half")
_DEFAULT_SPLIT = {"privthr": 0.9, "privthr-em": 0.7}

# percentile is handled as an integer number of millionths of a percent, so
# that n0 = floor(p·m/100) is exact and monotone in m
_P_SCALE = 1_000_000

# largest |count| accepted: keeps every integer intermediate below 2**53
_MAX_COUNT = 2**31

# EM candidate thresholds (normalised units): every integer up to _EM_LINEAR,
# then a geometric grid with ratio 1 + 1/_EM_LINEAR up to the public cap
_EM_LINEAR = 64
_DEFAULT_COUNT_CAP = 10**7


# ---------------------------------------------------------------------------
# the exact integer approximation
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Filter:
    name: str
    a: tuple[int, ...]
    b: tuple[int, ...] | None

    @property
    def gain(self) -> int:
        """DC gain of the 2-D integer kernel (``(Σa)²``; ``Σb = 0`` for db2)."""
        return sum(self.a) ** 2

    @property
    def offset(self) -> int:
        """``d``: coefficient ``o`` covers cells ``2o - d`` and ``2o - d + 1``."""
        if self.b is None:
            num = sum(j * t for j, t in enumerate(self.a))
            den = sum(self.a)
            return num // den
        # centre of mass of a + √3·b with Σb = 0: (Σ j a_j + √3 Σ j b_j) / Σ a
        ca = sum(j * t for j, t in enumerate(self.a))
        cb = sum(j * t for j, t in enumerate(self.b))
        return int(math.floor((ca + SQRT3 * cb) / sum(self.a) + 1e-9))


def _filter(wavelet: str) -> _Filter:
    if not isinstance(wavelet, str) or wavelet.lower() not in _FILTERS:
        raise ParameterError(f"wavelet must be one of {', '.join(WAVELETS)}; got {wavelet!r}")
    name = wavelet.lower()
    a, b = _FILTERS[name]
    return _Filter(name, a, b)


def _check_mode(mode: str) -> str:
    if mode in _WRAP_MODES:
        raise ParameterError(
            f"signal-extension mode {mode!r} wraps around the grid (points near one edge would "
            "count towards coefficients at the opposite edge, which is meaningless on a map); "
            f"use one of {', '.join(SAFE_MODES)}"
        )
    if mode not in SAFE_MODES:
        raise ParameterError(f"mode must be one of {', '.join(SAFE_MODES)}; got {mode!r}")
    return mode


@lru_cache(maxsize=None)
def _int_wavelet(taps: tuple[int, ...]) -> pywt.Wavelet:
    z = [0.0] * len(taps)
    return pywt.Wavelet(f"int{taps}", filter_bank=(list(map(float, taps)), z, z, z))


def _lowpass(x: np.ndarray, taps: tuple[int, ...], mode: str, axis: int) -> np.ndarray:
    return pywt.dwt(x, _int_wavelet(taps), mode=mode, axis=axis)[0]


@dataclass
class _Coefs:
    """Exact coefficients ``P + √3·Q`` (``Q`` is None for rational filters)."""

    P: np.ndarray
    Q: np.ndarray | None
    filt: _Filter

    @property
    def shape(self):
        return self.P.shape

    def normalised(self) -> np.ndarray:
        scale = 4.0 / self.filt.gain
        if self.Q is None:
            return self.P * scale if scale != 1.0 else self.P.astype(np.float64)
        return (self.P + SQRT3 * self.Q) * scale

    def positive(self) -> np.ndarray:
        if self.Q is None:
            return self.P > 0
        return _sign_z3(self.P, self.Q) > 0

    def count_greater(self, thresholds: np.ndarray) -> np.ndarray:
        """Exact ``#{coefficients > t}`` for each integer ``t`` (in P units)."""
        t = np.asarray(thresholds, dtype=np.int64)
        if self.Q is None:
            s = np.sort(self.P, axis=None)
            return s.size - np.searchsorted(s, t, side="right")
        f = (self.P + SQRT3 * self.Q).ravel()
        order = np.argsort(f, kind="stable")
        fs = f[order]
        margin = 1e-14 * (float(np.abs(self.P).max(initial=0)) + 2.0 * float(np.abs(self.Q).max(initial=0))
                          + float(np.abs(t).max(initial=0)) + 1.0)
        lo = np.searchsorted(fs, t - margin, side="left")
        hi = np.searchsorted(fs, t + margin, side="right")
        out = fs.size - hi
        Pf, Qf = self.P.ravel(), self.Q.ravel()
        for j in np.nonzero(hi > lo)[0]:
            idx = order[lo[j]:hi[j]]
            out[j] += int(np.sum(_sign_z3(Pf[idx] - t[j], Qf[idx]) > 0))
        return out


def _sign_z3(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Exact sign of ``A + √3·B`` for integer arrays (``|A|, |B| < 2**53``)."""
    A = np.asarray(A, dtype=np.int64)
    B = np.asarray(B, dtype=np.int64)
    f = A + SQRT3 * B
    s = np.sign(f).astype(np.int64)
    # float error of f is below (|A| + 2|B|)·2**-51; outside that band the
    # float sign is the exact sign
    amb = np.abs(f) <= 1e-14 * (np.abs(A) + 2.0 * np.abs(B) + 1.0)
    if np.any(amb):
        ia = np.nonzero(amb)
        vals = []
        for x, y in zip(A[ia].tolist(), B[ia].tolist()):
            if x >= 0 and y >= 0:
                vals.append(1 if (x or y) else 0)
            elif x <= 0 and y <= 0:
                vals.append(-1)
            elif x > 0:  # x > 0 > y: sign of x² - 3y²
                d = x * x - 3 * y * y
                vals.append((d > 0) - (d < 0))
            else:  # y > 0 > x: sign of 3y² - x²
                d = 3 * y * y - x * x
                vals.append((d > 0) - (d < 0))
        s[ia] = vals
    return s


def _check_mode_shape(mode: str, shape) -> None:
    if mode in ("reflect", "antireflect") and min(shape) < 2:
        raise ParameterError(f"mode {mode!r} needs at least 2 cells along each axis; use 'zero'")


def _exact_approximation(counts: np.ndarray, filt: _Filter, mode: str) -> _Coefs:
    c = np.asarray(counts)
    _check_mode_shape(mode, c.shape)
    if filt.name == "haar" and mode == "zero":
        ny, nx = c.shape
        h, w = (ny + 1) // 2, (nx + 1) // 2
        if ny % 2 or nx % 2:
            cp = np.zeros((2 * h, 2 * w), dtype=np.int64)
            cp[:ny, :nx] = c
        else:
            cp = c.astype(np.int64, copy=False)
        P = cp.reshape(h, 2, w, 2).sum(axis=(1, 3))
        return _Coefs(P, None, filt)
    x = c.astype(np.float64)
    ra = _lowpass(x, filt.a, mode, axis=1)
    P = _lowpass(ra, filt.a, mode, axis=0)
    if filt.b is None:
        return _Coefs(_to_int(P), None, filt)
    rb = _lowpass(x, filt.b, mode, axis=1)
    P = P + 3.0 * _lowpass(rb, filt.b, mode, axis=0)
    Q = _lowpass(ra, filt.b, mode, axis=0) + _lowpass(rb, filt.a, mode, axis=0)
    return _Coefs(_to_int(P), _to_int(Q), filt)


def _to_int(x: np.ndarray) -> np.ndarray:
    r = np.rint(x)
    # integer taps on integer data: the float64 result *is* an integer; a
    # non-integer here would mean the exactness argument is broken
    if not np.array_equal(r, x):
        # cannot happen for true counts (< 2**31 per cell); noisy counts only
        # reach this with epsilon around 1e-10
        raise ParameterError("counts or noise too large for exact wavelet arithmetic; "
                             "use a larger epsilon or a coarser grid")
    return r.astype(np.int64)


def approximation(counts, *, wavelet: str = "haar", mode: str = "zero") -> np.ndarray:
    """Level-1 2-D wavelet approximation of a count grid, normalised.

    Parameters
    ----------
    counts : array_like of int, shape (ny, nx)
        Points per cell (rows = y, columns = x).
    wavelet : {"haar", "bior2.2", "bior1.3", "db2"}
    mode : str
        PyWavelets signal-extension mode; wrap-around modes are refused.

    Returns
    -------
    numpy.ndarray of float64
        Coefficients scaled so that uniform density ρ points/cell gives
        ``4ρ``; equal to ``pywt.dwt2(counts, wavelet, mode)[0]`` times a
        constant (2 for Haar). For Haar these are the 2×2 block sums.

    Examples
    --------
    >>> approximation([[1, 2, 0], [3, 4, 5]])
    array([[10.,  5.]])
    """
    filt = _filter(wavelet)
    _check_mode(mode)
    c = _as_counts(counts, allow_negative=True)
    return _exact_approximation(c, filt, mode).normalised()


# ---------------------------------------------------------------------------
# sensitivities from the impulse response
# ---------------------------------------------------------------------------


def _impulse_patterns_1d(n: int, taps: tuple[int, ...], mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer 1-D responses to a unit count at each position class.

    Returns ``(positions, responses)``: the responses of the positions near
    the two ends (``2F + 2`` each) plus those positions themselves; every
    other position's response is a shift of the one two positions closer
    to the centre (the interior is periodic with period 2), so these cover
    every distinct response up to shift.
    """
    F = len(taps)
    edge = 2 * F + 2
    if n <= 2 * edge:
        pos = np.arange(n)
    else:
        pos = np.concatenate([np.arange(edge), np.arange(n - edge, n)])
    eye = np.zeros((pos.size, n))
    eye[np.arange(pos.size), pos] = 1.0
    resp = _to_int(_lowpass(eye, taps, mode, axis=1))
    return pos, resp


@lru_cache(maxsize=128)
def _signed_support_counts(shape, filt: _Filter, mode: str) -> tuple[int, int, int]:
    """``(max #positive taps, max #negative taps, #coefficients)`` over cells.

    The maximum is taken over every cell of a grid of this shape, using the
    exact integer impulse response of the 2-D approximation.
    """
    ny, nx = shape
    _, ry_a = _impulse_patterns_1d(ny, filt.a, mode)
    _, rx_a = _impulse_patterns_1d(nx, filt.a, mode)
    ncoef = ry_a.shape[1] * rx_a.shape[1]
    if filt.b is None:
        py, ny_ = (ry_a > 0).sum(1), (ry_a < 0).sum(1)
        px, nx_ = (rx_a > 0).sum(1), (rx_a < 0).sum(1)
        pos = np.outer(py, px) + np.outer(ny_, nx_)  # (row class, column class)
        neg = np.outer(py, nx_) + np.outer(ny_, px)
        return int(pos.max()), int(neg.max()), int(ncoef)
    _, ry_b = _impulse_patterns_1d(ny, filt.b, mode)
    _, rx_b = _impulse_patterns_1d(nx, filt.b, mode)
    pmax = nmax = 0
    for i in range(ry_a.shape[0]):
        ya, yb = ry_a[i], ry_b[i]
        sup_y = np.nonzero((ya != 0) | (yb != 0))[0]
        ya, yb = ya[sup_y], yb[sup_y]
        for j in range(rx_a.shape[0]):
            xa, xb = rx_a[j], rx_b[j]
            sup_x = np.nonzero((xa != 0) | (xb != 0))[0]
            xa, xb = xa[sup_x], xb[sup_x]
            P = np.outer(ya, xa) + 3 * np.outer(yb, xb)
            Q = np.outer(ya, xb) + np.outer(yb, xa)
            s = _sign_z3(P, Q)
            pmax = max(pmax, int((s > 0).sum()))
            nmax = max(nmax, int((s < 0).sum()))
    return pmax, nmax, int(ncoef)


def approximation_sensitivity(
    shape,
    *,
    wavelet: str = "haar",
    mode: str = "zero",
    percentile: float = 60.0,
    sensitivity: int = 1,
) -> dict:
    """Sensitivities of every statistic the mechanisms read from the true data.

    Neighbouring grids differ by one record, i.e. by at most ``sensitivity``
    points added to (or removed from) cells. From the exact impulse response
    of the approximation at every cell of a grid of ``shape``:

    - ``counts``: L1 sensitivity of the count grid, ``s = sensitivity``.
    - ``nonpositive_count``: of ``|Z|``. Adding a point raises exactly the
      coefficients with a positive tap at that cell and lowers those with a
      negative tap, so ``|Z|`` falls by at most ``P⁺`` and rises by at most
      ``P⁻`` (the largest numbers of positive / negative taps of one cell);
      for ``s`` points ``Δ = min(N_W, s·max(P⁺, P⁻))``.
    - ``em_quality``: of ``u(t) = -|c(t) - k|`` with ``c(t)`` the number of
      coefficients above ``t`` and ``k = m - floor(p·m/100)``. ``c`` moves in
      ``[-s·P⁻, s·P⁺]``; ``k`` is nondecreasing in ``m`` with unit steps, so
      it moves in ``[-⌈(1-p)s·P⁻⌉, ⌈(1-p)s·P⁺⌉]``; hence
      ``Δu ≤ max(s·P⁺ + ⌈(1-p)s·P⁻⌉, s·P⁻ + ⌈(1-p)s·P⁺⌉)`` (capped at
      ``N_W``, since ``u`` lies in ``[-N_W, 0]``). For Haar (``P⁻ = 0``) this is ``s``.

    Parameters
    ----------
    shape : (int, int)
        Grid shape ``(ny, nx)`` in cells.
    wavelet, mode : str
        As in :func:`approximation`.
    percentile : float
        ``p`` in [0, 100).
    sensitivity : int
        Points per record (``s``).

    Returns
    -------
    dict
        ``counts``, ``nonpositive_count``, ``em_quality`` (ints),
        ``max_positive_taps``, ``max_negative_taps``, ``n_coefficients``,
        ``wavelet``, ``mode``.

    Examples
    --------
    >>> approximation_sensitivity((8, 8))["nonpositive_count"]
    1
    >>> approximation_sensitivity((8, 8), wavelet="bior2.2")["nonpositive_count"]
    5
    """
    filt = _filter(wavelet)
    _check_mode(mode)
    ny, nx = _check_shape(shape)
    _check_mode_shape(mode, (ny, nx))
    p_micro = _check_percentile(percentile)
    s = _check_sensitivity(sensitivity)
    pp, pn, ncoef = _signed_support_counts((ny, nx), filt, mode)  # cached: public inputs only
    sp, sn = min(ncoef, s * pp), min(ncoef, s * pn)
    dz = max(sp, sn)

    def ceil_frac(d: int) -> int:  # ⌈(1 - p)·d⌉ exactly
        keep = 100 * _P_SCALE - p_micro
        return -((-keep * d) // (100 * _P_SCALE))

    du = min(ncoef, max(sp + ceil_frac(sn), sn + ceil_frac(sp)))
    return {
        "wavelet": filt.name,
        "mode": mode,
        "counts": s,
        "nonpositive_count": int(dz),
        "em_quality": int(du),
        "max_positive_taps": int(pp),
        "max_negative_taps": int(pn),
        "n_coefficients": int(ncoef),
    }


# ---------------------------------------------------------------------------
# significant coefficients, components, mapping back
# ---------------------------------------------------------------------------


def _n_nonsignificant(m: int, p_micro: int) -> int:
    return (p_micro * int(m)) // (100 * _P_SCALE)


def _threshold_from_positives(values: np.ndarray, n_drop: int) -> float:
    """The ``(n_drop + 1)``-th smallest of ``values``; ``inf`` if there is none.

    Significant coefficients are the positive ones ``>=`` this value.
    """
    n_drop = max(int(n_drop), 0)
    if n_drop >= values.size:
        return math.inf
    return float(np.partition(values, n_drop)[n_drop])


def significant_coefficients(coefficients, *, percentile: float = 60.0) -> tuple[np.ndarray, float]:
    """Non-private significance rule on (normalised) coefficients.

    Positive coefficients not below the p-th percentile of the positive
    ones: with ``m`` positives, the ``k = m - floor(p·m/100)`` largest and
    their ties (see the module notes).

    Returns
    -------
    (numpy.ndarray of bool, float)
        The significance mask and the threshold (significant: ``>=``).

    Examples
    --------
    >>> mask, t = significant_coefficients([[0, 1, 2], [3, 4, 5]], percentile=40)
    >>> int(mask.sum()), t
    (3, 3.0)
    """
    w = np.asarray(coefficients, dtype=np.float64)
    p_micro = _check_percentile(percentile)
    pos = w > 0
    vals = w[pos]
    t = _threshold_from_positives(vals, _n_nonsignificant(vals.size, p_micro))
    return pos & (w >= t), t


_EIGHT = np.ones((3, 3), dtype=bool)


def label_coefficients(significant) -> tuple[np.ndarray, int]:
    """8-connected components of a boolean coefficient grid (1..n, 0 = none)."""
    lab, n = ndimage.label(np.asarray(significant, dtype=bool), structure=_EIGHT)
    return lab.astype(np.int32, copy=False), int(n)


def coefficients_to_cells(coef_labels, shape, *, wavelet: str = "haar") -> np.ndarray:
    """Map coefficient labels back to grid cells and renumber them 1..n.

    Cell ``r`` (per axis) takes the label of coefficient ``(r + d) // 2``
    with the wavelet's offset ``d``; components left without cells are
    dropped and the others renumbered 1..n in their original order (raster
    order of first appearance on the coefficient grid).

    Examples
    --------
    >>> coefficients_to_cells([[0, 1], [2, 0]], (3, 4))
    array([[0, 0, 1, 1],
           [0, 0, 1, 1],
           [2, 2, 0, 0]], dtype=int32)
    """
    lab = np.asarray(coef_labels)
    filt = _filter(wavelet)
    ny, nx = _check_shape(shape)
    d = filt.offset
    ri = (np.arange(ny) + d) // 2
    ci = (np.arange(nx) + d) // 2
    okr = ri < lab.shape[0]
    okc = ci < lab.shape[1]
    out = np.zeros((ny, nx), dtype=np.int32)
    if not okr.any() or not okc.any():
        return out
    sub = lab[np.ix_(ri[okr], ci[okc])]
    # renumber: labels present among mapped coefficients, in label order
    used_rows = np.unique(ri[okr])
    used_cols = np.unique(ci[okc])
    present = np.zeros(int(lab.max(initial=0)) + 1, dtype=bool)
    present[lab[np.ix_(used_rows, used_cols)].ravel()] = True
    present[0] = False
    remap = np.zeros(present.size, dtype=np.int32)
    remap[present] = np.arange(1, int(present.sum()) + 1, dtype=np.int32)
    out[np.ix_(okr, okc)] = remap[sub]
    return out


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------


@dataclass
class WaveClusterCells:
    """Cell-level result of a WaveCluster run.

    Attributes
    ----------
    labels : numpy.ndarray of int32, shape (ny, nx)
        0 = no cluster, 1..n_clusters = cluster of the cell.
    noisy_counts : numpy.ndarray of int64 or None
        The released noisy counts (``None`` for ``"exact"``); for
        ``"baseline"`` the synthetic counts.
    q : float or None
        Decay ``exp(-ε_counts/s)`` of the discrete Laplace noise on each
        count (for confidence intervals of sums of cells); ``None`` when
        counts were not noised cell by cell.
    report : dict
        JSON-serialisable description of the run: only DP outputs and
        public parameters for the private methods.
    significant : numpy.ndarray of bool
        Significant coefficients (coefficient grid).
    coefficient_labels : numpy.ndarray of int32
        Components on the coefficient grid (before mapping to cells).
    """

    labels: np.ndarray
    noisy_counts: np.ndarray | None
    q: float | None
    report: dict
    significant: np.ndarray = field(repr=False)
    coefficient_labels: np.ndarray = field(repr=False)

    @property
    def n_clusters(self) -> int:
        return int(self.report["n_clusters"])


@dataclass
class SyntheticGrid:
    """DP synthetic count grid from adaptive grids (see :func:`adaptive_grid_counts`)."""

    counts: np.ndarray
    report: dict


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------


def _check_shape(shape) -> tuple[int, int]:
    try:
        ny, nx = (int(v) for v in shape)
    except Exception:  # noqa: BLE001
        raise ParameterError(f"shape must be (ny, nx), got {shape!r}") from None
    if ny < 1 or nx < 1:
        raise ParameterError(f"grid shape must be at least 1×1 cells, got {shape!r}")
    return ny, nx


def _check_percentile(p) -> int:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)) or not (0 <= p < 100):
        raise ParameterError(f"percentile must be a number in [0, 100), got {p!r}")
    return int(round(float(p) * _P_SCALE))


def _check_sensitivity(s) -> int:
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
        raise ParameterError(f"sensitivity (points per record) must be an integer >= 1, got {s!r}")
    return int(s)


def _check_epsilon(eps, name="epsilon") -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)) \
            or not math.isfinite(eps) or eps <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {eps!r}")
    return float(eps)


def _as_counts(counts, *, allow_negative=False) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim != 2 or c.size == 0:
        raise ParameterError(f"counts must be a non-empty 2-D array (ny, nx), got shape {c.shape}")
    if c.dtype.kind == "f":
        if not np.all(np.isfinite(c)) or not np.array_equal(c, np.round(c)):
            raise ParameterError("counts must be integers")
        c = c.astype(np.int64)
    elif c.dtype.kind not in "iub":
        raise ParameterError(f"counts must be an integer array, got dtype {c.dtype}")
    c = c.astype(np.int64, copy=False)
    if not allow_negative and int(c.min()) < 0:
        raise ParameterError("counts must be non-negative")
    # clip silently (no data-dependent error): a count above 2**31 - 1 per
    # cell is capped, which keeps every integer intermediate exact in float64
    # and does not change any sensitivity (clipping is 1-Lipschitz per cell)
    if int(np.abs(c).max()) >= _MAX_COUNT:
        c = np.clip(c, -(_MAX_COUNT - 1), _MAX_COUNT - 1)
    return c


def _as_noise_source(rng) -> NoiseSource:
    if rng is None:
        return make_generator()
    if isinstance(rng, NoiseSource):
        return rng
    if isinstance(rng, np.random.Generator):
        return NoiseSource(rng, False)
    raise ParameterError("rng must be None, a dpgeo.noise.NoiseSource or a numpy Generator "
                         "(use dpgeo.noise.make_generator())")


def _check_split(split, method) -> float:
    if split is None:
        return _DEFAULT_SPLIT[method]
    if isinstance(split, bool) or not isinstance(split, (int, float, np.floating)) or not (0 < split < 1):
        raise ParameterError(f"count_split (share of epsilon for the counts) must be in (0, 1), got {split!r}")
    return float(split)


# ---------------------------------------------------------------------------
# the mechanisms
# ---------------------------------------------------------------------------


def _coef_shape(shape, filt: _Filter, mode: str) -> tuple[int, int]:
    """Public shape of the approximation of an ``shape`` grid."""
    F = len(filt.a)
    return tuple(int(pywt.dwt_coeff_len(int(n), F, mode)) for n in shape)


def _noisy_counts(c, universe, eps_counts, s, rng) -> tuple[np.ndarray, float]:
    q = math.exp(-eps_counts / s)
    if universe is None:
        noisy = c + sample_discrete_laplace(rng, q, c.shape)
    else:
        noisy = np.zeros_like(c)
        noisy[universe] = c[universe] + sample_discrete_laplace(rng, q, int(universe.sum()))
    return noisy, q


@lru_cache(maxsize=256)
def _positive_noise_probability(wavelet: str, q: float) -> float:
    """``π = Pr[noise on a zero interior coefficient > 0]`` for count noise of decay ``q``.

    Depends only on public quantities. The noise on a coefficient is
    ``Σ_c K_c·Z_c`` over the 2-D kernel ``K`` with i.i.d. discrete Laplace
    ``Z_c``; by symmetry ``π = (1 - Pr[noise = 0]) / 2``. Haar: exact from
    the negative-binomial form of a sum of 4 draws. Rational filters: the
    atom at 0 is the mean of the characteristic function over a fine
    periodic grid (exact up to aliasing of mass beyond ±2**17, far in the
    tail). db2: Monte Carlo with a fixed public seed (±0.002).
    """
    filt = _filter(wavelet)
    if filt.name == "haar":
        return float(sum_sf(0, 4, q)[0])
    if filt.b is None:
        k = np.outer(filt.a, filt.a).ravel()
        k = k[k != 0]
        # grid fine enough that the mass of |S| >= n/2 (aliased onto 0) is nil
        sd = math.sqrt(float(np.sum(k.astype(float) ** 2)) * 2.0 * q) / (1.0 - q)
        n = 1 << max(12, min(24, int(math.ceil(math.log2(128.0 * sd + 1.0)))))
        theta = 2.0 * np.pi * np.arange(n) / n
        logphi = np.zeros(n)
        for kc in k:
            # φ(θ) = (1-q)² / (1 - 2q cos θ + q²) for one discrete Laplace draw
            logphi += 2 * math.log1p(-q) - np.log1p(-2 * q * np.cos(kc * theta) + q * q)
        atom = float(np.mean(np.exp(logphi)))
        return 0.5 * (1.0 - min(max(atom, 0.0), 1.0))
    gen = np.random.Generator(np.random.PCG64(20160315))
    a, b = np.array(filt.a), np.array(filt.b)
    kp = (np.outer(a, a) + 3 * np.outer(b, b)).ravel()
    kq = (np.outer(a, b) + np.outer(b, a)).ravel()
    draws = 200_000
    z = sample_discrete_laplace(gen, q, (draws, kp.size))
    s = _sign_z3(z @ kp, z @ kq)
    return float(np.mean(s > 0))


def em_candidates(*, wavelet: str = "haar", count_cap: float | None = None,
                  n_public: int | None = None) -> np.ndarray:
    """Public candidate thresholds of the exponential mechanism (normalised units).

    Every integer ``0..64``, then ``64·(1 + 1/64)**j`` up to ``U = 4·cap·L1``
    where ``cap`` is ``count_cap`` (else ``n_public``, else 10**7 points per
    cell) and ``L1`` the L1 norm of the normalised 2-D filter. Depends on
    public parameters only. Coefficients above ``U`` are simply above every
    candidate; no clipping of the data is needed for privacy.

    Examples
    --------
    >>> c = em_candidates(count_cap=100)
    >>> int(c[0]), int(c[64]), bool(c[-1] >= 400)
    (0, 64, True)
    """
    filt = _filter(wavelet)
    if count_cap is not None:
        cap = _check_epsilon(count_cap, "count_cap")
    elif n_public is not None:
        cap = float(_check_n_public(n_public))
    else:
        cap = float(_DEFAULT_COUNT_CAP)
    l1 = (sum(abs(t) for t in filt.a) + SQRT3 * sum(abs(t) for t in (filt.b or ()))) ** 2 / filt.gain
    upper = max(4.0 * cap * l1, float(_EM_LINEAR))
    lin = np.arange(_EM_LINEAR + 1, dtype=np.float64)
    n_geo = int(math.ceil(math.log(upper / _EM_LINEAR) / math.log1p(1.0 / _EM_LINEAR)))
    geo = _EM_LINEAR * (1.0 + 1.0 / _EM_LINEAR) ** np.arange(1, n_geo + 1)
    return np.concatenate([lin, geo])


def _check_n_public(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"n_public (public number of points) must be an integer >= 1, got {n!r}")
    return int(n)


def _privthr_rank(m_noisy: int, noisy_z: int, n_coef: int, p_micro: int, k_rule: str,
                  pi: float | None) -> tuple[int, int]:
    """How many of the ``m_noisy`` noisy positives fall below the threshold.

    Post-processing of the noisy ``|Z|′`` (and the public sizes) only.

    ``"direct"``: ``|L|`` is ``N_W - |Z|``, so ``m̂ = N_W - |Z|′`` (clamped to
    ``[0, m_noisy]``) and ``k̂ = m̂ - floor(p·m̂/100)``; the threshold keeps the
    ``k̂`` largest noisy coefficients. ``"prune"`` / ``"prune-half"``: the
    paper's rule, discard the ``round(π·|Z|′)`` smallest noisy positives and
    take the percentile of the rest.

    Returns ``(n_drop, k_target)``: the threshold is the ``(n_drop + 1)``-th
    smallest noisy positive value.
    """
    if k_rule == "direct":
        m_hat = min(max(n_coef - noisy_z, 0), m_noisy)
        k_hat = m_hat - _n_nonsignificant(m_hat, p_micro)
        return m_noisy - k_hat, k_hat
    r = int(min(max(math.floor(pi * max(noisy_z, 0) + 0.5), 0), m_noisy))
    m2 = m_noisy - r
    n0 = _n_nonsignificant(m2, p_micro)
    return r + n0, m2 - n0


def _em_select(coefs: _Coefs, k: int, cand_norm: np.ndarray, eps: float, du: int, rng):
    """One exponential-mechanism draw over the public candidates (Gumbel-max).

    Returns ``(index, candidate thresholds in P units)``.
    """
    scale = coefs.filt.gain / 4.0  # normalised -> P units
    cand_p = np.unique(np.floor(cand_norm * scale).astype(np.int64))
    c = coefs.count_greater(cand_p)
    score = -np.abs(c - k).astype(np.float64) * (eps / (2.0 * du))
    j = int(np.argmax(score + rng.gumbel(size=score.size)))
    return j, cand_p


def wavecluster_cells(
    counts,
    *,
    method: str,
    epsilon: float | None = None,
    percentile: float = 60.0,
    wavelet: str = "haar",
    mode: str = "zero",
    count_split: float | None = None,
    count_cap: float | None = None,
    n_public: int | None = None,
    sensitivity: int = 1,
    universe=None,
    k_rule: str = "direct",
    rng=None,
) -> WaveClusterCells:
    """WaveCluster on a count grid, exact or with differential privacy.

    Parameters
    ----------
    counts : array_like of int, shape (ny, nx)
        True points per cell of a public grid (rows = y, columns = x).
    method : {"exact", "privqt", "privthr", "privthr-em"}
        ``"exact"`` is not private. For ``"baseline"`` use
        :func:`wavecluster_baseline` (it needs the points).
    epsilon : float
        Total privacy budget ε (not used by ``"exact"``).
    percentile : float
        ``p`` in [0, 100): share of the positive coefficients that are not
        significant (default 60).
    wavelet : {"haar", "bior2.2", "bior1.3", "db2"}
    mode : str
        Signal extension (default ``"zero"``: the grid is padded with empty
        cells); wrap-around modes are refused.
    count_split : float, optional
        Share α of ε for the noisy counts (``"privthr"`` 0.9,
        ``"privthr-em"`` 0.7); the rest goes to ``|Z|′`` or the threshold.
    count_cap : float, optional
        Public cap (points per cell) bounding the EM's candidate thresholds;
        default ``n_public`` or 10**7. It limits the candidates only.
    n_public : int, optional
        Public number of points, used only as the default ``count_cap``.
    sensitivity : int
        Points one record can contribute (default 1); every count
        sensitivity is multiplied by it.
    universe : array_like of bool, optional
        Cells that may hold points (public). Cells outside are ignored, get
        no noise and are reported as 0.
    k_rule : {"direct", "prune", "prune-half"}
        ``"privthr"`` only: how the number of significant coefficients is
        estimated from the noisy ``|Z|′``. ``"direct"`` (default):
        ``|L|′ = N_W - |Z|′`` and the ``k̂`` largest noisy coefficients are
        significant. ``"prune"``: the paper's rule, discarding the
        ``π·|Z|′`` smallest noisy positives, with π the probability that the
        integer noise lifts a zero coefficient above 0. ``"prune-half"``:
        the paper's π = 1/2 (biased low with integer noise).
    rng : dpgeo.noise.NoiseSource or numpy.random.Generator, optional
        Noise source; default a fresh CSPRNG-seeded one. A seeded
        NoiseSource marks the report as not private.

    Returns
    -------
    WaveClusterCells

    Examples
    --------
    >>> import numpy as np
    >>> c = np.zeros((8, 8), dtype=int); c[0:2, 0:2] = 9; c[5:8, 5:8] = 7
    >>> wavecluster_cells(c, method="exact", percentile=0).n_clusters
    2
    >>> from dpgeo.noise import make_generator
    >>> r = wavecluster_cells(c, method="privthr", epsilon=1.0, rng=make_generator(1))
    >>> sorted(r.report["epsilon_split"])
    ['counts', 'nonpositive_count']
    """
    if method not in METHODS:
        raise ParameterError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if method == "baseline":
        raise ParameterError("method 'baseline' needs the points: call wavecluster_baseline(x, y, bounds=..., "
                             "shape=..., epsilon=...)")
    filt = _filter(wavelet)
    _check_mode(mode)
    p_micro = _check_percentile(percentile)
    s = _check_sensitivity(sensitivity)
    c = _as_counts(counts)
    uni = None
    if universe is not None:
        uni = np.asarray(universe, dtype=bool)
        if uni.shape != c.shape:
            raise ParameterError(f"universe must have the shape of counts {c.shape}, got {uni.shape}")
        c = np.where(uni, c, 0)
    if k_rule not in _K_RULES:
        raise ParameterError(f"k_rule must be one of {', '.join(_K_RULES)}; got {k_rule!r}")
    if count_cap is not None:
        _check_epsilon(count_cap, "count_cap")
    if n_public is not None:
        _check_n_public(n_public)

    report: dict = {
        "mechanism": "wavecluster",
        "method": method,
        "wavelet": filt.name,
        "mode": mode,
        "percentile": float(percentile),
        "level": 1,
        "connectivity": 8,
        "sensitivity": s,
        "grid_shape": [int(c.shape[0]), int(c.shape[1])],
        "threshold_units": "normalised coefficient (points per 2x2 cells at uniform density)",
    }

    if method == "exact":
        coefs = _exact_approximation(c, filt, mode)
        pos = coefs.positive()
        w = coefs.normalised()
        m = int(pos.sum())
        n0 = _n_nonsignificant(m, p_micro)
        t = _threshold_from_positives(w[pos], n0)
        sig = pos & (w >= t)
        report.update({
            "epsilon": None,
            "differentially_private": False,
            "not_private_reasons": ["method 'exact' reads the true counts"],
            "n_positive": m,
            "n_nonpositive": int(pos.size - m),
            "k": m - n0,
            "threshold": _json_float(t),
            "threshold_rule": ">=",
        })
        return _finish(sig, c.shape, filt, report, None, None)

    eps = _check_epsilon(epsilon)
    src = _as_noise_source(rng)
    gen = src.generator
    report["epsilon"] = eps
    report["differentially_private"] = not src.seeded
    report["not_private_reasons"] = ["the noise generator was seeded by the caller"] if src.seeded else []

    if method == "privqt":
        noisy, q = _noisy_counts(c, uni, eps, s, gen)
        wn_coefs = _exact_approximation(noisy, filt, mode)
        pos, w = wn_coefs.positive(), wn_coefs.normalised()
        m = int(pos.sum())
        t = _threshold_from_positives(w[pos], _n_nonsignificant(m, p_micro))
        sig = pos & (w >= t)
        report.update({
            "epsilon_split": {"counts": eps},
            "sensitivities": {"counts": s},
            "noise_q": {"counts": q},
            "n_positive_noisy": m,
            "threshold": _json_float(t),
            "threshold_rule": ">=",
        })
        return _finish(sig, c.shape, filt, report, noisy, q)

    alpha = _check_split(count_split, method)
    eps1, eps2 = alpha * eps, (1.0 - alpha) * eps
    sens = approximation_sensitivity(c.shape, wavelet=filt.name, mode=mode, percentile=percentile,
                                     sensitivity=s)

    if method == "privthr":
        true_coefs = _exact_approximation(c, filt, mode)
        n_z = int(true_coefs.P.size - int(true_coefs.positive().sum()))
        dz = sens["nonpositive_count"]
        qz = math.exp(-eps2 / dz)
        noisy_z = int(n_z + int(sample_discrete_laplace(gen, qz, 1)[0]))
        del true_coefs
        noisy, q = _noisy_counts(c, uni, eps1, s, gen)
        # ---- post-processing of (noisy, noisy_z) only ----
        wn_coefs = _exact_approximation(noisy, filt, mode)
        pos, w = wn_coefs.positive(), wn_coefs.normalised()
        vals = w[pos]
        n_coef = int(np.prod(_coef_shape(c.shape, filt, mode)))
        pi = None if k_rule == "direct" else (
            0.5 if k_rule == "prune-half" else _positive_noise_probability(filt.name, q))
        n_drop, k_target = _privthr_rank(vals.size, noisy_z, n_coef, p_micro, k_rule, pi)
        t = _threshold_from_positives(vals, n_drop)
        sig = pos & (w >= t)
        report.update({
            "count_split": alpha,
            "epsilon_split": {"counts": eps1, "nonpositive_count": eps2},
            "sensitivities": {"counts": s, "nonpositive_count": dz},
            "noise_q": {"counts": q, "nonpositive_count": qz},
            "noisy_nonpositive_count": noisy_z,
            "k_rule": k_rule,
            "prune_fraction": pi,
            "n_positive_noisy": int(vals.size),
            "k_target": k_target,
            "threshold": _json_float(t),
            "threshold_rule": ">=",
        })
        return _finish(sig, c.shape, filt, report, noisy, q)

    # privthr-em
    du = sens["em_quality"]
    cand = em_candidates(wavelet=filt.name, count_cap=count_cap, n_public=n_public)
    true_coefs = _exact_approximation(c, filt, mode)
    m = int(true_coefs.positive().sum())
    k = m - _n_nonsignificant(m, p_micro)
    j, cand_p = _em_select(true_coefs, k, cand, eps2, du, gen)
    del true_coefs, m, k
    noisy, q = _noisy_counts(c, uni, eps1, s, gen)
    # ---- post-processing of (noisy, chosen threshold) only ----
    t_p = int(cand_p[j])
    t = t_p * 4.0 / filt.gain
    wn_coefs = _exact_approximation(noisy, filt, mode)
    if wn_coefs.Q is None:
        sig = wn_coefs.P > t_p
    else:
        sig = _sign_z3(wn_coefs.P - t_p, wn_coefs.Q) > 0
    report.update({
        "count_split": alpha,
        "epsilon_split": {"counts": eps1, "threshold": eps2},
        "sensitivities": {"counts": s, "em_quality": du},
        "noise_q": {"counts": q},
        "n_candidates": int(cand_p.size),
        "candidate_max": float(cand_p[-1] * 4.0 / filt.gain),
        "count_cap": None if count_cap is None else float(count_cap),
        "threshold": t,
        "threshold_rule": ">",
    })
    return _finish(sig, c.shape, filt, report, noisy, q)


def _json_float(x: float):
    return None if not math.isfinite(x) else float(x)


def _finish(sig, shape, filt, report, noisy, q) -> WaveClusterCells:
    clab, _ = label_coefficients(sig)
    labels = coefficients_to_cells(clab, shape, wavelet=filt.name)
    report["n_significant"] = int(sig.sum())
    report["k_prime"] = report["n_significant"]  # the paper's k′
    report["n_clusters"] = int(labels.max(initial=0))
    report["n_coefficients"] = int(sig.size)
    report["cell_offset"] = filt.offset
    return WaveClusterCells(labels=labels, noisy_counts=noisy, q=q, report=report,
                            significant=sig, coefficient_labels=clab)


# ---------------------------------------------------------------------------
# Baseline: adaptive grids (Qardaji, Yang & Li 2013) + synthetic points
# ---------------------------------------------------------------------------


def _check_bounds(bounds) -> tuple[float, float, float, float]:
    try:
        minx, miny, maxx, maxy = (float(v) for v in bounds)
    except Exception:  # noqa: BLE001
        raise ParameterError(f"bounds must be (minx, miny, maxx, maxy), got {bounds!r}") from None
    if not all(map(math.isfinite, (minx, miny, maxx, maxy))) or not (maxx > minx and maxy > miny):
        raise ParameterError(f"bounds must be finite with maxx > minx and maxy > miny, got {bounds!r}")
    return minx, miny, maxx, maxy


def _bin(x, y, bounds, ny, nx):
    """Row/column of each point in an ny×nx grid over ``bounds``; -1 outside."""
    minx, miny, maxx, maxy = bounds
    fx = (x - minx) / (maxx - minx) * nx
    fy = (y - miny) / (maxy - miny) * ny
    fin = np.isfinite(fx) & np.isfinite(fy)
    ix = np.floor(np.clip(np.where(fin, fx, -1.0), -1.0, nx)).astype(np.int64)
    iy = np.floor(np.clip(np.where(fin, fy, -1.0), -1.0, ny)).astype(np.int64)
    ok = fin & (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny)
    return iy, ix, ok


def adaptive_grid_counts(
    x,
    y,
    *,
    bounds,
    shape,
    epsilon: float,
    n_public: int | None = None,
    n_share: float = 0.05,
    sensitivity: int = 1,
    rng=None,
) -> SyntheticGrid:
    """DP synthetic count grid from adaptive grids (AG, Qardaji, Yang & Li 2013).

    1. ``N``: ``n_public`` if given (public), otherwise the number of points
       in ``bounds`` released with discrete Laplace noise using
       ``n_share·ε``.
    2. Level 1: ``m1 × m1`` cells over ``bounds`` with
       ``m1 = max(10, ⌈¼·√(N·ε′/10)⌉)``, noisy counts with ``ε′/2``
       (``ε′`` = the budget left after step 1).
    3. Level 2: each level-1 cell with noisy count ``N′`` is split into
       ``m2 × m2`` leaves, ``m2 = max(1, ⌈√(N′·(ε′/2)/5)⌉)``, noisy counts
       with ``ε′/2``.
    4. ``max(leaf count, 0)`` points are placed uniformly in each leaf and
       binned on the target grid.

    Steps 2 and 3 each add noise once per point (every point is in one
    level-1 cell and one leaf), so with ``s`` points per record each costs
    its ε by the L1 sensitivity ``s``; steps 2–4 read N only through its
    released value. The level-2 grid depends on the data only through the
    noisy level-1 counts. No constrained inference between levels is done.

    Parameters
    ----------
    x, y : array_like of float
        Projected coordinates (metres); points outside ``bounds`` are dropped.
    bounds : (minx, miny, maxx, maxy)
        Public outer edges of the target grid.
    shape : (ny, nx)
        Target grid shape (rows = y from ``miny``, columns = x from ``minx``).
    epsilon : float
        Total ε of the synthetic grid.
    n_public : int, optional
        Public number of points (then all ε goes to the grids).
    n_share : float
        Share of ε for the noisy N when ``n_public`` is not given.
    sensitivity : int
        Points per record.
    rng : NoiseSource or numpy.random.Generator, optional

    Returns
    -------
    SyntheticGrid
    """
    eps = _check_epsilon(epsilon)
    s = _check_sensitivity(sensitivity)
    b = _check_bounds(bounds)
    ny, nx = _check_shape(shape)
    src = _as_noise_source(rng)
    gen = src.generator
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ParameterError("x and y must have the same length")
    if not (isinstance(n_share, (int, float)) and 0 < n_share < 1):
        raise ParameterError(f"n_share must be in (0, 1), got {n_share!r}")

    rep: dict = {"method": "adaptive-grid", "epsilon": eps, "sensitivity": s}
    if n_public is not None:
        n_used = _check_n_public(n_public)
        eps_rest = eps
        rep["n_source"] = "public"
        rep["epsilon_split"] = {}
    else:
        eps_n = n_share * eps
        eps_rest = eps - eps_n
        _, _, inside = _bin(x, y, b, 1, 1)
        qn = math.exp(-eps_n / s)
        n_noisy = int(inside.sum()) + int(sample_discrete_laplace(gen, qn, 1)[0])
        n_used = max(n_noisy, 1)
        rep["n_source"] = "noisy"
        rep["noisy_n"] = n_noisy
        rep["epsilon_split"] = {"n": eps_n}
    eps1 = eps2 = eps_rest / 2.0
    rep["epsilon_split"].update({"level1": eps1, "level2": eps2})

    m1 = max(10, int(math.ceil(0.25 * math.sqrt(n_used * eps_rest / 10.0))))
    iy1, ix1, ok = _bin(x, y, b, m1, m1)
    iy1, ix1 = iy1[ok], ix1[ok]
    fx = (x[ok] - b[0]) / (b[2] - b[0]) * m1 - ix1  # position inside the level-1 cell, [0, 1)
    fy = (y[ok] - b[1]) / (b[3] - b[1]) * m1 - iy1
    cell1 = iy1 * m1 + ix1
    q1 = math.exp(-eps1 / s)
    c1 = np.bincount(cell1, minlength=m1 * m1) + sample_discrete_laplace(gen, q1, m1 * m1)
    m2 = np.maximum(1, np.ceil(np.sqrt(np.maximum(c1, 0) * eps2 / 5.0))).astype(np.int64)
    nleaf = m2 * m2
    start = np.concatenate([[0], np.cumsum(nleaf)[:-1]])
    total = int(nleaf.sum())
    mm = m2[cell1]
    sx = np.minimum((fx * mm).astype(np.int64), mm - 1)
    sy = np.minimum((fy * mm).astype(np.int64), mm - 1)
    leaf = start[cell1] + sy * mm + sx
    q2 = math.exp(-eps2 / s)
    c2 = np.bincount(leaf, minlength=total) + sample_discrete_laplace(gen, q2, total)
    # ---- post-processing: synthetic points in the leaves ----
    c2 = np.maximum(c2, 0)
    leaf_ids = np.repeat(np.arange(total, dtype=np.int64), c2)
    owner = np.repeat(np.arange(m1 * m1, dtype=np.int64), nleaf)[leaf_ids]
    local = leaf_ids - start[owner]
    mo = m2[owner]
    ly, lx = local // mo, local % mo
    oy, ox = owner // m1, owner % m1
    u = gen.random((2, leaf_ids.size))
    px = b[0] + (ox + (lx + u[0]) / mo) * ((b[2] - b[0]) / m1)
    py = b[1] + (oy + (ly + u[1]) / mo) * ((b[3] - b[1]) / m1)
    ty, tx, tok = _bin(px, py, b, ny, nx)
    counts = np.bincount(ty[tok] * nx + tx[tok], minlength=ny * nx).reshape(ny, nx).astype(np.int64)
    rep.update({
        "n_used": int(n_used),
        "m1": int(m1),
        "n_leaves": total,
        "n_synthetic": int(leaf_ids.size),
        "noise_q": {"level1": q1, "level2": q2},
        "differentially_private": not src.seeded,
    })
    return SyntheticGrid(counts=counts, report=rep)


def wavecluster_baseline(
    x,
    y,
    *,
    bounds,
    shape,
    epsilon: float,
    percentile: float = 60.0,
    wavelet: str = "haar",
    mode: str = "zero",
    n_public: int | None = None,
    n_share: float = 0.05,
    sensitivity: int = 1,
    rng=None,
) -> WaveClusterCells:
    """Baseline of Chen, Yu & Chirkova: WaveCluster on AG synthetic counts.

    The synthetic grid (:func:`adaptive_grid_counts`) is ε-DP; WaveCluster on
    it is post-processing. ``noisy_counts`` holds the synthetic counts and
    ``q`` is ``None`` (they are not per-cell noisy counts).

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.noise import make_generator
    >>> g = make_generator(3).generator
    >>> x = np.r_[g.normal(2, .3, 3000), g.normal(8, .3, 3000)]; y = g.normal(5, .3, 6000)
    >>> r = wavecluster_baseline(x, y, bounds=(0, 0, 10, 10), shape=(20, 20), epsilon=1.0,
    ...                          n_public=6000, rng=make_generator(4))
    >>> r.report["method"], r.n_clusters >= 1
    ('baseline', True)
    """
    syn = adaptive_grid_counts(x, y, bounds=bounds, shape=shape, epsilon=epsilon, n_public=n_public,
                               n_share=n_share, sensitivity=sensitivity, rng=rng)
    res = wavecluster_cells(syn.counts, method="exact", percentile=percentile, wavelet=wavelet, mode=mode)
    rep = dict(res.report)
    for key in ("n_positive", "n_nonpositive", "k", "not_private_reasons"):
        rep.pop(key, None)
    src_private = syn.report["differentially_private"]
    rep.update({
        "method": "baseline",
        "epsilon": float(epsilon),
        "differentially_private": src_private,
        "not_private_reasons": [] if src_private else ["the noise generator was seeded by the caller"],
        "sensitivity": int(sensitivity),
        "synthetic": syn.report,
        "epsilon_split": syn.report["epsilon_split"],
    })
    return WaveClusterCells(labels=res.labels, noisy_counts=syn.counts, q=None, report=rep,
                            significant=res.significant, coefficient_labels=res.coefficient_labels)
