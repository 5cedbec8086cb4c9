"""One table: DP-DBSCAN spans, PrivTHR, DP k-means, EPP-KM and DiffHWT on the DP-DBSCAN paper's Table 2 sets.

ε = 1, 10 seeds, ARI of the point labels against the true labels (0 = noise
where a method has noise), the sets, study areas and (α, MinPts) of
``reproduce_dbscan.py`` (Circles with MinPts 7, as in the authors' code).
Every method gets the same public study area and, where it needs one, the
true number of clusters ``k``:

* **DP-DBSCAN spans**: ``dpgeo.dbscan_spans`` with the product defaults
  (β = 0.05, Γ ``laplace``, grown spans) and the paper's (α, MinPts, η′);
* **PrivTHR**: ``dpgeo.wavecluster(method="privthr")`` on cells of the same
  width as DP-DBSCAN's (η′·α/√2, public), percentile 60 (WaveCluster's
  default), Haar; not tuned on these sets;
* **DP k-means (dpgeo)**: ``dpgeo.mechanisms.kmeans`` (DPLloyd with exact
  noise, 5 iterations, 10% of ε for the cell counts), true ``k``;
* **DP k-means (diffprivlib)**: the implementation the paper ran, as a
  cross-check (only when diffprivlib imports; see ``benchmarks/README.md``);
* **EPP-KM**: ``dpgeo.mechanisms.eppkm`` with ``B = 1`` (the most "private"
  setting of its own framework), true ``K`` — **not differentially private**,
  it has no ε;
* **DiffHWT**: ``dpgeo.mechanisms.diffhwt`` with the paper's noise at ε = 1
  (``s = 0``: one value (x + y)/2 per point), then k-means with the true
  ``k`` on the published values — **not differentially private** under
  dpgeo's relation;
* non-private DBSCAN and k-means (ε = ∞) for scale.

Usage::

    python benchmarks/compare_methods.py                # a few minutes on 2 cores
    python benchmarks/compare_methods.py --seeds 2      # smoke run
    python benchmarks/compare_methods.py --json methods.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reproduce_dbscan as rd  # noqa: E402  (the datasets and loaders of the Table 2 reproduction)

SETS = ("circles", "moons", "blobs", "t4", "t5", "t7")
METHODS = {
    "spans": "DP-DBSCAN spans (dpgeo default)",
    "privthr": "PrivTHR",
    "kmeans": "DP k-means (dpgeo)",
    "diffprivlib": "DP k-means (diffprivlib)",
    "eppkm": "EPP-KM, B = 1 (NOT DP)",
    "diffhwt": "DiffHWT (NOT DP)",
}
DP_METHODS = ("spans", "privthr", "kmeans", "diffprivlib")


def labels(method, spec, x, y, k, seed, epsilon):
    import dpgeo
    from dpgeo import StudyArea
    from dpgeo.noise import NoiseSource

    area = StudyArea.from_bbox(spec.bbox, crs=rd.BENCH_CRS, working_crs=rd.BENCH_CRS)
    if method == "spans":
        return rd.run_dpgeo(spec, x, y, epsilon=epsilon, beta=0.05, seed=seed).cells.label_points(x, y)
    if method == "privthr":
        res = dpgeo.wavecluster((x, y, rd.BENCH_CRS), method="privthr", epsilon=epsilon,
                                cell_m=spec.eta * spec.alpha / math.sqrt(2.0), percentile=60.0, domain=area,
                                crs=rd.BENCH_CRS, seed=seed)
        return res.cells.label_points(x, y)
    if method == "kmeans":
        from dpgeo.mechanisms.kmeans import kmeans_layer

        return kmeans_layer(x, y, area=area, k=k, epsilon=epsilon, rng=NoiseSource(seed)).label_points(x, y)
    if method == "diffprivlib":
        return rd.dp_kmeans_labels(spec, x, y, k, epsilon=epsilon, seed=seed)
    if method == "eppkm":
        from dpgeo.mechanisms.eppkm import eppkm

        return eppkm(x, y, K=k, B=1, rng=seed).labels
    if method == "diffhwt":
        from dpgeo.mechanisms.diffhwt import diffhwt_points

        rel = diffhwt_points(x, y, area=area, epsilon=epsilon, rng=seed)
        out = np.zeros(x.size, dtype=np.int64)
        out[rel.rows] = rel.cluster(k, rng=seed)
        return out
    raise ValueError(method)


def have_diffprivlib():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from diffprivlib.models import KMeans  # noqa: F401
        return True
    except Exception:  # ImportError, or an incompatible scikit-learn
        return False


def experiment(args):
    import dpgeo

    warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)  # seeded runs: benchmarks only
    warnings.simplefilter("ignore", FutureWarning)
    methods = [m for m in METHODS if m != "diffprivlib" or args.diffprivlib]
    out = {"settings": {"epsilon": args.epsilon, "seeds": list(range(args.seeds)), "methods": methods},
           "results": {}}
    t0 = time.perf_counter()
    for name in args.datasets:
        spec = rd.DATASETS[name]
        x, y, lab = rd.load(spec)
        k = rd.n_true_clusters(lab)
        r = out["results"][name] = {"k": k, "n": int(x.size)}
        for m in methods:
            vals = [rd.scores(lab, labels(m, spec, x, y, k, s, args.epsilon))[0] for s in range(args.seeds)]
            r[m] = rd.summarise(vals)
        r["dbscan"] = rd.scores(lab, rd.dbscan_labels(spec, x, y))[0]
        r["kmeans_exact"] = rd.summarise([rd.scores(lab, rd.kmeans_labels(x, y, k, s))[0]
                                          for s in range(args.seeds)])
        rd.log(f"[{time.perf_counter() - t0:6.1f} s] {spec.label} done")
    out["elapsed_s"] = time.perf_counter() - t0
    return out


def table(out):
    methods = out["settings"]["methods"]
    head = ["dataset", "k"] + [METHODS[m] for m in methods] + ["best DP method", "DBSCAN (ε=∞)",
                                                                 "k-means (ε=∞)"]
    lines = [f"ARI, ε = {out['settings']['epsilon']:g}, mean ± sd over {len(out['settings']['seeds'])} seeds "
             "(EPP-KM has no ε)\n", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in out["results"].items():
        dp = [m for m in methods if m in DP_METHODS]
        best = max(dp, key=lambda m: r[m]["mean"])
        cells = []
        for m in methods:
            v = f"{r[m]['mean']:.3f} ± {r[m]['sd']:.3f}"
            cells.append(f"**{v}**" if m == best else v)
        lines.append(f"| {rd.DATASETS[name].label} | {r['k']} | " + " | ".join(cells)
                     + f" | {METHODS[best]} | {r['dbscan']:.3f} | {r['kmeans_exact']['mean']:.3f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--datasets", nargs="+", choices=list(rd.DATASETS), default=list(SETS))
    ap.add_argument("--skip-diffprivlib", action="store_true", help="leave out diffprivlib's DP k-means")
    ap.add_argument("--json", default=None, help="also write every number to this JSON file")
    args = ap.parse_args(argv)
    args.diffprivlib = not args.skip_diffprivlib and have_diffprivlib()
    if not args.skip_diffprivlib and not args.diffprivlib:
        rd.log("compare_methods: diffprivlib does not import here; its column is left out "
               "(see benchmarks/README.md)")
    out = experiment(args)
    print(table(out))
    print(f"\nelapsed: {out['elapsed_s']:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
        rd.log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
