# SPDX-License-Identifier: Apache-2.0
"""Checks of the value formats roles accept, for preflight asserts that name what is wrong."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

# The distribution reference grammar (github.com/distribution/reference), in short.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)"
_IMAGE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::(?P<tag>[\w][\w.-]{{0,127}}))?(?:@(?P<digest>sha256:[a-f0-9]{{64}}))?$"
)
_DURATION = re.compile(r"^(?=\d)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_BYTES = re.compile(r"^[0-9]+(B|KB|MB|GB|TB|PB|EB)$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def image_reference(value: object, pinned: bool = True) -> bool:
    """A container image reference; pinned: with a tag other than `latest`, or a digest."""
    match = _IMAGE.match(str(value)) if isinstance(value, str) else None
    if not match:
        return False
    if not pinned:
        return True
    return bool(match["digest"]) or (match["tag"] is not None and match["tag"] != "latest")


def ip_address(value: object) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def ip_network(value: object) -> bool:
    """A network in CIDR notation with no host bits set, e.g. 10.213.240.0/24."""
    try:
        ipaddress.ip_network(str(value), strict=True)
    except ValueError:
        return False
    return "/" in str(value)


def duration(value: object) -> bool:
    """A Prometheus duration such as 30s, 15d or 1h30m."""
    return isinstance(value, str) and bool(_DURATION.match(value))


_DURATION_UNITS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}


def duration_seconds(value: str) -> float:
    """Seconds in a duration such as 1h30m (see duration)."""
    if not duration(value):
        raise ValueError(f"{value!r} is not a duration such as 90s, 10m or 1h30m")
    return sum(int(n) * _DURATION_UNITS[u] for n, u in re.findall(r"(\d+)(ms|[ywdhms])", value))


def k8s_quantity(value: object) -> bool:
    """A Kubernetes resource quantity such as 4Gi or 500m."""
    return isinstance(value, str) and bool(_QUANTITY.match(value))


def byte_size(value: object) -> bool:
    """A Prometheus byte size such as 50GB."""
    return isinstance(value, str) and bool(_BYTES.match(value))


def dns_label(value: object) -> bool:
    """A Kubernetes object or namespace name (RFC 1123 label)."""
    return isinstance(value, str) and bool(_DNS_LABEL.match(value))


# --- the `check:` vocabulary of the roles' argument specs ------------------------------------
# Each option of a role's meta/argument_specs.yml that a type alone cannot keep right carries
# `check:` with one of the kinds below, or a range such as `1..65535` (either end may be left
# open) or `0 or 30000..32767`; `or empty` where "" is a setting of its own beside a non-empty
# default ("" is otherwise checked like any value wherever the default is not empty). The
# action plugin check_values applies them before a role changes anything or needs the network;
# tests/unit/roles/test_argument_specs.py makes sure every option has a constraint. A kind in
# RELATIONS also checks the parts of a value against each other (a limit and its request).

_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$"
)
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# Accounts a base system or a common daemon owns (Debian's base-passwd and friends, RHEL's
# setup package): a service user must be one of its own, never one of these.
SYSTEM_ACCOUNTS = frozenset(
    [
        "root",
        "daemon",
        "bin",
        "sys",
        "sync",
        "games",
        "man",
        "lp",
        "mail",
        "news",
        "uucp",
        "proxy",
        "www-data",
        "backup",
        "list",
        "irc",
        "gnats",
        "nobody",
        "_apt",
        "systemd-network",
        "systemd-resolve",
        "systemd-timesync",
        "systemd-coredump",
        "messagebus",
        "sshd",
        "polkitd",
        "adm",
        "halt",
        "shutdown",
        "operator",
        "ftp",
        "nfsnobody",
        "dbus",
        "tss",
        "tcpdump",
        "chrony",
        "postfix",
        "ubuntu",
        "admin",
    ]
)
_URL = re.compile(
    r"^(?P<scheme>https?)://(?P<host>\[[0-9a-fA-F:]+\]|[^/:?#\s]+)(?::(?P<port>\d+))?(?P<rest>[/?#]\S*)?$"
)
_VERSION = re.compile(r"^v?\d+(\.\d+){1,3}([-+~][0-9A-Za-z.+~-]+)?$")
_SHA256 = re.compile(r"^[a-f0-9]{64}$")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def host(value: object) -> bool:
    """An IP address or a DNS name: no scheme, port or path."""
    return isinstance(value, str) and (ip_address(value) or bool(_HOSTNAME.match(value)))


def host_port(value: object) -> bool:
    """host:port, an IPv6 address in brackets."""
    if not isinstance(value, str) or ":" not in value:
        return False
    name, _, number = value.rpartition(":")
    name = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    return host(name) and number.isdigit() and port(int(number))


def url(value: object) -> bool:
    """An http(s) URL with a host (and optionally a port and a path)."""
    match = _URL.match(value) if isinstance(value, str) else None
    if not match:
        return False
    name = match["host"].strip("[]")
    return host(name) and (match["port"] is None or port(int(match["port"])))


def origin(value: object) -> bool:
    """An http(s) URL of a host and optionally a port, without a path (a registry's, a remote's)."""
    match = _URL.match(value) if isinstance(value, str) else None
    return match is not None and url(value) and match["rest"] in (None, "/")


def absolute_path(value: object) -> bool:
    return isinstance(value, str) and value.startswith("/") and "\n" not in value


def relative_path(value: object) -> bool:
    """A path inside a directory: relative, without `..`."""
    return text(value) and not str(value).startswith("/") and ".." not in str(value).split("/")


def service_user(value: object) -> bool:
    """A valid account name that is not a base-system or well-known daemon account."""
    return isinstance(value, str) and bool(_USER.match(value)) and value not in SYSTEM_ACCOUNTS


def k8s_name(value: object) -> bool:
    """A Kubernetes object name (RFC 1123 subdomain)."""
    return isinstance(value, str) and bool(_DNS_SUBDOMAIN.match(value))


def namespaced_name(value: object) -> bool:
    """namespace/name of one object, as kubectl and the Gateway API's references write it."""
    if not isinstance(value, str) or value.count("/") != 1:
        return False
    namespace, name = value.split("/")
    return dns_label(namespace) and k8s_name(name)


