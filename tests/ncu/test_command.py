"""memtraffic.ncu.command's fixed choices, parsed once. (ncu's argv, compared as exact lists, is tested in
tests/collect/test_measure.py and tests/collect/test_profile.py.)"""

from __future__ import annotations

import pytest

from memtraffic.collect.measure import MeasureOptions
from memtraffic.collect.profile import ProfileOptions
from memtraffic.ncu.command import (
    CACHE_CONTROLS,
    CLOCK_CONTROLS,
    REPLAY_MODES,
    NcuControls,
    parse_controls,
)
from memtraffic.vocab.errors import UsageError, choice


def test_the_choices_are_those_ncu_takes():
    assert (CACHE_CONTROLS, CLOCK_CONTROLS, REPLAY_MODES) == (("all", "none"), ("none", "base"),
                                                              ("kernel", "range"))


def test_controls_parse_to_the_typed_record():
    assert parse_controls("none", "base") == NcuControls(cache_control="none", clock_control="base")
    assert parse_controls("all", "none") == NcuControls()


@pytest.mark.parametrize(("cache", "clock", "said"), [
    ("off", "none", "unknown --cache-control 'off': use one of all, none"),
    ("all", "fast", "unknown --clock-control 'fast': use one of none, base"),
    ("All", "none", "unknown --cache-control 'All': use one of all, none"),
])
def test_a_bad_control_is_one_line_naming_the_option_and_its_choices(cache, clock, said):
    with pytest.raises(UsageError) as err:
        parse_controls(cache, clock)
    assert str(err.value) == said


def test_choice_gives_back_the_known_value():
    assert choice("replay mode", "range", REPLAY_MODES) == "range"
    with pytest.raises(UsageError, match=r"^unknown replay mode 'app': use one of kernel, range$"):
        choice("replay mode", "app", REPLAY_MODES)


def test_measure_and_profile_options_parse_the_controls_when_made():
    measure = MeasureOptions(["softmax_tiled"], clock_control="base")
    profile = ProfileOptions(["python", "x.py"], cache_control="none")
    assert (measure.controls, profile.controls) == (NcuControls(clock_control="base"),
                                                    NcuControls(cache_control="none"))
    with pytest.raises(UsageError, match="--clock-control 'fast'"):
        MeasureOptions(["softmax_tiled"], clock_control="fast")
    with pytest.raises(UsageError, match="--cache-control 'some'"):
        ProfileOptions(["python", "x.py"], cache_control="some")
