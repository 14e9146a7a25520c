"""What fusing would save: the groups of traced op calls whose intermediates never leave the group.

The trace records (runfolder.trace) name the storages each call reads and writes and the storages freed
since the call before, so every value can be followed from the call that writes it to the calls that read
it. A call is one of three kinds:
- it moves nothing (a view, a detach): left out;
- a barrier: a call with FLOPs by torch's formulas (matmuls, convolutions, attention), an op compilers
  call as it is (EXTERN), a matmul template kernel, or a record without storages (a region, a kernel
  outside Inductor): it stays a kernel of its own;
- fusible: everything else (elementwise ops, reductions, norms, losses and their backward, copies,
  optimizer updates).
A call's level is the number of barriers on the longest path of data that leads to it (records without
storages cut the program into stretches, counted apart). Fusible calls of one level joined by a value one
writes and the other reads form a group: any path of data that leaves such a group and comes back runs
through a barrier, whose level is higher, so the group can be one kernel without recomputing anything.
A call that reads nothing (a fill such as ones_like) joins the group of the first call that reads it.

Per group: the eager minimum (the sum of its calls' minimums); the fused minimum (every value read from
outside the group once, every value it writes that a call outside it reads, or that is still alive when
the trace ends, written once; never above the eager minimum), a lower bound: a value written for later
calls is left out (`recomputable_bytes`) where they could compute it again instead of reading it, as
Inductor does with a residual sum: POINTWISE calls made it from values the fused program holds (from before
the trace, a matmul's output, or what another group writes; a freed value can be kept longer, costing
memory, not traffic), none of them overwritten before its last reader, and it is freed before the trace
ends (still held, anything after the trace may read it; overwritten in place, the new value keeps part of
its bytes); the time its calls' kernels take now; the fused time, a floor (the fused minimum at the
measured copy roof, its FLOPs at the compute roof of their dtype, and at least one launch: the roofs'
empty kernel); the saving (time - fused time, never below 0); and how to get it (HOW_KINDS: a
launch-bound chain, else a chain that saves bytes, else a write its readers could recompute, else a
matmul epilogue, else a faster kernel). A group reading a matmul's output and writing at least as much (an
elementwise epilogue) carries what fusing it into that matmul would remove besides: its reads of the
output, and the matmul's write of it where only the group reads it and nothing keeps it. A group holding
calls whose minimum is a bound (their `min_note`) counts them in `bound_calls`; calls the run measured no
kernel for in `unmeasured_calls`.

`match` pairs each Inductor kernel of a compiled run (its `fused_aten`) with the group of an eager run
of the same program whose ops it fused, so the predicted fused floor stands beside what Inductor reached:
by the results it writes (the values held when the trace ends, the n-th of their size, written by the
same group in eager), else by the op types it shares most (ties: the group that outlives with buffers of
the sizes the kernel writes, then the one with as many matmuls before it); a split reduction's first stage
goes with its next stages, and where those belong to several groups, the groups are compared together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from memtraffic.analysis.time_notes import FLOP_ROOF, LAUNCH_NEAR
from memtraffic.vocab.launches import measured_range

# Ops a compiler calls as they are (a library kernel or a host synchronisation), never fuses.
EXTERN = {"aten.sort", "aten.topk", "aten.nonzero", "aten.unique", "aten._unique2", "aten.randperm",
          "aten.multinomial", "aten._local_scalar_dense", "aten.item"}
# Op types Inductor names among a kernel's fused ops that move no data of their own (ignored in matching).
VIEWS = {"aten.view", "aten._unsafe_view", "aten.reshape", "aten.permute", "aten.t", "aten.transpose",
         "aten.expand", "aten.squeeze", "aten.unsqueeze", "aten.slice", "aten.select", "aten.detach",
         "aten.alias", "aten.as_strided", "aten.unbind", "aten.split"}
TOP = 5  # the groups `memtraffic floor` shows
# Op types that compute each element of their one output from the elements at its index in their inputs
# (broadcasting included), deterministically, into a new tensor (their in-place and out= forms are not
# these), and fills of a constant. Whoever reads such an output can compute it again from what it was
# computed from. Leaving an op out only keeps a write the fused minimum could drop; an op that reduces,
# gathers, draws random numbers or writes into an existing tensor must never be added.
POINTWISE = {f"aten.{name}" for name in (
    "add", "sub", "rsub", "mul", "div", "neg", "reciprocal", "abs", "sign", "exp", "exp2", "expm1", "log",
    "log2", "log1p", "sqrt", "rsqrt", "pow", "sin", "cos", "tanh", "sigmoid", "erf", "relu", "gelu",
    "silu", "leaky_relu", "hardtanh", "elu", "softplus", "clamp", "clamp_min", "clamp_max", "maximum",
    "minimum", "where", "lerp", "addcmul", "addcdiv", "eq", "ne", "lt", "le", "gt", "ge", "logical_not",
    "logical_and", "logical_or", "bitwise_not", "_to_copy", "gelu_backward", "silu_backward",
    "sigmoid_backward", "tanh_backward", "threshold_backward", "ones_like", "zeros_like", "full_like",
    "ones", "zeros", "full", "scalar_tensor")}
SOURCES_MAX = 64  # a value computed from more values than this is taken as not recomputable

# How to get a group's saving: the kind, for the legend and the JSON (views.floor_table.how_text says it).
HOW_KINDS = {
    "compile": "torch.compile (Inductor) would fuse its calls into one kernel: intermediates stay on chip",
    "fuse": "its kernels (generated ones among them) fused into one: the intermediates stay on chip",
    "recompute": ("its readers compute its output again from what they keep instead of reading it "
                  "(torch.compile does so in the kernels it fuses; a matmul needs a prologue)"),
    "epilogue": "a matmul epilogue: computed as the matmul writes its output, never read back",
    "graphs": "launch-bound: CUDA graphs (or one fused kernel) remove the launches",
    "kernel": "no intermediates to fuse: a faster kernel for it (torch.compile's, or one written by hand)",
    "at floor": "at its fused floor: nothing to gain",
}


@dataclass
class How:
    """How to get a group's saving: `kind` (a key of HOW_KINDS) and the numbers its sentence gives."""

    kind: str
    saved_bytes: int = 0  # eager - fused minimum: the traffic fusing the group removes
    recomputed_bytes: int = 0  # of those, the writes for later calls that they could compute again
    matmul: str = ""  # the matmul whose output the group reads ('' when none)
    epilogue_bytes: int = 0  # what fusing the group into that matmul's epilogue removes besides
    launches: int = 0  # the kernels its calls launch now


