"""The one JSON writer: whole files only, the mode a plain open() gives, no temporary file left behind."""

from __future__ import annotations

import json
import os

import pytest

from memtraffic.vocab.files import read_json, write_json


def test_write_json_writes_a_whole_file_with_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_json(tmp_path / "run.json", {"gpu": "x", "n": [1, 2]})
    finally:
        os.umask(old)
    assert read_json(path) == {"gpu": "x", "n": [1, 2]}
    assert json.loads(path.read_text()) == {"gpu": "x", "n": [1, 2]}
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = write_json(tmp_path / "plan.json", {"configs": []})
    with pytest.raises(TypeError):
        write_json(path, {"bad": object()})
    assert read_json(path) == {"configs": []}
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]
