"""``experiments/fr_sequoia_vectors.py`` (issue 62's fr_sequoia comparison): the commands built for
each arm, the recipe file of an ours run, and the report from fake finished runs. No training,
no spaCy, no UDPipe."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from parser.eval.official import METRICS

REPO = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location(
    "fr_sequoia_vectors", REPO / "experiments" / "fr_sequoia_vectors.py")
fsv = importlib.util.module_from_spec(_SPEC)
sys.modules["fr_sequoia_vectors"] = fsv  # dataclasses look their module up
_SPEC.loader.exec_module(fsv)


def _plan(tmp_path: Path, *extra: str) -> dict:
    gsd = tmp_path / "fr_gsd"
    gsd.mkdir(parents=True, exist_ok=True)
    for split in ("dev", "test"):
        (gsd / f"fr_gsd-ud-{split}.conllu").write_text("")
    args = fsv.arguments(["--out", str(tmp_path / "out"), "--unlabeled", str(gsd), *extra])
    return {job.name: job for job in fsv.plan(args, tmp_path / "root")}


def test_metrics_are_the_official_rows():
    assert fsv.METRICS == METRICS


def test_every_arm_and_seed_is_a_run_with_its_dependencies(tmp_path):
    jobs = _plan(tmp_path)
    assert set(jobs) == {
        "vectors-spacy", "learned-corpus", "udpipe", "udpipe_spacy", "spacy_model",
        *(f"vectors-learned-s{s}" for s in (1, 2, 3)),
        *(f"ours-{arm}-s{s}" for arm in ("none", "spacy", "learned") for s in (1, 2, 3))}
    assert jobs["ours-none-s2"].deps == []
    assert jobs["ours-spacy-s2"].deps == ["vectors-spacy", "ours-none-s2"]
    assert jobs["ours-learned-s2"].deps == ["vectors-learned-s2", "ours-none-s2"]
    assert jobs["ours-learned-s2"].share_tokenizer_from == "ours-none-s2"
    assert jobs["udpipe_spacy"].deps == ["vectors-spacy"] and jobs["udpipe"].deps == []
    names = list(jobs)  # dependencies are planned first
    assert all(names.index(d) < names.index(n) for n, job in jobs.items() for d in job.deps)
    alone = _plan(tmp_path / "b", "--arms", "spacy", "--no-share-tokenizer", "--seeds", "7")
    assert set(alone) == {"vectors-spacy", "ours-spacy-s7"}
    assert alone["ours-spacy-s7"].deps == ["vectors-spacy"]
    later = _plan(tmp_path / "c", "--arms", "learned", "--seeds", "4", "5")
    assert later["ours-learned-s4"].share_tokenizer_from is None  # no none run of seed 4
    (tmp_path / "c" / "out" / "ours-none-s5").mkdir(parents=True)
    (tmp_path / "c" / "out" / "ours-none-s5" / "done.json").write_text("{}")
    later = _plan(tmp_path / "c", "--arms", "learned", "--seeds", "4", "5")
    assert later["ours-learned-s5"].share_tokenizer_from == "ours-none-s5"  # finished before
    assert later["ours-learned-s5"].deps == ["vectors-learned-s5"]


def test_ours_runs_are_parser_train_pipeline_with_a_recipe_file(tmp_path):
    jobs = _plan(tmp_path, "--vectors-max-rows", "50000")
    out = tmp_path / "out"
    [command] = jobs["ours-spacy-s3"].commands
    assert Path(command[0]).name == "parser-train-pipeline" or command[1:3] == [
        "-m", "parser.cli.train_pipeline"]
    assert f"recipe={out / 'recipes' / 'spacy-s3.yaml'}" in command
    assert f"output={out / 'ours-spacy-s3' / 'run'}" in command
    assert "treebank=fr_sequoia" in command and f"root={tmp_path / 'root'}" in command
    base = fsv.base_recipe("release_cpu")
    recipe = jobs["ours-spacy-s3"].recipe
    assert recipe["tokenizer"] == [*base["tokenizer"], "trainer.seed=3"]
    assert recipe["parser"] == [*base["parser"], "trainer.seed=3", "model.layer_weight=1",
                                f"model.vectors.path={out / 'vectors-spacy' / 'fr_core_news_md.vec'}",
                                "model.vectors.max_rows=50000"]
    assert not any("vectors" in o for o in jobs["ours-none-s3"].recipe["parser"])
    assert (f"model.vectors.path={out / 'vectors-learned-s3' / 'learned.vec'}"
            in jobs["ours-learned-s3"].recipe["parser"])
    fsv.write_recipe(out, jobs["ours-spacy-s3"])  # a file load_recipe reads back
    assert fsv.base_recipe(str(out / "recipes" / "spacy-s3.yaml")) == recipe


def test_vector_and_baseline_commands(tmp_path):
    jobs = _plan(tmp_path)
    out = tmp_path / "out"
    [export] = jobs["vectors-spacy"].commands
    assert export[1].endswith("export_spacy_vectors.py") and "--max-keys" not in export
    assert export[-2:] == ["--out", str(out / "vectors-spacy" / "fr_core_news_md.vec")]
    [learn] = jobs["vectors-learned-s2"].commands
    corpus = next(a for a in learn if a.startswith("corpus="))
    assert corpus == ("corpus=[" + ",".join([
        str(tmp_path / "root" / "UD_French-Sequoia" / "fr_sequoia-ud-train.conllu"),
        str(out / "learned-corpus" / "fr_gsd-ud-dev.conllu"),
        str(out / "learned-corpus" / "fr_gsd-ud-test.conllu")]) + "]")
    assert "seed=2" in learn and "threads=1" in learn
    [udpipe] = jobs["udpipe_spacy"].commands
    assert udpipe[udpipe.index("--worker") + 1] == "udpipe"
    assert udpipe[-2:] == ["--vectors", str(out / "vectors-spacy" / "fr_core_news_md.vec")]
    assert "--vectors" not in jobs["udpipe"].commands[0]
    [spacy] = jobs["spacy_model"].commands
    assert spacy[spacy.index("--worker") + 1] == "spacy" and spacy[-1] == "fr_core_news_md"


def test_smoke_plan_is_small(tmp_path):
    jobs = _plan(tmp_path, "--smoke")
    assert jobs["vectors-spacy"].commands[0][-2:] == ["--max-keys", str(fsv.SMOKE_VECTOR_ROWS)]
    assert "epochs=1" in jobs["vectors-learned-s1"].commands[0]
    assert "trainer.max_steps=20" in jobs["ours-none-s1"].recipe["parser"]
    assert "--smoke" in jobs["udpipe"].commands[0]


def _finish(out: Path, name: str, raw: dict, *, nested: bool, parser_seconds: int = 120) -> None:
    folder = out / name
    result_folder = folder / "run" if nested else folder
    result_folder.mkdir(parents=True)
    (result_folder / "result.json").write_text(json.dumps({"raw": raw, "train_seconds": 600}))
    if nested:
        (folder / "run" / "parser").mkdir()
        (folder / "run" / "parser" / "done.json").write_text(json.dumps({"seconds": parser_seconds}))
    (folder / "done.json").write_text(json.dumps({
        "host": "vm", "cpu": "Xeon", "cores": 2, "load_start": [1.5, 1, 1], "load_end": [2.25, 1, 1]}))


def _row(table: str, label: str) -> list[str]:
    [row] = [line for line in table.splitlines() if line.startswith(f"| {label} |")]
    return [cell.strip() for cell in row.strip().strip("|").split("|")][1:]


def test_report_from_finished_runs_only(tmp_path):
    out = tmp_path / "out"
    every = {metric: 80.0 for metric in METRICS}
    _finish(out, "ours-none-s1", {**every, "LAS": 80.0}, nested=True)
    _finish(out, "ours-none-s2", {**every, "LAS": 82.0}, nested=True, parser_seconds=300)
    _finish(out, "ours-spacy-s1", {**every, "LAS": 85.0}, nested=True)
    _finish(out, "udpipe", {**every, "LAS": 78.0}, nested=False)
    unfinished = out / "ours-learned-s1" / "run"  # a result without done.json: left out
    unfinished.mkdir(parents=True)
    (unfinished / "result.json").write_text(json.dumps({"raw": every}))
    (out / "vectors-spacy").mkdir()
    (out / "vectors-spacy" / "done.json").write_text("{}")  # not a scored run
    text = fsv.report(out, command="python experiments/fr_sequoia_vectors.py --report",
                      note="nothing else", smoke=False)
    assert "Made by: `python experiments/fr_sequoia_vectors.py --report`" in text
    assert "vm (Xeon, 2 cores)" in text and "nothing else" in text and "2.25" in text
    means = text.split("| system |", 1)[1].split("\n\n", 1)[0]
    las = METRICS.index("LAS") + 1  # after the runs column
    assert _row("| system |" + means, "ours, no vectors")[0] == "2"
    assert _row("| system |" + means, "ours, no vectors")[las] == "81.00 ± 1.41"
    assert _row("| system |" + means, "ours + fr_core_news_md vectors")[las] == "85.00"
    assert _row("| system |" + means, "UDPipe 1, trained here")[las] == "78.00"
    assert "parser-vectors" not in means  # the learned arm has no finished run
    udpipe2 = _row("| system |" + means, "UDPipe 2 (published)")
    assert udpipe2[METRICS.index("LAS") + 1:] == ["92.75", "", "86.39", "89.39"]
    assert udpipe2[1] == ""  # no Tokens published
    stanza = _row("| system |" + means, "Stanza 1.5.1 (published)")
    assert [stanza[METRICS.index(m) + 1] for m in ("LAS", "MLAS", "BLEX")] == ["91.57", "84.88",
                                                                               "86.36"]
    per_run = text.split("| run | seed |", 1)[1].split("\n\n", 1)[0]
    assert _row("| run | seed |" + per_run, "ours-none-s2")[0] == "2"
    assert _row("| run | seed |" + per_run, "ours-none-s2")[-1] == "5.0"  # parser minutes
    assert _row("| run | seed |" + per_run, "udpipe")[-1] == "10.0"  # UDPipe's training
    assert "ours-learned-s1" not in per_run
    assert "Sequoia 2.8" in text and "SMOKE" not in text
    assert "SMOKE" in fsv.report(out, command="x", note=None, smoke=True)


def test_held_out_text_is_left_out_of_the_learned_corpus(tmp_path):
    root = tmp_path / "root" / "UD_French-Sequoia"
    root.mkdir(parents=True)

    def sentence(text: str) -> str:
        words = text.split()
        return f"# text = {text}\n" + "".join(
            f"{i}\t{w}\t_\tX\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_\n"
            for i, w in enumerate(words, 1))

    (root / "fr_sequoia-ud-train.conllu").write_text(sentence("Il pleut .") + "\n")
    (root / "fr_sequoia-ud-dev.conllu").write_text(sentence("Le chat dort .") + "\n")
    (root / "fr_sequoia-ud-test.conllu").write_text(sentence("La  maison brûle .") + "\n")
    gsd = tmp_path / "fr_gsd-ud-dev.conllu"
    gsd.write_text("\n".join([sentence("La maison brûle ."), sentence("Un texte neuf ."),
                              sentence("Le chat dort .")]) + "\n")
    args = fsv.arguments(["--worker", "corpus", "--root", str(tmp_path / "root"), "--out",
                          str(tmp_path / "out"), "--unlabeled", str(gsd)])
    fsv.worker_corpus(args)
    kept = (tmp_path / "out" / "learned-corpus" / gsd.name).read_text()
    assert "Un texte neuf" in kept and "maison" not in kept and "chat" not in kept
    counts = json.loads((tmp_path / "out" / "learned-corpus" / "corpus.json").read_text())
    assert counts["files"][gsd.name] == {"source": str(gsd), "sentences": 3, "kept": 1,
                                         "dropped": 2, "words": 4}
