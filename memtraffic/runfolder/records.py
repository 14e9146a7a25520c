"""The run folder's JSON files as one schema: plan.json (plan, configs) and run.json (run, attempts,
per-config outcomes), read and written here and nowhere else.

The records stay plain JSON objects (the committed reports under reports/ are read as they are), typed
as TypedDicts for readers and checked against SCHEMAS when read: a damaged file (a field of the wrong
type, a missing field, a list of non-objects) is one ReportError naming the file and the field, never a
traceback further on. Unknown keys are kept, so a newer writer's extra fields do not break an older
reader. `needs_rerun` is the one test of whether a config must be measured again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.files import read_json, require_file, write_json
from memtraffic.vocab.units import LIMIT

PLAN_FILE = "plan.json"
RUN_FILE = "run.json"


class Config(TypedDict, total=False):
    """One planned config (a variant x shape x dtype x params of measure, or a traced op or region)."""

    range: str  # required: the NVTX range its kernels run in
    id: int
    kind: str  # 'variant' (measure), 'op' or 'region' (profile)
    variant: str
    op: str
    shape: list[int]
    dtype: str
    params: dict[str, Any]  # every parameter, defaults filled in (None: the variant picks at launch)
    explicit_params: dict[str, Any]  # those the user set (the range name holds these)
    min_read_bytes: int | None
    min_write_bytes: int | None
    pred_read_bytes: int | None
    pred_write_bytes: int | None
    model_flops: int | None
    min_note: str
    gpu: int  # measure --gpus: the GPU it ran on
    part: int  # merge: the run it came from
    reports: list[str]  # merge: the reports that hold it
    nvtx_range: str  # merge: its range in those reports, when renamed ('RANGE|#2')
    reads: list[list[int | None]]  # traced: [storage, bytes] it must read (runfolder.trace)
    writes: list[list[int | None]]  # traced: [storage, bytes] it must write
    freed: list[int]  # traced: storages freed since the previous record
    freed_after: list[int]  # traced: storages freed after it, before the traced region ended


class Plan(TypedDict, total=False):
    configs: list[Config]  # required
    skipped: list[dict[str, Any]]
    version: int
    kind: str  # 'profile' for a traced program
    program: list[str]


class Attempt(TypedDict, total=False):
    """One ncu process of a run."""

    argv: list[str]
    returncode: int | None
    passes: int | None
    no_kernels_message: bool
    t_start: float  # Unix time ncu was started, and when it exited (measure): with the runner's "t"
    t_end: float  # stamps, where a GPU's time went (start-up, configs, the report written)


class Outcome(TypedDict, total=False):
    """run.json's line for one config: how it went."""

    id: int
    range: str
    status: str  # 'ok', 'failed', 'not run'
    error: str | None
    profiled: bool | None  # ncu profiled a kernel in its range (None: not yet analyzed)
    kernels: int  # how many launches ncu profiled in its range


class Replay(TypedDict):
    """How ncu replayed a profile (run.json's "replay"): "kernel" (each kernel) or "range" (each measured
    op, region or Triton launch range as one unit), and why that mode."""

    mode: str
    why: str


class RunRecord(TypedDict, total=False):
    attempts: list[Attempt]
    reports: list[str]
    interrupted: bool
    returncode: int | None
    configs: list[Outcome]
    rerun: list[str]
    environment: dict[str, Any] | None


# --- the schema -------------------------------------------------------------------------------------------
# A spec is a type (or tuple of types), ListOf(spec), MapOf(spec) or Obj({key: spec}, required=...).


class ListOf:
    def __init__(self, item: Any):
        self.item = item


class MapOf:
    def __init__(self, value: Any):
        self.value = value


class Obj:
    def __init__(self, fields: Mapping[str, Any], required: Sequence[str] = ()):
        self.fields = dict(fields)
        self.required = tuple(required)


class Amount:
    """A number from 0 up to (not including) 2**63, finite: bytes, FLOPs, a tensor's dimension. JSON
    writes whole numbers as floats at times (1e6), so a float is taken where `whole` is False."""

    def __init__(self, what: str, whole: bool = False):
        self.what, self.whole = what, whole

    def fits(self, value: Any) -> bool:
        return (isinstance(value, int) or not self.whole and isinstance(value, float)) and not isinstance(
            value, bool)

    def bad(self, value: Any) -> bool:
        return not 0 <= value < LIMIT  # NaN fails this too


