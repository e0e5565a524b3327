"""The main job's images take production's path: from the upstream registry (the lab's stand-in, which
`gpufleet lab up` fills) into the fleet's mirror on the main cluster's node (the registry_mirror role,
sync mode), and from that mirror to the GPU node's containerd (the container_registries role's
hosts.toml): no image of theirs was imported into the node."""

import urllib.parse

from conftest import GPU_NODE, GPU_NODE_ADDRESS, TUNNEL_HOST, TUNNEL_HOST_ADDRESS, in_host

from gpufleet.lab import registry as labregistry

MIRROR = TUNNEL_HOST  # the lab inventory's registry_mirrors host


def test_the_gpu_node_pulled_the_main_jobs_images_through_the_fleets_mirror(converged):
    images = {
        "vllm": f"{labregistry.REGISTRY}/gpufleet-lab/calibration-server:1",
        "dcgm-exporter": f"{labregistry.REGISTRY}/gpufleet-lab/dcgm-exporter-fixture:1",
    }
    # The mirror holds each, copied in from upstream with its digest kept.
    pins = in_host(MIRROR, "cat /etc/gpufleet/registry-mirror-digests.yml").stdout
    for image in images.values():
        assert f"{image}@sha256:" in pins, pins
    # containerd on the GPU node resolves the upstream registry at the mirror first.
    hosts_toml = in_host(GPU_NODE, f"cat /etc/containerd/certs.d/{labregistry.REGISTRY}/hosts.toml").stdout
    assert f'[host."http://{TUNNEL_HOST_ADDRESS}:5000"]' in hosts_toml, hosts_toml
    # The node holds them under their upstream names, and resolved each at the mirror: the mirror's log
    # has the node's manifest requests, tagged with the upstream registry as containerd sends them,
    # answered 200. (No layer moved: the node's content store already had them, imported by `lab up`
    # under the lab's local names for tests/k8s. Layers pulled through the mirror are proven there,
    # in test_real_nodes.py.)
    held = in_host(GPU_NODE, "ctr -n k8s.io images ls -q").stdout.split()
    assert set(images.values()) <= set(held), held
    log = in_host(MIRROR, "journalctl -u docker-registry --no-pager -o cat").stdout
    mine = [line for line in log.splitlines() if line.startswith(f"{GPU_NODE_ADDRESS} - - ")]
    ns = urllib.parse.quote(labregistry.REGISTRY, safe="")
    for name, image in images.items():
        path = image.split("/", 1)[1].rsplit(":", 1)[0]
        resolved = [line for line in mine if f" /v2/{path}/manifests/1?ns={ns} " in line and '" 200 ' in line]
        assert resolved, (name, mine[-20:])
