"""reprofleet's Invoke tasks; everything lives in the package (``invoke --list``)."""

from reprofleet.cli.tasks import ns  # noqa: F401
