"""Write reports/README.md: every folder under reports/<group>/<name> with its GPU, date, what it shows and
the command that reads it, and the files kept beside the folders. Nothing in it is typed by hand: a run
folder speaks through its run.json and plan.json, any other folder through its README.md (its title, and
the first GPU name and date in it). No GPU needed.

    python scripts/reports_index.py          # rewrite reports/README.md
    python scripts/reports_index.py --check  # exit 1 when reports/README.md is not what it would write
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtraffic.ncu.kernel_table import kernel_table
from memtraffic.ncu.metrics import METRICS
from memtraffic.runfolder.load import load_run
from memtraffic.vocab.errors import ReportError

REPO = Path(__file__).resolve().parent.parent
REPORTS = REPO / "reports"
INDEX = REPORTS / "README.md"

_DATE = re.compile(r"\b(20\d\d-\d\d-\d\d)\b")
_GPU = re.compile(r"\b(?:(\d) ?x )?(?:NVIDIA )?(H100|H200)(?: 80GB HBM3)?\b")
_GROUP_GPU = re.compile(r"\b(h100|h200)(?:x(\d))?\b")  # reports/h200x2, bench/2026-11-23-h100-r3
_ISSUE = re.compile(r"\s*\(issue \d+\)")

HEAD = """\
# reports/

Every folder here is a run of memtraffic on a real GPU, or the result of a probe with a README.md saying
what it is and how to read it. This page is written by `python scripts/reports_index.py` (tests check it is
current); a folder's own README.md, where it has one, tells more.

