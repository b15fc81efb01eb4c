"""Training the parser: the loop (:mod:`parser.train.loop`), the run's data and objective, resume,
weight averaging, data-parallel training, TensorBoard, and the final dev/test evaluation. The
Hydra entry point is :mod:`parser.cli.train`."""
