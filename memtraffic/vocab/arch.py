"""What each NVIDIA chip is: architecture, compute capability, the memory features memtraffic cares about,
and which GPUs carry it. The one home of these facts; the metric table, the diagnosis and the roofs ask
here. The GPU at hand (its compute capability, for the variants' checks) is host.gpu's to ask.

Chips are the names of `ncu --list-chips` (Nsight Compute 2025.3.1 knows 28). A GPU's name as torch or
nvidia-smi prints it ("NVIDIA GeForce RTX 3080 Ti", "Tesla T4") maps to its chip by NVIDIA's public
naming; a compute capability maps to a chip only where it names one chip family whose ncu metric lists
are the same.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

LDGSTS_CC = (8, 0)  # cp.async (SASS LDGSTS), global -> shared without registers: Ampere on
TMA_CC = (9, 0)  # the Tensor Memory Accelerator (bulk async copies that bypass the LSU): Hopper on


@dataclass(frozen=True)
class Chip:
    name: str
    arch: str
    cc: tuple[int, int]
    gpus: str
    unified_memory: bool = False  # shares the CPU's memory: ncu has no DRAM byte counter there
    tensor_cores: bool = True

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    @property
    def has_ldgsts(self) -> bool:
        return self.cc >= LDGSTS_CC

    @property
    def has_tma(self) -> bool:
        return self.cc >= TMA_CC


_TURING = "Turing"
_AMPERE = "Ampere"
_ADA = "Ada"
_HOPPER = "Hopper"
_BLACKWELL = "Blackwell"

CHIPS: dict[str, Chip] = {c.name: c for c in [
    Chip("tu102", _TURING, (7, 5), "RTX 2080 Ti, TITAN RTX, Quadro RTX 6000/8000"),
    Chip("tu104", _TURING, (7, 5), "T4, RTX 2080/2070 SUPER"),
    Chip("tu106", _TURING, (7, 5), "RTX 2070, RTX 2060"),
    Chip("tu116", _TURING, (7, 5), "GTX 1660", tensor_cores=False),
    Chip("tu117", _TURING, (7, 5), "GTX 1650", tensor_cores=False),
    Chip("ga100", _AMPERE, (8, 0), "A100, A30"),
    Chip("ga102", _AMPERE, (8, 6), "RTX 3090/3080 Ti/3080, A10, A40, RTX A6000"),
    Chip("ga103", _AMPERE, (8, 6), "RTX 3060 Ti (some), laptop RTX 3080 Ti"),
    Chip("ga104", _AMPERE, (8, 6), "RTX 3070/3060 Ti"),
    Chip("ga106", _AMPERE, (8, 6), "RTX 3060"),
    Chip("ga107", _AMPERE, (8, 6), "RTX 3050, A2, A16"),
    Chip("ga10b", _AMPERE, (8, 7), "Jetson Orin", unified_memory=True),
    Chip("ad102", _ADA, (8, 9), "RTX 4090, L40, L40S, RTX 6000 Ada"),
    Chip("ad103", _ADA, (8, 9), "RTX 4080"),
    Chip("ad104", _ADA, (8, 9), "RTX 4070 Ti/4070, L4"),
    Chip("ad106", _ADA, (8, 9), "RTX 4060 Ti"),
    Chip("ad107", _ADA, (8, 9), "RTX 4060"),
    Chip("gh100", _HOPPER, (9, 0), "H100, H200, GH200"),
    Chip("gb100", _BLACKWELL, (10, 0), "B200, GB200"),
    Chip("gb102", _BLACKWELL, (10, 0), "datacenter Blackwell (no GPU name mapped to it)"),
    Chip("gb110", _BLACKWELL, (10, 3), "B300, GB300"),
    Chip("gb10b", _BLACKWELL, (11, 0), "Jetson Thor", unified_memory=True),
    Chip("gb20b", _BLACKWELL, (12, 1), "DGX Spark (GB10)", unified_memory=True),
    Chip("gb202", _BLACKWELL, (12, 0), "RTX 5090, RTX PRO 6000 Blackwell"),
    Chip("gb203", _BLACKWELL, (12, 0), "RTX 5080/5070 Ti"),
    Chip("gb205", _BLACKWELL, (12, 0), "RTX 5070"),
    Chip("gb206", _BLACKWELL, (12, 0), "RTX 5060 Ti/5060"),
    Chip("gb207", _BLACKWELL, (12, 0), "RTX 5050"),
]}

# (pattern searched in the GPU's name, chip): the first match wins, so specific names come first.
_NAME_PATTERNS: list[tuple[str, str]] = [
    (r"\bGB10\b|DGX Spark", "gb20b"),
    (r"\bThor\b", "gb10b"),
    (r"\bOrin\b", "ga10b"),
    (r"\bG?B300\b", "gb110"),
    (r"\bG?B[12]00\b", "gb100"),
    (r"\bGH200\b|\bH100\b|\bH200\b|\bH800\b|\bH20\b", "gh100"),
    (r"RTX PRO 6000 Blackwell|RTX 5090", "gb202"),
    (r"RTX 5080|RTX 5070 Ti", "gb203"),
    (r"RTX 5070", "gb205"),
    (r"RTX 5060", "gb206"),
    (r"RTX 5050", "gb207"),
    (r"RTX 4090|\bL40S?\b|RTX 6000 Ada", "ad102"),
    (r"RTX 4080", "ad103"),
    (r"RTX 4070|\bL4\b", "ad104"),
    (r"RTX 4060 Ti", "ad106"),
    (r"RTX 4060", "ad107"),
    (r"\bA100\b|\bA30\b|\bA800\b", "ga100"),
    (r"RTX 3090|RTX 3080|\bA10G?\b|\bA40\b|RTX A6000|RTX A5000", "ga102"),
    (r"RTX 3070|RTX 3060 Ti", "ga104"),
    (r"RTX 3060", "ga106"),
    (r"RTX 3050|\bA2\b|\bA16\b", "ga107"),
    (r"RTX 2080 Ti|TITAN RTX|Quadro RTX [68]000", "tu102"),
    (r"\bT4\b|RTX 2080|RTX 2070 SUPER", "tu104"),
    (r"RTX 2070|RTX 2060", "tu106"),
    (r"GTX 1660", "tu116"),
    (r"GTX 1650", "tu117"),
]

@functools.lru_cache(maxsize=64)  # asked once per analyzed row
def chip_for_gpu(name: str | None) -> Chip | None:
    """The chip of a GPU name as torch/nvidia-smi/ncu print it ('NVIDIA A100-SXM4-80GB' -> ga100);
    None when the name is unknown."""
    if not name:
        return None
    for pattern, chip in _NAME_PATTERNS:
        if re.search(pattern, name, re.IGNORECASE):
            return CHIPS[chip]
    return None

