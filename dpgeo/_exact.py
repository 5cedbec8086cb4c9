"""Exact inverse-CDF sampling of geometric-type counts from uniform 64-bit words.

Every integer the samplers of :mod:`dpgeo.noise` return is a *count*

    N = #{k in 1..K : V < c_k}

of a uniform ``V`` in [0, 1) below a strictly decreasing list of
probabilities ``c_1 > c_2 > ... > c_K`` of one of three kinds, for a decay
``x = exp(-δ)`` (``δ > 0``):

``"laplace"``  ``c_k = 2 x^k / (1 + x)``: ``Pr[|Z| >= k]`` of discrete Laplace noise,
``"geom"``     ``c_k = x^k``: ``Pr[G >= k]`` of a geometric variable,
``"trunc"``    ``c_k = (x^k - x^b) / (1 - x^b)``, ``K = b - 1``: a geometric
               variable truncated to {0, ..., b-1}.

For ``"laplace"`` and ``"geom"`` a count of ``K`` means "``K`` or more" and the
excess is drawn again (memorylessness: given ``G >= K``, ``G - K`` is
geometric with the same decay).

**Why it is exact.** Each ``c_k`` is irrational (``x`` is transcendental:
``δ`` is a non-zero rational, or ``-ln(1 - p)`` for ``p`` built from such
``x``; a rational value of ``c_k`` would make ``x`` a root of a non-zero
polynomial with rational coefficients), so ``c_k · 2^63`` is never an
integer and its floor ``t_k`` is well defined. ``t_k`` is computed once per
table with interval arithmetic on :class:`decimal.Decimal` (directed rounding;
``exp`` and ``ln`` are correctly rounded, and their results are widened by
more than their rounding error), raising the precision until the floors of
the lower and upper bound agree. A sample takes a 63-bit integer ``v`` from
one random word, so ``V = (v + W) / 2^63`` with ``W`` uniform in [0, 1) made
of further words. If ``v != t_k``, then ``V < c_k`` exactly when ``v < t_k``;
if ``v == t_k`` (probability ``2^-63`` per threshold) further words are drawn
and compared with the exact binary expansion of ``c_k`` until they differ.
Floating point is used only to *guess* the count; every guess is verified
against the integer thresholds, and a wrong or unverifiable guess goes to
the exact path (binary search plus the comparison above).

**Large tables.** When ``δ`` is small the table would be long. Then a
geometric variable is split into base-``b`` digits,
``G = Σ_i R_i b^i + b^L W``: the digits ``R_i`` are independent truncated
geometric variables with decays ``x^(b^i)`` and ``W`` is geometric with
decay ``x^(b^L)`` (the law of ``G`` factorises over the digits because
``x^G = Π x^(R_i b^i) · (x^(b^L))^W``).
"""

from __future__ import annotations

import bisect
import functools
import math
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    Context,
    Decimal,
)
from fractions import Fraction

import numpy as np

#: Longest table (thresholds) built for one decay.
TABLE_MAX = 1 << 15
#: Base of the digit decomposition (a truncated table has DIGIT_BASE - 1 thresholds).
DIGIT_BASE = 4096
#: A table covers all but ``2**-40`` of the mass: ``K = ceil(COVER / δ)``.
COVER = 40 * math.log(2)
#: Below this δ a full-coverage table would exceed TABLE_MAX entries.
DELTA_MIN = COVER / TABLE_MAX
#: Largest value any sampler returns (magnitudes are capped here; reaching it raises).
VALUE_CAP = 1 << 62
CHUNK = 1 << 15
SMALL = 16  # up to this many draws, count in plain Python
_P0 = 40  # starting decimal precision (digits)
_INT63_MAX = (1 << 63) - 1


def _ctx(prec, rounding):
    return Context(prec=prec, rounding=rounding, Emin=MIN_EMIN, Emax=MAX_EMAX)


