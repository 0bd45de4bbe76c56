"""``python -m sluice check|explain|show|run|emit FILE.pipe ...``: the ``sluice`` tool's
commands, run by the same binary ``sluice.Pipeline`` compiles with (its exit status)."""

import subprocess
import sys

from ._pipeline import sluice_binary


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        print(f"\nthe tool: {sluice_binary()}; its own help follows\n", flush=True)
        args = ["--help"]
    return subprocess.run([sluice_binary(), *args], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
