"""Distributed training (gloo, 2 CPU processes) against one process on the same global batches.

One spawn of two ranks runs both checks: (a) the scorer under DDP with the distributed objective
(likelihood + entropy + corpus-level GE across two epochs, so sentences change rank) gives the
1-process gradients and logs; (b) the trainer itself, launched as by torchrun, follows the
1-process loss trajectory and writes checkpoints from rank 0 only.
"""

from __future__ import annotations

import json
import os
import random
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from parser.config import ModelConfig
from parser.constraints import load_constraints
from parser.data.batching import BucketBatcher, encode_all
from parser.data.conllu_io import read_conllu
from parser.data.layers import LemmaLayer
from parser.data.streams import strip_annotation
from parser.data.vocab import Vocabularies
from parser.models.parser_model import build_parser
from parser.objectives import build_objective
from parser.train.distributed import DistributedContext, _local_device, init_distributed
from tests.train.helpers import Recorder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WORLD = 2
TERMS = {"likelihood": {}, "entropy": {"weight": 0.5}, "ge": {"aggregate": "corpus"}}
SMALL_MODEL = {"word_dim": 8, "char_dim": 4, "char_hidden": 8, "upos_dim": 8, "lstm_hidden": 8,
               "lstm_layers": 1, "arc_mlp": 8, "rel_mlp": 8, "dropout": 0.0, "word_dropout": 0.0}
TRAINER_STEPS = 6
# Corpus-level GE included: its cache travels in the checkpoint ("objective" entry).
DROPOUT = ("model.dropout=0.3", "model.word_dropout=0.2")


# -- the pieces both runs share -------------------------------------------------------------------

def _setup(rank: int, world: int):
    sentences = read_conllu(FIXTURES / "tiny-train.conllu").sentences
    vocabs = Vocabularies.build(sentences, min_freq=1, layers=[LemmaLayer()])  # a layer's loss too
    labeled = encode_all(sentences[:14], vocabs)
    unlabeled = encode_all(strip_annotation(sentences[14:]), vocabs)
    torch.manual_seed(0)
    model = build_parser(ModelConfig(**SMALL_MODEL), vocabs.sizes(), layer_sizes=vocabs.layer_sizes())
    objective = build_objective(TERMS, constraints=load_constraints("ud_universal", vocabs.upos.tokens))
    batchers = {
        kind: BucketBatcher(part, tokens_per_batch=50, shuffle=True, seed=3, labeled=kind == "labeled",
                            num_replicas=world, rank=rank)
        for kind, part in (("labeled", labeled), ("unlabeled", unlabeled))
    }
    # Unlabeled epochs 0 and 1 (GE's corpus cache sees sentences move between ranks), labeled 0.
    batches = [b for e in (0, 1) for b in batchers["unlabeled"].epoch(e)]
    batches += list(batchers["labeled"].epoch(0))
    return model, objective, batches


def _gradients(forward, model, objective, batches, reduce_logs) -> dict:
    grads, logs = [], []
    for step, batch in enumerate(batches):
        model.zero_grad(set_to_none=True)
        result = objective(forward(batch), batch, step=step)
        result.loss.backward()
        grads.append(torch.cat([p.grad.flatten() if p.grad is not None else torch.zeros(p.numel())
                                for p in model.parameters()]))
        logs.append(reduce_logs(result.logs))
    return {"grads": torch.stack(grads), "logs": logs}


