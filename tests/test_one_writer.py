"""plan.json and run.json are written by memtraffic/runfolder/ alone (runfolder/records.py's write_plan and
write_run check the schema first): a walk of every module's syntax finds each call elsewhere that writes a
file and names a plan or a run record in its arguments."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OWNER = REPO / "memtraffic" / "runfolder"

# Calls that write or move a file into place; open() and Path.open() only with a writing mode.
WRITERS = {"write_json", "write_bytes_atomic", "write_text", "write_bytes", "dump", "open", "replace",
           "rename"}
RECORD = re.compile(r"plan|run\.json|RUN_FILE|PLAN_FILE")


def _writes(call: ast.Call) -> bool:
    modes = [a for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    modes += [k.value for k in call.keywords if k.arg == "mode"]
    return any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+")
               for m in modes)


def record_writes(path: Path) -> list[tuple[int, str]]:
    """(line, call) for each call in the file that writes a file and names a plan or run record."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in WRITERS or (name == "open" and not _writes(node)):
            continue
        parts = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Attribute):
            parts.append(func.value)  # the path of path.write_text(...)
        if any(RECORD.search(ast.unparse(p)) for p in parts):
            found.append((node.lineno, ast.unparse(node)[:90]))
    return found


def test_plan_and_run_records_are_written_by_runfolder_alone():
    broken = [f"{path.relative_to(REPO)}:{line}: {call}"
              for path in sorted((REPO / "memtraffic").rglob("*.py")) if OWNER not in path.parents
              for line, call in record_writes(path)]
    assert not broken, ("write plan.json and run.json through memtraffic.runfolder.records (write_plan, "
                        "write_run), which check the schema:\n" + "\n".join(broken))


def test_the_walk_finds_a_raw_write(tmp_path):
    """What measure once did (plan{stem}.json written with write_json), and the other ways of writing."""
    path = tmp_path / "probe.py"
    path.write_text("def f(run_dir, stem, plan, run):\n"
                    "    write_json(run_dir / f'plan{stem}.json', plan, rows=True)\n"
                    "    (run_dir / 'run.json').write_text(json.dumps(run))\n"
                    "    with open(run_dir / RUN_FILE, 'w') as out:\n"
                    "        json.dump(run, out)\n"
                    "    with open(run_dir / 'plan.json') as f:\n"
                    "        return f.read()\n")
    assert [line for line, _ in record_writes(path)] == [2, 3, 4]  # json.dump's file is open()'s
