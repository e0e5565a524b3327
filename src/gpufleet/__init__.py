"""gpufleet: GPU inference platform bootstrap and verification."""
