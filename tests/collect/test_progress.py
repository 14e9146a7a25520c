"""profile's progress line: launches measured, repeats skipped, an ETA from an earlier run of the command."""

from __future__ import annotations

import json
import sys

import pytest

from memtraffic.collect.progress import Expected, TraceProgress, earlier_run, end_text, progress_text


@pytest.mark.parametrize(("args", "text"), [
    ((120, 2400, 45.0, 212), "ncu: 120 of 212 expected kernel launches measured, 2400 repeated calls "
                             "skipped; 45 s so far, about 34 s left"),
    ((10, 0, 100.0, 40), "ncu: 10 of 40 expected kernel launches measured; 1 min 40 s so far, about "
                         "5 min 00 s left"),
    ((212, 5, 80.0, 212), "ncu: 212 of 212 expected kernel launches measured, 5 repeated calls skipped"),
    ((0, 0, 3.0, 212), "ncu: 0 of 212 expected kernel launches measured"),
    ((50, 7, 20.0, None), "ncu: 50 kernel launches measured, 7 repeated calls skipped (0.40 s a launch)"),
    ((0, 0, 1.0, None), "ncu: 0 kernel launches measured"),
    ((1, 0, 10.5, None), "ncu: 1 kernel launch measured (10.50 s a launch)"),
])
def test_progress_text(args, text):
    assert progress_text(*args) == text


def test_end_text_only_when_fewer_than_expected(tmp_path):
    expected = Expected(tmp_path / "earlier", 212)
    assert end_text(212, expected) is None and end_text(300, expected) is None and end_text(5, None) is None
    assert end_text(180, expected) == (f"the program ended after 180 of the 212 kernel launches expected (as "
                                       f"measured by {tmp_path / 'earlier'}): it stopped early, or ran "
                                       "differently this time")


def _run(folder, name, **over):
    run = {"kind": "profile", "program": ["python", "t.py"], "metric_set": "traffic", "distinct": 1,
           "returncode": 0, "interrupted": False, "kernels_profiled": 10, "finished": "2026-11-25T10:00:00Z"}
    run.update(over)
    (folder / name).mkdir(parents=True)
    (folder / name / "run.json").write_text(json.dumps(run))
    return folder / name


def test_earlier_run_is_the_newest_matching_finished_one(tmp_path):
    settings = {"metric_set": "traffic", "distinct": 1}
    _run(tmp_path, "a", kernels_profiled=11)
    newest = _run(tmp_path, "b", kernels_profiled=12, finished="2026-11-25T11:00:00Z")
    _run(tmp_path, "c", finished="2026-11-25T12:00:00Z", distinct=0)  # other setting
    _run(tmp_path, "d", finished="2026-11-25T12:00:00Z", returncode=1)  # failed
    _run(tmp_path, "e", finished="2026-11-25T12:00:00Z", program=["python", "u.py"])
    _run(tmp_path, "f", finished="2026-11-25T12:00:00Z", kernels_profiled=0)
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "run.json").write_text("{cut")
    assert earlier_run([tmp_path, tmp_path / "missing"], ["python", "t.py"], settings) == Expected(newest, 12)
    older = earlier_run([tmp_path], ["python", "t.py"], settings, exclude=newest)
    assert older == Expected(tmp_path / "a", 11)
    assert earlier_run([tmp_path], ["python", "v.py"], settings) is None


def test_trace_progress_counts_whole_repeat_lines_as_the_trace_grows(tmp_path):
    trace = tmp_path / "trace.jsonl"
    now = [0.0]
    progress = TraceProgress(trace, Expected(tmp_path, 4), clock=lambda: now[0])
    assert progress.line(0) == "ncu: 0 of 4 expected kernel launches measured"  # no trace yet
    rec = {"range": "mt|rep|op|1|x", "repeat": True}
    trace.write_text(json.dumps(rec) + "\n" + json.dumps({"range": "mt|op|0|x"}) + "\n" + '{"range": "mt|rep')
    now[0] = 10.0
    assert progress.line(2) == ("ncu: 2 of 4 expected kernel launches measured, 1 repeated calls skipped; "
                                "10 s so far, about 10 s left")
    with open(trace, "a") as f:
        f.write('|op|2|x", "repeat": true}\n')
    assert progress.repeats == 1 and "2 repeated calls skipped" in progress.line(3)


def test_trace_progress_times_a_launch_from_the_first_one_seen_not_from_the_start(tmp_path):
    """30 s of start-up, then a launch a second: the estimate is 1 s a launch, not (30 + 10) / 11."""
    now = [0.0]
    progress = TraceProgress(tmp_path / "trace.jsonl", Expected(tmp_path, 100), clock=lambda: now[0])
    now[0] = 30.0
    assert progress.line(1) == ("ncu: 1 of 100 expected kernel launches measured; 30 s so far, about "
                                "49 min 30 s left")  # one launch: start-up and launch cannot be told apart
    now[0] = 40.0
    assert progress.line(11) == ("ncu: 11 of 100 expected kernel launches measured; 40 s so far, about "
                                 "1 min 29 s left")
    without = TraceProgress(tmp_path / "trace.jsonl", clock=lambda: now[0])
    now[0] += 30.0
    without.line(2)
    now[0] += 8.0
    assert without.line(6) == "ncu: 6 kernel launches measured (2.00 s a launch)"


def test_run_ncu_notes_when_the_first_kernel_was_profiled_and_describes_progress(tmp_path):
    from stand_ins import fake_ncu

    from memtraffic.ncu import command as ncu_mod

    ncu = fake_ncu(tmp_path / "ncu", "import time\nprint('program starting')\ntime.sleep(0.3)\n"
                   "for i in range(3):\n"
                   "    print(f'==PROF== Profiling \"k{i}\" - {i}: 0%....50%....100% - 1 pass')\n"
                   "    time.sleep(0.05)")
    shown: list[str] = []
    result = ncu_mod.run_ncu([str(ncu)], tmp_path / "ncu.log", echo=shown.append, progress_every_s=0.0,
                             describe=lambda n: f"described {n}")
    assert result.kernels == 3 and 0.3 <= result.first_kernel_s < 5
    assert shown == ["program starting", "described 1 (last: k0)", "described 2 (last: k1)",
                     "described 3 (last: k2)"]
    quiet = ncu_mod.run_ncu([sys.executable, "-c", "print('no kernel')"], tmp_path / "ncu.log",
                            echo=lambda line: None)
    assert quiet.kernels == 0 and quiet.first_kernel_s is None
