"""A FIXTURE container image of random (incompressible) layers, pushed to a lab registry.

No public registry is reachable here, so the mirror and prepull tests and benchmark
build their own image: `layers` layers of `layer_mb` MiB each, from scratch, built
with podman and pushed over plain HTTP to a registry in the lab.

    python -m gpufleet_lab.fixture_image --layers 4 --layer-mb 80 10.213.7.31:5000/gpufleet/prepull-fixture:320m
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import gpufleet_lab as lab
from gpufleet_lab import containers as labcontainers

CHUNK = 1 << 20


def build(tag: str, layers: int, layer_mb: int) -> str:
    """Build (or reuse) localhost/gpufleet-fixture-image:<layers>x<layer_mb>m; return its name."""
    name = f"localhost/gpufleet-fixture-image:{layers}x{layer_mb}m"
    if labcontainers.podman("image", "exists", name, check=False).returncode == 0:
        return name
    with tempfile.TemporaryDirectory(dir=lab.lab_dir()) as context:
        root = Path(context)
        lines = ["FROM scratch", f'LABEL org.opencontainers.image.description="gpufleet FIXTURE image ({tag})"']
        for index in range(layers):
            with open(root / f"layer{index}.bin", "wb") as out:
                for _ in range(layer_mb):
                    out.write(os.urandom(CHUNK))
            lines.append(f"COPY layer{index}.bin /layer{index}.bin")
        (root / "Containerfile").write_text("\n".join(lines) + "\n")
        labcontainers.podman("build", "--quiet", "--format", "oci", "-t", name, str(root))
    return name


def push(name: str, target: str) -> None:
    # zstd: random bytes do not compress, and gzip would only spend the cores on trying.
    labcontainers.podman(
        "push", "--quiet", "--tls-verify=false", "--compression-format", "zstd", name, f"docker://{target}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="registry/repository:tag to push to (plain HTTP)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--layer-mb", type=int, default=8)
    args = parser.parse_args()
    push(build(args.target, args.layers, args.layer_mb), args.target)
    print(f"pushed {args.layers} x {args.layer_mb} MiB FIXTURE image to {args.target}")


if __name__ == "__main__":
    main()