class _Iv:
    """Interval arithmetic on positive Decimals at ``prec`` digits (directed rounding)."""

    def __init__(self, prec):
        self.prec = prec
        self.lo = _ctx(prec, ROUND_FLOOR)
        self.hi = _ctx(prec, ROUND_CEILING)
        self.tiny = Decimal(10) ** -prec

    def mul(self, a, b):
        return self.lo.multiply(a[0], b[0]), self.hi.multiply(a[1], b[1])

    def div(self, a, b):
        return self.lo.divide(a[0], b[1]), self.hi.divide(a[1], b[0])

    def add(self, a, b):
        return self.lo.add(a[0], b[0]), self.hi.add(a[1], b[1])

    def scale(self, a, m):  # positive integer m
        m = Decimal(m)
        return self.lo.multiply(a[0], m), self.hi.multiply(a[1], m)

    def widen(self, lo, hi, digits):
        """Bounds around values correct to ``digits`` significant digits (relative error < 10**(1-digits))."""
        e = Decimal(10) ** (2 - digits)
        return self.lo.multiply(lo, self.lo.subtract(1, e)), self.hi.multiply(hi, self.hi.add(1, e))

    def exp_neg(self, y):
        """``exp(-y)`` for an interval ``y >= 0``."""
        p = self.prec + 5
        c = _ctx(p, ROUND_HALF_EVEN)  # exp is correctly rounded
        return self.widen(c.exp(c.minus(y[1])), c.exp(c.minus(y[0])), p)

    def one_minus_exp_neg(self, y):
        """``1 - exp(-y)`` for an interval ``y > 0``, to relative precision ~10**-prec."""
        if y[1] < self.tiny:
            # y - y^2/2 <= 1 - exp(-y) <= y
            return self.lo.subtract(y[0], self.hi.multiply(self.hi.multiply(y[0], y[0]), Decimal("0.5"))), y[1]
        extra = max(0, -y[0].adjusted()) + 5
        wide = _Iv(self.prec + extra)
        e = wide.exp_neg(y)
        return wide.lo.subtract(1, e[1]), wide.hi.subtract(1, e[0])


# ---------------------------------------------------------------------------
# decays x = exp(-δ), δ = mult · base, base rational or -ln(1 - p)
# ---------------------------------------------------------------------------


class Decay:
    """``x = exp(-δ)`` with ``δ = mult · base``; ``base`` is ``r`` (a positive rational)
    or ``-ln(1 - exp(-r θ) / (1 + exp(-r)))`` (the sparse histogram's gap law)."""

    __slots__ = ("_hash", "delta", "mult", "r", "theta")

    def __init__(self, r: Fraction, theta: int | None = None, mult: int = 1):
        self.r, self.theta, self.mult = Fraction(r), theta, int(mult)
        if self.theta is None:
            base = float(self.r)
        else:
            p = math.exp(-float(self.r) * self.theta) / (1.0 + math.exp(-float(self.r)))
            base = -math.log1p(-p)
        self.delta = base * self.mult  # float, for estimates only (may underflow to 0)
        self._hash = hash(self.key)

    @property
    def key(self):
        return (self.r, self.theta, self.mult)

    def __eq__(self, other):
        return isinstance(other, Decay) and self.key == other.key

    def __hash__(self):
        return self._hash

    def power(self, m: int) -> Decay:
        """The decay ``x**m``."""
        return decay(self.r, self.theta, self.mult * int(m))

    def delta_bounds(self, iv: _Iv):
        """Bounds of δ with relative precision about ``10**-iv.prec``."""
        return _delta_bounds(self.r, self.theta, self.mult, iv.prec)


@functools.lru_cache(maxsize=1024)
def decay(r: Fraction, theta: int | None = None, mult: int = 1) -> Decay:
    """The (cached) :class:`Decay` for ``r``, ``theta`` and ``mult``."""
    return Decay(r, theta, mult)


