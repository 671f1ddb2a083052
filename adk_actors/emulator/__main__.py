"""``python -m adk_actors.emulator`` — see :mod:`adk_actors.emulator.cli`."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
