"""The three patch formats of the real server: RFC 7386 merge patch, RFC 6902 JSON patch and
strategic merge patch (with patch metadata for the fields of the built-in types that
cloudnode and kubectl touch)."""
import copy

from .errors import ApiError, bad_request


# --- RFC 7386 ---------------------------------------------------------------------------------

def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- RFC 6902 ---------------------------------------------------------------------------------

def _invalid(msg):
    return ApiError(422, "Invalid", msg)


def _ptr(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid("add operation does not apply: doc is missing path: \"%s\": missing value" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts, op, path):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict):
            if p not in cur:
                raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                idx = int(p)
            except ValueError:
                raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))
            if idx < 0 or idx >= len(cur):
                raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))
            cur = cur[idx]
        else:
            raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))
    return cur


def _get(doc, path, op):
    parts = _ptr(path)
    if not parts:
        return doc
    parent = _walk(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        try:
            idx = int(last)
        except ValueError:
            idx = -1
        if 0 <= idx < len(parent):
            return parent[idx]
    raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))


def _remove(doc, path, op="remove"):
    parts = _ptr(path)
    parent = _walk(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            idx = int(last)
        except ValueError:
            idx = -1
        if not 0 <= idx < len(parent):
            raise _invalid('Unable to remove nonexistent key: %s: missing value' % last)
        return parent.pop(idx)
    raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))


def _add(doc, path, value, op="add"):
    parts = _ptr(path)
    if not parts:
        return value
    parent = _walk(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError:
                raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))
            if idx < 0 or idx > len(parent):
                raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))
            parent.insert(idx, value)
    else:
        raise _invalid('%s operation does not apply: doc is missing path: "%s": missing value' % (op, path))
    return doc


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for o in ops:
        if not isinstance(o, dict) or "op" not in o:
            raise bad_request("Unexpected kind: <nil>")
        op = o["op"]
        path = o.get("path")
        if path is None:
            raise _invalid("%s operation does not apply: doc is missing path: \"\": missing value" % op)
        if op == "add":
            doc = _add(doc, path, copy.deepcopy(o.get("value")))
        elif op == "remove":
            _remove(doc, path)
        elif op == "replace":
            _get(doc, path, "replace")
            parts = _ptr(path)
            if not parts:
                doc = copy.deepcopy(o.get("value"))
            else:
                _remove(doc, path, "replace")
                doc = _add(doc, path, copy.deepcopy(o.get("value")), "replace")
        elif op == "move":
            v = _get(doc, o.get("from", ""), "move")
            _remove(doc, o.get("from", ""), "move")
            doc = _add(doc, path, v, "move")
        elif op == "copy":
            v = copy.deepcopy(_get(doc, o.get("from", ""), "copy"))
            doc = _add(doc, path, v, "copy")
        elif op == "test":
            try:
                v = _get(doc, path, "test")
            except ApiError:
                v = _MISSING
            if v != o.get("value") or v is _MISSING:
                raise _invalid("testing value %s failed: test failed" % path)
        else:
            raise bad_request("Unexpected kind: %s" % op)
    return doc


_MISSING = object()


# --- strategic merge patch ---------------------------------------------------------------------
#
# Patch metadata: dotted field path (list elements transparent) -> (strategy, mergeKey).
# Strategy "merge" with a key merges lists of maps by that key; "merge" without a key unions a
# list of primitives. Lists not listed here are atomic (replaced), as for Node spec.taints and
# Pod spec.tolerations on the real server.

_META = {
    "metadata.finalizers": ("merge", None),
    "metadata.ownerReferences": ("merge", "uid"),
}

_CONTAINER = {
    "ports": ("merge", "containerPort"),
    "env": ("merge", "name"),
    "volumeMounts": ("merge", "mountPath"),
    "volumeDevices": ("merge", "devicePath"),
    "resizePolicy": ("merge", "resourceName"),
}

