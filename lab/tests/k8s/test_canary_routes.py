"""The vllm role's canary through a mesh (vllm_canary_traffic istio and gateway_api) against the
projects' own schemas: Istio's VirtualService CRD (from istio.io/api), the Gateway API's HTTPRoute CRD
(sigs.k8s.io/gateway-api, the standard channel) and Argo Rollouts' Rollout and AnalysisTemplate CRDs
(its module's manifests), each taken from its Go module by lab/scripts/build-lab-k8s.sh and installed in
the lab's GPU cluster for these tests; the lab's real API server then dry-runs everything the role renders.

No mesh's data plane runs here (Istio's and a Gateway API implementation's cannot be had): these routes
are rendered and checked, not run; the canary by replica count is what the lab runs (lab/tests/e2e/
test_rollouts.py). docs/operations.md says so."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.platform.plugins.module_utils import k8s_validate
from conftest import wait_for
from gpufleet_lab import REPO_ROOT
from gpufleet_lab import k8s as labk8s
from kubernetes import client
from kubernetes.client.exceptions import ApiException

PLAYBOOK = Path(__file__).parent / "playbooks" / "canary_routes.yml"
# (file, the CRDs taken from it), from the projects' Go modules at the versions lab/scripts/build-lab-k8s.sh
# pins: Istio 1.32's API, the Gateway API's v1.6.3 and Argo Rollouts v1.9.0 (the released chart's).
SCHEMAS = [
    ("istio.yaml", ["virtualservices.networking.istio.io"]),
    ("gateway-api-httproutes.yaml", ["httproutes.gateway.networking.k8s.io"]),
    ("argo-rollouts-rollouts.yaml", ["rollouts.argoproj.io"]),
    ("argo-rollouts-analysistemplates.yaml", ["analysistemplates.argoproj.io"]),
]


@pytest.fixture(scope="module")
def crds(gpu_api: client.ApiClient):
    """The CRDs above in the GPU cluster, established; those this fixture created removed afterwards."""
    extensions = client.ApiextensionsV1Api(gpu_api)
    present = {c.metadata.name for c in extensions.list_custom_resource_definition().items}
    created = []
    for path, names in SCHEMAS:
        for crd in yaml.safe_load_all((labk8s.crd_dir() / "routes" / path).read_text()):
            if crd and crd["metadata"]["name"] in names and crd["metadata"]["name"] not in present:
                extensions.create_custom_resource_definition(crd)
                created.append(crd["metadata"]["name"])

    def established() -> bool:
        crds = {c.metadata.name: c for c in extensions.list_custom_resource_definition().items}
        return all(
            any(cond.type == "Established" and cond.status == "True" for cond in crds[name].status.conditions or [])
            for name in created
        )

    wait_for(established, f"the CRDs {created} established")
    yield
    for name in created:
        extensions.delete_custom_resource_definition(name)


def rendered(traffic: str, namespace: str, tmp_path: Path, live: dict | None = None) -> dict[str, dict]:
    """The role's manifests for a canary through ``traffic``, by kind; with ``live``, the route the
    deploy read before applying (its register, __vllm_routes: one result per kind read)."""
    out = tmp_path / f"{traffic}.yaml"
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(PLAYBOOK),
           "-e", f"out={out}", "-e", f"route_traffic={traffic}", "-e", f"route_namespace={namespace}",
           "-e", f"ansible_python_interpreter={sys.executable}"]  # fmt: skip
    if live is not None:
        cmd += ["-e", json.dumps({"__vllm_routes": live})]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    objects = [o for o in yaml.safe_load_all(out.read_text()) if o]
    kinds = {o["kind"] for o in objects}
    named = ("Service", "AnalysisTemplate")
    by_kind = {o["kind"] + ("/" + o["metadata"]["name"] if o["kind"] in named else ""): o for o in objects}
    assert len(by_kind) == len(objects), sorted(kinds)
    return by_kind


def admitted(objects: list[dict], gpu_api: client.ApiClient) -> list[str]:
    problems, skipped = k8s_validate.dry_run_problems(objects, gpu_api)
    assert skipped == [], skipped
    return problems


def test_a_canary_through_istio_is_admitted_by_istios_and_argo_rollouts_schemas(crds, gpu_api, namespace, tmp_path):
    objects = rendered("istio", namespace, tmp_path)
    assert admitted(list(objects.values()), gpu_api) == []
    canary = objects["Rollout"]["spec"]["strategy"]["canary"]
    assert canary["trafficRouting"] == {"istio": {"virtualService": {"name": "vllm", "routes": ["primary"]}}}
    assert canary["dynamicStableScale"] is True
    # What Argo Rollouts checks of the route it steers: the route it names, with the two Services.
    service = objects["VirtualService"]["spec"]
    assert service["hosts"] == ["vllm", "llm.example.com", "*.llm.example.com"]
    assert service["gateways"] == ["mesh", "gateways/public", "gateways/internal"]
    (primary,) = [route for route in service["http"] if route["name"] == "primary"]
    hosts = {d["destination"]["host"]: d["weight"] for d in primary["route"]}
    assert hosts == {canary["stableService"]: 100, canary["canaryService"]: 0}
    assert {f"Service/{name}" for name in hosts} <= set(objects)
    # The benchmark step: measured under load at the first weight, before its pause, by a Job.
    bench_step = {"analysis": {"templates": [{"templateName": "vllm-canary-bench"}]}}
    assert canary["steps"][:3] == [{"setWeight": 10}, bench_step, {"pause": {"duration": "5m"}}]
    (metric,) = objects["AnalysisTemplate/vllm-canary-bench"]["spec"]["metrics"]
    job = metric["provider"]["job"]["spec"]["template"]["spec"]
    # Through the Service on the canary's own label (its pods carry it from their start), not the canary
    # Service, whose selector Argo Rollouts switches late: the Job must measure the new version only.
    assert job["containers"][0]["args"][:2] == ["--url", f"http://vllm-canary-bench.{namespace}.svc:8000"]
    bench_service = objects["Service/vllm-canary-bench"]["spec"]["selector"]
    assert bench_service["gpufleet.io/version"] == "canary", bench_service


def test_a_canary_through_the_gateway_api_is_admitted_by_its_schema(crds, gpu_api, namespace, tmp_path):
    objects = rendered("gateway_api", namespace, tmp_path)
    assert admitted(list(objects.values()), gpu_api) == []
    canary = objects["Rollout"]["spec"]["strategy"]["canary"]
    plugin = canary["trafficRouting"]["plugins"]["argoproj-labs/gatewayAPI"]
    assert plugin == {"httpRoute": "vllm", "namespace": namespace}
    route = objects["HTTPRoute"]["spec"]
    # The mesh's requests for the Service (GAMMA), and the two gateways' for the hosts.
    assert route["parentRefs"][0] == {"group": "", "kind": "Service", "name": "vllm", "port": 8000}
    gateways = [(p["namespace"], p["name"]) for p in route["parentRefs"][1:]]
    assert gateways == [("gateways", "public"), ("gateways", "internal")]
    (rule,) = route["rules"]
    assert {b["name"]: b["weight"] for b in rule["backendRefs"]} == {canary["stableService"]: 100,
                                                                     canary["canaryService"]: 0}  # fmt: skip


def test_the_check_can_fail_a_route_outside_the_schema_is_refused(crds, gpu_api, namespace, tmp_path):
    """The dry run holds the routes to the projects' schemas: a negative weight, or one written as a word,
    is refused with the API server's reason."""
    istio = copy.deepcopy(rendered("istio", namespace, tmp_path)["VirtualService"])
    istio["spec"]["http"][0]["route"][1]["weight"] = "half"
    gateway = copy.deepcopy(rendered("gateway_api", namespace, tmp_path)["HTTPRoute"])
    gateway["spec"]["rules"][0]["backendRefs"][1]["weight"] = -1
    problems = admitted([istio, gateway], gpu_api)
    assert len(problems) == 2, problems
    assert f"VirtualService {namespace}/vllm: the API server refuses it" in problems[0], problems
    assert ".spec.http[0].route[1].weight: expected numeric" in problems[0], problems
    assert f"HTTPRoute {namespace}/vllm: the API server refuses it" in problems[1], problems
    assert "weight" in problems[1] and "greater than or equal to 0" in problems[1], problems
    with pytest.raises(ApiException) as missing:  # and nothing was persisted
        client.CustomObjectsApi(gpu_api).get_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", namespace, "httproutes", "vllm"
        )
    assert missing.value.status == 404


