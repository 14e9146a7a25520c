"""The two numbers the time diagnosis needs besides the roofs, measured alone (`memtraffic roofs
--refresh` measures them with every roof) and added to a committed roofs file.

  python scripts/time_probes.py measure OUT_DIR      (GPU + ncu) writes OUT_DIR/time_probes.json:
    launch_s        memtraffic.probes.roof_probes.ncu_launch_floor: ncu's time of a kernel with nothing to do;
    dram_latency_s  memtraffic.probes.roof_probes.measure_dram_latency: a pointer chase beyond L2.
  python scripts/time_probes.py merge PROBES.json [ROOFS.json]   adds both to the device's roofs
    (default reports/roofs/<device>.json) under 'measured', with their method and date, leaving the
    roofs as they were measured.

memtraffic.analysis.time_notes reads them from the roofs' 'measured' entries.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

KEYS = ("launch_s", "dram_latency_s")


def measure(out: Path) -> Path:
    import torch

    from memtraffic.host.machine import utc_now
    from memtraffic.probes.roof_probes import measure_dram_latency, ncu_launch_floor

    out.mkdir(parents=True, exist_ok=True)
    floor, floor_method = ncu_launch_floor()
    latency, latency_method = measure_dram_latency(torch)
    probes = {"device": torch.cuda.get_device_name(), "date": utc_now()[:10], "launch_s": floor,
              "dram_latency_s": latency,
              "method": {"launch_s": floor_method, "dram_latency_s": latency_method}}
    path = out / "time_probes.json"
    path.write_text(json.dumps(probes, indent=2) + "\n")
    print(json.dumps(probes, indent=2))
    return path


def merge(probes_path: Path, roofs_path: Path | None = None) -> Path:
    """The roofs file with the probes' numbers added under 'measured' (and their method, date)."""
    from memtraffic.probes.roof_probes import write_reference
    from memtraffic.vocab.roofs import COMMITTED_DIR, device_slug, load_roofs_file

    probes = json.loads(probes_path.read_text())
    roofs_path = roofs_path or COMMITTED_DIR / f"{device_slug(probes['device'])}.json"
    entry = load_roofs_file(roofs_path, probes["device"])
    if entry["device"] != probes["device"]:
        raise SystemExit(f"{probes_path} is for {probes['device']}, {roofs_path} for {entry['device']}")
    for key in KEYS:
        if probes.get(key) is None:
            print(f"{key}: not measured ({probes['method'][key]}): left out", file=sys.stderr)
            continue
        entry.setdefault("measured", {})[key] = probes[key]
        entry.setdefault("method", {})[key] = f"{probes['method'][key]} ({probes['date']})"
    return write_reference(entry, roofs_path.parent)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "measure":
        measure(Path(argv[1]))
        return 0
    if len(argv) in (2, 3) and argv[0] == "merge":
        print(merge(Path(argv[1]), Path(argv[2]) if len(argv) == 3 else None))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