@functools.lru_cache(maxsize=512)
def _delta_bounds(r, theta, mult, prec):
    iv = _Iv(prec)
    n, d = Decimal(r.numerator), Decimal(r.denominator)
    rr = iv.lo.divide(n, d), iv.hi.divide(n, d)
    if theta is None:
        return iv.scale(rr, mult)
    # p = exp(-r θ) / (1 + exp(-r)), δ_base = -ln(1 - p)
    p = _gap_p(rr, theta, iv)
    if p[1] < iv.tiny:
        # p <= -ln(1 - p) <= p + p^2 for 0 < p <= 1/2
        base = p[0], iv.hi.add(p[1], iv.hi.multiply(p[1], p[1]))
    else:
        wide = _Iv(prec + max(0, -p[0].adjusted()) + 10)
        n2, d2 = wide.lo.divide(n, d), wide.hi.divide(n, d)
        p = _gap_p((n2, d2), theta, wide)
        omega = wide.lo.subtract(1, p[1]), wide.hi.subtract(1, p[0])  # 1 - p
        c = _ctx(wide.prec + 5, ROUND_HALF_EVEN)  # ln is correctly rounded
        a, b = wide.widen(c.minus(c.ln(omega[1])), c.minus(c.ln(omega[0])), wide.prec + 5)
        base = iv.lo.plus(a), iv.hi.plus(b)
    return iv.scale(base, mult)


def _gap_p(rr, theta, iv):
    a = iv.exp_neg(iv.scale(rr, theta))
    b = iv.exp_neg(rr)
    return iv.div(a, (iv.lo.add(1, b[0]), iv.hi.add(1, b[1])))


# ---------------------------------------------------------------------------
# threshold tables
# ---------------------------------------------------------------------------


def _rows(kind: str, decay: Decay, K: int, prec: int, upto: int | None = None):
    """Bounds ``(c_lo, c_hi, d_lo, d_hi)`` of ``c_k`` and ``d_k = 1 - c_k`` for k = 1..upto.

    Everything is computed from ``x = exp(-δ)`` and ``E_1 = 1 - x`` with
    additions and multiplications of positive quantities only, so relative
    precision is kept even when ``x`` is close to 1.
    """
    iv = _Iv(prec + 10)
    upto = K if upto is None else upto
    dl = decay.delta_bounds(iv)
    x = iv.exp_neg(dl)
    e1 = iv.one_minus_exp_neg(dl)
    n_iter = K + 1 if kind == "trunc" else upto
    X, E = [x], [e1]  # X[m-1] = x^m, E[m-1] = 1 - x^m
    for _ in range(1, n_iter):
        E.append(iv.add(E[-1], iv.mul(X[-1], e1)))  # 1 - x^(m+1) = (1 - x^m) + x^m (1 - x)
        X.append(iv.mul(X[-1], x))
    out = []
    one_plus_x = iv.lo.add(1, x[0]), iv.hi.add(1, x[1])
    for k in range(1, upto + 1):
        if kind == "geom":
            c, dd = X[k - 1], E[k - 1]
        elif kind == "laplace":
            c = iv.div(iv.scale(X[k - 1], 2), one_plus_x)
            num = E[k - 1] if k == 1 else iv.add(E[k - 1], iv.mul(x, E[k - 2]))  # 1 + x - 2x^k
            dd = iv.div(num, one_plus_x)
        else:  # trunc, b = K + 1
            eb = E[K]
            c = iv.div(iv.mul(X[k - 1], E[K - k]), eb)  # x^k (1 - x^(b-k)) / (1 - x^b)
            dd = iv.div(E[k - 1], eb)
        out.append((c[0], c[1], dd[0], dd[1]))
    return out


def _floor_scaled(row, bits: int, iv: _Iv):
    """``floor(c · 2**bits)`` if the bounds determine it, else ``None``."""
    two = Decimal(1 << bits)
    c_lo, c_hi, d_lo, d_hi = row
    a = int(iv.lo.multiply(c_lo, two).to_integral_value(ROUND_FLOOR))
    b = int(iv.hi.multiply(c_hi, two).to_integral_value(ROUND_FLOOR))
    b = min(b, (1 << bits) - 1)  # c < 1
    if a == b:
        return a
    # through the complement: floor(c 2^n) = 2^n - 1 - floor((1 - c) 2^n) (never an integer)
    a = int(iv.lo.multiply(d_lo, two).to_integral_value(ROUND_FLOOR))
    b = int(iv.hi.multiply(d_hi, two).to_integral_value(ROUND_FLOOR))
    b = min(b, (1 << bits) - 1)
    if a == b:
        return (1 << bits) - 1 - a
    return None


