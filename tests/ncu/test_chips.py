"""Every NVIDIA chip ncu 2025.3.1 knows: each metric set resolves against the chip's own metric list
(shipped in memtraffic/ncu/chip_metrics.json.gz), counters named differently are found, what a chip
cannot count is a note; GPU names map to chips; `memtraffic metrics` shows it all.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtraffic.cli import app
from memtraffic.host import gpu
from memtraffic.ncu import chips as chip_lists
from memtraffic.ncu import command as ncu_mod
from memtraffic.ncu.metrics import METRIC_SETS, METRICS, SETS, Form, resolve
from memtraffic.ncu.report import alias_value
from memtraffic.vocab import arch
from memtraffic.vocab.errors import GpuNotFoundError, NcuError

REPO = Path(__file__).resolve().parents[2]
LISTS = REPO.parent / "shared" / "reference" / "ncu-2025.3.1-metrics"  # shared/ sits beside the checkout
ALL_CHIPS = ["ad102", "ad103", "ad104", "ad106", "ad107", "ga100", "ga102", "ga103", "ga104", "ga106",
             "ga107", "ga10b", "gb100", "gb102", "gb10b", "gb110", "gb202", "gb203", "gb205", "gb206",
             "gb207", "gb20b", "gh100", "tu102", "tu104", "tu106", "tu116", "tu117"]
UNIFIED = {"ga10b", "gb10b", "gb20b"}
SHARES = "shares memory with the CPU; ncu has no DRAM byte counter on it"


def _resolve(chip: str, set_name: str):
    return resolve(METRIC_SETS[set_name], chip_lists.chip_metric_names(chip), arch.CHIPS[chip])


def _items(chip: str, set_name: str) -> dict:
    return {r.alias: r for r in _resolve(chip, set_name).items}


def test_the_package_ships_every_chip_of_ncu_2025_3_1_and_arch_knows_each():
    assert chip_lists.known_chips() == ALL_CHIPS == sorted(arch.CHIPS)
    assert chip_lists.DATA.stat().st_size < 100_000


@pytest.mark.skipif(not LISTS.is_dir(), reason="needs ncu 2025.3.1's metric list of every chip (`ncu "
                    "--query-metrics --chip CHIP`, a file each) in ../shared/reference/ncu-2025.3.1-metrics")
def test_the_shipped_lists_are_what_the_script_makes_from_the_reference(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    import make_chip_metrics

    out = tmp_path / "chip_metrics.json.gz"
    assert make_chip_metrics.main([str(LISTS), "--out", str(out)]) == 0
    assert out.read_bytes() == chip_lists.DATA.read_bytes()


def test_a_name_cut_at_the_column_width_is_rejoined(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    import make_chip_metrics

    path = tmp_path / "x.tsv.gz"
    path.write_bytes(gzip.compress(
        b"metric\ttype\tunit\tdescription\n"
        b"FBSP.TriageCompute.dramc__cycles_elapsed\tCounter\tcycle\t\n"
        b"smsp__sass_l1tex_average_t_sectors_per_request_pipe_lsu_mem_global_op_ldgsts\t_cache_access Ra"
        b"\ttio se\tctor average\n"
        b"smsp__sass_data_bytes_mem_global_op_ldgsts\tCo\tunter         by\tte  # of bytes\n"
        b"l1tex__t_bytes_pipe_lsu_mem_global_op_ld                              Counter\tbyte\t# of\n"))
    assert make_chip_metrics.parse_chip_tsv(path) == {
        "dramc__cycles_elapsed", "smsp__sass_data_bytes_mem_global_op_ldgsts",
        "smsp__sass_l1tex_average_t_sectors_per_request_pipe_lsu_mem_global_op_ldgsts_cache_access",
        "l1tex__t_bytes_pipe_lsu_mem_global_op_ld"}


@pytest.mark.parametrize("set_name", list(METRIC_SETS))
@pytest.mark.parametrize("chip", ALL_CHIPS)
def test_every_set_resolves_on_every_chip_with_a_note_for_each_missing_topic(chip, set_name):
    res = _resolve(chip, set_name)
    names = chip_lists.chip_metric_names(chip)
    assert [r.alias for r in res.items] == METRIC_SETS[set_name]
    for r in res.items:
        if r.form is None:
            assert r.note and chip in r.note
        else:
            assert r.note == "" and all(n.split(".")[0] in names for n in r.form.names)
    assert len(res.notes) == len({r.note for r in res.items if r.note})
    assert {r.note for r in res.items if r.note} == set(res.notes)
    if set_name != "peaks":
        assert _items(chip, set_name)["time"].form == Form(("gpu__time_duration.sum",))
    # The raw names of the set, through the same path measure takes, are never refused.
    spec = ncu_mod.resolve_metric_spec(set_name, names, arch.CHIPS[chip])
    assert spec.names == list(dict.fromkeys(["gpu__time_duration.sum", *res.names]))  # time always
    assert spec.notes == res.notes


@pytest.mark.parametrize("set_name", list(METRIC_SETS))
def test_on_the_h100_every_set_is_the_names_it_always_was(set_name):
    res = _resolve("gh100", set_name)
    assert res.notes == []
    assert [r.form.names for r in res.items] == [(METRICS[a].ncu,) for a in METRIC_SETS[set_name]]
    assert ncu_mod.resolve_metrics(set_name, chip_lists.chip_metric_names("gh100")) == \
        ncu_mod.resolve_metrics(set_name)


@pytest.mark.parametrize("chip", ["tu102", "tu104", "ga100", "ga102", "ga10b", "ad102", "ad104"])
def test_before_hopper_no_l1tex_ldgsts_counter_is_a_note(chip):
    item = _items(chip, "traffic")["l1_ldgsts_bytes"]
    assert item.form is None
    c = arch.CHIPS[chip]
    if c.arch == "Turing":
        assert item.note == (f"L1 bytes of LDGSTS.ACCESS (cp.async through L1): {chip} (Turing, sm_75) "
                             "has no cp.async (LDGSTS comes with sm_80): its loads are plain loads, counted "
                             "in the L1 load bytes")
    else:
        assert item.note == (f"L1 bytes of LDGSTS.ACCESS (cp.async through L1): ncu has no l1tex counter of "
                             f"LDGSTS.ACCESS on {chip} ({c.arch}, {c.sm}): the cp.async part of the L1 load "
                             "bytes is not split out")


def test_ga102_measures_the_rest_of_traffic_with_the_h100_names():
    items = _items("ga102", "traffic")
    assert [a for a, r in items.items() if r.form is None] == ["l1_ldgsts_bytes"]
    assert items["req_ldgsts_bytes"].form == Form(("smsp__sass_data_bytes_mem_global_op_ldgsts.sum",))
    assert items["dram_rd_bytes"].form == Form(("dram__bytes_read.sum",))


@pytest.mark.parametrize("chip", ["tu102", "tu104", "tu106", "tu116", "tu117"])
def test_turing_has_no_ldgsts_at_all(chip):
    items = _items(chip, "traffic")
    assert [a for a, r in items.items() if r.form is None] == ["l1_ldgsts_bytes", "req_ldgsts_bytes"]
    assert len(_resolve(chip, "traffic").notes) == 2


@pytest.mark.parametrize("chip", ["gb202", "gb203", "gb205", "gb206", "gb207"])
def test_rtx_50_dram_bytes_are_the_op_read_and_op_write_counters(chip):
    items = _items(chip, "traffic")
    assert items["dram_rd_bytes"].form == Form(("dram__bytes_op_read.sum",))
    assert items["dram_wr_bytes"].form == Form(("dram__bytes_op_write.sum",))
    assert _resolve(chip, "traffic").notes == []


@pytest.mark.parametrize("chip", sorted(UNIFIED))
def test_unified_memory_chips_have_one_dram_note(chip):
    for set_name in ("traffic", "bytes"):
        res = _resolve(chip, set_name)
        dram = [r for r in res.items if r.alias.startswith("dram")]
        assert [r.form for r in dram] == [None, None]
        assert f"DRAM bytes: {chip} {SHARES}" in res.notes
        assert sum(n.startswith("DRAM bytes") for n in res.notes) == 1
    peaks = _resolve(chip, "peaks")
    assert [r.alias for r in peaks.items if r.form is None] == ["peak_dram_bytes_per_cycle",
                                                                "dram_cycles_per_s"]
    assert peaks.notes == [f"DRAM roof: {chip} {SHARES}"]


def test_gb20b_dram_note_is_the_one_the_issue_asks_for():
    assert "DRAM bytes: gb20b shares memory with the CPU; ncu has no DRAM byte counter on it" in \
        _resolve("gb20b", "traffic").notes


def test_tensor_core_ops_per_architecture():
    fp16 = {c: _items(c, "flops")["tc_ops_fp16"].form for c in ("gh100", "ga102", "ad104", "gb100", "gb202",
                                                                 "tu104", "tu117")}
    assert fp16["gh100"] == Form(("sm__ops_path_tensor_src_fp16.sum",))
    split = Form(("sm__ops_path_tensor_src_fp16_dst_fp16.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum"))
    assert fp16["ga102"] == fp16["ad104"] == fp16["gb100"] == fp16["gb202"] == split
    assert fp16["tu104"] == Form(("sm__ops_path_tensor_src_fp16_dst_fp16.sum",
                                  "sm__ops_path_tensor_src_fp16_bf16_tf32_dst_fp32.sum"))
    assert fp16["tu117"] is None
    assert _resolve("tu104", "flops").notes == [
        "tensor-core BF16 ops: tu104 (Turing, sm_75) tensor cores take no BF16 or TF32 inputs",
        "tensor-core TF32 ops: tu104 (Turing, sm_75) tensor cores take no BF16 or TF32 inputs"]
    # The roofline set collects both halves of a sum once.
    names = _resolve("ga102", "roofline").names
    assert names.count("sm__ops_path_tensor_src_fp16_dst_fp32.sum") == 1


def test_a_raw_name_the_gpu_lacks_is_still_refused():
    names = chip_lists.chip_metric_names("ga102")
    with pytest.raises(Exception, match=r"^unknown metrics: sm__ops_path_tensor_src_fp16\.sum\. "):
        ncu_mod.resolve_metrics("traffic,sm__ops_path_tensor_src_fp16.sum", names, arch.CHIPS["ga102"])


class _Action:
    def __init__(self, values: dict[str, float]):
        self.values = values

    def metric_by_name(self, name):
        if name not in self.values:
            return None
        value = self.values[name]
        return type("M", (), {"value": lambda self: value})()


def test_a_report_is_read_back_under_the_alias_whatever_the_chip_named_it():
    split = _Action({"sm__ops_path_tensor_src_fp16_dst_fp16.sum": 3.0,
                     "sm__ops_path_tensor_src_fp16_dst_fp32.sum": 4.0, "dram__bytes_op_read.sum": 64.0})
    assert alias_value(split, METRICS["tc_ops_fp16"]) == 7.0
    assert alias_value(split, METRICS["dram_rd_bytes"]) == 64.0
    assert alias_value(split, METRICS["dram_wr_bytes"]) != alias_value(split, METRICS["dram_wr_bytes"])
    h100 = _Action({"sm__ops_path_tensor_src_fp16.sum": 5.0, "dram__bytes_read.sum": 32.0})
    assert alias_value(h100, METRICS["tc_ops_fp16"]) == 5
    assert alias_value(h100, METRICS["dram_rd_bytes"]) == 32


@pytest.mark.parametrize(("gpu", "chip"), [
    ("NVIDIA H100 80GB HBM3", "gh100"), ("NVIDIA H200", "gh100"), ("NVIDIA GH200 480GB", "gh100"),
    ("NVIDIA GeForce RTX 3080 Ti", "ga102"), ("Tesla T4", "tu104"), ("NVIDIA L4", "ad104"),
    ("NVIDIA L40S", "ad102"), ("NVIDIA A100-SXM4-80GB", "ga100"), ("NVIDIA A10G", "ga102"),
    ("NVIDIA GeForce RTX 4090", "ad102"), ("NVIDIA GeForce RTX 4060 Ti", "ad106"),
    ("NVIDIA GeForce RTX 5090", "gb202"), ("NVIDIA GeForce RTX 5070 Ti", "gb203"),
    ("NVIDIA GeForce RTX 5070", "gb205"), ("NVIDIA B200", "gb100"), ("NVIDIA GB10", "gb20b"),
    ("NVIDIA GeForce RTX 2070 SUPER", "tu104"), ("NVIDIA GeForce GTX 1650", "tu117"),
])
def test_gpu_names_map_to_their_chip(gpu, chip):
    assert arch.chip_for_gpu(gpu).name == chip


def test_unknown_names_map_to_nothing_and_features_follow_capability():
    assert arch.chip_for_gpu("Some Future GPU") is None and arch.chip_for_gpu(None) is None
    assert [c for c in ALL_CHIPS if not arch.CHIPS[c].has_ldgsts] == ["tu102", "tu104", "tu106", "tu116",
                                                                       "tu117"]
    assert [c for c in ALL_CHIPS if arch.CHIPS[c].has_tma] == ["gb100", "gb102", "gb10b", "gb110", "gb202",
                                                               "gb203", "gb205", "gb206", "gb207", "gb20b",
                                                               "gh100"]
    assert {c for c in ALL_CHIPS if arch.CHIPS[c].unified_memory} == UNIFIED


# --- memtraffic metrics ------------------------------------------------------------------------------------


def _metrics(*args: str):
    return CliRunner().invoke(app, ["metrics", *args])


def test_metrics_table_of_the_rtx_3080_ti():
    res = _metrics("--chip", "ga102", "--set", "traffic")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "ga102 (Ampere, sm_86: RTX 3090/3080 Ti/3080, A10, A40, RTX A6000)"
    assert lines[1].split() == ["set", "alias", "ncu"]
    assert lines[-3:] == ["", "sets:", f"  traffic: {SETS[0].description}"]  # the legend, from the one table
    lines = lines[:-3]
    assert lines[-4].split() == ["traffic", "dram_wr_bytes", "dram__bytes_write.sum"] and lines[-3] == ""
    assert "traffic  l1_ldgsts_bytes   - (not measured)" in res.stdout
    assert lines[-2:] == ["not measured on ga102:", "  " + _items("ga102", "traffic")["l1_ldgsts_bytes"].note]


def test_metrics_json_of_every_chip():
    res = _metrics("--all-chips", "--set", "bytes", "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == len(ALL_CHIPS) * len(METRIC_SETS["bytes"])
    assert set(rows[0]) == {"chip", "set", "alias", "ncu", "available", "note"}
    gb202 = {r["alias"]: r for r in rows if r["chip"] == "gb202"}
    assert gb202["dram_rd_bytes"] == {"chip": "gb202", "set": "bytes", "alias": "dram_rd_bytes",
                                      "ncu": "dram__bytes_op_read.sum", "available": True, "note": ""}
    missing = {(r["chip"], r["alias"]) for r in rows if not r["available"]}
    assert missing == {(c, a) for c in UNIFIED for a in ("dram_rd_bytes", "dram_wr_bytes")}


@pytest.mark.parametrize(("args", "message"), [
    (["--chip", "gx999"], "error: unknown chip 'gx999': use one of " + ", ".join(ALL_CHIPS)),
    (["--chip", "ga102", "--set", "nope"],
     "error: unknown metric set 'nope': use one of traffic, bytes, spills, flops, peaks, roofline"),
    (["--chip", "ga102", "--all-chips"], "error: give --chip CHIP or --all-chips, not both"),
])
def test_metrics_bad_input_is_one_line_and_exit_2(args, message):
    res = _metrics(*args)
    assert res.exit_code == 2
    assert res.stderr.strip() == message


def test_metrics_without_a_gpu_or_ncu_says_to_name_a_chip(monkeypatch):
    def no_gpu():
        raise GpuNotFoundError("none")

    def no_ncu(*args, **kwargs):
        raise NcuError("none")

    monkeypatch.setattr(gpu, "gpu_name", no_gpu)
    monkeypatch.setattr(ncu_mod, "find_ncu", no_ncu)
    res = _metrics()
    assert res.exit_code == 1
    assert res.stderr.strip() == ("error: no NVIDIA GPU and no ncu on this machine to ask which metrics it "
                                  f"has: give --chip CHIP (one of {', '.join(ALL_CHIPS)}) or --all-chips")


def test_metrics_without_ncu_uses_the_shipped_list_of_the_local_gpu(monkeypatch):
    def no_ncu(*args, **kwargs):
        raise NcuError("none")

    monkeypatch.setattr(gpu, "gpu_name", lambda: "Tesla T4")
    monkeypatch.setattr(ncu_mod, "find_ncu", no_ncu)
    res = _metrics("--set", "traffic", "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {r["chip"] for r in rows} == {"tu104"}
    assert [r["alias"] for r in rows if not r["available"]] == ["l1_ldgsts_bytes", "req_ldgsts_bytes"]


# --- variants that need an architecture feature ------------------------------------------------------------


def test_softmax_splits_lag_kernel_refuses_16_bit_rows_before_sm_80(monkeypatch):
    import torch

    from memtraffic.kernels import VARIANTS
    from memtraffic.kernels import softmax_split as split

    variant = VARIANTS["softmax_split"]
    monkeypatch.setattr(split, "_interpreted", lambda: False)  # the inline PTX is compiled only on a GPU
    monkeypatch.setattr(gpu, "current_capability", lambda: (7, 5))
    shape = (64, 131072)
    assert variant.check(shape, torch.bfloat16, dict(variant.params)) == (
        "softmax_split's lag kernel for bf16 needs sm_80 or newer (it packs pairs with "
        "cvt.rn.f16x2/bf16x2.f32 inline PTX); this GPU is sm_75")
    assert variant.check(shape, torch.float32, dict(variant.params)) is None
    monkeypatch.setattr(gpu, "current_capability", lambda: (8, 6))
    assert variant.check(shape, torch.float16, dict(variant.params)) is None


def test_the_fused_matmul_softmax_fits_the_shared_memory_of_the_gpu_it_runs_on(monkeypatch):
    import torch

    from memtraffic.kernels import VARIANTS
    from memtraffic.kernels import matmul_softmax as ms

    variant = VARIANTS["matmul_softmax_fused"]
    params = {**variant.params, "BLOCK_K": 128, "num_stages": 4}
    shape = (4096, 1024, 1024)
    monkeypatch.setattr(ms, "current_smem_per_block", lambda: None)  # no GPU: the H100's limit
    h100 = variant.check(shape, torch.bfloat16, params)
    monkeypatch.setattr(ms, "current_smem_per_block", lambda: 101376)  # RTX 3080 Ti (sm_86): 99 KiB
    small = variant.check(shape, torch.bfloat16, params)
    assert small is not None
    assert small.endswith("over the 101376 a block may use: lower BLOCK_K or num_stages")
    assert h100 is None or "232448" in h100
