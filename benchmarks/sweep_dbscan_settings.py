"""Sweep of DP-DBSCAN settings on the paper's six benchmarks (prints one line per setting).

For each of gamma in {laplace, exact}, beta in {0.05, 0.2, 0.5} and a factor on the cell width
(eta' times 1, 0.8, 0.7 of the authors' per-dataset grid scale): mean ARI over seeds 0-9 at
epsilon = 1 with core spans (extent="core"), and how many of the six reference means (the authors' code) it beats.
Used for the "settings sweep" section of docs/results.md. About 5 minutes.
"""
import itertools
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers import BENCH_CRS, load_benchmark  # noqa: E402
from sklearn.datasets import make_moons, make_circles, make_blobs
from sklearn.preprocessing import StandardScaler
from sklearn.metrics import adjusted_rand_score as ari
import dpgeo
warnings.simplefilter("ignore")
D={}
x,y=make_circles(2000,noise=0.05,factor=0.5,random_state=30); x=StandardScaler().fit_transform(x); D['circles']=(x[:,0],x[:,1],y,0.2,7,(-3,-3,3,3),0.8)
x,y=make_moons(2000,noise=0.05,random_state=30); x=StandardScaler().fit_transform(x); D['moons']=(x[:,0],x[:,1],y,0.2,7,(-3,-3,3,3),1.0)
x,y=make_blobs(2000,centers=[[1,1],[-1,-1],[1.5,-1.5]],cluster_std=[0.4,0.1,0.75],random_state=30); x=StandardScaler().fit_transform(x); D['blobs']=(x[:,0],x[:,1],y,0.2,7,(-3,-3,3,3),1.0)
for n,a,m,b in [('cluto_t4_8k',9,11,(0,0,650,350)),('cluto_t5_8k',9,20,(0,0,850,200)),('cluto_t7_10k',12,20,(0,0,700,500))]:
    x,y,l=load_benchmark(n); D[n]=(x,y,l,a,m,b,1.0)
ref={'circles':0.29,'moons':0.90,'blobs':0.81,'cluto_t4_8k':0.64,'cluto_t5_8k':0.93,'cluto_t7_10k':0.51}
for gamma,beta,etaf in itertools.product(['laplace','exact'],[0.05,0.2,0.5],[1.0,0.8,0.7]):
    row=[]
    for k,(x,y,l,a,m,b,eta0) in D.items():
        eta=eta0*etaf if etaf!=1.0 else eta0
        s=[ari(l, dpgeo.dbscan_spans((x,y,BENCH_CRS),epsilon=1.0,radius_m=a,min_points=m,domain=b,domain_crs=BENCH_CRS,crs=BENCH_CRS,seed=sd,gamma=gamma,beta=beta,eta=eta,extent="core").cells.label_points(x,y)) for sd in range(10)]
        row.append((k,round(float(np.mean(s)),3)))
    wins=sum(v>ref[k] for k,v in row)
    print(gamma,beta,etaf,wins,row,flush=True)
