# SPDX-License-Identifier: Apache-2.0
"""What the GPU and the server report during a benchmark's levels.

GPU figures: NVML where the benchmark runs on the GPU's host, DCGM through Prometheus
elsewhere; each sampler is called with a finished LevelResult and fills its ``gpu`` (naming
its source); ``tokens_per_joule`` comes from an energy counter where the GPU has one.
Server figures: vLLM's own queue time, KV cache usage and preemptions, or Triton's queue time and
pending requests, read from the Prometheus that scrapes the server, fill ``server``."""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .llm_bench import LevelResult


def prometheus_scalar(url: str, promql: str, at: float) -> float | None:
    """The first value of an instant query at a time, or None when it returns nothing."""
    # Relative: the same file runs as the collection's module_utils and as the CLI's gpufleet.lib.
    from .prometheus_verify import query

    result = query(url, promql, at)
    return float(result[0]["value"][1]) if result else None


def prometheus_label_values(url: str, selector: str, label: str, at: float) -> list[str]:
    """The values a label takes over the series a selector matches at a time (none: [])."""
    from .prometheus_verify import query

    return sorted({str(r["metric"][label]) for r in query(url, f"count by ({label}) ({selector})", at)
                   if r["metric"].get(label)})  # fmt: skip


def histogram_p99(buckets: dict[float, float]) -> tuple[float | None, float | None]:
    """A classic histogram's P99 from its buckets' counts (cumulative, by upper bound, +Inf among them), as
    Prometheus's histogram_quantile interpolates it: (P99, None); or (None, the lowest bound) where the
    P99 falls in the lowest bucket. There histogram_quantile interpolates from 0 and reads 0.99 of the
    bound whatever the requests did (vLLM's queue time read 297 ms with no request queued): only the
    bound is known. (None, None) where the window counted nothing."""
    bounds = sorted(buckets)
    total = buckets.get(float("inf"), 0.0)
    if not bounds or total <= 0:
        return None, None
    rank = 0.99 * total
    if buckets[bounds[0]] >= rank:
        return None, bounds[0]
    for lower, upper in itertools.pairwise(bounds):
        if buckets[upper] >= rank:
            if upper == float("inf"):
                return lower, None  # beyond the highest finite bound: Prometheus returns that bound
            share = (rank - buckets[lower]) / (buckets[upper] - buckets[lower])
            return lower + (upper - lower) * share, None
    return None, None


def prometheus_buckets(url: str, promql: str, at: float) -> dict[float, float]:
    """A query's result by its ``le`` label (a histogram's buckets summed by le), as numbers."""
    from .prometheus_verify import query

    return {float(r["metric"]["le"]): float(r["value"][1]) for r in query(url, promql, at) if "le" in r["metric"]}


# The label the lab's FIXTURE dcgm-exporter puts on every series (no real exporter has it): figures
# from such series are synthetic, and the report says so.
STAND_IN_LABEL = "gpufleet_stand_in"


