"""rollout_status: the verdict of a benchmark step's Job, read from its pod's log (the Rollout's abort
names it: lab/tests/e2e/test_rollouts.py)."""

from types import SimpleNamespace

import pytest
from ansible_collections.gpufleet.platform.plugins.modules import rollout_status

FIGURES = '{"streams": 8, "missed": ["ttft_p99_s 2.971 s > 0.5 s"]}'
VERDICT = "gate: http://vllm-canary:8000 at 8 streams missed: ttft_p99_s 2.971 s > 0.5 s"


class Core:
    def __init__(self, log: str) -> None:
        self.log = log

    def list_namespaced_pod(self, namespace, label_selector):
        assert label_selector == "job-name=j1"
        return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(name="j1-abcde"))])

    def read_namespaced_pod_log(self, name, namespace, tail_lines):
        return "\n".join(self.log.split("\n")[-tail_lines:])


def verdicts(log: str) -> dict:
    cluster = rollout_status.Cluster.__new__(rollout_status.Cluster)
    cluster.core = Core(log)
    run = {
        "metadata": {"namespace": "inference"},
        "status": {"metricResults": [
            {"name": "bench", "phase": "Failed", "measurements": [{"metadata": {"job-name": "j1"}}]},
            {"name": "ttft", "phase": "Successful", "measurements": [{"metadata": {"job-name": "j0"}}]},
        ]},
    }  # fmt: skip
    return cluster.job_verdicts(run)


# The gate writes its figures to stdout and its verdict to stderr; the log holds them in the order the
# runtime read the two streams (ci stop 47 had the figures last).
@pytest.mark.parametrize("log", [f"{FIGURES}\n{VERDICT}\n", f"{VERDICT}\n{FIGURES}\n"])
def test_a_failed_benchmark_step_is_named_by_the_gates_verdict_whichever_stream_came_last(log):
    assert verdicts(log) == {"bench": f"Job j1: {VERDICT}"}


def test_a_job_that_said_no_verdict_is_named_by_its_last_line_and_one_that_said_nothing_as_failed():
    assert verdicts('{"error": "ConnectError: refused"}\n') == {"bench": 'Job j1: {"error": "ConnectError: refused"}'}
    assert verdicts("") == {"bench": "Job j1 failed"}
