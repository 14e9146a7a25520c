"""Few, actionable errors. Each message says what is wrong and what to do; the CLI prints it as one line."""


class MemtrafficError(Exception):
    """Base class: the CLI turns any of these into one clear line and a non-zero exit."""

    exit_code = 1


class UsageError(MemtrafficError):
    """Bad input from the user: unknown variant, malformed shape, unsupported dtype or shape."""

    exit_code = 2


class NcuError(MemtrafficError):
    """Nsight Compute is missing, too old, cannot read counters, or failed."""


class GpuNotFoundError(MemtrafficError):
    """The operation needs a CUDA GPU and none is visible."""


class ReportError(MemtrafficError):
    """A .ncu-rep or run folder cannot be read, or lacks what the analysis needs."""
