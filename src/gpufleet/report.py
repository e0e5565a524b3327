"""Benchmark reports: the ladder table for terminals, JSON, and one self-contained HTML page
whose charts matplotlib draws (inline SVG, so the page needs nothing beside it)."""

from __future__ import annotations

import html
import io
import json
import math
from pathlib import Path
from typing import Any

COLUMNS = (
    "level", "window s", "wall s", "tok/s", "req/s", "TTFT p50", "p99", "TPOT p50", "ITL p50", "E2E p50", "p99",
    "errors", "GPU W", "tok/J",
)  # fmt: skip


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def _ms(value: float | None) -> str:
    return f"{value * 1000:.0f}ms" if value is not None and _number(value) else "-"


def _fmt(value: float | None, spec: str) -> str:
    return format(value, spec) if _number(value) else "-"


STAND_IN_MARK = "*"


def _open(result: dict[str, Any]) -> bool:
    return (result.get("config") or {}).get("mode") == "open"


def _level_name(result: dict[str, Any], lv: dict[str, Any]) -> str:
    """A level as its load: concurrent streams (closed loop) or offered requests per second (open loop)."""
    return f"{lv['level']:g}/s" if _open(result) else f"{lv['level']:g}"


def load_line(result: dict[str, Any]) -> str:
    """The load that produced every figure of the report: its loop, arrivals and output lengths."""
    config = result.get("config") or {}
    if _open(result):
        arrival = config.get("arrival", "poisson")
        shape = f" of burstiness {config.get('burstiness', 1.0):g}" if arrival == "gamma" else ""
        cap = config.get("max_concurrency") or 0
        capped = f"at most {cap} in flight (a wait for a slot counts as queue time)" if cap else "no cap in flight"
        load = (
            f"open loop: {arrival} arrivals{shape} at each level's rate (req/s), whatever the server's pace; {capped}"
        )
    else:
        load = "closed loop: each level's users send one request after another"
    spread = config.get("max_tokens_stddev") or 0
    lengths = (f"output lengths drawn per request around {config.get('max_tokens')} tokens (stddev {spread:g})"
               if spread else f"output length {config.get('max_tokens')} tokens")  # fmt: skip
    return f"load: {load}; {lengths}"


def _marks(result: dict[str, Any], i: int, lv: dict[str, Any]) -> list[str]:
    marks = []
    if i == result.get("knee_index"):
        marks.append("knee")
    if i == result.get("operating_point_index"):
        marks.append("recommended")
    if i == result.get("capacity_index"):
        marks.append("capacity")
    if i in (result.get("drop_indices") or []):
        marks.append("DROP")
    if lv["client_bound"]:
        marks.append("CLIENT-BOUND")
    if not lv.get("valid", True) and not lv["client_bound"]:
        marks.append("INVALID")
    return marks


def _tokens_per_event(dialect: dict[str, Any]) -> str:
    """One figure where every level measured the same, else the lowest and the highest with their levels."""
    by_level = dialect.get("tokens_per_event_by_level") or {}
    if not by_level:
        return f"{dialect.get('tokens_per_event', 0):.2f}"
    (low_level, low), (high_level, high) = (
        min(by_level.items(), key=lambda kv: kv[1]),
        max(by_level.items(), key=lambda kv: kv[1]),
    )
    if f"{low:.2f}" == f"{high:.2f}":
        return f"{low:.2f} (every level)"
    return f"{low:.2f} (level {low_level}) to {high:.2f} (level {high_level})"


def _queue_p99(server: dict[str, Any]) -> str:
    """The P99, or where it fell in the histogram's lowest bucket the bound it is below."""
    if server.get("queue_time_p99_s") is None and _number(server.get("queue_time_p99_at_most_s")):
        return f"<{_ms(server['queue_time_p99_at_most_s'])} (the histogram's lowest bucket)"
    return _ms(server.get("queue_time_p99_s"))


