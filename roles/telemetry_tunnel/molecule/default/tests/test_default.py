"""The tunnel carries the exporters and nothing else; its key can do nothing else.

Attacks on the key (other forwards, PTY, agent, a different key) run on the lab in lab/tests/e2e.
"""

import yaml

testinfra_hosts = ["ansible://tunnel-main"]

SSH = (
    "runuser -u gpufleet-tunnel -- ssh -o BatchMode=yes -o ConnectTimeout=5"
    " -o UserKnownHostsFile=/var/lib/gpufleet-tunnel/.ssh/known_hosts.d/tunnel-gpu -o StrictHostKeyChecking=yes"
    " -i /var/lib/gpufleet-tunnel/.ssh/id_ed25519 gpufleet-tunnel@tunnel-gpu"
)


def test_exporter_reachable_through_the_tunnel(host, bind, fetch):
    assert host.service("gpufleet-tunnel@tunnel-gpu").is_running
    body = fetch(f"http://{bind}:19401/metrics")
    assert body.rc == 0, body.stderr
    assert 'Hostname="tunnel-gpu"' in body.stdout and "DCGM_FI_DEV_GPU_UTIL" in body.stdout


def test_the_extra_exporter_rides_the_same_tunnel(host, bind, fetch):
    body = fetch(f"http://{bind}:19501/metrics")
    assert body.rc == 0, body.stderr
    assert 'vllm:num_requests_running{model_name="stand-in"} 0' in body.stdout
    assert len(host.process.filter(user="gpufleet-tunnel", comm="ssh")) == 1  # one connection, two forwards


def test_listens_on_the_internal_address_only(host, bind, fetch):
    assert host.socket(f"tcp://{bind}:19401").is_listening
    assert not host.socket("tcp://0.0.0.0:19401").is_listening


def test_private_key_stays_private(host):
    key = host.file("/var/lib/gpufleet-tunnel/.ssh/id_ed25519")
    assert key.user == "gpufleet-tunnel" and key.mode == 0o600
    assert host.user("gpufleet-tunnel").shell == "/usr/sbin/nologin"


def test_key_is_restricted_on_the_gpu_node(host):
    gpu = host.get_host("ansible://tunnel-gpu", ansible_inventory=host.backend.ansible_inventory)
    keys = gpu.file("/var/lib/gpufleet-tunnel/.ssh/authorized_keys").content_string.strip().splitlines()
    assert len(keys) == 1
    options = 'restrict,port-forwarding,permitopen="127.0.0.1:9400",permitopen="127.0.0.1:9500"'
    assert keys[0].startswith(options + " ssh-ed25519 ")


def test_key_gets_no_shell(host):
    result = host.run(SSH + " id")
    assert result.rc != 0 or "uid=" not in result.stdout


def test_host_key_pinned_not_trusted_on_first_use(host):
    gpu = host.get_host("ansible://tunnel-gpu", ansible_inventory=host.backend.ansible_inventory)
    actual = gpu.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[:2]
    pinned = host.file("/var/lib/gpufleet-tunnel/.ssh/known_hosts.d/tunnel-gpu")
    assert pinned.user == "gpufleet-tunnel" and pinned.mode == 0o600
    assert pinned.content_string.split() == ["tunnel-gpu", *actual]
    unit = host.file("/etc/systemd/system/gpufleet-tunnel@.service").content_string
    assert "StrictHostKeyChecking=yes" in unit and "ExitOnForwardFailure=yes" in unit


def test_prometheus_targets_name_the_gpu_node(host, bind, fetch):
    targets = yaml.safe_load(host.file("/etc/gpufleet/dcgm-targets.yml").content_string)
    assert targets == [
        {"labels": {"gpufleet_transport": "ssh", "instance": "tunnel-gpu"}, "targets": [f"{bind}:19401"]},
        {
            "labels": {"gpufleet_transport": "ssh", "instance": "tunnel-gpu", "job": "gpufleet-vllm",
                       "__metrics_path__": "/metrics"},
            "targets": [f"{bind}:19501"],
        },
    ]  # fmt: skip


def test_the_nodes_slot_is_recorded_for_the_next_run(host):
    record = host.file("/etc/gpufleet/telemetry-tunnel-slots.json")
    assert record.mode == 0o644 and yaml.safe_load(record.content_string) == {"tunnel-gpu": 1}
