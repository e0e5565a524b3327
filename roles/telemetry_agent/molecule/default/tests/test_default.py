"""The agent on a GPU node remote-writes its exporter's samples to the receiver, and the link's
faults lose none of them (or, for a restart during an outage, as few as upstream allows)."""

import itertools
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import testinfra
from gpufleet.lib import prometheus_verify as pv
from gpufleet_lab.containers import silent_link_outage

testinfra_hosts = ["ansible://rw-gpu"]

PKI = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "pki"
INTERVAL = 5  # telemetry_agent_scrape_interval in molecule.yml
SERIES = 'DCGM_FI_DEV_GPU_TEMP{job="gpufleet-dcgm",instance="rw-gpu",gpu="0"}'


@pytest.fixture(scope="module")
def receiver():
    main = testinfra.get_host("ansible://rw-main", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])
    return main, main.check_output("hostname -I").split()[0]


def password():
    """The run's generated password (the password lookup's file: the password, then its salt)."""
    return (PKI / "agent-password").read_text().split()[0]


def receiver_api(address, auth=True):
    """The receiver's HTTP API through the collection's own client, TLS checked against the run's CA."""
    user, secret = ("gpufleet-agent", password()) if auth else ("", "")
    return pv.Server(f"https://{address}:9090", user, secret, str(PKI / "ca.crt"))


def samples_between(address, start, end):
    """Timestamps of the series' samples the receiver holds in [start, end]."""
    result = pv.query(receiver_api(address), f"{SERIES}[{int(end - start) + 1}s]", at=end)
    return [float(t) for t, _ in result[0]["values"]] if result else []


def newest_sample(address):
    result = pv.query(receiver_api(address), f"timestamp({SERIES})")
    return float(result[0]["value"][1]) if result else 0.0


def wait_caught_up(address, timeout=60):
    """Seconds until the receiver holds a sample from the last two scrape intervals."""
    started = time.time()
    while time.time() - started < timeout:
        if time.time() - newest_sample(address) < 2 * INTERVAL:
            return time.time() - started
        time.sleep(1)
    raise AssertionError(f"the receiver holds no fresh sample {timeout}s after the link healed")


def gaps(stamps):
    """Holes longer than one and a half scrape intervals between consecutive samples."""
    return [(a, b) for a, b in itertools.pairwise(stamps) if b - a > 1.5 * INTERVAL]


def test_the_agent_runs_in_agent_mode_listening_on_loopback_only(host):
    assert host.service("prometheus").is_running
    args = host.file("/etc/default/prometheus").content_string
    assert "--enable-feature=agent" in args
    listening = host.check_output("ss -Hltn").split()
    assert "127.0.0.1:9095" in listening
    assert not [a for a in listening if a.endswith(":9090")]  # no full server, no open port


def test_the_credential_is_readable_by_prometheus_only(host):
    credential = host.file("/etc/prometheus/remote-write.credential")
    assert (credential.user, credential.group, credential.mode) == ("root", "prometheus", 0o640)
    assert "password_file" in host.file("/etc/prometheus/prometheus.yml").content_string


def test_the_receiver_holds_the_series_with_the_tunnel_paths_labels(receiver):
    _, address = receiver
    wait_caught_up(address)
    series = pv.query(receiver_api(address), SERIES)
    assert series, "no DCGM series from rw-gpu at the receiver"
    labels = series[0]["metric"]
    assert labels["job"] == "gpufleet-dcgm" and labels["instance"] == "rw-gpu"
    assert labels["gpufleet_transport"] == "remote_write"
    assert labels["Hostname"]  # the exporter's own label, kept


def test_the_receiver_refuses_a_writer_without_the_credential(receiver):
    _, address = receiver
    with pytest.raises(pv.PrometheusError, match="answered HTTP 401"):
        pv.query(receiver_api(address, auth=False), "up")
    with pytest.raises(urllib.error.URLError):  # no plain http beside TLS
        urllib.request.urlopen(f"http://{address}:9090/api/v1/query?query=up", timeout=5)


def test_an_outage_of_the_link_loses_no_sample(receiver):
    _, address = receiver
    with silent_link_outage("rw-gpu", address):
        started = time.time()
        time.sleep(60)
        ended = time.time()
        assert newest_sample(address) < started + INTERVAL  # the outage is real
    caught_up = wait_caught_up(address)
    time.sleep(3 * INTERVAL)  # samples after the outage too, so both edges of the window are held
    stamps = samples_between(address, started - 3 * INTERVAL, ended + 3 * INTERVAL)
    print(f"60 s outage: receiver caught up {caught_up:.1f}s after the link healed, {len(stamps)} samples")
    assert stamps[0] <= started and stamps[-1] >= ended  # the window is covered from edge to edge ...
    assert not gaps(stamps)  # ... with no hole


