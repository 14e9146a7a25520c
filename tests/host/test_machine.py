"""memtraffic.host.machine: the environment record of a run."""

from __future__ import annotations

import sys
import types

from memtraffic.host import machine


def test_environment_with_torch_still_being_imported_by_another_thread(monkeypatch):
    # measure builds its plan (importing torch) in a thread while the main thread records the environment:
    # sys.modules then holds a torch module without its attributes yet.
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.setattr(machine, "_version_of", lambda name: f"{name} from its metadata")
    env = machine.environment("NVIDIA H100 80GB HBM3")
    assert env["torch"] == "torch from its metadata" and env["cuda"] is None
    assert env["chip"] == "gh100"


def test_environment_takes_an_imported_torch_as_it_is(monkeypatch):
    torch = types.ModuleType("torch")
    torch.__version__ = "9.9.9"  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(cuda="13.0")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    env = machine.environment(None)
    assert (env["torch"], env["cuda"], env["gpu"], env["chip"]) == ("9.9.9", "13.0", None, None)
