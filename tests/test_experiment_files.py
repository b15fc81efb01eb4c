"""The experiment files are one level above the config groups, and compose as they did.

Issue 40: an experiment file lists only config groups in its defaults (``override /model: ...``),
never another experiment file, as in the lightning-hydra-template, so what a run does is read in
two files (the experiment and the groups it names). The files were flattened from a chain up to
five levels deep (``ge_alone_clauses`` -> ``ge_alone_harmony`` -> ``ge_alone_structural`` ->
``ge_alone`` -> ``config.yaml``); ``tests/fixtures/experiment_configs.json`` holds what every
experiment composed to with the chained files (those of commit 39d1759 over the other groups as
of the flattening: ``PARSER_CONFIG_DIR=<configs with the old experiment/> python -m
tests.test_experiment_files --write``), with each data option, and every experiment must still
compose to exactly that. A field added to the schema since, at its default, is not a difference;
a deliberate change of a group or an experiment is recorded by running ``--write`` again on the
current ``configs/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from parser.config import Config, config_dir, register_configs
from tests.train.resolved_configs import resolved

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "fixtures" / "experiment_configs.json"


def experiment_configs(root: Path, commands: Sequence[str] | None = None) -> dict[str, dict]:
    """``{"experiment=<e> data=<d>": resolved config}`` for ``commands`` (default: every
    experiment file of ``root`` with every data option), the ``hydra`` node left out,
    launch-dependent values as written, the repository's path as ``<repo>`` (so that the snapshot
    holds in any checkout)."""
    register_configs()
    if commands is None:
        experiments = sorted(p.stem for p in (root / "experiment").glob("*.yaml"))
        datasets = sorted(p.stem for p in (root / "data").glob("*.yaml"))
        commands = [f"experiment={e} data={d}" for e in experiments for d in datasets]
    configs = {}
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(root), version_base="1.3"):
        for command in commands:
            text = json.dumps(resolved(compose("config", overrides=command.split())))
            configs[command] = json.loads(text.replace(json.dumps(str(REPO))[1:-1], "<repo>"))
    GlobalHydra.instance().clear()
    return configs


def without_added_fields(config: dict, snapshot: dict, defaults: dict) -> dict:
    """``config`` less the keys ``snapshot`` lacks that hold the schema's default (``defaults``):
    a field added to the schema since the snapshot, which no experiment sets.

    >>> without_added_fields({"a": 1, "new": 0, "set": 5}, {"a": 1}, {"a": 9, "new": 0, "set": 0})
    {'a': 1, 'set': 5}
    """
    kept = {}
    for key, value in config.items():
        if key not in snapshot:
            if isinstance(defaults, dict) and key in defaults and defaults[key] == value:
                continue
            kept[key] = value
        elif isinstance(value, dict) and isinstance(snapshot[key], dict):
            kept[key] = without_added_fields(value, snapshot[key], (defaults or {}).get(key) or {})
        else:
            kept[key] = value
    return kept


def defaults_list(path: Path) -> list:
    return list(OmegaConf.to_container(OmegaConf.load(path)).get("defaults") or [])


def not_group_entries(path: Path) -> list[str]:
    """The defaults entries of ``path`` that are not ``override /<group>: <option>`` (or
    ``_self_``) naming an existing group file: an included experiment file, for one."""
    bad = []
    for entry in defaults_list(path):
        if entry == "_self_":
            continue
        key, option = next(iter(entry.items())) if isinstance(entry, dict) and len(entry) == 1 else ("", "")
        group = key.removeprefix("override /")
        if not key.startswith("override /") or group == "experiment" \
                or not (config_dir() / group / f"{option}.yaml").is_file():
            bad.append(repr(entry))
    return bad


EXPERIMENT_FILES = sorted((config_dir() / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("path", EXPERIMENT_FILES, ids=[p.stem for p in EXPERIMENT_FILES])
def test_an_experiment_file_names_only_config_groups(path):
    """No experiment file includes another, so none is more than two levels deep."""
    bad = not_group_entries(path)
    assert not bad, (f"{path.name}: defaults entries {', '.join(bad)} are not `override /<group>: <option>`: "
                     "an experiment file sets config groups, it does not include another experiment")


def test_the_depth_check_catches_a_chained_file(tmp_path):
    chained = tmp_path / "chained.yaml"
    chained.write_text("# @package _global_\ndefaults:\n  - ge_alone\n  - override /model: biaffine\n"
                       "  - override /model: no_such_model\n  - _self_\n")
    assert not_group_entries(chained) == ["'ge_alone'", "{'override /model': 'no_such_model'}"]


def test_the_sweeps_include_no_experiment_file():
    for path in sorted((config_dir() / "sweep").glob("*.yaml")):
        assert not defaults_list(path), f"{path.name}: a sweep sets its parameters, it includes no file"


def test_every_experiment_composes_as_before_the_files_were_flattened():
    before = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert {c.split()[0] for c in before} == {f"experiment={p.stem}" for p in EXPERIMENT_FILES}
    after = experiment_configs(config_dir(), commands=list(before))
    defaults = resolved(OmegaConf.structured(Config))
    changed = [c for c in before if without_added_fields(after[c], before[c], defaults) != before[c]]
    assert not changed, f"{len(changed)} commands compose differently, e.g. {changed[:3]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {SNAPSHOT.relative_to(REPO)}")
    args = parser.parse_args(argv)
    configs = experiment_configs(config_dir())
    # One command per line: a changed setting shows as a one-line diff of that command.
    text = "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in configs.items()) + "\n}\n"
    if args.write:
        SNAPSHOT.write_text(text, encoding="utf-8")
    print(f"{len(configs)} commands from {config_dir()}" + (f" -> {SNAPSHOT}" if args.write else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
