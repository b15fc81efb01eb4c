"""``python -m parser.train [overrides]``: see ``parser.train.cli``."""

from __future__ import annotations

import sys

from parser.train.cli import main

if __name__ == "__main__":
    sys.exit(main())
