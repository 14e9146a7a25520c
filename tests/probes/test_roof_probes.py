"""roof_probes.py, vocab/roofs.py and host/roofs_cache.py: cache and committed files, ncu theoretical peaks,
measuring kernels (interpreter on CPU)."""

import json
import math
import re
import subprocess
import sys

import pytest
import torch
from results_fixture import DEVICE, ROOFS_ENTRY, write_run
from typer.testing import CliRunner

from memtraffic import api
from memtraffic.cli import app
from memtraffic.host import roofs_cache
from memtraffic.ncu.metrics import METRIC_SETS, METRICS
from memtraffic.probes import roof_probes as c
from memtraffic.views.tables import roofs_table
from memtraffic.vocab import roofs
from memtraffic.vocab.errors import ReportError, UsageError


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRAFFIC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cache_round_trip_keeps_other_devices(cache_dir):
    assert roofs_cache.cache_file() == cache_dir / "roofs.json"
    assert roofs_cache.read_cache() == {}
    other = {**ROOFS_ENTRY, "device": "Other GPU", "measured": {"dram_Bps": 5.0}}
    c.write_cache(other)
    path = c.write_cache(ROOFS_ENTRY)
    assert path == cache_dir / "roofs.json"
    back = roofs_cache.read_cache()
    assert back == {DEVICE: ROOFS_ENTRY, "Other GPU": other}
    c.write_cache({**ROOFS_ENTRY, "measured": {"dram_Bps": 7.0}})  # a re-measure replaces only its device
    assert roofs_cache.read_cache()[DEVICE]["measured"] == {"dram_Bps": 7.0}
    assert "Other GPU" in roofs_cache.read_cache()


def test_default_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("MEMTRAFFIC_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert roofs_cache.cache_file() == tmp_path / "memtraffic" / "roofs.json"


def test_a_cache_under_its_old_name_is_read_and_carried_into_roofs_json(cache_dir):
    """A user's roofs cached as ceilings.json (before the rename) are still found, and the next write moves
    them into roofs.json beside the new entry; the old file is left as it was."""
    cache_dir.mkdir()
    other = {**ROOFS_ENTRY, "device": "Other GPU", "measured": {"dram_Bps": 5.0}}
    old = cache_dir / "ceilings.json"
    old.write_text(json.dumps({"Other GPU": other}))
    assert roofs_cache.read_cache() == {"Other GPU": other} and roofs_cache.find_roofs("Other GPU") == other
    assert c.write_cache(ROOFS_ENTRY) == cache_dir / "roofs.json"
    assert json.loads((cache_dir / "roofs.json").read_text()) == {DEVICE: ROOFS_ENTRY, "Other GPU": other}
    assert json.loads(old.read_text()) == {"Other GPU": other}
    old.write_text("{not json")  # once roofs.json exists, the old name is not read
    assert roofs_cache.read_cache() == {DEVICE: ROOFS_ENTRY, "Other GPU": other}


def test_corrupt_cache_says_what_to_do(cache_dir):
    cache_dir.mkdir()
    (cache_dir / "roofs.json").write_text("{not json")
    with pytest.raises(ReportError, match=r"roofs.json is not valid JSON .*--refresh"):
        roofs_cache.read_cache()


def test_cache_wins_over_committed_reference(cache_dir, tmp_path):
    committed = tmp_path / "reports" / "roofs"
    ref = c.write_reference({**ROOFS_ENTRY, "measured": {"dram_Bps": 1.0}}, committed)
    assert ref.name == "Test_GPU_1000.json"
    assert roofs_cache.find_roofs(DEVICE, committed=committed)["measured"] == {"dram_Bps": 1.0}
    c.write_cache(ROOFS_ENTRY)
    assert roofs_cache.find_roofs(DEVICE, committed=committed) == ROOFS_ENTRY
    assert roofs_cache.find_roofs("Unknown GPU", committed=committed) is None
    same_slug = roofs_cache.find_roofs("test gpu  1000", committed=committed)  # other spacing
    assert same_slug == ROOFS_ENTRY


def test_roofs_file_forms(tmp_path):
    single = tmp_path / "one.json"
    single.write_text(json.dumps(ROOFS_ENTRY))
    assert roofs.load_roofs_file(single) == ROOFS_ENTRY
    many = tmp_path / "many.json"
    many.write_text(json.dumps({DEVICE: ROOFS_ENTRY, "B": {**ROOFS_ENTRY, "device": "B"}}))
    assert roofs.load_roofs_file(many, DEVICE) == ROOFS_ENTRY
    with pytest.raises(UsageError, match="not for 'C'"):
        roofs.load_roofs_file(many, "C")
    with pytest.raises(UsageError, match="does not exist"):
        roofs.load_roofs_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ReportError, match="does not hold roofs"):
        roofs.load_roofs_file(bad)


