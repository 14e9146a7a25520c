"""What an input path is (require_file, require_folder: checked before anything is opened), the one JSON
reader, the one atomic writer (JSON or bytes, a file or a whole folder, exclusive or replacing), file-system
errors in one line, rows as CSV text."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtraffic.vocab.errors import ReportError, UsageError

if TYPE_CHECKING:
    import pandas as pd

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def path_kind(path: Path) -> str:
    """What is at `path`, links followed, without opening it (opening a FIFO blocks until a writer comes):
    'file' (a regular file), 'folder', 'missing' (nothing by that name), or what else it is, as a phrase:
    'a FIFO (named pipe)', 'a socket', 'a character device', 'a block device', 'a symbolic link loop',
    'a dangling symbolic link (to TARGET)', 'unreadable (REASON)'."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            return f"a dangling symbolic link (to {os.readlink(path)})"
        return "missing"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "a symbolic link loop"
        if err.errno == errno.ENOTDIR:  # a path through a file ('report.ncu-rep/plan.json')
            return "missing"
        return f"unreadable ({err.strerror or err})"
    except ValueError:  # a NUL byte in the name
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return next((name for test, name in _KINDS if test(mode)), "no regular file")


def _require(path: Path, want: str, fix: str, usage: bool, option: str) -> bool:
    kind = path_kind(path)
    if kind == want:
        return True
    if kind == "missing":
        return False
    shown = "a folder" if kind == "folder" else "a file" if kind == "file" else kind
    error = UsageError if usage else ReportError
    raise error(f"{option + ' ' if option else ''}{path} is {shown}, not a {want}{': ' + fix if fix else ''}")


def require_file(path: Path, fix: str = "", usage: bool = False, option: str = "") -> bool:
    """True when `path` is a regular file (links followed), False when nothing is there (the caller says
    what that means); anything else (a folder, FIFO, socket, device, link loop or dangling link) is one
    error naming the path (after `option`, the command-line option that gave it) and what it is, then
    `fix`: a ReportError (exit 1), or a UsageError (exit 2) with usage=True, for a command-line value.
    Nothing is opened, so a FIFO never blocks."""
    return _require(Path(path), "file", fix, usage, option)


def require_folder(path: Path, fix: str = "", usage: bool = False, option: str = "") -> bool:
    """require_file's twin for a folder: True when `path` is one, False when nothing is there, else one
    error naming what it is."""
    return _require(Path(path), "folder", fix, usage, option)


def read_json(path: Path, fix: str = "the file is damaged") -> Any:
    """The JSON in `path`; a ReportError in one line (what is wrong, then `fix`) when it is not JSON or not
    a regular file (checked before it is opened: see require_file)."""
    if not require_file(path, fix):
        raise ReportError(f"cannot read {path}: no such file")
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ReportError(f"{path} is not valid JSON ({err.msg}, line {err.lineno}): {fix}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path} is not valid JSON (binary data): {fix}") from None
    except RecursionError:
        raise ReportError(f"{path} is not valid JSON (nested too deeply): {fix}") from None
    except ValueError as err:  # a number of more than 4300 digits
        raise ReportError(f"{path} is not valid JSON ({err}): {fix}") from None
    except OSError as err:
        raise ReportError(f"cannot read {path}: {err.strerror}") from None


_OS_HINTS = {
    errno.ENOSPC: "the disk is full: free some space or write elsewhere",
    errno.EDQUOT: "the disk quota is used up: free some space or write elsewhere",
    errno.EROFS: "a read-only file system: write elsewhere",
    errno.EACCES: "no permission: write elsewhere, or change the folder's permissions",
    errno.EPERM: "not permitted: write elsewhere, or change the folder's permissions",
}


def os_error_line(err: OSError) -> str:
    """One line for a file-system error: the path, the system's reason and, for a full, read-only or
    forbidden disk, what to do ('PATH: No space left on device (the disk is full: ...)'). A deleted working
    folder is said as such."""
    if err.filename is None:
        try:
            os.getcwd()
        except FileNotFoundError:
            return "the current folder no longer exists (deleted?): cd into an existing folder and run again"
    reason = err.strerror or str(err) or type(err).__name__
    if err.errno in _OS_HINTS:
        reason = f"{reason} ({_OS_HINTS[err.errno]})"
    return f"{err.filename}: {reason}" if err.filename is not None else reason


