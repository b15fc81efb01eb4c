"""Tables of results from run folders: ``python experiments/collect_results.py ARGS`` is
``python -m parser.eval.summary ARGS`` (see that module for the options and examples)."""

import sys

from parser.eval.summary import main

if __name__ == "__main__":
    sys.exit(main())
