"""Dependency parsers trained with structured, semi-supervised objectives over an exact tree CRF."""

__version__ = "0.1.0"