BYTES = (Amount("bytes"), type(None))
FLOPS = (Amount("a count"), type(None))
DIMENSION = Amount("a dimension", whole=True)
INT_OR_NONE = (int, type(None))
STR_OR_NONE = (str, type(None))
BOOL_OR_NONE = (bool, type(None))

CONFIG = Obj({
    "range": str, "id": int, "kind": str, "variant": str, "op": str, "shape": ListOf(DIMENSION),
    "dtype": str, "params": dict, "explicit_params": dict, "min_read_bytes": BYTES, "min_write_bytes": BYTES,
    "pred_read_bytes": BYTES, "pred_write_bytes": BYTES, "model_flops": FLOPS, "min_note": str,
    "gpu": int, "part": int, "reports": ListOf(str), "nvtx_range": str, "seq": int, "pid": int,
    "inputs": ListOf(dict), "outputs": ListOf(dict), "reads": ListOf(list), "writes": ListOf(list),
    "freed": ListOf(int), "freed_after": ListOf(int),
}, required=("range",))
PLAN = Obj({
    "configs": ListOf(CONFIG), "skipped": ListOf(dict), "version": int, "seed": int, "kind": str,
    "program": ListOf(str), "status_file": str, "status_files": MapOf(str), "variant_files": ListOf(str),
    "metrics": dict, "options": dict, "merged_from": ListOf(str),
}, required=("configs",))
ATTEMPT = Obj({"argv": ListOf(str), "returncode": INT_OR_NONE, "passes": INT_OR_NONE,
               "no_kernels_message": BOOL_OR_NONE, "gpu": int, "part": int, "t_start": float, "t_end": float})
OUTCOME = Obj({"id": int, "range": str, "status": str, "error": STR_OR_NONE, "profiled": BOOL_OR_NONE,
               "kernels": int, "params": dict, "shape": ListOf(DIMENSION), "gpu": int, "part": int})
ENVIRONMENT = Obj({"gpu": STR_OR_NONE, "chip": STR_OR_NONE, "ncu": STR_OR_NONE, "ncu_version": STR_OR_NONE})
RUN = Obj({
    "attempts": ListOf(ATTEMPT), "reports": ListOf(str), "interrupted": bool, "returncode": INT_OR_NONE,
    "configs": ListOf(OUTCOME), "rerun": ListOf(str), "missing": ListOf(str), "skipped": ListOf(dict),
    "environment": (ENVIRONMENT, type(None)), "passes": INT_OR_NONE, "kind": str, "program": ListOf(str),
    "gpus": ListOf(dict), "parts": ListOf(dict), "kernels_profiled": INT_OR_NONE, "command": str,
    "replay": (Obj({"mode": str, "why": str}, required=("mode", "why")), str),
})
SCHEMAS = {PLAN_FILE: PLAN, RUN_FILE: RUN}

_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
          bool: "true/false", type(None): "null"}


def _kind(value: Any) -> str:
    return _NAMES.get(type(value), type(value).__name__)


def _expected(spec: Any) -> str:
    if isinstance(spec, tuple):  # any of these
        return " or ".join(dict.fromkeys(_expected(k) for k in spec))
    if isinstance(spec, Amount):
        return "an integer" if spec.whole else "an integer or a number"
    if isinstance(spec, Obj) or spec is dict or isinstance(spec, MapOf):
        return "an object"
    if isinstance(spec, ListOf):
        return "a list"
    return _NAMES.get(spec, spec.__name__)


def _is(value: Any, spec: Any) -> bool:
    if isinstance(spec, tuple):
        return any(_is(value, k) for k in spec)
    if isinstance(spec, Obj | MapOf) or spec is dict:
        return isinstance(value, dict)
    if isinstance(spec, ListOf):
        return isinstance(value, list)
    if isinstance(spec, Amount):
        return spec.fits(value)
    if isinstance(value, bool):  # JSON true is no count
        return spec is bool
    if isinstance(value, int) and spec is float:
        return True
    return isinstance(value, spec)


