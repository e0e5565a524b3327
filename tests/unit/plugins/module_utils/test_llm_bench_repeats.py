"""Repeats of a level: the runs' means with 95 % intervals, and verdicts that do not flip within them."""

import statistics

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb
from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench import repeats


def run(tput: float, e2e_p99: float, level: int = 1, valid: bool = True) -> lb.LevelResult:
    lv = lb.judge_level(lb.BenchConfig(base_url="x"), level, [], [], 0, 0, 10)
    lv.output_tokens_per_s, lv.requests_per_s, lv.valid = tput, tput / 100, valid
    lv.e2e = {"p50": e2e_p99 / 2, "p99": e2e_p99, "mean": e2e_p99 / 2, "count": 10.0}
    lv.invalid_reasons = [] if valid else ["error rate 5.0% > 1.0%"]
    return lv


def repeated(level: int, *tputs: float) -> lb.LevelResult:
    return repeats.combine([run(t, 1.0 + level / 100, level) for t in tputs])


def test_an_interval_is_students_t_over_the_runs():
    ci = repeats.interval([100.0, 110.0, 90.0])
    half = 4.303 * statistics.stdev([100, 110, 90]) / 3**0.5  # t(0.975, 2 degrees of freedom)
    assert ci["mean"] == 100 and ci["low"] == pytest.approx(100 - half) and ci["high"] == pytest.approx(100 + half)
    assert repeats.interval([5.0]) == {"mean": 5.0, "low": 5.0, "high": 5.0, "runs": [5.0]}
    assert repeats.interval([float("nan"), None])["runs"] == []


def test_runs_combine_into_their_means_counts_and_validity():
    level = repeats.combine([run(100, 2.0), run(120, 3.0), run(110, 2.5, valid=False)])
    assert level.repeats == 3 and level.output_tokens_per_s == pytest.approx(110)
    assert level.e2e["p99"] == pytest.approx(2.5) and level.intervals["e2e_p99"]["runs"] == [2.0, 3.0, 2.5]
    assert not level.valid and level.invalid_reasons == ["repeat 3: error rate 5.0% > 1.0%"]
    assert repeats.combine([run(100, 2.0)]).repeats == 1  # one run is itself, with no interval


def test_a_drop_is_below_the_lower_levels_interval_and_the_knee_reads_the_intervals():
    """The H200's 128 and 256 streams: runs up to 10 % apart. 256 below 128's interval is a drop; a
    level whose interval still allows the knee's gain is not the knee, so the knee does not flip."""
    levels = [repeated(64, 9000, 9100, 8900), repeated(128, 14000, 13300, 14600), repeated(256, 10500, 10900, 10200)]
    assert lb.find_drops(levels, 0.10) == {2: 1} and lb.find_knee(levels, 0.10) == 1
    noisy = [repeated(64, 9000, 9100, 8900), repeated(128, 9500, 8000, 11500)]  # +5 % on the means
    assert lb.find_knee(noisy, 0.10) is None  # its interval allows +30 %: not proven a knee
    assert lb.find_knee([run(9000, 1.0), run(9500, 2.0)], 0.10) == 1  # one run each: the means decide


def test_the_recommendation_reads_the_best_levels_low_end():
    # 128 reaches 90 % of 256's low end within its interval: recommended, whichever run was luckier.
    levels = [repeated(64, 9000, 9100, 8900), repeated(128, 12500, 14000, 13000), repeated(256, 14500, 15500, 14000)]
    assert lb.operating_point(levels, None) == 1


def search(cfg: lb.BenchConfig, capacity: float) -> tuple[list[float], float | None]:
    """The levels an SLO capacity search tries against a server whose goodput holds up to ``capacity``."""
    levels: list[lb.LevelResult] = []
    while (level := lb.next_search_level(cfg, levels)) is not None:
        lv = run(100.0 * level, 1.0, level)
        lv.level, lv.goodput_share = level, 1.0 if level <= capacity else 0.9
        levels.append(lv)
    levels.sort(key=lambda lv: lv.level)
    found = lb.capacity_level(cfg, levels)
    return [lv.level for lv in levels], None if found is None else levels[found].level


def test_the_capacity_search_doubles_then_bisects_to_the_highest_level_within_the_slo():
    closed = lb.BenchConfig(base_url="x", search=True, slo_e2e_s=2.0)
    tried, found = search(closed, 37)
    assert tried[:6] == [1, 2, 4, 8, 16, 32] and 64 in tried and len(tried) == 11  # 7 doublings, 4 halvings
    assert found is not None and 37 / 1.1 <= found <= 37  # within 10 % below the true capacity
    assert search(closed, 0.5) == ([1], None)  # even one stream misses: no capacity
    assert search(lb.BenchConfig(base_url="x", search=True, search_max=16), 1000)[1] == 16  # bounded
    opened = lb.BenchConfig(base_url="x", search=True, mode="open")
    assert 0.3 / 1.1 <= search(opened, 0.3)[1] <= 0.3  # below 1 req/s by halving, then bisecting
    assert abs(search(opened, 5.5)[1] - 5.5) / 5.5 <= 0.10


def test_a_repeated_level_passes_the_search_on_its_intervals_low_end():
    cfg = lb.BenchConfig(base_url="x", search=True, goodput_share_min=0.99)
    runs = [run(100, 1.0), run(100, 1.0), run(100, 1.0)]
    for lv, share in zip(runs, (1.0, 0.995, 0.97), strict=True):
        lv.goodput_share = share
    level = repeats.combine(runs)
    assert level.goodput_share == pytest.approx(0.988333, abs=1e-6) and not lb.within_slo(level, cfg)
