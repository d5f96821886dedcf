"""``reprofleet ...`` / ``python -m reprofleet ...``: Invoke's program over the same tasks."""

from __future__ import annotations

import sys


def main() -> None:
    from invoke import Program

    from reprofleet import __version__
    from reprofleet.cli.tasks import ns

    Program(namespace=ns, version=__version__, name="reprofleet", binary="reprofleet").run(sys.argv)


if __name__ == "__main__":
    main()
