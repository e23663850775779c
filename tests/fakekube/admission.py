"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) enforcement: policies and their
bindings stored in the fake server are applied to CREATE/UPDATE/DELETE requests after the
built-in validation, as on the real server, with its denial wording and status codes."""
from . import errors
from .cel import CelError, compile_expr, evaluate, Env
from .kinds import _selector_matches

_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}
_AR = ("admissionregistration.k8s.io", "validatingadmissionpolicies")
_ARB = ("admissionregistration.k8s.io", "validatingadmissionpolicybindings")
_CACHE = {}


def _compiled(expr):
    ast = _CACHE.get(expr)
    if ast is None:
        ast = compile_expr(expr)
        _CACHE[expr] = ast
    return ast


def _rule_matches(rule, op, rt, sub, ns_scoped):
    def has(lst, v):
        return "*" in (lst or []) or v in (lst or [])
    if not has(rule.get("apiGroups"), rt.group) or not has(rule.get("apiVersions"), rt.version):
        return False
    if not has(rule.get("operations"), op):
        return False
    res = rt.plural + ("/" + sub if sub else "")
    ok = False
    for r in rule.get("resources") or []:
        if r == "*/*" or r == res or (r == "*" and not sub) or (sub and r in ("*/" + sub, rt.plural + "/*")):
            ok = True
    if not ok:
        return False
    scope = rule.get("scope", "*")
    if scope == "Cluster" and ns_scoped or scope == "Namespaced" and not ns_scoped:
        return False
    names = rule.get("resourceNames") or []
    return True if not names else None  # resourceNames are checked by the caller (it knows the name)


def _matches(mr, op, rt, sub, name, obj, old, ns_obj):
    if not mr:
        return True
    ok = False
    for rule in mr.get("resourceRules") or []:
        m = _rule_matches(rule, op, rt, sub, rt.namespaced)
        if m is None:
            m = name in rule["resourceNames"]
        if m:
            ok = True
            break
    if not ok:
        return False
    for rule in mr.get("excludeResourceRules") or []:
        m = _rule_matches(rule, op, rt, sub, rt.namespaced)
        if m is None:
            m = name in rule["resourceNames"]
        if m:
            return False
    osel = mr.get("objectSelector")
    if osel and (osel.get("matchLabels") or osel.get("matchExpressions")):
        labels_new = ((obj or {}).get("metadata") or {}).get("labels") or {}
        labels_old = ((old or {}).get("metadata") or {}).get("labels") or {}
        if not (_selector_matches(osel, labels_new) or _selector_matches(osel, labels_old)):
            return False
    nsel = mr.get("namespaceSelector")
    if nsel and (nsel.get("matchLabels") or nsel.get("matchExpressions")) and rt.namespaced:
        if not _selector_matches(nsel, ((ns_obj or {}).get("metadata") or {}).get("labels") or {}):
            return False
    return True


def admit(store, op, rt, sub, ns, name, obj, old, user, groups, dry_run=False):
    """Raises the denial as an ApiError; called with the store lock held."""
    bindings = list(store.objects[_ARB].values())
    if not bindings:
        return
    policies = store.objects[_AR]
    ns_obj = store.objects[("", "namespaces")].get(("", ns)) if ns else None
    for b in sorted(bindings, key=lambda x: x["metadata"]["name"]):
        bspec = b.get("spec") or {}
        pol = policies.get(("", bspec.get("policyName")))
        if pol is None:
            continue
        pspec = pol.get("spec") or {}
        if not _matches(pspec.get("matchConstraints"), op, rt, sub, name, obj, old, ns_obj):
            continue
        if bspec.get("matchResources") and not _matches(bspec.get("matchResources"), op, rt, sub, name, obj, old,
                                                        ns_obj):
            continue
        actions = bspec.get("validationActions") or []
        if "Deny" not in actions:
            continue
        fail = pspec.get("failurePolicy", "Fail") == "Fail"
        request = {"operation": op, "userInfo": {"username": user, "groups": list(groups)},
                   "name": name, "namespace": ns or "", "dryRun": bool(dry_run),
                   "kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
                   "resource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
                   "subResource": sub or ""}
        env = Env({"object": obj, "oldObject": old, "request": request, "params": None,
                   "namespaceObject": ns_obj})
        cache = {}

        def lazy(vdef):
            def get():
                n = vdef.get("name")
                if n not in cache:
                    try:
                        cache[n] = ("ok", evaluate(_compiled(vdef.get("expression", "")), env))
                    except CelError as e:
                        cache[n] = ("err", e)
                kind, val = cache[n]
                if kind == "err":
                    raise val
                return val
            return get
        env.lazy = {v.get("name"): lazy(v) for v in pspec.get("variables") or []}
        deny = None
        for mc in pspec.get("matchConditions") or []:
            try:
                r = evaluate(_compiled(mc.get("expression", "")), env)
            except CelError as e:
                if fail:
                    deny = ("expression '%s' resulted in error: %s" % (mc.get("expression", "").strip(), e), "")
                    break
                r = False
            if r is not True:
                break
        else:
            for v in pspec.get("validations") or []:
                expr = v.get("expression", "")
                try:
                    r = evaluate(_compiled(expr), env)
                except CelError as e:
                    if fail:
                        deny = ("expression '%s' resulted in error: %s" % (expr.strip(), e), "")
                        break
                    continue
                if r is not True:
                    msg = v.get("message") or ""
                    if v.get("messageExpression"):
                        try:
                            m = evaluate(_compiled(v["messageExpression"]), env)
                            if isinstance(m, str) and m.strip():
                                msg = m
                        except CelError:
                            pass
                    if not msg:
                        msg = "failed expression: %s" % expr.strip()
                    deny = (msg, v.get("reason") or "Invalid")
                    break
            if deny is None:
                continue
        if deny is None:
            continue
        msg, reason = deny
        reason = reason or "Invalid"
        full = "ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s" % (
            pol["metadata"]["name"], b["metadata"]["name"], msg)
        e = errors.forbidden(rt.group, rt.plural, name, full)
        e.reason = reason
        e.code = _CODES.get(reason, 422)
        e.details = dict(e.details or {}, causes=[{"message": full}])
        raise e
