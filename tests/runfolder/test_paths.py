"""Run folders you can share (runfolder/paths.py): no path of the machine that measured a run stays in its
run.json, plan.json or ncu.log; committed runs were rewritten by scripts/share_runs.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memtraffic.runfolder.paths import portable, portable_command, portable_path
from memtraffic.runfolder.records import read_run, write_run

REPO = Path(__file__).resolve().parents[2]
# a home, temp or checkout folder, an install of the measuring machine
MACHINE_PATH = re.compile(r"(?<![\w.])/(tmp|root|home|work|opt|usr|var|scratch|mnt|data)/")
SHARED = re.compile(r"(.+_)?(run|plan)\.json|trace\.jsonl|results\.(json|csv)|ncu\.log")


def committed_records() -> list[Path]:
    files = subprocess.run(["git", "ls-files", "reports"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    return [REPO / f for f in files if SHARED.fullmatch(Path(f).name)]


def test_no_committed_run_holds_a_path_of_the_machine_that_measured_it():
    files = committed_records()
    assert len(files) > 50
    found = {str(f.relative_to(REPO)): MACHINE_PATH.findall(f.read_text()) for f in files}
    assert not {f: hits for f, hits in found.items() if hits}, "run scripts/share_runs.py"
    for f in [f for f in files if f.suffix not in (".csv", ".log")]:  # the host name went too
        records = [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.suffix == ".jsonl" \
            else [json.loads(f.read_text())]
        assert not any("host" in (r.get("environment") or {}) for r in records if isinstance(r, dict)), f


def test_the_share_script_changes_nothing_more_on_committed_runs():
    proc = subprocess.run([sys.executable, "scripts/share_runs.py"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0 files rewritten"


RUN = Path("/scratch/me/clone/reports/runs/20261126_x")
CWD = Path("/scratch/me/clone")


@pytest.mark.parametrize(("path", "want"), [
    ("/scratch/me/clone/reports/runs/20261126_x/profile.ncu-rep", "profile.ncu-rep"),  # in the run folder
    ("/scratch/me/clone/reports/runs/20261126_x", "."),
    ("/scratch/me/clone/scripts/sweeps/a.toml", "scripts/sweeps/a.toml"),  # in the folder it ran from
    ("/usr/local/cuda/bin/ncu", "ncu"),  # programs by name, as typed
    ("/home/me/.venv/bin/python3.12", "python3.12"),
    ("/home/me/.venv/lib/python3.12/site-packages/memtraffic/cli.py", "memtraffic"),
    ("/tmp/elsewhere/out/reports/h100/run_a", "reports/h100/run_a"),  # a repository folder's path
    ("/tmp/tmp.ab12/my_variants.py", "my_variants.py"),  # else its name
    ("relative/stays.py", "relative/stays.py"),
    ("mt|softmax|4096x4096", "mt|softmax|4096x4096"),
])
def test_a_path_is_made_portable(path, want):
    assert portable_path(path, RUN, CWD) == want


def test_a_command_line_is_made_portable_word_by_word():
    line = ("/home/me/.venv/bin/memtraffic measure --out /scratch/me/clone/reports/runs/20261126_x "
            "--sweep=/scratch/me/clone/grid.toml -- python3 'a b.py'")
    assert portable_command(line, RUN, CWD) == ("memtraffic measure --out . --sweep=grid.toml -- python3 "
                                                "'a b.py'")
    assert portable_command("memtraffic analyze x", RUN, CWD) == "memtraffic analyze x"


def test_a_record_keeps_its_numbers_and_loses_the_host():
    record = {"command": "/usr/bin/memtraffic list", "environment": {"ncu": "/opt/ncu/ncu", "host": "box"},
              "attempts": [{"argv": ["/opt/ncu/ncu", "--export", str(RUN / "r.ncu-rep")], "returncode": 0}],
              "wall_time_s": 1.5, "configs": [{"min_bytes": 8388608, "range": "mt|x"}]}
    assert portable(record, RUN, CWD) == {
        "command": "memtraffic list", "environment": {"ncu": "ncu"},
        "attempts": [{"argv": ["ncu", "--export", "r.ncu-rep"], "returncode": 0}], "wall_time_s": 1.5,
        "configs": [{"min_bytes": 8388608, "range": "mt|x"}]}


def test_a_new_run_json_is_written_shareable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "reports" / "runs" / "r"
    run_dir.mkdir(parents=True)
    write_run(run_dir, {"started": "2026-11-26T00:00:00Z",
                        "command": f"{sys.executable} -m memtraffic measure",
                        "environment": {"gpu": "G", "chip": None, "ncu": "/usr/local/cuda/bin/ncu",
                                        "ncu_version": "2025.3.1.0", "host": "box"},
                        "attempts": [{"argv": ["/usr/local/cuda/bin/ncu", "--export",
                                               str(run_dir / "profile.ncu-rep")]}]})
    run = read_run(run_dir)
    assert not MACHINE_PATH.search(json.dumps(run)) and str(tmp_path) not in json.dumps(run)
    assert run["attempts"][0]["argv"] == ["ncu", "--export", "profile.ncu-rep"]