def route_hostname(value: object) -> bool:
    """A host name a route matches: a DNS name, optionally with a leading wildcard label (*.example.com),
    never an IP address (the Gateway API and Istio both refuse those)."""
    if not isinstance(value, str) or ip_address(value):
        return False
    return k8s_name(value[2:] if value.startswith("*.") else value)


def helm_release(value: object) -> bool:
    """A helm release name: a DNS label of at most 53 characters."""
    return dns_label(value) and len(str(value)) <= 53


def label_key(value: object) -> bool:
    """A Kubernetes label or annotation key: [prefix/]name."""
    if not isinstance(value, str):
        return False
    prefix, _, name = value.rpartition("/")
    return (not prefix or k8s_name(prefix)) and bool(_QUALIFIED_NAME.match(name))


def label_value(value: object) -> bool:
    return isinstance(value, str) and (value == "" or bool(_QUALIFIED_NAME.match(value)))


def labels(value: object) -> bool:
    """A mapping of label keys to label values."""
    return isinstance(value, dict) and all(label_key(k) and label_value(v) for k, v in value.items())


def annotation_map(value: object) -> bool:
    """A mapping of annotation keys to string values."""
    return isinstance(value, dict) and all(label_key(k) and isinstance(v, str) for k, v in value.items())


def version(value: object) -> bool:
    """A release version such as 1.17.8, v25.3.4 or v1.33.5+k3s1."""
    return isinstance(value, str) and bool(_VERSION.match(value))


def sha256(value: object) -> bool:
    return isinstance(value, str) and bool(_SHA256.match(value))


def text(value: object) -> bool:
    """A non-empty single line (names and references without a stricter grammar)."""
    return isinstance(value, str) and value.strip() == value and bool(value) and "\n" not in value


_S3_URI = re.compile(r"^s3://(https?://[^/\s]+/)?[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?$")
_TAINT = re.compile(r"^(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$")


