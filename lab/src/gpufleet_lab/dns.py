"""The lab clusters' DNS: CoreDNS (built from its Go module, lab/scripts/build-lab-k8s.sh) as kubeadm
deploys it, at the Service address every real node's kubelet gives its pods. Pods find Services by
name, as in production (KEDA's metrics server reaches its operator so); other names go to the node's
resolver. Its metrics port is kubeadm's too: kube-prometheus-stack's CoreDNS ServiceMonitor scrapes it."""

from __future__ import annotations

import ipaddress
from typing import Any

COREDNS_VERSION = "v1.14.7"
IMAGE = f"registry.k8s.io/coredns/coredns:{COREDNS_VERSION}"
DOMAIN = "cluster.local"


def address(service_cidr: str) -> str:
    """The cluster DNS Service's address: the tenth of the Service range, as kubeadm picks it."""
    return str(ipaddress.ip_network(service_cidr)[10])


COREFILE = f""".:53 {{
    errors
    health :8080
    ready :8181
    prometheus :9153
    kubernetes {DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
}}
"""


def objects(service_cidr: str, node_name: str) -> list[dict[str, Any]]:
    """CoreDNS's objects in kube-system, its one replica on the cluster's real node ``node_name``."""
    meta = {"name": "coredns", "namespace": "kube-system"}
    labels = {"k8s-app": "kube-dns"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
            "subjects": [{"kind": "ServiceAccount", **meta}],
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"Corefile": COREFILE}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "coredns",
                        "dnsPolicy": "Default",  # its own upstream: the node's resolver
                        "nodeSelector": {"kubernetes.io/hostname": node_name},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [
                            {
                                "name": "coredns",
                                "image": IMAGE,
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                                    {"name": "metrics", "containerPort": 9153, "protocol": "TCP"},
                                ],
                                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
            "spec": {
                "clusterIP": address(service_cidr),
                "selector": labels,
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                    {"name": "metrics", "port": 9153, "protocol": "TCP"},
                ],
            },
        },
    ]
