"""``experiments/annotation_sim.py`` (issue 46): the steps a dry run plans on the tiny fixture
treebank (arms, rounds, budgets, the model each selection reads, the self-training arm's teacher
and student), a rerun that skips finished steps, a failed step named by its log, the annotation
accumulated per pool sentence, the report's pure functions, and the ledger that keeps finished
rounds across sessions (a report from the ledger alone equals the run folders')."""

from __future__ import annotations

import doctest
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from parser.data.conllu_stream import stream_conllu
from parser.data.partial_trees import DEPREL, HEAD, edit_words, read_partial_trees
from tests.data.test_treebanks import lay_out

REPO = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name; the sim imports the ledger
    spec.loader.exec_module(module)
    return module


ledger = _load("sim_ledger")
sim = _load("annotation_sim")

OPTIONS = ["--treebanks", "xx_one", "--seeds", "1", "2", "--rounds", "2", "--budget", "25",
           "--seed-trees", "5", "--steps", "3", "--round-steps", "2", "--ledger", "none"]


@pytest.fixture
def root(tmp_path, fixtures) -> Path:
    lay_out(tmp_path / "ud", fixtures, layout="official", code="xx_one", folder="UD_Xx-One")
    return tmp_path / "ud"


def _dry_run(root: Path, out: Path, capsys, *more: str) -> list[str]:
    assert sim.main(["--root", str(root), "--out", str(out), *OPTIONS, *more, "--dry-run"]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_dry_run_plans_every_arm_round_and_budget_and_writes_nothing(root, tmp_path, capsys):
    out = tmp_path / "sim"
    lines = _dry_run(root, out, capsys)
    assert not out.exists()
    selects = [line for line in lines if line.startswith("$ python -m parser.cli.select ")]
    trains = [line for line in lines if line.startswith("$ python -m parser.cli.train ")]
    assert sum(line.startswith("# prepare: 5 seed trees") for line in lines) == 2
    assert sum(line.startswith("# fill_selected(") for line in lines) == 28
    # per seed: the shared round 0, 6 likelihood arms x 2 rounds, round 0's student (taught by
    # the shared round 0), teacher + student x 2 rounds
    assert len(selects) == 7 * 2 * 2 and len(trains) == 2 * (1 + 6 * 2 + 1 + 2 * 2)
    assert lines[-1] == f"# {2 + 28 + 28 + 36} steps to run"
    for arm, strategy in [("random", "random"), ("entropy", "entropy"), ("words", "words"),
                          ("words_stratified", "words"), ("words_no_rules", "words"),
                          ("words_kept", "words"), ("words_selftrain", "words")]:
        mine = [line for line in selects if f"/{arm}/r" in line.split("output=")[1].split()[0]]
        assert len(mine) == 4
        for line in mine:
            assert f"strategy={strategy} unit=words" in line and "budget=25 max_words=120" in line
            assert ("cap=3" in line) == arm.startswith("words")
            assert ("stratify=length" in line) == (arm == "words_stratified")
            kept = arm in ("words_kept", "words_selftrain")
            assert ("ud_rules=none" in line) == (arm == "words_no_rules" or kept)
            assert ("ud_rules=all" in line) == (arm in ("words", "words_stratified"))
            # the annotation so far goes back into the pool it reads, as given heads
            assert ("keep_heads=given" in line) == kept
            pool = Path(line.split(" pool=")[1].split()[0])
            assert (pool.name == "select_pool.conllu") == kept
    random_seeds = sorted(re.search(r" seed=(\d+)", line)[1] for line in selects
                          if "strategy=random" in line)
    assert random_seeds == ["1001", "1002", "2001", "2002"]
    # round 1 reads round 0's model and the seed split's pool; round 2 round 1's
    s1 = out / "xx_one" / "s1"
    words_r1 = selects[8]  # chains: random, entropy, words, ...; seeds within an arm
    assert (f"checkpoint={s1 / 'r0' / 'run' / 'checkpoints' / 'best.pt'} pool={s1 / 'pool.conllu'} "
            f"output={s1 / 'words' / 'r1' / 'select.conllu'}") in words_r1
    assert (f"checkpoint={s1 / 'words' / 'r1' / 'run' / 'checkpoints' / 'best.pt'} "
            f"pool={s1 / 'words' / 'r1' / 'pool.conllu'}") in "\n".join(selects)
    for line in trains:
        assert "experiment=release_cpu" in line and "data.partial_trees=true" in line
        assert "data.treebank=xx_one" in line
        # round 0 from scratch; each later round warm-started from the arm's last model
        run_dir = Path(line.split("hydra.run.dir=")[1].split()[0])
        round_ = int(run_dir.parent.name[1:])  # .../<arm>/r<k>/run (or teacher)
        if round_ == 0:
            assert "trainer.max_steps=3" in line and "model.init=" not in line
        else:
            assert "trainer.max_steps=2" in line
            arm = run_dir.parents[1]
            last = (arm.parent / "r0" if round_ == 1 and arm.name != "words_selftrain"
                    else arm / f"r{round_ - 1}")
            assert f"model.init={last / 'run' / 'checkpoints' / 'best.pt'}" in line, line
    student = next(line for line in trains if "objective=confident_arcs" in line
                   and "/words_selftrain/r2/" in line)
    r2 = out / "xx_one" / "s1" / "words_selftrain" / "r2"
    assert f"data.train_file={r2 / 'train.conllu'}" in student
    assert f"data.unlabeled_file={r2 / 'pool.conllu'}" in student
    # taught by the round's likelihood teacher; both start from the arm's last model
    r1_best = r2.parent / "r1" / "run" / "checkpoints" / "best.pt"
    assert f"confident_arcs.checkpoint={r2 / 'teacher' / 'checkpoints' / 'best.pt'}" in student
    assert f"model.init={r1_best}" in student
    teacher = next(line for line in trains if f"hydra.run.dir={r2 / 'teacher'}" in line)
    assert "objective=" not in teacher and f"model.init={r1_best}" in teacher
    first = next(line for line in trains if "/words_selftrain/r0/" in line)
    assert "objective=confident_arcs" in first and "model.init=" not in first
    assert f"confident_arcs.checkpoint={s1 / 'r0' / 'run' / 'checkpoints' / 'best.pt'}" in first
    assert not any(f"{s1 / 'words_selftrain' / 'r0' / 'teacher'}" in line for line in trains)


def test_a_dry_run_after_the_steps_are_done_plans_nothing(root, tmp_path, capsys):
    out = tmp_path / "sim"
    settings = sim.Settings(root, out, rounds=2, budget=25, seed_trees=5, cap=3, steps=3,
                            pool_sentences=None, extra=(), round_steps=2)
    train = root / "UD_Xx-One" / "xx_one-ud-train.conllu"
    chains = sim.plan(settings, [("xx_one", train)], [1, 2], list(sim.ARMS))
    for step in chains[0]:  # random, seed 1: its seed split and the shared round 0 too
        step.done.parent.mkdir(parents=True, exist_ok=True)
        step.done.write_text("{}")
    lines = _dry_run(root, out, capsys)
    assert lines[-1] == f"# {2 + 28 + 28 + 36 - 8} steps to run"
    s1 = out / "xx_one" / "s1"
    assert not any(line.startswith("# prepare") and f"{s1}/" in line for line in lines)
    assert not any(f"hydra.run.dir={s1 / 'r0' / 'run'}" in line or f"{s1 / 'random'}/" in line
                   for line in lines)
    for steps in chains:
        for step in steps:
            step.done.parent.mkdir(parents=True, exist_ok=True)
            step.done.write_text("{}")
    assert _dry_run(root, out, capsys) == ["# nothing to run: every step is done"]


def test_a_finished_step_is_skipped_and_a_failed_one_names_its_log(tmp_path):
    def never() -> dict:
        raise AssertionError("a finished step ran again")

    done = tmp_path / "a.done.json"
    done.write_text("{}")
    sim.execute(sim.Step("a", done, "a", never))
    failing = sim.command_step("xx/s1/words/r1/select", tmp_path / "r1", "select",
                               ["json.tool", str(tmp_path / "missing.json")])
    after = sim.Step("after", tmp_path / "after.done.json", "after", never)
    with pytest.raises(sim.StepFailed, match=re.escape(str(tmp_path / "r1" / "select.log"))):
        sim.run_chains([[failing, after]], jobs=2)
    assert not failing.done.exists() and not after.done.exists()


def test_a_pool_sentence_accumulates_its_words_and_leaves_the_pool_when_whole(tmp_path, fixtures):
    base = tmp_path / "s1"
    counts = sim.prepare(fixtures / "tiny-train.conllu", base, seed=1, seed_trees=5,
                         pool_sentences=None)
    (base / "prepare.done.json").write_text(json.dumps(counts))
    pool = list(stream_conllu(base / "pool.conllu"))
    assert counts["pool_sentences"] == len(pool) == 32 - 5

    def select(folder: Path, asked: dict[int, list[int] | None], source: list) -> None:
        """A parser-select file by hand: pool position -> the words asked (None: all)."""
        folder.mkdir(parents=True)
        blocks = []
        for position, words in asked.items():
            sentence = source[position - 1]
            chosen = words or range(1, len(sentence) + 1)
            lines = edit_words(sentence.lines, {w: {HEAD: "_", DEPREL: "_"} for w in chosen})
            comments = [f"# pool_position = {position}"]
            if words:
                comments.append(f"# selected_words = {','.join(map(str, words))}")
            blocks.append("\n".join(comments + lines))
        (folder / "select.conllu").write_text("\n\n".join(blocks) + "\n\n")

    r1 = base / "words" / "r1"
    select(r1, {2: [1, 2], 3: None}, pool)
    first = sim.annotate(r1, base=base, pool=base / "pool.conllu", previous=None)
    whole = len(pool[2])
    assert first["asked_words"] == first["new_words"] == 2 + whole
    assert first["annotated_words"] == counts["seed_words"] + 2 + whole
    assert first["pool_sentences"] == len(pool) - 1  # the whole sentence left, the partial one not
    remaining = list(stream_conllu(r1 / "pool.conllu"))
    assert [s.forms for s in remaining] == [s.forms for i, s in enumerate(pool) if i != 2]

    r2 = base / "words" / "r2"
    select(r2, {2: [2, 3]}, remaining)  # the same sentence again, one word asked before
    second = sim.annotate(r2, base=base, pool=r1 / "pool.conllu", previous=r1 / "annotation.json")
    assert (second["asked_words"], second["new_words"]) == (2, 1)
    assert second["annotated_words"] == first["annotated_words"] + 1
    assert sim.read_annotation(r2 / "annotation.json")[1] == {1, 2, 3}
    trained = read_partial_trees(r2 / "train.conllu").sentences
    assert len(trained) == 5 + 2
    partial = next(s for s in trained if s.forms == pool[1].forms)
    assert partial.heads == [h if w in (1, 2, 3) else -1 for w, h in enumerate(pool[1].heads, 1)]
    assert next(s for s in trained if s.forms == pool[2].forms).heads == pool[2].heads


def test_words_to_reach_interpolates_between_rounds():
    curve = [(800, 60.0), (1800, 66.0), (2800, 64.0), (3800, 70.0)]
    assert sim.words_to_reach(curve, 63.0) == pytest.approx(1300)
    assert sim.words_to_reach(curve, 68.0) == pytest.approx(2800 + 4 / 6 * 1000)  # after a dip
    assert sim.words_to_reach(curve, 55.0) == 800
    assert sim.words_to_reach(curve, 70.5) is None


def test_the_report_tables():
    curves = {"random": [(0, 800.0, 60.0, 3), (1, 1800.0, 64.0, 3), (2, 2800.0, 66.0, 3)],
              "words": [(0, 800.0, 60.0, 3), (1, 1790.0, 67.0, 3), (2, 2790.0, 69.0, 2)]}
    table = sim.curve_table(curves, seeds=3).splitlines()
    assert table[0] == "| arm | round 0 | round 1 | round 2 |"
    assert table[3] == ("| words | 60.00 (800 words) | 67.00 (1,790 words) | "
                        "69.00 (2,790 words; 2 seeds) |")
    rows, reached = sim.reach_rows(curves)
    assert rows[0].startswith("| arm | annotated words to reach random's final LAS (66.00)")
    assert rows[2] == "| random | 2,800 | 1.00 |"
    assert reached["words"] == pytest.approx(800 + 6 / 7 * 990)
    assert rows[3] == f"| words | {reached['words']:,.0f} | {reached['words'] / 2800:.2f} |"
    assert doctest.testmod(sim).failed == 0


def test_the_claim_of_a_word_arm():
    from types import SimpleNamespace
    reached = {"_target": 66.0, "_baseline_words": 2800, "words_no_rules": 1300.0}
    results = {("words_no_rules", 2): SimpleNamespace(delta=3.0, p_value=0.01),
               ("words", 2): SimpleNamespace(delta=-1.0, p_value=0.9)}
    assert sim.claim(reached, results, rounds=2, arm="words_no_rules") == (
        "Claim (words_no_rules against random): reaches random's final LAS with 0.46 of its words "
        "(at most half: yes); at the final budget +3.00 LAS, p = 0.0100 (better, p < 0.05: yes).")
    assert "not reached (at most half: no)" in sim.claim(reached, results, rounds=2, arm="words")
    assert sim.claim({}, results, rounds=2, arm="words") == (
        "Claim (words against random): not all rounds finished.")


def _finished_round(out: Path, folder: str, gold: Path, *, words: int, wrong: int,
                    counted: str, las: float) -> None:
    """A finished round by hand: its counted words, and a test prediction with the heads of the
    first ``wrong`` sentences' first word moved (its metrics file says ``las``)."""
    run = out / "xx_one" / folder / "run"
    run.mkdir(parents=True)
    blocks = []
    for number, sentence in enumerate(stream_conllu(gold)):
        lines = sentence.lines
        if number < wrong:
            head = sentence.heads[0]
            lines = edit_words(lines, {1: {HEAD: str(2 if head != 2 else 3)}})
        blocks.append("\n".join(lines))
    (run / "test.pred.conllu").write_text("\n\n".join(blocks) + "\n\n")
    (run / "test.pred.metrics.json").write_text(json.dumps({"official": {"LAS": las, "UAS": las}}))
    (run.parent / "train.done.json").write_text(json.dumps({"seconds": 60.0}))
    done = run.parent / counted if counted.startswith("annotate") else run.parents[1] / counted
    done.write_text(json.dumps({"annotated_words" if counted.startswith("annotate") else
                                "seed_words": words, "seconds": 6.0}))


def test_a_report_from_the_ledger_alone_equals_the_run_folders(root, tmp_path, capsys):
    gold = root / "UD_Xx-One" / "xx_one-ud-test.conllu"
    out, kept = tmp_path / "sim", tmp_path / "ledger"
    _finished_round(out, "s1/r0", gold, words=50, wrong=3, counted="prepare.done.json", las=70.0)
    _finished_round(out, "s1/random/r1", gold, words=90, wrong=2, counted="annotate.done.json",
                    las=80.0)
    _finished_round(out, "s1/words_no_rules/r1", gold, words=95, wrong=0,
                    counted="annotate.done.json", las=90.0)
    options = ["--root", str(root), "--treebanks", "xx_one", "--seeds", "1", "--rounds", "1",
               "--arms", "random", "words_no_rules", "--report"]
    assert sim.main(["--out", str(out), "--ledger", str(kept), *options]) == 0
    from_runs = (out / "annotation_sim.md").read_text()
    records = ledger.read(kept / "xx_one.jsonl")
    # the shared round 0 once (every likelihood arm's), then each arm's rounds
    assert [ledger.key(r) for r in records] == [("likelihood", 1, 0), ("random", 1, 1),
                                                ("words_no_rules", 1, 1)]
    assert records[1]["words"] == 90 and records[1]["seconds"] == {"annotate": 6.0, "train": 60.0}
    assert sum(records[1]["heads"]) == sum(records[2]["heads"]) - 2  # two heads moved
    # the shared round 0 (and the seed split) cost once: 60 + 6, then 66 a round
    assert "annotate 0.00 h, prepare 0.00 h, train 0.05 h (0.1 core-hours in all)" in from_runs
    assert "| words_no_rules | 1 | 1 | 95 / 90 | 100.00 / " in from_runs  # the counts' LAS
    # an arm asked for but not run on this treebank: only the shared round 0, so no row or claim
    assert sim.main(["--out", str(out), "--ledger", str(kept), *options[:-1], "words_kept",
                     "--report"]) == 0
    with_unrun = (out / "annotation_sim.md").read_text()
    assert "| words_no_rules | 70.00" in with_unrun and "words_kept" not in with_unrun.split(
        "Machine:")[1]

    empty = tmp_path / "elsewhere"  # a later session: the run folders are gone
    assert sim.main(["--out", str(empty), "--ledger", str(kept), *options]) == 0
    from_ledger = (empty / "annotation_sim.md").read_text()
    assert from_ledger.split("Machine:")[1] == from_runs.split("Machine:")[1]
    assert sim.main(["--out", str(empty), "--ledger", "none", *options]) == 0
    assert "| random | 1 |" not in (empty / "annotation_sim.md").read_text()

    with pytest.raises(SystemExit, match="--budget 1000 \\(now 5\\)"):
        sim.main(["--out", str(tmp_path / "other"), "--ledger", str(kept), "--budget", "5",
                  *options])


def test_a_ledger_line_that_is_not_a_round_names_its_line(tmp_path):
    path = tmp_path / "xx.jsonl"
    path.write_text('{"arm": "random"}\n')
    with pytest.raises(ValueError, match="xx.jsonl:1: a round without seed, round"):
        ledger.read(path)
    path.write_text("\n{not json\n")
    with pytest.raises(ValueError, match="xx.jsonl:2: not JSON"):
        ledger.read(path)


def test_a_kept_arm_reads_its_annotation_back_as_given_heads(tmp_path, fixtures):
    base = tmp_path / "s1"
    (base / "prepare.done.json").parent.mkdir(parents=True)
    counts = sim.prepare(fixtures / "tiny-train.conllu", base, seed=1, seed_trees=5,
                         pool_sentences=None)
    (base / "prepare.done.json").write_text(json.dumps(counts))
    pool = list(stream_conllu(base / "pool.conllu"))
    annotation = {1: {1, 2}, 2: set(range(1, len(pool[2]) + 1))}  # the second sentence leaves
    folder = base / "words_kept" / "r2"
    folder.mkdir(parents=True)
    sim.write_round_files(base, annotation, folder)
    sim.select_pool_file(folder / "pool.conllu", annotation, folder / "select_pool.conllu")
    given = list(stream_conllu(folder / "select_pool.conllu", require_trees=False,
                               check_heads=False))
    assert [s.forms for s in given] == [s.forms for i, s in enumerate(pool) if i != 2]
    assert given[1].heads == [h if w in (1, 2) else -1 for w, h in enumerate(pool[1].heads, 1)]
    assert given[1].deprels[:2] == pool[1].deprels[:2] and given[1].deprels[2] is None
    assert all(h == -1 for s in given[:1] + given[2:] for h in s.heads)