def s3_uri(value: object) -> bool:
    """s3://bucket/path, or s3://https://host:port/bucket/path for an S3 service other than AWS."""
    return isinstance(value, str) and bool(_S3_URI.match(value))


def file_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith("file:///") and absolute_path(value[len("file://") :])


def taint(value: object) -> bool:
    """A node taint, key[=value]:Effect."""
    match = _TAINT.match(value) if isinstance(value, str) else None
    return match is not None and label_key(match["key"]) and label_value(match["value"] or "")


def k8s_resources(value: object) -> bool:
    """A container's resources with CPU and memory requests (not BestEffort) and valid quantities."""
    if not isinstance(value, dict) or set(value) - {"requests", "limits"}:
        return False
    requests, limits = value.get("requests"), value.get("limits", {})
    if not isinstance(requests, dict) or not {"cpu", "memory"} <= set(requests) or not isinstance(limits, dict):
        return False
    return all(k8s_quantity(str(q)) for q in [*requests.values(), *limits.values()])


_QUANTITY_FACTORS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                     "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}  # fmt: skip


def quantity_value(value: object) -> float:
    """A Kubernetes quantity (see k8s_quantity) as a number: 512Mi -> 536870912, 500m -> 0.5."""
    match = _QUANTITY.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    return float(str(value)[: len(str(value)) - len(match[2] or "")]) * _QUANTITY_FACTORS[match[2] or ""]


def resources_problem(value: object) -> str | None:
    """A limit below its request: the API server refuses the pod ("must be less than or equal to
    <resource> limit", ValidateResourceRequirements in pkg/apis/core/validation/validation.go)."""
    if not isinstance(value, dict):
        return None
    requests, limits = value.get("requests") or {}, value.get("limits") or {}
    for name, limit in limits.items():
        if name in requests and quantity_value(limit) < quantity_value(requests[name]):
            return (
                f"limits.{name}={limit} is below requests.{name}={requests[name]}: raise the limit or lower the request"
            )
    return None


def toleration_problem(value: object) -> str | None:
    """A toleration the API server refuses (validateTolerations in pkg/apis/core/validation/validation.go):
    an empty key needs operator Exists; operator Exists takes no value; tolerationSeconds needs effect NoExecute."""
    if not isinstance(value, dict):
        return None
    operator = value.get("operator") or "Equal"
    if not value.get("key") and operator != "Exists":
        return "an empty key matches every taint only with operator Exists: set key, or operator: Exists"
    if operator == "Exists" and value.get("value"):
        return f"operator Exists matches any value: remove value={value['value']}, or use operator: Equal"
    if value.get("tolerationSeconds") is not None and value.get("effect") != "NoExecute":
        return "tolerationSeconds applies to effect NoExecute only"
    return None


# Labels a kubelet may set on its own Node (k8s.io/kubelet/pkg/apis/well_known_labels.go, enforced by the
# kubelet's --node-labels validation and the NodeRestriction admission plugin): in the kubernetes.io and
# k8s.io namespaces only these keys and prefixes; node-role.kubernetes.io/ is for an administrator to set.
KUBELET_LABELS = frozenset(
    ["kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os", "beta.kubernetes.io/arch",
     "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
     "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
     "topology.kubernetes.io/region", "topology.kubernetes.io/zone"]
)  # fmt: skip
KUBELET_LABEL_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


def kubelet_label_problem(value: object) -> str | None:
    """A label a kubelet may not set on itself: it would refuse to start (k3s passes them as --node-labels)."""
    if not isinstance(value, dict):
        return None
    for key in value:
        domain = str(key).rpartition("/")[0]
        reserved = domain in ("kubernetes.io", "k8s.io") or domain.endswith((".kubernetes.io", ".k8s.io"))
        if reserved and key not in KUBELET_LABELS and not str(key).startswith(KUBELET_LABEL_PREFIXES):
            return (
                f"{key}: a kubelet may not set labels in the kubernetes.io and k8s.io namespaces except"
                f" {', '.join(KUBELET_LABEL_PREFIXES)} and the well-known ones; label the Node from the cluster"
                " (kubectl label node) or use a prefix of your own"
            )
    return None


