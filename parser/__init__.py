"""Dependency parsers trained with structured, semi-supervised objectives over an exact tree CRF.

``from parser import Pipeline``: raw text to trees from one pipeline file (:mod:`parser.pipeline`).
"""

__version__ = "0.1.0"

from parser.pipeline import Pipeline

__all__ = ["Pipeline", "__version__"]
