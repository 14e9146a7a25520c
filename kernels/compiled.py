"""torch.compile for the baselines: one static graph per shape and dtype, never a silent eager fallback."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

# With dynamic=False Dynamo recompiles once per new shape or dtype and, past recompile_limit (8 by
# default), runs the function eagerly without an error: the H100 bench of 2026-11-22 timed eager torch
# under the compiled name on its later shapes (torch_compiled equal to torch_manual to the microsecond).
RECOMPILE_LIMIT = 256


@functools.cache
def static_compile(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """torch.compile(fn, dynamic=False) with room for a recompile per shape/dtype of a whole suite."""
    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, RECOMPILE_LIMIT)
    config.accumulated_recompile_limit = max(config.accumulated_recompile_limit, RECOMPILE_LIMIT)
    return torch.compile(fn, dynamic=False)
