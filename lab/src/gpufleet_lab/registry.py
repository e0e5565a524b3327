"""The lab's UPSTREAM REGISTRY STAND-IN: where production's images come from (quay.io, nvcr.io and the
like, none reachable here), a CNCF distribution registry (Debian's docker-registry) in a lab container.
`gpufleet lab up` pushes the lab's images that the main job deploys into it; the main job's mirror
(the registry_mirror role, on the main cluster's node) copies them in, and the GPU node's containerd
pulls them through that mirror, by what the container_registries role writes: production's path.
"""

from __future__ import annotations

import ipaddress
import tempfile
import time
import urllib.request
from pathlib import Path

import gpufleet_lab as lab
from gpufleet_lab import containers as labcontainers
from gpufleet_lab import image as labimage
from gpufleet_lab import nodes as labnodes

ADDRESS = str(ipaddress.ip_network(lab.SUBNET)[5])
REGISTRY = f"{ADDRESS}:5000"
CONTAINER = f"{lab.CONTAINER_PREFIX}upstream-registry"
# The lab's images the main job deploys (its vLLM and dcgm-exporter, and the canary's benchmark step):
# pulled through the mirror.
PUBLISHED = (labnodes.CALIBRATION_IMAGE, labnodes.DCGM_FIXTURE_IMAGE, labnodes.CANARY_BENCH_IMAGE)
IMAGE = "localhost/gpufleet-lab/upstream-registry:1"
# Anonymous, as a public registry is to pull from; pushes are open too, to the lab's network only.
CONFIG = """\
version: 0.1
storage: {filesystem: {rootdirectory: /var/lib/docker-registry}}
http: {addr: ":5000"}
"""
CONTAINERFILE = """\
FROM {base}
LABEL io.gpufleet.base={base_id}
RUN apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends \\
      docker-registry >/dev/null && apt-get clean
COPY upstream.yml /etc/docker/registry/upstream.yml
ENTRYPOINT ["/usr/bin/docker-registry", "serve", "/etc/docker/registry/upstream.yml"]
"""


def upstream_name(local: str) -> str:
    """A lab image's name in the upstream registry: localhost/gpufleet-lab/x:1 -> <registry>/gpufleet-lab/x:1."""
    return f"{REGISTRY}/{local.removeprefix('localhost/')}"


# What the nodes pull through the mirror: the published images' upstream names.
PULLED_AS = {name: upstream_name(name) for name in PUBLISHED}


def ensure_image() -> None:
    """Built once per base image (a label on it names the base it was built from)."""
    base = labimage.ensure_image(log=False)
    base_id = labcontainers.podman("image", "inspect", "--format", "{{.Id}}", base).stdout.strip()
    fmt = '{{index .Labels "io.gpufleet.base"}}'
    if labcontainers.podman("image", "inspect", "--format", fmt, IMAGE, check=False).stdout.strip() == base_id:
        return
    print(f"lab: building {IMAGE} (Debian's docker-registry, the upstream registry stand-in)", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpufleet-image-") as tmp:
        (Path(tmp) / "upstream.yml").write_text(CONFIG)
        (Path(tmp) / "Containerfile").write_text(CONTAINERFILE.format(base=base, base_id=base_id))
        labcontainers.podman("build", "-q", "-t", IMAGE, "-f", f"{tmp}/Containerfile", tmp)


def _answers(deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=2):
                return True
        except OSError:
            time.sleep(0.3)
    return False


def _run() -> None:
    labcontainers.podman(
        "run", "-d", "--name", CONTAINER, "--hostname", "upstream-registry",
        "--network", lab.NETWORK, "--ip", ADDRESS, "--mac-address", labcontainers.mac_of(ADDRESS),
        "--label", "io.gpufleet.lab=1", IMAGE,
    )  # fmt: skip


def up(archives: dict[str, Path], deadline: float) -> None:
    """Start the registry (once) and push the published images into it (loaded from their archives
    where podman lacks them), under their upstream names (PULLED_AS). A push of what it holds moves
    no layer."""
    ensure_image()
    state = labcontainers.running_hosts().get(CONTAINER)
    if state is None:
        _run()
    elif state != "running":
        labcontainers.podman("start", CONTAINER)
    # One left by another checkout's lab (its network since replaced) runs unreachable: start anew.
    if state is not None and not _answers(min(deadline, time.monotonic() + 10)):
        labcontainers.podman("rm", "-f", "-t", "2", CONTAINER)
        _run()
    if not _answers(deadline):
        raise lab.LabError(
            f"the upstream registry stand-in does not answer at {REGISTRY}; see `podman logs {CONTAINER}`"
        )
    for name, remote in PULLED_AS.items():
        if labcontainers.podman("image", "exists", name, check=False).returncode != 0:
            labcontainers.podman("load", "-q", "-i", str(archives[name]))
        # A label of its own gives the upstream image its own image ID: with the ID of the copy lab/tests/k8s
        # import under the local name, the node's CRI lost that local name once the other was pulled
        # (a later pod asking for it got ErrImageNeverPull). The layers stay shared.
        with tempfile.TemporaryDirectory(prefix="gpufleet-image-") as tmp:
            (Path(tmp) / "Containerfile").write_text(f"FROM {name}\nLABEL io.gpufleet.upstream={REGISTRY}\n")
            labcontainers.podman("build", "-q", "-t", remote, "-f", f"{tmp}/Containerfile", tmp)
        labcontainers.podman("push", "-q", "--tls-verify=false", remote, f"docker://{remote}")
