# SPDX-License-Identifier: Apache-2.0
"""Address arithmetic for tunnel networks, without netaddr."""

from __future__ import annotations

import ipaddress
from typing import Any


def network_host(cidr: str, index: int) -> str:
    """The index-th address of a network (1 is the first host address)."""
    network = ipaddress.ip_network(cidr, strict=True)
    if not 0 < index < network.num_addresses - 1:
        raise ValueError(f"{cidr} has no host number {index}")
    return str(network[index])


def network_prefix(cidr: str) -> int:
    return ipaddress.ip_network(cidr, strict=True).prefixlen


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"network_host": network_host, "network_prefix": network_prefix}
