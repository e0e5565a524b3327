"""The lab's DRA driver's devices (a FIXTURE stand-in for NVIDIA's DRA driver): each real GPU node's, with
the attributes NVIDIA's driver publishes, taken from a real H200's nvidia-smi; and the DeviceClasses it
runs with, whose CEL the vllm role's claims are compiled beside."""

from ansible_collections.gpufleet.platform.plugins.module_utils import dra as product_dra
from ansible_collections.gpufleet.platform.plugins.module_utils import k8s_validate
from gpufleet_lab import dra


def test_gpu1_has_the_whole_h200_and_gpu2_one_of_its_mig_devices():
    devices = dra.devices()
    (h200,) = devices["worker-gpu1"]
    assert h200["attributes"]["productName"] == {"string": "NVIDIA H200"}
    assert h200["attributes"]["type"] == {"string": "gpu"} and h200["capacity"] == {"memory": "143771Mi"}
    assert h200["attributes"]["uuid"]["string"].startswith("GPU-")
    (mig,) = devices["worker-gpu2"]
    assert mig["attributes"]["type"] == {"string": "mig"} and mig["attributes"]["profile"] == {"string": "1g.18gb"}
    # A version attribute must be semantic: the API refused the driver's own 580.159.04 (a leading zero).
    assert h200["attributes"]["driverVersion"] == {"version": "580.159.4"}


def test_the_driver_objects_and_a_claim_of_the_roles_pass_the_kubernetes_schema():
    """The DaemonSet, its RBAC and NVIDIA's two DeviceClasses, and what the vllm role renders for them."""
    template = product_dra.claim_template(
        {"device_class": "mig.nvidia.com", "count": 1, "domain": dra.DRIVER, "memory_at_least": "",
         "product_name": "", "mig_profile": dra.MIG_PROFILE, "selectors": []},
        "vllm", "inference", {},
    )  # fmt: skip
    problems, skipped = k8s_validate.schema_problems([*dra.manifests(), template], "1.36")
    assert problems == [] and skipped == []
