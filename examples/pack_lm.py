#!/usr/bin/env python3
"""A small causal language model trained on CPU from packed batches.

Documents of different lengths share rows of exactly ``--length`` tokens
(``DataLoader(..., mode="pack")``); each batch says where every document
starts and ends (``segment_ids``, ``positions``). The model must then
attend only within a document: the attention mask is built from
``segment_ids`` (an explicit boolean mask for
``scaled_dot_product_attention``, or with ``--attention flex`` a
``flex_attention`` block mask), and the position embedding reads
``positions``, which restart at 0 for each document. With that, a token's
loss does not depend on which documents share its row, so it must equal the
loss of the same document alone in a padded row. ``boundary_check`` compares
the two, token by token, on the same weights: that is the check that the
boundaries are right (a plain causal mask fails it).

The corpus (``--corpus``):
  linux-doc  (default) the GPT-2 BPE tokens of Debian's linux-doc-6.1, one
             document per paragraph of the first ``--files`` documentation
             files (median 30 tokens, so rows hold many documents), as the
             benchmarks tokenize them (bench/prepare.py: the npm package gpt-3-encoder, run
             once and cached; needs node and npm). The tiny model keeps
             the ``--vocab`` - 1 most frequent GPT-2 tokens of the files it
             uses and maps every other token to one shared id.
  stdlib     the byte-level tokens (vocabulary 256) of the Python standard
             library's own source files, one document per file (nothing to
             install).
The documents are written once into a RaggedStore (int32 records for
linux-doc, uint8 for stdlib).

Usage:
    python3 examples/pack_lm.py [--corpus linux-doc|stdlib] [--store DIR]
                                [--steps 300] [--batch-size 8] [--length 256]
                                [--policy best_fit] [--attention mask|flex]
                                [--files 400] [--vocab 4096]
"""
import argparse
import os
import sys
import sysconfig
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from loaderx.dataloader import DataLoader
from loaderx.zrecord import RaggedStore

VOCAB = 256  # byte-level tokens (the stdlib corpus)
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")


# ------------------------------------------------------------------ data

def stdlib_documents(count):
    """The bytes of the first `count` .py files of the standard library
    (sorted paths: the same documents on every run of one Python)."""
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "__pycache__", "test"))
        paths.extend(os.path.join(d, f) for f in sorted(files) if f.endswith(".py"))
        if len(paths) >= 4 * count:
            break
    docs = []
    for p in sorted(paths)[:count]:
        with open(p, "rb") as fh:
            data = fh.read()
        if data:
            docs.append(np.frombuffer(data, dtype=np.uint8))
    return docs


def linux_doc_documents(count, vocab):
    """The GPT-2 BPE tokens of the paragraphs of the first `count` files
    of linux-doc-6.1 (bench/prepare.py's corpus, in its walk order), each
    token id mapped to its rank among the most frequent `vocab` - 1 ids of
    these paragraphs (0 the most frequent); every other id becomes
    `vocab` - 1. A list of int32 arrays, one per paragraph."""
    sys.path.insert(0, BENCH)
    import prepare
    tokens, lengths = prepare.load()
    fstarts, flengths = prepare.load_files()
    end = int(fstarts[count] if count < fstarts.size else fstarts[-1] + flengths[-1])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    keep = starts < end
    docs = [np.asarray(tokens[o:o + n])
            for o, n in zip(starts[keep].tolist(), lengths[keep].tolist())]
    ids, freq = np.unique(np.concatenate(docs), return_counts=True)
    keep = ids[np.argsort(-freq, kind="stable")[:vocab - 1]]
    table = np.full(int(ids.max()) + 1, vocab - 1, dtype=np.int32)
    table[keep] = np.arange(keep.size, dtype=np.int32)
    return [table[d] for d in docs]


def build_store(path, docs):
    """A RaggedStore of the documents (records of their dtype), or the one
    at path."""
    if not os.path.isdir(path):
        with RaggedStore.create(path, dtype=docs[0].dtype.name, codec="zstd") as s:
            s.append(docs)
    return RaggedStore.open(path, readonly=True)


