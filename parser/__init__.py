"""Dependency parsers trained with structured, semi-supervised objectives over an exact tree CRF.

``from parser import Pipeline``: raw text to trees from one pipeline file (:mod:`parser.pipeline`).
"""

__version__ = "0.1.0"

from parser.pipeline import Pipeline  # noqa: E402 - after __version__, which it records

__all__ = ["Pipeline", "__version__"]
