#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""DCGM-format FIXTURE exporter: a lab stand-in for NVIDIA dcgm-exporter.

It serves no real GPU data. It publishes the metric names, types and labels that
dcgm-exporter publishes for the counters file it is given, with synthetic values,
so the telemetry path (tunnel, Prometheus, verifier) can be tested on hosts
without a GPU. Fields listed as unsupported are served with DCGM's blank
sentinel, as the real exporter does for fields a GPU does not support.
Identity labels default to the H200 captured in tests/fixtures/nvidia-smi-q-x.h200.xml.
Faults are injected through --faults: a JSON file, read at every scrape, of GPU index -> field -> value
({"0": {"DCGM_FI_DEV_XID_ERRORS": 48}}), served instead of the synthetic value (the remediation drills).
"""

from __future__ import annotations

import argparse
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

INT64_BLANK = 9223372036854775794  # DCGM_INT64_NOT_SUPPORTED
STAND_IN_LABEL = "gpufleet_stand_in"  # bench_telemetry.STAND_IN_LABEL reads it
START = time.time()


def parse_counters(path: str) -> list[tuple[str, str, str]]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and not line.lstrip().startswith("#"):
                name, kind, help_text = (part.strip() for part in line.split(",", 2))
                rows.append((name, kind, help_text))
    return rows


def synthetic_value(name: str, gpu: int, now: float) -> float:
    """Plausible, slowly varying readings; counters only grow."""
    phase = math.sin((now - START) / 30.0 + gpu)
    uptime = now - START
    table = {
        "DCGM_FI_DEV_GPU_UTIL": round(50 + 40 * phase),
        "DCGM_FI_DEV_MEM_COPY_UTIL": round(20 + 15 * phase),
        "DCGM_FI_DEV_GPU_TEMP": round(45 + 10 * phase),
        "DCGM_FI_DEV_MEMORY_TEMP": round(50 + 8 * phase),
        "DCGM_FI_DEV_POWER_USAGE": round(300 + 200 * phase, 3),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": round(1e9 + uptime * 300_000),
        "DCGM_FI_DEV_SM_CLOCK": 1980,
        "DCGM_FI_DEV_MEM_CLOCK": 3201,
        "DCGM_FI_DEV_FB_USED": round(60000 + 20000 * phase),
        "DCGM_FI_DEV_FB_FREE": round(143771 - 60000 - 20000 * phase - 556),
        "DCGM_FI_DEV_FB_RESERVED": 556,
    }
    return float(table.get(name, 0))


class Fixture:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.counters = parse_counters(args.counters)
        self.unsupported = set(filter(None, args.unsupported.split(",")))

    def labels(self, gpu: int) -> str:
        a = self.args
        pairs = {
            "gpu": str(gpu),
            "UUID": f"{a.uuid_prefix}{gpu:012x}",
            "pci_bus_id": f"00000000:{6 + gpu:02X}:00.0",
            "device": f"nvidia{gpu}",
            "modelName": a.model_name,
            a.host_label: a.node_name,
            "DCGM_FI_DRIVER_VERSION": a.driver_version,
            # Not dcgm-exporter's: the stand-in names itself in every series, so that a figure read from
            # it (gpufleet bench's power and tokens per joule) is shown as synthetic, never as a GPU's.
            STAND_IN_LABEL: "dcgm-fixture",
        }
        return ",".join(f'{k}="{v}"' for k, v in pairs.items())

    def faults(self) -> dict[str, dict[str, float]]:
        """The injected values, by GPU index and field; none where the file is absent or being written."""
        try:
            with open(self.args.faults, encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, TypeError, ValueError):
            return {}

    def render(self) -> str:
        now = time.time()
        faults = self.faults()
        out = []
        for name, kind, help_text in self.counters:
            if kind == "label":
                continue
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for gpu in range(self.args.gpus):
                value = INT64_BLANK if name in self.unsupported else synthetic_value(name, gpu, now)
                value = float(faults.get(str(gpu), {}).get(name, value))
                out.append(f"{name}{{{self.labels(gpu)}}} {value:.17g}")
        return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counters", required=True, help="dcgm-exporter counters CSV")
    parser.add_argument("--listen", default="127.0.0.1:9400")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--node-name", required=True, help="value of the host label (NODE_NAME)")
    parser.add_argument("--host-label", default="Hostname", choices=["Hostname", "hostname"])
    parser.add_argument("--model-name", default="NVIDIA H200")
    parser.add_argument("--driver-version", default="580.159.04")
    parser.add_argument("--uuid-prefix", default="GPU-f1x7e5e0-0000-0000-0000-")
    parser.add_argument("--unsupported", default="", help="comma-separated fields served as blank")
    parser.add_argument("--faults", help="JSON file of injected values: GPU index -> field -> value")
    parser.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="simulate this many GPU nodes (scale benchmarks): node i on the listen port + i, named NODE-NAME-i",
    )
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    if args.nodes == 1:
        serve(Fixture(args), host, int(port))
    for i in range(args.nodes):
        node = argparse.Namespace(**{**vars(args), "node_name": f"{args.node_name}-{i}"})
        threading.Thread(target=serve, args=(Fixture(node), host, int(port) + i), daemon=True).start()
    threading.Event().wait()


def serve(fixture: Fixture, host: str, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path not in ("/metrics", "/health"):
                self.send_error(404)
                return
            # /health answers as dcgm-exporter's does: the DaemonSet's probes read it.
            body = fixture.render().encode() if path == "/metrics" else b"OK"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    ThreadingHTTPServer((host, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