def exists_message(path: Path, option: str = "--out") -> str:
    """The one refusal of an output that exists (a file: pass --force; a run folder: never overwritten)."""
    return (f"{path} already exists: memtraffic does not overwrite it; give another {option}, or pass "
            "--force to replace it")


def _renamed(err: OSError, path: Path) -> OSError:
    """The same error, naming the file the user asked for instead of its temporary sibling."""
    return OSError(err.errno, err.strerror, str(path)) if err.errno else err


def write_bytes_atomic(path: Path, data: bytes, *, exclusive: bool = False, option: str = "--out") -> None:
    """Write a file whole or not at all: a temporary file beside it, then a rename (a crash, a full disk or
    a reader at the same moment never sees half a file; the temporary file is removed on any failure).

    exclusive: `path` must not exist, checked by the rename itself (os.link fails if the name is taken), so
    of two writers racing for one name exactly one wins and the other gets a UsageError (exists_message).
    Otherwise an existing file is replaced. A file system that refuses (full, read-only, no permission)
    raises its OSError naming `path`.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise _renamed(err, path) from None
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would under this umask
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if exclusive:
            _link_new(tmp, path, option)
        else:
            os.replace(tmp, path)
    except OSError as err:
        raise _renamed(err, path) from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _link_new(tmp: str, path: Path, option: str) -> None:
    """Give the finished temporary file the name `path` unless that name exists, atomically."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise UsageError(exists_message(path, option)) from None
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # no hard links here (some network and FUSE file systems): claim the name with O_EXCL, then rename
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            raise UsageError(exists_message(path, option)) from None
        os.replace(tmp, path)


def write_json(path: Path, data: object, sort_keys: bool = False, rows: bool = False) -> Path:
    """Write `data` as indented JSON (ending in a newline), atomically (write_bytes_atomic); the folder
    is made if missing. `rows`: a list (or an object's list values) one entry a line, for files of
    thousands of records (plan.json, results.json): json's indenting encoder is pure Python, 10x slower."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = _row_lines(data, sort_keys) if rows else json.dumps(data, indent=2, sort_keys=sort_keys)
    write_bytes_atomic(path, (text + "\n").encode())
    return path


def _row_lines(data: object, sort_keys: bool) -> str:
    if isinstance(data, list):
        return "[\n" + ",\n".join(json.dumps(entry, sort_keys=sort_keys) for entry in data) + "\n]"
    if isinstance(data, dict) and data:
        items = sorted(data.items()) if sort_keys else data.items()
        lines = (f"{json.dumps(key)}: " + (_row_lines(value, sort_keys) if isinstance(value, list)
                                          else json.dumps(value, sort_keys=sort_keys))
                 for key, value in items)
        return "{\n" + ",\n".join(lines) + "\n}"
    return json.dumps(data, sort_keys=sort_keys)


@contextlib.contextmanager
def new_folder(out: Path, option: str = "--out") -> Iterator[Path]:
    """Build a new folder whole or not at all: the caller fills a hidden temporary folder beside `out`,
    which is renamed to `out` when the block ends; on any failure or Ctrl-C the temporary folder is removed
    and nothing is left behind (a retry starts clean).

    `out` may be missing or an empty folder; anything else is refused before the block starts and, should
    another process fill `out` meanwhile, again at the rename itself (renaming onto a non-empty folder
    fails), so nothing is ever overwritten.
    """
    out = Path(out)
    refuse_nonempty(out, option)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    except OSError as err:
        raise _renamed(err, out) from None
    try:
        try:
            yield tmp
        except OSError as err:  # a full disk while filling it: said of the folder the user asked for
            raise _renamed(err, out) from None
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's folder is private; give it a plain mkdir's mode
        try:
            os.rename(tmp, out)  # onto a missing name or an empty folder; a non-empty one refuses
        except OSError as err:
            if err.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise UsageError(_folder_exists(out, option)) from None
            raise _renamed(err, out) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _folder_exists(out: Path, option: str) -> str:
    return (f"{out} already exists and is not empty: memtraffic never overwrites a run; choose a new "
            f"{option} folder")


def refuse_nonempty(out: Path, option: str = "--out") -> None:
    """UsageError unless `out` is missing or an empty folder (checked early; new_folder checks again)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(_folder_exists(out, option))


