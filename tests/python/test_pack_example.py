"""examples/pack_lm.py: the boundary check it relies on (a packed batch's
loss per token equals the same documents' padded loss, on the same weights;
a plain causal mask does not), on real packed batches of every policy, and
a short run of the example itself. Kept cheap: a tiny model, a few steps."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (requirements/test.txt pins it)")

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, EXAMPLES)
import pack_lm  # noqa: E402

from loaderx.dataloader import DataLoader  # noqa: E402
from loaderx.zrecord import RaggedStore  # noqa: E402

T = 64


@pytest.fixture
def docs_store(tmp_path):
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 256, size=int(n), dtype=np.uint8)
            for n in rng.integers(1, 150, size=60)]
    store = pack_lm.build_store(str(tmp_path / "docs"), docs)
    yield store
    store.close()


@pytest.mark.parametrize("policy", ("first_fit", "best_fit", "concat"))
def test_packed_loss_is_the_padded_loss(docs_store, policy):
    torch.manual_seed(0)
    model = pack_lm.TinyLM(T, d=32, heads=2, layers=2)
    with DataLoader({"tokens": docs_store}, batch_size=4, mode="pack", pack_length=T,
                    pack_policy=policy, num_workers=1) as loader:
        for _ in range(3):
            batch = next(loader)
            assert (batch["segment_ids"].max(axis=1) >= 1).all()
            diff, n = pack_lm.boundary_check(model, batch)
            assert n > 0 and diff <= 1e-5
            # the check can fail: rows holding two documents or more change
            # their later documents' losses under a plain causal mask
            if (batch["segment_ids"].max(axis=1) > 1).any():
                wrong, _ = pack_lm.boundary_check(model, batch, pack_lm.causal_mask)
                assert wrong > 1e-3


def test_positions_matter_to_the_check(docs_store):
    """Positions that do not restart per segment break the equality too."""
    torch.manual_seed(1)
    model = pack_lm.TinyLM(T, d=32, heads=2, layers=1)
    with DataLoader({"tokens": docs_store}, batch_size=4, mode="pack", pack_length=T,
                    pack_policy="best_fit", num_workers=1) as loader:
        batch = next(loader)
    assert (batch["segment_ids"].max(axis=1) > 1).any()
    wrong = dict(batch, positions=np.tile(np.arange(T, dtype=np.int32), (batch["tokens"].shape[0], 1)))
    diff, _ = pack_lm.boundary_check(model, wrong)
    assert diff > 1e-3


def test_example_runs(tmp_path, capsys):
    rc = pack_lm.main(["--corpus", "stdlib", "--store", str(tmp_path / "docs"), "--files", "30",
                       "--steps", "4",
                       "--length", "64", "--batch-size", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "packed vs padded loss differ by at most" in out