@dataclass
class Group:
    """A fusion group: its calls, minimums, time now and at the fused floor (seconds), and how."""

    ops: list[str]  # one op name per call, in program order
    seqs: list[int]  # the calls' trace seq numbers
    eager_min_bytes: int
    fused_min_bytes: int
    time_s: float
    fused_time_s: float
    saving_s: float
    how: How
    kernels: int = 0  # kernels measured for its calls
    recomputable_bytes: int = 0  # what eager writes for later calls that they could compute again instead
    bound_calls: int = 0  # calls whose minimum is a bound (min_note): the group's bytes are too
    unmeasured_calls: int = 0  # calls without a measured kernel: their time is not in time_s
    after_matmuls: int = 0  # barriers with FLOPs before its first call (matching by position)
    out_sizes: list[int] = field(default_factory=list)  # bytes of each value it writes that outlives it
    results: list[Result] = field(default_factory=list)  # the values it writes still held when the trace ends

    @property
    def calls(self) -> int:
        return len(self.ops)

    def op_types(self) -> set[str]:
        return {base(op) for op in self.ops}

    def to_dict(self) -> dict[str, object]:
        return {"ops": self.ops, "calls": self.calls, "seqs": self.seqs,
                "eager_min_bytes": self.eager_min_bytes, "fused_min_bytes": self.fused_min_bytes,
                "time_s": self.time_s, "fused_time_s": self.fused_time_s, "saving_s": self.saving_s,
                "how": vars(self.how), "kernels": self.kernels, "recomputable_bytes": self.recomputable_bytes,
                "bound_calls": self.bound_calls,
                "unmeasured_calls": self.unmeasured_calls}


