"""``reprofleet ...`` / ``python -m reprofleet ...``: Invoke's program over the same tasks."""

from __future__ import annotations

import sys


def main() -> None:
    from pathlib import Path

    from invoke import Program

    from reprofleet import __version__
    from reprofleet.cli.env_config import project_root
    from reprofleet.cli.tasks import ns

    class ReprofleetProgram(Program):
        """Invoke's program, reading the project's invoke.yaml as ``invoke`` does (a program
        given its namespace has no project folder of its own: the nearest one from here)."""

        def create_config(self) -> None:
            super().create_config()
            root = project_root(Path.cwd())
            if root is not None:
                self.config.set_project_location(str(root))
                self.config.load_project()

    ReprofleetProgram(namespace=ns, version=__version__, name="reprofleet", binary="reprofleet").run(sys.argv)


if __name__ == "__main__":
    main()
