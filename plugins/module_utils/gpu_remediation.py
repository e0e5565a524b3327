# SPDX-License-Identifier: Apache-2.0
"""What to do about GPU fault alerts: the plan the gpu_remediation role carries out.

Alertmanager's webhook (through ansible-rulebook) brings alerts; each becomes one decision:
- the cause and its class (module_utils/xid.py for XIDs; a pending row remap is `reset`, a row that
  could not be remapped is `replace`);
- the node it is on (the alert's `Hostname`, dcgm-exporter's label, or `node`), which must be one of the
  inventory's GPU nodes;
- whether it quarantines the node, within the circuit breaker's limit of nodes out at once.

An alert is keyed by its fingerprint and start: Alertmanager sends a firing alert again on every group
change and repeat interval, and an alert whose remediation ended (the node released, or labelled for
replacement, or nothing to do) is not acted on twice. A remediation cut short leaves the node
quarantined and the key unrecorded, so the next notification resumes it: it is that node's, counted once.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.capacity import iso_seconds
from ansible_collections.gpufleet.platform.plugins.module_utils.xid import ACTIONS, NONE, REBOOT, REPLACE, RESET, XIDS

QUARANTINE_TAINT = "gpufleet.io/gpu-quarantine"
REPLACE_LABEL = "gpufleet.io/replace"
LADDER_STEPS = ("restart_services", "reset_gpu", "reload_driver", "reboot")
SEVERITY = {NONE: 0, RESET: 1, REBOOT: 2, REPLACE: 3}

# The alerts of the monitoring role's GPU rules that a remediation acts on, and the class of each that
# carries no XID.
XID_ALERT = "GPUXidError"
ALERT_ACTIONS = {
    "GPUUncorrectableRowsRemapped": (RESET, "uncorrectable ECC error: a remapped row waits for a GPU reset"),
    "GPURowRemapFailure": (REPLACE, "a failing memory row could not be remapped"),
}
HANDLED_ALERTS = (XID_ALERT, *ALERT_ACTIONS)
# Outcomes after which an alert is not acted on again (a breaker's refusal is retried on the next notification).
FINAL_OUTCOMES = ("nothing_to_do", "unknown_node", "already_replacing", "released", "replace")

_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)%$")


def alert_key(alert: dict[str, Any]) -> str:
    return f"{alert.get('fingerprint') or ''}@{alert.get('startsAt') or ''}"


def xid_table(overrides: dict[Any, str] | None) -> dict[int, tuple[str, str]]:
    table = dict(XIDS)
    for xid, action in (overrides or {}).items():
        table[int(xid)] = (action, XIDS.get(int(xid), ("", "set by gpu_remediation_xid_actions"))[1])
    return table


def breaker_limit(breaker: Any, fleet_size: int) -> int:
    """Nodes that may be out at once: a count, or a share of the fleet's GPU nodes (at least one)."""
    match = _PERCENT.match(str(breaker).strip())
    if match:
        return max(1, math.floor(fleet_size * float(match.group(1)) / 100))
    return int(breaker)


def problems(settings: dict[str, Any]) -> list[str]:
    """The values no `check:` of one value judges, named as the user wrote them."""
    found = []
    table = settings.get("xid_actions")
    if not isinstance(table, dict):
        found.append(f"gpu_remediation_xid_actions must map XIDs to actions, not {type(table).__name__}")
    else:
        for xid, action in table.items():
            if not re.fullmatch(r"\d+", str(xid).strip()):
                found.append(f"gpu_remediation_xid_actions: key {xid!r} is not an XID number")
            elif action not in ACTIONS:
                found.append(f"gpu_remediation_xid_actions[{xid}]={action!r} is not one of {', '.join(ACTIONS)}")
    breaker = settings.get("breaker")
    match = _PERCENT.match(str(breaker).strip())
    if match:
        if not 0 < float(match.group(1)) <= 100:
            found.append(f"gpu_remediation_breaker={breaker!r}: a share of the fleet must be above 0% and at most 100%")
    elif isinstance(breaker, bool) or not re.fullmatch(r"\d+", str(breaker).strip()) or int(str(breaker)) < 1:
        found.append(
            f"gpu_remediation_breaker={breaker!r} must be at least 1 node, or a share of the fleet such as 10%: "
            "0 would let no GPU be quarantined"
        )
    ladder = settings.get("ladder")
    if not isinstance(ladder, list):
        found.append(f"gpu_remediation_ladder must be a list of steps, not {type(ladder).__name__}")
    else:
        for i, step in enumerate(ladder):
            if step not in LADDER_STEPS:
                found.append(
                    f"gpu_remediation_ladder[{i}]={step!r} is no remediation step (one of {', '.join(LADDER_STEPS)})"
                )
            elif step in ladder[:i]:
                found.append(
                    f"gpu_remediation_ladder[{i}]={step!r} is already at gpu_remediation_ladder[{ladder.index(step)}]"
                )
    return found