def test_the_receiver_restarted_loses_no_sample(receiver):
    main, address = receiver
    started = time.time()
    main.check_output("systemctl restart prometheus")
    time.sleep(3 * INTERVAL)
    wait_caught_up(address)
    stamps = samples_between(address, started - 3 * INTERVAL, time.time())
    assert stamps[0] <= started and not gaps(stamps)


def test_a_restart_during_an_outage_is_refused_and_its_loss_measured(host, receiver):
    _, address = receiver
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    converge = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
    with silent_link_outage("rw-gpu", address):
        started = time.time()
        time.sleep(20)
        # A change of the command line needs a restart: the role refuses it with samples unsent.
        run = subprocess.run(
            ["ansible-playbook", "-i", inventory, str(converge), "-e", "telemetry_agent_wal_retention=5h"],
            capture_output=True,
            text=True,
        )
        assert run.returncode != 0
        said = " ".join((run.stdout + run.stderr).split())
        assert "would drop the" in said and "Nothing was changed" in said
        assert "5h" not in host.file("/etc/default/prometheus").content_string
        # What an unplanned restart (a crash, a reboot) costs, measured.
        restarted = time.time()
        host.check_output("systemctl restart prometheus")
        back = time.time()  # the shutdown's flush deadlines and the start, as long as they took
        time.sleep(20)
        ended = time.time()
    wait_caught_up(address)
    stamps = samples_between(address, started - 3 * INTERVAL, ended + 3 * INTERVAL)
    lost = sum(b - a - INTERVAL for a, b in gaps(stamps))
    print(
        f"agent restarted {restarted - started:.0f}s into a {ended - started:.0f}s outage: "
        f"{lost:.0f}s of samples lost, holes {[(round(a - started), round(b - started)) for a, b in gaps(stamps)]}"
    )
    # Upstream drops what the WAL held unsent at the restart; add the restart itself (two 5 s flush
    # deadlines, no scraping meanwhile: measured, as it takes longer on a loaded machine) and the
    # first scrape after it. The samples after it arrive.
    assert lost <= back - started + 3 * INTERVAL
    assert stamps and stamps[-1] > ended - 2 * INTERVAL


def gpufleet_verify(address, tmp_path):
    """playbooks/verify.yml (what `gpufleet verify` runs) on the scenario's inventory, in remote-write mode."""
    extra = tmp_path / "verify-vars.json"  # the password in a file, not on a command line
    extra.write_text(
        json.dumps({
            "gpufleet_telemetry_mode": "remote_write",
            "gpufleet_prometheus_url": f"https://{address}:9090",
            "gpufleet_prometheus_username": "gpufleet-agent",
            "gpufleet_prometheus_password": password(),
            "gpufleet_prometheus_ca_file": str(PKI / "ca.crt"),
            "gpufleet_gpu_present": False,  # no GPU in the scenario: the driver and health rows are skipped
            "gpufleet_verify_timeout": 0,
        })
    )  # fmt: skip
    playbook = Path(os.environ["GPUFLEET_REPO"]) / "playbooks" / "verify.yml"
    run = subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(playbook), "-e", f"@{extra}"],
        capture_output=True,
        text=True,
    )
    return run.returncode, " ".join((run.stdout + run.stderr).split())


def test_gpufleet_verify_reads_the_receiver_and_names_a_node_whose_exporter_is_down(host, receiver, tmp_path):
    _, address = receiver
    wait_caught_up(address)
    rc, said = gpufleet_verify(address, tmp_path)
    assert rc == 0 and "all checks passed" in said, said[-2000:]
    assert password() not in said
    host.check_output("systemctl stop gpufleet-dcgm-fixture-exporter")
    try:
        time.sleep(2 * INTERVAL)  # the agent's next scrape fails, and its up == 0 reaches the receiver
        rc, said = gpufleet_verify(address, tmp_path)
    finally:
        host.check_output("systemctl start gpufleet-dcgm-fixture-exporter")
    assert rc != 0 and "DCGM metrics in Prometheus" in said
    assert "target rw-gpu" in said and "up == 0" in said, said[-2000:]
