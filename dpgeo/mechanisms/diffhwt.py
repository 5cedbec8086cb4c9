"""DiffHWT: Haar-wavelet data publishing for clustering — **NOT differentially private** under dpgeo's relation.

A comparison system. It publishes one noisy, compressed row per record, so it
can never be a dpgeo layer; this module shows what it protects and what not.

The method (DiffHWT, "differential privacy preserving clustering based on the
Haar wavelet transform", Algorithm 1 of its paper), with the paper's
parameter names:

1. Every record (a row of ``n`` attributes) is divided by ``T_max``, a public
   bound with ``|t| <= T_max`` for every value, so values lie in ``[0, 1]``
   (``hasnegativevalues=False``, ``IntervalLength = 1``) or ``[-1, 1]``
   (``IntervalLength = 2``), and padded with zeros to ``n̄``, the next power of 2.
2. The averaging Haar transform (the paper's: a pair ``(a, b)`` becomes the
   average ``(a + b)/2``; (9, 7, 3, 5) → (8, 4) → (6)) is applied down to
   level ``s``: each row keeps its ``2^s`` approximation coefficients, each
   the mean of ``n̄/2^s`` consecutive (padded) attributes; the trailing ones
   that hold only padding are dropped, leaving ``d = ⌈n·2^s/n̄⌉``. The paper
   requires at least one decomposition, ``s <= log2(n̄) − 1``; for 2-D
   points that forces ``s = 0``: one value ``(x + y)/2`` per point.
3. Every coefficient gets Laplace noise of scale
   ``λ = 2^s·IntervalLength/(n̄·ε)`` and the ``m × d`` matrix ``P`` is published.

The paper chooses ``s`` by a heuristic that clusters the *private* data
(k-means on the exact coefficients, F-measure ≥ 0.8) and leaves ``T_max``
to the data holder; here both are parameters (public), so no such leak
happens inside this module.

Exact noise
-----------
Coefficients are computed exactly on a lattice: normalised values are
clipped to their interval (per value, which changes no sensitivity) and
rounded to multiples of ``2^-lattice_bits``; a coefficient is then an integer
block sum ``S`` times ``2^s/(n̄·2^lattice_bits)``, and ``S`` receives discrete
Laplace noise with ``q = exp(−ε/Δ_S)``, ``Δ_S = IntervalLength·2^lattice_bits``
(× ``n`` for ``sensitivity="record"``). The published scale matches the
paper's ``λ`` up to the lattice and the noise is exact (δ = 0 for the
relation it is calibrated to).

Privacy: the sensitivity argument, checked
------------------------------------------
*The paper's relation* ("T and T̃ differ in one attribute of one record").
Changing ``t_αβ`` by ``Δ``, ``|Δ| <= IntervalLength·T_max``, changes only the
coefficient of record α whose block holds attribute β, by
``(Δ/T_max)·2^s/n̄``. So the L1 sensitivity is ``2^s·IntervalLength/n̄`` and
Laplace noise of scale ``λ`` gives ε-DP **for that relation** — the paper's
Theorem 2 is right as stated, and this implementation's ``Δ_S`` is its exact
integer version.

*Replacing one whole record* (bounded DP, the number of records public).
All ``n`` attributes of the record may change, each coefficient of its row
by at most ``(number of real attributes in its block)·IntervalLength·2^s/n̄``;
summed over the ``d`` coefficients the L1 sensitivity is
``n·2^s·IntervalLength/n̄`` — **``n`` times the paper's** (2 for points,
30 for the Breast Cancer Wisconsin data of its experiments). With the
paper's ``λ`` the release is only ``(n·ε)``-DP under replacement.
``sensitivity="record"`` is the fix: ``λ_record = n·λ``, ε-DP under
replacement.

*Adding or removing one record* (dpgeo's relation). The output has one row
per record: ``P`` has ``m`` rows without the record and ``m + 1`` with it,
so the event "``P`` has ``m + 1`` rows" has probability 1 on one data set
and 0 on its neighbour. **No finite ε and no δ < 1 holds**; per-record
publishing cannot be DP under this relation whatever the noise. Hence
every result says ``differentially_private: false`` and cannot be written as
a layer.

Examples
--------
>>> import numpy as np
>>> haar_approximation(np.array([[9.0, 7.0, 3.0, 5.0]]), 1), haar_approximation(np.array([[9.0, 7.0, 3.0, 5.0]]), 0)
(array([[8., 4.]]), array([[6.]]))
>>> rel = diffhwt(np.array([[1.0, 2.0, 3.0, 4.0, 5.0]] * 4), epsilon=1.0, T_max=10.0, s=2, rng=np.random.default_rng(0))
>>> rel.P.shape, rel.metadata["lambda"], rel.metadata["differentially_private"]
((4, 3), 0.5, False)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ..errors import OutputError, ParameterError
from ..noise import sample_discrete_laplace
from ._lloyd import lloyd

__all__ = ["DiffHWTRelease", "diffhwt", "diffhwt_points", "haar_approximation", "SENSITIVITIES",
           "DEFAULT_LATTICE_BITS"]

#: ``"attribute"``: the paper's calibration (one attribute of one record); ``"record"``: one whole record.
SENSITIVITIES = ("attribute", "record")
#: Normalised values are rounded to multiples of 2**-DEFAULT_LATTICE_BITS.
DEFAULT_LATTICE_BITS = 16


def _discrete_laplace(rng, *, epsilon: float, sensitivity: float, size) -> np.ndarray:
    """Integer noise for an integer statistic of L1 sensitivity ``sensitivity`` released with ``epsilon``.

    The only place this module draws noise.
    """
    return sample_discrete_laplace(rng, size, epsilon=epsilon, sensitivity=sensitivity)


def haar_approximation(R, s: int) -> np.ndarray:
    """Level-``s`` approximation coefficients of the averaging Haar transform of every row.

    ``R`` has a power-of-2 number of columns ``n̄``; row ``i`` becomes the
    ``2^s`` means of its consecutive blocks of ``n̄/2^s`` entries.
    """
    R = np.asarray(R, dtype=float)
    nbar = R.shape[1]
    L = int(round(math.log2(nbar)))
    if 2 ** L != nbar:
        raise ParameterError(f"the rows must have a power-of-2 length, got {nbar}")
    if not 0 <= s <= L:
        raise ParameterError(f"s must be in [0, {L}], got {s}")
    return R.reshape(R.shape[0], 2 ** s, nbar // 2 ** s).mean(axis=2)


@dataclass
class DiffHWTRelease:
    """Result of :func:`diffhwt`. **Not differentially private** under add/remove; never publishable.

    Attributes
    ----------
    P : numpy.ndarray, shape (m, d)
        The published matrix (normalised units: attributes divided by ``T_max``).
    metadata : dict
        Parameters, ``lambda`` (the Laplace scale), the privacy verdict and
        its reasons (``differentially_private: false``, ``publishable: false``).
    """

    P: np.ndarray = field(repr=False)
    metadata: dict
    rows: np.ndarray | None = field(default=None, repr=False)

    @property
    def differentially_private(self) -> bool:
        return False

    def cluster(self, K: int, *, rng=None, max_iter: int = 300) -> np.ndarray:
        """k-means (k-means++ start) on the rows of ``P``: cluster 1..K of every record (the paper's step)."""
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        if isinstance(K, bool) or not isinstance(K, numbers.Integral) or not 1 <= K <= self.P.shape[0]:
            raise ParameterError(f"K must be an integer in [1, {self.P.shape[0]}], got {K!r}")
        _, labels, _ = lloyd(self.P, int(K), gen, init="++", max_iter=max_iter)
        return labels + 1

    def to_file(self, *args, **kwargs):
        """Refuse: a per-record release is never a publishable dpgeo layer."""
        raise OutputError("DiffHWT is NOT differentially private under dpgeo's neighbouring relation (one row "
                          "is published per record; see metadata 'not_private_reasons'); its result cannot be "
                          "written as a publishable layer")


def _reasons(sensitivity: str, n: int) -> list:
    out = ["one row is published per record: adding or removing a record changes the number of rows, so no "
           "epsilon and no delta < 1 holds under dpgeo's relation (add or remove one record)"]
    if sensitivity == "attribute":
        out.append(f"the noise is calibrated to a change of one attribute of one record (the paper's relation); "
                   f"replacing a whole record of n = {n} attributes changes the coefficients {n} times as much "
                   f"in L1, so even under replacement the release is only ({n}·epsilon)-DP")
    else:
        out.append("with sensitivity='record' the release is epsilon-DP only under replacement of one record "
                   "with the number of records public (bounded DP), not under dpgeo's relation")
    return out


def diffhwt(T, *, epsilon: float, T_max: float, s: int = 0, hasnegativevalues: bool = False,
            sensitivity: str = "attribute", lattice_bits: int = DEFAULT_LATTICE_BITS, rng=None) -> DiffHWTRelease:
    """DiffHWT (the paper's Algorithm 1) with exact integer noise. **Not differentially private** (module notes).

    Parameters
    ----------
    T : array_like, shape (m, n)
        The records, ``n >= 2`` attributes.
    epsilon : float
        The paper's ε (the budget it claims).
    T_max : float
        Public bound on ``|t|``; values beyond it are clipped.
    s : int
        Level at which the decomposition stops, ``0 <= s <= log2(n̄) − 1``.
    hasnegativevalues : bool
        ``False``: values in ``[0, T_max]`` (``IntervalLength = 1``);
        ``True``: in ``[−T_max, T_max]`` (``IntervalLength = 2``).
    sensitivity : {"attribute", "record"}
        ``"attribute"``: the paper's noise scale ``λ``; ``"record"``: ``n·λ``,
        correct for replacing one whole record.
    lattice_bits : int
        Normalised values are rounded to multiples of ``2^-lattice_bits``.
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    DiffHWTRelease
    """
    X = np.asarray(T, dtype=float)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] < 2 or not np.isfinite(X).all():
        raise ParameterError("DiffHWT needs a non-empty (m, n) array of finite values with n >= 2 attributes")
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not epsilon > 0 \
            or not math.isfinite(epsilon):
        raise ParameterError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if isinstance(T_max, bool) or not isinstance(T_max, numbers.Real) or not T_max > 0 or not math.isfinite(T_max):
        raise ParameterError(f"T_max must be a finite number > 0, got {T_max!r}")
    if sensitivity not in SENSITIVITIES:
        raise ParameterError(f"sensitivity must be 'attribute' (the paper) or 'record', got {sensitivity!r}")
    if isinstance(lattice_bits, bool) or not isinstance(lattice_bits, numbers.Integral) \
            or not 4 <= lattice_bits <= 30:
        raise ParameterError(f"lattice_bits must be an integer in [4, 30], got {lattice_bits!r}")
    m, n = X.shape
    nbar = 1 << (n - 1).bit_length()
    L = nbar.bit_length() - 1
    if isinstance(s, bool) or not isinstance(s, numbers.Integral) or not 0 <= s <= L - 1:
        raise ParameterError(f"s (the stop level) must be an integer in [0, {L - 1}] for n = {n} attributes "
                             f"(n̄ = {nbar}; the paper decomposes at least once), got {s!r}")
    s = int(s)
    interval = 2 if hasnegativevalues else 1
    lo = -1.0 if hasnegativevalues else 0.0
    scale = 1 << int(lattice_bits)
    A = np.rint(np.clip(X / float(T_max), lo, 1.0) * scale).astype(np.int64)
    padded = np.zeros((m, nbar), dtype=np.int64)
    padded[:, :n] = A
    block = nbar >> s
    d = -(-n * (1 << s) // nbar)  # ceil(n·2^s/n̄): blocks holding at least one real attribute
    S = padded.reshape(m, 1 << s, block).sum(axis=2)[:, :d]
    delta_S = interval * scale * (n if sensitivity == "record" else 1)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    noisy = S + _discrete_laplace(gen, epsilon=float(epsilon), sensitivity=delta_S, size=S.shape)
    unit = (1 << s) / (nbar * scale)
    P = noisy * unit
    lam = (1 << s) * interval / (nbar * float(epsilon)) * (n if sensitivity == "record" else 1)
    md = {
        "mechanism": "DiffHWT: averaging Haar approximation of each record plus Laplace noise",
        "method": "diffhwt",
        "differentially_private": False,
        "publishable": False,
        "not_private_reasons": _reasons(sensitivity, n),
        "epsilon": float(epsilon),
        "epsilon_under_replacement": float(epsilon) * (n if sensitivity == "attribute" else 1),
        "sensitivity": sensitivity,
        "s": s,
        "n": n,
        "n_bar": nbar,
        "d": int(d),
        "T_max": float(T_max),
        "IntervalLength": interval,
        "lambda": lam,
        "noise": f"discrete Laplace on the lattice 2^-{int(lattice_bits)} (exact), q = exp(-epsilon/{delta_S})",
        "m": int(m),
    }
    return DiffHWTRelease(P=P, metadata=md)


def diffhwt_points(x, y, *, area, epsilon: float, s: int = 0, sensitivity: str = "attribute",
                   lattice_bits: int = DEFAULT_LATTICE_BITS, rng=None) -> DiffHWTRelease:
    """DiffHWT on 2-D points over a public study area. **Not differentially private.**

    Points outside the study area's bounding box are dropped; each point
    becomes the record ``(x − minx, y − miny)`` with ``T_max`` the longer side
    of the box (public), so values lie in ``[0, 1]`` after normalisation.
    With two attributes the paper's rule allows only ``s = 0``: one value,
    ``(x′ + y′)/2``, per point.

    Parameters
    ----------
    x, y : array_like
        Points in the study area's working CRS (metres).
    area : dpgeo.StudyArea or tuple
        The public study area, or a bbox ``(minx, miny, maxx, maxy)`` in the
        points' coordinates.
    epsilon, s, sensitivity, lattice_bits, rng
        As for :func:`diffhwt`.

    Returns
    -------
    DiffHWTRelease
        ``rows`` is the index in the input of each published row.
    """
    b = area.polygon.bounds if hasattr(area, "polygon") else tuple(float(v) for v in area)
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    keep = np.isfinite(x) & np.isfinite(y) & (x >= b[0]) & (x <= b[2]) & (y >= b[1]) & (y <= b[3])
    T = np.column_stack([x[keep] - b[0], y[keep] - b[1]])
    rel = diffhwt(T, epsilon=epsilon, T_max=max(b[2] - b[0], b[3] - b[1]), s=s, hasnegativevalues=False,
                  sensitivity=sensitivity, lattice_bits=lattice_bits, rng=rng)
    rel.rows = np.flatnonzero(keep)
    return rel
