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
from dataclasses import dataclass, replace
from pathlib import Path
from types import UnionType
from typing import (
    Annotated,
    Any,
    Literal,
    TypedDict,
    Union,
    cast,
    final,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from memtraffic.runfolder.paths import portable
from memtraffic.vocab.environment import Environment
from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.files import read_json, require_file, write_json
from memtraffic.vocab.units import LIMIT, OP_BYTES_LIMIT, fmt_bytes

PLAN_FILE = "plan.json"
RUN_FILE = "run.json"


class Amount:
    """A number from 0 up to (not including) 2**63, finite: bytes, FLOPs, a tensor's dimension. JSON
    writes whole numbers as floats at times (1e6), so a float is taken where `whole` is False. Records
    carry it as Annotated[int | float, Amount(...)]; the schema checks it."""

    def __init__(self, what: str, whole: bool = False, most: float = LIMIT):
        self.what, self.whole, self.most = what, whole, most

    def bad(self, value: object) -> bool:
        if not isinstance(value, (int, float)):
            return True
        return not 0 <= value < LIMIT or value > self.most  # NaN fails this too

    def expected(self, value: object) -> str:
        """What the value should have been, for the error line."""
        if isinstance(value, (int, float)) and 0 <= value < LIMIT:  # a count, past what it may be
            return f"{self.what} from 0 to {fmt_bytes(self.most)} (more than any GPU holds)"
        return f"{self.what} from 0 to below 2**63"


Bytes = Annotated[int | float, Amount("bytes")]
# An op's minimum: what it must read or write, never more than a GPU holds (units.OP_BYTES_LIMIT).
MIN_BYTES = Amount("bytes", most=OP_BYTES_LIMIT)
MinBytes = Annotated[int | float, MIN_BYTES]
Flops = Annotated[int | float, Amount("a count")]
Dimension = Annotated[int, Amount("a dimension", whole=True)]


class TensorEntry(TypedDict):
    """One tensor an op call or launch read or wrote (a traced config's inputs and outputs)."""

    shape: list[int]
    dtype: str


class _ConfigCore(TypedDict):
    """What every config holds (measure's and a traced program's alike)."""

    range: str  # the NVTX range its kernels run in
    op: str
    variant: str  # '' in a traced program's
    shape: list[Dimension]
    dtype: str
    params: dict[str, object]  # every parameter, defaults filled in (None: the variant picks at launch)
    min_read_bytes: MinBytes | None
    min_write_bytes: MinBytes | None
    pred_read_bytes: Bytes | None  # the variant's model (None in a traced program's)
    pred_write_bytes: Bytes | None
    model_flops: Flops | None


class _ConfigExtras(_ConfigCore, total=False):
    """What some configs of either kind hold."""

    min_note: str  # where the minimum is a bound rather than exact ('' when exact)
    gpu: int  # measure --gpus: the GPU it ran on
    part: int  # merge: the run it came from
    reports: list[str]  # merge: the reports that hold it
    nvtx_range: str  # merge: its range in those reports, when renamed ('RANGE|#2')


@final  # final: no subclass adds "kind", so type checkers tell the members of Config apart
class VariantConfig(_ConfigExtras):
    """measure's config: a shipped or user variant x shape x dtype x params. plan.json writes no `kind` for
    it: a config without one is a variant's."""

    id: int
    explicit_params: dict[str, object]  # those the user set (the range name holds these)


TraceKind = Literal["op", "region", "triton"]


class _TraceCore(_ConfigExtras):
    kind: TraceKind  # an aten op call, a user's region, a Triton launch
    seq: int  # program order of the op call, region or launch (the trace's)
    pid: int  # the process that made the call


class TraceRecord(_TraceCore, total=False):
    """One line of a traced program's trace (runfolder.trace.make_record): a config once the plan numbers
    it."""

    inputs: list[TensorEntry]
    outputs: list[TensorEntry]
    repeat: bool  # profile --distinct: a repeat of an earlier signature (not measured)
    reuses: str | None  # ... and the range whose measurement it reuses
    signature: str
    reads: list[list[int | None]]  # [storage, bytes] it must read (runfolder.trace)
    writes: list[list[int | None]]  # [storage, bytes] it must write
    freed: list[int]  # storages freed since the previous record
    freed_after: list[int]  # storages freed after it, before the traced region ended


@final
class TracedConfig(TraceRecord):
    """profile's config: a trace record numbered in program order."""

    id: int


# One planned config. `"kind" in config` tells the two apart, for the schema (records.problem) and for type
# checkers (both members are final): a traced program's config has a kind, a variant's none.
Config = VariantConfig | TracedConfig

class _SkippedWhy(TypedDict):
    reason: str  # every writer says why (collect.planning, trace_records)


class Skipped(_SkippedWhy, total=False):
    """A config the plan leaves out, and why (a variant that does not take a shape, a damaged record): a
    variant's names its variant, op, shape and dtype, a trace record's its range."""

    range: str
    variant: str
    op: str
    shape: list[int]
    dtype: str
    params: dict[str, object]
    explicit_params: dict[str, object]


class Shard(TypedDict):
    """measure --shard I/N: which part of which whole plan this run measured (merge checks them)."""

    index: int
    count: int
    plan_configs: int
    plan_digest: str


class _PlanConfigs(TypedDict):
    configs: list[Config]


class Plan(_PlanConfigs, total=False):
    skipped: list[Skipped]
    version: int
    seed: int
    kind: str  # 'profile' for a traced program
    program: list[str]
    status_file: str  # measure: the runner's status.jsonl, or one per GPU (by GPU index)
    status_files: dict[str, str]
    variant_files: list[str]
    metrics: dict[str, object]  # the metric set's record (ncu.session)
    options: dict[str, object]  # the ncu options that change the numbers (clock and cache control)
    merged_from: list[str]
    shard: Shard


class Attempt(TypedDict, total=False):
    """One ncu process of a run."""

    argv: list[str]
    returncode: int | None
    passes: int | None
    no_kernels_message: bool | None
    gpu: int
    part: int
    cuda_visible_devices: str
    t_start: float  # Unix time ncu was started, and when it exited (measure): with the runner's "t"
    t_end: float  # stamps, where a GPU's time went (start-up, configs, the report written)


class _OutcomeCore(TypedDict):
    """What every config's line says (runfolder.builder.outcomes writes it, merge keeps it)."""

    id: int
    range: str
    status: str  # 'ok', 'failed', 'not run'
    error: str | None
    profiled: bool | None  # ncu profiled a kernel in its range (None: not yet analyzed)


class Outcome(_OutcomeCore, total=False):
    """run.json's line for one config: how it went (a line merge found no config for has only the core)."""

    kernels: int  # how many launches ncu profiled in its range
    variant: str
    op: str
    dtype: str
    max_err: float | None  # the runner's check of the output against the reference
    params: dict[str, object]
    shape: list[Dimension]
    gpu: int
    part: int


class NcuRan(TypedDict):
    """What a pass of ncu left (collect.measure.profile_plan): each ncu process started, the reports they
    wrote, and whether the user interrupted."""

    attempts: list[Attempt]
    reports: list[str]
    interrupted: bool


class GpuRan(NcuRan):
    """What one GPU's ncu left (measure --gpus), and why it failed (the other GPUs went on)."""

    error: str | None
    wall_time_s: float


class GpuRun(GpuRan):
    """measure --gpus: one GPU's part of the run (run.json's "gpus")."""

    index: int
    cuda_visible_devices: str
    configs: list[int]  # the config ids it ran
    predicted_cost_s: float
    status_file: str


class NcuPass(NcuRan, total=False):
    """A pass of measure's ncu (profile_plan, or profile_gpus with one entry per GPU)."""

    gpus: list[GpuRun]


class Remeasured(TypedDict):
    """A config the second pass of `measure --metrics auto` measured again: why (its first look's L1
    efficiencies), how it went there, and whether its row takes the second pass's counters."""

    id: int
    range: str
    eff_l1_ld: float | None
    eff_l1_st: float | None
    status: str  # the second pass's: 'ok', 'failed', 'not run'
    error: str | None
    taken: bool  # its row has the second pass's counters (else its first look's)


class SecondPass(TypedDict, total=False):
    """run.json's "second_pass" (measure --metrics auto): the configs whose first look needs the full set,
    measured again with it by the same runner on the same GPUs."""

    first_look: str  # the first pass's metric set (run.json's metric_names are its names)
    metric_set: str
    metric_names: list[str]
    rule: str
    configs: list[Remeasured]
    attempts: list[Attempt]
    reports: list[str]
    gpus: list[GpuRun]
    interrupted: bool
    error: str | None  # why the second pass failed as a whole (its configs keep their first look)
    wall_time_s: float


class Replay(TypedDict):
    """How ncu replayed a profile (run.json's "replay"): "kernel" (each kernel) or "range" (each measured
    op, region or Triton launch range as one unit), and why that mode."""

    mode: str
    why: str


class TimingPass(TypedDict):
    """profile --replay range: the program run again without ncu, its kernels timed (collect.profile.
    timing_pass): its argv, exit code, wall time and the kernels it timed (None: it wrote no times)."""

    argv: list[str]
    returncode: int
    wall_time_s: float
    kernels: int | None


class VariedSignature(TypedDict):
    """A signature measured more than once (a value-dependent op's first V calls, or --distinct K > 1)
    whose calls' counters differ beyond the premise check's tolerances (analysis.reuse.varied)."""

    op: str
    signature: str
    calls: int  # measured calls compared
    differs: str  # the counters that differ, comma-separated
    l1_ld_bytes_spread: float  # (max - min) / max over the calls
    l1_st_bytes_spread: float
    dram_rd_bytes_spread: float


class RunRecord(TypedDict, total=False):
    """run.json: what ran, on what, how each ncu process and config went."""

    attempts: list[Attempt]
    reports: list[str]
    interrupted: bool
    returncode: int | None
    configs: list[Outcome]
    rerun: list[str]
    missing: list[str]
    skipped: list[Skipped]
    environment: Environment | None
    passes: int | None
    kind: str
    program: list[str]
    gpus: list[GpuRun]  # measure --gpus: one entry per GPU
    parts: list[dict[str, object]]  # merge: one entry per run merged
    kernels_profiled: int | None
    command: str
    metric_set: str | None
    metric_names: list[str] | None  # None: merged from runs that did not say
    metric_notes: list[str]
    torch_ops: bool
    ops: list[str]  # profile --ops: only these ops' calls measured
    traced_from: str | None
    distinct: int
    value_calls: int  # profile: calls measured per value-dependent signature (0: every call)
    varied: list[VariedSignature]  # profile: signatures measured more than once whose counters differ
    shard: Shard
    started: str  # UTC times (host.machine.utc_now)
    finished: str
    merged: str  # merge: when
    notes: list[str]  # merge: what the runs merged differ in
    wall_time_s: float
    error: str  # why ncu failed
    params: list[str]  # measure's --param options
    variants: list[str]  # what measure measured
    shapes: list[str]
    dtypes: list[str]
    clock_control: str | None
    cache_control: str | None
    source: bool  # per-line counters collected
    triton: bool  # profile --triton
    sweep: dict[str, str]  # measure --sweep: the file and its text
    rerun_of: str  # measure --rerun: the run folder
    timings: dict[str, float]  # where measure's own time went
    timing_only: bool  # a timing-only run (collect.timing_only) and why
    timing_reason: str
    timing_source: str  # older timing-only runs: what time_source now says
    # Where the rows' times come from (runfolder.timings: NCU_TIME, TIMER, TIMER_PASS, NO_KERNEL_TIME).
    time_source: str
    timing_pass: TimingPass | None  # profile: the pass without ncu that timed the kernels
    nvtx_include_applied: str
    first_kernel_s: float | None  # profile: the program's start-up, before ncu profiled anything
    startup: dict[str, float]  # profile: that start-up split (collect.profile.startup_split)
    analysis_s: float  # profile: reading the report and analyzing it, after ncu
    replay: Replay | str  # profile: how ncu replayed (collect.profile.choose_replay)
    second_pass: SecondPass  # measure --metrics auto: the configs measured again with the full set


# --- the schema: derived from the TypedDicts above ------------------------------------------------------
# Each type hint of a record is a spec: str, int, float, bool, None, X | Y, list[X], dict[str, X], object
# (anything) or a TypedDict (an object; its required keys must be there, its known keys conform).

SCHEMAS: dict[str, type] = {PLAN_FILE: Plan, RUN_FILE: RunRecord}

_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
          bool: "true/false", type(None): "null"}
