"""Finding ncu, building its command (a pure function), running it over a plan, mapping its errors.

`measure()` is the whole collection stage: it checks the user's input, ncu and the GPU up front,
writes a plan into a new run folder, lets ONE ncu process profile every config of the plan inside
`python -m memtraffic.runner PLAN.json`, and starts a fresh ncu process for the configs not yet done
if the runner dies. Then it analyzes the reports and saves run.json, results.csv and results.json.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memtraffic.exceptions import GpuNotFoundError, NcuError, UsageError
from memtraffic.extract import EmptyReportError

MIN_NCU_VERSION = (2023, 1)
# Our NVTX push/pop ranges are named "mt|..."; the trailing '/' is ncu's mark for a push/pop range.
RANGE_PREFIX = "mt|"
NVTX_INCLUDE = r"regex:^mt\|.*/"
DEFAULT_RUNS_ROOT = Path("reports") / "runs"
CLOCK_CONTROLS = ("none", "base")
CACHE_CONTROLS = ("all", "none")

_INSTALL_HINT = (
    "install Nsight Compute (it comes with the CUDA toolkit, or from "
    "https://developer.nvidia.com/nsight-compute) or set MEMTRAFFIC_NCU=/path/to/ncu"
)
PERM_MESSAGE = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root, or load the driver with "
    "NVreg_RestrictProfilingToAdminUsers=0; see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


# --- finding ncu --------------------------------------------------------------------------------------------


def _version_key(path: Path) -> tuple[int, ...]:
    """'2025.3.1' -> (2025, 3, 1); names that are not versions sort first."""
    nums = re.findall(r"\d+", path.name)
    return tuple(int(n) for n in nums) if nums else (-1,)


def ncu_candidates(
    env: Mapping[str, str] | None = None,
    cuda_bin: Path = Path("/usr/local/cuda/bin"),
    opt_root: Path = Path("/opt/nvidia/nsight-compute"),
) -> list[Path]:
    """Where ncu may be, in the order it is searched: PATH, the CUDA toolkit, /opt (newest version first)."""
    env = os.environ if env is None else env
    found: list[Path] = []
    on_path = shutil.which("ncu", path=env.get("PATH", ""))
    if on_path:
        found.append(Path(on_path))
    found.append(cuda_bin / "ncu")
    if opt_root.is_dir():
        found += [d / "ncu" for d in sorted(opt_root.iterdir(), key=_version_key, reverse=True)]
    return found


def find_ncu(
    env: Mapping[str, str] | None = None,
    cuda_bin: Path = Path("/usr/local/cuda/bin"),
    opt_root: Path = Path("/opt/nvidia/nsight-compute"),
) -> Path:
    """MEMTRAFFIC_NCU if set (it must be an executable), else the first ncu of `ncu_candidates`."""
    env = os.environ if env is None else env
    override = env.get("MEMTRAFFIC_NCU")
    if override:
        path = Path(override).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise NcuError(f"MEMTRAFFIC_NCU={override} is not an executable file: point it at the ncu binary")
        return path
    for path in ncu_candidates(env, cuda_bin, opt_root):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise NcuError(f"Nsight Compute (ncu) not found on PATH, in {cuda_bin} or {opt_root}/*: {_INSTALL_HINT}")


def parse_ncu_version(text: str) -> tuple[int, ...] | None:
    """'... Version 2025.3.1.0 (build 36398880) ...' -> (2025, 3, 1, 0)."""
    match = re.search(r"Version\s+(\d+(?:\.\d+)+)", text)
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def ncu_version(ncu: Path) -> tuple[int, ...]:
    """The version of this ncu; NcuError when it cannot say or is older than MIN_NCU_VERSION."""
    try:
        proc = subprocess.run([str(ncu), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise NcuError(f"cannot run {ncu} --version ({err}): {_INSTALL_HINT}") from None
    version = parse_ncu_version(proc.stdout + proc.stderr)
    if version is None:
        raise NcuError(f"{ncu} --version printed no version (is it Nsight Compute?): {_INSTALL_HINT}")
    if version[:2] < MIN_NCU_VERSION:
        need = ".".join(map(str, MIN_NCU_VERSION))
        raise NcuError(
            f"ncu {'.'.join(map(str, version))} at {ncu} is too old: memtraffic needs Nsight Compute "
            f">= {need}; {_INSTALL_HINT}"
        )
    return version


def check_gpu() -> str:
    """The name of CUDA device 0, or GpuNotFoundError."""
    import torch

    if not torch.cuda.is_available():
        raise GpuNotFoundError(
            "no CUDA GPU is visible: `memtraffic measure` needs one (and ncu); "
            "`memtraffic analyze` reads existing reports on any machine"
        )
    return torch.cuda.get_device_name(0)


# --- metrics ------------------------------------------------------------------------------------------------


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names from `ncu --query-metrics` output (with or without --chip's 'Unit.Config.')."""
    names: set[str] = set()
    for line in text.splitlines():
        if not line or line[0].isspace():  # wrapped description lines
            continue
        token = line.split()[0]
        for part in token.split("."):
            if "__" in part:
                names.add(part)
                break
    return names


