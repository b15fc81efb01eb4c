"""Analyses of predictions and runs, each a module with a command-line entry
(``python -m parser.eval.analyses.<module> ...``, from the repository root):

* ``direction_diagnosis``      head directions, conj/root accuracy, words after a CCONJ
* ``function_word_directions`` head sides of function words (ADP, AUX, SCONJ, DET, PART, CCONJ)
* ``punct_attachment``         where punctuation attaches
* ``runs`` and ``ablation_table``: run folders read and grouped into the ablation tables of
  ``parser.eval.summary``.

The first three compare predictions with gold trees read by ``parser.data.conllu_io``
(``paired``)."""