_FIELDS: dict[type, dict[str, object]] = {}  # a TypedDict's resolved field hints (types, unions, Annotated)


def _fields(record: type) -> dict[str, object]:
    if record not in _FIELDS:
        _FIELDS[record] = get_type_hints(record, include_extras=True)
    return _FIELDS[record]


def _kind(value: object) -> str:
    return _NAMES.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class _Shape:
    """A type hint resolved once (the validator walks hundreds of thousands of values in a large plan):
    kind is "any", "none", "literal" (values), "union" (members), "annotated" (inner, amount), "record"
    (a TypedDict: fields, required), "dict" / "list" (item: the values' or entries' shape, None when the
    hint names no item type) or "type" (isinstance of spec: str, int, float, bool, or a bare dict/list)."""

    kind: str
    spec: Any  # the type hint (typing objects: no static type)
    members: tuple[_Shape, ...] = ()
    inner: _Shape | None = None
    amount: Amount | None = None
    item: _Shape | None = None
    fields: tuple[tuple[str, _Shape], ...] = ()
    values: tuple[object, ...] = ()  # a Literal's
    kinds: tuple[tuple[_Shape, _Shape | None], ...] = ()  # a union's records, each with its "kind" field
    required: frozenset[str] = frozenset()
    # The value types that conform at sight (_plain), each with the amount its value must be in, if any.
    leaf: dict[type, Amount | None] | None = None


