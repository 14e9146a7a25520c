"""One ncu session: the ncu found, its version, the GPU, the metrics resolved for its chip, and the argv.

`measure` and `profile` both start here: NcuSession.find() finds ncu and reads its version,
`.on_gpu(gpu, tokens)` resolves the --metrics tokens against what this ncu offers on that GPU's chip, and
the session then records the environment and the metric choice, and builds every ncu argv of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memtraffic.host.machine import environment
from memtraffic.ncu.command import (
    MetricSpec,
    build_ncu_command,
    find_ncu,
    metrics_cache_key,
    ncu_version,
    query_metric_names,
    resolve_metric_spec,
)
from memtraffic.vocab.arch import chip_for_gpu
from memtraffic.vocab.environment import Environment


@dataclass(frozen=True)
class NcuSession:
    """An ncu on a GPU with the metrics to collect (`spec`: the ncu names and what the GPU cannot count)."""

    path: Path
    version: tuple[int, ...]
    gpu: str | None = None
    spec: MetricSpec = field(default_factory=lambda: MetricSpec([], []))

    @classmethod
    def find(cls) -> NcuSession:
        """The ncu to use (memtraffic.ncu.command.find_ncu) and its version; NcuError if none or too old."""
        path = find_ncu()
        return cls(path, ncu_version(path))

    def on_gpu(self, gpu: str, tokens: str | Sequence[str]) -> NcuSession:
        """This ncu on `gpu`, with the --metrics tokens resolved to the counters its chip has (the names ncu
        offers there are cached per ncu version and GPU); UsageError for metrics it does not know."""
        offered = query_metric_names(self.path, metrics_cache_key(self.path, self.version, gpu))
        return replace(self, gpu=gpu, spec=resolve_metric_spec(tokens, offered, chip_for_gpu(gpu)))

    @property
    def metrics(self) -> list[str]:
        """The ncu metric names collected (time first)."""
        return self.spec.names

    def environment(self) -> Environment:
        """run.json's environment record: GPU, driver, ncu and library versions, host."""
        return environment(self.gpu, self.path, self.version)

    def metric_record(self, spec: str) -> dict[str, object]:
        """plan.json's 'metrics': the --metrics value as given, the names collected, what is not measured."""
        return {"spec": spec, "names": self.metrics, "notes": self.spec.notes}

    def command(self, report: str | Path, app: Sequence[str], **options: Any) -> list[str]:
        """The ncu argv that profiles `app` into `report` with this session's metrics (options: those of
        memtraffic.ncu.command.build_ncu_command)."""
        return build_ncu_command(self.path, self.metrics, report, app, **options)
