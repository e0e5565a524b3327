"""A real Prometheus answers on the host address with the file_sd job configured."""

import json


def api(host, path):
    address = host.ansible.get_variables()["inventory_hostname"]
    ip = host.check_output("hostname -I").split()[0]
    url = f"http://{ip}:9090{path}"
    out = host.check_output(
        f"python3 -c \"import urllib.request; print(urllib.request.urlopen('{url}').read().decode())\""
    )
    assert address
    return json.loads(out)


def test_config_is_valid_for_promtool(host):
    assert host.run("promtool check config /etc/prometheus/prometheus.yml").rc == 0


def test_listens_on_host_address_not_everywhere(host):
    ip = host.check_output("hostname -I").split()[0]
    assert host.socket(f"tcp://{ip}:9090").is_listening
    assert not host.socket("tcp://0.0.0.0:9090").is_listening


def test_api_reports_the_gpu_job_and_itself_up(host):
    config = api(host, "/api/v1/status/config")["data"]["yaml"]
    assert "job_name: gpufleet-dcgm" in config
    assert "/etc/prometheus/file_sd/gpufleet-dcgm.yml" in config
    flags = api(host, "/api/v1/status/flags")["data"]
    assert flags["storage.tsdb.retention.time"] == "2d"
