"""softmax_split's groups kernel (lag=0) as a variant of its own, so that `memtraffic bench` (which runs
each variant at its defaults) times it beside the default lag kernel:

    memtraffic bench softmax_split softmax_split_groups --variants scripts/variants_split_groups.py \\
        --shape 16384x131072 --shape 8192x32768

(Until commit 79d82fe the groups kernel was the default and this file defined softmax_split_lag;
reports/bench/2026-11-23-h100-lag-probe/call1-lag-round was timed that way.)
"""

import dataclasses

from memtraffic.kernels.softmax_split import SOFTMAX_SPLIT

VARIANTS = {
    "softmax_split_groups": dataclasses.replace(
        SOFTMAX_SPLIT,
        name="softmax_split_groups",
        description="softmax_split with lag=0: fixed groups of programs a row, waiting on a counter",
        params={**SOFTMAX_SPLIT.params, "lag": 0},
    ),
}