@functools.lru_cache(maxsize=4)
def query_metric_names(ncu: Path) -> frozenset[str]:
    """The base metric names ncu offers on the current GPU (cached for the process)."""
    try:
        proc = subprocess.run([str(ncu), "--query-metrics"], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise NcuError(f"cannot run {ncu} --query-metrics: {err}") from None
    output = proc.stdout + proc.stderr
    if "ERR_NVGPUCTRPERM" in output:
        raise NcuError(PERM_MESSAGE)
    names = parse_query_metrics(proc.stdout)
    if proc.returncode != 0 or not names:
        last = (output.strip().splitlines() or ["(no output)"])[-1]
        raise NcuError(f"{ncu} --query-metrics failed (exit code {proc.returncode}): {last}")
    return frozenset(names)


def base_name(metric: str) -> str:
    """'dram__bytes_read.sum' -> 'dram__bytes_read': the part ncu's query lists."""
    return metric.split(".", 1)[0]


def resolve_metrics(spec: str, available: Iterable[str] | None = None) -> list[str]:
    """'traffic' / 'traffic,fadd' / 'dram__bytes_read.sum' -> ncu metric names (time always included).

    Tokens are set names, aliases of memtraffic.metrics, or raw ncu names. Every invalid token is
    reported in one UsageError; with `available` (base names from ncu --query-metrics), raw names
    are checked against this GPU too, because ncu itself silently ignores a bogus metric.
    """
    from memtraffic.metrics import METRIC_SETS, METRICS

    names: list[str] = [METRICS["time"].ncu]
    invalid: list[str] = []
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            continue
        if token in METRIC_SETS:
            resolved = [METRICS[a].ncu for a in METRIC_SETS[token]]
        elif token in METRICS:
            resolved = [METRICS[token].ncu]
        elif "__" in token:
            resolved = [token]
        else:
            invalid.append(token)
            continue
        names += [n for n in resolved if n not in names]
    if available is not None:
        offered = set(available)
        invalid += [n for n in names if base_name(n) not in offered]
    if invalid:
        raise UsageError(
            f"unknown metrics: {', '.join(invalid)}. Use a set ({', '.join(METRIC_SETS)}), an alias from "
            "memtraffic/metrics.py, or a name from `ncu --query-metrics`"
        )
    return names


# --- the ncu command ----------------------------------------------------------------------------------------


def build_ncu_command(
    ncu: str | Path,
    metrics: Sequence[str],
    report: str | Path,
    app: Sequence[str],
    *,
    cache_control: str = "all",
    clock_control: str = "none",
    import_sass: bool = False,
    source: bool = False,
    nvtx_include: str = NVTX_INCLUDE,
) -> list[str]:
    """The ncu argv that profiles into `report` only the kernels launched inside our NVTX ranges of `app`.

    `source` adds the per-instruction counters (SourceCounters section) that `memtraffic lines` reads,
    the kernels' source text, and their cubins (ncu 2025.3.1 refuses --import-source yes with --import-sass
    no: "not compatible").
    """
    if cache_control not in CACHE_CONTROLS:
        raise UsageError(f"unknown --cache-control {cache_control!r}: use one of {', '.join(CACHE_CONTROLS)}")
    if clock_control not in CLOCK_CONTROLS:
        raise UsageError(f"unknown --clock-control {clock_control!r}: use one of {', '.join(CLOCK_CONTROLS)}")
    per_line = ["--section", "SourceCounters", "--import-source", "yes"] if source else []
    return [
        str(ncu),
        "--metrics", ",".join(metrics),
        *per_line,
        "--nvtx", "--nvtx-include", nvtx_include,
        "--cache-control", cache_control,
        "--clock-control", clock_control,
        # Without this ncu embeds every kernel's cubin: a torch kernel's report grows from ~30 KB to ~6 MB.
        "--import-sass", "yes" if import_sass or source else "no",
        # The runner is launched directly by ncu; torch.compile's worker processes launch no kernels.
        "--target-processes", "application-only",
        "--export", str(report),
        *app,
    ]


def runner_argv(plan_path: Path) -> list[str]:
    return [sys.executable, "-m", "memtraffic.runner", str(plan_path)]


@dataclass
class NcuRun:
    returncode: int
    passes: int | None
    interrupted: bool
    no_kernels: bool
    tail: list[str]


_PASSES = re.compile(r"-\s+(\d+)\s+pass(?:es)?\b")


def run_ncu(argv: Sequence[str], log_path: Path, echo: Callable[[str], None] | None = None,
            verbose: bool = False) -> NcuRun:
    """Run ncu, teeing its output into log_path. Runner lines go to `echo`, ==PROF== lines only if verbose.

    Ctrl-C: the runner stops after its current config and ncu writes the report of what it profiled;
    we wait for that (a second Ctrl-C kills ncu) and return with interrupted=True.
    """
    echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    passes: int | None = None
    tail: list[str] = []
    perm = no_kernels = interrupted = False
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1)
    except OSError as err:
        raise NcuError(f"cannot start {argv[0]}: {err}") from None
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("$ " + shlex.join(argv) + "\n")
        while True:
            try:
                for line in proc.stdout:  # type: ignore[union-attr]
                    line = line.rstrip("\n")
                    log.write(line + "\n")
                    tail = (tail + [line])[-20:]
                    if "ERR_NVGPUCTRPERM" in line:
                        perm = True
                    if "No kernels were profiled" in line:
                        no_kernels = True
                    if line.startswith("==PROF=="):
                        found = _PASSES.search(line)
                        if found:
                            passes = max(passes or 0, int(found.group(1)))
                        if verbose:
                            echo(line)
                    else:
                        echo(line)
                proc.wait()
                break
            except KeyboardInterrupt:
                if interrupted:  # second Ctrl-C: stop waiting for ncu
                    proc.kill()
                    proc.wait()
                    break
                interrupted = True
                echo("interrupted: waiting for ncu to write the report of the finished configs "
                     "(Ctrl-C again to kill it)")
    if perm:
        raise NcuError(PERM_MESSAGE)
    return NcuRun(proc.returncode, passes, interrupted, no_kernels, tail)


