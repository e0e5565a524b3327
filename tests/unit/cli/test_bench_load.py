"""`gpufleet bench`'s load options: a closed loop of streams or an open loop of arrivals, checked
before any request is sent, each refusal naming its option."""

from __future__ import annotations

import random
import statistics

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb

from gpufleet import cli


def load(*argv: str) -> dict:
    return cli._load(cli.build_parser().parse_args(["bench", "--calibration", *argv]))


def test_levels_are_a_closed_loop_and_rates_an_open_one():
    assert load()["mode"] == "closed" and load()["levels"] == [1, 5, 30]
    opened = load("--rates", "0.5,2", "--arrival", "gamma", "--burstiness", "0.5", "--max-concurrency", "8")
    assert (opened["mode"], opened["levels"], opened["arrival"], opened["burstiness"], opened["max_concurrency"]) == (
        "open", [0.5, 2.0], "gamma", 0.5, 8,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("--levels", "1,2", "--rates", "4"), "--levels (a closed loop of streams) and --rates"),
        (
            (
                "--burstiness",
                "0.5",
            ),
            "--burstiness shapes open-loop arrivals: give --rates",
        ),
        (
            (
                "--max-concurrency",
                "4",
            ),
            "--max-concurrency shapes open-loop arrivals",
        ),
        (("--rates", "2,x"), "--rates: '2,x' is not a comma-separated list of numbers"),
        (("--rates", "0,2"), "--rates: '0,2': every level must be above 0"),
        (("--levels", "1.5"), "--levels: '1.5' is not a comma-separated list of numbers"),
        (("--rates", "2", "--arrival", "gamma", "--burstiness", "0"), "--burstiness: 0, the gamma's shape"),
    ],
)
def test_bad_load_options_are_refused_naming_the_option(argv, named, capsys):
    assert cli.main(["bench", "--calibration", *argv]) == cli.EXIT_USAGE
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(("arrival", "burstiness", "cv"), [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0),
                                                            ("gamma", 4.0, 0.5), ("constant", 1.0, 0.0)])  # fmt: skip
def test_arrival_gaps_have_the_rates_mean_and_their_shapes_spread(arrival, burstiness, cv):
    """A gamma of shape k has the mean 1/rate and a coefficient of variation 1/sqrt(k) (vLLM's bench's
    burstiness); Poisson's is 1, evenly spaced arrivals' 0."""
    rng = random.Random(1)
    gaps = [lb.next_gap(rng, 20.0, arrival, burstiness) for _ in range(20_000)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / 20, rel=0.05)
    assert statistics.pstdev(gaps) / mean == pytest.approx(cv, abs=0.08)


def test_output_lengths_are_seeded_per_request_and_at_least_one():
    cfg = lb.BenchConfig(base_url="x", max_tokens=16, max_tokens_stddev=8, seed=2)
    lengths = [lb.max_tokens_for(cfg, n) for n in range(5000)]
    assert lengths == [lb.max_tokens_for(cfg, n) for n in range(5000)]  # every run and worker asks the same
    assert min(lengths) >= 1 and statistics.fmean(lengths) == pytest.approx(16, abs=0.5)
    assert statistics.pstdev(lengths) == pytest.approx(8, rel=0.15)
    assert {lb.max_tokens_for(lb.BenchConfig(base_url="x", max_tokens=16), n) for n in range(50)} == {16}
