"""Helpers of ``experiments/collect_results.py``: finding runs and their scores (``runs``),
grouping them into a table and a plot (``table``)."""
