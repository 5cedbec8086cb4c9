"""Getis-Ord Gi* hot spots on released (noisy) counts, with a test that knows the noise.

Post-processing only: every function here reads released counts and public
parameters (the neighbourhood, the noise decay ``q``), never private data,
so a hot-spot layer costs no budget beyond the count release it comes from.

**Statistic.** For cell ``i`` with neighbourhood ``N_i`` (the cells within a
public distance band, or an H3 k-ring, *including* ``i``: Gi*), binary
weights, ``W_i = |N_i|``, ``n`` cells and released counts ``y``::

    T_i = Σ_{j∈N_i} y_j - ȳ W_i,     s² = (1/n) Σ_j (y_j - ȳ)²
    gi_z = T_i / sqrt(s² (n W_i - W_i²) / (n - 1))          (Ord & Getis 1995)

**Null hypothesis and the noise.** ``y_j = x_j + Z_j`` with ``x`` the true
counts and ``Z`` i.i.d. discrete Laplace noise of known law (decay ``q``,
variance ``σ² = 2q/(1-q)²``). H0: the true counts carry no spatial pattern,
i.e. they are exchangeable over the cells (the randomisation null of Gi*).
As the noise is i.i.d. and independent of ``x``, the released ``y`` are then
exchangeable too, and ``Σ_{N_i} y_j`` is a sum of ``W_i`` draws without
replacement from the released values. The p-value is computed from the
exact law of ``W_i`` draws *with* replacement (an FFT power of the released
values' pmf, whose tails include the noise's): under H0 a cell is called hot
at level α with probability at most ``α/2 + W_i(W_i-1)/(2n)`` at every ε
(``docs/privacy.md`` §9). Where that law's support would be too large, the
p-value mixes a normal law for the true counts (variance estimated without
bias as ``s² - σ²(n-1)/n``) with the exact law of the summed noise. A normal
null that ignored the noise would call far too many cells hot at small ε
(the statistical tests show both).

Classes follow ArcGIS's ``Gi_Bin``: ±3 (99%), ±2 (95%), ±1 (90%), 0, from
the two-sided p-value; with ``fdr=True`` the p-value cut-offs are the
Benjamini–Hochberg thresholds of each level over all cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from ..errors import ParameterError

__all__ = ["getis_ord", "HotspotResult", "HOTSPOT_CLASSES", "hotspot_class", "noise_sum_pmf", "mixture_sf",
           "square_band_sums", "sparse_sums"]

#: ``gi_bin`` → class label, hottest first.
HOTSPOT_CLASSES = {3: "hot spot 99%", 2: "hot spot 95%", 1: "hot spot 90%", 0: "not significant",
                   -1: "cold spot 90%", -2: "cold spot 95%", -3: "cold spot 99%"}
_LEVELS = ((3, 0.01), (2, 0.05), (1, 0.10))
#: Largest support of the exact null law (an FFT of about this many points); beyond it the normal mixture.
_MAX_NULL_SUPPORT = 1 << 24


@dataclass
class HotspotResult:
    """Gi* of every cell (public: post-processing of a release).

    Attributes
    ----------
    gi_z : numpy.ndarray
        Standardised Gi* (the total variance: true counts and noise).
    gi_p : numpy.ndarray
        Two-sided p-value of the noise-aware test.
    gi_bin : numpy.ndarray
        int8 class −3…3 (ArcGIS ``Gi_Bin``).
    n_neighbours : numpy.ndarray
        ``W_i``, the cells in each neighbourhood (the cell included).
    s2_total, s2_noise, s2_true : float
        Variance of the released counts, of the noise, and the estimated
        variance of the true counts.
    cutoffs : dict
        p-value cut-off of each level (FDR-adjusted or not).
    """

    gi_z: np.ndarray
    gi_p: np.ndarray
    gi_bin: np.ndarray
    n_neighbours: np.ndarray
    s2_total: float
    s2_noise: float
    s2_true: float
    cutoffs: dict

    @property
    def hotspot(self) -> np.ndarray:
        """Class labels (object array of str)."""
        return hotspot_class(self.gi_bin)


def hotspot_class(gi_bin) -> np.ndarray:
    """Labels of ``gi_bin`` values.

    Examples
    --------
    >>> hotspot_class([3, 0, -1]).tolist()
    ['hot spot 99%', 'not significant', 'cold spot 90%']
    """
    labels = np.array([HOTSPOT_CLASSES[k] for k in range(-3, 4)], dtype=object)
    return labels[np.asarray(gi_bin, dtype=np.int64) + 3]


def noise_sum_pmf(k: int, q: float):
    """Exact pmf of the sum of ``k`` i.i.d. discrete Laplace draws of decay ``q``.

    Returns ``(l0, pmf)``: ``pmf[m] = Pr[S = l0 + m]``; each draw's law is cut
    where ``q^L < 1e-17`` (the mass left out is below ``k·1e-17``).

    Examples
    --------
    >>> import math
    >>> l0, p = noise_sum_pmf(1, math.exp(-1.0))
    >>> round(float(p[-l0]), 6) == round((1 - math.exp(-1)) / (1 + math.exp(-1)), 6), bool(abs(p.sum() - 1) < 1e-12)
    (True, True)
    """
    from ..noise import discrete_laplace_pmf

    if k < 0:
        raise ParameterError(f"k must be >= 0, got {k}")
    if k == 0:
        return 0, np.ones(1)
    half = int(np.ceil(-39.2 / np.log(q))) + 1
    z = np.arange(-half, half + 1)
    one = discrete_laplace_pmf(z, q)
    size = 1 << int(np.ceil(np.log2(k * (2 * half) + 1)))
    f = np.fft.rfft(one, size)
    pmf = np.fft.irfft(f ** k, size)[:k * 2 * half + 1]
    pmf = np.clip(pmf, 0.0, None)
    return -k * half, pmf / pmf.sum()


def mixture_sf(t, l0: int, pmf, s: float) -> np.ndarray:
    """``Pr[A + L >= t]`` for ``L`` with pmf ``pmf`` on ``l0, l0+1, …`` and ``A ~ N(0, s²)`` independent.

    ``s = 0``: ``Pr[L >= t]``. Exact sums over the lattice for ``s <= 4``
    (every term within 9 s of ``t``, the rest from the cumulative pmf), and
    for larger ``s`` linear interpolation of the same exact function on a
    grid of spacing ``s/16`` (the function is smooth on that scale).

    Examples
    --------
    >>> import math
    >>> l0, p = noise_sum_pmf(3, math.exp(-0.5))
    >>> bool(abs(mixture_sf(np.array([0.0]), l0, p, 0.0)[0] - (0.5 + p[-l0] / 2)) < 1e-12)
    True
    """
    t = np.asarray(t, dtype=np.float64)
    pmf = np.asarray(pmf, dtype=np.float64)
    ge = np.concatenate([np.cumsum(pmf[::-1])[::-1], [0.0]])  # ge[m] = Pr[L >= l0 + m]

    def tail_ge(u):  # Pr[L >= u] for real u
        m = np.ceil(u) - l0
        m = np.clip(m, 0, pmf.size).astype(np.int64)
        return ge[m]

    if s <= 0:
        return tail_ge(t)
    if s > 4:
        lo, hi = float(t.min()), float(t.max())
        grid = np.arange(lo - s, hi + 2 * s, s / 16.0)
        vals = _mixture_exact(grid, l0, pmf, s, tail_ge)
        return np.interp(t, grid, vals)
    return _mixture_exact(t, l0, pmf, s, tail_ge)


def _mixture_exact(t, l0, pmf, s, tail_ge):
    h = int(np.ceil(9.0 * s)) + 1
    out = np.empty(t.size)
    step = max(1, (1 << 22) // (2 * h + 1))
    offs = np.arange(-h, h + 1)
    for a in range(0, t.size, step):
        tt = t[a:a + step]
        base = np.floor(tt).astype(np.int64)
        ls = base[:, None] + offs[None, :]  # integer values of L near t
        m = ls - l0
        w = np.where((m >= 0) & (m < pmf.size), pmf[np.clip(m, 0, pmf.size - 1)], 0.0)
        normal = 0.5 * special.erfc((tt[:, None] - ls) / (s * np.sqrt(2.0)))
        out[a:a + step] = (w * normal).sum(1) + tail_ge(base + h + 1)
    return out


def square_band_sums(values2d, mask2d, offsets):
    """Neighbourhood sums on a square grid: ``Σ_{(dx,dy)∈offsets} v[iy+dy, ix+dx]`` over masked cells.

    Returns ``(sums, counts)`` as float arrays of the grid's shape (exact
    integers for integer inputs: the convolution is rounded).
    """
    from scipy.signal import fftconvolve

    offsets = np.asarray(offsets, dtype=np.int64)
    r = int(np.abs(offsets).max()) if offsets.size else 0
    kern = np.zeros((2 * r + 1, 2 * r + 1))
    kern[offsets[:, 1] + r, offsets[:, 0] + r] = 1.0
    kern = kern[::-1, ::-1]  # correlation
    v = np.where(mask2d, values2d, 0).astype(np.float64)
    sums = np.rint(fftconvolve(v, kern, mode="same"))
    counts = np.rint(fftconvolve(mask2d.astype(np.float64), kern, mode="same"))
    return sums, counts


def sparse_sums(n, i, j, values):
    """Neighbourhood sums from pairs ``(i, j)`` (``j`` in the neighbourhood of ``i``): ``(sums, counts)``."""
    v = np.asarray(values, dtype=np.float64)
    sums = np.bincount(i, weights=v[j], minlength=n)
    counts = np.bincount(i, minlength=n).astype(np.float64)
    return sums, counts


def getis_ord(values, neighbour_sums, n_neighbours, *, q=None, fdr: bool = False) -> HotspotResult:
    """Gi* z-scores, noise-aware p-values and classes of released counts.

    Parameters
    ----------
    values : numpy.ndarray
        Released (or, for the owner's comparison, exact) count of every cell
        of the universe.
    neighbour_sums : numpy.ndarray
        ``Σ_{j∈N_i} values_j`` per cell (the cell included).
    n_neighbours : numpy.ndarray
        ``W_i = |N_i|`` per cell.
    q : float or None
        Decay of the discrete Laplace noise in ``values`` (None: exact counts,
        the classic test with a normal null).
    fdr : bool
        Benjamini–Hochberg cut-offs per level instead of 0.01/0.05/0.10.

    Examples
    --------
    >>> y = np.r_[np.tile([0.0, 1.0], 100), [6.0, 7.0, 6.0], np.tile([1.0, 0.0], 100)]  # 403 cells on a line
    >>> i = np.repeat(np.arange(403), 3); j = i + np.tile([-1, 0, 1], 403)
    >>> ok = (j >= 0) & (j < 403)
    >>> s, w = sparse_sums(403, i[ok], j[ok], y)
    >>> r = getis_ord(y, s, w)
    >>> r.gi_bin[199:204].tolist(), r.hotspot[201]
    ([2, 3, 3, 3, 2], 'hot spot 99%')
    """
    y = np.asarray(values, dtype=np.float64)
    wsum = np.asarray(neighbour_sums, dtype=np.float64)
    W = np.asarray(n_neighbours, dtype=np.float64)
    n = y.size
    if n < 3:
        raise ParameterError("Gi* needs at least 3 cells")
    mean = y.mean()
    s2 = float(np.mean((y - mean) ** 2))
    from ..noise import discrete_laplace_variance

    s2_noise = 0.0 if q is None else discrete_laplace_variance(q)
    s2_true = max(s2 - s2_noise * (n - 1) / n, 0.0)
    t = wsum - mean * W
    shape = (n * W - W * W) / (n - 1)
    total = s2_true * shape + s2_noise * W
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(total > 0, t / np.sqrt(total), 0.0)
    p = np.ones(n)
    integer = bool(np.all(y == np.rint(y)))
    lo_y, hi_y = (int(y.min()), int(y.max())) if integer else (0, 0)
    for w in np.unique(W).tolist():
        sel = np.flatnonzero(W == w)
        if integer and w * (hi_y - lo_y + 1) <= _MAX_NULL_SUPPORT:
            # the exact law of a sum of w draws from the released values (the randomisation null)
            base, ge, le = _empirical_sum_law(y, lo_y, hi_y, int(w))
            m = np.rint(wsum[sel]).astype(np.int64) - base
            up = ge[np.clip(m, 0, ge.size - 1)]
            lo = le[np.clip(m, 0, le.size - 1)]
        else:
            s_a = float(np.sqrt(s2_true * (n * w - w * w) / (n - 1)))
            if q is None:
                if s_a <= 0:
                    continue
                up = 0.5 * special.erfc(t[sel] / (s_a * np.sqrt(2.0)))
                lo = 0.5 * special.erfc(-t[sel] / (s_a * np.sqrt(2.0)))
            else:
                l0, pmf = noise_sum_pmf(int(w), q)
                up = mixture_sf(t[sel], l0, pmf, s_a)
                lo = mixture_sf(-t[sel], l0, pmf, s_a)  # L and A are symmetric
        p[sel] = np.minimum(1.0, 2.0 * np.minimum(up, lo))
    cut = {}
    gbin = np.zeros(n, dtype=np.int8)
    for level, alpha in reversed(_LEVELS):
        c = _bh_cutoff(p, alpha) if fdr else alpha
        cut[f"{100 - round(alpha * 100)}%"] = c
        sig = p <= c if fdr else p < c
        gbin[sig] = np.where(z[sig] > 0, level, -level)
    return HotspotResult(z, p, gbin, W.astype(np.int64), s2, s2_noise, s2_true, cut)


def _empirical_sum_law(y, lo_y, hi_y, w):
    """Law of the sum of ``w`` independent draws from the values ``y`` (integers in ``[lo_y, hi_y]``).

    Returns ``(base, ge, le)``: ``ge[m] = Pr[S >= base + m]``, ``le[m] = Pr[S <= base + m]``.
    """
    pmf = np.bincount((y - lo_y).astype(np.int64), minlength=hi_y - lo_y + 1) / y.size
    size = 1 << int(np.ceil(np.log2(w * (pmf.size - 1) + 1)))
    law = np.fft.irfft(np.fft.rfft(pmf, size) ** w, size)[:w * (pmf.size - 1) + 1]
    law = np.clip(law, 0.0, None)
    law /= law.sum()
    ge = np.cumsum(law[::-1])[::-1]
    le = np.cumsum(law)
    return w * lo_y, np.minimum(ge, 1.0), np.minimum(le, 1.0)


def _bh_cutoff(p, alpha) -> float:
    """Benjamini–Hochberg: the largest p-value ``p_(k)`` with ``p_(k) <= k α / n`` (0 when none)."""
    ps = np.sort(p)
    k = np.arange(1, ps.size + 1)
    ok = np.flatnonzero(ps <= k * alpha / ps.size)
    return float(ps[ok[-1]]) if ok.size else 0.0
