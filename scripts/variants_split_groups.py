"""softmax_split with lag=1 as a variant of its own, so that `memtraffic bench` (which runs each variant
at its defaults) times the lag kernel beside the shipped groups kernel, until a bench shows which one
should be the default:

    memtraffic bench softmax_split softmax_split_lag --variants scripts/variants_split_lag.py \\
        --shape 16384x131072 --shape 8192x32768
"""

import dataclasses

from memtraffic.kernels.softmax_split import SOFTMAX_SPLIT

VARIANTS = {
    "softmax_split_lag": dataclasses.replace(
        SOFTMAX_SPLIT,
        name="softmax_split_lag",
        description="softmax_split with lag=1: rows from a counter per part, one chunk behind (the next "
        "chunk is read before the wait)",
        params={**SOFTMAX_SPLIT.params, "lag": 1},
    ),
}
