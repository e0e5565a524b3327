"""The telemetry tunnel's node slots stay put as the fleet changes (ports and WireGuard addresses)."""

from ansible_collections.gpufleet.platform.plugins.filter.tunnel_slots import tunnel_slots


def test_a_first_run_numbers_the_nodes_in_list_order():
    # What the role gave before it kept slots: existing fleets keep their ports on upgrade.
    assert tunnel_slots(["gpu1", "gpu2", "gpu3"]) == {"gpu1": 1, "gpu2": 2, "gpu3": 3}


def test_a_node_added_in_front_moves_no_other_node():
    assert tunnel_slots(["gpu0", "gpu1", "gpu2"], {"gpu1": 1, "gpu2": 2}) == {"gpu0": 3, "gpu1": 1, "gpu2": 2}


def test_a_removed_nodes_slot_is_given_again_only_on_the_next_run():
    this_run = tunnel_slots(["gpu2", "gpu3"], {"gpu1": 1, "gpu2": 2})  # gpu1 leaves as gpu3 joins
    assert this_run == {"gpu2": 2, "gpu3": 3}
    assert tunnel_slots(["gpu2", "gpu3", "gpu4"], this_run) == {"gpu2": 2, "gpu3": 3, "gpu4": 1}


def test_a_damaged_record_never_gives_two_nodes_one_slot():
    assert tunnel_slots(["a", "b", "c"], {"a": 2, "b": 2, "c": "x"}) == {"a": 2, "b": 1, "c": 3}
    assert tunnel_slots(["a"], {"a": 0}) == {"a": 1}
    assert tunnel_slots(["a"], {"a": True}) == {"a": 1}
