"""The public implementations our tree CRF is compared with, loaded for benchmarks only.

torch-struct 0.5 and SuPar 1.1.4 are installed with `--no-deps` into `.bench/` by `make bench`,
never as runtime dependencies. SuPar's package ``__init__`` imports its whole parser stack
(nltk, transformers, ...); only its ``structs`` subpackage is needed, so the parent packages are
registered as bare namespaces and ``supar.structs`` is imported on its own.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

BENCH_DEPS = Path(__file__).resolve().parents[1] / ".bench"
PEERS = "torch-struct 0.5 and SuPar 1.1.4"  # the versions `make bench` installs
PEERS_LINE = f"Peers: {PEERS}, installed into `.bench/` by `make bench` (experiments/baselines.py)."


def _bare_package(name: str, path: Path) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module


def load_baselines():
    """Returns ``(torch_struct.NonProjectiveDependencyCRF, supar MatrixTree)``."""
    supar_tree = _supar_tree()
    torch_struct = importlib.import_module("torch_struct")
    return torch_struct.NonProjectiveDependencyCRF, supar_tree.MatrixTree


def load_supar_projective():
    """Returns SuPar's ``DependencyCRF`` (projective trees: Eisner's inside algorithm)."""
    return _supar_tree().DependencyCRF


def _supar_tree():
    """``supar.structs.tree`` from ``.bench/``, its parent packages registered as bare namespaces."""
    if not BENCH_DEPS.is_dir():
        raise RuntimeError(
            f"{BENCH_DEPS} missing: run `make bench` (it installs {PEERS} there)"
        )
    if str(BENCH_DEPS) not in sys.path:
        sys.path.insert(0, str(BENCH_DEPS))
    _bare_package("supar", BENCH_DEPS / "supar")
    _bare_package("supar.utils", BENCH_DEPS / "supar" / "utils")
    return importlib.import_module("supar.structs.tree")
