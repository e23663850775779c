"""Nodes as a kubelet and the API server leave them in a real cluster, for the benchmarks and tests
that need realistic object sizes (bench/initializer, tests of the informer's transform).

    node(name, index=0, tainted=True) -> dict, ready to POST to /api/v1/nodes (or --load)
    node_list(names) -> a v1 List of them

What a kubelet writes: the well-known labels (arch, os, hostname, instance type and role labels
an installer adds), the annotations of kubeadm, the CNI (Calico) and CSI drivers, spec.podCIDR(s),
the uninitialized taint of --cloud-provider=external, and the status it reports: five conditions
(the CNI adds NetworkUnavailable), capacity/allocatable with hugepages and an extended resource,
daemonEndpoints, nodeInfo, the Hostname address, attached volumes, and status.images capped at 50
entries (the kubelet's --node-status-max-images default), most of them with a digest name and a
tag name. What the API server adds: metadata.managedFields, one entry per writer (kubelet,
kubelet on status, kube-controller-manager, the CNI, node-feature-discovery), each listing the
fields it owns as FieldsV1. SIZES below is what one such Node weighs as compact JSON; the
shapes follow `kubectl get node -o json` of kind, kubeadm and EKS clusters.

The API server replaces uid, creationTimestamp and resourceVersion; the fake keeps managedFields
sent on create as the real one does (the field manager decodes them from the request)."""
import hashlib
import json

# Images of a typical worker: the cluster's own, the CNI's and CSI drivers', monitoring and
# ingress, then the workloads'. (repository, tag)
_SYSTEM_IMAGES = [
    ("registry.k8s.io/kube-proxy", "v1.30.4"), ("registry.k8s.io/pause", "3.9"),
    ("registry.k8s.io/coredns/coredns", "v1.11.1"), ("registry.k8s.io/etcd", "3.5.12-0"),
    ("docker.io/calico/node", "v3.28.1"), ("docker.io/calico/cni", "v3.28.1"),
    ("docker.io/calico/kube-controllers", "v3.28.1"), ("docker.io/calico/pod2daemon-flexvol", "v3.28.1"),
    ("registry.k8s.io/sig-storage/csi-node-driver-registrar", "v2.11.1"),
    ("registry.k8s.io/sig-storage/livenessprobe", "v2.13.1"),
    ("registry.k8s.io/sig-storage/csi-provisioner", "v5.0.1"),
    ("registry.k8s.io/sig-storage/csi-attacher", "v4.6.1"),
    ("registry.k8s.io/sig-storage/csi-resizer", "v1.11.1"),
    ("registry.k8s.io/sig-storage/csi-snapshotter", "v8.0.1"),
    ("docker.io/hetznercloud/hcloud-csi-driver", "v2.9.0"),
    ("quay.io/prometheus/node-exporter", "v1.8.2"), ("quay.io/prometheus/prometheus", "v2.53.1"),
    ("quay.io/prometheus-operator/prometheus-config-reloader", "v0.75.2"),
    ("quay.io/prometheus/alertmanager", "v0.27.0"), ("registry.k8s.io/kube-state-metrics/kube-state-metrics", "v2.13.0"),
    ("registry.k8s.io/ingress-nginx/controller", "v1.11.2"),
    ("registry.k8s.io/ingress-nginx/kube-webhook-certgen", "v1.4.3"),
    ("quay.io/jetstack/cert-manager-controller", "v1.15.3"), ("quay.io/jetstack/cert-manager-webhook", "v1.15.3"),
    ("quay.io/jetstack/cert-manager-cainjector", "v1.15.3"), ("docker.io/grafana/grafana", "11.1.4"),
    ("docker.io/grafana/loki", "3.1.1"), ("docker.io/grafana/promtail", "3.1.1"),
    ("registry.k8s.io/metrics-server/metrics-server", "v0.7.1"), ("docker.io/bitnami/kubectl", "1.30.4"),
]


def _digest(*parts):
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def _images(index):
    """50 images: the system ones, then workload images that differ a little between Nodes."""
    out = []
    repos = list(_SYSTEM_IMAGES)
    for j in range(50 - len(repos)):
        repos.append(("registry.example.com/team-%d/service-%d" % (j % 7, (index + j) % 40), "2024.%02d.%d" % (j % 12 + 1, j)))
    for n, (repo, tag) in enumerate(repos):
        names = ["%s@sha256:%s" % (repo, _digest(repo, tag)), "%s:%s" % (repo, tag)]
        if n % 9 == 8:
            names = names[:1]  # an image pulled by digest only
        out.append({"names": names, "sizeBytes": 300000 + (n * 7919 + index * 104729) % 150000000})
    return out


def _fields(*paths):
    """FieldsV1 owning each dotted path (a list of keys per path)."""
    root = {}
    for p in paths:
        cur = root
        for key in p:
            cur = cur.setdefault(key, {})
    return root


