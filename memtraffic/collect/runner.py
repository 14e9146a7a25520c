"""The process that ncu profiles: `python -m memtraffic.collect.runner PLAN.json [--status FILE]`.

For each config of the plan: build the inputs (seeded), call the variant once outside any range
(Triton JIT, autotuning and torch.compile happen there), check that result against the op's float64
reference, then make the one measured call inside its own NVTX push/pop range `mt|...`, which is
all that ncu's `--nvtx-include` lets it profile.

Each config's outcome is appended to a JSON-lines status file ('start', then 'ok' or 'failed' with
the error, each stamped with its Unix time "t"), so a config that crashes the process is known and a
fresh process skips every config that already has a record. A first record without an id ("event":
"ready") says when the process started and when it had read the plan: with the attempt's
t_start/t_end in run.json, where a GPU's fixed time went. A failing variant is recorded and the runner
goes on; after a CUDA error (the context is unusable) it exits with code 3 so that collect starts a
fresh process for the rest. With `--claims DIR --gpu N` (measure --gpus) the runners of several GPUs
share one plan: each runs only the configs whose claim file in DIR it creates first, so a GPU that
finishes early takes more configs.

Without CUDA it runs on the CPU (Triton in its interpreter) and skips the NVTX calls: useful to test
a plan without a GPU or ncu.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import torch

from memtraffic.collect.variants import load_variants
from memtraffic.runfolder.folder import StatusRecord, append_status, claim, read_status
from memtraffic.runfolder.records import Config, Plan
from memtraffic.vocab.errors import say
from memtraffic.vocab.files import read_json
from memtraffic.vocab.ops import error_limit, format_shape
from memtraffic.vocab.variant import Variant

EXIT_CUDA_ERROR = 3
EXIT_INTERRUPTED = 130
EXIT_NO_PLAN = 4


class CheckFailed(Exception):
    """The variant's output does not match the reference."""


def _device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


@contextlib.contextmanager
def nvtx_range(name: str, enabled: bool) -> Iterator[None]:
    """An NVTX push/pop range on CUDA; nothing on the CPU (torch.cuda.nvtx needs CUDA)."""
    if enabled:
        torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        if enabled:
            torch.cuda.nvtx.range_pop()