def test_applying_the_route_again_keeps_the_weights_argo_rollouts_set(crds, gpu_api, namespace, tmp_path):
    """Mid-canary, Argo Rollouts has moved the weights; the role applies server-side and takes its fields
    back, so it renders the weights it read from the live route (a new route: all to stable)."""
    service = rendered("istio", namespace, tmp_path)["VirtualService"]
    service["spec"]["http"][0]["route"][0]["weight"], service["spec"]["http"][0]["route"][1]["weight"] = 70, 30
    live = {"results": [{"item": {"kind": "VirtualService"}, "resources": [service]}, {"item": {"kind": "HTTPRoute"}}]}
    again = rendered("istio", namespace, tmp_path, live=live)
    assert [d["weight"] for d in again["VirtualService"]["spec"]["http"][0]["route"]] == [70, 30]
    route = rendered("gateway_api", namespace, tmp_path)["HTTPRoute"]
    for backend in route["spec"]["rules"][0]["backendRefs"]:
        backend["weight"] = 50
    live = {"results": [{"item": {"kind": "VirtualService"}}, {"item": {"kind": "HTTPRoute"}, "resources": [route]}]}
    again = rendered("gateway_api", namespace, tmp_path, live=live)
    assert [b["weight"] for b in again["HTTPRoute"]["spec"]["rules"][0]["backendRefs"]] == [50, 50]
    assert admitted([again["HTTPRoute"]], gpu_api) == []
