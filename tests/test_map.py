"""The tests are a map of the package: each module memtraffic/<folder>/<module>.py has
tests/<folder>/test_<module>.py, or a line in tests/README.md saying where it is tested."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LISTED = re.compile(r"^- (memtraffic/\S+\.py): \S", re.M)


def _unmapped(readme: str) -> list[str]:
    listed = set(LISTED.findall(readme))
    missing = []
    for path in sorted((REPO / "memtraffic").glob("*/*.py")):
        name = str(path.relative_to(REPO))
        own = REPO / "tests" / path.parent.name / f"test_{path.stem}.py"
        if path.stem != "__init__" and not own.is_file() and name not in listed:
            missing.append(name)
    return missing


def test_every_module_has_its_test_file_or_a_line_saying_where_it_is_tested():
    missing = _unmapped((REPO / "tests" / "README.md").read_text())
    assert not missing, ("give each its tests/<folder>/test_<module>.py, or a line in tests/README.md "
                         "('- memtraffic/<folder>/<module>.py: where it is tested'):\n" + "\n".join(missing))


def test_a_listed_module_that_is_gone_is_said():
    """A line for a module that no longer exists would map nothing: the README keeps to the package."""
    listed = LISTED.findall((REPO / "tests" / "README.md").read_text())
    assert listed and not [name for name in listed if not (REPO / name).is_file()]


def test_a_module_with_neither_is_found():
    assert "memtraffic/ncu/source.py" in _unmapped("")
    assert "memtraffic/ncu/report.py" not in _unmapped("")  # tests/ncu/test_report.py
    assert "memtraffic/analysis/check.py" not in _unmapped("")  # tests/analysis/test_check.py
