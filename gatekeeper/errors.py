"""Errors that map to exit codes. A submission's faults are findings, never exceptions."""


class GatekeeperError(Exception):
    exit_code = 3


class UsageError(GatekeeperError):
    """Bad command line or configuration: exit 2."""

    exit_code = 2


class InfrastructureError(GatekeeperError):
    """The gatekeeper, the problem or the machine failed: exit 3, never a reject."""

    exit_code = 3
