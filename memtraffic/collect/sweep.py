"""Sweeps: a grid from a TOML file, a deterministic shard of a plan, and a plan's split across GPUs.

A grid is variants x shapes x dtypes x parameter values (memtraffic.collect.planning expands it). Here it
may come from a small TOML file, so that a sweep is written down once and run anywhere:

    variants = ["softmax_tiled", "softmax_online"]   # or: all = true
    shapes = ["4096x4096", "32768x256"]
    dtypes = ["fp32", "bf16"]
    variant_files = ["my_kernels.py"]                 # relative to this file
    [params]
    num_warps = [4, 8]

    [[grid]]            # optional: more grids with their own keys (missing keys come from the top;
                        # a top level that names no variants is only their defaults)
    variants = ["softmax_naive"]
    params = { num_warps = [1, 2] }

Where a config runs is decided by its predicted cost: a fixed per-config overhead plus the replay
passes over its predicted bytes. Both the GPU split and the shards assign the most expensive config
first to the least loaded part (greedy longest-first), ties broken by range name, so the same plan
always gives the same parts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memtraffic.runfolder.records import Config, Plan, Shard, merge_plans
from memtraffic.vocab.configs import GridCount
from memtraffic.vocab.errors import GpuNotFoundError, UsageError
from memtraffic.vocab.files import read_toml

# Weights for balancing, not measurements to report: only the order of costs matters. The committed
# H100 runs' status.jsonl record a fixed part per config under ncu (inputs, JIT, check, launch: tens of
# milliseconds with a warm Triton cache, a second or more while a kernel compiles), memtraffic's metric
# sets cost 1 to 6 replay passes (ncu/metrics.py), and each pass moves the config's bytes at about the
# measured 3.0 TB/s of an H100 device-to-device copy.
CONFIG_OVERHEAD_S = 0.5
ASSUMED_PASSES = 5
REPLAY_BYTES_PER_S = 3.0e12

_GRID_KEYS = {"variants", "all", "shapes", "dtypes", "params", "variant_files"}


@dataclass
class Grid:
    """One grid of a sweep, in the terms of memtraffic.collect.planning.build_plan."""

    variants: list[str] = field(default_factory=list)
    all_variants: bool = False
    shapes: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # 'KEY=V1,V2', as --param takes them
    variant_files: list[str] = field(default_factory=list)


def _strings(path: Path, key: str, value: object) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in values):
        raise UsageError(f"{path}: '{key}' must be a string or a list of strings, e.g. {key} = [\"...\"]")
    return [str(v) for v in values]


def _grid(path: Path, table: Mapping[str, object], base: Grid | None, where: str) -> Grid:
    unknown = sorted(set(table) - _GRID_KEYS - ({"grid"} if base is None else set()))
    if unknown:
        raise UsageError(f"{path}: unknown key {', '.join(unknown)} in {where} "
                         f"(use {', '.join(sorted(_GRID_KEYS))}, and [[grid]] tables)")
    grid = Grid(**vars(base)) if base is not None else Grid()
    if "variants" in table:
        grid.variants = _strings(path, "variants", table["variants"])
    if "all" in table:
        if not isinstance(table["all"], bool):
            raise UsageError(f"{path}: 'all' must be true or false")
        grid.all_variants = table["all"]
    if "shapes" in table:
        grid.shapes = _strings(path, "shapes", table["shapes"])
    if "dtypes" in table:
        grid.dtypes = _strings(path, "dtypes", table["dtypes"])
    if "variant_files" in table:
        grid.variant_files = [str((path.parent / f).resolve())
                              for f in _strings(path, "variant_files", table["variant_files"])]
    if "params" in table:
        params = table["params"]
        if not isinstance(params, dict):
            raise UsageError(f"{path}: 'params' must be a table, e.g. params = {{ num_warps = [4, 8] }}")
        grid.params = []
        for key, value in params.items():
            values = value if isinstance(value, list) else [value]
            grid.params.append(f"{key}=" + ",".join(str(v).lower() if isinstance(v, bool) else str(v)
                                                    for v in values))
    return grid


def read_sweep(path: str | Path) -> list[Grid]:
    """The grids of a TOML sweep file: the top level's (when it names variants, or has no [[grid]] table),
    then one per [[grid]] table, whose missing keys come from the top level."""
    path = Path(path)
    data = read_toml(path, "sweep file", "; see `memtraffic measure --help`")
    top = _grid(path, data, None, "the top level")
    tables = data.get("grid", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise UsageError(f"{path}: write extra grids as [[grid]] tables")
    more = [_grid(path, t, top, f"[[grid]] #{k}") for k, t in enumerate(tables, 1)]
    names_variants = bool(top.variants) or top.all_variants
    return ([top] if names_variants or not more else []) + more


def plan_from_grids(grids: Sequence[Grid], seed: int = 0) -> Plan:
    """One plan of every grid's configs (a config in several grids is measured once)."""
    from memtraffic.collect.planning import build_plan
    plans = [build_plan(g.variants, g.shapes, g.dtypes, g.params, g.all_variants, seed=seed,
                        variant_files=g.variant_files) for g in grids]
    return merge_plans(plans) if len(plans) > 1 else plans[0]