_SHAPES: dict[int, tuple[object, _Shape]] = {}  # id(hint) -> (hint, shape): the hint kept alive with its id


def _shape(spec: Any) -> _Shape:  # a type hint: typing's introspection takes Any
    hit = _SHAPES.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    origin = get_origin(spec)
    if origin is Annotated:
        inner, *meta = get_args(spec)
        shape = _Shape("annotated", spec, inner=_shape(inner),
                       amount=next((a for a in meta if isinstance(a, Amount)), None))
    elif origin is Literal:
        shape = _Shape("literal", spec, values=get_args(spec))
    elif origin in (Union, UnionType):
        members = tuple(_shape(k) for k in get_args(spec))
        shape = _Shape("union", spec, members=members, kinds=tuple(
            (k, dict(k.fields).get("kind")) for k in members if k.kind == "record"))
    elif spec is object or spec is Any:
        shape = _Shape("any", spec)
    elif spec is None or spec is type(None):
        shape = _Shape("none", spec)
    elif is_typeddict(spec):
        _SHAPES[id(spec)] = (spec, _Shape("record", spec))  # a record that holds itself
        shape = _Shape("record", spec, fields=tuple((k, _shape(v)) for k, v in _fields(spec).items()),
                       required=frozenset(spec.__required_keys__))
    elif origin is dict:
        shape = _Shape("dict", spec, item=_shape(get_args(spec)[1]) if get_args(spec) else None)
    elif origin is list:
        shape = _Shape("list", spec, item=_shape(get_args(spec)[0]) if get_args(spec) else None)
    else:
        shape = _Shape("type", spec)
    shape = replace(shape, leaf=_leaf_types(shape))
    _SHAPES[id(spec)] = (spec, shape)
    return shape


