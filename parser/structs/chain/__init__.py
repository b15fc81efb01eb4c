"""Linear-chain CRF over tag sequences (:mod:`.crf`) and its entropy gradient (:mod:`.entropy`,
Mann & McCallum 2007)."""

from __future__ import annotations

from parser.structs.chain.crf import LinearChainCRF
from parser.structs.chain.entropy import entropy_gradient_mann_mccallum, entropy_mann_mccallum

__all__ = ["LinearChainCRF", "entropy_gradient_mann_mccallum", "entropy_mann_mccallum"]
