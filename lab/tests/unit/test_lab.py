"""Lab helpers that need no containers: mirror discovery, inventory reading."""

import ipaddress
import json
import re
import tomllib

import gpufleet_lab as lab
import pytest
import yaml
from gpufleet_lab import image as labimage
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import prerequisites as labprerequisites


def test_mirror_from_deb822_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert labimage.debian_mirror(tmp_path) == "http://mirror.example/debian"


def test_mirror_from_one_line_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("# c\ndeb [arch=amd64] http://mirror.example/debian bookworm main\n")
    assert labimage.debian_mirror(tmp_path) == "http://mirror.example/debian"


def test_no_mirror_is_a_clear_error(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    with pytest.raises(lab.LabError, match="no Debian bookworm mirror"):
        labimage.debian_mirror(tmp_path)


def test_recipe_hash_changes_with_the_recipe():
    assert labimage.recipe_hash("http://a/debian") != labimage.recipe_hash("http://b/debian")


def test_the_lab_inventorys_hosts_are_the_clusters_real_nodes():
    plain, real = labinventory.split_hosts()
    assert plain == []
    assert {(h.name, h.group) for h in real} == {("worker-main", "main_cluster"), ("worker-gpu1", "gpu_nodes")}


def test_a_real_nodes_name_at_another_address_is_refused(tmp_path):
    inventory = tmp_path / "hosts.yml"
    hosts = {"worker-gpu1": {"ansible_host": "10.213.7.50"}}
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}))
    with pytest.raises(lab.LabError, match=re.escape("worker-gpu1 is a lab node at 10.213.7.242, not 10.213.7.50")):
        labinventory.split_hosts(inventory)


def test_host_outside_the_lab_subnet_is_refused(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"g": {"hosts": {"x": {"ansible_host": "192.0.2.1"}}}}}}))
    with pytest.raises(lab.LabError, match="outside the lab"):
        labinventory.load_hosts(inventory)


def test_scale_inventory(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFLEET_LAB_DIR", str(tmp_path))
    path = labinventory.scale_inventory(32)
    hosts, real = labinventory.split_hosts(path)
    assert len([h for h in hosts if h.group == "gpu_nodes"]) == 32 and real == []
    assert len({h.address for h in hosts}) == 33
    group_vars = yaml.safe_load((path.parent / "group_vars" / "all.yml").read_text())
    assert group_vars["gpufleet_lab_dir"] == str(tmp_path)
    assert group_vars["gpufleet_site_playbook"] == "lab/site.yml"  # the plain hosts' stand-in exporter


def test_a_large_lab_raises_the_inotify_limit_and_a_small_one_leaves_it(tmp_path, monkeypatch):
    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    monkeypatch.setattr(labprerequisites, "INOTIFY_INSTANCES", limit)
    labprerequisites.ensure_inotify_instances(3)
    assert limit.read_text().strip() == "128"
    labprerequisites.ensure_inotify_instances(33)
    assert int(limit.read_text()) >= 33 * 16


def test_real_nodes_have_their_own_addresses_and_pod_subnets():
    from gpufleet_lab import nodes as labnodes

    hosts = {str(ipaddress.ip_network(lab.SUBNET)[i]) for i in (11, *range(21, 221))}  # a scale inventory's
    addresses = [n.address for n in labinventory.REAL_NODES]
    subnets = [ipaddress.ip_network(n.pod_subnet) for n in labinventory.REAL_NODES]
    assert len(set(addresses)) == len(addresses) and not hosts & set(addresses)  # scale hosts included
    assert all(s.subnet_of(ipaddress.ip_network(labnodes.POD_CIDR)) for s in subnets)
    assert not any(a.overlaps(b) for i, a in enumerate(subnets) for b in subnets[i + 1 :])
    assert {n.cluster for n in labinventory.REAL_NODES} == {"main", "gpu"}


def test_real_node_configuration_parses_and_keeps_what_this_machine_needs():
    from gpufleet_lab import dns as labdns
    from gpufleet_lab import k8s as labk8s
    from gpufleet_lab import nodes as labnodes

    containerd = tomllib.loads(labnodes.containerd_config())["plugins"]
    # No process here may lower its OOM score (no CAP_SYS_RESOURCE): containerd must not ask.
    assert containerd["io.containerd.cri.v1.runtime"]["restrict_oom_score_adj"] is True
    assert containerd["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == labnodes.PAUSE_IMAGE
    assert set(containerd["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]) == {"runc", "nvidia"}
    kubelet = yaml.safe_load(labnodes.kubelet_config(labdns.address(labk8s.SERVICE_CIDR)))
    assert kubelet["failCgroupV1"] is False and kubelet["cgroupDriver"] == "cgroupfs"
    # Pods resolve Services by name through the cluster's CoreDNS, at the address its Service has.
    assert kubelet["clusterDNS"] == ["10.96.0.10"] and kubelet["clusterDomain"] == "cluster.local"
    dns_service = next(o for o in labdns.objects(labk8s.SERVICE_CIDR, "worker-gpu1") if o["kind"] == "Service")
    assert dns_service["spec"]["clusterIP"] == "10.96.0.10"
    assert kubelet["authentication"]["anonymous"]["enabled"] is False
    cni = json.loads(labnodes.cni_config(labinventory.REAL_NODES[0]))
    assert cni["plugins"][0]["ipam"]["ranges"] == [[{"subnet": labinventory.REAL_NODES[0].pod_subnet}]]
    assert cni["plugins"][0]["ipam"]["routes"] == [{"dst": "0.0.0.0/0"}]  # pods reach Services and the API server
    proxy = yaml.safe_load(labnodes.kube_proxy_config())
    assert proxy["conntrack"]["maxPerCore"] == 0 and proxy["clusterCIDR"] == labnodes.POD_CIDR
    units = labnodes.units(labinventory.REAL_NODES[0])
    assert "--make-rshared /" in units["containerd.service"]
    assert "Type=notify" in units["containerd.service"]  # a restart returns once its socket serves
    assert f"--register-with-taints={labnodes.TAINT['key']}" in units["kubelet.service"]


def test_the_lab_inventory_runs_production_s_site_yml_which_has_no_lab_play(tmp_path, monkeypatch):
    from gpufleet import runner

    assert runner.site_playbook(runner.inventory_vars(lab.LAB_INVENTORY.parent)) == "site.yml"
    monkeypatch.setenv("GPUFLEET_LAB_DIR", str(tmp_path))
    assert runner.site_playbook(runner.inventory_vars(labinventory.scale_inventory(2).parent)) == lab.PLAYBOOK
    production = (runner.collection_dir() / "site.yml").read_text()
    assert "lab_" not in production and "lab/" not in production
