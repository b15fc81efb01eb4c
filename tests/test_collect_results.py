"""parser.eval.summary (``experiments/collect_results.py``) on synthetic run directories:
grouping by resolved config, mean and sample std by hand, columns in order, incomplete runs,
footnotes and split rows, errors, the config files of the SSL sweeps composed by Hydra, and the
per-run table of the SweepSummary callback."""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from parser.eval import summary as collect_results
from parser.eval.analyses.ablation_table import build_table, render_markdown
from parser.eval.analyses.runs import find_run_dirs, load_run, objective_label

LIKELIHOOD = {"likelihood": {"weight": 1.0}}
ENTROPY_GE = {"likelihood": {"weight": 1.0}, "entropy": {"weight": 0.1, "warmup": 500},
              "ge": {"weight": 1.0, "constraints": "ud_universal"}}


def make_run(root: Path, name: str, *, terms: dict, size, seed: int, uas: float | None,
             las: float | None = None, official: bool = True, data: dict | None = None,
             trainer: dict | None = None) -> Path:
    """A run directory as parser-train leaves it: .hydra/config.yaml and test metrics JSON."""
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    config = {
        "data": {"treebank": "en_ewt", "root": f"/data/{name}", "labeled_size": size,
                 "labeled_fraction": None, "unlabeled_ratio": 1.0, "dev_split": "dev",
                 **(data or {})},
        "model": {"kind": "biaffine", "lstm_hidden": 128},
        "objective": {"terms": terms},
        "trainer": {"seed": seed, "max_steps": 2000, "progress": False, **(trainer or {})},
        "logger": {"tensorboard": True},
        "name": name.replace("/", "_"),
    }
    OmegaConf.save(OmegaConf.create(config), run / ".hydra" / "config.yaml")
    if uas is not None:
        las = uas - 10 if las is None else las
        report = {"uas": uas - 1, "las": las - 1, "split": "test"}  # in-loop scores differ
        if official:
            report["official"] = {"UAS": uas, "LAS": las}
        else:
            report.update(uas=uas, las=las)
        (run / "test.pred.metrics.json").write_text(json.dumps(report))
    return run


def table_lines(markdown: str, metric: str) -> list[str]:
    section = markdown.split(f"## test {metric}\n\n")[1].split("\n\n")[0]
    return section.strip().splitlines()


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    root = tmp_path / "multirun"
    for seed, uas in zip((1, 2, 3), (70.0, 72.0, 74.0)):
        make_run(root, f"lik/n100/seed{seed}", terms=LIKELIHOOD, size=100, seed=seed, uas=uas)
    for seed, uas in zip((1, 2), (80.5, 81.5)):
        make_run(root, f"lik/n1000/seed{seed}", terms=LIKELIHOOD, size=1000, seed=seed, uas=uas,
                 official=False)
    make_run(root, "lik/nall/seed1", terms=LIKELIHOOD, size=None, seed=1, uas=88.0)
    for seed, uas in zip((1, 2, 3), (75.0, 76.0, 80.0)):
        make_run(root, f"eg/n100/seed{seed}", terms=ENTROPY_GE, size=100, seed=seed, uas=uas)
    make_run(root, "eg/n0/seed1", terms=ENTROPY_GE, size=0, seed=1, uas=55.0)
    make_run(root, "eg/n1000/seed1", terms=ENTROPY_GE, size=1000, seed=1, uas=None)  # unfinished
    return root


