"""The scale subresource of Deployments, ReplicaSets and StatefulSets (autoscaling/v1 Scale), as
`kubectl scale` and HorizontalPodAutoscalers use it: GET answers the Scale view of the object;
PUT and PATCH change a Scale whose spec.replicas becomes the object's, with the Scale's
resourceVersion as precondition (kubectl 1.20 reads the Scale, then PUTs it back)."""
import json

from . import errors, patch as patchmod


def _selector(sel):
    """metav1.LabelSelectorAsSelector(sel).String(): requirements sorted by key."""
    reqs = []
    for k, v in (sel.get("matchLabels") or {}).items():
        reqs.append((k, "%s=%s" % (k, v)))
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e.get("key", ""), e.get("operator"), sorted(e.get("values") or [])
        if op == "In":
            reqs.append((k, "%s in (%s)" % (k, ",".join(vals))))
        elif op == "NotIn":
            reqs.append((k, "%s notin (%s)" % (k, ",".join(vals))))
        elif op == "Exists":
            reqs.append((k, k))
        elif op == "DoesNotExist":
            reqs.append((k, "!" + k))
    return ",".join(r for _, r in sorted(reqs))


def view(obj):
    """The Scale of one object."""
    md = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in md},
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": status.get("replicas", 0), "selector": _selector(spec.get("selector") or {})}}


def _apply(rt, name, cur, scale):
    """The object with the Scale's replicas, or a 422/409 as the real registry answers."""
    if not isinstance(scale, dict) or not isinstance(scale.get("spec", {}), dict):
        raise errors.bad_request("the body is not a Scale object")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise errors.bad_request("json: cannot unmarshal %s into Go struct field ScaleSpec.spec.replicas of type "
                                 "int32" % type(replicas).__name__)
    if replicas < 0:
        raise errors.invalid("autoscaling", "Scale", name, [errors.FieldError(
            "spec.replicas", "Invalid value", replicas, "must be greater than or equal to 0")])
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv not in (None, "") and str(rv) != cur["metadata"]["resourceVersion"]:
        raise errors.conflict(rt.group, rt.plural, name, "the object has been modified; please apply your "
                              "changes to the latest version and try again")
    cur.setdefault("spec", {})["replicas"] = replicas
    return cur


def handle(server, rt, ns, name, verb, body, ctype, dry_run):
    """Serves GET/PUT/PATCH of NAME/scale."""
    store = server.st.store
    if verb == "get":
        server.send_obj(200, view(store.get(rt, ns, name)))
        return
    if verb == "update":
        scale = server.decode(body, ctype)
        if isinstance(scale, dict) and scale.get("kind") not in (None, "Scale"):
            raise errors.bad_request("the kind in the request body (%s) does not match the kind of the "
                                     "subresource (Scale)" % scale.get("kind"))
        fn = lambda cur: _apply(rt, name, cur, scale)  # noqa: E731
    elif verb == "patch":
        ct = (ctype or "").split(";")[0].strip().lower()
        try:
            p = json.loads(body)
        except ValueError as e:
            raise errors.bad_request("error decoding patch: %s" % e)
        if ct == "application/merge-patch+json":
            change = lambda s: patchmod.merge_patch(s, p)  # noqa: E731
        elif ct == "application/json-patch+json":
            change = lambda s: patchmod.json_patch(s, p)  # noqa: E731
        elif ct == "application/strategic-merge-patch+json":
            change = lambda s: patchmod.strategic_merge(s, p, {})  # noqa: E731
        else:
            raise errors.unsupported_patch(["application/json-patch+json", "application/merge-patch+json",
                                            "application/strategic-merge-patch+json"])
        fn = lambda cur: _apply(rt, name, cur, change(view(cur)))  # noqa: E731
    else:
        raise errors.method_not_allowed()
    res, _ = store.update(rt, ns, name, fn, None, dry_run)
    server.send_obj(200, view(res))
