"""memtraffic.vocab.launches: the measure/reuse decision every range producer asks."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtraffic.inprogram import distinct as D
from memtraffic.vocab import launches as L


def test_first_call_measured_repeats_reuse_it():
    state = D.Launches(1)
    first = state.decide("mt|op|0|aten.mm.default", ("aten.mm.default", (4, 4)))
    again = state.decide("mt|op|1|aten.mm.default", ("aten.mm.default", (4, 4)))
    state.done(again)
    other = state.decide("mt|op|2|aten.mm.default", ("aten.mm.default", (8, 4)))
    assert first == L.Decision("mt|op|0|aten.mm.default", True, first.signature)
    assert again == L.Decision("mt|rep|op|1|aten.mm.default", False, first.signature,
                               "mt|op|0|aten.mm.default")
    assert other.measured and other.signature != first.signature
    assert (state.measured, state.repeats) == (2, 1)


def test_k_calls_measured_and_always_measured():
    state = D.Launches(2)
    sig = ("aten.add.Tensor", (3,))
    got = []
    for i in range(4):
        got.append(state.decide(f"mt|op|{i}|aten.add.Tensor", sig))
        state.done(got[-1])
    assert [d.measured for d in got] == [True, True, False, False]
    assert {d.reuses for d in got[2:]} == {"mt|op|0|aten.add.Tensor"}
    gathers = [D.Launches(1).decide("mt|op|0|g", "s", always=True)] + \
        [state.decide(f"mt|op|{i}|aten.index.Tensor", "idx", always=True) for i in range(3)]
    assert all(d.measured for d in gathers)


def test_value_dependent_signatures_measured_v_times():
    def decisions(state, n, sig="idx"):
        got = []
        for i in range(n):
            got.append(state.decide(f"mt|op|{i}|aten.index_copy_.default", sig, value_dependent=True))
            state.done(got[-1])
        return got

    capped = decisions(D.Launches(1, 3), 6)
    assert [d.measured for d in capped] == [True] * 3 + [False] * 3
    assert {d.reuses for d in capped[3:]} == {"mt|op|0|aten.index_copy_.default"}
    assert all(d.measured for d in decisions(D.Launches(1, 0), 6))  # V 0: every call
    assert [d.measured for d in decisions(D.Launches(4, 2), 6)] == [True] * 4 + [False] * 2  # never < K
    assert all(d.measured for d in decisions(D.Launches(0, 2), 6))  # K 0: every launch
    plain = D.Launches(1, 3)
    assert [plain.decide(f"mt|op|{i}|x", "s").measured for i in range(3)] == [True, False, False]


def test_every_call_measured_with_k0():
    state = D.Launches(0)
    assert all(state.decide(f"mt|op|{i}|x", "same").measured for i in range(5))


def test_nested_inside_a_repeat_is_a_repeat():
    state = D.Launches(1)
    outer1 = state.decide("mt|op|0|custom", "outer")
    inner1 = state.decide("mt|triton|k|1", "inner")
    state.done(inner1)
    state.done(outer1)
    outer2 = state.decide("mt|op|2|custom", "outer")
    inner2 = state.decide("mt|triton|k|3", "inner")
    new = state.decide("mt|triton|k2|4", "never seen")  # would be measured, but its parent is skipped
    state.done(new)
    state.done(inner2)
    state.done(outer2)
    assert inner1.measured and not outer2.measured
    assert (inner2.measured, inner2.reuses) == (False, "mt|triton|k|1")
    assert (new.measured, new.reuses, new.range) == (False, None, "mt|rep|triton|k2|4")
    assert state.decide("mt|triton|k2|5", "never seen").measured  # outside a repeat again: measured


def test_open_repeats_are_per_thread():
    state = D.Launches(1)
    state.decide("mt|op|0|x", "s")
    rep = state.decide("mt|op|1|x", "s")  # left open on this thread
    seen = []
    t = threading.Thread(target=lambda: seen.append(state.decide("mt|op|2|y", "t").measured))
    t.start()
    t.join()
    assert seen == [True] and not rep.measured


@given(st.text().filter(lambda s: not s.startswith("rep|")))
def test_range_names_round_trip(rest):
    name = "mt|" + rest
    assert L.is_repeat(L.repeat_range(name))
    assert L.measured_range(L.repeat_range(name)) == name


def test_repeat_range_refuses_foreign_names():
    with pytest.raises(ValueError):
        L.repeat_range("other|x")
    with pytest.raises(ValueError):
        L.repeat_range("mt|rep|op|1|x")


@pytest.mark.parametrize(("text", "k"), [(None, 0), ("", 0), ("0", 0), ("1", 1), (" 3 ", 3)])
def test_parse_distinct(text, k):
    assert L.parse_distinct(text) == k


@pytest.mark.parametrize("text", ["-1", "x", "1.5"])
def test_parse_distinct_refuses(text):
    with pytest.raises(ValueError):
        L.parse_distinct(text)


def test_process_state_from_environment(monkeypatch):
    monkeypatch.setenv(L.DISTINCT_ENV, "1")
    state = D.reset()
    assert state.k == 1
    monkeypatch.setenv(L.VALUE_CALLS_ENV, "4")
    assert (D.reset().k, D.launches().value_calls) == (1, 4)
    monkeypatch.setenv(L.DISTINCT_ENV, "junk")
    monkeypatch.setenv(L.VALUE_CALLS_ENV, "-2")
    assert (D.reset().k, D.launches().value_calls) == (0, 0)
    D.reset(0)


def test_digest_is_stable():
    assert L.signature_digest(("aten.mm.default", (4, 4), "fp32")) == \
        L.signature_digest(("aten.mm.default", (4, 4), "fp32"))
    assert len(L.signature_digest("x")) == 16
