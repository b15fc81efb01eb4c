"""Cost of a training step of the default biaffine parser under each objective (issues 3 and 4).

Real EWT training sentences, length-bucketed batches of the default token budget (the batcher of
``parser.data``, shuffled with the trainer's seed), the default biaffine hyper-parameters and AdamW
(``configs/model/biaffine.yaml``, ``configs/optim/adamw.yaml``), one thread. A step is what the
trainer does: forward, loss, backward, gradient clipping, optimiser and schedule step. Variants:

  a  tree CRF likelihood, labels by a classifier (the default config)
  b  Dozat & Manning's per-word head cross-entropy (+ the same label classifier loss)
  c  Shannon entropy of the tree CRF, the same batch as unlabeled text
  d  GE with the ``ud_universal`` constraints, the same batch as unlabeled text
  e  joint labeled tree CRF likelihood

Timing: every variant has its own model (same initial weights) and optimiser in one process; each
batch is run by every variant in turn (the order rotated per batch) so that the load of a shared
machine drifts over all variants alike; the median over the timed batches is reported, and
ratios are medians of the per-batch ratios. The loss part alone (scores -> loss -> backward to the
scores, through ``to_output``) is timed the same way. Peak memory: peak RSS (``VmHWM``) of a fresh
subprocess per variant running the heaviest timed batches.

    taskset -c 1 .venv/bin/python experiments/bench_step_cost.py      # writes results/step_cost.md
    .venv/bin/python experiments/bench_step_cost.py --quick           # smoke run, prints only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from common import markdown_table, ud_root, write_result
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from parser.config import (
    DataConfig,
    ModelConfig,
    OptimConfig,
    TrainerConfig,
    config_dir,
    register_configs,
)
from parser.constraints import load_constraints
from parser.data import (
    BucketBatcher,
    Vocabularies,
    encode_all,
    read_conllu,
    resolve_ud_root,
    treebank_file,
)
from parser.models import EdgeScores, build_parser, to_output
from parser.objectives import build_objective
from parser.runtime.optim import build_optimizer, build_scheduler


@dataclass(frozen=True)
class Variant:
    title: str
    labels: str  # label mode of to_output: classifier | joint
    objective: str | dict  # a configs/objective group file, or terms
    labeled: bool  # False: the batch's heads and relations are dropped


VARIANTS = {
    "a": Variant(
        "tree CRF likelihood, classifier labels (default)", "classifier", "likelihood", True
    ),
    "b": Variant("Dozat local head cross-entropy", "classifier", "local", True),
    "c": Variant("entropy, unlabeled batch", "classifier", {"entropy": {"weight": 1.0}}, False),
    "d": Variant("GE ud_universal, unlabeled batch", "classifier", "ge", False),
    "e": Variant("joint labeled tree CRF likelihood", "joint", "likelihood", True),
}


def group(name: str, option: str, schema: type):
    """The ``name`` node of the config Hydra composes with ``name=option`` (its own defaults list,
    e.g. the model's encoder group, included), as a ``schema`` object."""
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[f"{name}={option}"])
    node = OmegaConf.merge(OmegaConf.structured(schema), cfg[name])
    return OmegaConf.to_object(node)


def prepare(path: Path, *, n_batches: int, quick: bool) -> dict:
    """Read EWT train, build vocabularies and the first ``n_batches`` batches of epoch 0."""
    data = group("data", "en_ewt", DataConfig)
    seed = group("trainer", "default", TrainerConfig).seed
    try:
        root = resolve_ud_root(data.root)
    except ValueError:
        root = ud_root()  # the shared copy beside the repo when data/ud is not linked
    start = time.perf_counter()
    sentences = list(read_conllu(treebank_file(root, data.treebank, "train")))
    vocabs = Vocabularies.build(sentences, min_freq=data.min_freq)
    if quick:
        sentences = sentences[:1000]
    tokens = 500 if quick else data.tokens_per_batch
    batcher = BucketBatcher(
        encode_all(sentences, vocabs),
        tokens_per_batch=tokens,
        shuffle=True,
        seed=seed,
        max_length=data.max_length,
    )
    batches = []
    for batch in batcher.epoch(0):
        batches.append(batch)
        if len(batches) == n_batches:
            break
    prepared = {
        "batches": batches,
        "sizes": vocabs.sizes(),
        "upos_names": vocabs.upos.tokens,
        "tokens_per_batch": tokens,
        "n_train": len(sentences),
        "root": str(root),
    }
    torch.save(prepared, path)
    print(
        f"prepared {len(batches)} batches from {len(sentences)} sentences in "
        f"{time.perf_counter() - start:.1f} s",
        flush=True,
    )
    return prepared


