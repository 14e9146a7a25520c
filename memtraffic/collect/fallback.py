"""When a run goes on without counters: the ncu errors that call for a timing-only run, and the line
that says so.

`profile` and `measure` raise CountersUnavailable where ncu is missing or may not read the counters;
memtraffic.api runs the same request timing-only then (memtraffic.collect.timing_only,
memtraffic.collect.timing_only). Other ncu errors stay errors.
"""

from __future__ import annotations

from pathlib import Path

from memtraffic.host.gpu import gpu_name
from memtraffic.ncu.command import PERM_MESSAGE
from memtraffic.vocab.errors import NcuError

TIMING_ONLY = ("running timing-only: kernel times from torch.profiler joined to the same minimums, shown "
               "as bandwidth at the minimum; no per-level bytes")
NCU_MISSING_PREFIX = "Nsight Compute (ncu) not found"  # memtraffic.ncu.command.find_ncu's error


class CountersUnavailable(NcuError):
    """ncu cannot count here: `reason` is the line to show; `out` the folder for the timing-only run
    (None: a new one under the runs root)."""

    def __init__(self, reason: str, out: Path | None = None) -> None:
        super().__init__(reason)
        self.reason, self.out = reason, out


def fallback_reason(err: NcuError) -> str | None:
    """The line saying why a run goes on timing-only, for ncu's errors that call for it (the counters are
    not permitted, ncu is missing); None for the others."""
    text = str(err)
    if text == PERM_MESSAGE:
        return ("counters are not permitted on this GPU (ncu: ERR_NVGPUCTRPERM): " + TIMING_ONLY
                + ". To read them: run as root or load the driver with NVreg_RestrictProfilingToAdminUsers=0")
    if text.startswith(NCU_MISSING_PREFIX):
        return ("ncu is missing (not on PATH, in the CUDA toolkit or /opt/nvidia/nsight-compute): "
                + TIMING_ONLY + ". To count bytes: install Nsight Compute or set MEMTRAFFIC_NCU=/path/to/ncu")
    return None


def unavailable(err: NcuError, out: Path | None = None) -> NcuError:
    """CountersUnavailable for an error that calls for a timing-only run, else the error itself. Without
    ncu and without a GPU there is nothing to time either: GpuNotFoundError (raised) says so."""
    reason = fallback_reason(err)
    if reason is None:
        return err
    if str(err).startswith(NCU_MISSING_PREFIX):
        gpu_name()  # no GPU: its one line, not a timing-only run that times nothing
    return CountersUnavailable(reason, out)