def check_output(out: object, ref: torch.Tensor, dtype: str) -> float:
    """Max abs error of out against the reference; CheckFailed beyond vocab.ops.error_limit."""
    if not isinstance(out, torch.Tensor):
        raise CheckFailed(f"returned {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        raise CheckFailed(f"output shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    err = (out.double() - ref).abs().max().item()
    tol = error_limit(dtype, ref.abs().max().item())
    if not err <= tol:  # also catches NaN
        raise CheckFailed(f"wrong result: max abs error {err:.3g} > {tol:.3g} against the float64 reference")
    return err


def run_config(config: Config, device: torch.device, seed: int = 0,
               variants: dict[str, Variant] | None = None) -> tuple[float, dict[str, float]]:
    """Warm up, check, then make the measured call inside the config's NVTX range. Returns the max error
    and the seconds each phase took (inputs, warm-up, check, measured: under ncu the last holds its replay
    passes), which tell a slow sweep's own work from ncu's."""
    from memtraffic.vocab.ops import OPS, torch_dtype

    variants = load_variants() if variants is None else variants
    if config["variant"] not in variants:
        raise KeyError(f"unknown variant {config['variant']!r}")
    variant = variants[config["variant"]]
    if variant.needs_cuda and device.type != "cuda":
        raise RuntimeError(f"{variant.name} needs CUDA and this process has none")
    op = OPS[variant.op]
    shape = tuple(config["shape"])
    dtype = torch_dtype(config["dtype"])
    params = dict(config.get("params", {}))
    phases: dict[str, float] = {}
    t0 = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t0
        _sync(device)
        now = time.perf_counter()
        phases[name] = round(now - t0, 4)
        t0 = now

    inputs = op.make_inputs(shape, dtype, device, seed)
    lap("inputs")
    out = variant.run(*inputs, **params)  # warm-up: JIT, autotune, compile - outside the profiled range
    lap("warmup")
    err = check_output(out, op.reference(*inputs), config["dtype"])
    del out
    lap("check")
    with nvtx_range(config["range"], enabled=device.type == "cuda"):
        out = variant.run(*inputs, **params)
    lap("measured")
    del out, inputs
    return err, phases


def _is_cuda_error(err: BaseException) -> bool:
    return type(err).__name__ == "AcceleratorError" or "CUDA error" in str(err)


def _process_started() -> float | None:
    """Unix time this process started (Linux /proc), None where that cannot be read."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def _stamp(record: StatusRecord) -> StatusRecord:
    return {**record, "t": round(time.time(), 3)}


def _label(config: Config) -> str:
    explicit = {} if "kind" in config else config["explicit_params"]
    params = ",".join(f"{k}={v}" for k, v in explicit.items())
    shape = format_shape(config["shape"])
    return " ".join(p for p in (config["variant"], shape, config["dtype"], params) if p)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def run_plan(plan: Plan, status_path: Path, device: torch.device | None = None,
             log: TextIO | None = None, claims: tuple[Path, int] | None = None) -> int:
    """Run every config of the plan that has no record in the status file yet, in plan order. With
    `claims` (folder, GPU index: measure --gpus), only those this process claims first: the runners of
    the GPUs share the plan, each taking the next config nobody has taken. Returns the exit code."""
    device = device or _device()
    log = log or sys.stderr
    done = read_status(status_path)
    started = _process_started()
    append_status(status_path, _stamp({"event": "ready", "pid": os.getpid(),
                                       "process_started": round(started, 3) if started else None}))
    configs = plan["configs"]
    try:  # the suite and the user's variant files; a file that fails to load fails its configs, not the run
        variants = load_variants(plan.get("variant_files", []),
                                 on_problem=lambda line: print(f"warning: {line}", file=log, flush=True))
    except Exception as exc:
        print(f"cannot load variants: {_one_line(exc)}; running the shipped suite's configs only",
              file=log, flush=True)
        variants = load_variants()
    for k, config in enumerate(configs, 1):
        if config["id"] in done or (claims is not None and not claim(claims[0], config["id"], claims[1])):
            continue
        append_status(status_path, _stamp({"id": config["id"], "range": config["range"], "status": "start"}))
        t0 = time.perf_counter()
        try:
            err, phases = run_config(config, device, plan.get("seed", 0), variants)
            if device.type == "cuda":  # the next config starts from an empty allocator cache; timed,
                freed = time.perf_counter()  # since ncu intercepts each cudaFree
                torch.cuda.empty_cache()
                phases["free"] = round(time.perf_counter() - freed, 4)
        except KeyboardInterrupt:
            append_status(status_path, _stamp({"id": config["id"], "range": config["range"],
                                               "status": "not run", "error": "interrupted"}))
            print(f"[{k}/{len(configs)}] {_label(config)}: interrupted", file=log, flush=True)
            return EXIT_INTERRUPTED
        except Exception as exc:  # one variant's failure must not lose the others
            append_status(status_path, _stamp({"id": config["id"], "range": config["range"],
                                               "status": "failed", "error": _one_line(exc)}))
            print(f"[{k}/{len(configs)}] {_label(config)}: FAILED {_one_line(exc)}", file=log, flush=True)
            if device.type == "cuda":
                if _is_cuda_error(exc):
                    print("CUDA error: this process cannot go on; the remaining configs need a fresh one",
                          file=log, flush=True)
                    return EXIT_CUDA_ERROR
                torch.cuda.empty_cache()
            continue
        seconds = time.perf_counter() - t0
        append_status(status_path, _stamp({"id": config["id"], "range": config["range"], "status": "ok",
                                           "max_err": err, "seconds": round(seconds, 3), "phases": phases}))
        print(f"[{k}/{len(configs)}] {_label(config)}: ok (max err {err:.2g}, {seconds:.1f} s) "
              f"in range {config['range']}", file=log, flush=True)
    return 0


def wait_for_plan(path: Path, timeout_s: float = 600.0) -> bool:
    """Wait until measure has written the plan (True) or given up building it (False: plan.abort)."""
    abort = path.with_suffix(".abort")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if abort.exists():
            return False
        time.sleep(0.02)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memtraffic.collect.runner",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("plan", type=Path, help="plan.json written by `memtraffic measure`")
    parser.add_argument("--status", type=Path, help="JSON-lines status file (default: the plan's, beside it)")
    parser.add_argument("--claims", type=Path, help="measure --gpus: take only the configs this process "
                        "claims first in this folder (each GPU's runner claims the next config nobody has)")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU index its claims record (with --claims)")
    parser.add_argument("--wait-for-plan", action="store_true",
                        help="measure is still writing the plan: import torch and the kernels meanwhile")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        # Triton's interpreter must be chosen before any @triton.jit runs, i.e. before kernels/ is imported.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if args.wait_for_plan:
        load_variants()  # the shipped suite's imports (triton, the kernels) overlap the plan's building
        if not wait_for_plan(args.plan):
            say("measure gave up building the plan: nothing to run")
            return EXIT_NO_PLAN
    plan = read_json(args.plan, "measure wrote a damaged plan")
    status = args.status or args.plan.parent / plan.get("status_file", "status.jsonl")
    return run_plan(plan, status, claims=(args.claims, args.gpu) if args.claims else None)


if __name__ == "__main__":
    sys.exit(main())
