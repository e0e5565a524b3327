# SPDX-License-Identifier: Apache-2.0
"""Checks of the value formats roles accept, for preflight asserts that name what is wrong."""

from __future__ import annotations

import ipaddress
import re

# The distribution reference grammar (github.com/distribution/reference), in short.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)"
_IMAGE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::(?P<tag>[\w][\w.-]{{0,127}}))?(?:@(?P<digest>sha256:[a-f0-9]{{64}}))?$"
)
_DURATION = re.compile(r"^(?=\d)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_BYTES = re.compile(r"^[0-9]+(B|KB|MB|GB|TB|PB|EB)$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def image_reference(value: object, pinned: bool = True) -> bool:
    """A container image reference; pinned: with a tag other than `latest`, or a digest."""
    match = _IMAGE.match(str(value)) if isinstance(value, str) else None
    if not match:
        return False
    if not pinned:
        return True
    return bool(match["digest"]) or (match["tag"] is not None and match["tag"] != "latest")


def ip_address(value: object) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def ip_network(value: object) -> bool:
    """A network in CIDR notation with no host bits set, e.g. 10.213.240.0/24."""
    try:
        ipaddress.ip_network(str(value), strict=True)
    except ValueError:
        return False
    return "/" in str(value)


def duration(value: object) -> bool:
    """A Prometheus duration such as 30s, 15d or 1h30m."""
    return isinstance(value, str) and bool(_DURATION.match(value))


def k8s_quantity(value: object) -> bool:
    """A Kubernetes resource quantity such as 4Gi or 500m."""
    return isinstance(value, str) and bool(_QUANTITY.match(value))


def byte_size(value: object) -> bool:
    """A Prometheus byte size such as 50GB."""
    return isinstance(value, str) and bool(_BYTES.match(value))


def dns_label(value: object) -> bool:
    """A Kubernetes object or namespace name (RFC 1123 label)."""
    return isinstance(value, str) and bool(_DNS_LABEL.match(value))
