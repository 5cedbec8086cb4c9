"""What a DP-DBSCAN release (fixed radius or auto) and its preview publish in their metadata.

Each :class:`~dpgeo.declare.Meta` is declared once here and read by ``dpgeo info``, the QGIS plugin's
summary and preview, the web map's panel and the PNG footer (:mod:`dpgeo.metadata_fields` holds the
fields every mechanism shares). Kept apart from :mod:`dpgeo.declarations.spans` (the mechanism and its
parameters) because auto's choices alone are a long list.
"""

from __future__ import annotations

from ..declare import Meta
from ..mechanisms.concentration import (
    CONCENTRATION_SHARE,
    LARGE_CONCENTRATION_SHARE,
    OCCUPANCY_MAX_CELLS,
    OCCUPIED_MASS_SHARE,
)
from ..mechanisms.levels import FEW_CELLS_SCALE

__all__ = ["SPANS_OUTPUTS", "PREVIEW_OUTPUTS"]

#: What a DP-DBSCAN release (or its preview) publishes besides the common fields (dpgeo.metadata_fields).
SPANS_OUTPUTS = (
    Meta("radius_m", "radius α", "Parameters",
         "the DBSCAN radius: a cell is core when its α-neighbourhood holds MinPts points", unit="metres", panel=True),
    Meta("min_points", "MinPts", "Parameters",
         "the fewest points in a core cell's α-neighbourhood", unit="points", panel=True),
    Meta("beta", "β", "Parameters", "the probability with which the noise bounds may fail", render="beta"),
    Meta("eta", "η′ (cell width factor)", "Parameters",
         "the cell width as a share of α/√2", template="{} (cells of η′·α/√2)"),
    Meta("gamma_method", "Γ bound", "Parameters", "how Γ, the bound on the noise, is computed"),
    Meta("extent", "span extent", "Parameters",
         "how far a span reaches: its core cells, or grown into certified cells"),
    Meta("auto", "radius and MinPts chosen from ε (auto)", "Parameters",
         "whether the radius and MinPts were chosen from ε (none given)", unit="yes/no"),
    Meta("gamma", "Γ", "Thresholds", "the most the noise adds to a neighbourhood sum (probability ≥ 1 − β); a core "
         "cell needs MinPts + Γ", unit="points", panel=True, column="Γ", note=True),
    Meta("gamma_low", "Γ_low", "Thresholds",
         "the bound on the noise below a neighbourhood sum (probability ≥ 1 − β)", unit="points"),
    Meta("gamma_laplace", "Γ of the paper (Γ_Lap)", "Thresholds",
         "Γ by the paper's Laplace bound, for comparison", unit="points"),
    Meta("core_threshold", "core threshold", "Thresholds",
         "a cell is core when its noisy neighbourhood sum reaches this",
         unit="points", template="{} (MinPts + Γ)", column="core threshold"),
    Meta("min_points_prime", "MinPts′", "Thresholds", "every cell whose α-neighbourhood truly holds MinPts′ points "
         "is found (probability ≥ 1 − β)", unit="points", template="{} (MinPts + Γ + Γ_low)", column="MinPts′",
         note=True),
    Meta("extent_threshold", "extent threshold", "Thresholds",
         "the noisy count a grown span reaches into", unit="points", column="extent threshold"),
    Meta("kappa", "κ (neighbourhood)", "Thresholds",
         "the cells in one α-neighbourhood", unit="cells", template="{} summed per neighbourhood", column="κ"),
    Meta("count_sd", "count noise s.d.", "Thresholds", "the standard deviation of one cell's noise", unit="points"),
    Meta("n_core_cells", "core cells", "Result", "the cells found core"),
    Meta("n_span_cells", "cells in spans", "Result", "the cells in the spans"),
    # without a radius and MinPts (auto): the density levels of one histogram
    Meta("epsilon_total", "ε of the noisy total", "Privacy", "the part of ε spent on the noisy total"),
    Meta("epsilon_histogram", "ε of the histogram", "Privacy", "the part of ε spent on the histogram"),
    Meta("total_share", "share of ε for the noisy total", "Privacy",
         "the share of ε spent on the noisy total", render="share"),
    Meta("noisy_total", "noisy total n̂", "Result", "released with ε₀; it fixes the cell width", unit="points", note=True),
    Meta("resolution_rule", "cell width rule", "Study area and grid",
         "how the cell width follows from the noisy total"),
    Meta("fine_cell_width_m", "finest grid", "Study area and grid",
         "the finest cell the rule allows", unit="metres", template="cells of {}"),
    Meta("coarsening_factor", "coarsening", "Study area and grid",
         "how many finest cells a cell is wide", template="cells {} × as wide as the finest"),
    Meta("max_cells", "largest grid", "Study area and grid", "the most cells the grid may have", unit="cells"),
    Meta("max_fine_cells", "largest finest grid", "Study area and grid",
         "the most cells the finest grid may have", unit="cells"),
    Meta("level_unit", "level unit", "Thresholds", "what a density level counts"),
    Meta("density_kernel", "density kernel", "Thresholds", "the neighbourhood a level sums over"),
    Meta("floor_rule", "floor: rule", "Thresholds", "how the lowest level shown is chosen"),
    Meta("floor_fdr", "floor: FDR", "Thresholds", "the expected share of shown cells whose 3×3 neighbourhood is "
         "empty", note=True),
    Meta("fdr", "floor: FDR", "Thresholds", "the expected share of shown cells whose 3×3 neighbourhood is empty",
         note=True),
    Meta("floor_p_value_cut", "floor: p-value cut", "Thresholds", "the p-value below which a cell is above the floor"),
    Meta("floor_level", "floor", "Thresholds", "the lowest density level shown", unit="points", panel=True),
    Meta("floor_guarantee", "floor: guarantee", "Thresholds", "what the floor guarantees"),
    Meta("n_floor_cells", "cells above the floor", "Result", "the cells above the floor"),
    Meta("floor_line_cells", "floor: bridges' lines", "Thresholds",
         "the length of the lines through a cell along which the floor's bridges test for points (few cells)",
         unit="cells"),
    Meta("n_floor_bridge_cells", "floor: bridge cells", "Result",
         "the cells added to the floor where lines of points join two or more of its pieces"),
    Meta("noise_sd_of_level", "noise s.d. of a level", "Thresholds",
         "the standard deviation of the noise of a level (a 3×3 sum)", unit="points", column="level noise s.d."),
    Meta("noise_sd_of_cell", "noise s.d. of a cell", "Thresholds",
         "the standard deviation of one cell's noise", unit="points"),
    Meta("points_per_noise_sd", "points per noise s.d.", "Thresholds",
         "how many points one noise standard deviation is"),
    Meta("min_cluster_mass", "smallest cluster", "Thresholds",
         "the fewest noisy points a cluster must hold to be shown", unit="points"),
    Meta("min_prominence", "smallest prominence", "Thresholds",
         "how far a cluster must rise above where it joins another", unit="points"),
    Meta("gamma_all_levels", "Γ (every level at once)", "Thresholds",
         "every level is within this of its true value (probability ≥ 1 − β)", unit="points", column="Γ every level"),
    Meta("gamma_beta", "β of Γ (every level)", "Thresholds", "the β of Γ over every level"),
    Meta("levels_guarantee", "levels: guarantee", "Thresholds", "what the levels guarantee"),
    Meta("n_thresholds", "density levels tried", "Result", "the density levels tried"),
    Meta("n_levels", "levels (tree)", "Result", "the levels of the tree of clusters"),
    Meta("selection", "cluster selection", "Result", "how the clusters are chosen among the levels"),
    Meta("grow_steps", "growing steps", "Parameters", "how many cells a span may grow"),
    Meta("by_points", "for n points", "Auto: its choices",
         "what an auto run would do, for a few numbers of points", render="by_points"),
    # where the points are (dpgeo.mechanisms.concentration), the dip rule and the gap between clusters
    Meta("epsilon_occupancy", "ε of the occupancy histogram", "Privacy",
         "the part of ε spent on finding where the points are"),
    Meta("concentration_share", "share of the histogram's ε for the occupancy", "Privacy",
         f"the share of the histogram's ε the occupancy histogram takes: {CONCENTRATION_SHARE:.0%} when the uniform "
         f"grid has at most {OCCUPANCY_MAX_CELLS:,} cells, {LARGE_CONCENTRATION_SHARE:.0%} otherwise", render="share"),
    Meta("max_refinement", "cells at most this many times finer", "Auto: its choices",
         "how many times finer than the uniform rule's the cells may be where the points are compact"),
    Meta("fallback_refinement", "cells this many times finer where no part stands out", "Auto: its choices",
         "with few cells, where the occupancy histogram cannot tell where the points are (no block size's "
         f"occupied blocks hold {OCCUPIED_MASS_SHARE:.0%} of the noisy total), the cells are this many times finer "
         "than the uniform "
         "rule's (the uniform rule at half its points per noise s.d.)"),
    Meta("few_cells_scale", "share of √n̂ a cluster holds", "Auto: its choices",
         "a cluster holds at least this share of √n̂ noisy points (n̂ the noisy total; and at least two s.d. of a "
         f"3×3 sum's noise): {FEW_CELLS_SCALE:g} when the uniform grid has at most {OCCUPANCY_MAX_CELLS:,} cells "
         "(few points, often in small groups), 1 otherwise"),
    Meta("sparse_mass_share", "share of points whose sparsest blocks set the width", "Auto: its choices",
         "the cell width follows the density of the sparsest occupied blocks holding this share of their points",
         render="share"),
    Meta("sparse_density_per_km2", "density of the sparser occupied parts", "Auto: its choices",
         "the noisy points per km² of those sparsest occupied blocks, which set the cell width"),
    Meta("uniform_cell_width_m", "uniform rule's cell width", "Auto: its choices",
         "the cell width the noisy total alone gives", unit="metres"),
    Meta("occupancy_block", "occupancy block", "Auto: its choices",
         "the block size (in uniform cells) whose occupied blocks set the area the cells are fitted to"),
    Meta("occupancy_blocks", "occupancy block sizes tried", "Auto: its choices",
         "the block sizes (in uniform cells) tried, smallest first"),
    Meta("occupancy_fdr", "occupancy: FDR", "Auto: its choices",
         "the false-discovery rate at which a block is found occupied"),
    Meta("occupied_area_m2", "occupied area", "Auto: its choices", "the area of the occupied blocks (m²)"),
    Meta("occupied_mass", "points in occupied blocks", "Auto: its choices",
         "the noisy points the occupied blocks hold", unit="points"),
    Meta("occupied_mass_share", "least share of points in occupied blocks", "Auto: its choices",
         "the share of the noisy total the occupied blocks must hold for the cells to follow them"),
    Meta("occupied_share_of_area", "occupied share of the study area", "Auto: its choices",
         "the occupied blocks' share of the study area"),
    Meta("max_occupied_area_share", "largest occupied share", "Auto: its choices",
         "the largest share of the study area the occupied blocks may cover for the cells to follow them"),
    Meta("min_dip_ratio", "dip rule: share", "Thresholds",
         "a branch counts only if its peak rises this share above the level where it joins its sibling "
         "(0.25: a peak 1.25 times that level)"),
    Meta("min_dip_z", "dip rule: significance", "Thresholds",
         "a branch must also rise this many noise standard deviations above its split level"),
    Meta("dip_max_correction", "dip rule: highest of many", "Thresholds",
         "a branch of many cells that does not split further must rise this many times more: the expected "
         "excess of the highest of its independent neighbourhood sums over their mean, in standard deviations "
         "(recorded when set; off by default)"),
    Meta("dip_mean_z", "dip rule: mean of a branch", "Thresholds",
         "... unless its cells' mean density lies this many standard deviations of the split level above it"),
    Meta("gap_z", "gap rule: occupied cells", "Thresholds",
         "a cluster whose child clusters are compact groups with only cells of a released count below this many "
         "standard deviations of one cell's noise between them is never chosen over them (none: excess of mass "
         "alone)"),
    Meta("eom_margin", "excess of mass: margin", "Thresholds",
         "a cluster is chosen over the clusters it splits into only when its excess of mass exceeds theirs "
         "together by more than this share (0: the larger excess of mass wins)", render="share"),
    Meta("deep_dip_ratio", "deep-dip rule: split against peaks", "Thresholds",
         "a cluster whose child clusters are all compact groups (round, not thin) rising to at least 1 / this "
         "times the level where they split off is never chosen over them (none: excess of mass decides)"),
    Meta("ridge_elongation", "ridge rule: elongation", "Thresholds",
         "a branch whose cells vary at least this many times as much along its long axis as across it (a "
         "ratio of variances: 4 is twice as long as wide), lying along that axis from its parent, "
         "is a piece of a ridge (a road, a trail)"),
    Meta("ridge_alignment", "ridge rule: alignment", "Thresholds",
         "... lying along: the cosine of the angle between its long axis and the way from its parent's centre "
         "to its own is at least this"),
    Meta("ridge_dip_ratio", "ridge rule: share", "Thresholds",
         "a piece of a ridge counts only if its peak, less its noise, rises this share above the level where "
         "it joins its sibling, plus that level's noise (1: the ridge's density falls to half)"),
    Meta("ridge_min_length_cells", "ridge rule: shortest ridge", "Thresholds",
         "a branch shorter than this (its long axis, in cells) is no ridge, whatever its shape (0: any length)"),
    Meta("ridge_blob_elongation", "ridge rule: round blobs", "Thresholds",
         "a long thin branch that splits into branches less elongated than this (a ratio of variances), each "
         "significant by the dip rule, is a row of round blobs, not a ridge, and held to the dip rule"),
    Meta("ridge_thinness", "ridge rule: thinness", "Thresholds",
         "a branch at least this many times longer than wide, bends and all (its cells against the square of "
         "their mean width by a distance transform), is a piece of a ridge too, wherever it lies from its parent "
         "(absent: the ratio of variances alone)"),
    Meta("ridge_path_share", "ridge rule: one line", "Thresholds",
         "... if it, its siblings and what joins them are one line: as thin, and one path through them covers at least this "
         "share of their length (two lines that cross cover half)"),
    Meta("ridge_end_share", "ridge rule: met at an end", "Thresholds",
         "... if it meets the rest of them at an end: its farthest cell from those that touch the rest lies at "
         "least this share of its length away (0: anywhere)"),
    Meta("ridge_dip_z", "ridge rule: significance", "Thresholds",
         "the standard deviations of the peak and of the split level (noise and Poisson variation) taken off "
         "and added by the ridge rule"),
    Meta("chain_elongation", "corridor rule: line", "Thresholds",
         "two clusters whose cells meet (or meet across one or two clusters between them) are one corridor when "
         "together they are at least this many times longer than wide (a ratio of variances), lie end to end and "
         "meet at a quarter of the lower peak or more (a corridor broken by a deep gap stays two clusters)"),
    Meta("chain_piece_elongation", "corridor rule: pieces", "Thresholds",
         "... and each of the two is at least this many times longer than wide along the corridor's axis "
         "(round hot spots side by side stay two places)"),
    Meta("parts_rule", "parts", "Result", "why a cluster can be several polygons, and the gap between clusters"),
    Meta("too_small", "too small", "Result", "why the map has no cluster", note=True, panel=True),
    Meta("levels_layer", "levels layer", "Result", "whether the release carries the tree of levels",
         unit="yes/no"),
)

#: What only a preview adds: auto's choices for one number of points, one column each in a table of previews.
PREVIEW_OUTPUTS = (
    Meta("n_points", "points (auto)", "Auto: its choices",
         "the number of points the auto outputs are for", column="points"),
    Meta("smallest_cluster_points", "smallest cluster (auto)", "Auto: its choices",
         "the fewest points a cluster can hold and still be shown", unit="points", column="smallest cluster"),
    Meta("lowest_level_min", "lowest level from (auto)", "Auto: its choices",
         "the lowest level shown is at least this (noisy points in 3×3 cells; a map with points everywhere)",
         unit="points", column="lowest level from"),
    Meta("lowest_level_max", "lowest level to (auto)", "Auto: its choices",
         "the lowest level shown is at most this (a map with one place of points)",
         unit="points", column="lowest level to"),
)