def _quarantine_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") == QUARANTINE_TAINT]


def _not_ours(node: str, hosts: dict[str, str], by_name: dict[str, Any]) -> str:
    """Why a node cannot be acted on (not an inventory GPU node, or no Node of the cluster), or ''."""
    if node not in hosts:
        return f"node {node!r} is not one of the inventory's GPU nodes"
    return "" if node in by_name else f"node {node!r} is not one of the GPU cluster's Nodes"


def _node_of(alert: dict[str, Any]) -> str:
    labels = alert.get("labels") or {}
    return str(labels.get("Hostname") or labels.get("node") or "")


def classify(alert: dict[str, Any], table: dict[int, tuple[str, str]], unknown_xid: str) -> tuple[str, str]:
    """(class, cause) of one alert."""
    labels = alert.get("labels") or {}
    name = labels.get("alertname", "")
    if name in ALERT_ACTIONS:
        return ALERT_ACTIONS[name]
    raw = str(labels.get("xid", "")).strip()
    try:
        xid = int(float(raw))
    except ValueError:
        return unknown_xid, f"an XID alert without its number (label xid={raw!r})"
    if xid in table:
        action, text = table[xid]
        return action, f"XID {xid} ({text})"
    return unknown_xid, f"XID {xid} (not in the table: gpu_remediation_unknown_xid={unknown_xid})"


def ladder_from(action: str, ladder: list[str]) -> list[str]:
    """The steps a class of fault climbs: all of them for a reset; only a reboot reaches a GPU off the bus;
    none for a GPU that needs service."""
    if action == RESET:
        return list(ladder)
    if action == REBOOT:
        return ["reboot"] if "reboot" in ladder else []
    return []