def _condition(ctype, status, reason, message, now):
    return {"type": ctype, "status": status, "lastHeartbeatTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}


def _managed(manager, time, fields, subresource=None):
    e = {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": time, "fieldsType": "FieldsV1",
         "fieldsV1": fields}
    if subresource:
        e["subresource"] = subresource
    return e


def node(name, index=0, tainted=True, now="2026-11-22T08:00:00Z"):
    internal = "10.%d.%d.%d" % (index // 65536 % 256, index // 256 % 256, index % 256 + 1 if index % 256 < 255 else 1)
    pod_cidr = "10.%d.%d.0/24" % (128 + index // 256 % 128, index % 256)
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node-role.kubernetes.io/worker": "", "node.kubernetes.io/pool": "pool-%d" % (index % 4),
        "topology.hcloud.com/datacenter": "fsn1-dc14", "csi.hetzner.cloud/location": "fsn1",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
        "feature.node.kubernetes.io/kernel-version.major": "6",
    }
    annotations = {
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "projectcalico.org/IPv4Address": internal + "/16",
        "projectcalico.org/IPv4VXLANTunnelAddr": "10.%d.%d.192" % (200 + index // 256 % 50, index % 256),
        "csi.volume.kubernetes.io/nodeid": json.dumps({"csi.hetzner.cloud": str(40000000 + index)}, separators=(",", ":")),
        "nfd.node.kubernetes.io/feature-labels": "cpu-model.vendor_id,kernel-version.major",
        "nfd.node.kubernetes.io/master.version": "v0.16.3",
    }
    spec = {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]}
    if tainted:
        spec["taints"] = [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true",
                           "effect": "NoSchedule"}]
    volumes = ["kubernetes.io/csi/csi.hetzner.cloud^%d" % (90000000 + index * 3 + v) for v in range(3)]
    status = {
        "capacity": {"cpu": "8", "ephemeral-storage": "157260756Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                     "memory": "32870040Ki", "pods": "110", "csi.hetzner.cloud/volumes": "16"},
        "allocatable": {"cpu": "7910m", "ephemeral-storage": "144927488041", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                        "memory": "32255640Ki", "pods": "110", "csi.hetzner.cloud/volumes": "16"},
        "conditions": [
            _condition("NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node", now),
            _condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                       "kubelet has sufficient memory available", now),
            _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now),
            _condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", now),
            _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", now),
        ],
        "addresses": [{"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": _digest("machine", name)[:32], "systemUUID": _uuid("system", name),
            "bootID": _uuid("boot", name), "kernelVersion": "6.1.0-25-amd64",
            "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "containerd://1.7.20",
            "kubeletVersion": "v1.30.4", "kubeProxyVersion": "v1.30.4", "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "images": _images(index),
        "volumesInUse": volumes,
        "volumesAttached": [{"name": v, "devicePath": ""} for v in volumes],
    }
    f = "f:"
    managed = [
        _managed("kubelet", now, _fields(
            *[("f:metadata", "f:annotations", f + a) for a in ("kubeadm.alpha.kubernetes.io/cri-socket",
                                                                "volumes.kubernetes.io/controller-managed-attach-detach")],
            *[("f:metadata", "f:labels", f + k) for k in ("beta.kubernetes.io/arch", "beta.kubernetes.io/os",
                                                           "kubernetes.io/arch", "kubernetes.io/hostname",
                                                           "kubernetes.io/os")],
            ("f:spec", "f:taints"))),
        _managed("kube-controller-manager", now, _fields(
            ("f:metadata", "f:annotations", "f:node.alpha.kubernetes.io/ttl"), ("f:spec", "f:podCIDR"),
            ("f:spec", "f:podCIDRs", 'v:"%s"' % pod_cidr), ("f:status", "f:volumesAttached"))),
        _managed("calico-node", now, _fields(
            ("f:metadata", "f:annotations", "f:projectcalico.org/IPv4Address"),
            ("f:metadata", "f:annotations", "f:projectcalico.org/IPv4VXLANTunnelAddr"),
            *[("f:status", "f:conditions", 'k:{"type":"NetworkUnavailable"}', f + x)
              for x in ("lastHeartbeatTime", "lastTransitionTime", "message", "reason", "status", "type")]),
            "status"),
        _managed("nfd-master", now, _fields(
            ("f:metadata", "f:annotations", "f:nfd.node.kubernetes.io/feature-labels"),
            ("f:metadata", "f:annotations", "f:nfd.node.kubernetes.io/master.version"),
            ("f:metadata", "f:labels", "f:feature.node.kubernetes.io/cpu-model.vendor_id"),
            ("f:metadata", "f:labels", "f:feature.node.kubernetes.io/kernel-version.major"))),
        _managed("kubelet", now, _fields(
            ("f:metadata", "f:annotations", "f:csi.volume.kubernetes.io/nodeid"),
            *[("f:status", "f:allocatable", f + r) for r in status["allocatable"]],
            *[("f:status", "f:capacity", f + r) for r in status["capacity"]],
            *[("f:status", "f:conditions", 'k:{"type":"%s"}' % c["type"], f + x)
              for c in status["conditions"][1:] for x in ("lastHeartbeatTime", "lastTransitionTime", "message",
                                                          "reason", "status", "type")],
            ("f:status", "f:addresses", 'k:{"type":"Hostname"}', "f:address"),
            ("f:status", "f:daemonEndpoints", "f:kubeletEndpoint", "f:Port"),
            ("f:status", "f:images"), ("f:status", "f:volumesInUse"),
            *[("f:status", "f:nodeInfo", f + k) for k in status["nodeInfo"]]), "status"),
    ]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations, "managedFields": managed},
            "spec": spec, "status": status}


def _uuid(*parts):
    h = _digest(*parts)
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def node_list(names):
    return {"apiVersion": "v1", "kind": "List", "items": [node(n, i) for i, n in enumerate(names)]}


# Compact JSON sizes of one Node made by node() (computed, for documentation).
def sizes():
    n = node("bench-00000", 0)
    out = {"total": len(json.dumps(n, separators=(",", ":")))}
    out["managedFields"] = len(json.dumps(n["metadata"]["managedFields"], separators=(",", ":")))
    out["status.images"] = len(json.dumps(n["status"]["images"], separators=(",", ":")))
    return out


if __name__ == "__main__":
    print(json.dumps(sizes()))