def _spread(lv: dict[str, Any], name: str, spec: str) -> str:
    """ " ±half" of a repeated level's 95 % interval of the figure (nothing for one run)."""
    ci = (lv.get("intervals") or {}).get(name) or {}
    if len(ci.get("runs") or []) < 2 or not (_number(ci.get("high")) and _number(ci.get("low"))):
        return ""
    half = (ci["high"] - ci["low"]) / 2
    return f" ±{_ms(half)}" if spec == "ms" else f" ±{half:{spec}}"


def ladder_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for i, lv in enumerate(result["levels"]):
        marks = _marks(result, i, lv)
        gpu = lv.get("gpu") or {}
        errors = sum(lv["errors"].values())
        rows.append(
            [
                _level_name(result, lv) + (f" ({', '.join(marks)})" if marks else ""),
                f"{lv['window_s']:.0f}",
                _fmt(lv.get("wall_s"), ".0f"),
                f"{lv['output_tokens_per_s']:.1f}" + _spread(lv, "output_tokens_per_s", ".1f"),
                f"{lv['requests_per_s']:.2f}",
                _ms(lv["ttft"]["p50"]),
                _ms(lv["ttft"]["p99"]) + _spread(lv, "ttft_p99", "ms"),
                _ms(lv["tpot"]["p50"]),
                _ms(lv["itl"]["p50"]),
                _ms(lv["e2e"]["p50"]),
                _ms(lv["e2e"]["p99"]) + _spread(lv, "e2e_p99", "ms"),
                f"{errors} ({lv.get('error_rate', 0):.0%})" if errors else "0",
                # A stand-in's figures carry a mark that the notes explain: synthetic, no GPU measured.
                _fmt(gpu.get("power_mean_w"), ".0f") + STAND_IN_MARK * bool(gpu.get("stand_in")),
                _fmt(gpu.get("tokens_per_joule"), ".2f") + STAND_IN_MARK * bool(gpu.get("stand_in")),
            ]
        )
    return rows


def _search_stopped_by_invalid(result: dict[str, Any]) -> str:
    """Why a search ended where it did, when the level that ended it was no measurement of the server: an
    invalid level (client-bound, errors) fails the search as a missed SLO does, and the reader must not take
    it for the server's limit."""
    found = result.get("capacity_index")
    floor = float(result["levels"][found]["level"]) if found is not None else float("-inf")
    above = [lv for lv in result["levels"] if float(lv["level"]) > floor]
    if not above:
        return ""
    first = min(above, key=lambda lv: float(lv["level"]))
    if first.get("valid", True):
        return ""
    why = "client-bound" if first.get("client_bound") else "not valid"
    where = f"level {_level_name(result, first)}, where it stopped,"
    return f"; {where} was {why}: no limit of the server's, so run it again"


