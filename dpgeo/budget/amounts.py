"""Exact amounts of ε and δ (rationals, never floats) and the checked names the ledger stores."""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction

from ..errors import ParameterError

__all__ = ["exact_value", "format_exact"]


def exact_value(value, name="epsilon") -> Fraction:
    """``value`` as an exact rational: a float as the decimal it prints as (``0.1`` → 1/10).

    Accepts int, float, ``decimal.Decimal``, ``fractions.Fraction`` and
    strings such as ``"0.1"`` or ``"1/3"``. This is what the ledger charges;
    the noise of a release spends at most this much
    (`dpgeo.noise.noise_epsilon`, which stays at or below the decimal).

    Examples
    --------
    >>> exact_value(0.1) * 10 == 1
    True
    >>> exact_value("1/3")
    Fraction(1, 3)
    """
    if isinstance(value, bool):
        raise ParameterError(f"{name} must be a number, got {value!r}")
    try:
        if isinstance(value, Fraction):
            out = value
        elif isinstance(value, numbers.Integral):
            out = Fraction(int(value))
        elif isinstance(value, (Decimal, str)):
            out = Fraction(value.strip() if isinstance(value, str) else value)
        elif isinstance(value, numbers.Real):
            f = float(value)
            if not math.isfinite(f):
                raise ValueError
            out = Fraction(repr(f))
        else:
            raise TypeError
    except (ValueError, TypeError, ArithmeticError, OverflowError):
        raise ParameterError(f"{name} must be a finite number, got {value!r}") from None
    return out


def format_exact(value) -> str:
    """An exact rational as the shortest decimal that equals it, or ``p/q`` when there is none.

    Examples
    --------
    >>> format_exact(Fraction(3, 10)), format_exact(Fraction(2)), format_exact(Fraction(1, 3))
    ('0.3', '2', '1/3')
    >>> format_exact(Fraction(10) ** 400), format_exact(Fraction(-15, 10 ** 31))
    ('1e400', '-1.5e-30')
    """
    f = Fraction(value)
    d, twos, fives = f.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    if d != 1 or max(twos, fives) > 400:
        return f"{f.numerator}/{f.denominator}"
    digits = max(twos, fives)  # f == n / 10**digits exactly
    n = abs(f.numerator) * 10 ** digits // f.denominator
    sign = "-" if f < 0 else ""
    if digits == 0:
        plain = str(n)
    else:
        s = f"{n:0{digits + 1}d}"
        plain = (s[:-digits] + "." + s[-digits:]).rstrip("0").rstrip(".")
    if len(plain) <= 24 or n == 0:
        return sign + plain
    while n % 10 == 0:  # the same value in scientific notation, exactly: n * 10**-digits
        n, digits = n // 10, digits - 1
    m = str(n)
    return f"{sign}{m[0]}{'.' + m[1:] if len(m) > 1 else ''}e{len(m) - 1 - digits}"


def _check_name(value, what):
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(f"{what} must be a non-empty string, got {value!r}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value) or len(value) > 4096:
        raise ParameterError(f"{what} must be one line of at most 4096 characters without control characters")
    return value
