"""Reproduce the DP-DBSCAN paper's accuracy comparison (Qiu & Yi, Table 2 and Figure 10).

Setting (the paper's §8 and its authors' published experiment code):

* data: Circles, Moons and Blobs from scikit-learn (n = 2000,
  ``random_state=30``, standardised with ``StandardScaler``; Circles with
  ``factor=0.5, noise=0.05``, Moons with ``noise=0.05``, Blobs with centres
  ``[[1, 1], [-1, -1], [1.5, -1.5]]`` and ``cluster_std=[0.4, 0.1, 0.75]``),
  and the Chameleon/Cluto sets t4, t5, t7 from ``../shared/data/benchmarks``
  (label 0 = noise);
* DBSCAN parameters (α, MinPts) of the paper's Table 1; η′ = 0.8 for Circles
  as in the authors' code (1 otherwise); Circles is run with MinPts 7 (the
  code) and, as an extra row, 10 (the paper's table);
* ε = 1 for the table, ε ∈ {0.25, 0.5, 1, 2, 4} for the sweep; 10 seeds;
* scores: ARI and AMI of the point labels against the true labels, a point
  labelled by the span cell it falls in (0 = noise), as in the paper.

Mechanisms compared:

* dpgeo DP-DBSCAN spans with the product default β = 0.05 and with the
  authors' default β = 0.5 (both ``gamma="laplace"``: the paper's Γ_Lap, or
  the exact discrete bound if larger);
* dpgeo's DP k-means (``dpgeo.mechanisms.kmeans``: DPLloyd with exact
  integer noise, data-independent start, 5 iterations), with the true number
  of clusters over the same public study area — the paper's DP-Kmeans row;
* DP k-means of diffprivlib (IBM), the implementation the paper ran, with the
  true number of clusters and the same public study area as ``bounds`` (a
  cross-check of the dpgeo row);
* non-private DBSCAN and k-means of scikit-learn (ε = ∞).

In the ε sweep a third dpgeo curve keeps the core threshold MinPts′ =
MinPts + Γ(ε) at its ε = 1 value by lowering MinPts as Γ falls (Γ is public,
from ``dpgeo.noise_preview``); it exists only for ε where that MinPts is ≥ 1.

Extra studies printed after the table (same runs, ε = 1):

* *grid phase*: the grid is anchored at the public study area's lower-left
  corner, so its phase relative to the clusters is a fixed, arbitrary
  choice. The mean over 12 study areas whose lower-left corner is moved
  out by random fractions of a cell (drawn once from a fixed seed; the
  area grows by less than one cell per side) shows how much of a
  difference between two implementations is grid luck, not mechanism;
* *α-span labelling*: points within α of a span polygon are labelled by
  it (the paper's definition Span(C) = ∪ B(p, α)), instead of only the
  points inside the core cells. Post-processing of the public output.

Every study area is a fixed public box chosen from the benchmark's published
coordinate range (never fitted per run): ±3 for the standardised sets,
corners on multiples of 50 units for the Cluto sets. The benchmark
coordinates are treated as metres in a projected CRS.

Usage::

    python benchmarks/reproduce_dbscan.py                 # full run (~2 min on 2 cores)
    python benchmarks/reproduce_dbscan.py --quick         # smoke run (~15 s; plot to a temporary file)
    python benchmarks/reproduce_dbscan.py --skip-dp-kmeans --json results.json

Needs matplotlib (the plot) and, unless ``--skip-dp-kmeans``, diffprivlib
(see ``benchmarks/README.md`` for an environment where it imports).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT.parent / "shared" / "data" / "benchmarks"
IMG_DIR = ROOT / "docs" / "img"
#: Projected CRS for the abstract benchmark coordinates (units treated as metres).
BENCH_CRS = "EPSG:32631"

EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
SEEDS = 10
N_PHASES = 12

#: Mean ARI of the authors' code (continuous Laplace, β = 0.5), 10 seeds, on this machine.
REFERENCE_ARI_CODE = {"circles": 0.29, "moons": 0.90, "blobs": 0.81, "t4": 0.64, "t5": 0.93, "t7": 0.51}
#: The paper's Table 2 (3 seeds): DP-DBSCAN, DP-Kmeans, DBSCAN, Kmeans.
PAPER_TABLE2 = {
    "ARI": {
        "circles": (0.94, 0.00, 0.98, 0.00), "moons": (0.99, 0.51, 1.00, 0.47),
        "blobs": (0.81, 0.79, 0.55, 0.89), "t4": (0.64, 0.47, 0.95, 0.50),
        "t5": (0.93, 0.69, 0.96, 0.78), "t7": (0.52, 0.32, 0.76, 0.33),
    },
    "AMI": {
        "circles": (0.92, 0.00, 0.96, 0.00), "moons": (0.99, 0.41, 1.00, 0.37),
        "blobs": (0.83, 0.79, 0.66, 0.87), "t4": (0.74, 0.59, 0.92, 0.61),
        "t5": (0.92, 0.77, 0.95, 0.82), "t7": (0.63, 0.54, 0.82, 0.56),
    },
}


@dataclass(frozen=True)
class Spec:
    label: str
    source: str          # "sklearn:<name>" or a benchmark file stem
    alpha: float         # DBSCAN radius (data units, treated as metres)
    min_points: int
    eta: float           # η′, cell width factor
    bbox: tuple          # public study area (minx, miny, maxx, maxy)
    ref_key: str         # key into the reference tables


DATASETS = {
    "circles": Spec("Circles", "sklearn:circles", 0.2, 7, 0.8, (-3.0, -3.0, 3.0, 3.0), "circles"),
    "circles10": Spec("Circles (MinPts 10)", "sklearn:circles", 0.2, 10, 0.8, (-3.0, -3.0, 3.0, 3.0), "circles"),
    "moons": Spec("Moons", "sklearn:moons", 0.2, 7, 1.0, (-3.0, -3.0, 3.0, 3.0), "moons"),
    "blobs": Spec("Blobs", "sklearn:blobs", 0.2, 7, 1.0, (-3.0, -3.0, 3.0, 3.0), "blobs"),
    "t4": Spec("Cluto t4", "cluto_t4_8k", 9.0, 11, 1.0, (0.0, 0.0, 650.0, 350.0), "t4"),
    "t5": Spec("Cluto t5", "cluto_t5_8k", 9.0, 20, 1.0, (0.0, 0.0, 850.0, 200.0), "t5"),
    "t7": Spec("Cluto t7", "cluto_t7_10k", 12.0, 20, 1.0, (0.0, 0.0, 700.0, 500.0), "t7"),
}
#: Datasets of the ε-sweep plot (one panel each).
PLOT_SETS = ("circles", "moons", "blobs", "t4", "t5", "t7")

MECHANISMS = {
    "dpgeo": "dpgeo, β = 0.05, grown spans (default)",
    "dpgeo_core": "dpgeo, β = 0.05, core spans (paper's Algorithm 1)",
    "dpgeo_b05": "dpgeo, β = 0.5 (authors' setting), grown spans",
    "dpgeo_fixT": "dpgeo, β = 0.05, MinPts′ held at its ε = 1 value",
    "dp_kmeans_dpgeo": "DP k-means (dpgeo)",
    "dp_kmeans": "DP k-means (diffprivlib)",
    "dbscan": "DBSCAN (non-private)",
    "kmeans": "k-means (non-private)",
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# -- data ------------------------------------------------------------------------------

def load(spec: Spec):
    """(x, y, labels) with labels >= 0 (0 = noise) for one benchmark set."""
    if spec.source.startswith("sklearn:"):
        from sklearn import datasets
        from sklearn.preprocessing import StandardScaler

        name = spec.source.split(":", 1)[1]
        if name == "circles":
            pts, lab = datasets.make_circles(n_samples=2000, factor=0.5, noise=0.05, random_state=30)
        elif name == "moons":
            pts, lab = datasets.make_moons(n_samples=2000, noise=0.05, random_state=30)
        else:
            pts, lab = datasets.make_blobs(n_samples=2000, centers=[[1, 1], [-1, -1], [1.5, -1.5]],
                                           cluster_std=[0.4, 0.1, 0.75], random_state=30)
        pts = StandardScaler().fit_transform(pts)
        return pts[:, 0], pts[:, 1], lab.astype(np.int64) + 1
    import pandas as pd

    path = BENCH_DIR / f"{spec.source}.csv.gz"
    if not path.exists():
        raise SystemExit(f"reproduce_dbscan: benchmark file {path} not found (expected ../shared/data/benchmarks "
                         "next to the repository)")
    df = pd.read_csv(path)
    return df["x"].to_numpy(float), df["y"].to_numpy(float), df["label"].to_numpy(np.int64)


def n_true_clusters(labels):
    return int(np.unique(labels[labels > 0]).size)


# -- mechanisms ------------------------------------------------------------------------

def run_dpgeo(spec, x, y, *, epsilon, beta, seed, bbox=None, extent="grown"):
    import dpgeo

    return dpgeo.dbscan_spans((x, y, BENCH_CRS), epsilon=epsilon, radius_m=spec.alpha, min_points=spec.min_points,
                              domain=bbox or spec.bbox, domain_crs=BENCH_CRS, crs=BENCH_CRS, beta=beta,
                              eta=spec.eta, gamma="laplace", extent=extent, seed=seed)


def preview(spec, epsilon, beta):
    import dpgeo

    return dpgeo.noise_preview(epsilon=epsilon, radius_m=spec.alpha, min_points=spec.min_points, domain=spec.bbox,
                               domain_crs=BENCH_CRS, crs=BENCH_CRS, beta=beta, eta=spec.eta, gamma="laplace")


def dpgeo_kmeans_labels(spec, x, y, k, *, epsilon, seed):
    from dpgeo import StudyArea
    from dpgeo.mechanisms.kmeans import kmeans_layer
    from dpgeo.noise import NoiseSource

    area = StudyArea.from_bbox(spec.bbox, crs=BENCH_CRS, working_crs=BENCH_CRS)
    return kmeans_layer(x, y, area=area, k=k, epsilon=epsilon, rng=NoiseSource(seed)).label_points(x, y)


def dp_kmeans_labels(spec, x, y, k, *, epsilon, seed):
    from diffprivlib.models import KMeans

    b = spec.bbox
    km = KMeans(n_clusters=k, epsilon=epsilon, bounds=([b[0], b[1]], [b[2], b[3]]), random_state=seed)
    km.fit(np.column_stack([x, y]))
    return np.asarray(km.labels_, dtype=np.int64) + 1


def dbscan_labels(spec, x, y):
    from sklearn.cluster import DBSCAN

    lab = DBSCAN(eps=spec.alpha, min_samples=spec.min_points).fit(np.column_stack([x, y])).labels_
    return np.where(lab < 0, 0, lab + 1).astype(np.int64)


def kmeans_labels(x, y, k, seed):
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit(np.column_stack([x, y])).labels_ + 1


def scores(true, pred):
    from dpgeo.evaluation import adjusted_mutual_info, adjusted_rand_index

    return adjusted_rand_index(true, pred), adjusted_mutual_info(true, pred)


def span_labels(res, x, y, radius):
    """Points within ``radius`` of a span polygon take its id (first polygon wins where they overlap)."""
    from dpgeo.evaluation import label_points_by_polygons

    if len(res.layer) == 0:
        return np.zeros(x.size, dtype=np.int64)
    return label_points_by_polygons(x, y, res.layer.geometry.buffer(radius), res.layer["cluster_id"].to_numpy())


# -- experiment ------------------------------------------------------------------------

def summarise(values):
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "sd": float(a.std(ddof=1)) if a.size > 1 else 0.0, "n": int(a.size),
            "values": [round(float(v), 6) for v in a]}


def experiment(args):
    import dpgeo

    warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)  # seeded runs: benchmarks only
    warnings.simplefilter("ignore", FutureWarning)
    seeds = list(range(args.seeds))
    out = {"settings": {"seeds": seeds, "epsilons": list(args.epsilons), "phases": args.phases,
                        "crs": BENCH_CRS, "datasets": {k: vars_spec(DATASETS[k]) for k in args.datasets}},
           "results": {}}
    t0 = time.perf_counter()
    phase_rng = np.random.default_rng(20240601)  # public, fixed: the grid phases of the phase study
    phases = phase_rng.uniform(0.0, 1.0, (args.phases, 2))
    for name in args.datasets:
        spec = DATASETS[name]
        x, y, lab = load(spec)
        k = n_true_clusters(lab)
        r = out["results"][name] = {"n": int(x.size), "k": k, "eps": {}}
        lab_db = dbscan_labels(spec, x, y)
        r["dbscan"] = dict(zip(("ARI", "AMI"), scores(lab, lab_db)))
        km = [scores(lab, kmeans_labels(x, y, k, s)) for s in seeds]
        r["kmeans"] = {m: summarise([v[i] for v in km]) for i, m in enumerate(("ARI", "AMI"))}
        for eps in args.epsilons:
            cell = r["eps"][str(eps)] = {}
            for key, beta, extent in (("dpgeo", 0.05, "grown"), ("dpgeo_core", 0.05, "core"),
                                      ("dpgeo_b05", 0.5, "grown"), ("dpgeo_b05_core", 0.5, "core")):
                vals, span_vals, meta = [], [], None
                for s in seeds:
                    res = run_dpgeo(spec, x, y, epsilon=eps, beta=beta, seed=s, extent=extent)
                    vals.append(scores(lab, res.cells.label_points(x, y)))
                    if eps == 1.0:
                        span_vals.append(scores(lab, span_labels(res, x, y, spec.alpha)))
                    meta = res.metadata
                cell[key] = {m: summarise([v[i] for v in vals]) for i, m in enumerate(("ARI", "AMI"))}
                cell[key]["gamma"] = meta["gamma"]
                cell[key]["core_threshold"] = meta["core_threshold"]
                cell[key]["n_cells"] = meta["n_cells"]
                cell[key]["extent_threshold"] = meta["extent_threshold"]
                if span_vals:
                    cell[key + "_alpha_span"] = {m: summarise([v[i] for v in span_vals])
                                                 for i, m in enumerate(("ARI", "AMI"))}
            # MinPts chosen so that the core threshold MinPts + Γ(ε) stays at its ε = 1 value
            # (public: Γ comes from noise_preview); only possible while Γ(ε) < threshold - 1
            target = preview(spec, 1.0, 0.05)["core_threshold"]
            mp = int(round(target - preview(spec, eps, 0.05)["gamma"]))
            if mp >= 1:
                fixed = Spec(spec.label, spec.source, spec.alpha, mp, spec.eta, spec.bbox, spec.ref_key)
                vals = [scores(lab, run_dpgeo(fixed, x, y, epsilon=eps, beta=0.05, seed=s).cells.label_points(x, y))
                        for s in seeds]
                cell["dpgeo_fixT"] = {m: summarise([v[i] for v in vals]) for i, m in enumerate(("ARI", "AMI"))}
                cell["dpgeo_fixT"]["min_points"] = mp
            vals = [scores(lab, dpgeo_kmeans_labels(spec, x, y, k, epsilon=eps, seed=s)) for s in seeds]
            cell["dp_kmeans_dpgeo"] = {m: summarise([v[i] for v in vals]) for i, m in enumerate(("ARI", "AMI"))}
            if not args.skip_dp_kmeans:
                vals = [scores(lab, dp_kmeans_labels(spec, x, y, k, epsilon=eps, seed=s)) for s in seeds]
                cell["dp_kmeans"] = {m: summarise([v[i] for v in vals]) for i, m in enumerate(("ARI", "AMI"))}
            log(f"[{time.perf_counter() - t0:6.1f} s] {spec.label}: ε = {eps:g} done")
        if args.phases:
            w = spec.eta * spec.alpha / math.sqrt(2.0)
            for key, beta in (("dpgeo", 0.05), ("dpgeo_b05", 0.5)):
                means = []
                for fx, fy in phases:
                    b = spec.bbox
                    box = (b[0] - fx * w, b[1] - fy * w, b[2], b[3])
                    means.append(np.mean([scores(lab, run_dpgeo(spec, x, y, epsilon=1.0, beta=beta, seed=s,
                                                                bbox=box).cells.label_points(x, y))[0]
                                          for s in seeds]))
                r.setdefault("phase", {})[key] = {"ARI_mean_over_phases": float(np.mean(means)),
                                                  "ARI_min": float(np.min(means)), "ARI_max": float(np.max(means)),
                                                  "per_phase": [round(float(v), 4) for v in means]}
            log(f"[{time.perf_counter() - t0:6.1f} s] {spec.label}: grid-phase study done")
    out["elapsed_s"] = time.perf_counter() - t0
    return out


def vars_spec(spec):
    return {"alpha": spec.alpha, "min_points": spec.min_points, "eta": spec.eta, "bbox": list(spec.bbox),
            "source": spec.source}


# -- reporting -------------------------------------------------------------------------

def fmt(s):
    return f"{s['mean']:.3f} ± {s['sd']:.3f}"


def tables(out, skip_dp_kmeans):
    res = out["results"]
    lines = []
    eps = "1.0"
    for metric in ("ARI", "AMI"):
        head = ["dataset", "dpgeo β=0.05 grown (default)", "dpgeo β=0.05 core", "dpgeo β=0.5 grown",
                "dpgeo β=0.5 core"]
        if metric == "ARI":
            head.append("authors' code (10 seeds)")
        head += ["paper DP-DBSCAN (3 seeds)", "DP k-means (dpgeo)"]
        if not skip_dp_kmeans:
            head.append("DP k-means (diffprivlib)")
        head += ["paper DP-Kmeans", "DBSCAN (ε=∞)", "k-means (ε=∞)"]
        lines.append(f"\n{metric}, ε = 1, mean ± sd over {len(out['settings']['seeds'])} seeds\n")
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for name, r in res.items():
            spec = DATASETS[name]
            if eps not in r["eps"]:
                continue
            c = r["eps"][eps]
            paper = PAPER_TABLE2[metric][spec.ref_key]
            row = [spec.label] + [fmt(c[m][metric]) for m in ("dpgeo", "dpgeo_core", "dpgeo_b05", "dpgeo_b05_core")]
            if metric == "ARI":
                row.append(f"{REFERENCE_ARI_CODE[spec.ref_key]:.2f}" if name != "circles10" else "–")
            row.append(f"{paper[0]:.2f}")
            row.append(fmt(c["dp_kmeans_dpgeo"][metric]))
            if not skip_dp_kmeans:
                row.append(fmt(c["dp_kmeans"][metric]))
            row += [f"{paper[1]:.2f}", f"{r['dbscan'][metric]:.3f}", fmt(r["kmeans"][metric])]
            lines.append("| " + " | ".join(row) + " |")
    lines.append("\nΓ and core threshold MinPts + Γ at ε = 1 (public; from ε, β, κ and the study area)\n")
    lines.append("| dataset | cells | Γ (β=0.05) | MinPts+Γ | extent threshold | Γ (β=0.5) | MinPts+Γ | "
                 "extent threshold |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for name, r in res.items():
        if eps not in r["eps"]:
            continue
        c = r["eps"][eps]
        lines.append(f"| {DATASETS[name].label} | {c['dpgeo']['n_cells']} | {c['dpgeo']['gamma']:.1f} | "
                     f"{c['dpgeo']['core_threshold']:.1f} | {c['dpgeo']['extent_threshold']:.1f} | "
                     f"{c['dpgeo_b05']['gamma']:.1f} | {c['dpgeo_b05']['core_threshold']:.1f} | "
                     f"{c['dpgeo_b05']['extent_threshold']:.1f} |")
    lines.append("\nARI over the ε sweep (mean over seeds)\n")
    epss = out["settings"]["epsilons"]
    mechs = ["dpgeo", "dpgeo_core", "dpgeo_b05", "dpgeo_fixT", "dp_kmeans_dpgeo"] + (
        [] if skip_dp_kmeans else ["dp_kmeans"])
    head = ["dataset", "mechanism"] + [f"ε={e:g}" for e in epss]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for name, r in res.items():
        for m in mechs:
            vals = []
            for e in epss:
                c = r["eps"][str(e)].get(m)
                if c is None:
                    vals.append("–")
                elif m == "dpgeo_fixT":
                    vals.append(f"{c['ARI']['mean']:.3f} (MinPts {c['min_points']})")
                else:
                    vals.append(f"{c['ARI']['mean']:.3f}")
            lines.append(f"| {DATASETS[name].label} | {MECHANISMS[m]} | " + " | ".join(vals) + " |")
    if any("phase" in r for r in res.values()):
        lines.append(f"\nGrid phase: mean ARI at ε = 1 over {out['settings']['phases']} public grid phases "
                     "(min – max of the per-phase means)\n")
        lines.append("| dataset | dpgeo β=0.05, origin | over phases | dpgeo β=0.5, origin | over phases | "
                     "authors' code |")
        lines.append("|---|---|---|---|---|---|")
        for name, r in res.items():
            if "phase" not in r or eps not in r["eps"]:
                continue
            p, c = r["phase"], r["eps"][eps]
            ref = f"{REFERENCE_ARI_CODE[DATASETS[name].ref_key]:.2f}" if name != "circles10" else "–"
            lines.append(
                f"| {DATASETS[name].label} | {c['dpgeo']['ARI']['mean']:.3f} | "
                f"{p['dpgeo']['ARI_mean_over_phases']:.3f} "
                f"({p['dpgeo']['ARI_min']:.2f} – {p['dpgeo']['ARI_max']:.2f}) | "
                f"{c['dpgeo_b05']['ARI']['mean']:.3f} | {p['dpgeo_b05']['ARI_mean_over_phases']:.3f} "
                f"({p['dpgeo_b05']['ARI_min']:.2f} – {p['dpgeo_b05']['ARI_max']:.2f}) | {ref} |")
    if any("dpgeo_alpha_span" in r["eps"].get(eps, {}) for r in res.values()):
        lines.append("\nα-span labelling (points within α of a span), ε = 1, ARI mean ± sd\n")
        lines.append("| dataset | β=0.05 core spans | α-span of core spans | β=0.05 grown spans | "
                     "α-span of grown spans |")
        lines.append("|---|---|---|---|---|")
        for name, r in res.items():
            c = r["eps"].get(eps)
            if not c or "dpgeo_alpha_span" not in c:
                continue
            lines.append(f"| {DATASETS[name].label} | {fmt(c['dpgeo_core']['ARI'])} | "
                         f"{fmt(c['dpgeo_core_alpha_span']['ARI'])} | {fmt(c['dpgeo']['ARI'])} | "
                         f"{fmt(c['dpgeo_alpha_span']['ARI'])} |")
    return "\n".join(lines)


def plot(out, path, skip_dp_kmeans):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = out["results"]
    names = [n for n in PLOT_SETS if n in res]
    epss = np.array(out["settings"]["epsilons"], dtype=float)
    ncol = 3
    nrow = int(math.ceil(len(names) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(12, 3.6 * nrow), squeeze=False, sharey=True)
    styles = {"dpgeo": ("tab:blue", "o", "-"), "dpgeo_core": ("tab:green", "v", ":"),
              "dpgeo_b05": ("tab:cyan", "s", "--"),
              "dpgeo_fixT": ("tab:purple", "D", "-."), "dp_kmeans_dpgeo": ("tab:brown", "v", "-"),
              "dp_kmeans": ("tab:orange", "^", "--")}
    for ax, name in zip(axes.ravel(), names):
        r = res[name]
        for m, (col, mk, ls) in styles.items():
            if m == "dp_kmeans" and skip_dp_kmeans:
                continue
            have = [str(e) in r["eps"] and m in r["eps"][str(e)] for e in epss]
            es = epss[have]
            mean = np.array([r["eps"][str(e)][m]["ARI"]["mean"] for e in es])
            sd = np.array([r["eps"][str(e)][m]["ARI"]["sd"] for e in es])
            ax.plot(es, mean, color=col, marker=mk, ls=ls, label=MECHANISMS[m])
            if m != "dpgeo_fixT":
                ax.fill_between(es, mean - sd, mean + sd, color=col, alpha=0.15, lw=0)
        ax.axhline(r["dbscan"]["ARI"], color="k", ls=":", lw=1.2, label="DBSCAN (non-private)")
        ref = REFERENCE_ARI_CODE.get(DATASETS[name].ref_key)
        ax.plot([1.0], [ref], marker="*", ms=13, color="tab:red", ls="none", label="authors' code, ε = 1")
        ax.set_xscale("log", base=2)
        ax.set_xticks(epss)
        ax.set_xticklabels([f"{e:g}" for e in epss])
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"{DATASETS[name].label}  (α={DATASETS[name].alpha:g}, MinPts={DATASETS[name].min_points})")
        ax.set_xlabel("ε")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("ARI (mean ± sd)")
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower center", ncol=3, frameon=False, fontsize=9)
    fig.suptitle(f"DP-DBSCAN benchmarks: ARI against the true labels, {len(out['settings']['seeds'])} seeds "
                 "(band: ± 1 sd)")
    fig.tight_layout(rect=(0, 0.09, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main ------------------------------------------------------------------------------

def check_optional(skip_dp_kmeans, need_plot):
    missing = []
    if need_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            missing.append("matplotlib (pip install matplotlib), or pass --no-plot")
    try:
        import sklearn  # noqa: F401
    except ImportError:
        missing.append("scikit-learn (pip install scikit-learn)")
    if not skip_dp_kmeans:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from diffprivlib.models import KMeans  # noqa: F401
        except Exception as exc:  # ImportError, or an incompatible scikit-learn
            missing.append(
                f"diffprivlib with a compatible scikit-learn ({type(exc).__name__}: {exc}); install "
                "\"diffprivlib>=0.6.5\" \"scikit-learn>=1.2,<1.7\" in a separate environment as described in "
                "benchmarks/README.md, or pass --skip-dp-kmeans")
    if missing:
        raise SystemExit("reproduce_dbscan: missing optional package(s):\n  - " + "\n  - ".join(missing))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 seeds, ε ∈ {0.5, 1}, 2 grid phases")
    ap.add_argument("--seeds", type=int, default=SEEDS, help=f"number of seeds (default {SEEDS})")
    ap.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    ap.add_argument("--phases", type=int, default=N_PHASES, help="grid phases of the phase study (0: skip)")
    ap.add_argument("--skip-dp-kmeans", action="store_true", help="do not run diffprivlib's DP k-means")
    ap.add_argument("--no-plot", action="store_true", help="do not write the PNG")
    ap.add_argument("--plot", default=None,
                    help="PNG path of the ε sweep (default docs/img/dbscan_eps_sweep.png; "
                         "a temporary file with --quick)")
    ap.add_argument("--json", default=None, help="also write all numbers to this JSON file")
    args = ap.parse_args(argv)
    args.epsilons = EPSILONS
    if args.quick:
        args.seeds, args.epsilons, args.phases = 2, (0.5, 1.0), min(args.phases, 2)
    if args.plot is None:
        args.plot = (str(Path(tempfile.mkdtemp(prefix="dpgeo-dbscan-")) / "dbscan_eps_sweep.png") if args.quick
                     else str(IMG_DIR / "dbscan_eps_sweep.png"))
    if args.seeds < 1:
        ap.error("--seeds must be >= 1")
    check_optional(args.skip_dp_kmeans, not args.no_plot)
    out = experiment(args)
    print(tables(out, args.skip_dp_kmeans))
    print(f"\nelapsed: {out['elapsed_s']:.1f} s")
    if not args.no_plot and len(args.epsilons) > 1:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(out, args.plot, args.skip_dp_kmeans)
        log(f"wrote {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
