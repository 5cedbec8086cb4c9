"""The level-1 wavelet approximation of a count grid, in exact integer arithmetic, and its sensitivities.

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

*Sensitivities.* :func:`approximation_sensitivity` derives, from the exact
integer impulse response of the approximation at every cell of the grid,
the sensitivity of every statistic a mechanism reads from the true data
(``docs/privacy.md`` §5.4–§5.5 and the table in §5.8). It depends on
public inputs only (grid shape, wavelet, mode, percentile, points per
record).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pywt

from ...errors import ParameterError
from ._checks import _P_SCALE, _as_counts, _check_percentile, _check_sensitivity, _check_shape

__all__ = ["WAVELETS", "SAFE_MODES", "approximation", "approximation_sensitivity"]

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


def _coef_shape(shape, filt: _Filter, mode: str) -> tuple[int, int]:
    """Public shape of the approximation of an ``shape`` grid."""
    F = len(filt.a)
    return tuple(int(pywt.dwt_coeff_len(int(n), F, mode)) for n in shape)


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
