"""Issue 41's table: profiling cost against the program alone, and agreement with an every-launch profile.

    python scripts/speed_summary.py FOLDER [--json OUT.json | --update SUMMARY.json]

FOLDER is what scripts/gpu_speed.sh leaves: timings.txt (each command's wall time, "NAME rc=N
command_ms=MS") and runs/ with, per program P, default_P (`profile --torch-ops` with every default, full
size), sampled_P and every_P (the defaults, and the defaults with --every-launch, both at --small), and
where measured full_P (--metrics traffic, full size). One record per program:

- program, command (the full-size program), bare_s (it alone), profile_s (memtraffic's defaults: the
  first look, the bytes set) and profile_over_bare, replay (run.json's mode and why), measured_units
  (what the defaults measured: kernels under kernel replay, op ranges under range replay),
  first_kernel_s (the program's start-up under ncu, before its first measured unit);
- ncu_alone_s (the program under ncu measuring nothing) and full_set_s (the six-pass traffic set), where
  measured;
- every_launch_s, kernels_every, every_launch_size and every_launch_replay (the every-launch run at
  --small), op_types (compared between it and the defaults at --small) and op_types_off (those whose L1
  load bytes differ beyond 1% or DRAM read bytes beyond 3% and 4 KiB a kernel launch,
  scripts/launches_summary.py's bar; op_types_off_l1: on L1 loads alone) with ops_off naming them;
- exits: the exit code of each command that did not end with 0 (124: cut by gpu_speed.sh's T_CMD).
Seconds are whole commands (memtraffic's start, ncu, the program, the analysis), as a user waits for them.
--update rewrites an existing summary with FOLDER's records in place of those of the same programs (a
program measured again, whole, on one machine); the other programs' records are kept as they are.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launches_summary import pair  # noqa: E402

from memtraffic.vocab.errors import MemtrafficError  # noqa: E402

PROGRAMS = ("gpt2", "vision", "mlp_adam", "llama_decode", "compiled")
SMALL = {"gpt2": "4 layers instead of 12", "vision": "batch 8 of 112x112 instead of 32 of 224x224",
         "mlp_adam": "16 layers and 2 steps instead of 48 and 4", "llama_decode": "8 tokens instead of 32",
         "compiled": "width 1024 instead of 2048"}
_LINE = re.compile(r"^(\S+) rc=(-?\d+) command_ms=(\d+)")


def timings(folder: Path) -> dict[str, tuple[int, float]]:
    """timings.txt -> {name: (exit code, seconds)}; the last line of a name wins."""
    found: dict[str, tuple[int, float]] = {}
    path = folder / "timings.txt"
    for line in path.read_text().splitlines() if path.is_file() else []:
        m = _LINE.match(line)
        if m:
            found[m.group(1)] = (int(m.group(2)), int(m.group(3)) / 1000)
    return found


def _seconds(t: dict[str, tuple[int, float]], name: str) -> float | None:
    rc, s = t.get(name, (1, 0.0))
    return round(s, 2) if rc == 0 else None


def _run(folder: Path) -> dict[str, Any]:
    path = folder / "run.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def record(folder: Path, program: str, t: dict[str, tuple[int, float]]) -> dict[str, Any]:
    runs = folder / "runs"
    default = _run(runs / f"default_{program}")
    every = _run(runs / f"every_{program}")
    names = [f"{step}_{program}" for step in ("bare", "default", "idle", "full", "sampled", "every")]
    rec: dict[str, Any] = {
        "program": program,
        "command": shlex.join(["python", "scripts/speed_programs.py", program]),
        "bare_s": _seconds(t, f"bare_{program}"),
        "profile_s": _seconds(t, f"default_{program}"),
        "profile_over_bare": None,
        "replay": default.get("replay"),
        "measured_units": default.get("kernels_profiled"),
        "first_kernel_s": default.get("first_kernel_s"),
        "ncu_alone_s": _seconds(t, f"idle_{program}"),
        "full_set_s": _seconds(t, f"full_{program}"),
        "every_launch_s": _seconds(t, f"every_{program}"),
        "every_launch_size": f"--small: {SMALL[program]}",
        "every_launch_replay": (every.get("replay") or {}).get("mode"),
        "kernels_every": every.get("kernels_profiled"),
        "exits": {n: t[n][0] for n in names if n in t and t[n][0] != 0},
    }
    try:
        missing = [n for n in ("every", "sampled") if not (runs / f"{n}_{program}").is_dir()]
        if missing:
            raise MemtrafficError("not measured: no " + ", ".join(f"{n}_{program}" for n in missing))
        p = pair(runs / f"every_{program}", runs / f"sampled_{program}")
        off_l1 = [o for o in p["ops_off"] if abs(o.get("l1_ld_rel") or 0) > 0.01 or "why" in o]
        rec.update(op_types=p["ops_compared"], op_types_off=len(p["ops_off"]), op_types_off_l1=len(off_l1),
                   ops_off=p["ops_off"])
    except (MemtrafficError, OSError, KeyError) as err:  # one program's failure loses only its comparison
        rec.update(op_types=None, op_types_off=None, op_types_off_l1=None, ops_off=[],
                   compare_error=str(err).replace(str(folder), "FOLDER"))
    if rec["bare_s"] and rec["profile_s"] is not None:
        rec["profile_over_bare"] = round(rec["profile_s"] / rec["bare_s"], 3)
    return rec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--update", type=Path, help="a summary.json whose records of FOLDER's programs are "
                        "replaced by FOLDER's")
    args = parser.parse_args()
    t = timings(args.folder)
    records = [record(args.folder, p, t) for p in PROGRAMS if f"bare_{p}" in t]
    for r in records:
        print(f"{r['program']}: bare {r['bare_s']} s, defaults {r['profile_s']} s "
              f"({(r['replay'] or {}).get('mode')} replay) = {r['profile_over_bare']}x; "
              f"{r['measured_units']} units measured; every launch ({r['every_launch_size']}) "
              f"{r['every_launch_s']} s, {r['kernels_every']} kernels; {r['op_types']} op types, "
              f"{r['op_types_off']} off")
        for o in r["ops_off"]:
            print(f"  off: {o}")
    if args.json:
        args.json.write_text(json.dumps(records, indent=1) + "\n")
    if args.update:
        new = {r["program"]: r for r in records}
        kept = json.loads(args.update.read_text())
        merged = [new.pop(r["program"], r) for r in kept] + list(new.values())
        args.update.write_text(json.dumps(merged, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