# A value still held when the trace ends (a gradient, an output): (bytes, how many such values of its size
# the program wrote before it). Two runs of one program write the same results.
Result = tuple[int, int]


@dataclass
class Kernel:
    """An Inductor kernel launch of a compiled run: the aten ops it fused and its measured time."""

    name: str
    seq: int
    fused_aten: list[str]
    time_s: float
    after_matmuls: int
    min_bytes: int  # its own minimum (the launch's buffers)
    write_sizes: list[int] = field(default_factory=list)  # bytes of each buffer it writes
    # the generated kernels (positions in Fusion.kernels) that read what it writes, where nothing else reads
    # it: a split reduction's next stages
    feeds: list[int] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)  # the values it writes still held at the end


@dataclass
class Fusion:
    """The fusion groups of a run (largest saving first) and its Inductor kernels; `note` says why there
    are none where the run cannot tell."""

    groups: list[Group] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    note: str = ""
    results: dict[int, int] = field(default_factory=dict)  # bytes -> how many results of that size

    @property
    def saving_s(self) -> float:
        return sum(g.saving_s for g in self.groups)


@dataclass
class Match:
    """An Inductor kernel of the compiled run beside the eager group whose ops it fused. Where one kernel
    serves several groups (fused across them), those groups are compared together: `groups` names them,
    and the group_* and fused_* numbers are their sums."""

    kernel: str
    ops: list[str]  # the kernel's fused aten ops
    group: int  # index into the eager run's groups (the first of `groups`)
    group_ops: list[str]  # the ops of every group in `groups`, in their order
    fused_time_s: float  # the groups' fused floor
    time_s: float  # the kernel's measured time
    group_time_s: float  # the groups' time in the eager run
    group_kernels_time_s: float  # every kernel of the compiled run matched to the groups
    min_bytes: int  # the kernel's own minimum
    group_fused_min_bytes: int
    group_kernels_min_bytes: int  # the minimums of every kernel matched to the groups
    groups: list[int] = field(default_factory=list)  # the groups compared together (one where none shares)

    @property
    def reached(self) -> float | None:
        """The share of the group's saving the compiled kernels reached (None: nothing to save)."""
        saving = self.group_time_s - self.fused_time_s
        return (self.group_time_s - self.group_kernels_time_s) / saving if saving > 0 else None

    def to_dict(self) -> dict[str, object]:
        return {"kernel": self.kernel, "ops": self.ops, "group": self.group, "group_ops": self.group_ops,
                "fused_time_s": self.fused_time_s, "time_s": self.time_s, "group_time_s": self.group_time_s,
                "group_kernels_time_s": self.group_kernels_time_s, "reached": self.reached,
                "min_bytes": self.min_bytes, "group_fused_min_bytes": self.group_fused_min_bytes,
                "group_kernels_min_bytes": self.group_kernels_min_bytes, "groups": self.groups}


def base(op: str) -> str:
    """'aten.add.Tensor' -> 'aten.add' (the op type Inductor names); other names unchanged."""
    parts = op.split(".")
    return ".".join(parts[:2]) if parts[0] == "aten" and len(parts) > 2 else op


def storage_pairs(value: object) -> list[tuple[int | None, int]]:
    """A record's [storage, bytes] pairs; a pair that is not one (a damaged trace line) is left out."""
    out: list[tuple[int | None, int]] = []
    for pair in value if isinstance(value, list) else []:
        if (isinstance(pair, list) and len(pair) == 2 and (pair[0] is None or type(pair[0]) is int)
                and type(pair[1]) is int and pair[1] >= 0):
            out.append((pair[0], pair[1]))
    return out


