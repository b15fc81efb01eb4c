"""Slow published algorithms, the references of tests and benchmarks only (never used by the
fast paths): :mod:`.tree` (Smith & Eisner entropy, Druck & Smith covariance and pairwise
marginals, plain matrix-tree) and :mod:`.chain` (Jiao et al. entropy gradient, chain covariance)."""
