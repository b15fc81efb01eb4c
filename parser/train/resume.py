"""Which checkpoint a run resumes from (``trainer.resume``).

``last``: the newest readable checkpoint of THIS run's checkpoint folder, never another run's; it
must have been written with this run's config, apart from :data:`RESUMABLE_KEYS` (options that
change how long or how visibly a run goes on, not what it learns). A path (a checkpoint file,
or a run or checkpoint folder): that one, chosen by the user; config differences are listed as
a warning (the model config must still match: see ``Trainer._restore``). The checkpoint used is
logged before anything else is loaded. A run's own checkpoint is resumed with its checkpoint set
agreeing with it: ``best.pt`` is the checkpoint its state calls best
(:meth:`~parser.runtime.checkpoint.CheckpointManager.adopt`).

A file the folder's ``manifest.json`` names whose sha256 is no longer the manifest's (overwritten
in place, e.g. by a copy onto ``best.pt``, another name of a step file) is reported by name. ``last``
and a folder fall back past it, as past a corrupt file, to the newest checkpoint before it that
is intact, and refuse when there is none; a file named by ``trainer.resume`` is the user's choice,
and is used with the warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parser.runtime.checkpoint import MANIFEST, CheckpointError, CheckpointManager, load_checkpoint

__all__ = ["RESUMABLE_KEYS", "config_differences", "resolve_resume"]

log = logging.getLogger(__name__)

# Options a resumed run may change: budgets and stopping rules, evaluation and logging cadence,
# where and how much it writes, the device and threads. Everything else (data, model, objective,
# optimiser, seed, distributed) must match the checkpoint's config for trainer.resume=last.
RESUMABLE_KEYS: tuple[str, ...] = (
    "trainer.resume", "trainer.max_steps", "trainer.max_epochs", "trainer.max_minutes",
    "trainer.patience", "trainer.eval_every", "trainer.log_every", "trainer.keep_last",
    "trainer.max_nonfinite", "trainer.checkpoint_dir", "trainer.final_eval", "trainer.progress",
    "trainer.preempt_signals",
    "trainer.device", "trainer.num_threads", "trainer.deterministic",
    "data.eval_tokens_per_batch", "logger.tensorboard", "logger.log_dir", "logger.arc_entropy",
    "logger.flush_secs",
)


def resolve_resume(
    resume: str | None, *, checkpoints: CheckpointManager, config: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The checkpoint state to resume from, or None (``resume`` null). ``config``: this run's
    resolved config, compared with the checkpoint's. A cut or corrupt periodic checkpoint is
    reported and the one before it used; an explicit file that is unreadable is refused."""
    if not resume:
        return None
    if resume == "last":
        found = checkpoints.load_latest()
        if found is None and checkpoints.overwritten_files:
            raise CheckpointError(
                f"trainer.resume=last: no intact checkpoint in {checkpoints.directory}: "
                f"{checkpoints.overwritten(checkpoints.overwritten_files[0])}, and no checkpoint "
                "before it is readable; put the run's own file back, or resume from the file as "
                "it is by naming it (trainer.resume=<path>), or start without trainer.resume"
            )
        if found is None:
            present = [p.name for p in checkpoints.step_files()]
            detail = f" (unreadable: {', '.join(present)})" if present else ""
            raise CheckpointError(
                f"trainer.resume=last: no readable checkpoint in {checkpoints.directory}{detail}: "
                "nothing of this run to resume; start it without trainer.resume (another run's "
                "checkpoint is only used when named: trainer.resume=<path>)"
            )
        path, state = found
        differences = config_differences(state.get("config") or {}, config)
        if differences:
            raise CheckpointError(
                f"trainer.resume=last: {path} was written with another config "
                f"({'; '.join(differences[:5])}{'; ...' if len(differences) > 5 else ''}); "
                "resume with the run's own options (only "
                f"{', '.join(k.split('.', 1)[1] for k in RESUMABLE_KEYS[:6])}, ... may change), "
                "or name the checkpoint: trainer.resume=<path>"
            )
        log.info("resuming from %s (step %s)%s", path, state.get("trainer", {}).get("step"),
                 "" if checkpoints.manifest_found else
                 f": the newest readable step file, the folder has no {MANIFEST} (a run of an "
                 "earlier version, or one killed in its first save)")
        _adopt(checkpoints, state)
        return state
    path = Path(resume).expanduser()
    if path.is_dir():
        directory = path / "checkpoints" if (path / "checkpoints").is_dir() else path
        named = CheckpointManager(directory, keep_last=1)
        named.read_manifest()
        found = named.load_latest()
        if found is None:
            overwritten = ("" if not named.overwritten_files else
                           f" ({named.overwritten(named.overwritten_files[0])})")
            raise CheckpointError(
                f"trainer.resume={resume}: no readable checkpoint in {directory}{overwritten}")
        path, state = found
    else:
        _warn_if_overwritten(path, checkpoints=checkpoints)
        try:
            state = load_checkpoint(path)
        except CheckpointError as error:
            raise CheckpointError(f"trainer.resume: {error}") from error
    log.info("resuming from %s (step %s), named by trainer.resume", path,
             state.get("trainer", {}).get("step"))
    differences = config_differences(state.get("config") or {}, config)
    if differences:
        log.warning("trainer.resume: this run's config differs from the checkpoint's: %s",
                    "; ".join(differences))
    if path.resolve().parent == checkpoints.directory.resolve():  # this run's own
        _adopt(checkpoints, state)
    return state


def _warn_if_overwritten(path: Path, *, checkpoints: CheckpointManager) -> None:
    """A file named by ``trainer.resume`` that its folder's manifest names with another sha256:
    said, not refused (the user chose that file)."""
    if not path.is_file():
        return
    if path.resolve().parent == checkpoints.directory.resolve():
        folder = checkpoints
    else:
        folder = CheckpointManager(path.parent, keep_last=1)
        if not folder.manifest_path.is_file():
            return
        folder.read_manifest()
    reason = folder.overwritten(path)
    if reason is not None:
        log.warning("trainer.resume: %s; resuming from it as it is, since trainer.resume names it",
                    reason)


def _adopt(checkpoints: CheckpointManager, state: Mapping[str, Any]) -> None:
    best_step = (state.get("trainer") or {}).get("best_step")
    if isinstance(best_step, int) and best_step >= 0:
        checkpoints.adopt(best_step=best_step)


def config_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``key: saved -> current`` for every leaf that differs, :data:`RESUMABLE_KEYS` aside.

    >>> config_differences({"trainer": {"max_steps": 5, "seed": 1}, "data": {"treebank": "a"}},
    ...                    {"trainer": {"max_steps": 9, "seed": 2}, "data": {"treebank": "b"}})
    ['data.treebank: a -> b', 'trainer.seed: 1 -> 2']
    """
    old, new = _flatten(saved), _flatten(current)
    return [f"{key}: {old.get(key, '<absent>')} -> {new.get(key, '<absent>')}"
            for key in sorted(old.keys() | new.keys())
            if old.get(key) != new.get(key) and not _resumable(key)]


def _resumable(key: str) -> bool:
    return any(key == k or key.startswith(f"{k}.") for k in RESUMABLE_KEYS)


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(tree, Mapping):
        return {prefix: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    if not tree and prefix:
        flat[prefix] = {}
    return flat
