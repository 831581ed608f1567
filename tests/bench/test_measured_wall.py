"""The real time the measured requests took, mapped from the client's virtual timestamps."""

from revati.bench.results import measured_wall_s

# (real, virtual) seconds: the client starts up in 10 s of real time (virtual time runs
# with it), then the clock warps: 40 s of virtual time pass in 2 s of real time
CLOCK = [(0.0, 100.0), (10.0, 110.0), (11.0, 130.0), (12.0, 150.0), (13.0, 151.0)]


def test_the_measured_span_is_mapped_to_the_real_time_it_took() -> None:
    # requests from virtual 115 s (real 10.25) to 145 (real 11.75)
    raw = {"start_times": [120.0, 115.0, 130.0], "duration": 30.0}
    assert measured_wall_s(raw, CLOCK) == 1.5


def test_spans_outside_the_samples_are_clamped_to_them() -> None:
    raw = {"start_times": [105.0], "duration": 100.0}
    assert measured_wall_s(raw, CLOCK) == 8.0   # from real 5 to the last sample, 13


def test_unknown_without_start_times_or_samples() -> None:
    assert measured_wall_s({"duration": 3.0}, CLOCK) is None
    assert measured_wall_s({"start_times": [1.0], "duration": 3.0}, CLOCK[:1]) is None
