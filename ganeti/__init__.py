"""A cluster manager for virtual machines in the Ganeti tradition, on Twisted."""

__version__ = "0.1.0"