def https_url(value: object) -> bool:
    """An https:// URL; plain http only to a loopback address (a local fixture or mirror): what is
    downloaded across networks comes over TLS."""
    match = _URL.match(value) if isinstance(value, str) else None
    if not match or not url(value):
        return False
    if match["scheme"] == "https":
        return True
    name = match["host"].strip("[]")
    return name == "localhost" or (ip_address(name) and ipaddress.ip_address(name).is_loopback)


# What the examples and vault templates put where a secret goes (inventories/prod's vault.yml.example
# writes CHANGE-ME...): a secret that still holds one was never filled in.
_PLACEHOLDER = re.compile(
    r"change[-_ ]?me|replace[-_ ]?me|fill[-_ ]?me|^<.*>$|^(todo|tbd|xxx+|secret|password|example)$", re.IGNORECASE
)


def placeholder(value: object) -> bool:
    return isinstance(value, str) and bool(_PLACEHOLDER.search(value.strip()))


# Rules between the parts of one value (a limit and its request), applied once its kind's format holds.
RELATIONS: dict[str, Callable[[object], str | None]] = {
    "k8s_resources": resources_problem,
    "toleration": toleration_problem,
    "kubelet_labels": kubelet_label_problem,
}


KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "port": (port, "a port, 1-65535"),
    "host": (host, "an IP address or a DNS name, without scheme, port or path"),
    "host_port": (host_port, "host:port"),
    "url": (url, "an http:// or https:// URL with a host"),
    "origin": (origin, "an http:// or https:// URL of a host and optionally a port, without a path"),
    "https_url": (https_url, "an https:// URL (plain http only to a loopback address)"),
    "ip_address": (ip_address, "an IP address"),
    "ip_network": (ip_network, "a network in CIDR notation with no host bits set, e.g. 10.213.240.0/24"),
    "absolute_path": (absolute_path, "an absolute path"),
    "relative_path": (relative_path, "a relative path without .., inside the model directory"),
    "service_user": (service_user, "an account name of its own (lower case, not a system account such as root)"),
    "k8s_name": (k8s_name, "a Kubernetes object name (lower-case RFC 1123 subdomain)"),
    "dns_label": (dns_label, "a lower-case RFC 1123 label (a Service or Deployment name), at most 63 characters"),
    "k8s_namespace": (dns_label, "a Kubernetes namespace: a DNS label (lower case, RFC 1123, at most 63 characters)"),
    "namespaced_name": (namespaced_name, "namespace/name of an object, such as istio-system/public"),
    "route_hostname": (route_hostname, "a lower-case DNS name, optionally *.-prefixed, not an IP address"),
    "helm_release": (helm_release, "a helm release name (lower-case RFC 1123 label, at most 53 characters)"),
    "labels": (labels, "Kubernetes labels: keys [prefix/]name, values of at most 63 characters"),
    "kubelet_labels": (labels, "Kubernetes labels: keys [prefix/]name, values of at most 63 characters"),
    "toleration": (
        lambda v: isinstance(v, dict),
        "a toleration {key, operator: Equal or Exists, value, effect}",
    ),
    "label_key": (label_key, "a Kubernetes label key, [prefix/]name"),
    "annotations": (annotation_map, "Kubernetes annotations: keys [prefix/]name, string values"),
    "image": (image_reference, "an image reference pinned by a tag other than latest, or by a digest"),
    "duration": (duration, "a duration such as 30s, 10m or 15d"),
    "k8s_quantity": (k8s_quantity, "a Kubernetes quantity such as 4Gi"),
    "k8s_resources": (
        k8s_resources,
        "requests with cpu and memory (and optional limits), as quantities: {requests: {cpu: 100m, memory: 128Mi}}",
    ),
    "byte_size": (byte_size, "a byte size such as 50GB"),
    "version": (version, "a release version such as 1.17.8 or v25.3.4"),
    "sha256": (sha256, "a sha256 checksum, 64 hex digits (lower case)"),
    "s3_uri": (s3_uri, "s3://bucket/prefix, or s3://https://host:port/bucket/prefix"),
    "file_url": (file_url, "a file:/// URL of an absolute path"),
    "taint": (taint, "a node taint, key[=value]:Effect (NoSchedule, PreferNoSchedule or NoExecute)"),
    "text": (text, "a non-empty single line without surrounding spaces"),
}