def notes(result: dict[str, Any]) -> list[str]:
    """What a reader must know beside the numbers: errors with the server's words, levels
    that cannot be trusted, how the server streamed, where GPU figures came from."""
    lines = [load_line(result)] if result.get("config") else []
    config = result.get("config") or {}
    if config.get("search"):
        found = result.get("capacity_index")
        level = result["levels"][found] if found is not None else None
        lines.append(
            f"SLO capacity search: the highest level whose share of requests within every limit stays at or above"
            f" {config.get('goodput_share_min', 0.99):g}: "
            + (f"{_level_name(result, level)} (share {level['goodput_share']:.3f})" if level else "none passed")
            + f"; tried {', '.join(_level_name(result, lv) for lv in result['levels'])}"
            + _search_stopped_by_invalid(result)
        )
    repeats = config.get("repeats") or 1
    if repeats > 1:
        lines.append(
            f"each level ran {repeats} times back to back: its figures are the runs' means, ± the half-width of"
            " their 95 % confidence interval (Student's t); the knee, the recommendation and drops read the intervals"
        )
    for lv in result["levels"]:
        name = f"level {_level_name(result, lv)}"
        for kind, count in lv["errors"].items():
            said = "; ".join(lv.get("error_messages", {}).get(kind, [])) or "no message"
            lines.append(f"{name}: {count} x {kind}: {said}")
        for reason in lv["client_bound_reasons"]:
            lines.append(f"{name}: client-bound: {reason}; its figures describe the client")
        for reason in lv.get("invalid_reasons", []):
            if reason != "client-bound":
                lines.append(f"{name}: not valid: {reason}")
        lines.extend(f"{name}: {warning}" for warning in lv.get("warnings", []))
    lines.extend(result.get("warnings", []))
    fixed = result.get("fixed_length") or {}
    if fixed:
        lines.append(f"fixed output length: {'yes' if fixed.get('used') else 'no'} ({fixed.get('why')})")
    dialect = result.get("dialect") or {}
    if dialect:
        lines.append(
            f"server dialect: [DONE] marker {'yes' if dialect.get('done_marker') else 'no'}; usage"
            f" {dialect.get('usage')}; {_tokens_per_event(dialect)} tokens per event;"
            f" role-only first event {'yes' if dialect.get('role_only_first_event') else 'no'}"
        )
    first = next((lv for lv in result["levels"] if _number(lv.get("input_tokens", {}).get("p50"))), None)
    if first:
        inp, out = first["input_tokens"], first["output_tokens_per_request"]
        lines.append(
            f"tokens per request (level {first['level']:g}, from the server's usage): input p50 {inp['p50']:.0f},"
            f" p99 {inp['p99']:.0f}; output p50 {out['p50']:.0f}, p99 {out['p99']:.0f}"
        )
    for lv in result["levels"]:
        if _number(lv.get("prefix_cache_hit_rate")):
            lines.append(
                f"level {_level_name(result, lv)}: prefix cache hit rate {lv['prefix_cache_hit_rate']:.1%}"
                f" ({lv.get('prefix_cache_source')})"
            )
    for lv in result["levels"]:
        server = lv.get("server") or {}
        if server:
            kv_mean, kv_peak = server.get("kv_cache_usage_mean"), server.get("kv_cache_usage_max")
            kv = f"{_fmt(kv_mean, '.1%')}, peak {_fmt(kv_peak, '.1%')}"
            lines.append(
                f"level {_level_name(result, lv)}, the server's own figures ({server.get('source')}): queue time mean"
                f" {_ms(server.get('queue_time_mean_s'))}, p99 {_queue_p99(server)}; KV cache used"
                f" mean {kv}; preemptions {_fmt(server.get('preemptions'), '.0f')};"
                f" waiting at most {_fmt(server.get('waiting_max'), '.0f')}"
            )
    lines.append(f"GPU figures: {result.get('gpu_source', 'none')}")
    if result.get("gpu_stand_in"):
        lines.append(
            f"{STAND_IN_MARK} GPU power and tokens per joule come from a STAND-IN exporter"
            f" ({result['gpu_stand_in']}): synthetic values, no GPU was measured"
        )
    return lines