def _leaf_types(shape: _Shape) -> dict[type, Amount | None] | None:
    """The exact Python types a value of this shape may have and conform with no look inside (a plain
    str/int/float/bool type, None, an Annotated amount of them, or a union of those: the first member a
    type fits decides, as in _problem), each with its amount; None for anything else (containers)."""
    if shape.kind == "type" and shape.spec in _LEAVES:
        return dict.fromkeys(_LEAVES[shape.spec])
    if shape.kind == "none":
        return {type(None): None}
    if shape.kind == "annotated" and shape.inner is not None and shape.inner.leaf is not None:
        if any(amount is not None for amount in shape.inner.leaf.values()):
            return None  # an amount inside an amount: not in our records
        return dict.fromkeys(shape.inner.leaf, shape.amount)
    if shape.kind == "union" and all(m.leaf is not None for m in shape.members):
        found: dict[type, Amount | None] = {}
        for member in shape.members:
            for kind, amount in (member.leaf or {}).items():
                found.setdefault(kind, amount)
        return found
    return None


def _expected(shape: _Shape) -> str:
    if shape.kind == "annotated" and shape.inner is not None:
        return _expected(shape.inner)
    if shape.kind == "union":  # any of these
        return " or ".join(dict.fromkeys(_expected(k) for k in shape.members))
    if shape.kind == "literal":
        return " or ".join(repr(v) for v in shape.values)
    if shape.kind in ("record", "dict") or shape.spec is dict:
        return "an object"
    if shape.kind == "list" or shape.spec is list:
        return "a list"
    return _NAMES.get(shape.spec, getattr(shape.spec, "__name__", str(shape.spec)))


