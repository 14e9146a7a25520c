"""memtraffic.runfolder.trace: the records a traced call makes, the launch decision they carry, and the
trace file as read back (program order per process, a cut last line skipped, end_region's freed storages
joined to the record before them)."""

from __future__ import annotations

import json
import os

from memtraffic.runfolder import trace
from memtraffic.runfolder.records import TraceRecord, problem
from memtraffic.vocab.launches import Decision


def _record(seq: int = 0):
    entry = {"shape": [4, 8], "dtype": "fp32"}
    return trace.make_record("op", seq, "aten.add.Tensor", f"mt|op|{seq}|aten.add.Tensor", [entry, entry],
                             [entry], 256, 128, 32)


def test_a_record_is_a_config_with_the_minimum_and_the_first_input_shape():
    record = _record()
    assert problem(record, TraceRecord) is None
    assert (record["shape"], record["dtype"], record["min_read_bytes"], record["min_write_bytes"],
            record["model_flops"], record["pid"]) == ([4, 8], "fp32", 256, 128, 32, os.getpid())
    assert record["pred_read_bytes"] is None and record["min_note"] == ""


def test_a_measured_call_carries_its_signature_and_a_repeat_the_range_it_reuses():
    measured, repeat = _record(0), _record(1)
    first = "mt|op|0|aten.add.Tensor"
    trace.add_decision(measured, Decision(first, True, "sig"))
    trace.add_decision(repeat, Decision("mt|rep|op|1|aten.add.Tensor", False, "sig", first))
    assert measured["signature"] == "sig" and "repeat" not in measured and "reuses" not in measured
    assert (repeat["signature"], repeat["repeat"], repeat["reuses"]) == ("sig", True, first)


def test_the_trace_file_reads_back_in_order_per_process_skipping_a_cut_line(tmp_path):
    path = tmp_path / "trace.jsonl"
    lines = [{"range": "a", "pid": 2, "seq": 1}, {"range": "b", "pid": 1, "seq": 0},
             {"range": "c", "pid": 2, "seq": 0}, {"freed_after": [7], "pid": 2}]
    path.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"range": "cut')
    # the freed storages join the record written before them (c); each process's records by seq
    assert [(r["range"], r.get("freed_after")) for r in trace.read_trace(path)] == \
        [("c", [7]), ("a", None), ("b", None)]
    assert trace.read_trace(tmp_path / "none.jsonl") == []
