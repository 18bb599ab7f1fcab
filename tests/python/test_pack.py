"""Pack mode (DataLoader(..., mode="pack"), PassLoader(..., pack_length=L)):
batches of rows of exactly L tokens over a corpus of known documents, with
segment_ids, positions, seq_lens and cu_seqlens; every policy placing each
document exactly once per pass, in order; the same batches for any worker
count, after a resume from state(), and split across ranks; a state with
other packing options refused."""

import numpy as np
import pytest

from loaderx.dataloader import DataLoader, PassLoader
from loaderx.zrecord import DenseStore, RaggedStore

POLICIES = ("first_fit", "best_fit", "concat")
L = 40
N = 150


def doc_len(d):
    r = (d * 2654435761) % 1000
    return 0 if d == 7 else (45 + r % 90 if r % 9 == 0 else 1 + r % 30)


def token(d, j):
    return d * 4096 + j


@pytest.fixture
def corpus(tmp_path):
    """tokens (int32 [n]), mask (uint8 [n], aligned) and pair (float32
    [n, 2], aligned) of N documents whose every token names (doc, index)."""
    lens = [doc_len(d) for d in range(N)]
    with RaggedStore.create(str(tmp_path / "tokens"), "int32") as s:
        s.append([np.array([token(d, j) for j in range(n)], dtype=np.int32)
                  for d, n in enumerate(lens)])
    with RaggedStore.create(str(tmp_path / "mask"), "uint8", codec="raw") as s:
        s.append([np.array([(d + j) % 251 for j in range(n)], dtype=np.uint8)
                  for d, n in enumerate(lens)])
    with RaggedStore.create(str(tmp_path / "pair"), "float32") as s:
        s.append([np.array([[d, j] for j in range(n)], dtype=np.float32).reshape(n, 2)
                  for d, n in enumerate(lens)])
    stores = {k: RaggedStore.open(str(tmp_path / k), readonly=True)
              for k in ("tokens", "mask", "pair")}
    yield stores, lens
    for s in stores.values():
        s.close()


def placed(n, overlong):
    if n <= L or overlong == "split":
        return n
    return L if overlong == "truncate" else 0


