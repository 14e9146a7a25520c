"""Stand-ins for ncu: executable Python scripts that answer as ncu would, so measuring runs on a CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memtraffic.collect import profile as prof
from memtraffic.ncu import command as ncu_mod
from memtraffic.ncu import session as session_mod


def fake_ncu(path: Path, body: str) -> Path:
    """An executable Python script standing in for ncu."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    path.chmod(0o755)
    return path


VERSION_2025 = 'print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1)")'


# A stand-in for ncu that runs the application it is given (the runner, on the CPU) but profiles
# nothing and writes no report: the whole measure stage up to "no kernel profiled" runs on a laptop.
RUNNER_PASS_THROUGH = """
import os, subprocess
argv = sys.argv[1:]
if argv == ["--version"]:
    print("Version 2025.3.1.0")
    sys.exit(0)
app = argv[argv.index("--export") + 2:]
print("==PROF== Connected to process 1")
sys.exit(subprocess.call(app))
"""


# A stand-in for ncu that runs the runner (on the CPU) and writes a report of the configs it finished: a
# placeholder .ncu-rep with its kernel table beside it (memtraffic.ncu.kernel_table's format, which every
# reader takes instead of the report), one launch a config, with the counters that the JSON file
# $MT_COUNTERS gives its range (alias -> value), only those of the --metrics asked for. Its passes are 1 for
# the one-pass bytes set, else 6, and a launch's time is its counter times its passes: a row tells which
# pass it came from. Each call's argv is appended to $MT_CALLS (JSON lines); a call whose --metrics holds
# $MT_FAIL fails before running anything; a range named in $MT_DROP (with its pass count, 'RANGE@6') is left
# out of the report, as a report cut short would.
REPORTING = """
import json, os, subprocess
from pathlib import Path
from memtraffic.ncu import kernel_table as kt
from memtraffic.ncu.command import resolve_metrics
from memtraffic.ncu.metrics import LAUNCH_STATS
argv = sys.argv[1:]
if argv == ["--version"]:
    print("Version 2025.3.1.0")
    sys.exit(0)
with open(os.environ["MT_CALLS"], "a") as f:
    f.write(json.dumps(sys.argv) + "\\n")
names = argv[argv.index("--metrics") + 1].split(",")
if os.environ.get("MT_FAIL") in names:
    print("==ERROR== the stand-in refuses these metrics")
    sys.exit(1)
report = Path(argv[argv.index("--export") + 1])
app = argv[argv.index("--export") + 2:]
plan_path = Path(app[3])
own = json.loads(plan_path.read_text()).get("status_file") if plan_path.exists() else None
status = plan_path.parent / (own or "status.jsonl")
status = Path(app[app.index("--status") + 1]) if "--status" in app else status
before = status.read_text().count("\\n") if status.exists() else 0
print("==PROF== Connected to process 1")
code = subprocess.call(app)
lines = status.read_text().splitlines()[before:] if status.exists() else []
done = [json.loads(line)["range"] for line in lines if json.loads(line).get("status") == "ok"]
passes = 1 if set(names) <= set(resolve_metrics("bytes")) else 6
print(f"==PROF== Profiling - 0: 0%....50%....100% - {passes} passes")
counters = json.loads(Path(os.environ["MT_COUNTERS"]).read_text())
done = [r for r in done if f"{r}@{passes}" not in os.environ.get("MT_DROP", "").split(",")]
if done:
    report.write_text(json.dumps({"argv": argv, "ranges": done}))
    asked = [a for a in {a for r in done for a in counters[r]}
             if set(resolve_metrics(a)) <= set(names)]
    columns = {"launch": list(range(len(done))), "range": done, "nvtx": done,
               "kernel": ["k_" + r.split("|")[1] for r in done], "grid_size": [1] * len(done),
               "block_size": [32] * len(done), "device": ["Fake GPU"] * len(done),
               "passes": [passes] * len(done), **{s: [None] * len(done) for s in LAUNCH_STATS}}
    columns["kernel_full"] = columns["kernel"]
    for a in asked:
        columns[a] = [counters[r].get(a) * (passes if a == "time" else 1) for r in done]
    kt.keep_beside(report, "kernels", {"format": kt.TABLE_FORMAT, "report_sha256": kt.file_digest(report),
                                       "version": kt._kernels_version(), "rows": len(done), "damaged": [],
                                       "columns": columns, "lines": [], "launches": len(done)})
sys.exit(code)
"""


# The same for `profile`: it runs the program and says that no kernel was profiled.
PASS_THROUGH = """
import os, subprocess
argv = sys.argv[1:]
if argv == ["--version"]:
    print("Version 2025.3.1.0")
    sys.exit(0)
app = argv[argv.index("--export") + 2:]
print("==PROF== Connected to process 1")
code = subprocess.call(app)
print("==WARNING== No kernels were profiled.")
sys.exit(code)
"""


# The same for `profile --replay range`: it runs the program, then writes a report of one range-replayed
# result per range the program traced (its kernel named "(range replay)", its time ncu's range duration:
# 200 us), as ncu's range replay does (reports/h100/range_replay_adam/range).
RANGE_REPORTING = """
import json, os, subprocess
from pathlib import Path
from memtraffic.ncu import kernel_table as kt
from memtraffic.ncu.metrics import LAUNCH_STATS
argv = sys.argv[1:]
if argv == ["--version"]:
    print("Version 2025.3.1.0")
    sys.exit(0)
report = Path(argv[argv.index("--export") + 1])
app = argv[argv.index("--export") + 2:]
print("==PROF== Connected to process 1")
code = subprocess.call(app)
trace = Path(os.environ["MEMTRAFFIC_TRACE"])
ranges = [json.loads(line)["range"] for line in trace.read_text().splitlines()] if trace.exists() else []
for r in ranges:
    print(f'==PROF== Profiling "range" - 0: 0%....50%....100% - 3 passes')
report.write_text(json.dumps(ranges))
n = len(ranges)
columns = {"launch": list(range(n)), "range": ranges, "nvtx": ranges, "kernel": ["(range replay)"] * n,
           "kernel_full": ["(range replay)"] * n, "grid_size": [None] * n, "block_size": [None] * n,
           "device": ["Fake GPU"] * n, "passes": [3] * n, **{s: [None] * n for s in LAUNCH_STATS},
           "time": [200000.0] * n, "l1_ld_bytes": [8192.0] * n, "l1_st_bytes": [8192.0] * n}
kt.keep_beside(report, "kernels", {"format": kt.TABLE_FORMAT, "report_sha256": kt.file_digest(report),
                                   "version": kt._kernels_version(), "rows": n, "damaged": [],
                                   "columns": columns, "lines": [], "launches": n})
sys.exit(code)
"""


REGION_PROGRAM = """
import sys
import numpy as np
import memtraffic
x = np.zeros((64, 32), dtype=np.float32)
with memtraffic.region("step", inputs=[x], outputs=[x]):
    pass
print("program ran")
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path / "ncu", PASS_THROUGH)
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(ncu))
    monkeypatch.setattr(prof, "gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(session_mod, "query_metric_names", lambda ncu, key=None: ncu_mod.parse_query_metrics(
        "\n".join(ncu_mod.base_name(n) for n in ncu_mod.resolve_metrics("traffic"))))
    program = tmp_path / "prog.py"
    program.write_text(REGION_PROGRAM)
    return program