def test_get_roofs_uses_the_cache_unless_refreshed(cache_dir, monkeypatch):
    monkeypatch.setattr(c, "current_device", lambda: DEVICE)
    calls = []
    fresh = {**ROOFS_ENTRY, "measured": {"dram_Bps": 3.0}}
    monkeypatch.setattr(c, "measure_roofs", lambda **kw: calls.append(kw) or fresh)
    entry, cached = c.get_roofs()
    assert (entry, cached, len(calls)) == (fresh, False, 1)
    assert roofs_cache.read_cache()[DEVICE] == fresh
    entry, cached = c.get_roofs()
    assert (entry, cached, len(calls)) == (fresh, True, 1)
    c.get_roofs(refresh=True, with_ncu=False)
    assert calls[-1]["with_ncu"] is False and len(calls) == 2


def test_roofline_reads_cached_roofs(cache_dir, tmp_path, monkeypatch):
    c.write_cache(ROOFS_ENTRY)
    run = write_run(tmp_path / "run-a")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["roofline", str(run), "--level", "dram"])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "roofline-run-a.html").read_text()
    assert "DRAM 1.00 TB\\u002fs (measured)" in page and "(ncu theoretical)" in page


def test_theoretical_peaks_from_metrics():
    values = {"peak_dram_bytes_per_cycle": 64.0, "dram_cycles_per_s": 2e9, "peak_l2_bytes_per_cycle": 4096.0,
              "l2_cycles_per_s": 1.5e9, "peak_l1_bytes_per_cycle": math.nan, "l1_cycles_per_s": 1.5e9,
              "peak_ffma_per_cycle": 16384.0, "sm_cycles_per_s": 1.5e9}
    peaks = roofs.theoretical_from_metrics(values)
    assert peaks == {"dram_Bps": 64.0 * 2e9, "l2_Bps": 4096.0 * 1.5e9, "fp32_flops": 2 * 16384.0 * 1.5e9}
    assert set(METRIC_SETS["peaks"]) <= set(METRICS) and set(values) == set(METRIC_SETS["peaks"])


def test_ncu_probe_command_is_exact(tmp_path):
    argv = c.ncu_probe_command("/opt/ncu", tmp_path / "peaks", python="/usr/bin/python3")
    metrics = ("dram__bytes.sum.peak_sustained,dram__cycles_elapsed.avg.per_second,"
               "lts__t_bytes.sum.peak_sustained,lts__cycles_elapsed.avg.per_second,"
               "l1tex__t_bytes.sum.peak_sustained,l1tex__cycles_elapsed.avg.per_second,"
               "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained,"
               "sm__cycles_elapsed.avg.per_second")
    assert argv[:-1] == ["/opt/ncu", "--metrics", metrics, "--nvtx", "--cache-control", "all",
                         "--clock-control", "none", "--import-sass", "no",
                         "--target-processes", "application-only",
                         "--launch-count", "1", "--export", str(tmp_path / "peaks"), "/usr/bin/python3", "-c"]
    assert "cuda" in argv[-1]


def test_table_names_the_two_kinds_apart():
    text = roofs_table(ROOFS_ENTRY)
    lines = text.splitlines()
    assert lines[0] == f"{DEVICE}, measured 2000-01-01"
    assert lines[1].split() == ["roof", "measured", "ncu", "theoretical", "measured/theoretical"]
    dram = next(line for line in lines if line.startswith("DRAM bandwidth"))
    assert "1.00 TB/s" in dram and "1.50 TB/s" in dram and dram.endswith("67%")
    l1 = next(line for line in lines if line.startswith("L1 bandwidth"))
    assert l1.split()[2:] == ["-", "10.00", "TB/s", "-"]
    assert "BF16 tensor cores" in text and "how measured" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without a GPU")
def test_cli_roofs_without_gpu_is_one_clear_line():
    res = CliRunner().invoke(app, ["roofs"])
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: no CUDA GPU is visible: measuring roofs needs one; ")


