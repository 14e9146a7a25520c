"""memtraffic: where did my bytes go, and how far am I from the minimum?

`memtraffic.ops()` (memtraffic.measure.tracer, imports torch) and `memtraffic.region()`
(memtraffic.measure.regions, torch-free) load on first use, so `import memtraffic` imports neither
torch nor any other framework.
"""

from typing import Any

from memtraffic.core.version import __version__  # noqa: F401 - the public name

# The region module is not region.py: importing a submodule named `region` would rebind
# memtraffic.region from the function to the module.
_LAZY = {"ops": "memtraffic.measure.tracer", "region": "memtraffic.measure.regions"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memtraffic' has no attribute {name!r}")