def _trainer_config(run_dir: Path, *, distributed: str, extra: tuple[str, ...] = ()):
    from hydra import compose, initialize_config_dir

    from parser.config import config_dir

    overrides = [
        "data=tiny", "model=biaffine", "objective=likelihood", f"trainer.distributed={distributed}",
        "trainer.device=cpu", f"trainer.max_steps={TRAINER_STEPS}", "trainer.eval_every=4",
        "trainer.log_every=1", "trainer.progress=false", "trainer.final_eval=false",
        "logger.tensorboard=false", "logger.arc_entropy=false", "data.tokens_per_batch=50",
        "data.labeled_size=16", "data.unlabeled_ratio=1.0", "optim.eps=1e-6",
        "+objective.terms.entropy.weight=0.5", "+objective.terms.ge.aggregate=corpus",
        f"trainer.checkpoint_dir={run_dir / 'checkpoints'}",
    ] + [f"model.{k}={v}" for k, v in SMALL_MODEL.items()] + list(extra)
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def _run_trainer(run_dir: Path, *, distributed: str, extra: tuple[str, ...] = (),
                 shutdown: bool = True) -> tuple[dict, dict]:
    """``({step: logged scalars}, final weights)`` of a run in ``run_dir``."""
    from parser.train.loop import Trainer

    trainer = Trainer(_trainer_config(run_dir, distributed=distributed, extra=extra), run_dir=run_dir)
    recorder = Recorder()
    trainer.logger = recorder
    trainer.fit()
    if shutdown:
        trainer.dist.shutdown()
    return {str(step): values for step, values in recorder.values.items()}, trainer.model.state_dict()


# -- the two ranks ----------------------------------------------------------------------------------

def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))
    context = init_distributed("on", device="cpu")
    model, objective, batches = _setup(rank, WORLD)
    forward = context.wrap(model)
    forward(batches[0])  # a skipped step (forward, no backward) must not upset DDP
    found = _gradients(forward, model, context.objective(objective), batches, context.mean_scalars)
    # A loss that is NaN on rank 1 only stops the step everywhere; rank 0's error reaches all.
    found["finite"] = [context.all_finite(torch.tensor(1.0)),
                       context.all_finite(torch.tensor(float("nan") if rank == 1 else 1.0))]
    try:
        context.on_main(lambda: int("rank 0 only"))
    except ValueError as error:
        found["on_main_error"] = str(error)
    found["broadcast"] = context.on_main(lambda: {"rank": rank})
    found["flag"] = [context.broadcast_flag(rank == 0), context.broadcast_flag(rank == 1)]
    random.seed(rank)  # each rank's own Python stream, gathered as tensors
    found["rng"] = [state["python"] for state in context.gather_rng()]
    if rank == 1:
        torch.save({k: found[k] for k in ("finite", "on_main_error", "broadcast", "flag", "rng")},
                   Path(out_dir) / "rank1.pt")
    if rank == 0:
        torch.save(found, Path(out_dir) / "gradients.pt")
    context.barrier()
    out = Path(out_dir)
    trajectory, _ = _run_trainer(out / "ddp", distributed="on", shutdown=False)
    # Exact resume with dropout on: step 4's checkpoint continued to step 6 == straight to 6.
    _, straight = _run_trainer(out / "straight", distributed="on", extra=DROPOUT, shutdown=False)
    resume = f"trainer.resume={out / 'straight' / 'checkpoints' / 'step-00000004.pt'}"
    _, resumed = _run_trainer(out / "resumed", distributed="on", extra=(*DROPOUT, resume))
    if rank == 0:
        (out / "trajectory.json").write_text(json.dumps(trajectory))
        torch.save({"straight": straight, "resumed": resumed}, out / "resume.pt")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    out_dir = tmp_path_factory.mktemp("ddp")
    mp.start_processes(_worker, args=(_free_port(), str(out_dir)), nprocs=WORLD, join=True,
                       start_method="spawn")
    return out_dir


# -- tests ------------------------------------------------------------------------------------------

def test_batches_split_by_sentence_cover_one_process():
    _, _, one = _setup(0, 1)
    shards = [_setup(r, WORLD)[2] for r in range(WORLD)]
    assert len(one) == len(shards[0]) == len(shards[1]) > 5
    for b, batch in enumerate(one):
        parts = sorted(i for s in shards for i in s[b].index.tolist())
        assert parts == sorted(batch.index.tolist())
        assert min(s[b].size for s in shards) >= 1