def test_table_means_std_columns_and_incomplete(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert collect_results.main([str(sweep), "--out-dir", str(out)]) == 0
    markdown = (out / "ssl_ablation.md").read_text()
    uas = table_lines(markdown, "UAS")
    assert uas[0] == ("| objective | labeled trees 0 | labeled trees 100 | labeled trees 1000 | "
                      "labeled trees all |")
    std_eg = statistics.stdev([75.0, 76.0, 80.0])  # 2.6458
    assert uas[2] == "| likelihood | – | 72.00 ± 2.00 (n=3) | 81.00 ± 0.71 (n=2) | 88.00 (n=1) |"
    assert uas[3] == (f"| likelihood + entropy + GE | 55.00 (n=1) | 77.00 ± {std_eg:.2f} (n=3) | – | – |")
    las = table_lines(markdown, "LAS")
    assert las[2] == "| likelihood | – | 62.00 ± 2.00 (n=3) | 71.00 ± 0.71 (n=2) | 78.00 (n=1) |"
    # The unfinished run is listed, not counted; no footnotes (roots and names are bookkeeping).
    assert "eg/n1000/seed1" in markdown.split("not counted")[1]
    assert "[1]" not in markdown
    png = (out / "ssl_ablation.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000


def test_official_scores_preferred_and_in_loop_fallback(sweep: Path) -> None:
    official = load_run(sweep / "lik" / "n100" / "seed1")
    assert (official.uas, official.las) == (70.0, 60.0)
    in_loop = load_run(sweep / "lik" / "n1000" / "seed1")
    assert (in_loop.uas, in_loop.las) == (80.5, 70.5)
    assert load_run(sweep / "eg" / "n1000" / "seed1").complete is False


def test_a_run_scored_later_by_parser_evaluate_counts(tmp_path: Path) -> None:
    # The fair protocol's chosen dev run: trained without test, scored by parser-evaluate into
    # eval/<treebank>-test.pred.metrics.json. Its own test file, where present, wins.
    later = make_run(tmp_path, "dev_only", terms=LIKELIHOOD, size=100, seed=1, uas=None)
    (later / "eval").mkdir()
    (later / "eval" / "en_ewt-test.pred.metrics.json").write_text(
        json.dumps({"official": {"UAS": 73.0, "LAS": 68.0}}))
    (later / "eval" / "de_gsd-test.pred.metrics.json").write_text(  # another treebank: not its own
        json.dumps({"official": {"UAS": 50.0, "LAS": 40.0}}))
    assert (load_run(later).uas, load_run(later).las) == (73.0, 68.0)
    assert load_run(later, split="dev").complete is False
    both = make_run(tmp_path, "both", terms=LIKELIHOOD, size=100, seed=2, uas=71.0)
    (both / "eval").mkdir()
    (both / "eval" / "en_ewt-test.pred.metrics.json").write_text(
        json.dumps({"official": {"UAS": 99.0, "LAS": 99.0}}))
    assert load_run(both).uas == 71.0


def test_differing_settings_split_rows_or_get_footnotes(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    # Same objective and size, different weights: never pooled.
    heavy = {"likelihood": {"weight": 1.0}, "entropy": {"weight": 1.0}}
    light = {"likelihood": {"weight": 1.0}, "entropy": {"weight": 0.1}}
    make_run(root, "heavy", terms=heavy, size=100, seed=1, uas=60.0)
    make_run(root, "light", terms=light, size=100, seed=1, uas=70.0)
    make_run(root, "light2", terms=light, size=100, seed=2, uas=72.0)
    # The n0 cell of GE was run without dev selection: a footnote, same row.
    ge = {"ge": {"weight": 1.0}}
    make_run(root, "ge100", terms=ge, size=100, seed=1, uas=50.0)
    make_run(root, "ge0", terms=ge, size=0, seed=1, uas=40.0, data={"dev_split": None})
    # KL teachers differ per run and may be unresolvable interpolations: bookkeeping.
    kl = lambda path: {"likelihood": {"weight": 1.0}, "kl": {"checkpoint": path}}
    make_run(root, "kl1", terms=kl("${hydra:sweep.dir}/a/best.pt"), size=100, seed=1, uas=65.0)
    make_run(root, "kl2", terms=kl("/elsewhere/b/best.pt"), size=100, seed=2, uas=67.0)
    table = build_table([load_run(p) for p in find_run_dirs([root])])
    labels = [row.label for row in table.rows]
    assert labels == [
        "GE",
        "likelihood + entropy [objective.terms.entropy.weight=0.1]",
        "likelihood + entropy [objective.terms.entropy.weight=1.0]",
        "likelihood + KL",
    ]
    rows = {row.label: row for row in table.rows}
    assert rows["likelihood + entropy [objective.terms.entropy.weight=0.1]"].cells["100"].stats("uas") == (
        71.0, statistics.stdev([70.0, 72.0]))
    assert rows["likelihood + KL"].cells["100"].n == 2
    # GE's two cells disagree and tie 1-1: the first run seen (ge0, sorted paths) is the
    # reference, so the other cell carries the note.
    assert {name: cell.note for name, cell in rows["GE"].cells.items()} == {"0": None, "100": 1}
    assert table.notes == ["data.dev_split=dev"]
    markdown = render_markdown(table, title="t", split="test", column_title="n")
    assert f"- [1] {table.notes[0]}" in markdown


def test_ignore_option_pools_runs(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make_run(root, "a", terms=LIKELIHOOD, size=100, seed=1, uas=70.0, trainer={"max_steps": 1000})
    make_run(root, "b", terms=LIKELIHOOD, size=100, seed=2, uas=74.0, trainer={"max_steps": 2000})
    runs = [load_run(p) for p in find_run_dirs([root])]
    assert len(build_table(runs).rows) == 2
    pooled = build_table(runs, ignore=["trainer.max_steps"])
    assert [row.label for row in pooled.rows] == ["likelihood"]
    assert pooled.rows[0].cells["100"].stats("uas") == (72.0, statistics.stdev([70.0, 74.0]))


def test_treebank_columns_with_footnote(tmp_path: Path) -> None:
    root = tmp_path / "ge_alone"
    ge = {"ge": {"weight": 1.0}}
    for tb, uas in (("en_ewt", 61.0), ("de_gsd", 55.0), ("fi_tdt", 50.0)):
        make_run(root, tb, terms=ge, size=0, seed=1, uas=uas, data={"treebank": tb, "train_split": "dev"})
    make_run(root, "ar_padt", terms=ge, size=0, seed=1, uas=45.0,
             data={"treebank": "ar_padt", "train_split": "test"})
    table = build_table([load_run(p) for p in find_run_dirs([root])], columns="treebank")
    assert table.columns == ["ar_padt", "de_gsd", "en_ewt", "fi_tdt"]
    cells = table.rows[0].cells
    assert [cells[c].stats("uas")[0] for c in table.columns] == [45.0, 55.0, 61.0, 50.0]
    assert table.notes == ["data.train_split=test"] and cells["ar_padt"].note == 1


def test_objective_labels() -> None:
    assert objective_label(ENTROPY_GE) == "likelihood + entropy + GE"
    assert objective_label({"kl": {}, "likelihood": {"weight": 1}, "risk": {"weight": 0.0}}) == "likelihood + KL"
    assert objective_label({"risk_las": {"type": "risk", "labeled": True}, "likelihood": {}}) == (
        "likelihood + risk(risk_las)")
    with pytest.raises(ValueError, match="no term with a non-zero weight"):
        objective_label({"likelihood": {"weight": 0}})


def test_bad_inputs_raise_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no run directory"):
        find_run_dirs([tmp_path])
    with pytest.raises(ValueError, match="not a directory"):
        find_run_dirs([tmp_path / "missing"])
    run = make_run(tmp_path, "broken", terms=LIKELIHOOD, size=100, seed=1, uas=70.0)
    (run / "test.pred.metrics.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"broken/test\.pred\.metrics\.json: cannot read"):
        load_run(run)
    (run / "test.pred.metrics.json").write_text(json.dumps({"official": {"UAS": "high"}}))
    with pytest.raises(ValueError, match="UAS is 'high'"):
        load_run(run)
    (run / ".hydra" / "config.yaml").write_text("data: {}\n")
    with pytest.raises(ValueError, match=r"config\.yaml: no 'objective' section"):
        load_run(run)
    only_unfinished = make_run(tmp_path, "unfinished", terms=LIKELIHOOD, size=100, seed=1, uas=None)
    with pytest.raises(ValueError, match="none of the 1 run"):
        build_table([load_run(only_unfinished)])
    assert collect_results.main([str(only_unfinished), "--out-dir", str(tmp_path / "o")]) == 1


def test_ssl_sweep_configs_group_as_arms(tmp_path: Path) -> None:
    """The experiment arms, composed by Hydra as the sweeps compose them, saved as Hydra saves
    them: one row per arm, pooled over seeds, the n0 cells footnoted (no dev selection)."""
    from hydra import compose, initialize_config_dir

    from parser.config import config_dir, register_configs

    register_configs()
    sweeps = {name: OmegaConf.load(config_dir() / "sweep" / f"{name}.yaml")
              for name in ("ssl_ablation", "ssl_ablation_zero", "ssl_ablation_all", "ssl_selftrain")}
    jobs = []
    for name, sweep in sweeps.items():
        params = sweep.hydra.sweeper.params
        for arm in re.findall(r"\[[^]]*\]|[^,]+", str(params.objective)):  # a,b,[c,d]
            jobs.append((name, arm, str(params["data.labeled_size"]).split(",")))
    assert sum(len(sizes) for _, _, sizes in jobs) == 5 * 2 + 2 + 2 + 2
    uas = 50.0
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        for name, arm, sizes in jobs:
            # One composition per arm (composing is the slow part); sizes and seeds only
            # change their own keys.
            cfg = compose("config", overrides=[f"+sweep={name}", "experiment=ssl_ewt", f"objective={arm}"])
            for size in sizes:
                for seed in (1, 2):
                    cfg.data.labeled_size = None if size == "null" else int(size)
                    cfg.trainer.seed = seed
                    run = tmp_path / "multirun" / arm / f"n{size}" / f"seed{seed}"
                    (run / ".hydra").mkdir(parents=True)
                    OmegaConf.save(cfg, run / ".hydra" / "config.yaml")
                    scores = {"official": {"UAS": uas, "LAS": uas}}
                    (run / "test.pred.metrics.json").write_text(json.dumps(scores))
                    uas += 1.0
    table = build_table([load_run(p) for p in find_run_dirs([tmp_path / "multirun"])])
    assert [row.label for row in table.rows] == [
        "likelihood", "likelihood + entropy", "likelihood + GE", "likelihood + KL",
        "likelihood + risk", "likelihood + entropy + GE",
    ]
    assert table.columns == ["0", "100", "1000", "all"]
    rows = {row.label: row for row in table.rows}
    assert all(cell.n == 2 for row in table.rows for cell in row.cells.values())
    assert set(rows["likelihood"].cells) == {"100", "1000", "all"}
    assert set(rows["likelihood + GE"].cells) == {"0", "100", "1000"}
    assert rows["likelihood + GE"].cells["0"].note is not None
    assert rows["likelihood + GE"].cells["100"].note is None
    assert "data.dev_split=null" in table.notes[rows["likelihood + GE"].cells["0"].note - 1]


def test_ge_alone_sweep_uses_no_trees(tmp_path: Path) -> None:
    """Every GE-alone run: GE as the only term, every training sentence unlabeled, no dev trees,
    the treebank's test file for evaluation; collected by treebank, ar_padt footnoted."""
    from hydra import compose, initialize_config_dir

    from parser.config import config_dir, register_configs

    register_configs()
    sweep = OmegaConf.load(config_dir() / "sweep" / "treebanks.yaml")
    treebanks = str(sweep.hydra.sweeper.params.data).split(",")
    train_splits = {}
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        for treebank in treebanks:
            arm = f"ge_alone_{treebank}"
            cfg = compose("config", overrides=["+sweep=treebanks", "experiment=ge_alone", f"data={treebank}"])
            assert objective_label(OmegaConf.to_container(cfg.objective.terms)) == "GE"
            assert cfg.objective.terms.ge.constraints == "ud_universal"
            assert cfg.data.labeled_size == 0 and cfg.data.labeled_fraction is None
            assert cfg.data.dev_split is None and cfg.data.test_split == "test"
            assert cfg.data.unlabeled_file is None and cfg.model.use_upos
            train_splits[cfg.data.treebank] = cfg.data.train_split
            run = tmp_path / arm
            (run / ".hydra").mkdir(parents=True)
            OmegaConf.save(cfg, run / ".hydra" / "config.yaml")
            (run / "test.pred.metrics.json").write_text(json.dumps({"uas": 50.0, "las": 0.0}))
    assert train_splits == {"en_ewt": "train", "de_gsd": "dev", "fi_tdt": "dev", "fr_gsd": "dev",
                            "ar_padt": "test"}
    table = build_table([load_run(p) for p in find_run_dirs([tmp_path])], columns="treebank")
    assert [row.label for row in table.rows] == ["GE"]
    notes = {c: table.notes[cell.note - 1] if cell.note else None
             for c, cell in table.rows[0].cells.items()}
    assert notes["de_gsd"] is None and "data.train_split=test" in notes["ar_padt"]


def test_notes_and_no_plot(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    argv = [str(sweep), "--out-dir", str(out), "--name", "x", "--no-plot", "--note", "trained on a VM"]
    assert collect_results.main(argv) == 0
    markdown = (out / "x.md").read_text()
    assert markdown.splitlines()[2] == "trained on a VM  "
    assert "--note 'trained on a VM'" in markdown
    assert not (out / "x.png").exists()


def test_sweep_summary_callback_writes_a_row_per_run(tmp_path: Path) -> None:
    """The Hydra callback on a fake sweep: runs 0 and 1 finished (dev and test metrics, official
    scores preferred), run 2 has dev only, run 3 none yet; the sweep's own .hydra is no run."""
    sweep = tmp_path / "multirun" / "ssl"
    (sweep / ".hydra").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    scores = {"0": {"dev": (71.0, 60.5), "test": (70.0, 59.25)},
              "1": {"dev": (81.0, 70.0), "test": (80.125, 69.0)},
              "2": {"dev": (50.0, 40.0)}, "3": {}}
    for job, splits in scores.items():
        run = sweep / job
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "config.yaml").write_text("trainer: {seed: 1}\n")
        (run / ".hydra" / "overrides.yaml").write_text(f"- objective=likelihood\n- trainer.seed={job}\n")
        for split, (uas, las) in splits.items():
            report = {"uas": 0.0, "las": 0.0, "official": {"UAS": uas, "LAS": las}}
            (run / f"{split}.pred.metrics.json").write_text(json.dumps(report))
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}})
    collect_results.SweepSummary().on_multirun_end(config=config)
    with open(sweep / "summary.csv", encoding="utf-8", newline="") as stream:
        rows = list(csv.reader(stream))
    assert rows == [
        ["run", "overrides", "dev UAS", "dev LAS", "test UAS", "test LAS"],
        ["0", "objective=likelihood trainer.seed=0", "71.00", "60.50", "70.00", "59.25"],
        ["1", "objective=likelihood trainer.seed=1", "81.00", "70.00", "80.12", "69.00"],
        ["2", "objective=likelihood trainer.seed=2", "50.00", "40.00", "", ""],
        ["3", "objective=likelihood trainer.seed=3", "", "", "", ""],
    ]
    markdown = (sweep / "summary.md").read_text(encoding="utf-8").splitlines()
    assert markdown[0] == "# Sweep ssl" and "4 run(s)" in markdown[2]
    assert markdown[4] == "| run | overrides | dev UAS | dev LAS | test UAS | test LAS |"
    assert markdown[7] == "| 1 | objective=likelihood trainer.seed=1 | 81.00 | 70.00 | 80.12 | 69.00 |"
    # The same table by hand; a broken metrics file names itself.
    (sweep / "summary.csv").unlink()
    assert collect_results.main(["--per-run", str(sweep)]) == 0
    assert (sweep / "summary.csv").is_file()
    (sweep / "1" / "test.pred.metrics.json").write_text("{")
    with pytest.raises(ValueError, match=r"1/test\.pred\.metrics\.json: cannot read"):
        collect_results.write_sweep_summary(sweep)
    assert collect_results.main(["--per-run", str(tmp_path / "nowhere")]) == 1


def test_experiments_script_runs_the_same_command(sweep: Path, tmp_path: Path) -> None:
    """``python experiments/collect_results.py`` (what the results files name) runs as a script."""
    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "script"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, str(repo / "experiments" / "collect_results.py"), str(sweep),
                           "--out-dir", str(out), "--no-plot"], env=env, cwd=repo,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "| likelihood | – | 72.00 ± 2.00 (n=3) |" in (out / "ssl_ablation.md").read_text()
