"""A Hydra run folder owned by one run at a time, its record written only by its owner.

Hydra writes ``.hydra/`` (config, overrides) into the run folder before the task starts, so a
run that is then refused would already have replaced the record of the run holding the folder.
Here Hydra is told to write no record (``hydra.output_subdir=null`` added to the command line);
the task first takes the folder's lock (:class:`parser.runtime.run_lock.RunLock`: refused at once,
naming the holder, when another live run has it), then writes the same three files Hydra would
have, into the subfolder the user asked for (``.hydra`` unless ``hydra.output_subdir=...``).
Under torchrun, rank 0 alone takes the lock and writes the record.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from parser.runtime.io_atomic import atomic_write
from parser.runtime.run_lock import RunLock

__all__ = ["owned_run", "record_later"]

_SUBDIR = "hydra.output_subdir"
_DEFERRED = f"{_SUBDIR}=null"


def record_later(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """``argv`` with Hydra's record turned off, and the record subfolder the user asked for
    (None: none, ``hydra.output_subdir=null``).

    >>> record_later(["trainer.max_steps=5"])
    (['trainer.max_steps=5', 'hydra.output_subdir=null'], '.hydra')
    >>> record_later(["hydra.output_subdir=rec", "x=1"])
    (['x=1', 'hydra.output_subdir=null'], 'rec')

    The override goes beside the user's first one: after a flag (``x=1 --cfg job``) argparse
    would not take it as one of the overrides.

    >>> record_later(["x=1", "--cfg", "job"])
    (['x=1', 'hydra.output_subdir=null', '--cfg', 'job'], '.hydra')
    """
    subdir: str | None = ".hydra"
    kept = []
    for arg in argv:
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key == _SUBDIR:
            subdir = None if value in ("null", "") else value
        else:
            kept.append(arg)
    first = next((i for i, arg in enumerate(kept) if "=" in arg and not arg.startswith("-")), len(kept) - 1)
    return [*kept[:first + 1], _DEFERRED, *kept[first + 1:]], subdir


def owned_run(task: Callable[..., None], *, subdir: str | None,
              folders: Callable[[DictConfig, Path], Sequence[Path]] = lambda cfg, run: (),
              record_in_task: bool = False) -> Callable[[DictConfig], None]:
    """``task`` run while this process holds the run folder (and the extra ``folders(cfg,
    run_dir)`` it writes to, e.g. a checkpoint folder elsewhere). The record is written before
    ``task(cfg)``, or, with ``record_in_task``, when the task calls the ``record`` it is given
    (``task(cfg, record=...)``): once it has checked what could refuse the run (a folder holding
    checkpoints, a checkpoint of another config), so that a refused run leaves the record as it
    was. Keeps ``task``'s name and module (Hydra names the job, and its log file, after them)."""

    @functools.wraps(task)
    def run(cfg: DictConfig) -> None:
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        with _locked([run_dir, *folders(cfg, run_dir)]):
            def record() -> None:
                if subdir is not None and os.environ.get("RANK", "0") == "0":
                    _write_record(cfg, run_dir / subdir, subdir=subdir)

            if record_in_task:
                task(cfg, record=record)
            else:
                record()
                task(cfg)

    return run


@contextmanager
def _locked(directories: Sequence[Path]) -> Iterator[None]:
    if os.environ.get("RANK", "0") != "0":  # torchrun: rank 0 owns the folder for all ranks
        yield
        return
    with ExitStack() as stack:
        seen: set[Path] = set()
        for directory in directories:
            resolved = directory.expanduser().resolve()
            if resolved not in seen:
                seen.add(resolved)
                stack.enter_context(RunLock(resolved))
        yield


def _write_record(cfg: DictConfig, folder: Path, *, subdir: str) -> None:
    """``config.yaml``, ``hydra.yaml``, ``overrides.yaml``, as Hydra writes them."""
    hydra_cfg = OmegaConf.create({"hydra": OmegaConf.to_container(HydraConfig.get())})
    hydra_cfg.hydra.output_subdir = subdir
    hydra_cfg.hydra.overrides.hydra = [o for o in hydra_cfg.hydra.overrides.hydra if o != _DEFERRED]
    folder.mkdir(parents=True, exist_ok=True)
    for name, node in (("config.yaml", cfg), ("hydra.yaml", hydra_cfg),
                       ("overrides.yaml", HydraConfig.get().overrides.task)):
        with atomic_write(folder / name) as handle:
            handle.write(OmegaConf.to_yaml(node))