def test_two_ranks_give_the_one_process_gradients_and_logs(two_ranks):
    model, objective, batches = _setup(0, 1)
    expected = _gradients(model, model, objective, batches, lambda logs: {k: float(v) for k, v in logs.items()})
    found = torch.load(two_ranks / "gradients.pt")
    scale = expected["grads"].abs().max()
    assert scale > 0
    torch.testing.assert_close(found["grads"], expected["grads"], rtol=1e-5, atol=1e-6 * float(scale))
    kinds = set()
    for got, want in zip(found["logs"], expected["logs"], strict=True):
        assert got.keys() == want.keys()
        kinds.update(k.split("/")[0] for k in want)
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-7), key
    assert {"likelihood", "entropy", "ge", "total", "lemma"} <= kinds


def test_collectives_agree_across_ranks(two_ranks):
    for name in ("gradients.pt", "rank1.pt"):
        found = torch.load(two_ranks / name)
        assert found["finite"] == [True, False]
        assert "invalid literal for int()" in found["on_main_error"]
        assert found["broadcast"] == {"rank": 0}
        assert found["flag"] == [True, False]
        for rank, state in enumerate(found["rng"]):
            random.seed(rank)
            version, words, gauss = random.getstate()
            assert state == [version, list(words), gauss]


def test_two_rank_trainer_follows_the_one_process_loss_trajectory(two_ranks, tmp_path):
    found = json.loads((two_ranks / "trajectory.json").read_text())
    expected, _ = _run_trainer(tmp_path / "one", distributed="off")
    assert sorted(found, key=int) == [str(s) for s in range(1, TRAINER_STEPS + 1)] == sorted(expected, key=int)
    for step, want in expected.items():
        assert abs(found[step]["train/total"] - want["train/total"]) <= 1e-5, step
        assert found[step]["train/grad_norm"] == pytest.approx(want["train/grad_norm"], rel=1e-4)
    checkpoints = sorted(p.name for p in (two_ranks / "ddp" / "checkpoints").iterdir())
    assert "best.pt" in checkpoints and not [p for p in checkpoints if p.endswith(".tmp")]


# -- single-process behaviour and input checks ---------------------------------------------------------

def test_one_process_context_is_a_no_op(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    context = init_distributed("auto", device="cpu")
    assert context == DistributedContext()
    model = torch.nn.Linear(2, 2)
    assert context.wrap(model) is model
    assert context.mean_scalars({"b": torch.tensor(2.0), "a": 1}) == {"a": 1.0, "b": 2.0}
    assert context.on_main(lambda: {"x": 1}) == {"x": 1}
    assert context.broadcast_flag(True) and not context.broadcast_flag(False)
    assert context.all_finite(torch.tensor(1.0)) and not context.all_finite(torch.tensor(float("nan")))


@pytest.mark.parametrize(
    ("mode", "env", "match"),
    [
        ("sometimes", {}, "trainer.distributed='sometimes'"),
        ("on", {}, "RANK/WORLD_SIZE are not set"),
        ("off", {"RANK": "0", "WORLD_SIZE": "2"}, "torchrun started 2 processes"),
        ("auto", {"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two'"),
        ("on", {"RANK": "3", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK=3 not in 0..1"),
    ],
)
def test_bad_modes_and_environments_are_named(monkeypatch, mode, env, match):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=match):
        init_distributed(mode, device="cpu")


def test_an_explicit_gpu_index_is_refused_under_torchrun():
    with pytest.raises(ValueError, match="cuda:LOCAL_RANK"):
        _local_device("cuda:1", 0)


def test_two_rank_run_resumes_exactly_with_dropout(two_ranks):
    found = torch.load(two_ranks / "resume.pt")
    assert found["straight"].keys() == found["resumed"].keys()
    for name, value in found["straight"].items():
        torch.testing.assert_close(found["resumed"][name], value, rtol=0, atol=0, msg=name)
