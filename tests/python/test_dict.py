"""zstd_dict stores and loaderx.utils.train_dict."""

import numpy as np
import pytest

from loaderx.utils import train_dict
from loaderx.zrecord import DICT_TIERS, DenseStore, RaggedStore


def images(rng, n):
    base = rng.integers(0, 255, size=(16, 16), dtype=np.uint8)
    noise = rng.random((n, 16, 16)) < 0.15
    return np.where(noise, rng.integers(0, 255, size=(n, 16, 16)), base).astype(np.uint8)


def test_tiers():
    assert DICT_TIERS["fast"] == {"dict_bytes": 32 << 10, "sample_bytes": 4 << 20}
    assert DICT_TIERS["balanced"] == {"dict_bytes": 128 << 10, "sample_bytes": 16 << 20}
    assert DICT_TIERS["max"] == {"dict_bytes": 1 << 20, "sample_bytes": 64 << 20}


def test_train_sources_and_store(store_dir, rng):
    data = images(rng, 2000)
    d_arr = train_dict(data, tier="fast")
    assert isinstance(d_arr, bytes) and 0 < len(d_arr) <= 32 << 10
    assert d_arr[:4] == b"\x37\xa4\x30\xec"  # zstd dictionary magic
    d_list = train_dict(list(data), tier="fast")
    d_gen = train_dict((x for x in data), tier="fast")
    assert len(d_list) > 0 and len(d_gen) > 0
    with pytest.raises(ValueError, match="tier"):
        train_dict(data, tier="huge")
    with pytest.raises(ValueError, match="not enough"):
        train_dict(data[:3], tier="fast")

    with DenseStore.create(store_dir / "d", np.uint8, (16, 16), codec="zstd_dict",
                           dict_bytes=d_arr) as s:
        assert s.codec == "zstd_dict"
        s.append(data)
        np.testing.assert_array_equal(s[::7], data[::7])
        assert s.stats()["live_bytes"] < data.nbytes
    with DenseStore.open(store_dir / "d", readonly=True) as s:
        np.testing.assert_array_equal(s[:], data)
        d_store = train_dict(s, tier="fast")
        assert len(d_store) > 0


def test_ragged_dict_store(store_dir, rng):
    toks = [rng.integers(0, 50, size=int(k), dtype=np.int32) for k in rng.integers(5, 80, 600)]
    d = train_dict(toks, tier="fast")
    with RaggedStore.create(store_dir / "t", np.int32, codec="zstd_dict", dict_bytes=d) as s:
        s.append(iter(toks))
        s.delete([0, 1])
        s.compact()
    with RaggedStore.open(store_dir / "t") as s:
        assert len(s) == 598
        np.testing.assert_array_equal(s[0], toks[-2])  # swap-last, descending
        np.testing.assert_array_equal(s[1], toks[-1])
        d2 = train_dict(s, tier="fast")
        assert len(d2) > 0


def test_dict_errors(store_dir):
    with pytest.raises(ValueError, match="dict_bytes"):
        DenseStore.create(store_dir / "a", np.uint8, (2,), codec="zstd_dict")
    with pytest.raises(ValueError, match="dictionary"):
        DenseStore.create(store_dir / "a", np.uint8, (2,), codec="zstd_dict", dict_bytes=b"abcdefgh")
    assert not (store_dir / "a").exists()


def test_spec_recode_example(tmp_path, rng, monkeypatch):
    """The specification's recode example, as written."""
    monkeypatch.chdir(tmp_path)
    data = images(rng, 1500)
    with DenseStore.create("src", np.uint8, (16, 16), codec="zstd") as s:
        s.append(data)

    from loaderx.utils import train_dict
    from loaderx.zrecord import DenseStore as DS

    with DS.open("src") as s, \
         DS.create("dst", dtype=s.dtype, item_shape=s.item_shape,
                   codec="zstd_dict", dict_bytes=train_dict(s)) as d:
        d.append(s[:])                             # ndarray -> dense append

    with DS.open("dst") as d:
        assert d.codec == "zstd_dict"
        np.testing.assert_array_equal(d[:], data)


def test_one_sample_rule_for_every_source(store_dir, rng):
    # 6,000 records of 1 KiB: past the 'fast' tier's 4 MiB sample, so the
    # rule thins them (every other record). An array, a list, a generator
    # and a store of the same records give the same dictionary, byte for
    # byte: the rule is the library's, not the source's.
    base = rng.integers(0, 255, size=1024, dtype=np.uint8)
    noise = rng.random((6000, 1024)) < 0.2
    data = np.where(noise, rng.integers(0, 255, size=(6000, 1024)), base).astype(np.uint8)
    d_arr = train_dict(data, tier="fast")
    assert train_dict(list(data), tier="fast") == d_arr
    assert train_dict((x for x in data), tier="fast") == d_arr
    with DenseStore.create(store_dir / "s", np.uint8, (1024,), codec="zstd") as s:
        s.append(data)
    with DenseStore.open(store_dir / "s", readonly=True) as s:
        assert train_dict(s, tier="fast") == d_arr
    # The odd records are another sample: another dictionary.
    assert train_dict(data[1::2], tier="fast") != d_arr
