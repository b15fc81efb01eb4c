"""The UPOS tagger: a BiLSTM-CRF over the linear-chain CRF of ``parser.structs.chain``, its
objectives (likelihood, entropy, GE), its data and use (``load_tagger``, ``tag_sentences``). It is
trained by ``parser-train-tagger``: the training loop with :mod:`parser.train.tasks.tagger_task`."""

from __future__ import annotations

from parser.tagger.model import Tagger, TaggerOutput
from parser.tagger.predict import TrainedTagger, load_tagger, tag_sentences, upos_accuracy

__all__ = ["Tagger", "TaggerOutput", "TrainedTagger", "load_tagger", "tag_sentences", "upos_accuracy"]
