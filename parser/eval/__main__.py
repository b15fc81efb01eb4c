"""``python -m parser.eval [key=value ...]``: see ``parser.eval.cli``."""

from __future__ import annotations

import sys

from parser.eval.cli import main

if __name__ == "__main__":
    sys.exit(main())
