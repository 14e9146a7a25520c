"""Nsight Compute itself: finding ncu, its version and metrics, building its argv, running it.

Everything that knows ncu's command line lives here; `collect` (variants) and `profile` (any program)
both build their argv with `build_ncu_command`.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from memtraffic.host.cache import cache_dir
from memtraffic.ncu.metrics import base_name
from memtraffic.vocab.arch import Chip
from memtraffic.vocab.errors import NcuError, UsageError, choice, say
from memtraffic.vocab.files import write_bytes_atomic

MIN_NCU_VERSION = (2023, 1)
# Our NVTX push/pop ranges are named "mt|..."; the trailing '/' is ncu's mark for a push/pop range.
NVTX_INCLUDE = r"regex:^mt\|.*/"
# Under range replay each measured op, region or Triton launch range is one unit (repeats, mt|rep|, are not).
RANGE_INCLUDE = r"regex:^mt\|(op|region|triton)\|.*/"
# ncu's fixed choices, typed: a value is one of these once parsed (choice, parse_controls).
ReplayMode = Literal["kernel", "range"]
ClockControl = Literal["none", "base"]
CacheControl = Literal["all", "none"]
REPLAY_MODES: tuple[ReplayMode, ...] = get_args(ReplayMode)
CLOCK_CONTROLS: tuple[ClockControl, ...] = get_args(ClockControl)
CACHE_CONTROLS: tuple[CacheControl, ...] = get_args(CacheControl)

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


def _metrics_cache(key: str) -> Path:
    """Where the metric names of one ncu version on one GPU are kept (in the user cache folder)."""
    return cache_dir() / "ncu-metrics" / (re.sub(r"[^A-Za-z0-9_.-]+", "_", key) + ".txt")


def metrics_cache_key(ncu: Path, version: Sequence[int], gpu: str) -> str:
    """What the offered metrics depend on: this ncu and this GPU."""
    return f"{ncu}-{'.'.join(map(str, version))}-{gpu}"


@functools.lru_cache(maxsize=4)
def query_metric_names(ncu: Path, cache_key: str | None = None) -> frozenset[str]:
    """The base metric names ncu offers on the current GPU.

    `ncu --query-metrics` takes seconds, so with a cache_key (ncu version and GPU name) the names are
    kept in a user cache file and read from there next time.
    """
    cache = _metrics_cache(cache_key) if cache_key else None
    if cache is not None and cache.is_file():
        names = {line.strip() for line in cache.read_text().splitlines() if "__" in line}
        if names:
            return frozenset(names)
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
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(cache, ("\n".join(sorted(names)) + "\n").encode())  # never half a list
        except OSError:  # a read-only home: the next run asks ncu again
            pass
    return frozenset(names)


@dataclass
class MetricSpec:
    """What one --metrics value collects on a GPU: the ncu names, and a note per thing not measured."""

    names: list[str]
    notes: list[str]


def _split_tokens(spec: str) -> tuple[list[str], list[str]]:
    """(tokens, invalid): set names expanded to aliases, aliases and raw ncu names kept ('time' first)."""
    from memtraffic.ncu.metrics import METRIC_SETS, METRICS

    tokens: list[str] = ["time"]
    invalid: list[str] = []
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            continue
        if token in METRIC_SETS:
            tokens += METRIC_SETS[token]
        elif token in METRICS or "__" in token:
            tokens.append(token)
        else:
            invalid.append(token)
    return list(dict.fromkeys(tokens)), invalid


def metric_tokens(spec: str) -> list[str]:
    """'traffic,fadd,dram__bytes_read.sum' -> aliases and raw ncu names in the order given ('time' first).

    Tokens are set names, aliases of memtraffic.ncu.metrics, or raw ncu names (anything with '__');
    every other token is reported in one UsageError, before ncu is looked for.
    """
    tokens, invalid = _split_tokens(spec)
    if invalid:
        raise UsageError(_unknown_metrics(invalid))
    return tokens


def resolve_metric_spec(spec: str | Sequence[str], available: Iterable[str] | None = None,
                        chip: Chip | None = None) -> MetricSpec:
    """A --metrics value (or its metric_tokens) -> the ncu names to collect on this GPU (time first).

    With `available` (base names from ncu --query-metrics) each alias becomes the counter this GPU has
    (memtraffic.ncu.metrics.resolve); an alias it has none of is left out with a note (`chip`, when
    known, says why). Raw names are checked against this GPU too, because ncu itself silently ignores
    a bogus metric: every invalid token and every raw name it lacks is reported in one UsageError.
    """
    from memtraffic.ncu.metrics import METRICS, resolve

    tokens, invalid = _split_tokens(spec) if isinstance(spec, str) else (list(spec), [])
    offered = None if available is None else set(available)
    resolution = resolve([t for t in tokens if t in METRICS], offered, chip)
    forms = {r.alias: r.form for r in resolution.items}
    names: list[str] = []
    for token in tokens:
        form = forms.get(token) if token in METRICS else None
        resolved = list(form.names) if form is not None else [] if token in METRICS else [token]
        names += [n for n in resolved if n not in names]
    if offered is not None:
        invalid += [t for t in tokens if t not in METRICS and base_name(t) not in offered]
    if invalid:
        raise UsageError(_unknown_metrics(invalid))
    return MetricSpec(names, resolution.notes)


def resolve_metrics(spec: str, available: Iterable[str] | None = None, chip: Chip | None = None) -> list[str]:
    """The ncu names of resolve_metric_spec (its notes dropped)."""
    return resolve_metric_spec(spec, available, chip).names


def _unknown_metrics(names: Sequence[str]) -> str:
    from memtraffic.ncu.metrics import METRIC_SETS

    return (f"unknown metrics: {', '.join(names)}. Use a set ({', '.join(METRIC_SETS)}), an alias from "
            "memtraffic/ncu/metrics.py, or a name from `ncu --query-metrics`")


# --- the ncu command ----------------------------------------------------------------------------------------


TARGET_PROCESSES = ("all", "application-only")


@dataclass(frozen=True)
class NcuControls:
    """--cache-control and --clock-control, the two ncu options that change what the counters read,
    parsed once (parse_controls) when measure's or profile's options are made."""

    cache_control: CacheControl = "all"
    clock_control: ClockControl = "none"


def parse_controls(cache_control: str, clock_control: str) -> NcuControls:
    """The controls as given on the command line, or a UsageError for a value ncu would refuse."""
    return NcuControls(choice("--cache-control", cache_control, CACHE_CONTROLS),
                       choice("--clock-control", clock_control, CLOCK_CONTROLS))


def check_ncu_options(cache_control: str = "all", clock_control: str = "none",
                      target_processes: str = "application-only", launch_skip: int | None = None,
                      launch_count: int | None = None) -> None:
    """UsageError for an option value ncu would refuse: measure and profile check before finding ncu."""
    parse_controls(cache_control, clock_control)
    choice("--target-processes", target_processes, TARGET_PROCESSES)
    if launch_skip is not None and launch_skip < 0:
        raise UsageError(f"--launch-skip {launch_skip}: give the number of kernel launches to skip (>= 0)")
    if launch_count is not None and launch_count < 1:
        raise UsageError(f"--launch-count {launch_count}: give how many kernel launches to profile (>= 1)")


def build_ncu_command(
    ncu: str | Path,
    metrics: Sequence[str],
    report: str | Path,
    app: Sequence[str],
    *,
    cache_control: CacheControl = "all",
    clock_control: ClockControl = "none",
    import_sass: bool = False,
    nvtx_include: Sequence[str] = (NVTX_INCLUDE,),
    nvtx_exclude: Sequence[str] = (),
    target_processes: str = "application-only",
    kernel_name: str | None = None,
    launch_skip: int | None = None,
    launch_count: int | None = None,
    profile_from_start: bool = True,
    source: bool = False,
    replay_mode: ReplayMode = "kernel",
) -> list[str]:
    """The ncu argv that profiles `app` into `report` (a pure function: tests compare it exactly).

    `measure` keeps the defaults: only kernels inside our NVTX ranges of the runner process. `profile`
    passes the user's filters, and under --distinct excludes the repeats' ranges
    (memtraffic.vocab.launches.NVTX_EXCLUDE). `source` adds the per-instruction SourceCounters section
    with the CUDA source and SASS embedded, which `memtraffic lines` reads.
    """
    check_ncu_options(cache_control, clock_control, target_processes, launch_skip, launch_count)
    choice("replay mode", replay_mode, REPLAY_MODES)  # a caller's Python (an untyped script) may give any
    argv = [str(ncu), "--metrics", ",".join(metrics), "--nvtx"]
    if replay_mode != "kernel":  # kernel replay is ncu's default: its argv stays as it was
        argv += ["--replay-mode", replay_mode]
    for include in nvtx_include:
        argv += ["--nvtx-include", include]
    for exclude in nvtx_exclude:
        argv += ["--nvtx-exclude", exclude]
    argv += [
        "--cache-control", cache_control,
        "--clock-control", clock_control,
        # Without this ncu embeds every kernel's cubin: a torch kernel's report grows from ~30 KB to ~6 MB.
        # The per-line view needs it (the SASS carries the line table), so --source turns it on.
        "--import-sass", "yes" if import_sass or source else "no",
        # measure: the runner is launched directly by ncu; torch.compile's worker processes launch no kernels.
        "--target-processes", target_processes,
    ]
    if source:
        argv += ["--section", "SourceCounters", "--import-source", "yes"]
    if kernel_name:
        argv += ["--kernel-name", kernel_name if kernel_name.startswith(("regex:", "demangled:", "mangled:"))
                 else f"regex:{kernel_name}"]
    if launch_skip:
        argv += ["--launch-skip", str(launch_skip)]
    if launch_count is not None:
        argv += ["--launch-count", str(launch_count)]
    if not profile_from_start:
        argv += ["--profile-from-start", "off"]
    return [*argv, "--export", str(report), *app]


@dataclass
class NcuRun:
    returncode: int
    passes: int | None
    interrupted: bool
    no_kernels: bool
    tail: list[str]
    kernels: int = 0  # kernels ncu profiled ('==PROF== Profiling ...' lines)
    first_kernel_s: float | None = None  # seconds from ncu's start to its first profiled kernel


_PROFILING = re.compile(r'==PROF== Profiling "([^"]*)"')
_PASSES = re.compile(r"-\s+(\d+)\s+pass(?:es)?\b")


def run_ncu(argv: Sequence[str], log_path: Path, echo: Callable[[str], None] | None = None,
            verbose: bool = False, env: Mapping[str, str] | None = None,
            progress_every_s: float | None = None,
            on_start: Callable[[subprocess.Popen[str]], None] | None = None,
            describe: Callable[[int], str] | None = None) -> NcuRun:
    """Run ncu, teeing its output into log_path. The program's lines go to `echo`, ==PROF== lines only if
    verbose; with progress_every_s, a line 'ncu: N kernels profiled (last: NAME)' at most that often
    (`describe(N)` replaces its first part: profile's launches measured and repeats skipped, an ETA).
    `on_start` gets the ncu process (measure --gpus runs several from threads and may have to kill them).

    Ctrl-C: the runner stops after its current config and ncu writes the report of what it profiled;
    we wait for that (a second Ctrl-C kills ncu) and return with interrupted=True.
    """
    echo = echo or say
    passes: int | None = None
    tail: list[str] = []
    perm = no_kernels = interrupted = False
    kernels, last_note = 0, time.monotonic()
    started, first_kernel_s = last_note, None
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1, env=None if env is None else dict(env))
    except OSError as err:
        raise NcuError(f"cannot start {argv[0]}: {err}") from None
    if on_start is not None:
        on_start(proc)
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
                        profiling = _PROFILING.search(line)
                        if profiling:
                            kernels += 1
                            if first_kernel_s is None:  # the program's own start-up ends about here
                                first_kernel_s = round(time.monotonic() - started, 3)
                        if verbose:
                            echo(line)
                        elif profiling and progress_every_s is not None \
                                and time.monotonic() - last_note >= progress_every_s:
                            last_note = time.monotonic()
                            done = describe(kernels) if describe else f"ncu: {kernels} kernels profiled"
                            echo(f"{done} (last: {profiling.group(1)[:80]})")
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
    return NcuRun(proc.returncode, passes, interrupted, no_kernels, tail, kernels, first_kernel_s)
