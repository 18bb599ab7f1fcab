"""Native pad of ragged batches (loaderx.dataloader.pad) against the numpy loop
users write: python3 bench/bench_pad.py (prints us per batch and the ratio)."""
import numpy as np, time, sys
from loaderx.dataloader import pad
rng=np.random.default_rng(0)
recs=[rng.integers(0,50000,size=int(n),dtype=np.int32) for n in rng.integers(20,600,size=64)]
a,l=pad(recs)
L=max(len(r) for r in recs)
ref=np.zeros((64,L),np.int32)
for i,r in enumerate(recs): ref[i,:len(r)]=r
assert np.array_equal(a,ref) and l.tolist()==[len(r) for r in recs]
a,m=pad(recs,length=100,pad_value=-1,return_mask=True); assert a.shape==(64,100) and m.sum()==sum(min(len(r),100) for r in recs)
assert (a[~m]==-1).all()
def nploop(recs):
    L=max(len(r) for r in recs); out=np.zeros((len(recs),L),recs[0].dtype); lens=np.empty(len(recs),np.int64)
    for i,r in enumerate(recs): out[i,:len(r)]=r; lens[i]=len(r)
    return out,lens
res={}
for f in (pad,nploop):
    best=1e9
    for rep in range(5):
        t=time.perf_counter()
        for _ in range(400): f(recs)
        best=min(best,(time.perf_counter()-t)/400*1e6)
    res[f.__name__]=best
    print(f.__name__, f"{best:.1f} us per batch of 64 int32 records (20..600 tokens)")
print(f"speed ratio numpy loop / native pad: {res['nploop']/res['pad']:.1f}x")