def _tiny_delta_bits(kind: str, delta_lo: Decimal) -> int:
    """Extra bits of precision a table needs when δ is tiny.

    ``1 - x ≈ δ`` needs about ``log2(1/δ)`` more bits to keep its relative
    precision; a truncated table's ``c_k`` is within about ``k δ`` of the
    dyadic number ``(b - k)/b`` (``b`` is a power of two), which takes
    ``2 log2(1/δ)`` bits to separate from it.
    """
    bits = max(0, int(-delta_lo.adjusted() * 3.33) + 4)
    return 2 * bits if kind == "trunc" else bits


def _fixed_point_thresholds(kind: str, decay: Decay, K: int) -> list:
    """``floor(c_k · 2**63)`` for k = 1..K in fixed-point integer interval arithmetic (fast).

    The same computation as :func:`_rows` (positive quantities only; complements
    without cancellation), on integers scaled by ``2**S`` with floor/ceiling
    rounding, ``S`` large enough that ``1 - x`` keeps over 100 significant
    bits. Entries whose bounds do not settle the floor are ``None`` (the
    caller recomputes those with :func:`_rows` at higher precision).
    """
    iv0 = _Iv(30)
    dl = decay.delta_bounds(iv0)
    S = 140 + _tiny_delta_bits(kind, dl[0]) + K.bit_length()
    iv = _Iv(int(S * 0.302) + 12)
    dl = decay.delta_bounds(iv)
    one = 1 << S
    scale = Decimal(one)

    def lo_int(d):
        return int(iv.lo.multiply(d, scale).to_integral_value(ROUND_FLOOR))

    def hi_int(d):
        return int(iv.hi.multiply(d, scale).to_integral_value(ROUND_CEILING))

    x = iv.exp_neg(dl)
    e1 = iv.one_minus_exp_neg(dl)
    xl, xh, el, eh = lo_int(x[0]), hi_int(x[1]), lo_int(e1[0]), hi_int(e1[1])
    n_iter = K + 1 if kind == "trunc" else K
    Xl, Xh, El, Eh = [xl], [xh], [el], [eh]
    for _ in range(1, n_iter):
        pl, ph = Xl[-1], Xh[-1]
        El.append(El[-1] + ((pl * el) >> S))
        Eh.append(Eh[-1] - ((-ph * eh) >> S))
        Xl.append((pl * xl) >> S)
        Xh.append(-((-ph * xh) >> S))
    shift = S - 63
    top = (1 << 63) - 1
    out = []
    for k in range(1, K + 1):
        if kind == "geom":
            cl, ch, dlo, dhi = Xl[k - 1], Xh[k - 1], El[k - 1], Eh[k - 1]
        elif kind == "laplace":  # 2x^k / (1+x) and (1 - x^k + x (1 - x^(k-1))) / (1+x)
            cl = (2 * Xl[k - 1] << S) // (one + xh)
            ch = -((-2 * Xh[k - 1] << S) // (one + xl))
            nl = El[k - 1] + (0 if k == 1 else (xl * El[k - 2]) >> S)
            nh = Eh[k - 1] + (0 if k == 1 else -((-xh * Eh[k - 2]) >> S))
            dlo, dhi = (nl << S) // (one + xh), -((-nh << S) // (one + xl))
        else:  # trunc: x^k (1 - x^(b-k)) / (1 - x^b) and (1 - x^k) / (1 - x^b), b = K + 1
            ebl, ebh = El[K], Eh[K]
            num_lo = (Xl[k - 1] * El[K - k]) >> S  # floor of the product
            num_hi = -((-Xh[k - 1] * Eh[K - k]) >> S)  # ceiling of the product
            cl = (num_lo << S) // ebh
            ch = -((-num_hi << S) // ebl)
            dlo, dhi = (El[k - 1] << S) // ebh, -((-Eh[k - 1] << S) // ebl)
        a, b = max(cl, 0) >> shift, min(ch >> shift, top)
        if a == b:
            out.append(a)
            continue
        a, b = max(dlo, 0) >> shift, min(dhi >> shift, top)
        out.append(top - a if a == b else None)
    return out


class Table:
    """Exact sampler of ``N = #{k in 1..K : V < c_k}`` (see the module docstring)."""

    def __init__(self, kind: str, decay: Decay, K: int, tail: bool):
        self.kind, self.decay, self.K, self.tail = kind, decay, int(K), bool(tail)
        self.b = self.K + 1 if kind == "trunc" else None
        self._digit_cache: dict = {}
        self.t = self._thresholds()
        K = self.K
        # tt[m + 2] = t_(m+1), the threshold just below a count of m, and tt[m + 1] = t_m
        # the one just above, with sentinels: tt[1] is "c_0 = +inf" (v = 2**63-1 goes to the
        # exact path), tt[0] catches guesses below 0, and tt[K+2] sends a count of K to the
        # exact path when a tail must be drawn (and lets it pass otherwise).
        self.tt = np.empty(K + 3, dtype=np.int64)
        self.tt[0] = self.tt[1] = _INT63_MAX
        self.tt[2:K + 2] = self.t
        self.tt[K + 2] = _INT63_MAX if self.tail else -1
        self.t_asc = np.ascontiguousarray(self.t[::-1])
        self._t_list = self.t_asc.tolist()
        self._estimate_setup()

    # -- thresholds --------------------------------------------------------
    def _thresholds(self) -> np.ndarray:
        t = _fixed_point_thresholds(self.kind, self.decay, self.K)
        missing = [i for i, v in enumerate(t) if v is None]
        if missing:  # pragma: no cover - a threshold within ~2**-100 of a multiple of 2**-63
            prec = _P0 + len(str(self.K)) + int(_tiny_delta_bits(self.kind, self.decay.delta_bounds(_Iv(30))[0])
                                                * 0.302)
            while missing:
                rows = _rows(self.kind, self.decay, self.K, prec)
                iv = _Iv(prec + 10)
                for i in missing:
                    t[i] = _floor_scaled(rows[i], 63, iv)
                missing = [i for i in missing if t[i] is None]
                prec *= 2
        return np.array(t, dtype=np.int64)

    def floor_scaled(self, k: int, bits: int) -> int:
        """``floor(c_k · 2**bits)``, exactly."""
        key = (k, bits)
        if key not in self._digit_cache:
            extra = _tiny_delta_bits(self.kind, self.decay.delta_bounds(_Iv(30))[0])
            prec = _P0 + int((bits + extra) * 0.302) + len(str(self.K))
            while True:
                row = _rows(self.kind, self.decay, self.K, prec, upto=k)[k - 1]
                f = _floor_scaled(row, bits, _Iv(prec + 10))
                if f is not None:
                    break
                prec *= 2  # pragma: no cover
            self._digit_cache[key] = f
        return self._digit_cache[key]

    # -- the float guess -----------------------------------------------------
    def _estimate_setup(self):
        d = self.decay.delta
        # 1 / ln x, kept finite (and within float32) even if δ underflowed: only
        # one-entry tables have such δ, and their guess does not matter
        self.inv = -1.0 / max(d, 1e-30)
        if self.kind == "trunc":
            self.dtype = np.float64
            bd = self.b * d
            self.linear = bd < 1e-9
            self.a0, self.a1 = math.exp(-bd), -math.expm1(-bd)
        else:
            # float32 guesses are right often enough for short tables; long ones need float64
            self.dtype = np.float32 if self.K <= 4096 else np.float64
            self.lnA = math.log(2.0) - math.log1p(math.exp(-d)) if self.kind == "laplace" else 0.0

    def _guess(self, f):
        """In place: from ``v`` (as a float) in ``f``, the guessed count + 2 (an index into ``tt``)."""
        f *= f.dtype.type(2.0 ** -63)  # V (scaling first keeps ln V accurate where |ln V| is small)
        if self.kind == "trunc":
            if self.linear:  # digits are nearly uniform: count ≈ b (1 - V)
                np.subtract(1.0, f, out=f)
                f *= self.b
            else:
                f *= self.a1
                f += self.a0
                np.log(f, out=f)
                f *= self.inv
        else:
            np.log(f, out=f)
            if self.lnA:
                f -= self.dtype(self.lnA)
            f *= self.dtype(self.inv)
        np.ceil(f, out=f)
        f += 1
        np.minimum(f, self.dtype(self.K + 2), out=f)  # also maps +inf (v = 0); below 0 is clipped by take

    # -- counting ------------------------------------------------------------
    def count_words(self, w: np.ndarray, out: np.ndarray, source, scratch=None) -> None:
        """Counts for the uniforms of the words ``w`` (top 63 bits), written to ``out`` (int64)."""
        n = w.size
        if n <= SMALL:
            out[...] = self._count_small(w, source)
            return
        if scratch is None:
            scratch = _Scratch(n)
        vb, gb, ok, tmp = scratch.vb[:n], scratch.gb[:n], scratch.ok[:n], scratch.tmp[:n]
        f = scratch.f32[:n] if self.dtype is np.float32 else scratch.f64[:n]
        np.right_shift(w, np.uint64(1), out=vb)
        v = vb.view(np.int64)
        f[...] = v
        with np.errstate(divide="ignore"):
            self._guess(f)
        out[...] = f  # index of t_(m+1) in tt for the guessed count m
        np.take(self.tt, out, out=gb, mode="clip")
        np.less(gb, v, out=ok)  # t_(m+1) < v: V > c_(m+1)
        out -= 1
        np.take(self.tt, out, out=gb, mode="clip")
        np.greater(gb, v, out=tmp)  # t_m > v: V < c_m
        ok &= tmp
        out -= 1  # the count m
        if not ok.all():
            bad = np.flatnonzero(~ok)
            out[bad] = self.exact_counts(v[bad], source)

    def _count_small(self, w: np.ndarray, source) -> list:
        """The same counts for a few words, in plain Python (no per-call numpy overhead)."""
        t_asc, K = self._t_list, self.K
        out = []
        for word in w.tolist():
            v = word >> 1
            right = bisect.bisect_right(t_asc, v)
            n = K - right
            n_eq = right - bisect.bisect_left(t_asc, v)
            if n_eq:
                n += self._resolve(v, n + 1, n_eq, source)
            if n == K and self.tail:
                n += int(geometric(self.decay, 1, source, cap=VALUE_CAP - K)[0])
                if n >= VALUE_CAP:
                    raise OverflowError("a noise value reached 2**62 (probability below 1e-1000); draw again")
            out.append(n)
        return out

    def exact_counts(self, v: np.ndarray, source) -> np.ndarray:
        """Counts for 63-bit integers ``v`` by binary search, the equality fallback and the tail."""
        v = np.asarray(v, dtype=np.int64)
        right = np.searchsorted(self.t_asc, v, side="right")
        left = np.searchsorted(self.t_asc, v, side="left")
        cnt = (self.K - right).astype(np.int64)  # #{k : t_k > v}
        for i in np.flatnonzero(right > left):  # v == t_k for some k: compare further bits
            cnt[i] += self._resolve(int(v[i]), int(cnt[i]) + 1, int(right[i] - left[i]), source)
        if self.tail:
            at = np.flatnonzero(cnt == self.K)
            if at.size:
                cnt[at] += geometric(self.decay, at.size, source, cap=VALUE_CAP - self.K)
                if int(cnt[at].max()) >= VALUE_CAP:
                    raise OverflowError("a noise value reached 2**62 (probability below 1e-1000); draw again")
        return cnt

    def _resolve(self, v: int, k0: int, n_eq: int, source) -> int:
        """How many of ``c_k0 > c_k0+1 > ...`` (all with ``t_k == v``) exceed ``V = (v + W) / 2**63``."""
        words: list[int] = []

        def below(k):  # V < c_k ?
            prefix = v
            j = 0
            while True:
                j += 1
                if len(words) < j:
                    words.append(source.word())
                prefix = (prefix << 64) | words[j - 1]  # floor(V · 2**(63 + 64 j))
                f = self.floor_scaled(k, 63 + 64 * j)
                if prefix != f:
                    return prefix < f

        n = 0
        for k in range(k0, k0 + n_eq):
            if not below(k):
                break
            n += 1
        return n

    def sample(self, n: int, source) -> np.ndarray:
        """``n`` independent counts (fresh words)."""
        if n <= SMALL:
            return np.array(self._count_small(source.words(n), source), dtype=np.int64)
        out = np.empty(int(n), dtype=np.int64)
        scratch = _Scratch(min(int(n), CHUNK))
        for s in range(0, out.size, CHUNK):
            e = min(out.size, s + CHUNK)
            w = scratch.w[:e - s]
            source.fill(w)
            self.count_words(w, out[s:e], source, scratch)
        return out


class _Scratch:
    def __init__(self, n):
        n = max(int(n), 1)
        self.w = np.empty(n, dtype=np.uint64)
        self.vb = np.empty(n, dtype=np.uint64)
        self.gb = np.empty(n, dtype=np.int64)
        self.f32 = np.empty(n, dtype=np.float32)
        self.f64 = np.empty(n, dtype=np.float64)
        self.ok = np.empty(n, dtype=bool)
        self.tmp = np.empty(n, dtype=bool)


@functools.lru_cache(maxsize=256)
def table(kind: str, decay: Decay, K: int, tail: bool) -> Table:
    return Table(kind, decay, K, tail)


def coverage(delta: float) -> int:
    """Entries a table needs to leave at most ``2**-40`` of a geometric's mass to its tail."""
    return max(1, math.ceil(COVER / delta))


# ---------------------------------------------------------------------------
# samplers built from tables
# ---------------------------------------------------------------------------


def geometric(decay: Decay, n: int, source, cap: int = VALUE_CAP) -> np.ndarray:
    """``min(G, cap)`` for ``n`` i.i.d. ``G`` with ``Pr[G >= k] = x**k`` (int64)."""
    n, cap = int(n), int(cap)
    if decay.delta >= DELTA_MIN:
        g = table("geom", decay, coverage(decay.delta), True).sample(n, source)
        return np.minimum(g, cap)
    b = DIGIT_BASE
    L = 1
    while decay.delta * b ** L < DELTA_MIN and b ** L < cap:
        L += 1
    capped = np.zeros(n, dtype=bool)
    acc = np.zeros(n, dtype=np.int64)
    top = decay.power(b ** L)
    if b ** L >= cap:  # only "W >= 1", i.e. G >= b**L >= cap, matters
        capped |= table("geom", top, 1, False).sample(n, source) > 0
    else:
        w = geometric(top, n, source, cap=cap // b ** L + 1)
        capped |= w > cap // b ** L
        acc += np.minimum(w, cap // b ** L) * b ** L
    for i in range(L - 1, -1, -1):  # digits, most significant first
        r = table("trunc", decay.power(b ** i), b - 1, False).sample(n, source)
        room = (cap - acc) // b ** i
        capped |= r > room
        acc += np.minimum(r, room) * b ** i
    acc[capped] = cap
    return np.minimum(acc, cap)


def laplace(r: Fraction, n: int, source) -> np.ndarray:
    """``n`` i.i.d. discrete Laplace values with ``Pr[Z = z] ∝ exp(-r |z|)`` (int64)."""
    dec = decay(r)
    K = coverage(dec.delta) if dec.delta >= DELTA_MIN else 1
    tab = table("laplace", dec, K, True)
    if n <= SMALL:
        w = source.words(n)
        mag = tab._count_small(w, source)
        return np.array([-m if word & 1 else m for m, word in zip(mag, w.tolist())], dtype=np.int64)
    out = np.empty(int(n), dtype=np.int64)
    scratch = _Scratch(min(out.size, CHUNK))
    one = np.uint64(1)
    for s in range(0, out.size, CHUNK):
        e = min(out.size, s + CHUNK)
        w = scratch.w[:e - s]
        source.fill(w)
        o = out[s:e]
        tab.count_words(w, o, source, scratch)  # |Z| from the top 63 bits
        sign = scratch.vb[:e - s]
        np.bitwise_and(w, one, out=sign)  # the sign from the lowest bit
        neg = sign.view(np.int64)
        np.negative(neg, out=neg)  # 0 or -1
        np.bitwise_xor(o, neg, out=o)
        o -= neg  # two's complement: -|Z| where the bit is 1
    return out