def _bound(text_value: str) -> float | None:
    return float(text_value) if text_value else None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _range_wanted(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"a number in {_num(low)}-{_num(high)}"
    if low is not None:
        return f"a number of at least {_num(low)}"
    return f"a number of at most {_num(high)}" if high is not None else "a number"


def check_value(check: str, value: object) -> str | None:
    """None when the value passes the check, else what the value must be."""
    wants = []
    for alternative in str(check).split(" or "):
        alternative = alternative.strip()
        if alternative == "preflight":
            return None  # checked by the role's preflight, against something only the role knows
        if alternative == "empty":  # "" is a setting of its own (the option's description says which)
            if value == "":
                return None
            continue
        if alternative in KINDS:
            test, wanted = KINDS[alternative]
            if test(value):
                return None
            wants.append(wanted)
        elif ".." in alternative:
            low, high = (_bound(part) for part in alternative.split("..", 1))
            if _number(value) and (low is None or value >= low) and (high is None or value <= high):  # type: ignore[operator]
                return None
            wants.append(_range_wanted(low, high))
        elif alternative.lstrip("-").replace(".", "", 1).isdigit():
            if _number(value) and value == float(alternative):
                return None
            wants.append(alternative)
        else:
            raise ValueError(f"unknown check {alternative!r}")
    return " or ".join(wants)


def check_options(options: dict[str, dict[str, object]], values: dict[str, object], where: str = "") -> list[str]:
    """Problems with the values of an argument spec's options that carry `check:`, each naming
    the variable (for lists, the item; for suboptions, the field). Unset values (None, "") pass,
    except where the option is required."""
    problems = []
    for name, spec in options.items():
        if name not in values:
            continue
        value, label = values[name], f"{where}{name}"
        # A required option whose role default is "" is defined, so ansible's own validation passes it.
        if spec.get("required") and value in (None, ""):
            what = str(spec.get("description") or "").split(". ")[0].rstrip(".")
            problems.append(f"{label} is required and empty: set it" + (f" ({what})" if what else ""))
            continue
        items = list(enumerate(value)) if spec.get("type") == "list" and isinstance(value, list) else None
        # An empty value passes where empty is the default (unset); where the default is a value, "" is a
        # value set, and checked.
        emptied = value == "" and spec.get("default") not in (None, "")
        if spec.get("no_log") and placeholder(value):
            problems.append(f"{label} (value hidden) is a placeholder, not a secret: put the real one in your vault")
            continue
        if "check" in spec and (value not in (None, "") or emptied):
            for index, item in items if items is not None else [(None, value)]:
                at = label if index is None else f"{label}[{index}]"
                wanted = check_value(str(spec["check"]), item)
                if wanted:
                    shown = " (value hidden)" if spec.get("no_log") else f"={item}"
                    problems.append(f"{at}{shown} must be {wanted}")
                elif (relation := RELATIONS.get(str(spec["check"]))) and (problem := relation(item)):
                    problems.append(f"{at}: {problem}")
        sub = spec.get("options")
        if isinstance(sub, dict):
            for index, item in items if items is not None else [(None, value)]:
                if isinstance(item, dict):
                    at = label if index is None else f"{label}[{index}]"
                    problems += check_options(sub, item, f"{at}.")
    return problems


def owned_flag_problems(args: object, variable: str, owned: dict[str, str]) -> list[str]:
    """Flags of a free-form argument list that the role already renders from a variable of its own
    (owned: flag -> what sets it): given twice, the server takes whichever its parser meets last, and
    the role's checks and probes no longer describe what runs. Underscores count as dashes, as
    vLLM's own parser reads them."""
    problems = []
    for index, arg in enumerate(args if isinstance(args, list) else []):
        flag = str(arg).split("=", 1)[0].replace("_", "-")
        if flag in owned:
            problems.append(f"{variable}[{index}]={arg}: the role sets {flag} from {owned[flag]}; set that instead")
    return problems
