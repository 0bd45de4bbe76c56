"""``python -m sluice check|explain|show|run|emit FILE.pipe ...``: the ``sluice`` tool's
commands, run by the binary the package ships (``sluice/_bin/sluice``; ``$SLUICE_BIN``
overrides it). The wheel's ``sluice`` command is :func:`main` too."""

import os
import sys

from ._pipeline import sluice_binary


def main(module: bool = False) -> int:
    """Replaces this process with the ``sluice`` tool run on this process's arguments
    (``module``: run as ``python -m sluice``, which prints this help first when given
    none)."""
    args = sys.argv[1:]
    tool = sluice_binary()
    if module and (not args or args[0] in ("-h", "--help")):
        print(__doc__.strip())
        print(f"\nthe tool: {tool}; its own help follows\n", flush=True)
        args = ["--help"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(tool, [tool, *args])
    return 1  # not reached: execv returns only by raising


if __name__ == "__main__":
    sys.exit(main(module=True))
