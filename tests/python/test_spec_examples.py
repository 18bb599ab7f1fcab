"""The reference spec's Python examples, run as written (synthetic data
saved as .npy files where the spec loads them)."""

import numpy as np
import pytest

from loaderx.dataloader import DataLoader
from loaderx.zrecord import DenseStore, RaggedStore


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_quick_start(in_tmp):
    rng = np.random.default_rng(0)
    np.save("data.npy", rng.standard_normal((512, 3, 4)).astype(np.float32))
    np.save("label.npy", rng.integers(0, 10, 512).astype(np.int64))

    data = np.load('data.npy', mmap_mode='r')
    label = np.load('label.npy', mmap_mode='r')
    with DenseStore.create('train_data', data.dtype, data.shape[1:]) as ds:
        ds.append(data)
    with DenseStore.create('train_label', label.dtype, label.shape[1:]) as ds:
        ds.append(label)

    loader = DataLoader({'data': DenseStore.open('train_data'),
                         'label': DenseStore.open('train_label')},
                        transform=lambda batch: batch)

    for i, batch in enumerate(loader):
        if i >= 256:
            break

    assert batch['data'].shape == (256, 3, 4)
    assert batch['label'].shape == (256,)
    loader.close()


def test_records_dense(in_tmp):
    data = np.arange(64, dtype=np.float32).reshape(8, 2, 4)
    with DenseStore.create('data', data.dtype, data.shape[1:]) as ds:
        ds.append(data)
    ds = DenseStore.open('data')
    out = ds[0, 5, 2]                          # (3, 2, 4)
    assert out.shape == (3, 2, 4)
    np.testing.assert_array_equal(out, data[[0, 5, 2]])
    ds.close()


def test_records_ragged(in_tmp):
    seqs = [np.arange(L, dtype=np.int32) for L in (3, 1, 4, 1, 5)]
    with RaggedStore.create('tokens', np.int32) as rs:
        rs.append(seqs)                       # dtype explicit; each record keeps its shape
    rs = RaggedStore.open('tokens')

    records = rs[0, 2, 4]                # list of ndarray — one per record, exact shapes
    lengths = np.array([len(r) for r in records])
    padded = np.zeros((len(records), lengths.max()), dtype=records[0].dtype)
    for i, r in enumerate(records):
        padded[i, :len(r)] = r             # (B, max_len) — your policy, your loop
    assert padded.shape == (3, 5)
    np.testing.assert_array_equal(lengths, [3, 4, 5])
    rs.close()


def test_collate_example(in_tmp):
    with DenseStore.create('tok', np.int32, (16,)) as s:
        s.append(np.arange(64 * 16, dtype=np.int32).reshape(64, 16))
    with DenseStore.create('lab', np.int64, ()) as s:
        s.append(np.arange(64))
    dense_tokens, labelset = DenseStore.open('tok'), DenseStore.open('lab')

    def collate(batch):
        return {'input_ids': batch['tokens'], 'label': batch['label']}

    loader = DataLoader({'tokens': dense_tokens, 'label': labelset}, batch_size=32,
                        transform=collate)
    b = next(loader)
    assert b['input_ids'].shape == (32, 16) and b['label'].shape == (32,)
    loader.close()


def test_writable_stores(in_tmp):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (3000, 28, 28), dtype=np.uint8)
    single_image = images[7]
    seq_a, seq_b, seq_c = (np.arange(n, dtype=np.int32) for n in (5, 2, 9))
    i = 1024

    ds = DenseStore.create('mnist/x', dtype=np.uint8, item_shape=(28, 28))  # identity committed now
    assert ds.append(images[i:i + 1024]) == 0        # (B, 28, 28) → one batch, returns first index
    assert ds.append(single_image[None]) == 1024        # one sample is batch_size 1 — add the axis yourself
    assert ds[:4].shape == (4, 28, 28)                  # read path is unchanged
    np.testing.assert_array_equal(ds[-1], single_image)

    tok = RaggedStore.create('tokens', dtype=np.int32)  # each record keeps its own shape
    tok.append([seq_a, seq_b, seq_c])    # list in, list out — `tok[0, 2]` returns a list
    got = tok[0, 2]
    assert isinstance(got, list) and [g.shape for g in got] == [(5,), (9,)]
    ds.close()
    tok.close()


def test_multi_stream(in_tmp):
    rng = np.random.default_rng(2)
    joint = rng.standard_normal((300, 3, 25)).astype(np.float32)
    label = rng.integers(0, 60, 300).astype(np.int64)
    seqs = [np.arange(1 + k % 7, dtype=np.int32) for k in range(300)]

    root = "xsub/train"
    with DenseStore.create(root + "/joint", joint.dtype, joint.shape[1:]) as s:
        s.append(joint)
    with DenseStore.create(root + "/label", label.dtype, label.shape[1:]) as s:
        s.append(label)
    with RaggedStore.create(root + "/token", np.int32) as s:
        s.append(seqs)

    streams = {
        "joint": DenseStore.open(root + "/joint"),
        "label": DenseStore.open(root + "/label"),
        "token": RaggedStore.open(root + "/token"),
    }
    assert streams["joint"][0, 5, 2].shape == (3, 3, 25)   # each stream keeps its own index API
    loader = DataLoader(streams, batch_size=256)
    batch = next(loader)                      # {name: values}, index-aligned
    assert batch["joint"].shape == (256, 3, 25)
    assert batch["label"].shape == (256,)
    assert isinstance(batch["token"], list) and len(batch["token"]) == 256
    idx = loader.last_indices
    np.testing.assert_array_equal(batch["label"], label[idx])
    loader.close()
    for s in streams.values():
        s.close()


