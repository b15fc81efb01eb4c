"""Training runs on disk: the resolved config of a Hydra run directory and its final scores.

A run directory holds ``.hydra/config.yaml`` (written by Hydra) and, once training finished,
``<split>.pred.metrics.json`` (written by ``parser.train.final``; for a split the run was not
scored on, ``parser-evaluate``'s ``eval/<treebank>-<split>.pred.metrics.json`` stands in). A run
is described by its flattened config (``{"data.labeled_size": 100, ...}``), an objective label
built from its ``objective.terms`` (``"likelihood + entropy + GE"``) and a labeled-size label
(``"100"``, ``"25%"``, ``"all"``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from parser.eval.report import EVAL_FOLDER, metrics_path_for, split_prediction_stem

__all__ = [
    "Run",
    "find_run_dirs",
    "flatten",
    "labeled_size_label",
    "load_run",
    "objective_label",
]

# Canonical order and display names of the objective kinds (parser.objectives.build).
KIND_ORDER = ("likelihood", "local", "risk", "entropy", "ge", "kl")
DISPLAY = {"likelihood": "likelihood", "local": "local", "risk": "risk", "entropy": "entropy",
           "ge": "GE", "kl": "KL"}


@dataclass(frozen=True)
class Run:
    """One run directory: ``config`` flattened to dotted keys; ``uas``/``las`` in 0..100, None
    when the run has no metrics for the split (unfinished or failed)."""

    path: Path
    config: Mapping[str, object]
    objective: str
    labeled_size: str
    size_order: tuple
    seed: object
    uas: float | None
    las: float | None

    @property
    def complete(self) -> bool:
        return self.uas is not None


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Every directory at or under ``paths`` holding ``.hydra/config.yaml``, sorted, once each.

    A path that does not exist or holds no run raises ValueError naming it.
    """
    found: set[Path] = set()
    for given in paths:
        root = Path(given)
        if not root.is_dir():
            raise ValueError(f"{root}: not a directory")
        here = {c.parent.parent for c in root.rglob(".hydra/config.yaml")}
        if (root / ".hydra" / "config.yaml").is_file():
            here.add(root)
        if not here:
            raise ValueError(f"{root}: no run directory (.hydra/config.yaml) at or under it")
        found |= {p.resolve() for p in here}
    return sorted(found)


def flatten(node: object, prefix: str = "") -> dict[str, object]:
    """Nested mappings as ``{"a.b": value}``; lists stay values (as tuples, to be hashable).

    >>> flatten({"data": {"labeled_size": 100, "root": None}, "seeds": [1, 2]})
    {'data.labeled_size': 100, 'data.root': None, 'seeds': (1, 2)}
    """
    if isinstance(node, Mapping):
        if not node and prefix:
            return {prefix: ()}
        out: dict[str, object] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(node, (list, tuple)):
        return {prefix: tuple(_hashable(v) for v in node)}
    return {prefix: node}


def _hashable(value: object) -> object:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def read_config(path: Path) -> dict:
    """``.hydra/config.yaml`` as plain containers, interpolations resolved where they can be
    (Hydra saves them unresolved; one needing Hydra's runtime, e.g. ``${hydra:...}``, stays text)."""
    try:
        cfg = OmegaConf.load(path)
    except (OSError, OmegaConfBaseException, ValueError) as error:
        raise ValueError(f"{path}: cannot read the run's config: {error}") from error
    if not OmegaConf.is_dict(cfg):
        raise ValueError(f"{path}: expected a mapping at the top, got {type(cfg).__name__}")
    return _resolve(cfg, OmegaConf.to_container(cfg, resolve=False), "")


def _resolve(cfg, raw: object, key: str) -> object:
    if isinstance(raw, dict):
        return {k: _resolve(cfg, v, f"{key}.{k}" if key else str(k)) for k, v in raw.items()}
    if isinstance(raw, list):
        return [_resolve(cfg, v, f"{key}[{i}]") for i, v in enumerate(raw)]
    if isinstance(raw, str) and "${" in raw:
        try:
            value = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
        except OmegaConfBaseException:
            return raw
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    return raw


