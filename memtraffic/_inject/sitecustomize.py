"""Started by `memtraffic ops` and `memtraffic profile`, first on PYTHONPATH: from the moment the program
imports torch, traces its aten ops (MEMTRAFFIC_TORCH_OPS: memtraffic.inprogram.tracer), gives each Triton
launch a range (MEMTRAFFIC_TRITON=1: memtraffic.inprogram.triton_launches) and times its kernels
(MEMTRAFFIC_TIMINGS=FILE: memtraffic.inprogram.kernel_timer), without editing the program.

It runs any other sitecustomize the environment has, and takes those variables out of the
environment so that processes the program starts are not traced. The memtraffic package that
traces is the one holding this file, so `memtraffic` and the program agree on the trace format.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import time
import types
from collections.abc import Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """Import the sitecustomize this folder hides, if there is one."""
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    try:
        import sitecustomize  # noqa: F401 - the next one on the path
    except ImportError as err:
        if err.name != "sitecustomize":
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours


def stamp(event: str) -> None:
    """Append the wall time of a start-up event to $MEMTRAFFIC_STARTUP (memtraffic.runfolder.trace
    .read_startup keeps each event's first time: processes the program starts stamp later)."""
    path = os.environ.get("MEMTRAFFIC_STARTUP")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({event: time.time()}) + "\n")


def _start_tracing(mode: str | None, triton: bool = False, timings: str | None = None) -> None:
    stamp("torch_imported")
    package = os.path.dirname(_HERE)
    if "memtraffic" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "memtraffic", os.path.join(package, "__init__.py"), submodule_search_locations=[package])
        assert spec is not None and spec.loader is not None  # our own package's __init__.py
        module = importlib.util.module_from_spec(spec)
        sys.modules["memtraffic"] = module
        spec.loader.exec_module(module)
    mark = os.environ.get("MEMTRAFFIC_TORCH_MARK")
    if mark:
        open(mark, "a").close()
    if timings:  # first: the ranges the others push are mirrored into the profiler's trace
        from memtraffic.inprogram.kernel_timer import start as start_timing

        start_timing(timings)
    if mode:
        from memtraffic.inprogram.tracer import start

        start(mode)
    if triton:
        from memtraffic.inprogram.triton_launches import install

        install()
    stamp("tracer_ready")


class _WhenTorchImports(importlib.abc.MetaPathFinder):
    """Finds torch with the other finders, then starts tracing once torch's import has finished."""

    def __init__(self, mode: str | None, triton: bool = False, timings: str | None = None) -> None:
        self.mode, self.triton, self.timings = mode, triton, timings

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            load(module)
            _start_tracing(self.mode, self.triton, self.timings)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]  # this one spec's loader only
        return spec


def trace_from_now(mode: str | None = "1", triton: bool = False, timings: str | None = None) -> None:
    """Trace the program from the moment torch is imported (at once if it already is): its aten ops
    unless `mode` (MEMTRAFFIC_TORCH_OPS, memtraffic.runfolder.trace.TRACE_FROM) is None, its Triton
    launches with `triton`, its kernel times into the file `timings`."""
    if "torch" in sys.modules:  # a .pth file (or the chained sitecustomize) imported it during site setup
        _start_tracing(mode, triton, timings)
    else:
        sys.meta_path.insert(0, _WhenTorchImports(mode, triton, timings))


if __name__ == "sitecustomize":  # launch.py loads this file under another name for its functions only
    stamp("program_start")
    _chain()
    _mode = os.environ.pop("MEMTRAFFIC_TORCH_OPS", None)
    _triton = os.environ.pop("MEMTRAFFIC_TRITON", None) == "1"
    _timings = os.environ.pop("MEMTRAFFIC_TIMINGS", None)
    _mode = _mode if _mode in ("1", "forward", "window") else None
    if _mode or _triton or _timings:
        trace_from_now(_mode, _triton, _timings)