def test_codec_rewrite_without_dict(in_tmp):
    # The spec's "rewrite" example, with the codecs available now.
    with DenseStore.create("src", np.float32, (4,), codec="raw") as s:
        s.append(np.arange(40, dtype=np.float32).reshape(10, 4))
    with DenseStore.open("src") as s, \
         DenseStore.create("dst", dtype=s.dtype, item_shape=s.item_shape,
                           codec="zstd") as d:
        d.append(s[:])                             # ndarray -> dense append
        np.testing.assert_array_equal(d[:], s[:])


def test_codec_notes_dictionary(in_tmp):
    # "Codec notes": train once on settled data, then install the dictionary
    # in new stores and append explicitly.
    from loaderx.utils import train_dict
    from loaderx.zrecord import DICT_TIERS

    rng = np.random.default_rng(3)
    base = rng.integers(0, 50, 64).astype(np.int32)
    settled_array = np.stack([np.roll(base, k) for k in range(2000)])
    data = settled_array[:500]

    def token_generator():
        for k in range(300):
            yield np.roll(base, k)[: 16 + k % 48]

    d = train_dict(settled_array, tier="balanced")
    assert isinstance(d, bytes) and 0 < len(d) <= DICT_TIERS["balanced"]["dict_bytes"]

    with RaggedStore.create('tokens', np.int32, codec='zstd_dict', dict_bytes=d) as ds:
        ds.append(token_generator())
    with DenseStore.create('data', data.dtype, data.shape[1:],
                           codec='zstd_dict', dict_bytes=d) as ds:
        ds.append(data)

    with RaggedStore.open('tokens') as ts, DenseStore.open('data') as ds:
        assert ts.codec == ds.codec == "zstd_dict"
        got = ts[:]
        assert len(got) == 300
        for k, rec in enumerate(got):
            np.testing.assert_array_equal(rec, np.roll(base, k)[: 16 + k % 48])
        np.testing.assert_array_equal(ds[:], data)
    with pytest.raises(ValueError):
        DenseStore.create('nodict', np.int32, (64,), codec='zstd_dict')


def test_maintenance_pass_throughs(in_tmp):
    # "Writable stores": delete / stats / compact on the same object.
    values = np.arange(100, dtype=np.int64)
    with DenseStore.create('m', np.int64, ()) as ds:
        ds.append(values)
        ds.delete(np.arange(0, len(ds), 2))   # swap-last: index space stays dense
        assert len(ds) == 50
        st = ds.stats()
        assert set(st) == {'records', 'live_bytes', 'chunk_bytes', 'reclaimable'}
        assert st['records'] == 50 and st['reclaimable'] > 0
        ds.compact()
        assert ds.stats()['reclaimable'] == 0
        survivors = np.sort(ds[:])
    # every odd value survives exactly once, whatever order swap-last left
    np.testing.assert_array_equal(survivors, values[1::2])


def test_cpu_to_gpu_transfer_transform(in_tmp):
    # "CPU -> GPU transfer": the transfer is the transform. Without an
    # accelerator here the device is the CPU; torch (pinned in
    # requirements/test.txt) stands in exactly as written, numpy otherwise.
    rng = np.random.default_rng(5)
    with DenseStore.create('x', np.float32, (8,)) as s:
        s.append(rng.standard_normal((64, 8)).astype(np.float32))
    with DenseStore.create('y', np.int64, ()) as s:
        s.append(np.arange(64, dtype=np.int64))
    streams = {'x': DenseStore.open('x'), 'y': DenseStore.open('y')}
    try:
        import torch
    except ImportError:  # numpy stands in for the device copy
        torch = None

    if torch is not None:
        device = "cpu"

        def to_device(batch):
            return {k: torch.from_numpy(v).to(device, non_blocking=True)
                    for k, v in batch.items()}
    else:
        def to_device(batch):
            return {k: np.array(v, copy=True) for k, v in batch.items()}

    loader = DataLoader(streams, batch_size=16, transform=to_device)
    for step, batch in enumerate(loader):
        if torch is not None:
            assert isinstance(batch['x'], torch.Tensor) and tuple(batch['x'].shape) == (16, 8)
        y = np.asarray(batch['y'])
        np.testing.assert_array_equal(np.asarray(batch['x']), streams['x'][y])
        if step >= 3:
            break
    loader.close()
    for s in streams.values():
        s.close()


def test_zsampler_example():
    from loaderx.zsampler import Sampler

    sampler = Sampler(1_000_000, 256, Sampler.Mode.IID, seed=42)
    indices = sampler.next()
    assert indices.shape == (256,) and indices.min() >= 0 and indices.max() < 1_000_000
    np.testing.assert_array_equal(indices, Sampler(1_000_000, 256, Sampler.Mode.IID,
                                                   seed=42).next())
