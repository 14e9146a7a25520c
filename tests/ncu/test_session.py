"""The ncu session measure and profile share (memtraffic/ncu/session.py): found, resolved for the chip, the
environment it records and the argv it builds."""

from __future__ import annotations

from pathlib import Path

from stand_ins import VERSION_2025, fake_ncu

from memtraffic.ncu import command as ncu_mod
from memtraffic.ncu import session as session_mod
from memtraffic.ncu.session import NcuSession

# what ncu --query-metrics offers on an H100, for the traffic set
H100_TRAFFIC = ncu_mod.parse_query_metrics("\n".join(ncu_mod.base_name(n)
                                                     for n in ncu_mod.resolve_metrics("traffic")))


def test_a_session_finds_ncu_resolves_metrics_and_builds_the_argv(tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path / "bin" / "ncu", VERSION_2025)
    monkeypatch.setenv("MEMTRAFFIC_NCU", str(ncu))
    asked = []
    monkeypatch.setattr(session_mod, "query_metric_names",
                        lambda path, key=None: asked.append((path, key)) or H100_TRAFFIC)
    found = NcuSession.find()
    assert (found.path, found.version, found.gpu) == (ncu, (2025, 3, 1, 0), None)
    tokens = ncu_mod.metric_tokens("traffic")
    session = found.on_gpu("NVIDIA H100 80GB HBM3", tokens)
    assert asked == [(ncu, f"{ncu}-2025.3.1.0-NVIDIA H100 80GB HBM3")]
    assert session.metrics == ncu_mod.resolve_metric_spec(tokens, H100_TRAFFIC).names
    assert session.metric_record("traffic") == {"spec": "traffic", "names": session.metrics,
                                                "notes": session.spec.notes}
    env = session.environment()
    assert (env["gpu"], env["chip"], env["ncu"], env["ncu_version"]) == (
        "NVIDIA H100 80GB HBM3", "gh100", str(ncu), "2025.3.1.0")
    options = {"cache_control": "none", "source": True}
    assert session.command(Path("r.ncu-rep"), ["app", "x"], **options) == ncu_mod.build_ncu_command(
        ncu, session.metrics, Path("r.ncu-rep"), ["app", "x"], **options)
