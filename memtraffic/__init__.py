"""memtraffic: where did my bytes go, and how far am I from the minimum?

The public API, for notebooks and scripts (the same numbers as the CLI; see memtraffic.api):

    run = memtraffic.load_run("reports/h100/seed_1048576x2_fp32")  # or any .ncu-rep
    table = memtraffic.analyze(run)                      # `memtraffic analyze`; memtraffic.records(table)
    memtraffic.gaps(table)                               # what the run lacks of its plan ([] if whole)
    memtraffic.per_op(run), memtraffic.lines(run)        # --group-by op; `memtraffic lines`
    memtraffic.floor(run)                                # `memtraffic floor`: time against the floor
    memtraffic.diff(before, after)                       # `memtraffic diff`: .rows, .fusion
    memtraffic.roofline(run).show(); memtraffic.traffic(run)
    with memtraffic.ops() as records: ...                # trace aten ops (imports torch)
    with memtraffic.region("attn", inputs=[q, k, v], outputs=[o]): ...  # any framework's arrays
    memtraffic.minimum("softmax", "1048576x2", "fp32"); memtraffic.roofs("reports/roofs/X.json")
    memtraffic.list_variants("4096x4096"); memtraffic.predicted("softmax_naive", "1048576x2")
    memtraffic.measure_variants("softmax_tiled", shape="4096x4096")  # a GPU and ncu; %%memtraffic: Jupyter
    memtraffic.show(table_or_figure_or_markdown)          # Jupyter, GitHub, HTML export and plain Python

Every name loads on first use, so `import memtraffic` imports neither torch, pandas nor plotly.
"""

from typing import Any

from memtraffic.vocab.version import __version__

# name -> module that defines it. No public name is also a submodule's (region.py, measure/): importing
# that submodule would rebind memtraffic.NAME from the function to the module.
_LAZY = {
    **dict.fromkeys(("Run", "load_run", "analyze", "gaps", "per_op", "floor", "diff", "lines", "records",
                     "roofline",
                     "traffic", "minimum", "roofs", "ceilings", "list_variants", "load_variants", "predicted",
                     "check_variant",
                     "measure_variants", "run_measure", "run_profile"), "memtraffic.api"),
    **dict.fromkeys(("fmt_bytes", "fmt_time", "fmt_rate"), "memtraffic.vocab.units"),
    **dict.fromkeys(("Traffic", "element_size"), "memtraffic.vocab.ops"),
    "Finding": "memtraffic.vocab.finding",  # findings: records
    **dict.fromkeys(("say", "explain"), "memtraffic.analysis.findings"),  # and their words
    "Variant": "memtraffic.vocab.variant",
    "MemtrafficError": "memtraffic.vocab.errors",  # every error memtraffic raises on purpose
    "ops": "memtraffic.inprogram.tracer",
    "region": "memtraffic.inprogram.regions",
    "show": "memtraffic.views.notebook",
    "load_ipython_extension": "memtraffic.magic",  # %load_ext memtraffic: the %%memtraffic cell magic
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        try:
            module = importlib.import_module(_LAZY[name])
        except ModuleNotFoundError as err:  # e.g. memtraffic.ops without the [measure] extra's torch
            from memtraffic.vocab.extras import missing_extra

            raise missing_extra(err, f"memtraffic.{name}") or err from None
        return getattr(module, name)
    raise AttributeError(f"module 'memtraffic' has no attribute {name!r}")
