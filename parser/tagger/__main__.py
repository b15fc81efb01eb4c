"""``python -m parser.tagger [overrides]``: the same as ``python -m parser.tagger.train``."""

from __future__ import annotations

import sys

from parser.tagger.train import main

if __name__ == "__main__":
    sys.exit(main())
