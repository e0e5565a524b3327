"""Pulled through the mirror, each blob fetched from upstream once (see molecule.yml)."""

import collections
import json
import os
import re

import pytest
import testinfra
import yaml

testinfra_hosts = ["ansible://node1", "ansible://node2"]
IMAGE = "/gpufleet/prepull-fixture:1"


def other(name):
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={os.environ['MOLECULE_INVENTORY_FILE']}")


def address(name):
    return other(name).check_output("hostname -I").split()[0]


def test_the_image_is_on_the_node(host):
    refs = host.check_output("ctr -n k8s.io images ls -q").split()
    assert f"{address('upstream')}:5000{IMAGE}" in refs


def test_hosts_toml_is_read_by_cri(host):
    # containerd's own view of its configuration: the CRI registry reads certs.d.
    assert 'config_path = "/etc/containerd/certs.d"' in host.check_output("containerd config dump")
    hosts_toml = f"/etc/containerd/certs.d/{address('upstream')}:5000/hosts.toml"
    parsed = host.check_output(
        f'python3 -c \'import tomllib,json;print(json.dumps(tomllib.load(open("{hosts_toml}","rb"))))\''
    )
    assert json.loads(parsed)["host"][f"http://{address('mirror')}:5000"]["capabilities"] == ["pull", "resolve"]


def test_a_harbor_style_project_serves_the_image(host):
    # proxied.invalid cannot resolve (RFC 6761): the node got the image only from the upstream
    # registry's harbor-proxy/ prefix, through the project path containerd was given.
    assert "proxied.invalid/gpufleet/prepull-fixture:1" in host.check_output("ctr -n k8s.io images ls -q").split()
    hosts_toml = host.file("/etc/containerd/certs.d/proxied.invalid/hosts.toml").content_string
    assert f'[host."http://{address("upstream")}:5000/v2/harbor-proxy"]' in hosts_toml
    assert "override_path = true" in hosts_toml


@pytest.fixture(scope="module")
def upstream_blob_gets():
    log = other("upstream").check_output("journalctl -u docker-registry --no-pager -o cat")
    gets = re.findall(
        r'http.request.method=GET .*?http.request.uri="/v2/gpufleet/prepull-fixture/blobs/(sha256:[0-9a-f]+)"', log
    )
    return collections.Counter(gets)


def test_upstream_served_each_blob_once_for_both_nodes(upstream_blob_gets):
    # Config and two layers, each fetched once: copied into the mirror, from which both nodes pulled.
    assert len(upstream_blob_gets) == 3 and set(upstream_blob_gets.values()) == {1}, upstream_blob_gets


def test_the_mirror_served_both_nodes():
    log = other("mirror").check_output("journalctl -u docker-registry --no-pager -o cat")
    clients = set(re.findall(r'http.request.remoteaddr="?([0-9.]+):\d+', log))
    assert {address("node1"), address("node2")} <= clients


def test_the_mirror_listens_on_its_address_only():
    mirror = other("mirror")
    assert mirror.socket(f"tcp://{address('mirror')}:5000").is_listening
    assert not mirror.socket("tcp://0.0.0.0:5000").is_listening
    config = mirror.file("/etc/docker/registry/config.yml")
    assert config.mode == 0o640 and config.group == "docker-registry"


def test_the_mirror_records_the_digest_the_nodes_pulled(host):
    # The pin an operator copies into the versions file: tag and the digest the mirror holds.
    ref = f"{address('upstream')}:5000{IMAGE}"
    pins = yaml.safe_load(other("mirror").file("/etc/gpufleet/registry-mirror-digests.yml").content_string)
    assert list(pins) == [ref] and re.fullmatch(re.escape(ref) + r"@sha256:[0-9a-f]{64}", pins[ref])
    listed = [line.split() for line in host.check_output("ctr -n k8s.io images ls").splitlines()]
    [row] = [row for row in listed if row[0] == ref]
    assert row[2] == pins[ref].split("@")[1]
