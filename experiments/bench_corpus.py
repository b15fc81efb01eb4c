"""Training on a streamed unlabeled corpus (``data.unlabeled_corpus``) against today's in-memory
path (``data.unlabeled_file``): peak RSS, time to the first step and unlabeled sentences/s.

Corpora of resampled EWT train sentences (``experiments/synthetic_corpus.py``, written to a
temporary folder, one tokenised sentence per line). Each measurement runs in a fresh process on
one thread, which reports its own peak RSS (``resource.getrusage``):

- ``train``: ``parser-train experiment=ssl_ewt objective=entropy`` with the first 100 EWT trees as
  labeled data (``data.max_train_sentences=100``: no in-memory unlabeled part, so that the
  unlabeled batches come from the corpus), no dev/test, ``--steps`` steps. Time to first step: process
  start to the end of step 1; sentences/s: unlabeled sentences of steps 2.. over their time.
- ``data``: the unlabeled batches alone, no model (the vocabulary of EWT train in both paths):
  the data path's own rate, and the in-memory path's encoding time before its first batch.

All corpora are written first (and synced to disk); the training runs then go in ``--repeats``
rounds over every row, and each row reports the medians of its rounds.

    python experiments/bench_corpus.py --sizes 10000 100000 1000000 --memory-size 100000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic_corpus import write_corpus

from parser.data.paths import resolve_ud_root, treebank_file

REPO = Path(__file__).resolve().parents[1]
TRAIN_CHILD = r"""
import json, resource, sys, time
start = time.perf_counter()
from hydra import compose, initialize_config_dir
from parser.config import config_dir, register_configs
from parser.train.loop import Trainer
register_configs()
with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
    cfg = compose("config", overrides=sys.argv[2:])
trainer = Trainer(cfg, run_dir=sys.argv[1])
stream, times, unlabeled = trainer.task.batches, [], []
draw = stream.next
def timed():
    times.append(time.perf_counter())
    kind, batch = draw()
    unlabeled.append(batch.size if kind == "unlabeled" else 0)
    return kind, batch
stream.next = timed
trainer.fit()
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "first_step_s": times[1] - start,
                  "sentences_per_s": sum(unlabeled[1:-1]) / (times[-1] - times[1])}))
"""
DATA_CHILD = r"""
import itertools, json, resource, sys, time
from pathlib import Path
from parser.data.batching import BucketBatcher, encode_all
from parser.data.conllu_io import read_conllu, read_tokenized
from parser.data.corpus import UnlabeledCorpus
from parser.data.corpus_batches import CorpusBatcher
from parser.data.vocab import Vocabularies
path, ewt, mode, batches = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
vocabs = Vocabularies.build(read_conllu(ewt).sentences, min_freq=2)
start = time.perf_counter()
if mode == "memory":
    batcher = BucketBatcher(encode_all(read_tokenized(path).sentences, vocabs), tokens_per_batch=1000,
                            shuffle=True, seed=1, max_length=60, labeled=False)
else:
    corpus = UnlabeledCorpus([Path(path)], fmt="tokenised", max_words=500,
                             max_bad_share=0.01)
    batcher = CorpusBatcher(corpus, vocabs, tokens_per_batch=1000, buffer_size=10000, seed=1,
                            max_length=60)
iterator = iter(batcher)
first = next(iterator)
ready = time.perf_counter()
count = sum(batch.size for batch in itertools.islice(iterator, batches))  # at most an epoch
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "first_batch_s": ready - start,
                  "sentences_per_s": count / (time.perf_counter() - ready)}))
"""


def ewt_train() -> Path:
    """EWT's training file under the UD data root ($UD_ROOT, else data/ud), in either layout."""
    return treebank_file(resolve_ud_root(None), "en_ewt", "train")


def run_child(code: str, *args: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env, check=False,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def train(corpus: Path, *, streamed: bool, steps: int, work: Path, root: Path) -> dict:
    option = "data.unlabeled_corpus" if streamed else "data.unlabeled_file"
    return run_child(TRAIN_CHILD, str(work / f"run-{time.monotonic_ns()}"), "experiment=ssl_ewt",
                     "objective=entropy", "data.labeled_size=100", "data.max_train_sentences=100",
                     "model.upos_input=none", "data.dev_split=null", "data.test_split=null",
                     f"data.root={root}", f"{option}={corpus}", f"trainer.max_steps={steps}",
                     "trainer.eval_every=100000", "trainer.final_eval=false", "trainer.progress=false",
                     "logger.tensorboard=false", "trainer.num_threads=1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--memory-size", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--data-batches", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the training runs; medians")
    args = parser.parse_args()
    ewt = ewt_train()
    runs = [("stream", size) for size in sorted(args.sizes)] + [("memory", args.memory_size)]
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        corpora = {size: write_corpus(ewt, work / f"corpus-{size}.txt", sentences=size)
                   for size in sorted(set(args.sizes) | {args.memory_size})}
        os.sync()  # no write-back of the fresh corpora during the timed runs
        trained: dict[tuple[str, int], list[dict]] = {run: [] for run in runs}
        for _ in range(args.repeats):  # rounds over every row: load drifts hit all rows alike
            for name, size in runs:
                trained[name, size].append(train(corpora[size], streamed=name == "stream", steps=args.steps,
                                                 work=work, root=ewt.parent.parent))
                print(json.dumps({"path": name, "sentences": size, **trained[name, size][-1]}), flush=True)
        rows = []
        for name, size in runs:
            data = run_child(DATA_CHILD, str(corpora[size]), str(ewt), name, str(args.data_batches))
            medians = {key: statistics.median(r[key] for r in trained[name, size]) for key in trained[name, size][0]}
            rows.append({"path": name, "sentences": size, **medians, **{f"data_{k}": v for k, v in data.items()}})
    print("| path | corpus sentences | peak RSS (MB) | time to first step (s) | unlabeled sent/s (training) "
          "| data path alone: RSS (MB) | first batch (s) | sent/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['path']} | {r['sentences']:,} | {r['rss_mb']:.0f} | {r['first_step_s']:.1f} | "
              f"{r['sentences_per_s']:.1f} | {r['data_rss_mb']:.0f} | {r['data_first_batch_s']:.2f} | "
              f"{r['data_sentences_per_s']:.0f} |")


if __name__ == "__main__":
    main()
