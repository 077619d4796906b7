"""``python -m course_utils COMMAND``; ``--help`` lists the commands (see tools/cli.py)."""

import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
