"""Errors that map to exit codes. A submission's faults are findings, never exceptions."""


class GatekeeperError(Exception):
    exit_code = 3


class UsageError(GatekeeperError):
    """Bad command line or configuration: exit 2."""

    exit_code = 2


class InfrastructureError(GatekeeperError):
    """The gatekeeper, the problem or the machine failed: exit 3, never a reject."""

    exit_code = 3


class ReportWriteError(InfrastructureError):
    """The report could not be written (a full disk, a file that takes no writes): exit 3,
    never the verdict's 0 or 1, which nobody could read."""

    def __init__(self, where: str, exc: OSError) -> None:
        why = exc.strerror or str(exc)
        super().__init__(f"could not write the report to {where}: {why}; check that its disk has room and that "
                         "it is a file that takes writes, or write the report elsewhere (--output-file PATH)")
