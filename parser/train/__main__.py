"""``python -m parser.train [overrides]``: see ``parser.train.cli``."""

from __future__ import annotations

from parser.train.cli import main

if __name__ == "__main__":
    main()
