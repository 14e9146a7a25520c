"""Started by `memtraffic ops` and `memtraffic profile --torch-ops`, first on PYTHONPATH: traces the
program's aten ops (memtraffic.measure.tracer) from the moment it imports torch, without editing the program.

It runs any other sitecustomize the environment has, and takes MEMTRAFFIC_TORCH_OPS out of the
environment so that processes the program starts are not traced. The memtraffic package that
traces is the one holding this file, so `memtraffic` and the program agree on the trace format.
"""

import importlib.abc
import importlib.util
import os
import sys

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
        sys.modules["sitecustomize"] = ours


def _start_tracing(mode: str) -> None:
    package = os.path.dirname(_HERE)
    if "memtraffic" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "memtraffic", os.path.join(package, "__init__.py"), submodule_search_locations=[package])
        module = importlib.util.module_from_spec(spec)
        sys.modules["memtraffic"] = module
        spec.loader.exec_module(module)
    mark = os.environ.get("MEMTRAFFIC_TORCH_MARK")
    if mark:
        open(mark, "a").close()
    from memtraffic.measure.tracer import start

    start(mode)


class _WhenTorchImports(importlib.abc.MetaPathFinder):
    """Finds torch with the other finders, then starts tracing once torch's import has finished."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _start_tracing(self.mode)

        spec.loader.exec_module = exec_module
        return spec


def trace_from_now(mode: str = "1") -> None:
    """Trace the program's aten ops from the moment torch is imported (at once if it already is);
    `mode` (MEMTRAFFIC_TORCH_OPS) says which calls: memtraffic.core.tracefile.TRACE_FROM."""
    if "torch" in sys.modules:  # a .pth file (or the chained sitecustomize) imported it during site setup
        _start_tracing(mode)
    else:
        sys.meta_path.insert(0, _WhenTorchImports(mode))


if __name__ == "sitecustomize":  # launch.py loads this file under another name for its functions only
    _chain()
    _mode = os.environ.pop("MEMTRAFFIC_TORCH_OPS", None)
    if _mode in ("1", "forward", "window"):
        trace_from_now(_mode)
