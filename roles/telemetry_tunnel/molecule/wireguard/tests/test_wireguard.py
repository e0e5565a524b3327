"""The WireGuard transport carries the exporter, and the link lets nothing else through."""

import time

import yaml
from gpufleet_lab.containers import silent_link_outage

testinfra_hosts = ["ansible://wg-main"]

NODE_WG = "10.213.240.2"  # GPU node 1 in the default network; the tunnel host is .1


def test_link_is_up_with_a_handshake(host):
    assert host.service("wg-quick@gpufleet-wg").is_running
    handshakes = host.check_output("wg show gpufleet-wg latest-handshakes").split()
    assert len(handshakes) == 2 and int(handshakes[1]) > 0


def test_exporter_reachable_through_the_forward(host, bind, fetch):
    assert host.service("gpufleet-wg-forward@wg-gpu").is_running
    body = fetch(f"http://{bind}:19401/metrics")
    assert body.rc == 0, body.stderr
    assert 'Hostname="wg-gpu"' in body.stdout and "DCGM_FI_DEV_GPU_UTIL" in body.stdout
    extra = fetch(f"http://{bind}:19501/metrics")
    assert extra.rc == 0, extra.stderr
    assert 'vllm:num_requests_running{model_name="stand-in"} 0' in extra.stdout


def test_the_link_lets_only_the_exporter_port_through(host):
    # sshd listens on every address of the GPU node, the WireGuard one included:
    # the node's firewall drops it on the link.
    probe = host.run(f"timeout 5 bash -c 'echo > /dev/tcp/{NODE_WG}/22'")
    assert probe.rc != 0
    assert host.run(f"timeout 5 bash -c 'echo > /dev/tcp/{NODE_WG}/9400'").rc == 0
    assert host.run(f"timeout 5 bash -c 'echo > /dev/tcp/{NODE_WG}/9500'").rc == 0


def test_private_keys_stay_on_their_hosts(host):
    key = host.file("/etc/wireguard/gpufleet.key")
    assert key.mode == 0o600 and key.user == "root"
    config = host.file("/etc/wireguard/gpufleet-wg.conf").content_string
    assert "PrivateKey" not in config and key.content_string.strip() not in config


def test_prometheus_targets_are_the_same_as_with_ssh(host, bind, fetch):
    targets = yaml.safe_load(host.file("/etc/gpufleet/dcgm-targets.yml").content_string)
    assert targets == [
        {"targets": [f"{bind}:19401"], "labels": {"instance": "wg-gpu", "gpufleet_transport": "wireguard"}},
        {
            "targets": [f"{bind}:19501"],
            "labels": {"instance": "wg-gpu", "gpufleet_transport": "wireguard", "job": "gpufleet-vllm",
                       "__metrics_path__": "/metrics"},
        },
    ]  # fmt: skip


def test_the_link_heals_within_15_s_after_a_silent_outage(host, bind, fetch):
    # Every packet between the two hosts dropped inside the GPU node's network namespace (no
    # reset, as a failed WAN link), for longer than WireGuard's rekey attempts last (90 s would
    # be the worst case; 60 s keeps CI short), then healed.
    with silent_link_outage("wg-gpu", bind):
        time.sleep(60)
        assert fetch(f"http://{bind}:19401/metrics").rc != 0  # the outage is real
    healed = time.monotonic()
    while time.monotonic() - healed < 15:
        if fetch(f"http://{bind}:19401/metrics").rc == 0:
            break
        time.sleep(0.5)
    recovery = time.monotonic() - healed
    print(f"WireGuard link back {recovery:.1f}s after a 60 s silent outage")
    assert recovery < 15
