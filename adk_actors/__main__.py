"""``python -m adk_actors``: the ``adk`` command, for when the console script is not on ``PATH``."""

from __future__ import annotations

import sys

from adk_actors.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
