"""The tasks the training loop runs (:mod:`parser.train.task`): the dependency parser, the UPOS
tagger and the tokenizer, one module each."""
