"""memtraffic: where did my bytes go, and how far am I from the minimum?

The public API, for notebooks and scripts (the same numbers as the CLI; see memtraffic.api):

    run = memtraffic.load_run("reports/h100/seed_1048576x2_fp32")  # or any .ncu-rep
    table = memtraffic.analyze(run)                      # `memtraffic analyze`; memtraffic.records(table)
    memtraffic.per_op(run), memtraffic.lines(run)        # --group-by op; `memtraffic lines`
    memtraffic.roofline(run).show(); memtraffic.traffic(run)
    with memtraffic.ops() as records: ...                # trace aten ops (imports torch)
    with memtraffic.region("attn", inputs=[q, k, v], outputs=[o]): ...  # any framework's arrays

Every name loads on first use, so `import memtraffic` imports neither torch, pandas nor plotly.
"""

from typing import Any

from memtraffic.core.version import __version__

# name -> module that defines it. The region module is not region.py: importing a submodule named
# `region` would rebind memtraffic.region from the function to the module.
_LAZY = {
    **dict.fromkeys(("Run", "load_run", "analyze", "per_op", "lines", "records", "roofline", "traffic",
                     "run_measure", "run_profile"), "memtraffic.api"),
    "Variant": "memtraffic.core.variant",
    "ops": "memtraffic.measure.tracer",
    "region": "memtraffic.measure.regions",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        try:
            module = importlib.import_module(_LAZY[name])
        except ModuleNotFoundError as err:  # e.g. memtraffic.ops without the [measure] extra's torch
            from memtraffic.core.extras import missing_extra

            raise missing_extra(err, f"memtraffic.{name}") or err from None
        return getattr(module, name)
    raise AttributeError(f"module 'memtraffic' has no attribute {name!r}")