def _is(value: object, shape: _Shape) -> bool:
    kind = shape.kind
    if kind == "type":
        if isinstance(value, bool):  # JSON true is no count
            return shape.spec is bool
        if isinstance(value, int) and shape.spec is float:
            return True
        return isinstance(value, shape.spec)
    if kind == "annotated" and shape.inner is not None:
        return _is(value, shape.inner)
    if kind == "union":
        return any(_is(value, k) for k in shape.members)
    if kind == "any":
        return True
    if kind == "literal":
        return type(value) in (str, int) and value in shape.values
    if kind == "none":
        return value is None
    return isinstance(value, list if kind == "list" else dict)


def problem(value: object, spec: object, field: str = "") -> str | None:
    """Where value departs from spec (a record's type hint), as "FIELD is X, expected Y", or None when it
    conforms. In a union the first member the value's type fits is followed inside; in a union of records
    the one its "kind" names (none: the member without a "kind" field), as Config's members."""
    return _problem(value, _shape(spec), field)


def _problem(value: Any, shape: _Shape, field: str) -> str | None:
    if not _is(value, shape):
        return f"{field + ' is' if field else 'holds'} {_kind(value)}, expected {_expected(shape)}"
    if shape.kind == "union":
        member = next(k for k in shape.members if _is(value, k))
        if member.kind == "record":
            member, bad = _record_member(value, shape, field)
            if bad:
                return bad
        return _problem(value, member, field)
    if shape.amount is not None and shape.amount.bad(value):
        where = field + " is" if field else "holds"
        return f"{where} {value!r}, expected {shape.amount.expected(value)}"
    # Containers: a value that conforms at sight (_plain) is not walked, and a field's name is only
    # spelled out for a value that does not (a large plan has millions of values).
    prefix = field + "." if field else ""
    if shape.kind == "record":
        if not shape.required <= value.keys():
            missing = next(key for key, _ in shape.fields if key in shape.required and key not in value)
            return f"{prefix}{missing} is missing"
        for key, sub in shape.fields:
            if key in value and not _plain(value[key], sub) and (
                    found := _problem(value[key], sub, f"{prefix}{key}")):
                return found
    elif shape.kind == "list" and shape.item is not None:
        item = shape.item
        for i, entry in enumerate(value):
            if not _plain(entry, item) and (found := _problem(entry, item, f"{field}[{i}]")):
                return found
    elif shape.kind == "dict" and shape.item is not None:
        item = shape.item
        for key, entry in value.items():
            if not _plain(entry, item) and (found := _problem(entry, item, f"{prefix}{key}")):
                return found
    return None


def _record_member(value: dict[str, object], union: _Shape, field: str) -> tuple[_Shape, str | None]:
    """The record of a union that a JSON object is, by its "kind": the member whose "kind" field takes it,
    or with no "kind" the member that has no such field; a kind none takes is the problem."""
    first = union.kinds[0][0]
    if len(union.kinds) == 1:
        return first, None
    if "kind" not in value:
        return next((k for k, f in union.kinds if f is None), first), None
    found = next((k for k, f in union.kinds if f is not None and _is(value["kind"], f)), None)
    if found is not None:
        return found, None
    kinds = " or ".join(repr(v) for _, f in union.kinds if f is not None for v in f.values)
    where = f"{field}.kind" if field else "kind"
    return first, f"{where} is {value['kind']!r}, expected {kinds} or none"