def ladder_table(result: dict[str, Any]) -> str:
    rows = [list(COLUMNS), *ladder_rows(result)]
    widths = [max(len(row[c]) for row in rows) for c in range(len(COLUMNS))]
    lines = [
        "  ".join(cell.rjust(w) if c else cell.ljust(w) for c, (cell, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    return "\n".join(lines + [f"! {line}" for line in notes(result)])


# --- charts --------------------------------------------------------------------


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _concurrency_axis(ax: Any, levels: list[float], open_loop: bool = False) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([f"{x:g}" for x in levels])
    ax.minorticks_off()
    ax.set_xlabel("offered requests/s (log scale)" if open_loop else "concurrent streams (log scale)")
    ax.grid(True, which="major", alpha=0.3)


def _points(levels: list[dict[str, Any]], value: Any) -> list[tuple[float, float]]:
    """(concurrency, value(level)) for each level with a number to draw."""
    return [(float(lv["level"]), v) for lv in levels if _number(v := value(lv))]


def _errors(lvs: list[dict[str, Any]], name: str, value: Any) -> tuple[list[float], list[float]]:
    """Error bars (below, above) of a figure from each level's interval; none unless every level was repeated."""
    cis = [(lv.get("intervals") or {}).get(name) or {} for lv in lvs]
    if not cis or any(len(ci.get("runs") or []) < 2 for ci in cis):
        return [], []
    return [value(lv) - ci["low"] for lv, ci in zip(lvs, cis, strict=True)], [
        ci["high"] - value(lv) for lv, ci in zip(lvs, cis, strict=True)
    ]


def _throughput_against_latency(plt: Any, result: dict[str, Any]) -> str:
    """The trade-off people read: output tokens/s against the E2E P99 each level paid for it, each point
    labelled with its level, with the repeats' intervals in both directions."""
    lvs = [lv for lv in result["levels"] if _number(lv["e2e"]["p99"]) and lv["output_tokens_per_s"] > 0]
    fig, ax = plt.subplots()
    x, y = [lv["e2e"]["p99"] for lv in lvs], [lv["output_tokens_per_s"] for lv in lvs]
    ax.plot(x, y, "o-", color="#148")
    xerr, yerr = (
        _errors(lvs, "e2e_p99", lambda lv: lv["e2e"]["p99"]),
        _errors(lvs, "output_tokens_per_s", lambda lv: lv["output_tokens_per_s"]),
    )
    if xerr[0] and yerr[0]:
        ax.errorbar(x, y, xerr=list(xerr), yerr=list(yerr), fmt="none", ecolor="#148", capsize=3)
    for lv, px, py in zip(lvs, x, y, strict=True):
        ax.annotate(_level_name(result, lv), (px, py), textcoords="offset points", xytext=(4, -10), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("E2E P99, seconds (log scale)")
    ax.set_ylabel("output tokens/s")
    ax.set_title("Throughput against latency")
    ax.grid(True, alpha=0.3)
    svg = _svg(fig)
    plt.close(fig)
    return svg


def _goodput_chart(plt: Any, result: dict[str, Any], shares: list[tuple[float, float]]) -> str:
    """Each level's goodput share (requests within every SLO) against its load, the search's share as a
    line and the level it found marked: where the capacity is, and how steeply the SLO breaks beyond it."""
    config = result.get("config") or {}
    fig, ax = plt.subplots()
    ax.plot(*zip(*sorted(shares), strict=True), "o-", color="#2a7", label="goodput share")
    if config.get("search"):
        ax.axhline(config.get("goodput_share_min", 0.99), color="#c33", linestyle="--", label="the SLO's share")
    found = result.get("capacity_index")
    if found is not None:
        lv = result["levels"][found]
        ax.plot([float(lv["level"])], [lv["goodput_share"]], "*", color="#148", markersize=12, label="capacity")
    limits = ", ".join(f"{k.removeprefix('slo_').removesuffix('_s')} {v:g} s" for k, v in config.items()
                       if k.startswith("slo_") and v is not None)  # fmt: skip
    _concurrency_axis(ax, [x for x, _ in shares], _open(result))
    ax.set_ylabel("share of requests within the SLO")
    ax.set_title(f"Goodput ({limits})" if limits else "Goodput")
    ax.legend(loc="best", fontsize=8)
    svg = _svg(fig)
    plt.close(fig)
    return svg


def charts(result: dict[str, Any]) -> list[str]:
    """Throughput, latency percentiles, GPU power and efficiency, and TTFT distributions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "figure.figsize": (5.2, 3.2)})
    lvs = result["levels"]
    x = [float(lv["level"]) for lv in lvs]
    out = []

    fig, ax = plt.subplots()
    ax.plot(x, [lv["output_tokens_per_s"] for lv in lvs], "o-", color="#2a7", label="valid level")
    low, high = _errors(lvs, "output_tokens_per_s", lambda lv: lv["output_tokens_per_s"])
    if low:
        ax.errorbar(x, [lv["output_tokens_per_s"] for lv in lvs], yerr=[low, high], fmt="none", ecolor="#2a7",
                    capsize=3, label="95 % interval of the repeats")  # fmt: skip
    bad = [(float(lv["level"]), lv["output_tokens_per_s"]) for lv in lvs if not lv.get("valid", True)]
    if bad:
        ax.plot(*zip(*bad, strict=True), "x", color="#c33", markersize=9, label="invalid (errors or client-bound)")
    for key, style in (("knee_index", "v"), ("operating_point_index", "*")):
        if result.get(key) is not None:
            lv = lvs[result[key]]
            ax.plot([float(lv["level"])], [lv["output_tokens_per_s"]], style, color="#148", markersize=11,
                    label="knee" if key == "knee_index" else "recommended")  # fmt: skip
    _concurrency_axis(ax, x, _open(result))
    ax.set_ylabel("output tokens/s")
    ax.set_title("Output tokens/s")
    ax.legend(loc="best", fontsize=8)
    out.append(_svg(fig))
    plt.close(fig)

    fig, ax = plt.subplots()
    for name, key, pct, style in (
        ("TTFT p50", "ttft", "p50", "o-"), ("TTFT p99", "ttft", "p99", "o--"), ("TPOT p50", "tpot", "p50", "s-"),
        ("ITL p50", "itl", "p50", "^-"), ("E2E p50", "e2e", "p50", "d-"), ("E2E p99", "e2e", "p99", "d--"),
    ):  # fmt: skip
        points = [(x, y) for x, y in _points(lvs, lambda lv: lv[key][pct]) if y > 0]  # noqa: B023 - used at once
        if points:
            ax.plot(*zip(*points, strict=True), style, label=name)
    _concurrency_axis(ax, x, _open(result))
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log scale)")
    ax.set_title("Latency per level")
    ax.legend(loc="best", fontsize=8)
    out.append(_svg(fig))
    plt.close(fig)

    out.append(_throughput_against_latency(plt, result))
    shares = _points(lvs, lambda lv: lv.get("goodput_share"))
    if shares:
        out.append(_goodput_chart(plt, result, shares))

    power = _points(lvs, lambda lv: (lv.get("gpu") or {}).get("power_mean_w"))
    if power:
        fig, ax = plt.subplots()
        ax.plot(*zip(*power, strict=True), "o-", color="#d62", label="mean power (W)")
        ax.set_ylabel("GPU power, W")
        efficiency = _points(lvs, lambda lv: (lv.get("gpu") or {}).get("tokens_per_joule"))
        if efficiency:
            twin = ax.twinx()
            twin.plot(*zip(*efficiency, strict=True), "s--", color="#148", label="tokens per joule")
            twin.set_ylabel("tokens per joule")
        _concurrency_axis(ax, x, _open(result))
        ax.set_title(f"GPU power and efficiency ({result.get('gpu_source')})")
        out.append(_svg(fig))
        plt.close(fig)

    histograms = [lv for lv in lvs if lv.get("ttft_histogram")]
    if histograms:
        fig, ax = plt.subplots()
        for lv in histograms:
            bounds, counts = zip(*lv["ttft_histogram"], strict=True)
            ax.step(
                [b * 1000 for b in bounds],
                counts,
                where="pre",
                label=_level_name(result, lv) + ("" if _open(result) else " streams"),
            )
        ax.set_xlabel("TTFT, ms")
        ax.set_ylabel("requests")
        ax.set_title("TTFT distribution per level")
        ax.legend(loc="best", fontsize=8)
        out.append(_svg(fig))
        plt.close(fig)
    return out


def html_report(result: dict[str, Any], title: str) -> str:
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in ladder_rows(result))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    errors = [
        (f"{lv['level']:g}", kind, str(count), "; ".join(lv.get("error_messages", {}).get(kind, [])))
        for lv in result["levels"]
        for kind, count in lv["errors"].items()
    ]
    error_table = (
        "<h2>Errors</h2><table><tr><th>level</th><th>kind</th><th>count</th><th>the server said</th></tr>"
        + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in errors)
        + "</table>"
        if errors
        else ""
    )
    return (
        f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
        "td:last-child{text-align:left}.charts svg{margin:1em 1em 0 0;border:1px solid #ddd;max-width:48%;"
        "height:auto}</style>"
        f"<h1>{html.escape(title)}</h1><table><tr>{head}</tr>{rows}</table>"
        f"<ul>{''.join(f'<li>{html.escape(line)}</li>' for line in notes(result))}</ul>"
        + error_table
        + f"<div class='charts'>{''.join(charts(result))}</div>"
    )


def write_reports(result: dict[str, Any], out_dir: Path, title: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out_dir / "benchmark.json", out_dir / "benchmark.html"
    json_path.write_text(json.dumps(result, indent=2))
    html_path.write_text(html_report(result, title))
    return json_path, html_path
