# SPDX-License-Identifier: Apache-2.0
"""tunnel_slots: each GPU node's place on a tunnel host, kept from one run to the next."""

from __future__ import annotations

from typing import Any


def tunnel_slots(nodes: list[str], previous: dict[str, Any] | None = None) -> dict[str, int]:
    """Each node's slot (1, 2, ...): its tunnel listens at the base port plus its slot, and its
    WireGuard address is the network's (slot+1)-th. A node keeps the slot `previous` gave it, so
    adding, removing or reordering nodes moves no other node's targets or addresses. A new node
    takes the lowest slot nobody holds in `previous`: a departed node's slot is given again only on
    the run after the one that stopped its unit, never to a unit starting beside it."""
    held: dict[str, int] = {}
    for node, slot in (previous or {}).items():
        if isinstance(slot, int) and not isinstance(slot, bool) and slot > 0:
            held[str(node)] = slot
    slots: dict[str, int] = {}
    for node in nodes:  # a node keeps its slot unless an earlier node of the list already has it
        if node in held and held[node] not in slots.values():
            slots[node] = held[node]
    taken = set(held.values())  # every slot kept above is among them
    free = 1
    for node in nodes:
        if node not in slots:
            while free in taken:
                free += 1
            slots[node] = free
            taken.add(free)
    return {node: slots[node] for node in nodes}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"tunnel_slots": tunnel_slots}