class Runner:
    """One variant's model, optimiser, schedule and objective."""

    def __init__(self, variant: Variant, prepared: dict, *, seed: int,
                 device: torch.device | None = None) -> None:
        model_cfg = group("model", "biaffine", ModelConfig)
        self.optim_cfg = group("optim", "adamw", OptimConfig)
        self.variant, self.single_root = variant, model_cfg.single_root
        sizes = prepared["sizes"]
        torch.manual_seed(seed)  # the same initial weights for every variant
        self.device = device or torch.device("cpu")
        self.model = build_parser(model_cfg, sizes).scorer.to(self.device)  # as the trainer builds it
        self.model.train()
        self.optimizer = build_optimizer(self.model.parameters(), self.optim_cfg)
        total_steps = group("trainer", "default", TrainerConfig).max_steps
        self.scheduler = build_scheduler(self.optimizer, self.optim_cfg, total_steps=total_steps)
        terms = variant.objective
        if isinstance(terms, str):
            terms = OmegaConf.to_container(
                OmegaConf.load(config_dir() / "objective" / f"{terms}.yaml")
            )["terms"]
        uses_ge = any((o or {}).get("type", n) == "ge" for n, o in terms.items())
        constraints = load_constraints("ud_universal", prepared["upos_names"]) if uses_ge else None
        self.objective = build_objective(terms, constraints=constraints)

    def batch(self, batch):
        return batch if self.variant.labeled else batch.without_annotation()

    def step(self, batch) -> tuple[float, float]:
        """(wall, CPU) seconds for one full training step on ``batch``."""
        batch = self.batch(batch)
        self.synchronize()
        start, cpu = time.perf_counter(), time.process_time()
        out = to_output(
            self.model(batch),
            batch.lengths,
            labels=self.variant.labels,
            single_root=self.single_root,
        )
        loss = self.objective(out, batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.optim_cfg.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.synchronize()
        elapsed = (time.perf_counter() - start, time.process_time() - cpu)
        if not torch.isfinite(loss):
            raise ValueError(f"variant {self.variant.title}: non-finite loss {float(loss)}")
        return elapsed

    def synchronize(self) -> None:
        """Wait for the GPU's queued work, so that wall times cover it."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def loss_part(self, batch, edge: EdgeScores) -> tuple[float, float]:
        """(wall, CPU) seconds for scores -> loss -> backward to the scores (``edge`` detached)."""
        batch = self.batch(batch)
        arcs = edge.arcs.detach().clone().requires_grad_()
        labels = edge.labels.detach().clone().requires_grad_()
        start, cpu = time.perf_counter(), time.process_time()
        out = to_output(
            EdgeScores(arcs, labels),
            batch.lengths,
            labels=self.variant.labels,
            single_root=self.single_root,
        )
        self.objective(out, batch).loss.backward()
        return time.perf_counter() - start, time.process_time() - cpu


def rotated(names: list[str], i: int) -> list[str]:
    return names[i % len(names) :] + names[: i % len(names)]


def time_variants(prepared: dict, *, warmup: int, seed: int) -> dict:
    names = list(VARIANTS)
    runners = {name: Runner(VARIANTS[name], prepared, seed=seed) for name in names}
    steps = {name: [] for name in names}
    load = []
    parts = {name: [] for name in names}
    for i, batch in enumerate(prepared["batches"]):
        for name in rotated(names, i):
            elapsed = runners[name].step(batch)
            if i >= warmup:
                steps[name].append(elapsed)
        with torch.no_grad():
            edge = runners["a"].model(batch)
        for name in rotated(names, i):
            elapsed = runners[name].loss_part(batch, edge)
            if i >= warmup:
                parts[name].append(elapsed)
        load.append(os.getloadavg()[0])
        print(
            f"batch {i}: B={batch.size} N={int(batch.lengths.max())} "
            + " ".join(f"{n}={steps[n][-1][1] * 1e3:.0f}ms" if i >= warmup else n for n in names),
            flush=True,
        )
    return {"steps": steps, "parts": parts, "load": load}


def heaviest(batches: list, warmup: int, k: int = 2) -> list[int]:
    """Indices of the timed batches with the largest B (N+1)^2 and B (N+1)."""
    timed = range(warmup, len(batches))
    n2 = max(timed, key=lambda i: batches[i].size * (int(batches[i].lengths.max()) + 1) ** 2)
    n1 = max(timed, key=lambda i: batches[i].size * (int(batches[i].lengths.max()) + 1))
    return sorted({n2, n1})[:k]


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB: ``VmHWM``, the high-water mark of the current
    address space. (On Linux ``ru_maxrss`` survives fork + exec, so a child would report its
    parent's peak; it is only the fallback where /proc is missing.)"""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            line = next(line for line in status if line.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_child(path: Path, name: str, indices: list[int], seed: int) -> None:
    """Run in a fresh process: peak RSS after set-up and after the steps, as JSON on stdout."""
    torch.set_num_threads(1)
    prepared = torch.load(path, weights_only=False)
    runner = Runner(VARIANTS[name], prepared, seed=seed)
    setup = peak_rss_mb()
    for i in indices:
        runner.step(prepared["batches"][i])
    print(json.dumps({"setup_mb": setup, "peak_mb": peak_rss_mb()}))


def memory(path: Path, indices: list[int], seed: int) -> dict:
    result = {}
    for name in VARIANTS:
        command = [
            sys.executable,
            __file__,
            "--memory-child",
            name,
            "--prepared",
            str(path),
            "--indices",
            ",".join(map(str, indices)),
            "--seed",
            str(seed),
        ]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        result[name] = json.loads(out.strip().splitlines()[-1])
        print(f"memory {name}: {result[name]}", flush=True)
    return result


def report(prepared: dict, timed: dict, mem: dict, *, warmup: int, indices: list[int],
           load: list[float]) -> str:
    batches = prepared["batches"][warmup:]
    sentences = sum(b.size for b in batches)
    tokens = sum(b.n_tokens for b in batches)
    # [variant] -> per-batch seconds; clock 0 = wall, 1 = CPU time of this process
    steps = {c: {n: [t[c] for t in ts] for n, ts in timed["steps"].items()} for c in (0, 1)}
    parts = {c: {n: [t[c] for t in ts] for n, ts in timed["parts"].items()} for c in (0, 1)}
    median = statistics.median

    def ratio(table: dict, name: str, base: str) -> float:
        return median(x / y for x, y in zip(table[name], table[base]))

    rows = []
    for name, variant in VARIANTS.items():
        cpu, wall = steps[1], steps[0]
        rows.append([f"({name}) {variant.title}", median(cpu[name]) * 1e3, ratio(cpu, name, "b"),
                     ratio(cpu, name, "a"), median(wall[name]) * 1e3, ratio(wall, name, "b"),
                     ratio(wall, name, "a"), sentences / sum(cpu[name]), tokens / sum(cpu[name]),
                     sentences / sum(wall[name]), round(mem[name]["peak_mb"]),
                     round(mem[name]["peak_mb"] - mem[name]["setup_mb"])])
    step_table = markdown_table(
        ["variant", "CPU ms/step", "x (b)", "x (a)", "wall ms/step", "wall x (b)", "wall x (a)",
         "sent/s (CPU)", "tok/s (CPU)", "sent/s (wall)", "peak RSS MB", "RSS growth MB"], rows)
    part_rows = []
    for name, variant in VARIANTS.items():
        cpu = parts[1]
        part_rows.append([f"({name}) {variant.title}", median(cpu[name]) * 1e3,
                          median(p / q for p, q in zip(cpu[name], steps[1][name])),
                          ratio(cpu, name, "b"),
                          median(p - q for p, q in zip(cpu[name], cpu["b"])) * 1e3])
    part_table = markdown_table(
        ["variant", "loss part CPU ms", "share of its step", "x (b) loss part", "minus (b) ms"],
        part_rows)

    def shape(batch) -> str:
        return f"{batch.size}x{int(batch.lengths.max())}"

    heavy = ", ".join(shape(prepared["batches"][i]) for i in indices)
    crf = ratio(steps[1], "a", "b")
    unlabeled = max(ratio(steps[1], "c", "a"), ratio(steps[1], "d", "a"))
    return f"""\
Setting: {len(batches)} timed batches (after {warmup} warm-up) of EWT train, the first of epoch 0
of the default batcher (token budget {prepared["tokens_per_batch"]}, the default trainer's seed):
{sentences} sentences, {tokens} words. Default biaffine model (`configs/model/biaffine.yaml`) and
AdamW (`configs/optim/adamw.yaml`), one thread; a step = forward, loss, backward, clipping,
optimiser and schedule step. Every variant has its own model (same initial weights) and sees the
same batches, interleaved batch by batch in one process (order rotated per batch).

The machine is shared with other jobs ({os.cpu_count()} cores; 1-minute load average
{min(load):.1f} to {max(load):.1f} at the batches' ends; this process pinned to one core), so wall-clock times are inflated and noisy. The primary measure is
therefore the CPU time of the process (`time.process_time`, not counted while descheduled); wall
times are given beside it. `x (b)`, `x (a)`: median over batches of the per-batch time ratio.
sentences/s, tokens/s: over the sum of the timed steps. Peak RSS: `VmHWM` of a fresh process per
variant (torch, model, optimiser, the batches) after running the heaviest timed batches ({heavy},
B x longest); growth: that peak minus the peak after set-up. One run.

{step_table}

Where the time goes: the loss part alone, i.e. edge scores (detached leaves from a forward of the
model on the same batch) -> `to_output` -> objective -> backward to the scores (CPU time).

{part_table}

Issue 3 (the tree CRF adds at most 15% to a step of the local loss): (a)/(b) = {crf:.3f} in CPU
time ({"met" if crf <= 1.15 else "NOT met"}).
Issue 4 (entropy or GE on an unlabeled batch at most 1.5x a supervised step on a labeled batch of
the same size): max((c)/(a), (d)/(a)) = {unlabeled:.3f} in CPU time
({"met" if unlabeled <= 1.5 else "NOT met"}).
Default config (a): {sentences / sum(steps[1]["a"]):.1f} sentences/s and
{tokens / sum(steps[1]["a"]):.0f} tokens/s per dedicated core (CPU time),
{sentences / sum(steps[0]["a"]):.1f} sentences/s in wall time on this shared machine; peak RSS
{mem["a"]["peak_mb"]:.0f} MB.

Batches (B x longest sentence): {", ".join(shape(b) for b in batches)}."""


DEFAULTS = {"batches": 20, "warmup": 2, "seed": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=DEFAULTS["batches"], help="timed batches")
    parser.add_argument(
        "--warmup", type=int, default=DEFAULTS["warmup"], help="untimed batches first"
    )
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="initial weights")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 1000 sentences, small batches, print only"
    )
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--prepared", help=argparse.SUPPRESS)
    parser.add_argument("--indices", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.memory_child:
        memory_child(
            Path(args.prepared),
            args.memory_child,
            [int(i) for i in args.indices.split(",")],
            args.seed,
        )
        return
    if args.quick:
        args.batches, args.warmup = min(args.batches, 3), min(args.warmup, 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "batches.pt"
        prepared = prepare(path, n_batches=args.warmup + args.batches, quick=args.quick)
        timed = time_variants(prepared, warmup=args.warmup, seed=args.seed)
        indices = heaviest(prepared["batches"], args.warmup)
        mem = memory(path, indices, args.seed)
    pinned = "taskset -c 1 " if len(os.sched_getaffinity(0)) == 1 else ""
    options = [
        f"--{key} {value}"
        for key, value in (("batches", args.batches), ("warmup", args.warmup), ("seed", args.seed))
        if value != DEFAULTS[key]
    ]
    options += ["--quick"] if args.quick else []
    command = " ".join([f"{pinned}.venv/bin/python experiments/bench_step_cost.py", *options])
    body = report(prepared, timed, mem, warmup=args.warmup, indices=indices,
                  load=timed["load"])
    if args.quick:
        print(body)
    else:
        write_result(
            "step_cost.md",
            "Cost of a training step: tree CRF objectives vs the local loss",
            command,
            body,
        )


if __name__ == "__main__":
    main()
