"""The UPOS tagger: a BiLSTM-CRF over the linear-chain CRF of ``parser.structs.chain``, its
objectives (likelihood, entropy, GE), training (``parser-train-tagger``, :mod:`parser.tagger.train`) and use
(``load_tagger``, ``tag_sentences``)."""

from __future__ import annotations

from parser.tagger.model import Tagger, TaggerOutput
from parser.tagger.predict import TrainedTagger, load_tagger, tag_sentences, upos_accuracy

__all__ = ["Tagger", "TaggerOutput", "TrainedTagger", "load_tagger", "tag_sentences", "upos_accuracy"]
