"""Density levels (dpgeo.mechanisms.levels): the tree of every threshold, the FDR floor, the chosen clusters."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage

from dpgeo.domain import StudyArea
from dpgeo.errors import ParameterError
from dpgeo.grid import Grid
from dpgeo.histogram import NoisyHistogram, dense_histogram
from dpgeo.mechanisms import level_floor, level_tree, levels
from dpgeo.mechanisms.levels import (
    box_sums,
    build_level_tree,
    density_levels,
    fdr_cells,
    select_clusters,
)
from dpgeo.noise import NoiseSource, sum_sf

CRS = "EPSG:32615"


def _grid(nx, ny, w=10.0):
    return Grid(StudyArea.from_bbox((0, 0, nx * w, ny * w), CRS, working_crs=CRS), w)


def _components_from_tree(tree, j):
    """Partition of the cells present at threshold index j, read off the tree (cell -> component node)."""
    present = np.searchsorted(tree.thresholds, tree.value, side="right") - 1 >= j
    nodes = tree.cell_node[present].copy()
    parent, level = tree.node_parent, tree.node_level
    while True:  # climb while the parent still exists at threshold j
        p = parent[nodes]
        up = (p >= 0) & (level[np.maximum(p, 0)] >= j)
        if not up.any():
            return present, nodes
        nodes[up] = p[up]


def _same_partition(a, b):
    """Two labelings of the same items describe the same partition."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.integers(2, 9), st.integers(0, 2**31 - 1))
def test_tree_gives_the_components_of_every_threshold(nx, ny, seed):
    """At every threshold, the tree's components are the 8-connected components of {S >= t} (scipy.ndimage)."""
    rng = np.random.default_rng(seed)
    g = _grid(nx, ny)
    values = rng.integers(0, 12, nx * ny)
    keep = rng.random(nx * ny) < 0.8
    cells = np.flatnonzero(keep)
    tree = build_level_tree(g, cells, values[cells], np.ones(cells.size, dtype=np.int64))
    for j, t in enumerate(tree.thresholds.tolist()):
        mask = np.zeros(nx * ny, dtype=bool)
        mask[cells[values[cells] >= t]] = True
        lab, _ = ndimage.label(mask.reshape(ny, nx), structure=np.ones((3, 3)))
        present, nodes = _components_from_tree(tree, j)
        assert np.array_equal(np.sort(cells[present]), np.flatnonzero(mask))
        assert _same_partition(nodes, lab.ravel()[cells[present]])


def test_tree_of_two_peaks():
    g = _grid(5, 1)
    t = build_level_tree(g, np.arange(5), np.array([9, 3, 2, 5, 7]), np.ones(5, dtype=np.int64))
    assert t.thresholds.tolist() == [2, 3, 5, 7, 9]
    # two peaks born at 9 and 7, merged at 2 into the root
    assert t.node_parent.tolist() == [2, 2, -1]
    assert t.thresholds[t.node_level].tolist() == [9, 7, 2]


def test_thresholds_are_all_values_or_a_geometric_grid():
    vals = np.arange(1, 2000)
    t = level_tree._thresholds(vals, 100)
    assert t[0] == 1 and t[-1] <= 1999 and 50 <= t.size <= 100 and np.all(np.diff(t) > 0)
    assert level_tree._thresholds(np.array([5, 3, 5, 9]), 100).tolist() == [3, 5, 9]


def test_select_two_bumps_and_their_extents():
    g = _grid(7, 1)
    v = np.array([30, 60, 30, 12, 30, 50, 30])
    t = build_level_tree(g, np.arange(7), v, np.array([5, 20, 5, 1, 5, 15, 5]))
    core = select_clusters(t, min_mass=10, min_prominence=5, extent="core")
    grown = select_clusters(t, min_mass=10, min_prominence=5, extent="grown")
    assert core.cell_id.tolist() == [0, 1, 2, 4, 5, 6] and core.label.tolist() == [1, 1, 1, 2, 2, 2]
    # the saddle cell would join them: it is left out, so that no two clusters are neighbours
    assert grown.cell_id.tolist() == [0, 1, 2, 4, 5, 6]
    assert grown.label.tolist() == [1, 1, 1, 2, 2, 2]
    # too small, or not prominent enough: one cluster (the single component at the floor)
    assert select_clusters(t, min_mass=10, min_prominence=40, extent="core").n_clusters == 1
    assert select_clusters(t, min_mass=28, min_prominence=5, extent="core").n_clusters == 1
    assert select_clusters(t, min_mass=60, min_prominence=5, extent="core").n_clusters == 0  # nothing big enough