_PODSPEC = {
    "containers": ("merge", "name"),
    "initContainers": ("merge", "name"),
    "ephemeralContainers": ("merge", "name"),
    "volumes": ("merge", "name"),
    "imagePullSecrets": ("merge", "name"),
    "hostAliases": ("merge", "ip"),
    "topologySpreadConstraints": ("merge", "topologyKey"),
    "resourceClaims": ("merge", "name"),
    "schedulingGates": ("merge", "name"),
}


def _podspec(prefix):
    out = {}
    for k, v in _PODSPEC.items():
        out[prefix + "." + k] = v
    for c in ("containers", "initContainers", "ephemeralContainers"):
        for k, v in _CONTAINER.items():
            out["%s.%s.%s" % (prefix, c, k)] = v
    return out


_WORKLOAD = dict(_podspec("spec.template.spec"), **{"status.conditions": ("merge", "type")})

SMP_META = {
    ("", "Node"): {"spec.podCIDRs": ("merge", None), "status.addresses": ("merge", "type"),
                   "status.conditions": ("merge", "type")},
    ("", "Pod"): dict(_podspec("spec"), **{"status.conditions": ("merge", "type"),
                                          "status.podIPs": ("merge", "ip")}),
    ("", "Service"): {"spec.ports": ("merge", "port"), "status.conditions": ("merge", "type")},
    ("", "Namespace"): {"status.conditions": ("merge", "type")},
    ("apps", "Deployment"): _WORKLOAD,
    ("apps", "DaemonSet"): _WORKLOAD,
    ("apps", "ReplicaSet"): _WORKLOAD,
    ("apps", "StatefulSet"): _WORKLOAD,
    ("policy", "PodDisruptionBudget"): {"status.conditions": ("merge", "type")},
}


def _meta_for(meta, path):
    if path in _META:
        return _META[path]
    return meta.get(path)


def strategic_merge(original, patch, meta, path=""):
    if not isinstance(patch, dict):
        raise bad_request("unable to find api field in struct for the patch")
    if patch.get("$patch") == "replace":
        out = {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        return out
    if patch.get("$patch") == "delete":
        return None
    out = dict(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys") or k.startswith("$setElementOrder/"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            cur = out.get(field)
            if isinstance(cur, list) and isinstance(v, list):
                out[field] = [x for x in cur if x not in v]
            continue
        sub = path + "." + k if path else k
        if v is None:
            out.pop(k, None)
            continue
        if isinstance(v, dict):
            merged = strategic_merge(out.get(k), v, meta, sub)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        elif isinstance(v, list) and k not in out:
            # As the real server: a list the object does not have yet is taken from the patch
            # as it is, so two elements with the same merge key (a Node's InternalIPv4 and
            # InternalIPv6) both stay.
            out[k] = [copy.deepcopy(x) for x in v if not (isinstance(x, dict) and "$patch" in x)]
        elif isinstance(v, list):
            strat = _meta_for(meta, sub)
            out[k] = _merge_list(out.get(k), v, strat, meta, sub)
        else:
            out[k] = v
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    # setElementOrder only orders; the merged content is what matters for the stored object.
    return out


def _merge_list(orig, patch, strat, meta, path):
    if strat is None:
        return [copy.deepcopy(x) for x in patch if not (isinstance(x, dict) and x.get("$patch"))]
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [copy.deepcopy(x) for x in patch if not (isinstance(x, dict) and "$patch" in x)]
    orig = list(orig) if isinstance(orig, list) else []
    _, key = strat
    if key is None:
        out = list(orig)
        for x in patch:
            if x not in out:
                out.append(x)
        return out
    out = [copy.deepcopy(x) for x in orig]
    for x in patch:
        if not isinstance(x, dict):
            raise bad_request("json: cannot unmarshal %s into Go value of type map[string]interface {}"
                              % type(x).__name__)
        if key not in x:
            raise bad_request("map: %s does not contain declared merge key: %s" % (x, key))
        idx = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(key) == x[key]), -1)
        if x.get("$patch") == "delete":
            out = [o for o in out if not (isinstance(o, dict) and o.get(key) == x[key])]
            continue
        if idx >= 0:
            out[idx] = strategic_merge(out[idx], x, meta, path)
        else:
            out.append(strategic_merge({}, x, meta, path))
    return out
