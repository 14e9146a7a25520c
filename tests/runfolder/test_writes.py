"""Every write is whole and exclusive (memtraffic/vocab/files.py): a temporary file or folder, then a rename
that itself refuses an existing target; a full, read-only or forbidden disk is one line naming the path, and
nothing half-written is left behind (a retry then succeeds)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic.analysis import merge as merge_mod
from memtraffic.cli import app
from memtraffic.vocab import files
from memtraffic.vocab.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "reports" / "h100" / "seed_1048576x2_fp32"
SUITE = REPO / "reports" / "h100" / "suite_1048576x2_fp32"
REASONS = {
    errno.ENOSPC: "No space left on device (the disk is full: free some space or write elsewhere)",
    errno.EROFS: "Read-only file system (a read-only file system: write elsewhere)",
    errno.EACCES: "Permission denied (no permission: write elsewhere, or change the folder's permissions)",
}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path_factory.mktemp("cache")))


def _run(args: list) -> CliRunner:
    return CliRunner().invoke(app, [str(a) for a in args])


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- one file -----------------------------------------------------------------------------------------------


def test_an_exclusive_write_refuses_an_existing_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "page.html"
    files.write_bytes_atomic(target, b"first", exclusive=True)
    with pytest.raises(UsageError) as err:
        files.write_bytes_atomic(target, b"second", exclusive=True)
    assert str(err.value) == (f"{target} already exists: memtraffic does not overwrite it; give another "
                              "--out, or pass --force to replace it")
    files.write_bytes_atomic(target, b"third")  # not exclusive (--force): replaced
    assert target.read_bytes() == b"third" and _names(tmp_path) == ["page.html"]


def test_the_rename_itself_refuses_a_file_written_after_the_check(tmp_path, monkeypatch):
    """Another writer creates the file between our check and our rename: its file stays, we refuse."""
    target = tmp_path / "page.html"
    link = os.link

    def other_writer_first(src, dst, **kw):
        Path(dst).write_bytes(b"theirs")
        return link(src, dst, **kw)

    monkeypatch.setattr(files.os, "link", other_writer_first)
    with pytest.raises(UsageError, match="already exists"):
        files.write_bytes_atomic(target, b"ours", exclusive=True)
    assert target.read_bytes() == b"theirs" and _names(tmp_path) == ["page.html"]


def test_without_hard_links_the_name_is_claimed_with_o_excl(tmp_path, monkeypatch):
    def no_links(src, dst, **kw):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(files.os, "link", no_links)
    target = tmp_path / "page.html"
    files.write_bytes_atomic(target, b"ours", exclusive=True)
    with pytest.raises(UsageError, match="already exists"):
        files.write_bytes_atomic(target, b"again", exclusive=True)
    assert target.read_bytes() == b"ours" and _names(tmp_path) == ["page.html"]


@pytest.mark.slow
def test_two_reports_at_once_one_writes_one_refuses(tmp_path):
    """Whatever the interleaving (both past their check, or one done first), one page, one refusal."""
    out = tmp_path / "page.html"
    cmd = [sys.executable, "-m", "memtraffic.cli", "report", str(SEED), "--out", str(out)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
             for _ in range(2)]
    results = sorted((p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs)
    assert results == [
        (0, f"wrote {out}\n", ""),
        (2, "", f"error: {out} already exists: memtraffic does not overwrite it; give another --out, or pass "
                "--force to replace it\n"),
    ]
    assert _names(tmp_path) == ["page.html"]


@pytest.mark.parametrize("code", sorted(REASONS))
@pytest.mark.parametrize("where", ["folder", "write", "rename"])
def test_a_disk_that_refuses_is_one_line_naming_the_path(tmp_path, monkeypatch, code, where):
    out = tmp_path / "page.html"

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code), str(args[0]) if args else None)

    if where == "folder":  # the temporary file cannot even be made (an unwritable folder)
        monkeypatch.setattr(files.tempfile, "mkstemp", refuse)
    elif where == "write":
        real = os.fdopen

        class Full:
            def __init__(self, fd, mode):
                self.f = real(fd, mode)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, data):
                raise OSError(code, os.strerror(code))

        monkeypatch.setattr(files.os, "fdopen", Full)
    else:
        monkeypatch.setattr(files.os, "link", refuse)
    res = _run(["report", SEED, "--out", out])
    assert (res.exit_code, res.stderr) == (1, f"error: {out}: {REASONS[code]}\n"), res.output
    assert _names(tmp_path) == []


# --- one folder: merge and bench --out ----------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["disk full", "ctrl-c"])
def test_a_merge_stopped_midway_leaves_nothing_and_a_retry_succeeds(tmp_path, monkeypatch, fault):
    out = tmp_path / "merged"
    copy2, calls = merge_mod.shutil.copy2, []

    def copy_then_fail(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the second part's report
            if fault == "ctrl-c":
                raise KeyboardInterrupt
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return copy2(src, dst)

    monkeypatch.setattr(merge_mod.shutil, "copy2", copy_then_fail)
    res = _run(["merge", SEED, SUITE, "--out", out])
    if fault == "ctrl-c":
        assert (res.exit_code, res.stderr) == (130, "interrupted\n")
    else:
        assert (res.exit_code, res.stderr) == (1, f"error: {out}: {REASONS[errno.ENOSPC]}\n")
    assert _names(tmp_path) == []  # no folder, no temporary one
    monkeypatch.setattr(merge_mod.shutil, "copy2", copy2)
    res = _run(["merge", SEED, SUITE, "--out", out, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert _names(tmp_path) == ["merged"]
    assert (out / "run.json").is_file() and (out / "results.json").is_file()


def test_a_merge_refuses_a_folder_filled_while_it_worked(tmp_path, monkeypatch):
    out = tmp_path / "merged"
    copy2 = merge_mod.shutil.copy2

    def other_merge_finishes_first(src, dst):
        out.mkdir(exist_ok=True)
        (out / "theirs").write_text("x")
        return copy2(src, dst)

    monkeypatch.setattr(merge_mod.shutil, "copy2", other_merge_finishes_first)
    res = _run(["merge", SEED, "--out", out])
    assert (res.exit_code, res.stderr) == (2, f"error: {out} already exists and is not empty: memtraffic "
                                              "never overwrites a run; choose a new --out folder\n")
    assert _names(tmp_path) == ["merged"] and _names(out) == ["theirs"]


def test_a_merge_into_an_empty_folder(tmp_path):
    out = tmp_path / "merged"
    out.mkdir()
    res = _run(["merge", SEED, "--out", out, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "run.json" in _names(out) and _names(tmp_path) == ["merged"]


def test_a_folder_is_whole_or_absent(tmp_path):
    out = tmp_path / "bench"
    with pytest.raises(RuntimeError), files.new_folder(out) as building:
        (building / "results.json").write_text("{}")
        raise RuntimeError("stopped")
    assert _names(tmp_path) == []
    with files.new_folder(out) as building:
        (building / "results.json").write_text("{}")
    assert _names(out) == ["results.json"] and oct(out.stat().st_mode & 0o777) != "0o700"


def test_two_runs_with_one_new_out_folder_one_is_refused(tmp_path, monkeypatch):
    from memtraffic.runfolder import folder as rundir

    out, check = tmp_path / "run", rundir.refuse_nonempty
    calls = []

    def other_run_makes_it_after_our_check(path, *args):
        check(path, *args)
        if not calls:
            path.mkdir()  # the other `measure --out run`, between our check and our mkdir
        calls.append(path)

    monkeypatch.setattr(rundir, "refuse_nonempty", other_run_makes_it_after_our_check)
    with pytest.raises(UsageError) as err:
        rundir.new_run_dir(["softmax_tiled"], out)
    assert str(err.value) == f"{out} was just made by another process: choose a new --out folder"
    assert rundir.new_run_dir(["softmax_tiled"], tmp_path / "new").is_dir()
