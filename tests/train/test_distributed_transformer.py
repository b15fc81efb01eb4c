"""DDP with the transformer encoder (all-MiniLM-L6-v2, unpacked offline), issue 16's "works with
... DDP": frozen with cached features, two gloo ranks of the trainer follow the one-process loss
trajectory; fine-tuned (whose encoder has its own dropout, so no two runs draw alike), the two
ranks' encoder weights stay identical and move. The BiLSTM's DDP checks: test_distributed.py."""

from __future__ import annotations

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: never the network

from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from parser.train.loop import Trainer
from tests.models.test_transformer_objectives import pretrained_weights
from tests.train.helpers import Recorder, tiny_config
from tests.train.test_distributed import WORLD, _free_port

STEPS = 4
MODES = {"frozen": [], "finetuned": ["model.encoder.finetune=true", "model.encoder.cache=false",
                                     "model.encoder.lr=1e-4", "model.encoder.warmup_steps=2"]}


def _config(folder: str, run_dir: Path, *, distributed: str, mode: str):
    # No dropout anywhere: the two runs must compute the same function on the same sentences.
    return tiny_config(
        "model/encoder=transformer", f"model.encoder.name={folder}", "model.encoder.dropout=0.0",
        "model.dropout=0.0", "model.word_dropout=0.0", f"trainer.distributed={distributed}",
        "trainer.device=cpu", f"trainer.max_steps={STEPS}", f"trainer.eval_every={STEPS}",
        "trainer.log_every=1", "trainer.final_eval=false", "logger.arc_entropy=false",
        "data.tokens_per_batch=100", "data.labeled_size=16", "data.unlabeled_ratio=1.0",
        "objective=entropy", f"trainer.checkpoint_dir={run_dir / 'checkpoints'}", *MODES[mode],
    )


def _fit(folder: str, run_dir: Path, *, distributed: str, mode: str, shutdown: bool = True):
    """``({step: logged scalars}, the encoder's weights)`` of a run in ``run_dir``."""
    trainer = Trainer(_config(folder, run_dir, distributed=distributed, mode=mode), run_dir=run_dir)
    trainer.logger = recorder = Recorder()
    trainer.fit()
    if shutdown:
        trainer.dist.shutdown()
    encoder = trainer.model.scorer.transformer.model
    weights = {name: p.detach().clone() for name, p in encoder.named_parameters()}
    return {str(step): values for step, values in recorder.values.items()}, weights


def _worker(rank: int, port: int, folder: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))
    out = Path(out_dir)
    for k, mode in enumerate(MODES):
        found, weights = _fit(folder, out / mode, distributed="on", mode=mode, shutdown=k == len(MODES) - 1)
        torch.save(weights, out / f"{mode}_rank{rank}.pt")
        if rank == 0:
            (out / f"{mode}.json").write_text(json.dumps(found))


@pytest.fixture(scope="module")
def two_ranks(minilm, tmp_path_factory) -> Path:
    out_dir = tmp_path_factory.mktemp("ddp_transformer")
    mp.start_processes(_worker, args=(_free_port(), minilm, str(out_dir)), nprocs=WORLD, join=True,
                       start_method="spawn")
    return out_dir


def test_frozen_encoder_two_ranks_follow_the_one_process_trajectory(two_ranks, minilm, tmp_path):
    found = json.loads((two_ranks / "frozen.json").read_text())
    expected, _ = _fit(minilm, tmp_path, distributed="off", mode="frozen")
    assert sorted(found, key=int) == [str(s) for s in range(1, STEPS + 1)] == sorted(expected, key=int)
    for step, want in expected.items():
        assert found[step]["train/total"] == pytest.approx(want["train/total"], rel=1e-4, abs=1e-5), step
        assert found[step]["train/grad_norm"] == pytest.approx(want["train/grad_norm"], rel=1e-3), step
    assert (two_ranks / "frozen" / "checkpoints" / "best.pt").is_file()


def test_finetuned_encoder_stays_identical_across_ranks_and_trains(two_ranks, minilm):
    ranks = [torch.load(two_ranks / f"finetuned_rank{r}.pt") for r in range(WORLD)]
    start = pretrained_weights(minilm)
    assert ranks[0].keys() == ranks[1].keys() == start.keys()
    for name in start:
        assert torch.equal(ranks[0][name], ranks[1][name]), name  # DDP kept the replicas in sync
    moved = [name for name in start if not torch.equal(ranks[0][name], start[name])]
    assert len(moved) > len(start) // 2, f"{len(moved)} of {len(start)} encoder tensors trained"
    found = json.loads((two_ranks / "finetuned.json").read_text())
    assert sorted(found, key=int) == [str(s) for s in range(1, STEPS + 1)]
    assert all(torch.isfinite(torch.tensor(v["train/total"])) for v in found.values())
