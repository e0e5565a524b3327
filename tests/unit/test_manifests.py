"""Chart output as Kubernetes objects, and pod memory sums."""

from ansible_collections.gpufleet.platform.plugins.filter.manifests import k8s_manifest_objects, k8s_memory_sum


def test_a_bare_equals_sign_reads_as_a_string_as_in_go():
    # The Prometheus Operator's CRDs list `=` in enums; PyYAML alone cannot construct it.
    text = "---\nkind: CustomResourceDefinition\nenum:\n- '!='\n- =\n---\nkind: Service\n"
    [crd] = k8s_manifest_objects(text, "CustomResourceDefinition")
    assert crd["enum"] == ["!=", "="]
    assert len(k8s_manifest_objects(text)) == 2


def test_memory_and_shm_add_up_in_mebibytes():
    assert k8s_memory_sum(["32Gi", "8Gi"]) == "40960Mi"
    assert k8s_memory_sum(["512Mi", "1G"]) == "1466Mi"
