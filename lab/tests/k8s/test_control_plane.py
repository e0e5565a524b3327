"""The lab control plane is a real Kubernetes API: validation, RBAC, scheduling, CRDs."""

import json

import pytest
from conftest import wait_for
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import nodes as labnodes
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError


def apply(api, body: dict, namespace: str):
    """Server-side apply with strict field validation, as kubectl does by default."""
    api_version, kind = body["apiVersion"], body["kind"]
    resource = DynamicClient(api).resources.get(api_version=api_version, kind=kind)
    return (
        DynamicClient(api)
        .server_side_apply(
            resource,
            body=body,
            namespace=namespace,
            field_manager="gpufleet-test",
            force_conflicts=True,
            query_params=[("fieldValidation", "Strict")],
        )
        .to_dict()
    )


def test_unknown_fields_are_rejected(api, namespace):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}, "spek": {}}
    # Server-side apply refuses a field its schema does not declare (the API answers 500 here, as upstream does).
    with pytest.raises(DynamicApiError) as failure:
        apply(api, body, namespace)
    assert ".spek: field not declared in schema" in failure.value.body
    # A strict create names the unknown field in a 400.
    resource = DynamicClient(api).resources.get(api_version="v1", kind="ConfigMap")
    with pytest.raises(DynamicApiError) as failure:
        resource.create(body=body, namespace=namespace, query_params=[("fieldValidation", "Strict")])
    assert failure.value.status == 400
    assert 'strict decoding error: unknown field "spek"' in json.loads(failure.value.body)["message"]


def test_rbac_denies_an_unauthorised_service_account(api, namespace):
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 600}}
    ).status.token
    config = api.configuration.__class__()
    config.host, config.ssl_ca_cert = api.configuration.host, api.configuration.ssl_ca_cert
    config.api_key = {"authorization": "Bearer " + token}
    as_nobody = client.CoreV1Api(client.ApiClient(config))
    with pytest.raises(client.ApiException) as failure:
        as_nobody.list_namespaced_secret(namespace)
    assert failure.value.status == 403
    assert f"system:serviceaccount:{namespace}:nobody" in failure.value.body


def _workload(kind: str, name: str, gpus: int = 0, **spec: object) -> dict:
    """A Deployment, DaemonSet or StatefulSet of one placeholder container (kwok runs no image)."""
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            **spec,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1", "resources": resources}]},
            },
        },
    }


def test_gpu_request_schedules_onto_the_gpu_node_only(gpu_api, namespace):
    apps, core = client.AppsV1Api(gpu_api), client.CoreV1Api(gpu_api)
    apps.create_namespaced_deployment(namespace, _workload("Deployment", "one-gpu", 1, replicas=1))
    apps.create_namespaced_deployment(namespace, _workload("Deployment", "too-many-gpus", 5, replicas=1))

    def ready_pod(app):
        pods = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
        return pods and pods[0].spec.node_name and pods[0].status.phase == "Running" and pods[0]

    pod = wait_for(lambda: ready_pod("one-gpu"), "the GPU pod to run")
    assert pod.spec.node_name == "gpu1"
    wait_for(
        lambda: apps.read_namespaced_deployment(namespace=namespace, name="one-gpu").status.available_replicas,
        "the GPU deployment to become available",
    )

    def unschedulable():
        pods = core.list_namespaced_pod(namespace, label_selector="app=too-many-gpus").items
        conditions = (pods[0].status.conditions or []) if pods else []
        return any(c.reason == "Unschedulable" and "nvidia.com/gpu" in (c.message or "") for c in conditions)

    wait_for(unschedulable, "the 5-GPU pod to be reported unschedulable (gpu1 has four GPUs)")


def test_daemonset_rolls_out_on_every_node(api, gpu_api, namespace):
    for cluster, node in ((api, "m1"), (gpu_api, "gpu1")):
        apps = client.AppsV1Api(cluster)
        apps.create_namespaced_daemon_set(namespace, _workload("DaemonSet", "ds"))

        def rolled_out(apps=apps):
            s = apps.read_namespaced_daemon_set(name="ds", namespace=namespace).status
            return s.desired_number_scheduled == 1 and s.number_ready == 1

        wait_for(rolled_out, f"the DaemonSet to be ready on {node}")


def test_the_two_clusters_are_apart(api, gpu_api):
    # As in production: each its own nodes and CRDs; the GPU cluster has no Prometheus Operator.
    def nodes(cluster):
        return [n.metadata.name for n in client.CoreV1Api(cluster).list_node().items]

    def crds(cluster):
        return {c.spec.group for c in client.ApiextensionsV1Api(cluster).list_custom_resource_definition().items}

    real = {c: [n.name for n in labnodes.nodes_of(c)] for c in labk8s.CLUSTERS}
    assert (nodes(api), nodes(gpu_api)) == (["m1", *real["main"]], ["gpu1", *real["gpu"]])
    assert "monitoring.coreos.com" in crds(api) and "monitoring.coreos.com" not in crds(gpu_api)
    assert "serving.kserve.io" in crds(gpu_api)


def test_servicemonitor_schema_rejects_a_bad_field(api, namespace):
    good = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "sm", "labels": {"release": "monitoring"}},
        "spec": {"selector": {"matchLabels": {"app": "dcgm"}}, "endpoints": [{"port": "metrics", "interval": "30s"}]},
    }
    assert apply(api, good, namespace)["spec"]["endpoints"][0]["port"] == "metrics"
    bad = json.loads(json.dumps(good))
    bad["spec"]["endpoints"][0]["interval"] = "every thirty seconds"
    with pytest.raises(DynamicApiError) as failure:
        apply(api, bad, namespace)
    assert failure.value.status == 422 and "interval" in failure.value.body


def test_statefulset_pods_become_ready_in_order(api, namespace):
    apps = client.AppsV1Api(api)
    apps.create_namespaced_stateful_set(namespace, _workload("StatefulSet", "db", serviceName="db", replicas=2))
    wait_for(
        lambda: apps.read_namespaced_stateful_set(name="db", namespace=namespace).status.ready_replicas == 2,
        "both StatefulSet replicas to be ready",
    )
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector="app=db").items
    assert sorted(p.metadata.name for p in pods) == ["db-0", "db-1"]