class PrometheusGpu:
    """Per level, from the DCGM exporter's series in Prometheus: mean utilisation, framebuffer
    and power over the steady window, energy as the delta of the energy counter (mJ). Series of a
    stand-in exporter (STAND_IN_LABEL) are named as such in ``source`` and each level's figures."""

    source = "prometheus (DCGM)"
    stand_in: str | None = None

    def __init__(self, prometheus_url: str, selector: str = "", exporter_interval_s: float = 30.0) -> None:
        self.url, self.selector, self.interval = prometheus_url, selector, exporter_interval_s

    def _scalar(self, promql: str, at: float) -> float | None:
        return prometheus_scalar(self.url, promql, at)

    def __call__(self, level: LevelResult) -> None:
        window = level.window_end - level.window_start
        span = f"[{max(1, round(window))}s]"
        sel = "{" + self.selector + "}"
        energy = f"sum(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{sel})"
        end, start = self._scalar(energy, level.window_end), self._scalar(energy, level.window_start)
        joules = (end - start) / 1000 if end is not None and start is not None else None
        tokens = level.output_tokens_per_s * window
        stand_in = prometheus_label_values(self.url, f"DCGM_FI_DEV_POWER_USAGE{sel}", STAND_IN_LABEL, level.window_end)
        if stand_in:
            self.stand_in = ",".join(stand_in)
            self.source = f"prometheus (DCGM STAND-IN {self.stand_in}: synthetic values, no GPU measured)"
        level.gpu = {
            "source": self.source,
            "stand_in": self.stand_in,
            "util_mean_pct": self._scalar(f"avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{sel}{span}))", level.window_end),
            "fb_used_mean_mib": self._scalar(f"avg(avg_over_time(DCGM_FI_DEV_FB_USED{sel}{span}))", level.window_end),
            "power_mean_w": self._scalar(f"sum(avg_over_time(DCGM_FI_DEV_POWER_USAGE{sel}{span}))", level.window_end),
            "energy_j": joules,
            "tokens_per_joule": tokens / joules if joules else None,
        }
        if window < self.interval:
            level.warnings.append(
                f"level window {window:.0f}s is shorter than the exporter interval {self.interval:.0f}s:"
                " GPU figures rest on one or two samples"
            )


def gpu_sampler(prometheus_url: str, selector: str = "", exporter_interval_s: float = 30.0) -> PrometheusGpu:
    return PrometheusGpu(prometheus_url, selector, exporter_interval_s)


class NvmlGpu:
    """GPU figures from NVML (nvidia-ml-py) on the host the benchmark runs on, sampled in a thread
    every ``period_s``: power, utilisation and memory per sample, and energy from the GPUs' own
    energy counters (mJ since the driver loaded) read at the window's edges."""

    source = "nvml"

    def __init__(self, indices: list[int] | None = None, period_s: float = 0.1) -> None:
        import threading

        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        self.handles = [
            pynvml.nvmlDeviceGetHandleByIndex(i) for i in (indices if indices is not None else range(count))
        ]
        self.names = [pynvml.nvmlDeviceGetName(h) for h in self.handles]
        self.samples: list[tuple[float, float, float, float, float | None]] = []  # t, W, util %, MiB, mJ
        self._stop = threading.Event()
        self._period = period_s
        self._thread = threading.Thread(target=self._run, daemon=True, name="nvml-sampler")
        self._thread.start()

    def _energy_mj(self) -> float | None:
        try:
            return float(sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles))
        except self._nvml.NVMLError:
            return None  # older GPUs have no energy counter: power samples are integrated instead

    def _run(self) -> None:
        nvml = self._nvml
        while not self._stop.is_set():
            watts = sum(nvml.nvmlDeviceGetPowerUsage(h) for h in self.handles) / 1000
            util = sum(nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self.handles) / len(self.handles)
            mib = sum(nvml.nvmlDeviceGetMemoryInfo(h).used for h in self.handles) / 2**20
            self.samples.append((time.time(), watts, util, mib, self._energy_mj()))
            self._stop.wait(self._period)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._nvml.nvmlShutdown()

    def __call__(self, level: LevelResult) -> None:
        inside = [s for s in self.samples if level.window_start <= s[0] <= level.window_end]
        if not inside:
            level.warnings.append("no NVML sample inside the window")
            return
        window = level.window_end - level.window_start
        power = sum(s[1] for s in inside) / len(inside)
        first, last = inside[0], inside[-1]
        if first[4] is not None and last[4] is not None and last[0] > first[0]:
            # The counter's delta, scaled from the samples' span to the whole window.
            joules = (last[4] - first[4]) / 1000 * window / (last[0] - first[0])
            energy_source = "energy counter"
        else:
            joules = power * window
            energy_source = "mean power x window"
        tokens = level.output_tokens_per_s * window
        level.gpu = {
            "source": self.source,
            "gpus": self.names,
            "samples": len(inside),
            "util_mean_pct": sum(s[2] for s in inside) / len(inside),
            "fb_used_mean_mib": sum(s[3] for s in inside) / len(inside),
            "power_mean_w": power,
            "power_max_w": max(s[1] for s in inside),
            "energy_j": joules,
            "energy_source": energy_source,
            "tokens_per_joule": tokens / joules if joules else None,
        }


