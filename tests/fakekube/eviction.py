"""The eviction subresource of Pods (policy/v1 Eviction), as `kubectl drain` and node drainers use
it: POST /api/v1/namespaces/NS/pods/NAME/eviction deletes the Pod unless a PodDisruptionBudget
that selects it forbids the disruption, which the real server answers with 429 TooManyRequests
("Cannot evict pod as it would violate the pod's disruption budget.") and the cause
DisruptionBudget; more than one PodDisruptionBudget for the Pod is a 500, as the real registry
answers. The real server reads status.disruptionsAllowed, which the disruption controller keeps;
no such controller runs here, so the same number is computed at the request from the Pods the
budget selects: those Running with Ready=True and not being deleted are healthy, and the
eviction is allowed while healthy - 1 stays at or above minAvailable (or expected -
maxUnavailable; expected is the number of selected Pods, a percentage rounds up). A Pod that is
not Running (Pending, Succeeded, Failed) is evicted without consulting any budget, as on the real
server. RBAC: verb create on pods/eviction."""
import math

from . import errors
from .selection import labels_match, parse_label_selector
from .scale import _selector

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def _healthy(pod):
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


def _count(v, expected, round_up):
    if isinstance(v, str) and v.endswith("%"):
        x = int(v[:-1]) * expected / 100.0
        return int(math.ceil(x) if round_up else math.floor(x))
    return int(v)


def allowed(pdb, pods):
    """Whether one more disruption is allowed among pods (those the budget selects)."""
    spec = pdb.get("spec") or {}
    expected = len(pods)
    healthy = sum(1 for p in pods if _healthy(p))
    if spec.get("minAvailable") is not None:
        desired = _count(spec["minAvailable"], expected, True)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _count(spec["maxUnavailable"], expected, True))
    else:
        desired = expected
    return healthy - 1 >= desired


def handle(handler, store, registry, rt, ns, name, verb, body, ctype, dry_run):
    if verb != "create":
        raise errors.method_not_allowed()
    req = handler.decode(body, ctype) if body.strip() else {}
    if not isinstance(req, dict) or req.get("kind") not in (None, "Eviction") or \
            req.get("apiVersion") not in (None, "policy/v1", "policy/v1beta1"):
        raise errors.bad_request("the body of the request must be a policy/v1 Eviction")
    if (req.get("metadata") or {}).get("name") not in (None, name):
        raise errors.bad_request("name in URL does not match name in Eviction object")
    pod = store.get(rt, ns, name)
    if (pod.get("status") or {}).get("phase") == "Running":
        pdb_rt = registry.lookup("policy", "v1", "poddisruptionbudgets")
        pdbs, _, _, _ = store.list(pdb_rt, ns, [], [])
        matching = []
        for pdb in pdbs:
            sel = (pdb.get("spec") or {}).get("selector")
            if sel is None:
                continue
            reqs = parse_label_selector(_selector(sel))
            if labels_match(reqs, pod):
                matching.append((pdb, reqs))
        if len(matching) > 1:
            raise errors.ApiError(500, "InternalError",
                                  "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                  "does not support.")
        if matching:
            pdb, reqs = matching[0]
            pod_rt = rt
            pods, _, _, _ = store.list(pod_rt, ns, reqs, [])
            if not allowed(pdb, pods):
                raise errors.ApiError(429, "TooManyRequests", PDB_MESSAGE, {"causes": [{
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget %s needs %s healthy pods and has %d currently" % (
                        pdb["metadata"]["name"], (pdb.get("spec") or {}).get("minAvailable", "?"),
                        sum(1 for p in pods if _healthy(p)))}]})
    if not dry_run:
        store.delete(rt, ns, name, req.get("deleteOptions") or {})
    handler.send_obj(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
