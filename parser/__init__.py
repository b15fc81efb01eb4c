"""Dependency parsers trained with structured, semi-supervised objectives over an exact tree CRF.

``from parser import Pipeline``: raw text to trees from one pipeline file (:mod:`parser.pipeline`).
"""

__version__ = "0.1.0"

__all__ = ["Pipeline", "__version__"]


def __getattr__(name: str):
    # Imported on first use, not with the package: a command's launcher (parser.cli.launch)
    # must run before torch is imported.
    if name == "Pipeline":
        from parser.pipeline import Pipeline
        return Pipeline
    raise AttributeError(f"module 'parser' has no attribute {name!r}")