def check_batch(b, lens, covered, policy, overlong="split", aligned=True):
    """The acceptance checks on one batch; adds to covered[d] what each
    document got."""
    tok, seg, pos = b["tokens"], b["segment_ids"], b["positions"]
    sl, cu = b["seq_lens"], b["cu_seqlens"]
    rows = tok.shape[0]
    assert tok.shape == (rows, L) and tok.dtype == np.int32
    assert seg.shape == pos.shape == (rows, L) and seg.dtype == pos.dtype == np.int32
    assert sl.dtype == cu.dtype == np.int32 and sl.shape[0] == rows
    assert cu[0] == 0 and cu.shape == (int((sl > 0).sum()) + 1,)
    real = seg > 0
    # seq_lens sum to the non-padding count, row by row and in all
    assert (sl.sum(axis=1) == real.sum(axis=1)).all()
    assert cu[-1] == real.sum()
    # cu_seqlens: the segments of tokens[segment_ids > 0], row-major
    assert (np.diff(cu) == sl[sl > 0]).all()
    flat = tok[real]
    for r in range(rows):
        k = int(seg[r].max())
        assert (seg[r][:real[r].sum()] > 0).all()           # padding only at the end
        assert (tok[r][~real[r]] == 0).all()
        starts = [0] + list(np.cumsum(sl[r][:k])[:-1])
        for i in range(k):
            n = int(sl[r, i])
            s = slice(int(starts[i]), int(starts[i]) + n)
            assert (seg[r, s] == i + 1).all()                 # one segment, in the row
            assert (pos[r, s] == np.arange(n)).all()          # positions restart
            d, off = divmod(int(tok[r, s.start]), 4096)
            assert (tok[r, s] == token(d, np.arange(off, off + n))).all()  # in order
            if policy == "concat":
                assert off == covered.get(d, 0)
            elif n == L:
                assert off % L == 0
            else:
                assert off == placed(lens[d], overlong) // L * L
            covered[d] = covered.get(d, 0) + n
            if aligned:
                assert (b["mask"][r, s] == (d + np.arange(off, off + n)) % 251).all()
                assert b["pair"].shape == (rows, L, 2)
                assert (b["pair"][r, s, 0] == d).all()
                assert (b["pair"][r, s, 1] == np.arange(off, off + n)).all()
    assert flat.size == cu[-1]
    return rows


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("overlong", ("split", "truncate", "drop"))
def test_known_corpus_one_pass(corpus, policy, overlong):
    stores, lens = corpus
    covered = {}
    rows = 0
    with PassLoader(stores, batch_size=4, shuffle=True, seed=3, epoch=1, pack_length=L,
                    pack_policy=policy, pack_window=32, pack_overlong=overlong,
                    num_workers=2) as p:
        for b in p:
            rows += check_batch(b, lens, covered, policy, overlong)
        assert len(p) == len(list(p))
    for d, n in enumerate(lens):
        assert covered.get(d, 0) == placed(n, overlong)       # exactly once
    total = sum(placed(n, overlong) for n in lens)
    if policy == "concat":
        assert rows == -(-total // L)


@pytest.mark.parametrize("policy", POLICIES)
def test_workers_resume_and_seek(corpus, policy):
    stores, lens = corpus
    tokens = {"tokens": stores["tokens"], "mask": stores["mask"]}
    kw = dict(batch_size=6, mode="pack", pack_length=L, pack_policy=policy, pack_window=24,
              seed=9)

    def take(loader, n):
        out = []
        for _ in range(n):
            b = next(loader)
            out.append({k: v.copy() for k, v in b.items()})
        return out

    with DataLoader(tokens, num_workers=1, **kw) as a:
        ref = take(a, 30)                                      # several epochs
    for workers in (0, 3):
        with DataLoader(tokens, num_workers=workers, **kw) as b:
            got = take(b, 30)
        for x, y in zip(ref, got):
            assert x.keys() == y.keys()
            for k in x:
                assert np.array_equal(x[k], y[k]), (workers, k)
    with DataLoader(tokens, num_workers=2, start_step=11, **kw) as c:  # a seek
        got = take(c, 4)
        state = c.state()
    for x, y in zip(ref[11:15], got):
        assert all(np.array_equal(x[k], y[k]) for k in x)
    assert state["mode"] == "pack" and state["pack_length"] == L
    assert state["pack_policy"] == policy and state["step"] == 15
    with DataLoader.from_state(tokens, state, num_workers=2) as d:
        got = take(d, 10)
    for x, y in zip(ref[15:25], got):
        assert all(np.array_equal(x[k], y[k]) for k in x)
    with DataLoader(tokens, num_workers=1, **state) as e:        # DataLoader(streams, **state)
        got = take(e, 2)
    assert all(np.array_equal(ref[15][k], got[0][k]) for k in got[0])
    # a resume with other packing options is refused, naming them
    with pytest.raises(ValueError, match="pack_length: 40 in the state, 41 now"):
        DataLoader.from_state(tokens, state, pack_length=L + 1)
    with pytest.raises(ValueError, match="pack_policy: '" + policy + "' in the state"):
        DataLoader.from_state(tokens, state,
                              pack_policy="first_fit" if policy != "first_fit" else "concat")
    with pytest.raises(ValueError, match="pack_window: 24 in the state, 25 now"):
        DataLoader.from_state(tokens, state, pack_window=25)
    with pytest.raises(ValueError, match="apply only to mode='pack'"):
        DataLoader.from_state(tokens, state, mode="cyclic")
    # load_state_dict takes the packing options from the state
    with DataLoader(tokens, num_workers=1, **dict(kw, pack_window=None)) as g:
        g.load_state_dict(state)
        got = take(g, 1)
    assert all(np.array_equal(ref[15][k], got[0][k]) for k in got[0])
    # every epoch places each document once: count tokens over whole epochs
    covered = {}
    with DataLoader({"tokens": stores["tokens"]}, batch_size=1, mode="pack", pack_length=L,
                    pack_policy=policy, seed=2, num_workers=2) as f:
        total = sum(lens)
        got = 0
        while got < total:
            b = next(f)
            check_batch(b, lens, covered, policy, aligned=False)
            got += int((b["segment_ids"] > 0).sum())
    assert got == total and all(covered.get(d, 0) == n for d, n in enumerate(lens))


@pytest.mark.parametrize("policy", POLICIES)
def test_ranks_split_the_global_batch(corpus, policy):
    stores, lens = corpus
    s = {"tokens": stores["tokens"]}
    B, W = 2, 3
    kw = dict(mode="pack", pack_length=L, pack_policy=policy, seed=4, num_workers=2)
    with DataLoader(s, batch_size=B * W, **kw) as g:
        glob = [next(g) for _ in range(8)]
    ranks = [DataLoader(s, batch_size=B, rank=r, world_size=W, **kw) for r in range(W)]
    try:
        for step in range(8):
            parts = [next(r) for r in ranks]
            for k in ("tokens", "segment_ids", "positions"):
                assert np.array_equal(np.concatenate([p[k] for p in parts]), glob[step][k])
    finally:
        for r in ranks:
            r.close()
    # a finite pass: each document on exactly one rank, once
    covered = {}
    for r in range(W):
        with PassLoader(s, batch_size=B, pack_length=L, pack_policy=policy, rank=r,
                        world_size=W, shuffle=True) as p:
            for b in p:
                for row, sg in zip(b["tokens"], b["segment_ids"]):
                    for t in row[sg > 0]:
                        d, j = divmod(int(t), 4096)
                        covered.setdefault(d, set()).add(j)
    for d, n in enumerate(lens):
        assert covered.get(d, set()) == set(range(n))
        

def test_refusals(corpus, tmp_path):
    stores, lens = corpus
    with pytest.raises(ValueError, match="pack_length"):
        DataLoader({"tokens": stores["tokens"]}, batch_size=2, mode="pack")
    with pytest.raises(ValueError, match="pack_policy"):
        DataLoader({"tokens": stores["tokens"]}, batch_size=2, mode="pack", pack_length=L,
                   pack_policy="worst_fit")
    with pytest.raises(ValueError, match="pack_length"):
        DataLoader({"tokens": stores["tokens"]}, batch_size=2, mode="pack", pack_length=0)
    with pytest.raises(ValueError, match="only.*pack"):
        DataLoader({"tokens": stores["tokens"]}, batch_size=2, pack_length=L)
    with DenseStore.create(str(tmp_path / "label"), "int64", ()) as d:
        d.append(np.arange(N))
    label = DenseStore.open(str(tmp_path / "label"), readonly=True)
    try:
        with pytest.raises(ValueError, match="dense"):
            DataLoader({"tokens": stores["tokens"], "label": label}, batch_size=2, mode="pack",
                       pack_length=L)
    finally:
        label.close()
    with pytest.raises(ValueError, match="segment_ids"):
        DataLoader({"segment_ids": stores["tokens"]}, batch_size=2, mode="pack", pack_length=L)
    # not aligned: tokens against a store of other lengths
    with RaggedStore.create(str(tmp_path / "odd"), "int32") as s:
        s.append([np.zeros(doc_len(d) + (d == 3), dtype=np.int32) for d in range(N)])
    odd = RaggedStore.open(str(tmp_path / "odd"), readonly=True)
    try:
        with pytest.raises(ValueError, match="not aligned.*record 3"):
            DataLoader({"tokens": stores["tokens"], "odd": odd}, batch_size=2, mode="pack",
                       pack_length=L)
    finally:
        odd.close()