A run folder (`memtraffic measure`, `profile` or `merge`) is read by the command beside it, on any machine
(no GPU, no torch). Its `.ncu-rep` reports are xz-compressed to keep the clone light (ncu embeds each
kernel's machine code; xz shrinks a report 10-300x): memtraffic reads them as they are, and
`xz -dc profile.ncu-rep > plain.ncu-rep` gives a report for Nsight Compute's own UI. Beside each report,
`profile.kernels.json.gz` holds what memtraffic reads of it (its kernels' counters, per-line counters
where measured), so that reading a run opens no report. `results.json` is the analysis as saved when the
run was made; `memtraffic analyze` recomputes it from the reports. Some large runs keep no results.json
or trace.jsonl (git history holds them). `python scripts/make_kernel_tables.py` compresses a new report
and writes its table.
"""


@dataclass
class Entry:
    """One folder's row: where, on what GPU, when, what it shows, and the command that reads it."""

    folder: str
    gpu: str
    date: str
    shows: str
    read: str


def _runs_in(folder: Path) -> list[Path]:
    """The run folders at folder or one level below it (a folder of several runs, each analyzable)."""
    def is_run(path: Path) -> bool:
        try:
            run = load_run(path)
        except ReportError:
            return False
        return bool(run.reports) and all(r.is_file() for r in run.reports)

    if is_run(folder):
        return [folder]
    return sorted(p for p in folder.iterdir() if p.is_dir() and is_run(p))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _gpu_name(text: str) -> str:
    found = _GPU.search(text)
    if not found:
        return ""
    count, chip = found.groups()
    return f"{count} x {chip}" if count and count != "1" else chip


def _path_gpu(folder: Path) -> str:
    """The GPU the folder's path names (reports/h200x2/..., bench/DATE-h100-...), else ''."""
    for name in (folder.parent.name, folder.name):
        found = _GROUP_GPU.search(name.replace("-", " ").replace("_", " "))
        if found:
            chip, count = found.group(1).upper(), found.group(2)
            return f"{count} x {chip}" if count else chip
    return ""


def _from_readme(folder: Path) -> tuple[str, str, str]:
    """(title, GPU, date) of a folder's README.md: its first line, the GPU its path names (else the first
    GPU name in the README; 'none' for a result made on a CPU machine) and the first date."""
    text = (folder / "README.md").read_text()
    title = _ISSUE.sub("", text.splitlines()[0].lstrip("# ").strip())
    date = _DATE.search(folder.name) or _DATE.search(text)
    first = text.split("\n\n", 2)[:2]
    on_cpu = "CPU machine" in " ".join(first)
    gpu = _path_gpu(folder) or ("none (a CPU machine)" if on_cpu else _gpu_name(text))
    return title, gpu, date.group(1) if date else ""


def _run_gpu(run_json: dict[str, Any], run: Path) -> str:
    env = run_json.get("environment")
    gpu = str(env.get("gpu", "")) if isinstance(env, dict) else ""
    if not gpu:  # a plain ncu report: the device its kernels ran on
        devices = {d for report in load_run(run).reports for d in kernel_table(report).kernels["device"]}
        gpu = ", ".join(sorted(devices))
    return _gpu_name(gpu) or gpu


def _run_shows(meta: dict[str, Any], plan: dict[str, Any] | None) -> str:
    """What a run measured, from its run.json and plan.json."""
    if meta.get("kind") == "profile":
        program = " ".join(str(a) for a in meta.get("program") or [])
        mode = "timing-only " if meta.get("timing_only") else ""
        ops = " --torch-ops" if meta.get("torch_ops") else ""
        return f"{mode}profile{ops} of `{program}`"
    if plan is not None and plan.get("configs"):
        configs = plan["configs"]
        assert isinstance(configs, list)
        variants = sorted({str(c.get("variant")) for c in configs if c.get("variant")})
        shapes = sorted({"x".join(str(n) for n in c["shape"]) if isinstance(c.get("shape"), list)
                         else str(c.get("shape")) for c in configs if c.get("shape")})
        dtypes = sorted({str(c.get("dtype")) for c in configs if c.get("dtype")})
        named = ", ".join(variants[:6]) + (f" and {len(variants) - 6} more" if len(variants) > 6 else "")
        return f"measure: {len(configs)} configs of {named} at {', '.join(shapes[:4])} {'/'.join(dtypes)}"
    return "a report of plain `ncu -o`"


def readers(run: Path) -> list[str]:
    """The memtraffic commands that read this run: analyze where its reports hold a counter besides the
    time (a plain ncu report of per-line counters only is read by lines alone), lines where they hold
    per-line counters, floor for a profile of aten ops."""
    meta_path = run / "run.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    reports = [r for r in load_run(run).reports if r.suffix == ".ncu-rep"]
    tables = [kernel_table(r, allow_partial=True) for r in reports]
    aliases = [a for a in METRICS if a != "time"]  # analyze needs the time and one more counter (any set)
    traffic = not tables or any(t.kernels[aliases].notna().any().any() for t in tables)
    commands = ["analyze"] if traffic else []
    if any(t.source_counters for t in tables):
        commands.append("lines")
    if meta.get("kind") == "profile" and meta.get("torch_ops"):
        commands.append("floor")
    return commands


def _read_command(runs: list[Path]) -> str:
    if len(runs) > 1:
        names = ", ".join(r.name for r in runs)
        return f"`memtraffic {readers(runs[0])[0]} {_rel(runs[0].parent)}/NAME` (NAME: {names})"
    return "<br>".join(f"`memtraffic {command} {_rel(runs[0])}`" for command in readers(runs[0]))


def entry(folder: Path) -> Entry:
    """The folder's row; ValueError when it is neither a run (nor a folder of runs) nor has a README.md."""
    runs = _runs_in(folder)
    has_readme = (folder / "README.md").is_file()
    if not runs and not has_readme:
        raise ValueError(f"{_rel(folder)} is no run folder and has no README.md: add one")
    title, gpu, date = _from_readme(folder) if has_readme else ("", "", "")
    if not runs:
        return Entry(folder.name, gpu or "none", date, title, "its README.md")
    first = runs[0]
    meta_path = first / "run.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    plan_path = first / "plan.json"
    plan = json.loads(plan_path.read_text()) if plan_path.is_file() else None
    started = str(meta.get("started", ""))[:10]
    shows = title if title and title != folder.name else _run_shows(meta, plan)
    return Entry(folder.name, _path_gpu(folder) or _run_gpu(meta, first), started or date, shows,
                 _read_command(runs))


def render() -> str:
    parts = [HEAD]
    for group in sorted(p for p in REPORTS.iterdir() if p.is_dir()):
        folders = sorted(p for p in group.iterdir() if p.is_dir())
        files = sorted(p.name for p in group.iterdir() if p.is_file())
        parts.append(f"\n## {group.name}/\n")
        if (group / "README.md").is_file():
            parts.append(f"\n{_from_readme(group)[0]}: [README.md]({group.name}/README.md).\n")
        if folders:
            parts.append("\n| folder | GPU | date | what it shows | read it with |\n"
                         "| --- | --- | --- | --- | --- |\n")
            for folder in folders:
                e = entry(folder)
                link = f"[{e.folder}]({group.name}/{e.folder})"
                readme = f"[README.md]({group.name}/{e.folder}/README.md)"
                read = e.read if e.read != "its README.md" else readme
                parts.append(f"| {link} | {e.gpu} | {e.date} | {e.shows} | {read} |\n")
        kept = [f for f in files if f != "README.md"]
        if kept:
            parts.append(f"\nFiles: {', '.join(f'[{f}]({group.name}/{f})' for f in kept)}.\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not INDEX.is_file() or INDEX.read_text() != text:
            print(f"{_rel(INDEX)} is stale: run python scripts/reports_index.py", file=sys.stderr)
            return 1
        return 0
    INDEX.write_text(text)
    print(f"wrote {_rel(INDEX)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
