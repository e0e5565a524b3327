# SPDX-License-Identifier: Apache-2.0
"""Checks of an Alertmanager configuration before it is written: every receiver a route names
exists, and every notifier carries its credential. Messages name fields, never values."""

from __future__ import annotations

from typing import Any

from .validate import placeholder

# The field holding each notifier's credential or address, inline or as a file (Alertmanager's
# configuration reference); one of them must be set.
CREDENTIALS: dict[str, tuple[str, ...]] = {
    "slack_configs": ("api_url", "api_url_file"),
    "webhook_configs": ("url", "url_file"),
    "pagerduty_configs": ("routing_key", "routing_key_file", "service_key", "service_key_file"),
    "opsgenie_configs": ("api_key", "api_key_file"),
    "msteams_configs": ("webhook_url", "webhook_url_file"),
    "msteamsv2_configs": ("webhook_url", "webhook_url_file"),
    "telegram_configs": ("bot_token", "bot_token_file"),
    "email_configs": ("to",),
}


def _route_receivers(route: dict[str, Any]) -> list[str]:
    names = [route["receiver"]] if route.get("receiver") else []
    for child in route.get("routes") or []:
        names += _route_receivers(child)
    return names


def config_problems(config: dict[str, Any], variable: str) -> list[str]:
    if not config:
        return []
    if not isinstance(config, dict):
        return [f"{variable} must be an Alertmanager configuration (a mapping with route and receivers)"]
    problems = []
    receivers = config.get("receivers") or []
    names = [r.get("name") for r in receivers if isinstance(r, dict)]
    route = config.get("route")
    if not isinstance(route, dict) or not route.get("receiver"):
        problems.append(f"{variable}.route.receiver is missing: Alertmanager needs a default receiver")
    else:
        for name in _route_receivers(route):
            if name not in names:
                problems.append(f"{variable}.route: receiver {name} is not in {variable}.receivers")
    for i, receiver in enumerate(receivers):
        where = f"{variable}.receivers[{i}]"
        if not isinstance(receiver, dict) or not receiver.get("name"):
            problems.append(f"{where}.name is missing")
            continue
        for kind, fields in CREDENTIALS.items():
            for j, notifier in enumerate(receiver.get(kind) or []):
                if not any((notifier or {}).get(f) for f in fields):
                    problems.append(
                        f"{where}.{kind}[{j}] ({receiver['name']}) has none of {', '.join(fields)}: "
                        "put the credential in your vault"
                    )
                for field in fields:
                    if placeholder((notifier or {}).get(field)):
                        problems.append(
                            f"{where}.{kind}[{j}].{field} ({receiver['name']}) is a placeholder, not a credential:"
                            " put the real one in your vault"
                        )
    return problems


# The labels that say where an alert is, in the order a reader looks for them.
WHERE_LABELS = ("job", "instance", "namespace", "pod", "node", "Hostname", "gpu")


def alert_summary(alert: dict[str, Any]) -> str:
    """One line for an alert of Prometheus's /api/v1/alerts: its name, where it is, and its summary."""
    labels, annotations = alert.get("labels") or {}, alert.get("annotations") or {}
    where = ", ".join(f"{key}={labels[key]}" for key in WHERE_LABELS if labels.get(key))
    line = str(labels.get("alertname", "unnamed")) + (f" ({where})" if where else "")
    summary = annotations.get("summary") or annotations.get("description")
    return f"{line}: {summary}" if summary else line
