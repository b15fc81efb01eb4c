"""Training: one loop (:mod:`parser.train.loop`) for every task (:mod:`parser.train.task`: the
parser, the UPOS tagger and the tokenizer, :mod:`parser.train.tasks`), the parser's run data and
objective, resume, weight averaging, data-parallel training, TensorBoard, and the final dev/test
evaluation. The Hydra entry points are :mod:`parser.cli.train`, ``train_tagger`` and
``train_tokenizer``."""