_LEAVES = {str: (str,), int: (int,), float: (float, int), bool: (bool,)}


def _plain(value: object, shape: _Shape) -> bool:
    """True when `value` conforms to `shape` at sight: a str, int, float, bool or None where such a type
    (a union of them, one with an amount in range) is expected, or a list of such values. False: not
    sure, ask _problem (which also says where a value departs)."""
    accepted = shape.leaf
    if accepted is not None:
        kind = type(value)
        if kind not in accepted:
            return False
        amount = accepted[kind]
        return amount is None or not amount.bad(value)
    item = shape.item
    if shape.kind == "list" and type(value) is list and item is not None and item.leaf is not None:
        return all(_plain(entry, item) for entry in value)
    return False


def storage_problem(config: Mapping[str, object]) -> str | None:
    """Where a traced config's [storage, bytes] pairs claim more bytes than any GPU holds (or fewer than
    none), as problem() says it; None when they do not. A pair of another form is left to its reader
    (analysis.floor leaves it out)."""
    for key in ("reads", "writes"):
        pairs = config.get(key)
        for i, pair in enumerate(pairs if isinstance(pairs, list) else []):
            if isinstance(pair, list) and len(pair) == 2 and type(pair[1]) is int and \
                    not 0 <= pair[1] <= OP_BYTES_LIMIT:
                return f"{key}[{i}][1] is {pair[1]!r}, expected {MIN_BYTES.expected(pair[1])}"
    return None


def check(data: object, name: str, where: Path) -> None:
    """ReportError naming the file and the first field that departs from the file's schema (and, in a plan,
    a traced config's pairs past what a GPU holds: storage_problem)."""
    found = problem(data, SCHEMAS[name])
    if not found and name == PLAN_FILE:  # the schema held: a plan's configs are a list of mappings
        found = next((f"configs[{i}].{bad}" for i, c in enumerate(cast(Plan, data)["configs"])
                      if ("reads" in c or "writes" in c) and (bad := storage_problem(c))), None)
    if found:
        raise ReportError(f"{where}: {found}: {DAMAGED}")


def read_plan(folder: Path) -> Plan | None:
    """plan.json of a run folder, checked; None when the folder has none."""
    return cast("Plan | None", _read(folder, PLAN_FILE))  # checked against Plan by _read


def read_run(folder: Path) -> RunRecord | None:
    """run.json of a run folder, checked; None when the folder has none."""
    return cast("RunRecord | None", _read(folder, RUN_FILE))  # checked against RunRecord by _read


DAMAGED = "the run folder is damaged (restore the file, or measure again)"


def _read(folder: Path, name: str) -> object:
    path = folder / name
    if not require_file(path, DAMAGED):  # a folder or FIFO named plan.json is no "no plan"
        return None
    data: object = read_json(path, "the run folder is damaged")
    check(data, name, path)
    return data


def plan_file(stem: str = "") -> str:
    """The name of a plan in a run folder: plan.json, or plan{stem}.json for a pass of its own (measure's
    second pass: 'plan-second.json')."""
    return PLAN_FILE.replace(".json", f"{stem}.json")


def write_plan(folder: Path, plan: Plan, checked: bool = False, stem: str = "") -> Path:
    """plan.json (plan{stem}.json: see plan_file), atomically; a plan that breaks the schema is a bug here,
    not a file for readers. `checked`: every config was just checked (plan_from_trace), so the plan is not
    walked again: a traced program's plan holds thousands of configs."""
    return _write(folder, PLAN_FILE, plan, checked, rows=True, file=plan_file(stem))


def write_run(folder: Path, run: RunRecord) -> Path:
    """run.json, atomically (see write_plan), its paths relative (runfolder/paths.py: a run you can share)."""
    return _write(folder, RUN_FILE, portable(run, folder, Path.cwd()))


