"""The ``kernelkit`` command of the wheel: runs the packaged C executable
(kernelkit/bin/kernelkit) with the same arguments, so that ``kernelkit check``,
``kernelkit bench`` ... work wherever pip put the package."""

import os
import sys

from ._lib import cli_path


def main() -> None:
    exe = cli_path()
    if exe is None:
        sys.stderr.write("kernelkit: the kernelkit executable is not in this installation\n")
        sys.exit(2)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
