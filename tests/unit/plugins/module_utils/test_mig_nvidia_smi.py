"""The MIG path for hosts without the GPU Operator: nvidia-smi's GPU instance table read, and
the steps each GPU needs to match a layout."""

from ansible_collections.gpufleet.platform.plugins.module_utils.mig import expand, gpu_changes, gpu_instances

# `nvidia-smi mig -lgi`, in the format of NVIDIA's MIG user guide (two GPUs).
LGI = """\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   0  MIG 3g.71gb          9        1          4:4     |
+-------------------------------------------------------+
|   0  MIG 1g.18gb         19        9          2:1     |
+-------------------------------------------------------+
|   0  MIG 1g.18gb         19       10          3:1     |
+-------------------------------------------------------+
|   1  MIG 7g.141gb         0        0          0:8     |
+-------------------------------------------------------+
"""


def test_instances_per_gpu():
    assert gpu_instances(LGI) == {0: {"3g.71gb": 1, "1g.18gb": 2}, 1: {"7g.141gb": 1}}
    assert gpu_instances("No GPU instances found: Not Found") == {}


def test_steps_per_gpu():
    modes = {0: "Enabled", 1: "Enabled", 2: "Disabled"}
    layout = {"1g.18gb": 2, "3g.71gb": 1}
    changes = gpu_changes(modes, gpu_instances(LGI), layout)
    # GPU 0 is already there; GPU 1 has another layout; GPU 2 needs MIG first.
    assert changes == {
        1: ["destroy instances", "create 3g.71gb,1g.18gb,1g.18gb"],
        2: ["enable MIG", "create 3g.71gb,1g.18gb,1g.18gb"],
    }
    assert gpu_changes(modes, gpu_instances(LGI), None) == {
        0: ["destroy instances", "disable MIG"],
        1: ["destroy instances", "disable MIG"],
    }
    assert expand({"1g.18gb": 3, "4g.71gb": 1}) == ["4g.71gb", "1g.18gb", "1g.18gb", "1g.18gb"]