# ----------------------------------------------------------------- model

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, D // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if isinstance(mask, torch.Tensor):
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:  # a flex_attention BlockMask
            from torch.nn.attention.flex_attention import flex_attention
            a = flex_attention(q, k, v, block_mask=mask)
        x = x + self.out(a.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Token + position embeddings, pre-norm transformer blocks, tied head."""

    def __init__(self, length, d=64, heads=4, layers=2, vocab=VOCAB):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(length, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, tokens, positions, mask):
        x = self.tok(tokens) + self.pos(positions)
        for b in self.blocks:
            x = b(x, mask)
        return self.ln(x) @ self.tok.weight.T


# ------------------------------------------------------- masks and losses

def segment_mask(segment_ids):
    """[B, 1, T, T] bool: query i sees key j when both are in the same
    segment and j <= i. A padding position (segment 0) sees only itself, so
    no softmax row is empty (its loss is never counted)."""
    s = segment_ids
    T = s.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    same = (s[:, :, None] == s[:, None, :]) & (s[:, :, None] > 0)
    eye = torch.eye(T, dtype=torch.bool)
    return ((same & causal) | (eye & (s[:, :, None] == 0)))[:, None]


def flex_mask(segment_ids):
    """The same rule as a flex_attention BlockMask."""
    from torch.nn.attention.flex_attention import create_block_mask
    s = segment_ids
    B, T = s.shape

    def rule(b, h, q, k):
        return ((s[b, q] == s[b, k]) & (s[b, q] > 0) & (k <= q)) | ((q == k) & (s[b, q] == 0))

    return create_block_mask(rule, B, None, T, T, device=s.device)


def causal_mask(segment_ids):
    """The wrong mask: causal over the whole row, across documents."""
    T = segment_ids.shape[1]
    return torch.ones(T, T, dtype=torch.bool).tril()[None, None].expand(segment_ids.shape[0], 1, T, T)


def next_token_targets(tokens, segment_ids):
    """Targets: the next token of the same segment; -100 (ignored) at a
    segment's last token and on padding."""
    t = torch.full_like(tokens, -100)
    same = (segment_ids[:, 1:] == segment_ids[:, :-1]) & (segment_ids[:, :-1] > 0)
    t[:, :-1] = torch.where(same, tokens[:, 1:], t[:, :-1])
    return t


def token_losses(model, tokens, positions, segment_ids, mask):
    """Per-token cross-entropy of every counted target, in row-major order."""
    logits = model(tokens, positions, mask)
    targets = next_token_targets(tokens, segment_ids)
    keep = targets != -100
    return F.cross_entropy(logits[keep], targets[keep], reduction="none")


def unpack(batch):
    """Each segment of a packed batch alone in a padded row of the same
    length: tokens, positions, segment_ids [segments, T] in the packed
    batch's segment order."""
    tok, seg = batch["tokens"], batch["segment_ids"]
    T = tok.shape[1]
    rows = []
    for r in range(tok.shape[0]):
        for k in range(1, int(seg[r].max()) + 1):
            piece = tok[r][seg[r] == k]
            rows.append(piece)
    n = len(rows)
    out_tok = np.zeros((n, T), dtype=tok.dtype)
    out_seg = np.zeros((n, T), dtype=np.int32)
    out_pos = np.zeros((n, T), dtype=np.int32)
    for i, piece in enumerate(rows):
        out_tok[i, :len(piece)] = piece
        out_seg[i, :len(piece)] = 1
        out_pos[i, :len(piece)] = np.arange(len(piece))
    return out_tok, out_pos, out_seg


def to_torch(a):
    return torch.from_numpy(np.ascontiguousarray(a)).long()


def boundary_check(model, batch, mask_fn=segment_mask):
    """The loss of every token of a packed batch (mask from mask_fn) and of
    the same tokens, each document alone in a padded row: the largest
    difference, and how many tokens were compared."""
    with torch.no_grad():
        packed = token_losses(model, to_torch(batch["tokens"]), to_torch(batch["positions"]),
                              to_torch(batch["segment_ids"]), mask_fn(to_torch(batch["segment_ids"])))
        tok, pos, seg = unpack(batch)
        alone = token_losses(model, to_torch(tok), to_torch(pos), to_torch(seg),
                             segment_mask(to_torch(seg)))
    if packed.shape != alone.shape:
        return float("inf"), 0
    return float((packed - alone).abs().max()), int(packed.numel())


# ------------------------------------------------------------------ main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", help="the RaggedStore of documents (made if missing; "
                    "default: a temporary directory)")
    ap.add_argument("--corpus", default="linux-doc", choices=("linux-doc", "stdlib"))
    ap.add_argument("--files", type=int, default=400, help="documentation (or standard-library) "
                    "files to use")
    ap.add_argument("--vocab", type=int, default=4096,
                    help="linux-doc: the model's vocabulary (most frequent GPT-2 tokens + 1)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--length", type=int, default=256, help="tokens per row")
    ap.add_argument("--policy", default="best_fit", choices=("first_fit", "best_fit", "concat"))
    ap.add_argument("--attention", default="mask", choices=("mask", "flex"))
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    tmp = None
    path = args.store
    if path is None:
        tmp = tempfile.TemporaryDirectory(prefix="pack_lm-")
        path = os.path.join(tmp.name, "docs")
    docs = None
    if not os.path.isdir(path):
        docs = (linux_doc_documents(args.files, args.vocab) if args.corpus == "linux-doc"
                else stdlib_documents(args.files))
    store = build_store(path, docs)
    vocab = args.vocab if store.dtype == np.int32 else VOCAB
    lengths = [len(store[i]) for i in range(len(store))]
    print(f"{len(store)} documents, {sum(lengths)} tokens (median {int(np.median(lengths))}, "
          f"vocabulary {vocab}), rows of {args.length}, policy {args.policy}")

    model = TinyLM(args.length, vocab=vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    mask_fn = flex_mask if args.attention == "flex" else segment_mask
    loader = DataLoader({"tokens": store}, batch_size=args.batch_size, mode="pack",
                        pack_length=args.length, pack_policy=args.policy, seed=args.seed,
                        num_workers=2)
    first = None
    t0 = time.perf_counter()
    window, real, padded = [], 0, 0
    for step in range(args.steps):
        batch = next(loader)
        if first is None:
            first = batch
        tok, pos, seg = (to_torch(batch[k]) for k in ("tokens", "positions", "segment_ids"))
        real += int((batch["segment_ids"] > 0).sum())
        padded += batch["segment_ids"].size
        loss = token_losses(model, tok, pos, seg, mask_fn(seg)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        window.append(float(loss.detach()))
        if (step + 1) % 50 == 0 or step + 1 == args.steps:
            print(f"step {step + 1:4d}  loss {np.mean(window):.3f} nats/token  "
                  f"({time.perf_counter() - t0:.1f} s)")
            window = []
    loader.close()
    print(f"padding: {1 - real / padded:.2%} of the rows' tokens")

    ok = True
    for name, batch in (("first batch", first), ("last batch", batch)):
        diff, n = boundary_check(model, batch, mask_fn)
        wrong, _ = boundary_check(model, batch, causal_mask)
        shared = int((batch["segment_ids"].max(axis=1) > 1).sum())
        print(f"{name}: {n} tokens, {shared} of {len(batch['tokens'])} rows shared by 2+ "
              f"documents, packed vs padded loss differ by at most {diff:.2e} "
              f"(a plain causal mask: {wrong:.2e})")
        ok &= diff <= args.tolerance
    store.close()
    if tmp is not None:
        tmp.cleanup()
    if not ok:
        print(f"FAILED: the packed loss is not the padded loss within {args.tolerance}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
