"""Resolved training configs of the published commands, for the config snapshot test.

``python -m tests.train.resolved_configs --write`` (from the repository root) recorded
``tests/fixtures/resolved_configs.json`` on the configs as they were before the experiment files
became families (one file per family, ``data=<treebank>`` beside it). Each entry is one command:
its overrides, where it was published, and the config Hydra composes for it, resolved, without
the ``hydra`` node. A value that reads Hydra's runtime (``${hydra:...}``, ``${now:...}``) is kept
as written, since it depends on the launch. The snapshot test (``test_config_snapshot.py``) maps
every old command to its new one and compares.

Published commands: every ``experiment=...`` in README.md and experiments/results/*.md with the
overrides that follow it (``<tb>`` and ``{a,b}`` expanded over the treebanks, ``a,b`` multirun
values expanded); every job of every configs/sweep file; every experiment file alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from enum import Enum
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from parser.config import config_dir, register_configs

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "tests" / "fixtures" / "resolved_configs.json"
TREEBANKS = ("en_ewt", "de_gsd", "fi_tdt", "fr_gsd", "ar_padt")
RUNTIME = ("${hydra:", "${now:")  # values that depend on the launch, kept unresolved

_OVERRIDE = re.compile(r"^[+~]?[A-Za-z_][\w.]*=\S*$")


def published_commands(paths: Iterable[Path]) -> list[tuple[str, list[str]]]:
    """``(where, overrides)`` for every ``experiment=`` in the markdown ``paths``: the overrides
    that follow it on its (backslash-continued) line, up to the first word that is not one;
    ``hydra.*`` overrides and placeholders (``<...>``, ``/path/to``) dropped.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "a.md").write_text("x `python -m parser.train "
    ...     "experiment=ge_<tb> trainer.seed=1 hydra.run.dir=o \\\\\\n  optim.lr=1`")
    91
    >>> published_commands([d / "a.md"])[:2]
    [('a.md:1', ['experiment=ge_en_ewt', 'trainer.seed=1', 'optim.lr=1']), ('a.md:1', ['experiment=ge_de_gsd', 'trainer.seed=1', 'optim.lr=1'])]
    """
    found = []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        number = 0
        while number < len(lines):
            start, text = number, lines[number]
            while text.rstrip().endswith("\\") and number + 1 < len(lines):
                number += 1
                text = text.rstrip()[:-1] + " " + lines[number]
            number += 1
            for match in re.finditer(r"(?<![\w.+~])experiment=", text):
                words = [w.rstrip(",;)") for w in re.split(r"[\s`]+", text[match.start():])]
                if "<" in words[0] and "<tb>" not in words[0]:
                    continue  # experiment=ssl_ewt_<arm>: a placeholder, not a command
                overrides = list(itertools.takewhile(_OVERRIDE.match, words))
                for treebank in TREEBANKS if any("<tb>" in w for w in overrides) else [None]:
                    for expanded in _expand(_usable(overrides, treebank)):
                        found.append((f"{path.name}:{start + 1}", expanded))
    return found


def _usable(overrides: Sequence[str], treebank: str | None) -> list[str]:
    """``<tb>`` replaced by ``treebank``; launch settings (``hydra.*``), placeholders (``<seed>``,
    ``$T``) and machine paths (absolute; they name files of one machine) left out."""
    kept = []
    for override in overrides:
        if treebank is not None:
            override = override.replace("<tb>", treebank)
        key, _, value = override.partition("=")
        if key.startswith("hydra.") or re.search(r"[<$]|(^|[+=])/", value):
            continue
        kept.append(override)
    return kept


def _expand(overrides: Sequence[str]) -> list[list[str]]:
    """``{a,b}`` and ``key=a,b`` (multirun values) into one command each."""
    choices = []
    for override in overrides:
        key, _, value = override.partition("=")
        if re.search(r"\{[\w,]+\}", value):
            head, body, tail = re.split(r"\{([\w,]+)\}", value, maxsplit=1)
            values = [head + part + tail for part in body.split(",")]
        elif "," in value and "[" not in value:
            values = value.split(",")
        else:
            values = [value]
        choices.append([f"{key}={v}" for v in values])
    return [list(combination) for combination in itertools.product(*choices)]


def sweep_jobs(sweep_dir: Path) -> list[tuple[str, list[str]]]:
    """``(where, overrides)`` of every job of every ``configs/sweep/*.yaml`` (``+sweep=<name>``
    and one value of each swept parameter)."""
    jobs = []
    for path in sorted(sweep_dir.glob("*.yaml")):
        params = OmegaConf.load(path).hydra.sweeper.params
        keys = list(params)
        values = [_split_sweep(str(params[key])) for key in keys]
        for combination in itertools.product(*values):
            overrides = [f"+sweep={path.stem}", *(f"{k}={v}" for k, v in zip(keys, combination))]
            jobs.append((f"configs/sweep/{path.name}", overrides))
    return jobs


def _split_sweep(value: str) -> list[str]:
    """``a,b,[c,d]`` -> ``["a", "b", "[c,d]"]`` (commas inside brackets stay)."""
    parts, depth, current = [], 0, ""
    for char in value:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def resolved(cfg: DictConfig) -> dict:
    """``cfg`` as plain data, resolved, except launch-dependent values (kept as written)."""
    raw = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    raw.pop("hydra", None)

    def walk(raw_node, path):
        if isinstance(raw_node, dict):
            return {k: walk(v, f"{path}.{k}" if path else k) for k, v in raw_node.items()}
        if isinstance(raw_node, list):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(raw_node)]
        if isinstance(raw_node, str) and any(marker in raw_node for marker in RUNTIME):
            return raw_node
        value = OmegaConf.select(cfg, path)
        return value.value if isinstance(value, Enum) else value

    return walk(raw, "")


def compose_all(commands: Sequence[tuple[str, list[str]]]) -> list[dict]:
    """One ``{"where", "overrides", "config"}`` per command (duplicates composed once)."""
    register_configs()
    entries, seen = [], {}
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        for where, overrides in commands:
            key = tuple(overrides)
            if key in seen:
                seen[key]["where"].append(where)
                continue
            entry = {"where": [where], "overrides": list(overrides),
                     "config": resolved(compose("config", overrides=list(overrides)))}
            seen[key] = entry
            entries.append(entry)
    return entries


def all_commands() -> list[tuple[str, list[str]]]:
    """The published commands, every sweep job and every experiment file alone."""
    docs = [REPO / "README.md", *sorted((REPO / "experiments" / "results").glob("*.md"))]
    experiments = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))
    return [
        *published_commands(docs),
        *sweep_jobs(config_dir() / "sweep"),
        *((f"configs/experiment/{e}.yaml", [f"experiment={e}"]) for e in experiments),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {SNAPSHOT.relative_to(REPO)}")
    args = parser.parse_args(argv)
    entries = compose_all(all_commands())
    # One command per line: a changed setting shows as a one-line diff of that command.
    text = "[\n" + ",\n".join(json.dumps(e, sort_keys=True) for e in entries) + "\n]\n"
    if args.write:
        SNAPSHOT.write_text(text, encoding="utf-8")
    print(f"{len(entries)} commands" + (f" -> {SNAPSHOT}" if args.write else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
