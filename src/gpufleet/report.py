"""Benchmark reports: the ladder table for terminals, JSON, and a self-contained HTML page."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

COLUMNS = ("level", "wall s", "tok/s", "req/s", "E2E p50", "p95", "p99", "TTFT p50", "p99", "errors", "GPU %")


def _ms(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value * 1000:.0f}ms"


def ladder_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for i, lv in enumerate(result["levels"]):
        marks = []
        if i == result.get("knee_index"):
            marks.append("knee")
        if i == result.get("operating_point_index"):
            marks.append("recommended")
        if lv["client_bound"]:
            marks.append("CLIENT-BOUND")
        gpu = (lv.get("gpu") or {}).get("util_mean_pct")
        rows.append(
            [
                f"{lv['level']:g}" + (f" ({', '.join(marks)})" if marks else ""),
                f"{lv['window_s']:.0f}",
                f"{lv['output_tokens_per_s']:.1f}",
                f"{lv['requests_per_s']:.2f}",
                _ms(lv["e2e"]["p50"]),
                _ms(lv["e2e"]["p95"]),
                _ms(lv["e2e"]["p99"]),
                _ms(lv["ttft"]["p50"]),
                _ms(lv["ttft"]["p99"]),
                str(sum(lv["errors"].values())),
                "-" if gpu is None else f"{gpu:.0f}",
            ]
        )
    return rows


def ladder_table(result: dict[str, Any]) -> str:
    rows = [list(COLUMNS), *ladder_rows(result)]
    widths = [max(len(row[c]) for row in rows) for c in range(len(COLUMNS))]
    lines = [
        "  ".join(cell.rjust(w) if c else cell.ljust(w) for c, (cell, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    for lv in result["levels"]:
        for reason in lv["client_bound_reasons"]:
            lines.append(f"! level {lv['level']:g}: client-bound: {reason}; its figures describe the client")
        for warning in lv.get("warnings", []):
            lines.append(f"! level {lv['level']:g}: {warning}")
    return "\n".join(lines)


def _svg_line(points: list[tuple[float, float]], title: str, y_label: str) -> str:
    width, height, pad = 420, 240, 40
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_max, y_max = max(xs) or 1, max(ys) or 1

    def sx(x: float) -> float:
        return pad + (width - 2 * pad) * x / x_max

    def sy(y: float) -> float:
        return height - pad - (height - 2 * pad) * y / y_max

    path = " ".join(f"{'M' if i == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for i, (x, y) in enumerate(points))
    dots = "".join(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3"/>' for x, y in points)
    return (
        f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" font-size="11">'
        f'<text x="{pad}" y="16">{html.escape(title)}</text>'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#888"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#888"/>'
        f'<text x="{width - pad}" y="{height - 10}" text-anchor="end">concurrency (max {x_max:g})</text>'
        f'<text x="4" y="{pad - 6}">{html.escape(y_label)} (max {y_max:.3g})</text>'
        f'<path d="{path}" fill="none" stroke="#2a6"/>{dots}</svg>'
    )


def _svg_histogram(bins: list[list[float]], title: str) -> str:
    """Bars of a TTFT histogram: bins are [upper bound in s, count]."""
    width, height, pad = 420, 200, 40
    if not bins:
        return ""
    top = max(count for _, count in bins) or 1
    bar = (width - 2 * pad) / len(bins)
    bars = "".join(
        f'<rect x="{pad + i * bar:.1f}" y="{height - pad - (height - 2 * pad) * count / top:.1f}"'
        f' width="{bar - 1:.1f}" height="{(height - 2 * pad) * count / top:.1f}" fill="#48c"/>'
        for i, (_, count) in enumerate(bins)
    )
    return (
        f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" font-size="11">'
        f'<text x="{pad}" y="16">{html.escape(title)}</text>{bars}'
        f'<text x="{pad}" y="{height - 10}">{bins[0][0] * 1000:.0f} ms</text>'
        f'<text x="{width - pad}" y="{height - 10}" text-anchor="end">{bins[-1][0] * 1000:.0f} ms</text></svg>'
    )


def html_report(result: dict[str, Any], title: str) -> str:
    levels = result["levels"]
    tput = [(float(lv["level"]), lv["output_tokens_per_s"]) for lv in levels]
    p99 = [(float(lv["level"]), lv["e2e"]["p99"] or 0.0) for lv in levels]
    ttft = [(float(lv["level"]), (lv["ttft"]["p50"] or 0.0) * 1000) for lv in levels]
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in ladder_rows(result))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    return (
        f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
        "svg{margin:1em 1em 0 0;border:1px solid #ddd}</style>"
        f"<h1>{html.escape(title)}</h1><table><tr>{head}</tr>{rows}</table>"
        + _svg_line(tput, "Output tokens/s", "tok/s")
        + _svg_line(p99, "End-to-end P99", "seconds")
        + _svg_line(ttft, "TTFT P50", "ms")
        + "".join(
            _svg_histogram(lv.get("ttft_histogram") or [], f"TTFT distribution at {lv['level']:g}") for lv in levels
        )
        + f"<pre>{html.escape(ladder_table(result))}</pre>"
    )


def write_reports(result: dict[str, Any], out_dir: Path, title: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out_dir / "benchmark.json", out_dir / "benchmark.html"
    json_path.write_text(json.dumps(result, indent=2))
    html_path.write_text(html_report(result, title))
    return json_path, html_path
