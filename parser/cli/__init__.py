"""The console entry points, one module each (also ``python -m parser.cli.<name>``):
``parser-train`` (:mod:`parser.cli.train`), ``parser-evaluate`` (:mod:`parser.cli.evaluate`),
``parser-predict`` (:mod:`parser.cli.predict`), ``parser-train-tagger``
(:mod:`parser.cli.train_tagger`), and their shared shell (:mod:`parser.cli.shell`). The top layer:
nothing else in ``parser`` imports it."""