def plan(
    alerts: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    hosts: dict[str, str],
    handled: list[str],
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Decisions for a webhook's alerts. ``nodes`` are the GPU cluster's Node objects, ``hosts`` maps each
    inventory GPU node's Node name to its inventory name, ``handled`` the keys the audit log ends."""
    table = xid_table(settings.get("xid_actions"))
    unknown_xid = settings.get("unknown_xid") or NONE
    ladder = list(settings.get("ladder") or [])
    by_name = {n["metadata"]["name"]: n for n in nodes}

    out_now = sorted(name for name, n in by_name.items() if _quarantine_taints(n))
    limit = breaker_limit(settings.get("breaker", 1), len(hosts))
    decisions: list[dict[str, Any]] = []
    chosen: dict[str, dict[str, Any]] = {}  # node -> its quarantine decision
    for alert in alerts or []:
        labels = alert.get("labels") or {}
        if labels.get("alertname") not in HANDLED_ALERTS or alert.get("status", "firing") != "firing":
            continue
        key = alert_key(alert)
        if key in handled:
            continue
        node = _node_of(alert)
        action, cause = classify(alert, table, unknown_xid)
        decision = {
            "key": key, "alert": labels.get("alertname"), "node": node, "host": hosts.get(node),
            "gpu": str(labels.get("gpu", "")), "uuid": str(labels.get("UUID", "")), "cause": cause,
            "action": action, "steps": ladder_from(action, ladder),
        }  # fmt: skip
        if action == NONE:
            decision.update(outcome="nothing_to_do", why="an application's fault: the GPU and its node stay in service")
        elif not_ours := _not_ours(node, hosts, by_name):
            decision.update(outcome="unknown_node", why=f"{not_ours}: nothing done, reported")
        elif REPLACE_LABEL in (by_name[node]["metadata"].get("labels") or {}):
            decision.update(outcome="already_replacing", why=f"{node} is already out, labelled for replacement")
        elif node in chosen:
            first = chosen[node]
            if SEVERITY[action] > SEVERITY[first["action"]]:
                first.update(action=action, steps=decision["steps"], cause=f"{cause}; {first['cause']}")
            else:
                first["cause"] += f"; {cause}"
            first.setdefault("keys", [first["key"]]).append(key)
            continue
        elif node not in out_now and (out := len(out_now) + sum(n not in out_now for n in chosen)) >= limit:
            decision.update(
                outcome="breaker",
                why=f"the circuit breaker holds: {out} of at most "
                f"{limit} GPU node(s) already quarantined ({', '.join(sorted({*out_now, *chosen}))}); reported only, "
                "acted on at a later notification once one is back",
            )
        else:
            resumed = node in out_now
            decision.update(
                outcome="quarantine",
                why=("resumes the remediation of a node already quarantined" if resumed else "quarantine, drain, then ")
                + (" -> ".join(decision["steps"]) + " until the health gate passes" if decision["steps"]
                   else "label it for replacement"),
            )  # fmt: skip
            decision["keys"] = [key]
            chosen[node] = decision
        decisions.append(decision)
    decisions += _releases(settings.get("release") or [], by_name, hosts)
    for decision in decisions:
        decision["line"] = (
            f"{decision['node'] or '?'}: {decision['cause']} ({decision['alert']}"
            + (f", GPU {decision['gpu']}" if decision["gpu"] else "")
            + f") -> {decision['outcome']}: {decision['why']}"
        )
    return {
        "decisions": decisions,
        "quarantine": [d for d in decisions if d["outcome"] in ("quarantine", "release")],
        "quarantined_before": out_now,
        "breaker_limit": limit,
    }


def _releases(names: list[str], by_name: dict[str, Any], hosts: dict[str, str]) -> list[dict[str, Any]]:
    """A person's release of nodes held out (a GPU replaced): each goes back once the health gate passes."""
    found = []
    for node in names:
        decision: dict[str, Any] = {
            "key": "", "alert": "release by request", "node": node, "host": hosts.get(node), "gpu": "", "uuid": "",
            "cause": "released by request (gpu_remediation_release)", "action": "release", "steps": [],
        }  # fmt: skip
        if not_ours := _not_ours(node, hosts, by_name):
            decision.update(outcome="unknown_node", why=f"{not_ours}: nothing done")
        elif not _quarantine_taints(by_name[node]):
            decision.update(outcome="not_quarantined", why=f"{node} is not held out: nothing to release")
        else:
            decision.update(
                outcome="release", why="health gate, then back in service (the gate fails the run otherwise)"
            )
        found.append(decision)
    return found


def handled_keys(audit_log: str) -> list[str]:
    """The alert keys whose remediation ended, from the audit log's JSON lines."""
    keys: list[str] = []
    for line in (audit_log or "").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("outcome") in FINAL_OUTCOMES and not row.get("check_mode"):
            keys += row.get("keys") or ([row["key"]] if row.get("key") else [])
    return keys


def quarantined_nodes(nodes: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """The nodes a remediation holds out: each with its cause, start, age in seconds (``now`` and the start
    are ISO 8601 UTC) and whether it waits for replacement (a person's turn)."""

    def seconds(stamp: str) -> float | None:
        try:
            return iso_seconds(stamp)
        except (AttributeError, ValueError):
            return None

    out = []
    for node in nodes:
        taints = _quarantine_taints(node)
        if not taints:
            continue
        meta = node.get("metadata") or {}
        annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
        since = annotations.get("gpufleet.io/gpu-quarantined-at", "")
        start, end = seconds(since), seconds(now)
        age = round(end - start) if start is not None and end is not None else None
        replace = labels.get(REPLACE_LABEL)
        cause = annotations.get("gpufleet.io/gpu-quarantine-cause") or taints[0].get("value") or "?"
        line = (
            f"{meta.get('name')}: {cause}, out since {since or '?'}"
            + (f" ({_age(age)})" if age is not None else "")
            + (f", labelled for replacement ({REPLACE_LABEL}={replace})" if replace else ", remediating")
        )
        out.append({"node": meta.get("name"), "cause": cause, "since": since, "age_seconds": age,
                    "replace": replace or "", "line": line})  # fmt: skip
    return out


def _age(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h" if seconds < 172800 else f"{seconds // 86400} days"
