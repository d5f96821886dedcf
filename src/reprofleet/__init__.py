"""reprofleet: reproduce host-freezing GPU bugs on a fleet of machines, with numbers."""

__version__ = "0.1.0"