RIDGE = {"ridge_elongation": 6.0, "ridge_alignment": 0.87, "ridge_min_length_cells": 6.0, "ridge_dip_ratio": 1.0,
         "ridge_dip_z": 2.0, "ridge_blob_elongation": 4.0}


def test_the_ridge_constants_are_the_defaults():
    assert RIDGE == {k: getattr(levels, k.upper()) for k in RIDGE}


def _row_ridge(dip):
    """A ridge one cell high and 30 long: 100 on each side, ``dip`` in its middle two cells."""
    g = _grid(30, 1)
    v = np.r_[np.full(14, 100) + np.arange(14) % 3, [dip, dip], np.full(14, 100) + np.arange(14) % 2]
    return build_level_tree(g, np.arange(30), v, np.full(30, 10))


def test_the_ridge_rule_keeps_a_ridge_whole_unless_it_falls_to_half():
    """The halves of a row of cells are 14 cells long and one wide, end to end: a dip to 60 is one cluster
    under the ridge rule (100 less 1.5 s.d. is not twice 60 plus 1.5 s.d.) and two without it (the dip rule
    for every branch: 40 above the split, more than a quarter of it and two of its s.d.); a dip to 20 is two
    either way."""
    kw = dict(min_mass=10, min_prominence=5, extent="core", noise_sd=1.0, dip_ratio=0.25, dip_z=2.0)
    assert select_clusters(_row_ridge(60), **kw, **RIDGE).n_clusters == 1
    assert select_clusters(_row_ridge(60), **kw).n_clusters == 2
    assert select_clusters(_row_ridge(20), **kw, **RIDGE).n_clusters == 2


