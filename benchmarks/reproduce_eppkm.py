"""Reproduce EPP-KM's headline (Nguyen et al., PAKDD 2016, Fig. 1): utility ≈ k-means, far above DP k-means.

The paper's synthetic set (its §3.1): three clusters of 60 points each,
bivariate normal with standard deviation 1 around (0, 0), (5, 0) and (4, 4),
generated once here from a fixed seed. As in the paper, every method is run
from 30 random initialisations and scored with NMI against the true labels;
the data-size study subsamples 25–100% of the points at a fixed privacy
level (the paper's Fig. 1d, ε = 0.1).

Compared:

* k-means (Lloyd from ``K`` random data points, non-private) — "KM";
* EPP-KM with ``B`` ∈ {1, 10, 100} bags (``dpgeo.mechanisms.eppkm``; **not
  differentially private**, it has no ε: ``B`` is its only knob, and its
  privacy bound is an upper bound on ``B``, so ``B = 1`` is its most
  "private" setting);
* dpgeo's DP k-means at ε ∈ {0.1, 0.5, 1, 2, 5} over the public box
  (−4, −4, 9, 8) (the generating centres ± 4 standard deviations);
* diffprivlib's DP k-means at the same ε and box, when it imports.

Finally a membership attack shows what EPP-KM's output reveals: one extra
record far from the rest (at (1000, 1000)) is, in most initialisations, a
cluster of its own, and a cluster of one point is published exactly.

Usage::

    python benchmarks/reproduce_eppkm.py           # a few minutes on 2 cores
    python benchmarks/reproduce_eppkm.py --quick   # 5 initialisations
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
BAGS = (1, 10, 100)
BOX = (-4.0, -4.0, 9.0, 8.0)
CRS = "EPSG:32631"  # abstract coordinates treated as metres
FRACTIONS = (0.25, 0.5, 0.75, 1.0)


def synthetic(seed=20160419):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [5.0, 0.0], [4.0, 4.0]])
    X = np.concatenate([rng.normal(c, 1.0, (60, 2)) for c in centres])
    return X, np.repeat([1, 2, 3], 60)


def nmi(a, b):
    from sklearn.metrics import normalized_mutual_info_score

    return float(normalized_mutual_info_score(a, b))


def run(method, X, K, seed, *, B=None, epsilon=None):
    """Labels (1..K) of one run."""
    if method == "km":
        from dpgeo.mechanisms._lloyd import lloyd

        return lloyd(X, K, np.random.default_rng(seed), init="points")[1] + 1
    if method == "eppkm":
        from dpgeo.mechanisms.eppkm import eppkm

        return eppkm(X, K=K, B=B, rng=seed).labels
    if method == "dpgeo":
        from dpgeo import StudyArea
        from dpgeo.mechanisms.kmeans import kmeans_layer
        from dpgeo.noise import NoiseSource

        area = StudyArea.from_bbox(BOX, crs=CRS, working_crs=CRS)
        return kmeans_layer(X[:, 0], X[:, 1], area=area, k=K, epsilon=epsilon,
                            rng=NoiseSource(seed)).label_points(X[:, 0], X[:, 1])
    if method == "diffprivlib":
        from diffprivlib.models import KMeans

        km = KMeans(n_clusters=K, epsilon=epsilon, bounds=([BOX[0], BOX[1]], [BOX[2], BOX[3]]),
                    random_state=seed)
        return np.asarray(km.fit(X).labels_) + 1
    raise ValueError(method)


def have_diffprivlib():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from diffprivlib.models import KMeans  # noqa: F401
        return True
    except Exception:
        return False


def stat(v):
    a = np.asarray(v, float)
    return {"mean": float(a.mean()), "sd": float(a.std(ddof=1)) if a.size > 1 else 0.0}


def experiment(inits, use_dpl):
    import dpgeo

    warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)
    warnings.simplefilter("ignore", FutureWarning)
    X, truth = synthetic()
    K = 3
    out = {"nmi": {}, "size": {}, "attack": {}}
    out["nmi"]["KM"] = stat([nmi(truth, run("km", X, K, s)) for s in range(inits)])
    for B in BAGS:
        out["nmi"][f"EPP-KM B={B}"] = stat([nmi(truth, run("eppkm", X, K, s, B=B)) for s in range(inits)])
    for eps in EPSILONS:
        out["nmi"][f"DP k-means (dpgeo) ε={eps:g}"] = stat(
            [nmi(truth, run("dpgeo", X, K, s, epsilon=eps)) for s in range(inits)])
        if use_dpl:
            out["nmi"][f"DP k-means (diffprivlib) ε={eps:g}"] = stat(
                [nmi(truth, run("diffprivlib", X, K, s, epsilon=eps)) for s in range(inits)])
    # data size at ε = 0.1 (the paper's Fig. 1d): random subsamples, a few initialisations each
    rng = np.random.default_rng(1)
    for frac in FRACTIONS:
        row = {"KM": [], "EPP-KM B=1": [], "DP k-means (dpgeo)": []}
        if use_dpl:
            row["DP k-means (diffprivlib)"] = []
        for rep in range(max(2, inits // 3)):
            idx = np.sort(rng.choice(X.shape[0], int(round(frac * X.shape[0])), replace=False))
            Xs, ts = X[idx], truth[idx]
            for s in range(3):
                seed = 1000 * rep + s
                row["KM"].append(nmi(ts, run("km", Xs, K, seed)))
                row["EPP-KM B=1"].append(nmi(ts, run("eppkm", Xs, K, seed, B=1)))
                row["DP k-means (dpgeo)"].append(nmi(ts, run("dpgeo", Xs, K, seed, epsilon=0.1)))
                if use_dpl:
                    row["DP k-means (diffprivlib)"].append(nmi(ts, run("diffprivlib", Xs, K, seed, epsilon=0.1)))
        out["size"][f"{frac:.0%}"] = {k: stat(v) for k, v in row.items()}
    # membership attack: a far record forms a cluster of its own, and EPP-KM publishes it exactly
    from dpgeo.mechanisms.eppkm import eppkm

    x_r = np.array([1000.0, 1000.0])
    Xr = np.vstack([X, x_r])
    for B in BAGS:
        exact = sum(bool((eppkm(Xr, K=K, B=B, rng=s).centroids == x_r).all(axis=1).any()) for s in range(inits))
        far = sum(bool((np.abs(eppkm(Xr, K=K, B=B, rng=s).centroids) > 100).any()) for s in range(inits))
        without = sum(bool((np.abs(eppkm(X, K=K, B=B, rng=s).centroids) > 100).any()) for s in range(inits))
        out["attack"][f"B={B}"] = {"published_exactly": exact / inits, "centroid_beyond_100": far / inits,
                                   "without_record_beyond_100": without / inits}
    return out


def report(out, inits):
    lines = [f"NMI against the true labels, {inits} initialisations (mean ± sd), the paper's synthetic set\n",
             "| method | NMI |", "|---|---|"]
    lines += [f"| {k} | {v['mean']:.3f} ± {v['sd']:.3f} |" for k, v in out["nmi"].items()]
    methods = list(next(iter(out["size"].values())))
    lines += ["\nNMI against the share of the data used, ε = 0.1 for DP k-means (the paper's Fig. 1d)\n",
              "| share | " + " | ".join(methods) + " |", "|" + "---|" * (len(methods) + 1)]
    for frac, row in out["size"].items():
        lines.append(f"| {frac} | " + " | ".join(f"{row[m]['mean']:.3f}" for m in methods) + " |")
    lines += ["\nMembership attack: one extra record at (1000, 1000); share of initialisations in which\n",
              "| bags | a published centroid is the record itself | a centroid is beyond 100 | "
              "the same without the record |", "|---|---|---|---|"]
    for B, a in out["attack"].items():
        lines.append(f"| {B} | {a['published_exactly']:.0%} | {a['centroid_beyond_100']:.0%} | "
                     f"{a['without_record_beyond_100']:.0%} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inits", type=int, default=30, help="random initialisations per method (default 30)")
    ap.add_argument("--quick", action="store_true", help="5 initialisations")
    ap.add_argument("--skip-diffprivlib", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    inits = 5 if args.quick else args.inits
    use_dpl = not args.skip_diffprivlib and have_diffprivlib()
    t0 = time.perf_counter()
    out = experiment(inits, use_dpl)
    print(report(out, inits))
    print(f"\nelapsed: {time.perf_counter() - t0:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
