#!/usr/bin/env python3
"""Benchmark: the benchmark client's ceiling on this machine (not a test).

The calibration server runs pinned to core 0, the client to core 1. Per concurrency level,
with TTFT 100 ms, ITL 20 ms and 64 tokens per request, it prints measured/ideal tokens/s
(ideal = C*64/(0.1+63*0.02)), the P99 TTFT error against the schedule, the P99 receive lag
(client receive time minus the server's send stamp), client CPU, and whether the client
flagged itself client-bound.

    python benchmarks/client_ceiling.py [--levels 1,16,64,256,1024] [--duration 10] [--workers 1]
                                        [--input-len 96:160]  (random unique prompts, as the CLI sends)
"""

from __future__ import annotations

import argparse
import os

from gpufleet.lib import llm_bench as lb

from gpufleet.calibration_server import launch

TTFT, ITL, TOKENS = 0.1, 0.02, 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,16,64,256,512,1024")
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--port", type=int, default=8199)
    parser.add_argument("--input-len", help="MIN:MAX words of random unique prompts (default: one fixed prompt)")
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    server_core, client_core = (cores[0], cores[1]) if len(cores) > 1 else (cores[0], cores[0])
    server, url = launch(
        args.port, "--ttft", str(TTFT), "--itl", str(ITL), "--tokens", str(TOKENS),
        prefix=("taskset", "-c", str(server_core)),
    )  # fmt: skip
    os.sched_setaffinity(0, {client_core})
    try:
        print(f"server on core {server_core}, client on core {client_core}, {args.workers} client process(es)")
        print(f"{'C':>5} {'tok/s':>9} {'ideal':>9} {'ratio':>6} {'TTFT p99 err':>13} {'recv lag p99':>13}"
              f" {'client CPU':>10}  flagged")  # fmt: skip
        for level in (int(x) for x in args.levels.split(",")):
            cfg = lb.BenchConfig(
                base_url=url, model="calibration", api="chat", max_tokens=TOKENS,
                warmup_s=args.warmup, duration_s=args.duration, workers=args.workers,
                prompt_words=tuple(int(x) for x in args.input_len.split(":")) if args.input_len else None,
            )  # fmt: skip
            lv = lb.run_level(cfg, level)
            ideal = level * TOKENS / (TTFT + (TOKENS - 1) * ITL)
            print(
                f"{level:5d} {lv.output_tokens_per_s:9.0f} {ideal:9.0f} {lv.output_tokens_per_s / ideal:6.3f}"
                f" {(lv.ttft['p99'] - TTFT) * 1000:10.1f} ms {lv.receive_lag['p99'] * 1000:10.1f} ms"
                f" {lv.client_cpu:9.0%}  {'client-bound' if lv.client_bound else '-'}"
                + (f" ({'; '.join(lv.client_bound_reasons)})" if lv.client_bound else ""),
                flush=True,
            )
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