def _row_of_blobs(centres, peak=100, sd_cells=1.6):
    """Round Gaussian bumps in a row along x (their 3×3 sums, as the tree reads them), on 30 × 9 cells."""
    x, y = np.meshgrid(np.arange(30), np.arange(9))
    v = np.rint(sum(peak * np.exp(-((x - c) ** 2 + (y - 4) ** 2) / (2 * sd_cells ** 2)) for c in centres))
    v = v.astype(np.int64).ravel()
    ids = np.flatnonzero(v >= 5)
    return build_level_tree(_grid(30, 9), ids, v[ids], np.maximum(v[ids] // 5, 1))


def test_a_row_of_round_blobs_is_not_a_ridge():
    """Three round bumps of 100 in a row, 6 and 6.5 cells apart (valleys 34 and 26), with a noise s.d. of 10
    (few points): the first two, joined at 34, are a branch long and thin in line with the third, and the
    ridge rule alone (100 less 1.5 s.d. is not twice 26 plus 1.5 s.d.) keeps it from counting, so the
    third bump has no significant sibling and the three are read as two clusters. The pair splits into
    two round branches, each significant by the dip rule: a row of blobs, not a ridge, held to the dip rule
    of round branches — three clusters, as without the ridge rule."""
    t = _row_of_blobs([5, 11, 17.5])
    kw = dict(min_mass=10, min_prominence=5, extent="core", noise_sd=10.0, dip_ratio=0.25, dip_z=1.0)
    assert select_clusters(t, **kw).n_clusters == 3
    assert select_clusters(t, **kw, **{**RIDGE, "ridge_blob_elongation": None}).n_clusters == 2
    assert select_clusters(t, **kw, **RIDGE).n_clusters == 3


def test_two_parallel_ridges_are_not_one_ridge():
    """Two rows of 20 cells two rows apart, joined by one cell of 30: each row is long and thin but lies
    beside the other, not along it, so the dip rule for every branch decides and they are two clusters;
    without the alignment test they would be read as one ridge and joined."""
    g = _grid(20, 3)
    ids = np.r_[np.arange(20), [30], 40 + np.arange(20)]  # rows y = 0 and y = 2, and the cell (10, 1)
    v = np.r_[np.full(20, 100), [30], np.full(20, 100) + np.arange(20) % 2]
    t = build_level_tree(g, ids, v, np.full(ids.size, 10))
    kw = dict(min_mass=10, min_prominence=5, extent="core", noise_sd=1.0, dip_ratio=0.25, dip_z=2.0)
    assert select_clusters(t, **kw, **RIDGE).n_clusters == 2
    assert select_clusters(t, **kw, **{**RIDGE, "ridge_alignment": None}).n_clusters == 1


def _two_plateaus(level, peak, band=95):
    """Two flat squares of 10 × 10 cells at ``level`` with one cell at ``peak`` each, joined by a column of
    cells at ``band`` (a 21 × 10 grid; the values are the 3×3 sums the tree reads)."""
    v = np.full((10, 21), level, dtype=np.int64)
    v[:, 10] = band
    v[5, 4] = v[4, 16] = peak
    return build_level_tree(_grid(21, 10), np.arange(210), v.ravel(), np.full(210, 10))


def test_the_highest_of_many_correction_reads_a_flat_shape_as_one():
    """Two flat squares of 100 cells at 100 whose highest cells reach 112, joined at 95 (noise s.d. 5: the
    split level's s.d. is √(25 + 95) ≈ 11): the dip rule read on the peaks sees 17 above the split, 1.6 s.d.,
    and cuts the shape in two; the highest of a branch's 100 / 9 ≈ 11 independent sums lies 1.58 s.d. above
    their mean by noise alone (Blom), so with the correction the branch must rise 2.58 s.d. (28), and its
    mean (100.1, 0.47 s.d. above the split) does not rise 0.75 s.d.: one cluster. Two squares at 110 (mean
    1.4 s.d. above the split) are two clusters with the correction as without it, and so is the old rule's
    reading of the flat squares (``dip_max_correction=0``). The floor lies at 50 (the shape stands on it)."""
    kw = dict(min_mass=10, min_prominence=5, extent="core", noise_sd=5.0, dip_ratio=0.0, dip_z=1.0, base_level=50)
    on = dict(dip_max_correction=1.0, dip_mean_z=0.75)
    assert select_clusters(_two_plateaus(100, 112), **kw).n_clusters == 2
    assert select_clusters(_two_plateaus(100, 112), **kw, **on).n_clusters == 1
    assert select_clusters(_two_plateaus(110, 115), **kw, **on).n_clusters == 2


def test_the_highest_of_many_correction_leaves_small_branches_and_is_off_by_default():
    """A branch of 9 cells or fewer is one sum's worth: read as before (the bumps of
    :func:`test_select_two_bumps_and_their_extents`); the constants are the defaults of the mechanism, the
    correction off (0: the rule before), its mean test at the generated sets' choice."""
    import inspect

    from dpgeo.mechanisms import auto

    g = _grid(7, 1)
    t = build_level_tree(g, np.arange(7), np.array([30, 60, 30, 12, 30, 50, 30]), np.array([5, 20, 5, 1, 5, 15, 5]))
    kw = dict(min_mass=10, min_prominence=5, extent="core", noise_sd=1.0, dip_z=1.0)
    assert select_clusters(t, **kw, dip_max_correction=1.0, dip_mean_z=10.0).n_clusters == 2
    assert (levels.DIP_MAX_CORRECTION, levels.DIP_MEAN_Z) == (0.0, 0.75)
    for f in (density_levels, auto.auto_spans_cells):
        p = inspect.signature(f).parameters
        assert (p["dip_max_correction"].default, p["dip_mean_z"].default) == (0.0, 0.75)


def test_leaf_selection_takes_the_deepest_clusters():
    g = _grid(9, 1)
    # a big bump holding two sub-peaks, and a lone bump
    v = np.array([40, 90, 50, 80, 40, 5, 40, 60, 40])
    c = np.array([10, 30, 12, 25, 10, 1, 10, 20, 10])
    t = build_level_tree(g, np.arange(9), v, c)
    eom = select_clusters(t, min_mass=20, min_prominence=8, extent="core", selection="eom")
    leaf = select_clusters(t, min_mass=20, min_prominence=8, extent="core", selection="leaf")
    assert leaf.n_clusters == 3
    assert eom.n_clusters in (2, 3)
    with pytest.raises(ParameterError):
        select_clusters(t, min_mass=1, min_prominence=1, selection="best")


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 12), st.integers(3, 12), st.integers(0, 2**31 - 1), st.sampled_from(["eom", "leaf"]))
def test_flat_map_and_tree_are_consistent(nx, ny, seed, selection):
    """Clusters are disjoint, each core is one component at its level, grown clusters keep their core and
    stay connected, and the tree's entries are nested."""
    rng = np.random.default_rng(seed)
    g = _grid(nx, ny)
    counts = rng.poisson(rng.uniform(0, 8), nx * ny) + rng.integers(-2, 3, nx * ny)
    h = NoisyHistogram(g, "dense", np.arange(nx * ny), counts.astype(np.int64), 1.0, 1, math.exp(-1.0))
    sums = box_sums(h)
    cells = np.arange(nx * ny)[sums.ravel() > 2]
    tree = build_level_tree(g, cells, sums.ravel()[cells], h.lookup(cells))
    core = select_clusters(tree, min_mass=5, min_prominence=3, extent="core", selection=selection)
    grown = select_clusters(tree, min_mass=5, min_prominence=3, extent="grown", selection=selection)
    assert np.all(np.diff(core.cell_id) > 0) and np.all(np.diff(grown.cell_id) > 0)
    assert core.n_clusters == grown.n_clusters == len(core.cluster_level)
    full = np.zeros(nx * ny, dtype=np.int64)
    full[grown.cell_id] = grown.label
    for k in range(1, core.n_clusters + 1):
        mine = core.cell_id[core.label == k]
        assert np.all(full[mine] == k)  # growing never takes a core cell away
        mask = (full == k).reshape(ny, nx)
        assert ndimage.label(mask, structure=np.ones((3, 3)))[1] == 1  # connected
        # the core is the component at the level where the cluster separates
        level = core.cluster_level[k - 1]
        comp = np.zeros(nx * ny, dtype=bool)
        comp[cells[sums.ravel()[cells] > level]] = True
        lab, _ = ndimage.label(comp.reshape(ny, nx), structure=np.ones((3, 3)))
        ids = np.unique(lab.ravel()[mine])
        assert ids.size == 1 and ids[0] > 0
        assert set(np.flatnonzero(lab.ravel() == ids[0]).tolist()) == set(mine.tolist())
    # entries: the root lists every cell; a child's cells are among its parent's
    par = core.nodes["parent"]
    for e, p in enumerate(par.tolist()):
        if p >= 0:
            assert set(core.node_cells[e].tolist()) <= set(core.node_cells[p].tolist())
            assert core.nodes["level"][e] >= core.nodes["level"][p]
    if len(core.node_cells):
        assert core.node_cells[-1].size == cells.size and par[-1] == -1
    sel = core.nodes["selected"]
    assert sorted(sel[sel > 0].tolist()) == list(range(1, core.n_clusters + 1)) or core.nodes["selected"].max() == 0