# --- the plan -----------------------------------------------------------------------------------------------


def parse_param_value(text: str) -> Any:
    """'128' -> 128, '0.5' -> 0.5, 'true' -> True, anything else stays a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def parse_params(items: Sequence[str]) -> dict[str, list[Any]]:
    """['BLOCK_M=1,128', 'num_warps=4'] -> {'BLOCK_M': [1, 128], 'num_warps': [4]} (repeats add values)."""
    out: dict[str, list[Any]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"malformed --param {item!r}: write KEY=VALUE or KEY=V1,V2, e.g. BLOCK_M=128")
        values = out.setdefault(key.strip(), [])
        for v in value.split(","):
            parsed = parse_param_value(v)
            if v.strip() and parsed not in values:
                values.append(parsed)
    return out


def range_name(variant: str, shape: Sequence[int], dtype: str, params: Mapping[str, Any]) -> str:
    """'mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128': the NVTX range around one measured call."""
    parts = [RANGE_PREFIX + variant, "x".join(map(str, shape)), dtype]
    if params:
        parts.append(",".join(f"{k}={v}" for k, v in params.items()))
    return "|".join(parts)


def build_plan(variants: Sequence[str], shapes: Sequence[str], dtypes: Sequence[str], params: Sequence[str],
               all_variants: bool = False, seed: int = 0) -> dict[str, Any]:
    """Every variant x shape x dtype x parameter combination, with the op's minimum and the variant's model.

    Shapes are matched to variants by rank (MxN ops take 2 extents, matmuls 3), so `--all` may mix them.
    Combinations a variant cannot take (dtype, its own constraints) are listed under 'skipped' with
    the reason; an explicitly named variant that no shape fits is a UsageError.
    """
    from kernels import VARIANTS
    from memtraffic.model import OPS, dtype_name, format_shape, parse_dtype, parse_shape
    from memtraffic.suite import get_variant, unsupported_reason

    if all_variants and variants:
        raise UsageError("give variant names or --all, not both")
    names = list(VARIANTS) if all_variants else list(dict.fromkeys(variants))
    if not names:
        raise UsageError("name at least one variant (see `memtraffic list`) or use --all")
    chosen = [get_variant(n) for n in names]
    dts = [parse_dtype(d) for d in (dtypes or ["fp32"])]
    shps = [parse_shape(s) for s in shapes]
    grid = parse_params(params)
    unused = [k for k in grid if not any(k in v.params for v in chosen)]
    if unused:
        takes = sorted({k for v in chosen for k in v.params}) or ["none"]
        raise UsageError(f"no selected variant takes parameter {', '.join(unused)} "
                         f"(they take: {', '.join(takes)})")

    configs: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for variant in chosen:
        op = OPS[variant.op]
        rank = len(op.dims.split("x"))
        v_shapes = [s for s in shps if len(s) == rank] if shps else [op.default_shape]
        if not v_shapes:
            if all_variants:
                continue
            given = ", ".join(format_shape(s) for s in shps)
            raise UsageError(f"{variant.name} ({op.name}) takes a {op.dims} shape; none of {given} is one")
        keys = [k for k in grid if k in variant.params]
        combos = list(itertools.product(*(grid[k] for k in keys)))
        for shape, dt, values in itertools.product(v_shapes, dts, combos):
            explicit = dict(zip(keys, values, strict=True))
            entry = {"variant": variant.name, "op": op.name, "shape": list(shape), "dtype": dtype_name(dt),
                     "params": {**variant.params, **explicit}, "explicit_params": explicit}
            try:
                reason = unsupported_reason(variant, shape, dt, explicit)
            except UsageError as err:  # a parameter value the variant rejects
                reason = str(err)
            if reason is not None:
                skipped.append({**entry, "reason": reason})
                continue
            minimum = op.minimum(shape, dt)
            predicted = variant.predicted(shape, dt, {**variant.params, **explicit})
            configs.append({
                "id": len(configs),
                **entry,
                "range": range_name(variant.name, shape, dtype_name(dt), explicit),
                "min_read_bytes": minimum.read,
                "min_write_bytes": minimum.write,
                "pred_read_bytes": predicted.read,
                "pred_write_bytes": predicted.write,
                "model_flops": op.flops(shape),
            })
    if not configs:
        why = "; ".join(s["reason"] for s in skipped[:3]) or "no variant matches the shapes"
        raise UsageError(f"nothing to measure: {why}")
    return {"version": 1, "seed": seed, "status_file": "status.jsonl", "configs": configs, "skipped": skipped}


def merge_plans(plans: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several plans as one (ids renumbered): e.g. variants that each need their own parameters."""
    merged = {**plans[0], "configs": [], "skipped": []}
    seen: set[str] = set()
    for plan in plans:
        for config in plan["configs"]:
            if config["range"] not in seen:
                seen.add(config["range"])
                merged["configs"].append({**config, "id": len(merged["configs"])})
        merged["skipped"] += plan["skipped"]
    return merged