def _int(x: object) -> int:
    """A count from a record: 0 for anything but a non-negative int (a damaged field)."""
    return x if type(x) is int and x >= 0 else 0


def _has_flops(c: Mapping[str, object]) -> bool:
    return c.get("kind") == "op" and _int(c.get("model_flops")) > 0


def _pointwise(c: Mapping[str, object]) -> bool:
    """An op call of POINTWISE in its functional form (not in place, not out=)."""
    op = str(c.get("op") or "")
    return c.get("kind") == "op" and base(op) in POINTWISE and not op.split(".")[-1].endswith("out")


def _kind(c: Mapping[str, object]) -> str:
    """'skip' (moves nothing), 'barrier' or 'fusible' (see the module)."""
    if "reads" not in c and "writes" not in c:
        return "barrier" if _int(c.get("min_read_bytes")) + _int(c.get("min_write_bytes")) else "skip"
    if not storage_pairs(c.get("reads")) and not storage_pairs(c.get("writes")):
        return "skip"
    op = str(c.get("op") or "")
    if _has_flops(c) or base(op) in EXTERN or op.startswith("triton_tem_"):
        return "barrier"
    return "fusible"


@dataclass
class _Value:
    """One value a storage held: who wrote it (None: from before the trace), who read it, whether it was
    freed or overwritten before the trace ended, and the call that overwrote it while it was still held
    (None: never; a freed value can be kept longer, costing memory, not traffic)."""

    producer: int | None
    readers: list[int] = field(default_factory=list)
    dead: bool = False
    overwritten_at: int | None = None
    sources: tuple[_Value, ...] | None = None  # what pointwise calls computed it from (None: not so made)

    def leaves(self) -> tuple[_Value, ...]:
        return self.sources if self.sources is not None else (self,)