def objective_label(terms: object) -> str:
    """``"likelihood + entropy + GE"`` from an ``objective.terms`` mapping: its terms with a
    non-zero weight, kinds in a fixed order; a term named other than its kind shows its name.

    >>> objective_label({"ge": {"weight": 1.0}, "likelihood": {}, "entropy": {"weight": 0}})
    'likelihood + GE'
    >>> objective_label({"risk_las": {"type": "risk"}, "likelihood": None})
    'risk(risk_las)'
    """
    if not isinstance(terms, Mapping) or not terms:
        raise ValueError(f"objective.terms: expected a non-empty mapping, got {terms!r}")
    active = []
    for name, options in terms.items():
        if options is None or options is False:
            continue
        options = {} if options is True else options
        if not isinstance(options, Mapping):
            raise ValueError(f"objective.terms.{name}: expected a mapping of options, got {options!r}")  # noqa: TRY004 (project convention)
        weight = options.get("weight", 1.0)
        if weight is None or float(weight) == 0.0:
            continue
        kind = str(options.get("type") or name)
        rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
        shown = DISPLAY.get(kind, kind)
        active.append((rank, str(name), shown if name == kind else f"{shown}({name})"))
    if not active:
        raise ValueError(f"objective.terms: no term with a non-zero weight in {dict(terms)!r}")
    return " + ".join(shown for _, _, shown in sorted(active))


def labeled_size_label(data: Mapping) -> tuple[str, tuple]:
    """The labeled-size column of a run and a sort key (sizes, then fractions, then all).

    >>> labeled_size_label({"labeled_size": 100})
    ('100', (0, 100))
    >>> labeled_size_label({"labeled_fraction": 0.25})
    ('25%', (1, 0.25))
    >>> labeled_size_label({"labeled_size": None, "labeled_fraction": None})
    ('all', (2, 0))
    """
    size, fraction = data.get("labeled_size"), data.get("labeled_fraction")
    if size is not None:
        return str(int(size)), (0, int(size))
    if fraction is not None:
        return f"{100 * float(fraction):g}%", (1, float(fraction))
    return "all", (2, 0)


def read_scores(path: Path) -> tuple[float | None, float | None]:
    """Official UAS and LAS of a metrics JSON (the in-loop ones when the official scorer failed);
    ``(None, None)`` when the file is absent. A file that is not such JSON raises ValueError."""
    if not path.is_file():
        return None, None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: cannot read metrics JSON: {error}") from error
    if not isinstance(report, Mapping):
        raise ValueError(f"{path}: expected a JSON object, got {type(report).__name__}")  # noqa: TRY004 (project convention)
    official = report.get("official") or {}
    uas = official.get("UAS", report.get("uas"))
    las = official.get("LAS", report.get("las"))
    for name, value in (("UAS", uas), ("LAS", las)):
        if value is not None and (not isinstance(value, (int, float)) or not math.isfinite(value)):
            raise ValueError(f"{path}: {name} is {value!r}, expected a finite number")
    if uas is None:
        raise ValueError(f"{path}: no UAS (neither official.UAS nor uas)")
    return float(uas), None if las is None else float(las)


def metrics_file(directory: Path, data: Mapping, split: str) -> Path:
    """The run's own ``<split>.pred.metrics.json``; when it has none, the one that
    ``parser-evaluate checkpoint=<run>/checkpoints/... treebank=<its treebank> split=<split>``
    wrote into ``<run>/eval/``: a run trained without the split and scored on it afterwards, as
    the fair protocol scores its chosen dev run on test (configs/sweep/ssl_fair.yaml)."""
    own = directory / f"{split}.pred.metrics.json"
    stem = split_prediction_stem(str(data.get("treebank")), split)
    later = metrics_path_for(directory / EVAL_FOLDER / f"{stem}.pred.conllu")
    return later if not own.is_file() and later.is_file() else own


def load_run(directory: str | Path, *, split: str = "test") -> Run:
    """The run in ``directory``: its config, labels, seed and ``<split>`` scores."""
    directory = Path(directory)
    config_path = directory / ".hydra" / "config.yaml"
    config = read_config(config_path)
    for group in ("data", "objective"):
        if not isinstance(config.get(group), Mapping):
            raise ValueError(f"{config_path}: no {group!r} section; not a parser run")  # noqa: TRY004 (project convention)
    try:
        objective = objective_label(config["objective"].get("terms"))
    except ValueError as error:
        raise ValueError(f"{config_path}: {error}") from error
    size, order = labeled_size_label(config["data"])
    uas, las = read_scores(metrics_file(directory, config["data"], split))
    seed = (config.get("trainer") or {}).get("seed")
    return Run(path=directory, config=flatten(config), objective=objective, labeled_size=size,
               size_order=order, seed=seed, uas=uas, las=las)