# --- run folders --------------------------------------------------------------------------------------------


def new_run_dir(variants: Sequence[str], out: Path | None = None, root: Path = DEFAULT_RUNS_ROOT,
                now: datetime | None = None) -> Path:
    """A fresh, empty folder for this run; an existing, non-empty --out is an error, never overwritten."""
    if out is not None:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UsageError(f"{out} already exists and is not empty: memtraffic never overwrites a run; "
                             "choose a new --out folder")
        out.mkdir(parents=True, exist_ok=True)
        return out
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", variants[0] if variants else "run")
    if len(variants) > 1:
        label += f"+{len(variants) - 1}"
    root.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = root / (f"{stamp}_{label}" if n == 1 else f"{stamp}_{label}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


# --- status file (shared with the runner) -------------------------------------------------------------------


def read_status(path: Path) -> dict[int, dict[str, Any]]:
    """Config id -> its last record in the runner's JSON-lines status file ('start' until it finishes)."""
    latest: dict[int, dict[str, Any]] = {}
    if not path.exists():
        return latest
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a crash
            continue
        if isinstance(rec, dict) and "id" in rec:
            latest[int(rec["id"])] = rec
    return latest


def append_status(path: Path, record: Mapping[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(dict(record)) + "\n")


# --- measure: the whole stage -------------------------------------------------------------------------------


@dataclass
class MeasureOptions:
    variants: list[str]
    shapes: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    all_variants: bool = False
    metrics: str = "traffic"
    out: Path | None = None
    clock_control: str = "none"
    cache_control: str = "all"
    source: bool = False  # per-line counters and source text for `memtraffic lines`
    verbose: bool = False
    runs_root: Path = DEFAULT_RUNS_ROOT
    max_attempts: int | None = None  # fresh ncu processes after runner crashes; default: one per config
    plan: dict[str, Any] | None = None  # a ready plan (build_plan / merge_plans) instead of the fields above


@dataclass
class MeasureResult:
    run_dir: Path
    run: dict[str, Any]
    table: Any  # the analyzed pandas DataFrame (empty when nothing was profiled)


def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        if out:
            return out.splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        match = re.search(r"Kernel Module\s+(\S+)", Path("/proc/driver/nvidia/version").read_text())
        return match.group(1) if match else None
    except OSError:
        return None


def environment(gpu: str | None, ncu: Path | None, version: Sequence[int] | None) -> dict[str, Any]:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "gpu": gpu,
        "driver": _driver_version(),
        "ncu": str(ncu) if ncu else None,
        "ncu_version": ".".join(map(str, version)) if version else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton_version,
        "python": platform.python_version(),
        "host": platform.node(),
    }


def _utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def profile_plan(plan: dict[str, Any], run_dir: Path, ncu: Path, metrics: Sequence[str], opts: MeasureOptions,
                 echo: Callable[[str], None] | None = None,
                 ncu_runner: Callable[..., NcuRun] = run_ncu) -> dict[str, Any]:
    """Profile the plan's configs, restarting ncu for those not yet done whenever the runner dies.

    Returns the attempts, the reports written and whether the user interrupted. Config statuses are
    in the status file: a config that was started but never finished is recorded as failed here.
    """
    plan_path = run_dir / "plan.json"
    status_path = run_dir / plan["status_file"]
    ids = [c["id"] for c in plan["configs"]]
    max_attempts = opts.max_attempts or len(ids) + 1
    attempts: list[dict[str, Any]] = []
    reports: list[str] = []
    interrupted = False
    for attempt in range(1, max_attempts + 1):
        before = read_status(status_path)
        if all(i in before for i in ids):
            break
        report = run_dir / ("profile.ncu-rep" if attempt == 1 else f"profile-{attempt}.ncu-rep")
        argv = build_ncu_command(ncu, metrics, report, runner_argv(plan_path),
                                 cache_control=opts.cache_control, clock_control=opts.clock_control,
                                 source=opts.source)
        result = ncu_runner(argv, run_dir / "ncu.log", echo=echo, verbose=opts.verbose)
        attempts.append({"argv": argv, "returncode": result.returncode, "passes": result.passes,
                         "no_kernels_message": result.no_kernels})
        if report.exists() and report.stat().st_size > 0:
            reports.append(report.name)
        after = read_status(status_path)
        for cid, rec in after.items():
            if rec.get("status") == "start":
                append_status(status_path, {"id": cid, "range": rec.get("range"), "status": "failed",
                                            "error": f"the runner process died while running it "
                                                     f"(ncu exit code {result.returncode})"})
        if result.interrupted or result.returncode in (130, -2):
            interrupted = True
            break
        if after == before:  # no config even started: ncu or the runner fails before measuring
            last = " | ".join(line for line in result.tail[-3:] if line.strip()) or "(no output)"
            raise NcuError(f"ncu exited with code {result.returncode} before profiling anything: {last} "
                           f"(full log: {run_dir / 'ncu.log'})")
    final = read_status(status_path)
    for cid in ids:
        if cid not in final:
            why = "not run: interrupted" if interrupted else "not run: the runner kept failing before it"
            append_status(status_path, {"id": cid, "status": "failed" if not interrupted else "not run",
                                        "error": why})
    return {"attempts": attempts, "reports": reports, "interrupted": interrupted}


def partial_reports_expected(run: Mapping[str, Any]) -> bool:
    """After Ctrl-C or a runner crash a report may end in a damaged launch: drop it, keep the rest."""
    return bool(run.get("interrupted")) or any(a.get("returncode") for a in run.get("attempts", []))


def _config_entries(plan: Mapping[str, Any], status: Mapping[int, dict[str, Any]],
                    profiled: set[str] | None) -> list[dict[str, Any]]:
    """run.json's per-config lines: status ok/failed/not run, error text, and whether ncu profiled it."""
    entries = []
    for c in plan["configs"]:
        rec = status.get(c["id"], {})
        entry = {k: c[k] for k in ("id", "range", "variant", "op", "shape", "dtype", "params")}
        entry.update(status=rec.get("status", "not run"), error=rec.get("error"), max_err=rec.get("max_err"),
                     profiled=None if profiled is None else c["range"] in profiled)
        if entry["status"] == "ok" and entry["profiled"] is False:
            entry["error"] = "no kernel was profiled inside its NVTX range"
        entries.append(entry)
    return entries


def measure(opts: MeasureOptions, echo: Callable[[str], None] | None = None) -> MeasureResult:
    """Check everything up front, profile every config under ncu, analyze, save. See the module doc."""
    from memtraffic import analyze as analysis

    echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    plan = opts.plan or build_plan(opts.variants, opts.shapes, opts.dtypes, opts.params, opts.all_variants)
    build_ncu_command("ncu", [], "r", [], cache_control=opts.cache_control, clock_control=opts.clock_control)
    resolve_metrics(opts.metrics)  # names that are not even metric-shaped fail before we look for ncu
    ncu = find_ncu()
    version = ncu_version(ncu)
    gpu = check_gpu()
    metrics = resolve_metrics(opts.metrics, query_metric_names(ncu))

    variants = list(dict.fromkeys(c["variant"] for c in plan["configs"]))
    run_dir = new_run_dir(variants, opts.out, opts.runs_root)
    plan["metrics"] = {"spec": opts.metrics, "names": metrics}
    plan["options"] = {"clock_control": opts.clock_control, "cache_control": opts.cache_control,
                       "source": opts.source}
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
    for s in plan["skipped"]:
        echo(f"skip {s['variant']} {'x'.join(map(str, s['shape']))} {s['dtype']}: {s['reason']}")
    echo(f"profiling {len(plan['configs'])} configs with {ncu} into {run_dir}")

    run: dict[str, Any] = {
        "started": _utc(),
        "command": shlex.join(sys.argv),
        "environment": environment(gpu, ncu, version),
        "variants": variants,
        "shapes": list(dict.fromkeys("x".join(map(str, c["shape"])) for c in plan["configs"])),
        "dtypes": list(dict.fromkeys(c["dtype"] for c in plan["configs"])),
        "params": opts.params,
        "metric_set": opts.metrics,
        "metric_names": metrics,
        "clock_control": opts.clock_control,
        "cache_control": opts.cache_control,
        "source": opts.source,
    }
    t0 = time.perf_counter()
    try:
        outcome = profile_plan(plan, run_dir, ncu, metrics, opts, echo)
    except NcuError as err:
        run.update(wall_time_s=round(time.perf_counter() - t0, 3), error=str(err), configs=[])
        (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n")
        raise
    run["wall_time_s"] = round(time.perf_counter() - t0, 3)
    run["finished"] = _utc()
    run.update(outcome)
    passes = [a["passes"] for a in outcome["attempts"] if a["passes"]]
    run["passes"] = max(passes) if passes else None

    status = read_status(run_dir / plan["status_file"])
    run["configs"] = _config_entries(plan, status, profiled=None)
    run["skipped"] = plan["skipped"]
    (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n")  # saved before analysis can fail
    try:
        table, kernels = analysis.analyze_reports([run_dir / r for r in outcome["reports"]], plan,
                                                  allow_partial=partial_reports_expected(run),
                                                  run_name=run_dir.name)
    except EmptyReportError:  # ncu wrote reports without kernels: reported below, naming the ranges
        table, kernels = analysis.analyze_reports([], plan)
    if run["passes"] is None and len(kernels) and "passes" in kernels:
        found = kernels["passes"].dropna()
        run["passes"] = int(found.max()) if len(found) else None
    profiled = set(kernels["range"]) if len(kernels) else set()
    run["configs"] = _config_entries(plan, status, profiled)
    (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    if len(table):
        analysis.save_results(table, run_dir)

    ok_ranges = [c["range"] for c in run["configs"] if c["status"] == "ok"]
    if ok_ranges and not profiled and not outcome["interrupted"]:
        raise NcuError(
            f"ncu profiled no kernel inside the NVTX ranges {', '.join(ok_ranges[:4])}"
            f"{' ...' if len(ok_ranges) > 4 else ''} (filter --nvtx-include {NVTX_INCLUDE}): do these "
            f"variants launch CUDA kernels? See {run_dir / 'ncu.log'}"
        )
    return MeasureResult(run_dir, run, table)