def test_cli_roofs_prints_what_the_api_measured(monkeypatch):
    """`memtraffic roofs` is api.measure_roofs printed: the table, or the entry as JSON; the cache
    line on stderr."""
    monkeypatch.setattr(api, "get_roofs", lambda refresh, with_ncu, progress: (ROOFS_ENTRY, True))
    res = CliRunner().invoke(app, ["roofs", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert res.stdout == json.dumps(ROOFS_ENTRY, indent=2) + "\n"
    assert res.stderr.startswith("cached in ") and res.stderr.rstrip().endswith("(--refresh measures again)")
    res = CliRunner().invoke(app, ["ceilings"])  # the old name still runs
    assert res.exit_code == 0 and res.stdout == roofs_table(ROOFS_ENTRY) + "\n"


def test_l2_copy_kernel_copies(device):
    block = 64
    src = torch.rand(8 * block, device=device)
    dst = torch.zeros_like(src)
    c.l2_copy(src, dst, iters=5, programs=4, block=block)  # programs walk chunks p..p+4: all 8 covered
    assert torch.equal(src, dst)
    with pytest.raises(ValueError, match="programs must not exceed"):
        c.l2_copy(src, dst, iters=1, programs=9, block=block)


def test_fma_kernel_runs_the_chains_it_counts(device):
    x = torch.rand(2 * 32, device=device)
    out = c.fma_chain(x, iters=6, block=32)
    chains = [x.double().cpu() + k for k in range(c.FMA_CHAINS)]
    for _ in range(6):
        chains = [a * 0.999 + 0.001 for a in chains]
    torch.testing.assert_close(out.cpu().double(), sum(chains), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_measured_roofs_are_positive_and_cached(cache_dir):
    entry, cached = c.get_roofs(refresh=True, with_ncu=False)
    assert not cached and entry["device"] == torch.cuda.get_device_name(0)
    assert set(entry["measured"]) == {"dram_Bps", "l2_Bps", "fp32_flops", "bf16_tc_flops", "fp16_tc_flops",
                                      "dram_latency_s"}  # launch_s needs ncu (with_ncu=False here)
    assert all(v > 0 and math.isfinite(v) for v in entry["measured"].values())
    # L2 is faster than DRAM; tensor cores beat FP32 FMAs (true of every GPU with tensor cores).
    m = entry["measured"]
    assert m["l2_Bps"] > m["dram_Bps"] and m["bf16_tc_flops"] > m["fp32_flops"]
    assert roofs_cache.read_cache()[entry["device"]] == entry


@pytest.mark.ncu
def test_ncu_theoretical_peaks_read():
    peaks, note = c.ncu_theoretical()
    assert set(peaks) == {"dram_Bps", "l2_Bps", "l1_Bps", "fp32_flops"}, note
    assert all(v > 0 for v in peaks.values())


_MATMUL = """
import torch
a = torch.randn(2048, 1024, device="cuda", dtype=torch.{dt})
b = torch.randn(1024, 512, device="cuda", dtype=torch.{dt})
a @ b; torch.cuda.synchronize()
torch.cuda.nvtx.range_push("mm"); a @ b; torch.cuda.synchronize(); torch.cuda.nvtx.range_pop()
"""


@pytest.mark.ncu
@pytest.mark.parametrize("dt,alias", [("bfloat16", "tc_ops_bf16"), ("float16", "tc_ops_fp16")])
def test_tensor_ops_per_matmul_flop(tmp_path, dt, alias):
    """Calibrates the tensor-core counters: ops counted over 2*M*N*K FLOPs, printed (pytest -s)."""
    from memtraffic.ncu.report import import_ncu_report

    ncu = c._find_ncu()
    base = tmp_path / "mm"
    proc = subprocess.run([ncu, "--metrics", METRICS[alias].ncu, "--nvtx", "--nvtx-include", "mm/",
                           "--clock-control", "none", "-f", "-o", str(base), sys.executable, "-c",
                           _MATMUL.format(dt=dt)], capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    ctx = import_ncu_report().load_report(str(base) + ".ncu-rep")
    ops = sum(ctx.range_by_idx(r).action_by_idx(a).metric_by_name(METRICS[alias].ncu).as_double()
              for r in range(ctx.num_ranges()) for a in range(ctx.range_by_idx(r).num_actions()))
    ratio = ops / (2 * 2048 * 512 * 1024)
    print(f"{alias}: {ops:.6g} ops for {2 * 2048 * 512 * 1024} FLOPs -> {ratio:.4f} ops per FLOP")
    assert ratio == pytest.approx(1.0, rel=0.02) or ratio == pytest.approx(0.5, rel=0.02)


# --- roofs wherever a floor is asked (issue 51) ---------------------------------------------------------

REAL_ROOFS_FOR_FLOOR = c.roofs_for_floor  # tests/conftest.py leaves the step out of every other test
ROOFS_LINE = re.compile(
    r"measured the roofs of Fake GPU \(copy and L2 bandwidth, FP32 and tensor-core FLOP/s, DRAM latency, an "
    r"empty kernel's time\) for the floor in \d+\.\d s, cached in (?P<path>\S+); once a GPU \(--no-roofs "
    r"skips it\)")


@pytest.fixture
def measured(cache_dir, monkeypatch, tmp_path):
    """A stand-in for measuring the roofs (memtraffic.probes.roof_probes.measure_roofs, about 20 s on a
    GPU): the calls it got; no committed roofs but the H100's."""
    monkeypatch.setattr(api, "roofs_for_floor", REAL_ROOFS_FOR_FLOOR)
    monkeypatch.setattr(roofs, "COMMITTED_DIR", tmp_path / "no-committed-roofs")
    calls: list[str] = []

    def measure_roofs(with_ncu: bool = True, progress=None):
        calls.append("measured")
        return {**ROOFS_ENTRY, "device": "Fake GPU", "measured": {"dram_Bps": 3e12}}

    monkeypatch.setattr(c, "measure_roofs", measure_roofs)
    return calls


def _profile(tmp_path, stand_in, name: str, roofs_flag: bool = True) -> list[str]:
    from memtraffic.api import run_profile
    from memtraffic.collect.profile import ProfileOptions

    lines: list[str] = []
    run_profile(ProfileOptions(command=[sys.executable, str(stand_in), "0"], out=tmp_path / name,
                               roofs=roofs_flag), lines.append)
    return lines


def test_the_first_profile_on_a_gpu_without_roofs_measures_them_once(tmp_path, stand_in, measured,
                                                                     monkeypatch, cache_dir):
    from stand_ins import RANGE_REPORTING, fake_ncu

    monkeypatch.setenv("MEMTRAFFIC_NCU", str(fake_ncu(tmp_path / "ncu", RANGE_REPORTING)))
    first = _profile(tmp_path, stand_in, "first")
    assert measured == ["measured"]
    said = [line for line in first if ROOFS_LINE.fullmatch(line)]
    assert len(said) == 1 and ROOFS_LINE.fullmatch(said[0])["path"] == str(cache_dir / "roofs.json")
    assert roofs_cache.read_cache()["Fake GPU"]["measured"] == {"dram_Bps": 3e12}
    second = _profile(tmp_path, stand_in, "second")  # cached: used, not measured again
    assert measured == ["measured"] and not any("the roofs of" in line for line in second)
    assert roofs_cache.find_roofs("Fake GPU")["measured"] == {"dram_Bps": 3e12}


def test_no_roofs_skips_measuring_them(tmp_path, stand_in, measured, monkeypatch, cache_dir):
    from stand_ins import RANGE_REPORTING, fake_ncu

    monkeypatch.setenv("MEMTRAFFIC_NCU", str(fake_ncu(tmp_path / "ncu", RANGE_REPORTING)))
    lines = _profile(tmp_path, stand_in, "run", roofs_flag=False)
    assert measured == [] and roofs_cache.read_cache() == {}
    assert not any("the roofs of" in line for line in lines), lines


def test_a_failed_measurement_is_one_warning_and_the_run_stands(cache_dir, measured, monkeypatch):
    def fails(with_ncu: bool = True, progress=None):
        raise RuntimeError("CUDA error: out of memory")

    monkeypatch.setattr(c, "measure_roofs", fails)
    lines: list[str] = []
    assert c.roofs_for_floor("Fake GPU", lines.append) is None
    assert lines == ["warning: no roofs for Fake GPU (RuntimeError: CUDA error: out of memory): the floor "
                     "needs them; `memtraffic roofs` measures them"]
    c.write_cache(ROOFS_ENTRY)
    assert c.roofs_for_floor(DEVICE, lines.append) is None and len(lines) == 1  # cached: nothing to do


@pytest.mark.parametrize("command", ["profile", "measure"])
@pytest.mark.parametrize(("flag", "expected"), [([], True), (["--no-roofs"], False), (["--roofs"], True)])
def test_the_roofs_flag_reaches_the_options(monkeypatch, command, flag, expected):
    import memtraffic.api as api

    got = []

    def capture(opts, echo=None):
        got.append(opts.roofs)
        raise ReportError("stop here")

    monkeypatch.setattr(api, "run_profile" if command == "profile" else "run_measure", capture)
    args = [command, *flag, *(["--", "python", "x.py"] if command == "profile" else ["softmax_tiled"])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "stop here" in result.output and got == [expected]
