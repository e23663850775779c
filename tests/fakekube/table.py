"""meta.k8s.io/v1 Table responses for `kubectl get` (Accept: ...;as=Table;g=meta.k8s.io;v=v1):
the real server's columns for the kinds people look at, custom resources' additionalPrinterColumns,
and Name/Age for the rest."""
import datetime

from .selection import get_path


def human_duration(seconds):
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = s // 3600
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    if h < 192:
        return "%dd%dh" % (h // 24, h % 24) if h % 24 else "%dd" % (h // 24)
    if h < 24 * 365 * 2:
        return "%dd" % (h // 24)
    return "%dy%dd" % (h // 24 // 365, h // 24 % 365) if h // 24 < 365 * 8 else "%dy" % (h // 24 // 365)


def age(obj):
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return human_duration((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds())


def _node_status(o):
    ready = "Unknown"
    for c in (o.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            ready = "Ready" if c.get("status") == "True" else "NotReady"
    if (o.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    return ready


def _node_roles(o):
    labels = (o.get("metadata") or {}).get("labels") or {}
    roles = sorted(k[len("node-role.kubernetes.io/"):] for k in labels if k.startswith("node-role.kubernetes.io/"))
    if labels.get("kubernetes.io/role"):
        roles.append(labels["kubernetes.io/role"])
    return ",".join(r for r in roles if r) or "<none>"


def _dep_ready(o):
    st = o.get("status") or {}
    return "%d/%d" % (st.get("readyReplicas", 0), (o.get("spec") or {}).get("replicas", 0))


S = "string"
COLUMNS = {
    ("", "Node"): [("Status", S, _node_status), ("Roles", S, _node_roles), ("Age", S, age),
                   ("Version", S, lambda o: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""))],
    ("", "Namespace"): [("Status", S, lambda o: (o.get("status") or {}).get("phase", "")), ("Age", S, age)],
    ("", "ConfigMap"): [("Data", "integer", lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
                        ("Age", S, age)],
    ("", "Secret"): [("Type", S, lambda o: o.get("type", "")),
                     ("Data", "integer", lambda o: len(o.get("data") or {})), ("Age", S, age)],
    ("apiextensions.k8s.io", "CustomResourceDefinition"): [
        ("Created At", "date", lambda o: (o.get("metadata") or {}).get("creationTimestamp"))],
    ("apps", "Deployment"): [("Ready", S, _dep_ready),
                             ("Up-to-date", "integer", lambda o: (o.get("status") or {}).get("updatedReplicas", 0)),
                             ("Available", "integer",
                              lambda o: (o.get("status") or {}).get("availableReplicas", 0)), ("Age", S, age)],
}


def _jsonpath(o, path):
    v = get_path(o, path.strip().lstrip("."))
    if v is None:
        return None
    return v


def build(rt, objs, list_rv, include="Metadata", cont=None, remaining=None):
    if rt.crd is not None:
        spec = rt.crd.get("spec") or {}
        ver = next((v for v in spec.get("versions") or [] if v.get("name") == rt.version), {})
        apc = ver.get("additionalPrinterColumns")
        if apc is None:
            apc = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
        cols = [(c.get("name"), c.get("type", "string"), (lambda p: lambda o: _jsonpath(o, p))(c.get("jsonPath", "")),
                 c.get("priority", 0), c.get("description", ""), c.get("format", "")) for c in apc]
    else:
        cols = [(n, t, fn, 0, "", "") for n, t, fn in COLUMNS.get((rt.group, rt.kind), [("Age", S, age)])]
    defs = [{"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a "
             "namespace. Cannot be updated.", "priority": 0}]
    for n, t, _, prio, desc, fmt in cols:
        defs.append({"name": n, "type": t, "format": fmt, "description": desc, "priority": prio})
    rows = []
    for o in objs:
        cells = [o["metadata"]["name"]] + [fn(o) for _, _, fn, _, _, _ in cols]
        row = {"cells": cells}
        if include == "Object":
            row["object"] = o
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o["metadata"]}
        rows.append(row)
    md = {"resourceVersion": str(list_rv)}
    if cont:
        md["continue"] = cont
        if remaining is not None:
            md["remainingItemCount"] = remaining
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs, "rows": rows}