class _Sets:
    """Union-find over call indices."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, i: int) -> int:
        root = self.parent.setdefault(i, i)
        while root != self.parent[root]:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(b)] = self.find(a)


def fusion_groups(configs: Sequence[Mapping[str, object]], times: Mapping[str, tuple[float, int]],
                  measured: Mapping[str, float]) -> Fusion:
    """The fusion groups of trace records (plan configs, program order) with each call's measured time
    (range -> (seconds, kernels)) against the measured roofs; see the module."""
    if not any("reads" in c or "writes" in c for c in configs):
        return Fusion(note="not known for this run: its trace has no tensor identities")
    bw = float(measured.get("dram_Bps") or 0.0)
    if not bw:
        return Fusion(note="no measured roofs for this GPU (memtraffic roofs --refresh): no fused floor")
    kinds = [_kind(c) for c in configs]
    current: dict[tuple[int | None, int], _Value] = {}  # (process, storage) -> the value it holds
    reads: list[list[tuple[_Value | None, int]]] = [[] for _ in configs]
    writes: list[list[tuple[_Value | None, int]]] = [[] for _ in configs]
    level: list[tuple[int, int]] = []  # (stretch, barriers on the longest path of data)
    matmuls: list[int] = []  # barriers with FLOPs before each call
    stretch = seen_matmuls = 0
    sets = _Sets()
    filled: set[int] = set()  # fills (calls that read nothing) already joined to a reader
    def drop(pid: int | None, ptrs: object) -> None:
        for ptr in ptrs if isinstance(ptrs, list) else []:
            value = current.pop((pid, ptr), None) if type(ptr) is int else None
            if value is not None:
                value.dead = True

    for i, c in enumerate(configs):
        pid = given if type(given := c.get("pid")) is int else None  # a damaged pid: one process
        drop(pid, c.get("freed"))
        if "reads" not in c and "writes" not in c and kinds[i] == "barrier":
            stretch += 1  # a record without storages: nothing is followed across it
        for ptr, nbytes in storage_pairs(c.get("reads")):
            value = current.setdefault((pid, ptr), _Value(None)) if ptr is not None else None
            if value is not None:
                value.readers.append(i)
            reads[i].append((value, nbytes))
        depth = max((level[v.producer][1] + (kinds[v.producer] == "barrier") for v, _ in reads[i]
                     if v is not None and v.producer is not None), default=0)
        level.append((stretch, depth))
        matmuls.append(seen_matmuls)
        seen_matmuls += _has_flops(c)
        for ptr, nbytes in storage_pairs(c.get("writes")):
            value = None
            if ptr is not None:
                old = current.get((pid, ptr))
                if old is not None:
                    old.dead = True  # overwritten: the old value is gone from here on
                    old.overwritten_at = i
                value = current[(pid, ptr)] = _Value(i)
            writes[i].append((value, nbytes))
        made = writes[i][0][0] if len(writes[i]) == 1 else None
        if made is not None and _pointwise(c) and all(v is not None for v, _ in reads[i]):
            sources = {id(leaf): leaf for v, _ in reads[i] if v is not None for leaf in v.leaves()}
            if len(sources) <= SOURCES_MAX:
                made.sources = tuple(sources.values())
        drop(pid, c.get("freed_after"))
        if kinds[i] == "fusible":
            sets.find(i)
            for v, _ in reads[i]:
                if v is None or v.producer is None or kinds[v.producer] != "fusible":
                    continue
                if level[v.producer] == level[i]:
                    sets.union(v.producer, i)
                elif not reads[v.producer] and v.producer not in filled:  # a fill: its first reader's
                    filled.add(v.producer)
                    sets.union(i, v.producer)
    members: dict[int, list[int]] = {}
    for i in sets.parent:
        members.setdefault(sets.find(i), []).append(i)

    def kept(v: _Value) -> bool:
        """Whether the fused program holds `v` in memory: from before the trace, a barrier's output, or
        a value of a group that something outside the group reads or that outlives the trace."""
        p = v.producer
        if p is None or kinds[p] != "fusible":
            return True
        return not v.dead or any(r not in sets.parent or sets.find(r) != sets.find(p) for r in v.readers)

    counts: dict[int, int] = {}  # bytes -> results of that size so far
    results: list[list[Result]] = [[] for _ in configs]
    for i, ws in enumerate(writes):
        for v, nbytes in ws:
            if v is not None and not v.dead:
                results[i].append((nbytes, counts.get(nbytes, 0)))
                counts[nbytes] = counts.get(nbytes, 0) + 1
    groups = [_group(sorted(m), configs, reads, writes, times, measured, matmuls[min(m)], kept)
              for m in members.values()]
    for g, m in zip(groups, members.values(), strict=True):
        g.results = [r for i in sorted(m) for r in results[i]]
    groups.sort(key=lambda g: (-g.saving_s, g.seqs[0]))
    fused_of = {i: aten for i, c in enumerate(configs)  # Inductor's kernels: the aten ops each fused
                if isinstance(params := c.get("params"), dict)
                and isinstance(aten := params.get("fused_aten"), list)}
    generated = list(fused_of)
    position = {i: n for n, i in enumerate(generated)}
    kernels = []
    for i in generated:
        c = configs[i]
        readers = {r for v, _ in writes[i] if v is not None for r in v.readers}
        feeds = sorted(position[r] for r in readers) if readers and readers <= position.keys() else []
        fused_aten = [str(a) for a in fused_of[i]]
        kernels.append(Kernel(str(c.get("op")), _int(c.get("seq")), fused_aten,
                              times.get(measured_range(str(c.get("range"))), (0.0, 0))[0], matmuls[i],
                              _int(c.get("min_read_bytes")) + _int(c.get("min_write_bytes")),
                              [n for _, n in storage_pairs(c.get("writes"))], feeds, results[i]))
    return Fusion(groups, kernels, results=counts)


def _recomputable(v: _Value, inside: set[int], kept: Callable[[_Value], bool]) -> bool:
    """Whether the readers outside a group of `v`, a value it writes, could compute it again instead of
    reading it: pointwise calls made it from values the fused program holds and nothing overwrites before
    its last reader; `v` itself is freed (never overwritten in place, where the new value would keep part of
    its bytes) before the trace ends."""
    if v.sources is None or not v.dead or v.overwritten_at is not None:
        return False
    last = max((r for r in v.readers if r not in inside), default=None)
    return last is not None and all(
        kept(s) and (s.overwritten_at is None or s.overwritten_at > last) for s in v.sources)


def _group(m: list[int], configs: Sequence[Mapping[str, object]],
           reads: list[list[tuple[_Value | None, int]]], writes: list[list[tuple[_Value | None, int]]],
           times: Mapping[str, tuple[float, int]],
           measured: Mapping[str, float], after: int, kept: Callable[[_Value], bool]) -> Group:
    """One group's numbers (see the module); `m`: its calls' indices, `after`: matmuls before the first,
    `kept`: whether the fused program holds a value."""
    inside = set(m)
    eager = sum(_int(configs[i].get("min_read_bytes")) + _int(configs[i].get("min_write_bytes")) for i in m)
    read_in: dict[int, int] = {}  # id(value) -> bytes read of it from outside the group
    written: dict[int, int] = {}  # id(value) -> bytes written of it that outlive the group
    again: dict[int, int] = {}  # id(value) -> those bytes, of a value its readers could compute again
    loose = 0  # bytes of no one storage (rows a gather picks): counted whole
    feeds: dict[int, list[tuple[_Value, int]]] = {}  # a matmul call -> its values the group reads
    for i in m:
        for v, nbytes in reads[i]:
            if v is None:
                loose += nbytes
            elif v.producer not in inside:
                read_in[id(v)] = max(read_in.get(id(v), 0), nbytes)
                if v.producer is not None and _has_flops(configs[v.producer]):
                    feeds.setdefault(v.producer, []).append((v, nbytes))
        for v, nbytes in writes[i]:
            if v is None:
                loose += nbytes
            elif not v.dead or any(r not in inside for r in v.readers):
                written[id(v)] = max(written.get(id(v), 0), nbytes)
                if _recomputable(v, inside, kept):
                    again[id(v)] = written[id(v)]
    recomputable = sum(again.values())
    fused = min(eager, sum(read_in.values()) + sum(written.values()) - recomputable + loose)
    kernels = unmeasured = 0
    time_s = flop_s = 0.0
    for i in m:
        t, k = times.get(measured_range(str(configs[i].get("range"))), (0.0, 0))
        time_s, kernels, unmeasured = time_s + t, kernels + k, unmeasured + (k == 0)
        roof = measured.get(FLOP_ROOF.get(str(configs[i].get("dtype") or ""), ""))
        if _int(configs[i].get("model_flops")) and roof:
            flop_s += _int(configs[i].get("model_flops")) / roof
    launch = float(measured.get("launch_s") or 0.0)
    fused_time = max(fused / float(measured["dram_Bps"]), flop_s, launch if kernels else 0.0)
    saving = max(0.0, time_s - fused_time)
    matmul, epilogue = "", 0
    for x, fed in feeds.items():  # the matmul whose output the group reads most: its epilogue
        alone = all(r in inside for v, _ in fed for r in v.readers) and all(v.dead for v, _ in fed)
        extra = sum(n for _, n in fed) + (sum(n for w, n in writes[x] if any(w is v for v, _ in fed))
                                          if alone else 0)
        # an elementwise epilogue: the group writes at least as much as it reads of the matmul's output
        if extra > epilogue and sum(written.values()) >= sum(n for _, n in fed):
            matmul, epilogue = str(configs[x].get("op")), extra
    kind = _how_kind(len(m), eager, fused, saving, time_s, kernels, launch, epilogue, recomputable)
    if kind == "compile" and any(configs[i].get("kind") != "op" for i in m):
        kind = "fuse"  # kernels a compiler already generated
    how = How(kind, eager - fused, min(recomputable, eager - fused), matmul, epilogue, kernels)
    return Group([str(configs[i].get("op")) for i in m], [_int(configs[i].get("seq")) for i in m], eager,
                 fused, time_s, fused_time, saving, how, kernels, recomputable,
                 sum(1 for i in m if configs[i].get("min_note")), unmeasured, after, sorted(written.values()))


def _how_kind(calls: int, eager: int, fused: int, saving: float, time_s: float, kernels: int, launch: float,
              epilogue: int, recomputable: int) -> str:
    if saving > 0 and kernels >= 2 and launch and time_s <= LAUNCH_NEAR * launch * kernels:
        return "graphs"
    if saving > 0 and calls >= 2 and fused < eager:
        return "compile"
    if saving > 0 and recomputable:
        return "recompute"
    if epilogue:
        return "epilogue"
    return "kernel" if saving > 0 else "at floor"


def match(eager: Fusion, compiled: Fusion) -> list[Match]:
    """Each Inductor kernel of `compiled` beside the group of `eager` whose ops it fused (views aside):
    - a kernel writing results (values held when the trace ends: gradients, outputs) goes with the groups
      that write the same results in `eager` (the n-th result of its size, where both runs hold as many
      of that size) and share an op type with it: two kernels of one name are told apart by what they write;
    - a kernel whose outputs only later generated kernels read (a split reduction's first stage) goes with
      their groups where it shares an op type with them; with several (one kernel fused across groups),
      those groups are compared together;
    - else, the group sharing most of its op types; ties go to the group that outlives with more buffers of
      the sizes the kernel writes, then to the one with the nearest number of matmuls before it.
    Kernels sharing no op type with any group are left out."""
    agreed = {size for size, n in compiled.results.items() if eager.results.get(size) == n}
    owner = {r: i for i, g in enumerate(eager.groups) for r in g.results if r[0] in agreed}
    kinds = [{base(a) for a in k.fused_aten} - VIEWS for k in compiled.kernels]
    served: dict[int, set[int]] = {}  # kernel -> the groups it serves
    for n, k in enumerate(compiled.kernels):
        ops = kinds[n]
        by_result = {owner[r] for r in k.results if r in owner and ops & eager.groups[owner[r]].op_types()}
        scored = [(len(ops & g.op_types()), sum(1 for b in k.write_sizes if b in g.out_sizes),
                   -abs(g.after_matmuls - k.after_matmuls), -g.calls, -i) for i, g in enumerate(eager.groups)]
        top = max(scored, default=None)
        if by_result:
            served[n] = by_result
        elif top is not None and top[0] > 0:
            served[n] = {-top[-1]}
    for n in reversed(range(len(compiled.kernels))):  # later stages first: a chain of stages follows its end
        later = {i for f in compiled.kernels[n].feeds for i in served.get(f, set())
                 if kinds[n] & eager.groups[i].op_types()}
        if n in served and later:
            served[n] = later
    together = _Sets()  # groups one kernel serves are compared together
    for gs in served.values():
        first = min(gs)
        for i in gs:
            together.union(first, i)
    parts: dict[int, list[int]] = {}
    for i in {i for gs in served.values() for i in gs}:
        parts.setdefault(together.find(i), []).append(i)
    part = {i: sorted(p) for p in parts.values() for i in p}
    total: dict[int, tuple[float, int]] = {}
    for n, gs in served.items():
        t, b = total.get(part[min(gs)][0], (0.0, 0))
        k = compiled.kernels[n]
        total[part[min(gs)][0]] = (t + k.time_s, b + k.min_bytes)
    out = []
    for n, gs in sorted(served.items()):
        k, p = compiled.kernels[n], part[min(gs)]
        g = [eager.groups[i] for i in p]
        out.append(Match(k.name, k.fused_aten, p[0], [op for x in g for op in x.ops],
                         sum(x.fused_time_s for x in g), k.time_s, sum(x.time_s for x in g), total[p[0]][0],
                         k.min_bytes, sum(x.fused_min_bytes for x in g), total[p[0]][1], p))
    return out
