"""The main job's images take production's path: from the upstream registry (the lab's stand-in, which
`gpufleet lab up` fills) into the fleet's mirror on the main cluster's node (the registry_mirror role,
sync mode), and from that mirror to the GPU node's containerd (the container_registries role's
hosts.toml), layers and all: `gpufleet lab up` imports neither image into a node."""

import json
import re
import urllib.parse
import urllib.request

from conftest import GPU_NODE, GPU_NODE_ADDRESS, TUNNEL_HOST, TUNNEL_HOST_ADDRESS, in_host
from gpufleet_lab import registry as labregistry

MIRROR = TUNNEL_HOST  # the lab inventory's registry_mirrors host
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")


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
    # The node holds them under their upstream names, and fetched each from the mirror: the mirror's
    # log has the node's requests for its manifest and for every layer the manifest lists (a layer
    # the two images share came once, for either), tagged with the upstream registry as containerd
    # sends them, answered 200.
    held = in_host(GPU_NODE, "ctr -n k8s.io images ls -q").stdout.split()
    assert set(images.values()) <= set(held), held
    log = in_host(MIRROR, "journalctl -u docker-registry --no-pager -o cat").stdout
    ns = urllib.parse.quote(labregistry.REGISTRY, safe="")
    request = re.compile(rf'"(?:GET|HEAD) /v2/(.+)/((?:manifests|blobs)/[^?]+)\?ns={ns} HTTP/[0-9.]+" 200 ')
    fetched = {  # (image path, manifests/<tag or digest> or blobs/<digest>)
        found.groups()
        for line in log.splitlines()
        if line.startswith(f"{GPU_NODE_ADDRESS} - - ") and (found := request.search(line))
    }
    blobs = {part for _, part in fetched if part.startswith("blobs/")}
    for name, image in images.items():
        path = image.split("/", 1)[1].rsplit(":", 1)[0]
        assert (path, "manifests/1") in fetched, (name, sorted(fetched))
        layers = {f"blobs/{layer['digest']}" for layer in mirror_manifest(path)["layers"]}
        # On a miss, the node's blob requests whatever their answer, and where the log starts.
        node_lines = [line for line in log.splitlines() if line.startswith(f"{GPU_NODE_ADDRESS} - - ")]
        tried = [line for line in node_lines if "/blobs/" in line]
        assert layers and layers <= blobs, (name, sorted(layers - blobs), tried[:20], log.splitlines()[:3])


def mirror_manifest(path: str) -> dict:
    """The image's manifest as the mirror serves it (an OCI image manifest, as podman pushed it)."""
    request = urllib.request.Request(
        f"http://{TUNNEL_HOST_ADDRESS}:5000/v2/{path}/manifests/1",
        headers={"Accept": ", ".join(MANIFEST_TYPES)},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)