def grid_counts(plan: Plan) -> list[GridCount]:
    """`list --count`: configs and skipped combinations per variant, in plan order."""
    per: dict[str, list[int]] = {}
    for c in plan["configs"]:
        per.setdefault(c.get("variant", ""), [0, 0])[0] += 1
    for s in plan.get("skipped", []):
        per.setdefault(s.get("variant", ""), [0, 0])[1] += 1
    return [{"variant": v, "configs": n, "skipped": k} for v, (n, k) in per.items()]


# --- cost and balanced parts --------------------------------------------------------------------------------


def predicted_cost(config: Config, passes: int = ASSUMED_PASSES) -> float:
    """Rough seconds a config takes under ncu: overhead plus `passes` replays of its predicted bytes."""
    read, write = config["pred_read_bytes"], config["pred_write_bytes"]
    if read is None or write is None:  # a variant without a model: its minimum
        read, write = config["min_read_bytes"] or 0, config["min_write_bytes"] or 0
    return CONFIG_OVERHEAD_S + passes * float(read + write) / REPLAY_BYTES_PER_S


def balanced_split(configs: Sequence[Config], parts: int, passes: int = ASSUMED_PASSES) -> list[list[Config]]:
    """`parts` lists of configs with about equal predicted cost; each keeps the plan's order.

    Greedy longest-first: the costliest config goes to the least loaded part (lowest index on ties),
    configs of equal cost in range-name order, so the split depends only on the plan.
    """
    if parts < 1:
        raise UsageError(f"cannot split a plan into {parts} parts")
    order = sorted(range(len(configs)), key=lambda k: (-predicted_cost(configs[k], passes),
                                                       str(configs[k]["range"])))
    loads = [0.0] * parts
    chosen: list[list[int]] = [[] for _ in range(parts)]
    for k in order:
        part = min(range(parts), key=lambda p: (loads[p], p))
        loads[part] += predicted_cost(configs[k], passes)
        chosen[part].append(k)
    return [[configs[k].copy() for k in sorted(ks)] for ks in chosen]


# --- shards -------------------------------------------------------------------------------------------------


def parse_shard(text: str) -> tuple[int, int]:
    """'2/4' -> (2, 4): the second of four shards (1-based, as a Slurm array --array=1-4 counts)."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or n < 1 or not 1 <= i <= n:
        raise UsageError(f"bad --shard {text!r}: write I/N with 1 <= I <= N, e.g. --shard 2/4 "
                         "(with Slurm: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)")
    return i, n


def plan_digest(plan: Plan) -> str:
    """A short hash of the plan's ranges: shards of one plan carry the same digest, which merge checks."""
    ranges = "\n".join(sorted(str(c["range"]) for c in plan["configs"]))
    return hashlib.sha256(ranges.encode()).hexdigest()[:16]


def shard_plan(plan: Plan, index: int, count: int) -> Plan:
    """Shard `index` of `count` of the plan: balanced by predicted cost, deterministic, disjoint, and
    together covering every config once. Config ids stay those of the whole plan."""
    total = len(plan["configs"])
    if count > total:
        raise UsageError(f"--shard {index}/{count}: the plan has only {total} configs; use at most {total} "
                         "shards (`memtraffic list --count` shows a grid's size)")
    part = balanced_split(plan["configs"], count)[index - 1]
    shard: Shard = {"index": index, "count": count, "plan_configs": total, "plan_digest": plan_digest(plan)}
    return {**plan, "configs": part, "shard": shard}


# --- GPUs ---------------------------------------------------------------------------------------------------


def gpu_indices(text: str) -> list[int] | None:
    """'all' -> None; '0,2' -> [0, 2] (repeats dropped); UsageError for anything else. Needs no GPU: measure
    checks the flag before it looks for one."""
    if text.strip().lower() == "all":
        return None
    gpus: list[int] = []
    for token in text.split(","):
        token = token.strip()
        if not (token.isascii() and token.isdigit()):
            raise UsageError(f"bad --gpus {text!r}: write all, or GPU indices like 0,1")
        if int(token) not in gpus:
            gpus.append(int(token))
    return gpus


def parse_gpus(text: str, available: int) -> list[int]:
    """'all' -> [0, ..., available-1]; '0,2' -> [0, 2], each checked against the GPUs this machine has."""
    return check_gpus(text, gpu_indices(text), available)


def check_gpus(text: str, indices: list[int] | None, available: int) -> list[int]:
    """gpu_indices' result for --gpus `text` (None: all) checked against the GPUs this machine has."""
    if available < 1:
        raise GpuNotFoundError(f"--gpus {text}: no CUDA GPU is visible on this machine; `memtraffic analyze` "
                               "reads existing runs anywhere")
    if indices is None:
        return list(range(available))
    for index in indices:
        if index >= available:
            raise UsageError(f"--gpus {text}: there is no GPU {index}; this machine shows {available} "
                             f"(0-{available - 1}; see nvidia-smi and CUDA_VISIBLE_DEVICES)")
    return indices


def visible_id(index: int, env_value: str | None) -> str:
    """What CUDA_VISIBLE_DEVICES must be for the process of GPU `index` as this process numbers it
    (Slurm and users may already have narrowed the visible GPUs, e.g. to '2,3')."""
    if env_value is None or not env_value.strip():
        return str(index)
    return [v.strip() for v in env_value.split(",")][index]