def _write(folder: Path, name: str, data: Mapping[str, object], checked: bool = False,
           rows: bool = False, file: str | None = None) -> Path:
    """`data` checked against the schema of `name` and written to folder/`file` (default: `name`)."""
    path = folder / (file or name)
    found = None if checked else problem(data, SCHEMAS[name])
    if found:  # values come from variants' models and programs' traces too
        raise UsageError(f"cannot write {path}: {found} (a variant's model or the program gave a "
                         "value of the wrong kind)")
    return write_json(path, dict(data), rows=rows)


# --- what the records mean ----------------------------------------------------------------------------------


def configs_of(plan: Plan | None) -> list[Config]:
    """The plan's configs ([] without a plan)."""
    return plan["configs"] if plan else []


def status_files(plan: Plan) -> list[str]:
    """The runner's status files of a measure plan: one per GPU (measure --gpus), else its one (status.jsonl
    where the plan names none)."""
    per_gpu = plan.get("status_files")
    return list(per_gpu.values()) if per_gpu else [plan.get("status_file", "status.jsonl")]


def merge_plans(plans: Sequence[Plan]) -> Plan:
    """Several plans as one (ids renumbered): e.g. variants that each need their own parameters."""
    configs: list[Config] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for plan in plans:
        for config in plan["configs"]:
            if config["range"] not in seen:
                seen.add(config["range"])
                renumbered = config.copy()
                renumbered["id"] = len(configs)
                configs.append(renumbered)
        skipped += plan.get("skipped", [])
    return {**plans[0], "configs": configs, "skipped": skipped}


def needs_rerun(outcome: Mapping[str, object]) -> bool:
    """A config to measure again: it did not finish ok, or ncu profiled no kernel in its range."""
    return outcome.get("status") != "ok" or outcome.get("profiled") is False


def rerun_list(outcomes: Sequence[Mapping[str, object]]) -> list[str]:
    """run.json's 'rerun': the ranges of the configs that need a rerun."""
    return [str(c.get("range")) for c in outcomes if needs_rerun(c)]


def partial_reports_expected(run: RunRecord) -> bool:
    """After Ctrl-C or a runner crash a report may end in a damaged launch: drop it, keep the rest."""
    again = run.get("second_pass", {})
    return bool(run.get("interrupted")) or bool(again.get("interrupted")) or any(
        a.get("returncode") for a in [*run.get("attempts", []), *again.get("attempts", [])])


# What every trace record holds (TraceRecord's required keys): readers (ops' table, analysis) index them.
TRACE_KEYS = tuple(k for k in _fields(TraceRecord) if k in TraceRecord.__required_keys__)


def trace_records(records: Sequence[Mapping[str, object]]) -> tuple[list[TraceRecord], list[Skipped]]:
    """The trace records (runfolder.trace.read_trace) that are configs, in order, and those that are not
    (a damaged line, a number out of range, a key missing), each with why: the one check of a trace."""
    good: list[TraceRecord] = []
    skipped: list[Skipped] = []
    for r in records:
        found = problem(r, TraceRecord) or storage_problem(r)
        if found is None:  # checked against TraceRecord just now
            good.append(cast(TraceRecord, r))
        else:
            skipped.append({"range": str(r.get("range")), "reason": f"trace record: {found}"})
    return good, skipped


def plan_from_trace(records: Sequence[Mapping[str, object]], program: Sequence[str] | None = None,
                    metrics: Mapping[str, object] | None = None) -> Plan:
    """The plan of a traced program: each trace record (memtraffic.runfolder.trace) is a config, numbered
    in program order; a record that is no config (trace_records) is listed under 'skipped' with why.
    What `profile` writes, and what reading rebuilds when the run was killed first."""
    good, skipped = trace_records(records)
    configs: list[Config] = [{**r, "id": i} for i, r in enumerate(good)]
    plan: Plan = {"version": 1, "kind": "profile", "program": list(program or []), "configs": configs,
                  "skipped": skipped}
    if metrics is not None:
        plan["metrics"] = dict(metrics)
    return plan
