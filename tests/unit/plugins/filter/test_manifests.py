"""Chart output as Kubernetes objects, and pod memory sums."""

from ansible_collections.gpufleet.platform.plugins.filter.manifests import (
    APPLIED_SHA256,
    k8s_manifest_objects,
    k8s_memory_sum,
    k8s_unapplied,
)


def test_a_bare_equals_sign_reads_as_a_string_as_in_go():
    # The Prometheus Operator's CRDs list `=` in enums; PyYAML alone cannot construct it.
    text = "---\nkind: CustomResourceDefinition\nenum:\n- '!='\n- =\n---\nkind: Service\n"
    [crd] = k8s_manifest_objects(text, "CustomResourceDefinition")
    assert crd["enum"] == ["!=", "="]
    assert len(k8s_manifest_objects(text)) == 2


def test_memory_and_shm_add_up_in_mebibytes():
    assert k8s_memory_sum(["32Gi", "8Gi"]) == "40960Mi"
    assert k8s_memory_sum(["512Mi", "1G"]) == "1466Mi"


def crds(*versions):
    """A manifest of CRDs a.example.com, b.example.com, ... at those versions."""
    return "".join(
        f"---\nkind: CustomResourceDefinition\nmetadata: {{name: {name}.example.com}}\nspec: {{versions: [{v}]}}\n"
        for name, v in zip("abc", versions, strict=False)
    )


def names(objects):
    return [o["metadata"]["name"] for o in objects]


def test_only_crds_missing_or_rendered_differently_are_applied_and_they_carry_the_stamp():
    rendered = crds("v1", "v1") + "---\nkind: Service\nmetadata: {name: s}\n"
    first = k8s_unapplied(rendered, "CustomResourceDefinition", [])
    assert names(first) == ["a.example.com", "b.example.com"]
    assert first[0]["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpufleet"}
    # Once applied (the stamped objects are what the cluster holds), nothing is left to apply ...
    assert k8s_unapplied(rendered, "CustomResourceDefinition", first) == []
    # ... until the chart renders one differently, or one is deleted.
    [upgraded] = k8s_unapplied(crds("v2", "v1"), "CustomResourceDefinition", first)
    assert upgraded["metadata"]["name"] == "a.example.com"
    assert upgraded["metadata"]["annotations"][APPLIED_SHA256] != first[0]["metadata"]["annotations"][APPLIED_SHA256]
    assert names(k8s_unapplied(rendered, "CustomResourceDefinition", first[1:])) == ["a.example.com"]