def test_fdr_floor_p_values_are_exact():
    g = _grid(30, 30)
    q = math.exp(-1.0)
    counts = np.zeros(900, dtype=np.int64)
    h = NoisyHistogram(g, "dense", np.arange(900), counts, 1.0, 1, q)
    sums = np.arange(-3, 40)
    kappa = np.full(sums.size, 9)
    p = level_floor._p_values(sums, kappa, q)
    expect = np.where(sums > 0, sum_sf(sums - 1, 9, q), 1.0)
    np.testing.assert_allclose(p, expect, rtol=1e-9, atol=1e-15)
    corner = level_floor._neighbours_in_universe(g)
    assert corner[0, 0] == 4 and corner[0, 5] == 6 and corner[10, 10] == 9
    p4 = level_floor._p_values(np.array([5]), np.array([4]), q)
    assert p4[0] == pytest.approx(sum_sf([4], 4, q)[0], rel=1e-9)
    assert fdr_cells(h, box_sums(h))[0].size == 0


def _mean_fdp(releases, seed, q=0.1):
    """Mean false-discovery proportion of the floor over repeated releases of a 40 x 40 grid holding a
    10 x 10 block of 3 points a cell (12 x 12 = 144 cells with points in their neighbourhood, 1456 without)."""
    g = _grid(40, 40)
    ids = np.array([iy * 40 + ix for iy in range(15, 25) for ix in range(15, 25)])
    counts = np.full(ids.size, 3, dtype=np.int64)
    non_null = np.zeros(1600, dtype=bool)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            non_null[ids + dy * 40 + dx] = True
    src = NoiseSource(seed=seed)
    fdp = []
    for _ in range(releases):
        h = dense_histogram(g, ids, counts, epsilon=1.0, rng=src)
        kept, _ = fdr_cells(h, box_sums(h), q)
        fdp.append(np.mean(~non_null[kept]) if kept.size else 0.0)
    return float(np.mean(fdp))


def test_fdr_floor_controls_the_false_discovery_rate(monkeypatch):
    """The share of kept cells whose neighbourhood is empty stays below q = 0.1 on average.

    150 releases at ε = 1; each false-discovery proportion lies in [0, 1], so with probability
    >= 1 - 1e-6 the mean exceeds its expectation (<= q) by less than sqrt(ln(1e6) / 300) = 0.215
    (Hoeffding): the test fails a correct floor with probability below 1e-6. It has power: p-values
    computed from the noise of one cell instead of nine (a wrong noise scale) give a mean FDP above 0.5.
    """
    bound = 0.1 + math.sqrt(math.log(1e6) / (2 * 150))
    assert _mean_fdp(150, seed=11) <= bound
    orig = level_floor._p_values
    monkeypatch.setattr(level_floor, "_p_values", lambda s, k, q: orig(s, np.ones_like(k), q))
    assert _mean_fdp(40, seed=12) > 0.5


