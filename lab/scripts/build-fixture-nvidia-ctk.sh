#!/usr/bin/env bash
# Build NVIDIA's nvidia-ctk from its published Go module, at the version the
# nvidia_container_toolkit role pins, into .cache/fixtures/ (a second run does
# nothing). The role's molecule scenario packs it into a FIXTURE apt package:
# NVIDIA's repository cannot be reached here, but its real CLI can be built.
# Nothing built is committed.
set -euo pipefail
VERSION=${NVIDIA_CTK_VERSION:-1.17.8}
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/.cache/fixtures/nvidia-ctk-$VERSION
if [ -x "$out/nvidia-ctk" ]; then
  echo "$out/nvidia-ctk"
  exit 0
fi
mkdir -p "$out"
# cgo: nvidia-ctk loads NVML with dlopen at run time (cdi generate).
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=1 GOBIN=$out
go install -ldflags "-s -w -X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=$VERSION" \
  "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk@v$VERSION" >&2
echo "$out/nvidia-ctk"
