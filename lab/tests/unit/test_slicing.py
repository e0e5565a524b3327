"""AWX's slicing rule, as gpufleet_lab.slicing reproduces it for the sliced node-stage test."""

import pytest
from gpufleet_lab.slicing import awx_slice

INVENTORY = {"all": {
    "hosts": {"localhost": {"ansible_connection": "local"}},
    "children": {
        "gpu_nodes": {"hosts": {"gpu2": None, "gpu1": {"ansible_host": "10.0.0.1"}, "gpu3": None}, "vars": {"x": 1}},
        "k3s_servers": {"hosts": {"gpu1": None}},
        "main_cluster": {"hosts": {"m1": None}},
    },
}}  # fmt: skip


def hosts_of(sliced, group):
    return sorted(sliced["all"]["children"][group].get("hosts") or {})


def test_each_slice_gets_every_nth_host_by_name_and_the_groups_only_theirs():
    slices = [awx_slice(INVENTORY, n, 3) for n in (1, 2, 3)]
    # gpu1 gpu2 gpu3 m1 by name: the first slice takes the 1st and 4th
    assert [hosts_of(s, "gpu_nodes") for s in slices] == [["gpu1"], ["gpu2"], ["gpu3"]]
    assert [hosts_of(s, "main_cluster") for s in slices] == [["m1"], [], []]
    assert slices[0]["all"]["children"]["gpu_nodes"]["hosts"]["gpu1"] == {"ansible_host": "10.0.0.1"}


def test_every_group_stays_with_its_vars_even_empty_and_the_controller_is_in_every_slice():
    second = awx_slice(INVENTORY, 2, 3)
    assert second["all"]["children"]["k3s_servers"] == {}  # AWX keeps empty groups: k3s_servers is []
    assert second["all"]["children"]["gpu_nodes"]["vars"] == {"x": 1}
    assert all("localhost" in awx_slice(INVENTORY, n, 3)["all"]["hosts"] for n in (1, 2, 3))


@pytest.mark.parametrize("number,count", [(0, 3), (4, 3)])
def test_a_slice_outside_the_count_is_refused(number, count):
    with pytest.raises(ValueError, match=f"slice {number} of {count}"):
        awx_slice(INVENTORY, number, count)