def local_gpu() -> NvmlGpu | None:
    """NVML's view of this host's GPUs, or None where there is no NVIDIA driver or nvidia-ml-py."""
    try:
        sampler = NvmlGpu()
    except Exception:
        return None
    if not sampler.handles:
        sampler.close()
        return None
    return sampler


class VllmServer:
    """Per level, from the Prometheus that scrapes vLLM: the server's own queue time (mean, and
    P99 from its histogram, or the bound it is below: ``histogram_p99``), KV cache usage (mean and
    peak) and preemptions over the window."""

    source = "prometheus (vLLM)"

    def __init__(self, prometheus_url: str, selector: str = "") -> None:
        self.url, self.selector = prometheus_url, selector

    def _scalar(self, promql: str, at: float) -> float | None:
        return prometheus_scalar(self.url, promql, at)

    def __call__(self, level: LevelResult) -> None:
        window = f"[{max(1, round(level.window_end - level.window_start))}s]"
        sel, at = "{" + self.selector + "}", level.window_end
        queue = f"vllm:request_queue_time_seconds_sum{sel}", f"vllm:request_queue_time_seconds_count{sel}"
        buckets = f"vllm:request_queue_time_seconds_bucket{sel}{window}"
        queue_p99, queue_p99_at_most = histogram_p99(
            prometheus_buckets(self.url, f"sum by (le) (increase({buckets}))", at)
        )
        level.server = {
            "source": self.source,
            "queue_time_mean_s": self._scalar(
                f"sum(increase({queue[0]}{window})) / sum(increase({queue[1]}{window}))", at
            ),
            "queue_time_p99_s": queue_p99,
            "queue_time_p99_at_most_s": queue_p99_at_most,
            "kv_cache_usage_mean": self._scalar(f"avg(avg_over_time(vllm:kv_cache_usage_perc{sel}{window}))", at),
            "kv_cache_usage_max": self._scalar(f"max(max_over_time(vllm:kv_cache_usage_perc{sel}{window}))", at),
            "preemptions": self._scalar(f"sum(increase(vllm:num_preemptions_total{sel}{window}))", at),
            "waiting_max": self._scalar(f"max(max_over_time(vllm:num_requests_waiting{sel}{window}))", at),
        }


class TritonServer:
    """Per level, from the Prometheus that scrapes Triton: its queue time (mean from its counters, P99
    from its queue summary where `--metrics-config summary_latencies=true` exports one: the highest the
    sliding window's P99 read over the level) and the peak of its pending requests, in vLLM's names so
    the capacity file reads both engines alike."""

    source = "prometheus (Triton)"

    def __init__(self, prometheus_url: str, selector: str = "") -> None:
        self.url, self.selector = prometheus_url, selector

    def _scalar(self, promql: str, at: float) -> float | None:
        return prometheus_scalar(self.url, promql, at)

    def __call__(self, level: LevelResult) -> None:
        window = f"[{max(1, round(level.window_end - level.window_start))}s]"
        sel, at = "{" + self.selector + "}", level.window_end
        p99 = "{" + ",".join(filter(None, [self.selector, 'quantile="0.99"'])) + "}"
        queue_us = self._scalar(
            f"sum(increase(nv_inference_queue_duration_us{sel}{window}))"
            f" / sum(increase(nv_inference_request_success{sel}{window}))",
            at,
        )
        queue_p99_us = self._scalar(f"max(max_over_time(nv_inference_queue_summary_us{p99}{window}))", at)
        level.server = {
            "source": self.source,
            "queue_time_mean_s": None if queue_us is None else queue_us / 1e6,
            "queue_time_p99_s": None if queue_p99_us is None else queue_p99_us / 1e6,
            "waiting_max": self._scalar(f"max(max_over_time(nv_inference_pending_request_count{sel}{window}))", at),
        }
