"""python -m kernelkit ARGS: the packaged kernelkit CLI."""

from ._cli import main

main()