def test_fdr_floor_keeps_a_lone_cluster():
    g = _grid(10, 10)
    c = np.zeros(100, dtype=np.int64)
    c[55] = 60
    h = NoisyHistogram(g, "dense", np.arange(100), c, 1.0, 1, math.exp(-1.0))
    cells, p_cut = fdr_cells(h, box_sums(h))
    assert cells.tolist() == [44, 45, 46, 54, 55, 56, 64, 65, 66] and 0 < p_cut < 0.1
    with pytest.raises(ParameterError):
        fdr_cells(h, box_sums(h), 1.5)


def test_density_levels_on_two_blobs_and_a_background():
    rng = np.random.default_rng(5)
    x = np.r_[rng.normal(250, 20, 600), rng.normal(700, 20, 600), rng.uniform(0, 1000, 300)]
    y = np.r_[rng.normal(500, 20, 600), rng.normal(520, 20, 600), rng.uniform(0, 1000, 300)]
    g = _grid(50, 50, 20.0)
    ids, counts = np.unique(g.assign(x, y).cell_id, return_counts=True)
    h = dense_histogram(g, ids, counts, epsilon=1.0, rng=NoiseSource(seed=4))
    clusters, st_ = density_levels(h, n_hat=1500)
    mass = np.bincount(clusters.label, weights=h.lookup(clusters.cell_id))[1:]
    assert clusters.n_clusters >= 2 and np.sort(mass)[-2] > 400  # the two blobs ...
    assert np.sort(mass)[:-2].sum() < 100  # ... and at most a few clumps of the background
    assert st_["min_cluster_mass"] == pytest.approx(max(2 * st_["noise_sd_of_level"], math.sqrt(1500)))
    assert st_["floor_fdr"] == 0.1 and st_["n_floor_cells"] > 0
    big = np.argsort(mass)[-2:] + 1
    centres = sorted((np.mean(g.cell_xy(clusters.cell_id[clusters.label == k])[0]) + 0.5) * 20 for k in big)
    assert abs(centres[0] - 250) < 60 and abs(centres[1] - 700) < 60


# -- the fast paths against plain references (the tree's numbering decides the order of the clusters) ----------

