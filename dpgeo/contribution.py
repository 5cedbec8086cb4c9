"""Bounding each person's contribution: at most K points per person.

DP guarantees are stated for a *neighbouring relation*. By default dpgeo's
is "add or remove one record" with a record holding at most
``sensitivity`` points. When the data holds several records per person
(trips of one driver, visits of one patient), the guarantee that matters is
per **person**. Given a column that identifies the person of each point,
:func:`cap_per_person` keeps at most ``K`` of each person's points, chosen
uniformly at random with the mechanism's noise source, and the histogram
is then released with L1 sensitivity ``K``.

Why this is enough: give every point an independent random key and keep, for
each person, the ``K`` points with the smallest keys. Adding one person
leaves the keys, and hence the kept points, of everybody else unchanged in
distribution, and adds at most ``K`` kept points. Coupling the keys of the
shared points, the capped data sets differ by at most ``K`` points, so a
histogram with sensitivity ``K`` is ε-DP with respect to adding or removing
one person (see ``docs/privacy.md``).

The keys are uniform 64-bit words from the mechanism's
:class:`~dpgeo.noise.NoiseSource` (a cryptographically secure stream). Two
keys of one person are equal with probability ``2**-64`` per pair; ties are
broken by the points' order in the input. That keeps the selection a
function of the person's own points and keys (all the proof needs); it only
means the choice is uniform up to that ``2**-64``-per-pair event.
"""

from __future__ import annotations

import numpy as np

from .errors import ParameterError
from .counting.reservoir import keep_smallest_keys
from .randomness import as_source

__all__ = ["cap_per_person"]


def cap_per_person(person, max_points: int, rng) -> np.ndarray:
    """Boolean mask keeping at most ``max_points`` points of each person, uniformly at random.

    Parameters
    ----------
    person : array_like
        Identifier of the person of each point (any hashable values; no missing values).
    max_points : int
        ``K >= 1``: the most points any one person may contribute.
    rng : dpgeo.noise.NoiseSource
        The mechanism's noise source (a numpy Generator is accepted for
        experiments; the output is then not private).

    Returns
    -------
    numpy.ndarray
        ``bool`` mask, ``True`` for the points kept.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.noise import NoiseSource
    >>> keep = cap_per_person(["a", "a", "a", "b"], 2, NoiseSource(seed=0))
    >>> int(keep[:3].sum()), bool(keep[3])
    (2, True)
    """
    import pandas as pd

    if isinstance(max_points, bool) or not isinstance(max_points, (int, np.integer)) or max_points < 1:
        raise ParameterError(f"max_points_per_person must be an integer >= 1, got {max_points!r}")
    codes, _ = pd.factorize(np.asarray(person), use_na_sentinel=True)
    if (codes < 0).any():
        raise ParameterError("person identifiers must not be missing; drop those points first")
    n = codes.size
    if n == 0:
        return np.zeros(0, dtype=bool)
    keys = as_source(rng).words(n)  # uniform 64-bit keys; ties (2**-64 per pair) keep input order
    return keep_smallest_keys(codes, keys, max_points)