def problem(value: Any, spec: Any, field: str = "") -> str | None:
    """Where value departs from spec, as "FIELD is X, expected Y", or None when it conforms. A tuple
    spec is any of its members (the first one the value's type fits is followed inside)."""
    if not _is(value, spec):
        return f"{field + ' is' if field else 'holds'} {_kind(value)}, expected {_expected(spec)}"
    if isinstance(spec, tuple):
        return problem(value, next(k for k in spec if _is(value, k)), field)
    if isinstance(spec, Amount) and spec.bad(value):
        return f"{field + ' is' if field else 'holds'} {value!r}, expected {spec.what} from 0 to below 2**63"
    if isinstance(spec, Obj):
        for key in spec.required:
            if key not in value:
                return f"{field + '.' if field else ''}{key} is missing"
        for key, sub in spec.fields.items():
            if key in value and (found := problem(value[key], sub, f"{field + '.' if field else ''}{key}")):
                return found
    elif isinstance(spec, ListOf):
        for i, item in enumerate(value):
            if found := problem(item, spec.item, f"{field}[{i}]"):
                return found
    elif isinstance(spec, MapOf):
        for key, item in value.items():
            if found := problem(item, spec.value, f"{field}.{key}"):
                return found
    return None


def check(data: Any, name: str, where: Path) -> None:
    """ReportError naming the file and the first field that departs from the file's schema."""
    found = problem(data, SCHEMAS[name])
    if found:
        raise ReportError(f"{where}: {found}: {DAMAGED}")


def read_plan(folder: Path) -> Plan | None:
    """plan.json of a run folder, checked; None when the folder has none."""
    return _read(folder, PLAN_FILE)


def read_run(folder: Path) -> RunRecord | None:
    """run.json of a run folder, checked; None when the folder has none."""
    return _read(folder, RUN_FILE)


DAMAGED = "the run folder is damaged (restore the file, or measure again)"


def _read(folder: Path, name: str) -> Any:
    path = folder / name
    if not require_file(path, DAMAGED):  # a folder or FIFO named plan.json is no "no plan"
        return None
    data = read_json(path, "the run folder is damaged")
    check(data, name, path)
    return data


def write_plan(folder: Path, plan: Mapping[str, Any]) -> Path:
    """plan.json, atomically; a plan that breaks the schema is a bug here, not a file for readers."""
    return _write(folder, PLAN_FILE, plan)


def write_run(folder: Path, run: Mapping[str, Any]) -> Path:
    """run.json, atomically (see write_plan)."""
    return _write(folder, RUN_FILE, run)


def _write(folder: Path, name: str, data: Mapping[str, Any]) -> Path:
    found = problem(data, SCHEMAS[name])
    if found:  # values come from variants' models and programs' traces too
        raise UsageError(f"cannot write {folder / name}: {found} (a variant's model or the program gave a "
                         "value of the wrong kind)")
    return write_json(folder / name, dict(data))


# --- what the records mean ----------------------------------------------------------------------------------


def needs_rerun(outcome: Mapping[str, Any]) -> bool:
    """A config to measure again: it did not finish ok, or ncu profiled no kernel in its range."""
    return outcome.get("status") != "ok" or outcome.get("profiled") is False


def rerun_list(outcomes: Sequence[Mapping[str, Any]]) -> list[str]:
    """run.json's 'rerun': the ranges of the configs that need a rerun."""
    return [str(c.get("range")) for c in outcomes if needs_rerun(c)]


def partial_reports_expected(run: Mapping[str, Any]) -> bool:
    """After Ctrl-C or a runner crash a report may end in a damaged launch: drop it, keep the rest."""
    return bool(run.get("interrupted")) or any(a.get("returncode") for a in run.get("attempts", []))


def plan_from_trace(records: Sequence[Mapping[str, Any]], program: Sequence[str] | None = None,
                    metrics: Mapping[str, Any] | None = None) -> Plan:
    """The plan of a traced program: each trace record (memtraffic.runfolder.trace) is a config, numbered
    in program order; a record that is no config (a damaged line) is listed under 'skipped' with why.
    What `profile` writes, and what reading rebuilds when the run was killed first."""
    configs, skipped = [], []
    for r in records:
        found = problem(r, CONFIG)
        if found is None:
            configs.append({**r, "id": len(configs)})
        else:
            skipped.append({"range": str(r.get("range")), "reason": f"trace record: {found}"})
    plan: dict[str, Any] = {"version": 1, "kind": "profile", "program": list(program or []),
                            "configs": configs, "skipped": skipped}
    if metrics is not None:
        plan["metrics"] = dict(metrics)
    return plan  # type: ignore[return-value]
