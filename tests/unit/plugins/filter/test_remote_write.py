"""The remote-write mode's pure parts: the queue's backlog read from an agent's metrics, targets
from the `up` series agents send, the receiver's password hashes, and credentials never printed."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.platform.plugins.filter.secrets import bcrypt_hash
from ansible_collections.gpufleet.platform.plugins.module_utils import prometheus_verify as pv
from ansible_collections.gpufleet.platform.plugins.module_utils.remote_write import backlog_seconds

# As Prometheus 2.42 in agent mode prints them (trimmed).
AGENT_METRICS = """\
# HELP prometheus_remote_storage_highest_timestamp_in_seconds Highest timestamp that has come into the remote storage
# TYPE prometheus_remote_storage_highest_timestamp_in_seconds gauge
prometheus_remote_storage_highest_timestamp_in_seconds 1.764552e+09
# TYPE prometheus_remote_storage_queue_highest_sent_timestamp_seconds gauge
prometheus_remote_storage_queue_highest_sent_timestamp_seconds{remote_name="main",url="https://r/w"} {sent}
"""


@pytest.mark.parametrize(("sent", "backlog"), [(1764552000, 0), (1764551880, 120), (1764552005, 0)])
def test_backlog_is_what_the_slowest_queue_has_not_sent(sent, backlog):
    assert backlog_seconds(AGENT_METRICS.replace("{sent}", str(sent))) == backlog


def test_a_queue_that_never_sent_is_all_backlog():
    text = AGENT_METRICS.splitlines()
    assert backlog_seconds("\n".join(text[:3])) == pytest.approx(1.764552e09)


def test_nothing_appended_is_no_backlog():
    assert backlog_seconds("# nothing yet\n") == 0


def test_up_series_name_a_down_exporter_and_a_silent_agent():
    now = 1000.0
    up = [
        {"metric": {"instance": "gpu1"}, "value": [995.0, "1"]},
        {"metric": {"instance": "gpu2"}, "value": [996.0, "0"]},
        {"metric": {"instance": "gpu3"}, "value": [700.0, "1"]},
    ]
    targets = {t.instance: t for t in pv.up_targets(up, "gpufleet-dcgm", now, max_age_s=120)}
    assert targets["gpu1"].health == "up"
    assert targets["gpu2"].health == "down" and "exporter" in targets["gpu2"].last_error
    assert targets["gpu3"].health == "unknown" and "300s" in targets["gpu3"].last_error


def test_a_server_prints_as_its_url_without_the_password():
    server = pv.Server("https://receiver:9090", "agent", "s3cret-value", "/ca.pem")
    assert str(server) == "https://receiver:9090" and "s3cret-value" not in repr(server)


def test_bcrypt_hash_verifies_and_is_kept_while_the_password_matches():
    first = bcrypt_hash("a-long-password")
    assert first.startswith("$2b$")
    assert bcrypt_hash("a-long-password", first) == first  # idempotent: no rewrite each run
    assert bcrypt_hash("another-password", first) != first  # a new password, a new hash
    with pytest.raises(AnsibleFilterError):
        bcrypt_hash("")