def _reference_tree(grid, cell_id, value, count, max_thresholds=level_tree.MAX_THRESHOLDS):
    """The tree by the plain sweep: at each threshold, scipy's components of all the roots that the new cells
    and adjacencies touch, in the order of their last occurrence (the numbering the library keeps)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = cell_id.size
    thr = np.unique(value)
    if thr.size > max_thresholds:
        thr = level_tree._thresholds(value, max_thresholds)
    lev = np.searchsorted(thr, value, side="right") - 1
    ea, eb = [], []
    for a, b, _ in level_tree._offset_pairs(grid, cell_id, level_tree.BOX_OFFSETS):
        ea.append(a)
        eb.append(b)
    ea, eb = np.concatenate(ea).astype(np.int64), np.concatenate(eb).astype(np.int64)
    elev = np.minimum(lev[ea], lev[eb])
    root = np.arange(n)
    node_of = np.full(n, -1)
    cell_node = np.full(n, -1)
    node_level, node_parent = [], []

    def find(x):
        while not np.array_equal(root[x], x):
            x = root[x]
        return x

    for j in range(thr.size - 1, -1, -1):
        new = np.flatnonzero(lev == j)
        edges = np.flatnonzero(elev == j)
        seq = np.concatenate([find(ea[edges]), find(eb[edges]), new])
        _, last_rev = np.unique(seq[::-1], return_index=True)
        roots = seq[::-1][np.sort(last_rev)][::-1]  # in the order of their last occurrence
        if roots.size == 0:
            continue
        where = {r: i for i, r in enumerate(roots.tolist())}
        inv = np.array([where[r] for r in seq.tolist()], dtype=np.int64)
        m = edges.size
        graph = csr_matrix((np.ones(m), (inv[:m], inv[m:2 * m])), shape=(roots.size, roots.size))
        n_comp, lab = connected_components(graph, directed=False)
        old = node_of[roots] >= 0
        n_old = np.bincount(lab[old], minlength=n_comp)
        group_node = np.full(n_comp, -1)
        cont = old & (n_old[lab] == 1)
        group_node[lab[cont]] = node_of[roots[cont]]
        fresh = np.flatnonzero(n_old != 1)
        group_node[fresh] = len(node_level) + np.arange(fresh.size)
        node_level += [j] * fresh.size
        node_parent += [-1] * fresh.size
        for r in roots[old & ~cont].tolist():
            node_parent[node_of[r]] = group_node[lab[where[r]]]
        rep = np.full(n_comp, -1)
        np.maximum.at(rep, lab, roots)
        root[roots] = rep[lab]
        node_of[roots] = -1
        node_of[rep] = group_node
        cell_node[new] = group_node[lab[[where[c] for c in new.tolist()]]]
    return thr, cell_node, np.array(node_level, dtype=np.int64), np.array(node_parent, dtype=np.int64)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 14), st.integers(2, 14), st.integers(0, 2**31 - 1), st.sampled_from([3, 8, 100]))
def test_tree_numbers_its_nodes_as_the_plain_sweep(nx, ny, seed, top):
    """The vectorised sweep (union-find with only the old ends looked up, components by one scipy call per
    threshold) gives the plain sweep's tree, node for node: the clusters' numbering follows it."""
    rng = np.random.default_rng(seed)
    g = _grid(nx, ny)
    values = rng.integers(0, top, nx * ny)
    cells = np.flatnonzero(rng.random(nx * ny) < 0.85)
    if cells.size == 0:
        return
    for max_thr in (level_tree.MAX_THRESHOLDS, 4):  # every value, or a coarser grid of thresholds
        tree = build_level_tree(g, cells, values[cells], np.ones(cells.size, dtype=np.int64), max_thresholds=max_thr)
        thr, cell_node, node_level, node_parent = _reference_tree(g, cells, values[cells], None, max_thr)
        assert tree.thresholds.tolist() == thr.tolist()
        assert tree.cell_node.tolist() == cell_node.tolist()
        assert tree.node_level.tolist() == node_level.tolist()
        assert tree.node_parent.tolist() == node_parent.tolist()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_adjacent_pairs_from_the_raster_are_those_of_the_search(nx, ny, seed):
    rng = np.random.default_rng(seed)
    g = _grid(nx, ny)
    cells = np.flatnonzero(rng.random(nx * ny) < 0.6)
    a, b = level_tree.adjacent_pairs(g, cells)
    ra, rb = [], []
    for x, y, _ in level_tree._offset_pairs(g, cells, level_tree.BOX_OFFSETS):
        ra.append(x)
        rb.append(y)
    ra = np.concatenate(ra) if ra else np.zeros(0, dtype=np.int64)
    rb = np.concatenate(rb) if rb else np.zeros(0, dtype=np.int64)
    assert a.tolist() == ra.tolist() and b.tolist() == rb.tolist()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 2**31 - 1), st.integers(0, 4))
def test_growing_on_the_raster_is_growing_along_the_pairs(nx, ny, seed, steps):
    from dpgeo.mechanisms.level_select import grow_labels, grow_labels_raster

    rng = np.random.default_rng(seed)
    g = _grid(nx, ny)
    cells = np.flatnonzero(rng.random(nx * ny) < 0.7)
    label = np.where(rng.random(cells.size) < 0.2, rng.integers(1, 4, cells.size), 0)
    want = grow_labels(cells.size, level_tree.adjacent_pairs(g, cells), label, steps=steps)
    assert grow_labels_raster(g, cells, label, steps=steps).tolist() == want.tolist()


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 12), st.integers(3, 12), st.integers(0, 2**31 - 1))
def test_peaks_from_the_cells_where_a_node_appears(nx, ny, seed):
    """The clusters are the same whether a node's peak is read off every cell or only off the cells of the
    nodes without children where they appear (the shortcut the library takes)."""
    import dataclasses

    rng = np.random.default_rng(seed)
    g = _grid(nx, ny)
    counts = rng.poisson(rng.uniform(0, 8), nx * ny) + rng.integers(-2, 3, nx * ny)
    h = NoisyHistogram(g, "dense", np.arange(nx * ny), counts.astype(np.int64), 1.0, 1, math.exp(-1.0))
    sums = box_sums(h)
    cells = np.arange(nx * ny)[sums.ravel() > 2]
    for max_thr in (level_tree.MAX_THRESHOLDS, 5):
        tree = build_level_tree(g, cells, sums.ravel()[cells], h.lookup(cells), max_thresholds=max_thr)
        plain = dataclasses.replace(tree, cell_level=None)
        a = select_clusters(tree, min_mass=5, min_prominence=3)
        b = select_clusters(plain, min_mass=5, min_prominence=3)
        assert a.cell_id.tolist() == b.cell_id.tolist() and a.label.tolist() == b.label.tolist()
        assert a.cluster_top.tolist() == b.cluster_top.tolist()
        assert all(np.array_equal(a.nodes[k], b.nodes[k]) for k in a.nodes)


def test_binomial_kernel_sees_a_gap_the_box_fills():
    """Two groups of 40 points three cells apart: the box's 3×3 sums are a plateau (40 on every cell from
    one group to the other: no split), the binomial kernel's dip to half between them (two clusters)."""
    g = Grid(StudyArea.from_bbox((0, 0, 90, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)  # 9 x 3 cells
    counts = np.zeros(27, dtype=np.int64)
    counts[9 + 2], counts[9 + 5] = 40, 40  # the middle row, cells 2 and 5
    h = NoisyHistogram(g, "dense", np.arange(27), counts, 1.0, 1, 1e-12)  # no noise: the kernels alone
    assert levels.box_sums(h)[1, 1:7].tolist() == [40, 40, 40, 40, 40, 40]
    assert levels.binomial_sums(h)[1, 1:7].tolist() == [45, 90, 45, 45, 90, 45]
    for kernel in ("box", "binomial"):
        c, s = levels.density_levels(h, min_mass=10, min_prominence=5, dip_ratio=0.25, dip_z=1.0, kernel=kernel)
        assert (c.n_clusters == 2) == (kernel == "binomial"), kernel
        assert ("binomial" in s["density_kernel"]) == (kernel == "binomial")


def test_binomial_level_noise_is_that_of_its_sums():
    """:func:`levels.level_noise` gives the s.d. of the binomial sums' noise (1.125 × the box's): the sample
    s.d. over the interior cells of a 300 × 300 grid of pure noise (ε = 1) is within 4% of it. The
    estimate's relative standard error is about 0.5% (the sums of neighbouring cells are correlated:
    about 10,000 independent ones), so a correct formula fails this with probability below 1e-9."""
    g = Grid(StudyArea.from_bbox((0, 0, 3000, 3000), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    h = dense_histogram(g, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), epsilon=1.0,
                        rng=NoiseSource(seed=11))
    sd, var_per_level = levels.level_noise(h.q, "binomial")
    box_sd, box_var = levels.level_noise(h.q, "box")
    assert sd == pytest.approx(1.125 * box_sd) and box_var == 1.0 and var_per_level == pytest.approx(81 * 36 / 256 / 9)
    inner = levels.binomial_sums(h)[1:-1, 1:-1].astype(float)
    assert inner.std() == pytest.approx(sd, rel=0.04)
    with pytest.raises(ParameterError, match="kernel"):
        levels.level_noise(h.q, "gauss")


def test_a_near_tie_of_excess_of_mass_shows_the_children():
    """Two bumps of 30 points joined at level 26 and a third apart: the joined cluster's excess of mass
    (1,365) exceeds its children's together (1,360) by less than :data:`levels.EOM_MARGIN` of theirs, so the
    children are chosen (three clusters); with ``eom_margin=0`` (the rule before) the larger wins (two)."""
    g = _grid(11, 1)
    v = np.array([26, 60, 26, 26, 26, 60, 26, 5, 30, 60, 30])
    t = build_level_tree(g, np.arange(11), v, np.array([5, 20, 5, 5, 5, 20, 5, 1, 5, 20, 5]))
    kw = dict(min_mass=10, min_prominence=5, extent="core", base_level=4)
    before = select_clusters(t, eom_margin=0.0, **kw)
    assert before.n_clusters == 2 and before.nodes["stability"].tolist()[:4] == [680, 680, 1350, 1365]
    assert select_clusters(t, eom_margin=levels.EOM_MARGIN, **kw).n_clusters == 3
    assert 1365 < (1 + levels.EOM_MARGIN) * 1360


def _bent_ridge(dip):
    """A U one cell wide (two columns of 10 cells and a bottom row of 16, on 20 × 12 cells) at about 100,
    ``dip`` in the bottom row's middle two cells: each half an L of 18 cells, which its variances read as
    round."""
    g = _grid(20, 12)
    xy = np.r_[[(2, y) for y in range(11, 2, -1)], [(x, 2) for x in range(2, 18)], [(17, y) for y in range(3, 12)]]
    ids = xy[:, 1] * 20 + xy[:, 0]
    v = np.full(ids.size, 100) + np.arange(ids.size) % 3
    v[np.isin(xy[:, 0], (9, 10)) & (xy[:, 1] == 2)] = dip
    order = np.argsort(ids)
    return build_level_tree(g, ids[order], v[order], np.full(ids.size, 10))


def test_a_bent_ridge_stays_whole_by_its_thinness():
    """The halves of a U dipping to 60 at its bottom are L's, 18 cells by one: their ratio of variances is
    below the ridge rule's (they are two clusters by the dip rule, as without the ridge rule); read by their
    cells against their width (18) they are long and thin, the U they make together is one line (one path
    covers it), and the ridge rule keeps it whole; a dip to 20 still cuts it."""
    kw = dict(min_mass=10, min_prominence=5, extent="core", noise_sd=1.0, dip_ratio=0.25, dip_z=2.0)
    assert select_clusters(_bent_ridge(60), **kw, **RIDGE).n_clusters == 2
    assert select_clusters(_bent_ridge(60), **kw, **RIDGE, ridge_thinness=4.0, ridge_path_share=0.75).n_clusters == 1
    assert select_clusters(_bent_ridge(20), **kw, **RIDGE, ridge_thinness=4.0, ridge_path_share=0.75).n_clusters == 2
    # each half meets the other at its end: it stays whole when the branch must be met at an end
    assert select_clusters(_bent_ridge(60), **kw, **RIDGE, ridge_thinness=4.0, ridge_path_share=0.75,
                           ridge_end_share=0.7).n_clusters == 1


def test_a_thin_branch_met_along_its_side_is_not_a_ridge_that_bends():
    """Two rows of 20 cells two rows apart, joined by one cell of 30 in their middle: each row is long and
    thin, and read by its thinness alone (no line test) it is a piece of a ridge, so the two are joined; each
    meets the other at its middle, not at an end (its farthest cell from the join lies half its length
    away), and with the end test the dip rule decides: two clusters."""
    g = _grid(20, 3)
    ids = np.r_[np.arange(20), [30], 40 + np.arange(20)]
    v = np.r_[np.full(20, 100), [30], np.full(20, 100) + np.arange(20) % 2]
    t = build_level_tree(g, ids, v, np.full(ids.size, 10))
    kw = dict(min_mass=10, min_prominence=5, extent="core", noise_sd=1.0, dip_ratio=0.25, dip_z=2.0,
              **{**RIDGE, "ridge_elongation": 1e9}, ridge_thinness=4.0, ridge_path_share=0.0)
    assert select_clusters(t, **kw).n_clusters <= 1
    assert select_clusters(t, **kw, ridge_end_share=0.7).n_clusters == 2


def test_two_lines_that_cross_are_not_one_ridge():
    """Two lines one cell wide crossing at a plus of five cells at 40 (arms of 7 cells at 100, on 17 × 17 cells): the
    four arms are long and thin, but what joins them is a cross, not one line (one path covers half of it),
    so the dip rule decides and they stay apart; read as one ridge (``ridge_path_share=0``) they are one (or none).
    (The arms are straight and in line with the cross's centre: the ratio of variances alone would read them
    as pieces of a ridge; it is set out of reach here, so that the thinness decides.)"""
    g = _grid(17, 17)
    grid = np.zeros((17, 17), dtype=np.int64)
    grid[8, :] = grid[:, 8] = 100
    grid[8, 7:10] = grid[7:10, 8] = 40
    ids = np.flatnonzero(grid.ravel())
    t = build_level_tree(g, ids, grid.ravel()[ids], np.full(ids.size, 10))
    kw = dict(min_mass=10, min_prominence=5, extent="core", noise_sd=1.0, dip_ratio=0.25, dip_z=2.0,
              **{**RIDGE, "ridge_elongation": 1e9})
    assert select_clusters(t, **kw, ridge_thinness=4.0, ridge_path_share=0.75).n_clusters == 4
    assert select_clusters(t, **kw, ridge_thinness=4.0, ridge_path_share=0.0).n_clusters <= 1


def test_a_round_branch_full_of_small_holes_is_not_thin():
    """A 15 × 15 square of cells with one-cell holes every third cell (where the noise left cells below the
    level) has a mean distance to its nearest hole of about one cell: read as it is, it is as thin as a
    ridge; with its holes of up to nine cells filled it is the square again (thinness below 3). A ring, whose
    hole is large, stays thin."""
    from dpgeo.mechanisms.level_ridges import _shape_measures
    from dpgeo.mechanisms.level_select import _by_level

    def thinness(mask, holes):
        g = _grid(*mask.shape[::-1])
        ids = np.flatnonzero(mask.ravel())
        t = build_level_tree(g, ids, np.full(ids.size, 50), np.ones(ids.size, int))
        par = np.r_[np.where(t.node_parent < 0, t.n_nodes, t.node_parent), t.n_nodes]
        return _shape_measures(t, par, _by_level(t, ascending=False), np.arange(t.n_nodes), hole_cells=holes)[0][0]

    holey = np.zeros((17, 17), dtype=bool)
    holey[1:16, 1:16] = True
    holey[2:15:3, 2:15:3] = False
    full = np.zeros((17, 17), dtype=bool)
    full[1:16, 1:16] = True
    assert thinness(holey, 0) > 5
    assert thinness(holey, 9) == pytest.approx(thinness(full, 9)) and thinness(full, 9) < 3
    yy, xx = np.mgrid[0:21, 0:21]
    ring = np.abs(np.hypot(yy - 10, xx - 10) - 7) < 1.0
    assert thinness(ring, 9) > 5
