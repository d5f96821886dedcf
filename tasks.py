"""reprofleet's Invoke tasks; everything lives in the package (``invoke --list``)."""

from reprofleet.tasks import ns  # noqa: F401
