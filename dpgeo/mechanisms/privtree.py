"""PrivTree on a public quadtree of grid blocks, with exact discrete noise (an experimental resolution).

Zhang, Xiao & Xie (SIGMOD 2016) split a node of a quadtree while its *biased*
noisy count exceeds a threshold; the bias grows with the depth, so that the
privacy cost of all split decisions does not grow with the depth. Here the
quadtree is over the blocks of a public grid (the finest grid of the map,
``G_f``): the roots are public blocks ``2**depth`` cells of ``G_f`` wide, and a
block of one ``G_f`` cell is never split (a public depth limit). The leaves
partition the grid; each gets a noisy count of its own.

Privacy (pure ε-DP with discrete noise on integer counts)
---------------------------------------------------------
Decision of node ``v`` at depth ``d`` (roots at 0) with exact count ``c(v)``:

    x(v) = c(v) - d·δ,   b(v) = max(θ - δ, x(v)),   split  ⇔  b(v) + Z_v > θ,

with ``θ`` and ``δ`` integers, ``Z_v`` discrete Laplace ``Pr[Z=z] ∝ p**|z|``,
``p = exp(-1/λ)``, independent per node, ``λ`` and ``δ`` public with
``δ ≥ λ·ln β`` (``β = 4`` children) and ``(1/λ)·(2β-1)/(β-1) ≤ ε_tree``.
Everything is an integer, so ``b(v)`` is an integer and adding one record
raises it by 0 or 1.

Let ``D' = D ∪ {r}`` and ``T`` any output tree. Nodes off ``r``'s path in
``T`` have the same law. On the path ``v_1 … v_k`` (root to the leaf holding
``r``), ``v_1 … v_{k-1}`` are split and ``v_k`` is not.

* ``Pr[T|D] / Pr[T|D']``: a split is less likely under ``D`` (ratio ≤ 1); the
  leaf ``v_k`` is not split, ratio ``Pr[Z ≤ θ-b]/Pr[Z ≤ θ-b-1] ≤ 1/p = e^{1/λ}``.
* ``Pr[T|D'] / Pr[T|D]``: the leaf gives ratio ≤ 1. A split node with
  ``x ≤ θ-δ-1`` has ``b' = b = θ-δ`` (loss 0). Otherwise ``b' = b + 1`` and the
  loss is ``ρ(b) = ln Pr[Z > θ-b-1] / Pr[Z > θ-b]``. For the discrete law,
  ``Pr[Z ≥ k-1]/Pr[Z ≥ k] ≤ 1/p`` for every integer ``k`` (equality for
  ``k ≥ 1``), so ``ρ ≤ 1/λ`` always; and for ``u = b - θ ≥ 1``,
  ``Pr[Z ≤ -u] = p**u/(1+p)``, so
  ``ρ(b) = ln(1 + p**u(1-p)/(1+p-p**u)) ≤ p**u(1-p) ≤ e^{-u/λ}/λ`` (as
  ``1+p-p**u ≥ 1`` and ``1-p ≤ 1/λ``); at ``u = 0`` the general bound is
  ``1/λ = e^0/λ``. Counts do not grow down the path and the depth grows by
  one, so ``x(v_{i+1}) ≤ x(v_i) - δ``. The nodes with loss and ``x < θ`` have
  ``x`` in the ``δ`` integers ``θ-δ … θ-1``: at most one, loss ≤ ``1/λ``. Those
  with ``x ≥ θ`` have distinct ``x ≥ θ, θ+δ, θ+2δ, …`` (at most one per step),
  loss ≤ ``(1/λ)·Σ_j e^{-jδ/λ} ≤ (1/λ)·β/(β-1)`` as ``e^{-δ/λ} ≤ 1/β``.
  In all ``(1/λ)(1 + β/(β-1)) = (1/λ)(2β-1)/(β-1) ≤ ε_tree``.

So the tree is ``ε_tree``-DP (δ = 0 in the sense of approximate DP) for records
of one point (sensitivity 1; a record of several points is not covered: the
band ``θ-δ … θ-1`` could then hold two nodes). The depth limit and the roots
are public; a node at the limit is a leaf whatever the data (ratio 1). The
leaves partition the grid, so one record changes one leaf count by one: the
leaf counts with discrete Laplace noise of ``ε_leaf`` are ``ε_leaf``-DP, and
the whole release ``ε_tree + ε_leaf`` (sequential composition).

Status: an experiment (``resolution="privtree"`` of
:func:`dpgeo.mechanisms.auto.auto_spans_cells`), off by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import ParameterError
from ..grid import Grid
from ..noise import float_at_most, noise_epsilon, noise_rate, sample_discrete_laplace

__all__ = ["BRANCHING", "PrivTreeLeaves", "privtree_leaves", "privtree_noise", "rasterise_leaves",
           "release_leaf_counts"]

#: Children of a node (a quadtree).
BRANCHING = 4


@dataclass
class PrivTreeLeaves:
    """The released decomposition: each ``G_f`` cell's leaf and each leaf's noisy count (public).

    Attributes
    ----------
    leaf_of_cell : numpy.ndarray
        ``(ny, nx)`` int64: the leaf of every cell of the grid.
    leaf_depth, leaf_cells : numpy.ndarray
        Per leaf: depth (0 = root block) and number of grid cells it covers.
    leaf_count : numpy.ndarray or None
        Per leaf: noisy count (None before the counts are released).
    theta, bias, noise_epsilon_node : int, int, float
        The split threshold, the bias per depth ``δ`` and the ε per unit of
        the decisions' noise (``1/λ``).
    """

    leaf_of_cell: np.ndarray
    leaf_depth: np.ndarray
    leaf_cells: np.ndarray
    leaf_count: np.ndarray | None
    theta: int
    bias: int
    noise_epsilon_node: float


def privtree_noise(epsilon_tree: float) -> tuple[float, int]:
    """``(ε_node, δ)``: the decisions' noise ``1/λ`` and the integer bias per depth for a tree budget ``ε_tree``.

    ``ε_node ≤ ε_tree·(β-1)/(2β-1)`` exactly (as rationals) and ``δ ≥ λ·ln β``
    for the ``λ`` the sampler realises.

    Examples
    --------
    >>> e, d = privtree_noise(0.3)
    >>> round(e, 6), d
    (0.128571, 11)
    """
    f = noise_epsilon(epsilon_tree) * Fraction(BRANCHING - 1, 2 * BRANCHING - 1)
    e_node = float_at_most(f)
    rate = noise_rate(e_node, 1)  # the ε per unit the sampler realises (≤ f)
    bias = math.ceil(math.log(BRANCHING) / float(rate) * (1 + 1e-12))
    return e_node, int(bias)


def privtree_leaves(grid: Grid, cell_id: np.ndarray, count: np.ndarray, *, depth: int, epsilon_tree: float,
                    theta: int, rng) -> PrivTreeLeaves:
    """The PrivTree decomposition of ``grid`` (ε_tree-DP; the proof is in the module's docstring).

    Parameters
    ----------
    grid : Grid
        The finest grid ``G_f``; roots are blocks ``2**depth`` of its cells wide.
    cell_id, count : numpy.ndarray
        Exact counts of its non-empty cells — **private** (one point per record).
    depth : int
        Public depth limit (levels below the roots).
    epsilon_tree : float
        Budget of all split decisions.
    theta : int
        Split threshold (public).
    rng : NoiseSource
    """
    if depth < 0:
        raise ParameterError(f"depth must be >= 0, got {depth}")
    e_node, bias = privtree_noise(epsilon_tree)
    theta = int(theta)
    nx, ny = grid.nx, grid.ny
    ix, iy = grid.cell_xy(cell_id)
    count = np.asarray(count, dtype=np.int64)
    s0 = 1 << depth
    nbx, nby = -(-nx // s0), -(-ny // s0)
    active = np.ones((nby, nbx), dtype=bool)  # every root block decides, empty or not
    leaf_depth_cell = np.full((nby << depth, nbx << depth), -1, dtype=np.int64)
    for d in range(depth + 1):
        shift = depth - d
        h, w = nby << d, nbx << d
        c = np.bincount((iy >> shift) * w + (ix >> shift), weights=count, minlength=h * w)
        c = np.rint(c).astype(np.int64).reshape(h, w)
        if d < depth:
            b = np.maximum(theta - bias, c - d * bias)
            idx = np.flatnonzero(active)
            z = sample_discrete_laplace(rng, idx.size, epsilon=e_node)
            split = np.zeros(h * w, dtype=bool)
            split[idx] = b.ravel()[idx] + z > theta
            split = split.reshape(h, w)
        else:
            split = np.zeros((h, w), dtype=bool)
        leaf = active & ~split
        block = np.kron(leaf, np.ones((1 << shift, 1 << shift), dtype=bool))
        leaf_depth_cell[block] = d
        active = np.repeat(np.repeat(split, 2, axis=0), 2, axis=1)
    leaf_depth_cell = leaf_depth_cell[:ny, :nx]
    # a leaf's key: (depth, block row, block column), as one integer per cell
    jy, jx = np.indices((ny, nx))
    shift = depth - leaf_depth_cell
    w_d = nbx << leaf_depth_cell
    offset = np.cumsum([0] + [(nby << d) * (nbx << d) for d in range(depth + 1)])
    key = offset[leaf_depth_cell] + (jy >> shift) * w_d + (jx >> shift)
    uk, leaf_of_cell = np.unique(key.ravel(), return_inverse=True)
    leaf_of_cell = leaf_of_cell.reshape(ny, nx).astype(np.int64)
    leaf_cells = np.bincount(leaf_of_cell.ravel(), minlength=uk.size)
    depth_of_leaf = np.zeros(uk.size, dtype=np.int64)
    depth_of_leaf[leaf_of_cell.ravel()] = leaf_depth_cell.ravel()
    return PrivTreeLeaves(leaf_of_cell, depth_of_leaf, leaf_cells, None, theta, bias, e_node)


def release_leaf_counts(leaves: PrivTreeLeaves, grid: Grid, cell_id, count, *, epsilon: float, rng) -> PrivTreeLeaves:
    """Noisy leaf counts (ε-DP: the leaves partition the grid, so one point changes one count by one)."""
    ix, iy = grid.cell_xy(cell_id)
    exact = np.bincount(leaves.leaf_of_cell[iy, ix], weights=np.asarray(count, dtype=np.float64),
                        minlength=leaves.leaf_cells.size)
    noisy = np.rint(exact).astype(np.int64) + sample_discrete_laplace(rng, leaves.leaf_cells.size, epsilon=epsilon)
    leaves.leaf_count = noisy
    return leaves


def _bit_reversed_morton(jx: np.ndarray, jy: np.ndarray, bits: int) -> np.ndarray:
    """Rank of a cell in an ordered dither: the bits of its Morton code reversed (spreads a remainder evenly)."""
    code = np.zeros(jx.shape, dtype=np.int64)
    for k in range(bits):
        code |= ((jx >> k) & 1) << (2 * k)
        code |= ((jy >> k) & 1) << (2 * k + 1)
    rev = np.zeros_like(code)
    for k in range(2 * bits):
        rev |= ((code >> k) & 1) << (2 * bits - 1 - k)
    return rev


def rasterise_leaves(leaves: PrivTreeLeaves, depth: int) -> np.ndarray:
    """``(ny, nx)`` int64 cell values whose sum over each leaf is its noisy count, spread as evenly as integers allow.

    Each cell gets ``⌊c/A⌋`` and the ``c mod A`` cells first in an ordered dither
    (bit-reversed Morton order) one more. Post-processing of the release.
    """
    lc = leaves.leaf_of_cell
    ny, nx = lc.shape
    jy, jx = np.indices((ny, nx))
    rank_key = _bit_reversed_morton(jx & ((1 << depth) - 1), jy & ((1 << depth) - 1), depth)
    flat_leaf = lc.ravel()
    order = np.lexsort((rank_key.ravel(), flat_leaf))
    start = np.r_[0, np.cumsum(leaves.leaf_cells)[:-1]]
    rank = np.empty(flat_leaf.size, dtype=np.int64)
    rank[order] = np.arange(flat_leaf.size) - start[flat_leaf[order]]
    c = leaves.leaf_count[flat_leaf]
    a = leaves.leaf_cells[flat_leaf]
    val = c // a + (rank < c % a)
    return val.reshape(ny, nx)