def csv_text(rows: Sequence[Mapping[str, object]]) -> str:
    """Rows as CSV text (results.csv, and the csv output format of memtraffic.views.formats): one header
    line (every key, in order of first appearance) then a line per row; lists and dicts as JSON text."""
    buf = io.StringIO()
    keys: dict[str, None] = {}  # in order of first appearance
    for r in rows:
        if not r.keys() <= keys.keys():
            keys.update(dict.fromkeys(r))
    names = list(keys)
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(names)
    nested = (dict, list)
    for r in rows:  # a traced program's table has a million cells: a list a row, not a dict
        writer.writerow([json.dumps(v) if isinstance(v, nested) else v for v in map(r.get, names)])
    return buf.getvalue().rstrip("\n")


def plain_records(df: pd.DataFrame, int_columns: Collection[str] = ()) -> list[dict[str, object]]:
    """A DataFrame as plain JSON-able dicts: NaN and infinities -> None, whole counts (int_columns) ->
    int, lists and dicts kept. Column by column: a traced program's table has a million cells."""
    whole = frozenset(int_columns)
    names = [str(c) for c in df.columns]
    columns = [_plain_column(df.iloc[:, i], name in whole) for i, name in enumerate(names)]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)] if names else \
        [{} for _ in range(len(df))]


def _plain_column(series: pd.Series[Any], whole: bool) -> list[object]:
    import numpy as np

    values: list[object] = series.tolist()  # numpy scalars become Python ones
    if series.dtype.kind not in "fO":
        return values
    if series.dtype.kind == "f":  # a whole column at once: NaN and infinities -> None, whole counts -> int
        array = series.to_numpy()
        bad = ~np.isfinite(array)
        finite = array[~bad]
        exact = not finite.size or (bool(np.all(finite == np.round(finite)))
                                    and float(np.abs(finite).max()) < 2**53)  # int64 holds them
        if exact or not whole:  # a count column with fractions goes value by value below
            if whole and finite.size:
                values = list(np.where(bad, 0, array).astype(np.int64).tolist())
            for i in np.flatnonzero(bad).tolist():
                values[i] = None
            return values
    out: list[object] = []
    for value in values:
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float):
            if not math.isfinite(value):
                value = None
            elif whole and value.is_integer():
                value = int(value)
        out.append(value)
    return out


def read_toml(path: Path, what: str, hint: str = "") -> dict[str, Any]:
    """A TOML file as a dict; UsageError (one line naming `what` the file is, then `hint`) when it cannot
    be read or parsed. Python 3.10 needs the tomli package."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise UsageError(f"reading the {what} {path} needs Python >= 3.11 or `pip install tomli`"
                             f"{hint}") from None
    if not require_file(path, hint.lstrip(":; ") or f"give the {what} as a TOML file", usage=True):
        raise UsageError(f"cannot read the {what} {path}: no such file{hint}")
    try:
        data: dict[str, Any] = tomllib.loads(Path(path).read_text(encoding="utf-8"))  # its reader checks it
        return data
    except OSError as err:
        raise UsageError(f"cannot read the {what} {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise UsageError(f"{path} is not valid TOML (not UTF-8 text: byte {err.start} is "
                         f"{err.object[err.start:err.start + 1]!r}){hint}") from None
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path} is not valid TOML ({' '.join(str(err).split())}){hint}") from None
    except RecursionError:
        raise UsageError(f"{path} is not valid TOML (nested too deeply){hint}") from None
