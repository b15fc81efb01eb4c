"""Self-training's teacher pass at scale: on the fly (today: every draw of an unlabeled sentence
runs the frozen teacher) against a pre-pass that parses the corpus once and writes silver trees.

On the protocol's setup (``experiment=ssl_ewt``, 100 labeled EWT trees, the rest as unlabeled
text, one thread) and its unlabeled batches, per batch, interleaved, medians over ``--batches``:

- ``step``: the unlabeled training step as the trainer runs it (student forward, the term with its
  teacher pass, backward, clipping, optimiser) for ``self_training`` (kl, ``tree=mst``) and
  ``confident_arcs``;
- ``teacher``: the teacher's work alone on the batch: forward (``trees_only()``, as the terms
  call it), 1-best tree, arc marginals (what a pre-pass would do once per sentence, and what
  every on-the-fly step does); with ``--teacher`` given more than once, each one's, interleaved
  on the same batches (the steps are the first teacher's);
- ``write + read``: the batch's silver trees (heads, ``_`` for the arcs not kept) written as
  CoNLL-U and read back (a pre-pass's I/O, per draw of the sentence from disk).

A pre-pass's student step is estimated as ``step - teacher``. Per unlabeled sentence that a run
draws ``E`` times: on the fly ``E * step``; pre-pass ``teacher + write + E * (step - teacher +
read)``, plus the teacher pass over every corpus sentence the run never draws.

    PYTHONPATH=. python experiments/bench_teacher_pass.py --teacher <likelihood run>/checkpoints/best.pt

``--override`` adds config overrides to the students (e.g. the first teacher's model options).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import ssl_protocol
import torch
from common import machine, markdown_table
from hydra import compose, initialize_config_dir

from parser.config import config_dir, register_configs
from parser.data.conllu_io import read_conllu
from parser.data.streams import UNLABELED
from parser.inference import load_parser
from parser.train.loop import Trainer

ARMS = {arm: ssl_protocol.ARMS[arm] for arm in ssl_protocol.TEACHER_OPTION}  # the two self-training arms


def trainer_for(arm: str, teacher: Path, root: Path, work: Path, extra: list[str]) -> Trainer:
    overrides = ["experiment=ssl_ewt", f"data.root={root}", "data.treebank=en_ewt", *ARMS[arm], *extra,
                 f"{ssl_protocol.TEACHER_OPTION[arm]}={teacher}", "data.dev_split=null", "data.test_split=null",
                 "trainer.num_threads=1", "logger.tensorboard=false", "trainer.progress=false"]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    trainer = Trainer(cfg, run_dir=work / arm)
    trainer.model.train()  # as fit() does: dropout on
    return trainer


def unlabeled_batches(trainer: Trainer, count: int) -> list:
    drawn = []
    while len(drawn) < count:
        kind, batch = trainer.task.batches.next()
        if kind == UNLABELED:
            drawn.append(batch)
    return drawn


def step(trainer: Trainer, batch) -> None:
    """One unlabeled step as :meth:`Trainer.fit` takes it."""
    loss = trainer.task.loss((UNLABELED, batch), step=10_000).output.loss  # past the warm-up
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), float(trainer.cfg.optim.clip_norm))
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)


def teacher_work(teacher, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """The 1-best heads and their marginals: what a pre-pass stores."""
    with torch.no_grad():
        dist = teacher(batch).dist
        heads = dist.argmax()
        heads = heads[0] if isinstance(heads, tuple) else heads
        return heads, dist.arc_marginals.gather(2, heads.clamp(min=0)[:, :, None]).squeeze(2)


def write_and_read(batch, heads, confidence, sentences, path: Path) -> tuple[float, float]:
    """Seconds to write the batch's silver trees (unconfident heads ``_``) and to read them back."""
    start = time.perf_counter()
    with path.open("w", encoding="utf-8") as out:
        for row, index in enumerate(batch.index.tolist()):
            forms = sentences[index].forms
            for i, form in enumerate(forms, 1):
                head = str(int(heads[row, i])) if confidence[row, i] >= 0.9 else "_"
                out.write(f"{i}\t{form}\t_\t_\t_\t_\t{head}\t{'dep' if head != '_' else '_'}\t_\t_\n")
            out.write("\n")
    written = time.perf_counter()
    read_conllu(path, require_trees=False)
    return written - start, time.perf_counter() - written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", type=Path, required=True, action="append",
                        help="the likelihood run's best.pt (repeatable: each teacher's work is timed)")
    parser.add_argument("--override", action="append", default=[], help="a config override of the students")
    parser.add_argument("--root", type=Path, default=Path("../shared/data/ud-release"))
    parser.add_argument("--batches", type=int, default=30)
    args = parser.parse_args()
    register_configs()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        trainers = {arm: trainer_for(arm, args.teacher[0].resolve(), args.root.resolve(), work, args.override)
                    for arm in ARMS}
        first = trainers["confident_arcs"]
        # the terms' teacher: the same checkpoint, eval mode, its trees only
        teachers = {path: load_parser(path)[0].trees_only() for path in args.teacher}
        names = {path: "teacher" if n == 0 else f"teacher {n + 1}" for n, path in enumerate(args.teacher)}
        batches = unlabeled_batches(first, args.batches + 1)
        sentences = first.task.data.unlabeled
        times: dict[str, list[float]] = {"self_training step": [], "confident_arcs step": [],
                                         **{name: [] for name in names.values()}, "write": [], "read": []}
        words = []
        for number, batch in enumerate(batches):
            timed = {}
            for arm, trainer in trainers.items():
                start = time.perf_counter()
                step(trainer, batch)
                timed[f"{arm} step"] = time.perf_counter() - start
            for path, teacher in teachers.items():
                start = time.perf_counter()
                work_done = teacher_work(teacher, batch)
                timed[names[path]] = time.perf_counter() - start
                if names[path] == "teacher":
                    heads, confidence = work_done
            timed["write"], timed["read"] = write_and_read(batch, heads, confidence, sentences, work / "silver.conllu")
            if number:  # the first batch warms up
                words.append(batch.n_tokens / batch.size)
                for name, value in timed.items():
                    times[name].append(value / batch.size)  # per sentence
    median = {name: statistics.median(values) * 1000 for name, values in times.items()}
    rows = [[name, f"{value:.2f}"] for name, value in median.items()]
    print(f"Machine: {machine()}; {args.batches} unlabeled batches of EWT train "
          f"({statistics.mean(words):.1f} words a sentence), medians per sentence\n")
    print(markdown_table(["part", "ms per unlabeled sentence"], rows))
    for path, name in names.items():
        print(f"\n{name}: {path} ({median[name] / median['teacher']:.2f}x the first teacher's work)")
    for arm in ARMS:
        step_ms = median[f"{arm} step"]
        share = median["teacher"] / step_ms
        print(f"\n{arm}: the teacher is {share:.0%} of an on-the-fly step")
        for draws in (1, 2, 6.4, 10):
            on_the_fly = draws * step_ms
            prepass = median["teacher"] + median["write"] + draws * (step_ms - median["teacher"] + median["read"])
            print(f"  E = {draws}: on the fly {on_the_fly:.1f} ms, pre-pass {prepass:.1f} ms "
                  f"({prepass / on_the_fly:.2f}x)")


if __name__ == "__main__":
    main()
