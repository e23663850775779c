"""RBAC authorization over the Role/ClusterRole/binding objects in the store, following
k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac (rule matching, subject matching,
aggregated ClusterRoles) and wording denials as the real server does."""
from .kinds import _selector_matches


class Attrs:
    def __init__(self, user, groups, verb, resource_request, group="", resource="", subresource="",
                 namespace="", name="", path="", version=""):
        self.user, self.groups, self.verb = user, groups, verb
        self.resource_request = resource_request
        self.group, self.resource, self.subresource = group, resource, subresource
        self.namespace, self.name, self.path, self.version = namespace, name, path, version


def _verb_matches(rule, verb):
    vs = rule.get("verbs") or []
    return "*" in vs or verb in vs


def _group_matches(rule, group):
    gs = rule.get("apiGroups") or []
    return "*" in gs or group in gs


def _resource_matches(rule, resource, sub):
    combined = resource + "/" + sub if sub else resource
    for r in rule.get("resources") or []:
        if r == "*" or r == combined:
            return True
        if sub and r == "*/" + sub:
            return True
    return False


def _name_matches(rule, name):
    names = rule.get("resourceNames") or []
    return not names or name in names


def _url_matches(rule, path):
    for u in rule.get("nonResourceURLs") or []:
        if u == "*" or u == path:
            return True
        if u.endswith("*") and path.startswith(u[:-1]):
            return True
    return False


def rule_allows(a, rule):
    if a.resource_request:
        return (_verb_matches(rule, a.verb) and _group_matches(rule, a.group)
                and _resource_matches(rule, a.resource, a.subresource) and _name_matches(rule, a.name))
    return _verb_matches(rule, a.verb) and _url_matches(rule, a.path)


def subject_matches(subj, user, groups, binding_ns):
    kind = subj.get("kind")
    if kind == "User":
        return subj.get("name") == user
    if kind == "Group":
        return subj.get("name") in groups
    if kind == "ServiceAccount":
        ns = subj.get("namespace") or binding_ns
        if not ns:
            return False
        return user == "system:serviceaccount:%s:%s" % (ns, subj.get("name"))
    return False


class Authorizer:
    def __init__(self, store, registry):
        self.store = store
        self.registry = registry

    def _objs(self, group, plural):
        return self.store.objects[(group, plural)]

    def _cluster_role_rules(self, name, errs):
        cr = self._objs("rbac.authorization.k8s.io", "clusterroles").get(("", name))
        if cr is None:
            errs.append('clusterrole.rbac.authorization.k8s.io "%s" not found' % name)
            return []
        rules = list(cr.get("rules") or [])
        agg = cr.get("aggregationRule")
        if agg:
            # The aggregation controller copies matching roles' rules in; done here on demand.
            for (_, n), other in self._objs("rbac.authorization.k8s.io", "clusterroles").items():
                if n == name:
                    continue
                ol = (other.get("metadata") or {}).get("labels") or {}
                if any(_selector_matches(sel, ol) for sel in agg.get("clusterRoleSelectors") or []):
                    rules.extend(other.get("rules") or [])
        return rules

    def _role_rules(self, binding, errs):
        ref = binding.get("roleRef") or {}
        ns = (binding.get("metadata") or {}).get("namespace", "")
        if ref.get("kind") == "ClusterRole":
            return self._cluster_role_rules(ref.get("name"), errs)
        r = self._objs("rbac.authorization.k8s.io", "roles").get((ns, ref.get("name")))
        if r is None:
            errs.append('role.rbac.authorization.k8s.io "%s" not found' % ref.get("name"))
            return []
        return r.get("rules") or []

    def authorize(self, a):
        """Returns (allowed, reason)."""
        if "system:masters" in a.groups:
            return True, ""
        errs = []
        with self.store.lock:
            for b in list(self._objs("rbac.authorization.k8s.io", "clusterrolebindings").values()):
                if not any(subject_matches(s, a.user, a.groups, "") for s in b.get("subjects") or []):
                    continue
                if any(rule_allows(a, r) for r in self._role_rules(b, errs)):
                    return True, ""
            if a.namespace and a.resource_request:
                for (ns, _), b in list(self._objs("rbac.authorization.k8s.io", "rolebindings").items()):
                    if ns != a.namespace:
                        continue
                    if not any(subject_matches(s, a.user, a.groups, ns) for s in b.get("subjects") or []):
                        continue
                    if any(rule_allows(a, r) for r in self._role_rules(b, errs)):
                        return True, ""
        reason = ""
        if errs:
            reason = "RBAC: " + (errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        return False, reason


def forbidden_message(a):
    if not a.resource_request:
        return 'User "%s" cannot %s path "%s"' % (a.user, a.verb, a.path)
    res = a.resource + "/" + a.subresource if a.subresource else a.resource
    if a.namespace:
        return 'User "%s" cannot %s resource "%s" in API group "%s" in the namespace "%s"' % (
            a.user, a.verb, res, a.group, a.namespace)
    return 'User "%s" cannot %s resource "%s" in API group "%s" at the cluster scope' % (a.user, a.verb, res, a.group)


# The bootstrap policy every real cluster has, so authenticated identities can discover the API
# and ask what they may do, exactly as on a real server (and nothing more).
BOOTSTRAP = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "cluster-admin", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
     "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
               {"nonResourceURLs": ["*"], "verbs": ["*"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "system:discovery", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
     "rules": [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                                    "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "system:public-info-viewer", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
     "rules": [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "system:basic-user", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
     "rules": [{"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews",
                                                                     "selfsubjectrulesreviews"], "verbs": ["create"]},
               {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]},
]


def _bootstrap_binding(role, group):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}


BOOTSTRAP += [_bootstrap_binding("cluster-admin", "system:masters")] + [
    _bootstrap_binding(r, "system:authenticated")
    for r in ("system:discovery", "system:public-info-viewer", "system:basic-user")]


def rules_for(authz, user, groups, namespace):
    """Rules that apply to an identity in a namespace (for SelfSubjectRulesReview)."""
    out = []
    errs = []
    with authz.store.lock:
        for b in authz._objs("rbac.authorization.k8s.io", "clusterrolebindings").values():
            if any(subject_matches(s, user, groups, "") for s in b.get("subjects") or []):
                out.extend(authz._role_rules(b, errs))
        for (ns, _), b in authz._objs("rbac.authorization.k8s.io", "rolebindings").items():
            if ns == namespace and any(subject_matches(s, user, groups, ns) for s in b.get("subjects") or []):
                out.extend(authz._role_rules(b, errs))
    return out



def _atomic(rule):
    """Breaks a rule into single (group, resource, name, verb) / (url, verb) rules, as
    rbac validation.Covers does before checking each against the owner's rules."""
    out = []
    verbs = rule.get("verbs") or []
    if rule.get("nonResourceURLs"):
        for u in rule["nonResourceURLs"]:
            for v in verbs:
                out.append({"nonResourceURLs": [u], "verbs": [v]})
        return out
    names = rule.get("resourceNames") or [None]
    for g in rule.get("apiGroups") or []:
        for r in rule.get("resources") or []:
            for n in names:
                for v in verbs:
                    a = {"apiGroups": [g], "resources": [r], "verbs": [v]}
                    if n is not None:
                        a["resourceNames"] = [n]
                    out.append(a)
    return out


def _covers(owner, sub):
    for o in owner:
        vs = o.get("verbs") or []
        if not ("*" in vs or sub["verbs"][0] in vs):
            continue
        if "nonResourceURLs" in sub:
            u = sub["nonResourceURLs"][0]
            if any(x == "*" or x == u or (x.endswith("*") and u.startswith(x[:-1]))
                   for x in o.get("nonResourceURLs") or []):
                return True
            continue
        gs = o.get("apiGroups") or []
        if not ("*" in gs or sub["apiGroups"][0] in gs):
            continue
        r = sub["resources"][0]
        rs = o.get("resources") or []
        sr = r.split("/", 1)
        if not ("*" in rs or r in rs or (len(sr) == 2 and "*/" + sr[1] in rs)):
            continue
        ons = o.get("resourceNames") or []
        if ons and not (sub.get("resourceNames") and sub["resourceNames"][0] in ons):
            continue
        return True
    return False


def _go_q(items):
    import json
    return "[" + " ".join(json.dumps(i) for i in items) + "]"


def compact(rule):
    parts = []
    for key, label in (("apiGroups", "APIGroups"), ("resources", "Resources"),
                       ("nonResourceURLs", "NonResourceURLs"), ("resourceNames", "ResourceNames"),
                       ("verbs", "Verbs")):
        if rule.get(key):
            parts.append("%s:%s" % (label, _go_q(rule[key])))
    return "{" + ", ".join(parts) + "}"


def check_escalation(authz, user, groups, kind, ns, obj, request_name):
    """The RBAC API's escalation prevention: a Role/ClusterRole may only grant what its writer
    holds (unless the writer may 'escalate'); a binding only to a role whose permissions the
    writer holds (unless the writer may 'bind' it). Returns None or an ApiError.

    'escalate' is asked for the name in the request's path (request_name), as the real API server
    does: a create (POST) has none, so 'escalate' limited by resourceNames does not let a POST
    grant more than the writer holds, while a PUT to the name (roles allow create on update) or a
    patch does. 'bind' is asked for the name of the role referred to."""
    from . import errors
    if "system:masters" in groups:
        return None
    md = obj.get("metadata") or {}
    name = md.get("name", "")
    plural = {"Role": "roles", "ClusterRole": "clusterroles", "RoleBinding": "rolebindings",
              "ClusterRoleBinding": "clusterrolebindings"}[kind]
    scope_ns = ns if kind in ("Role", "RoleBinding") else ""
    if kind in ("Role", "ClusterRole"):
        ok, _ = authz.authorize(Attrs(user, groups, "escalate", True, "rbac.authorization.k8s.io", plural, "",
                                      scope_ns, request_name or ""))
        if ok:
            return None
        wanted = obj.get("rules") or []
    else:
        ref = obj.get("roleRef") or {}
        rplural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        ok, _ = authz.authorize(Attrs(user, groups, "bind", True, "rbac.authorization.k8s.io", rplural, "",
                                      scope_ns, ref.get("name", "")))
        if ok:
            return None
        errs = []
        with authz.store.lock:
            if ref.get("kind") == "ClusterRole":
                if ("", ref.get("name")) not in authz._objs("rbac.authorization.k8s.io", "clusterroles"):
                    return errors.not_found("rbac.authorization.k8s.io", "clusterroles", ref.get("name", ""))
            elif (scope_ns, ref.get("name")) not in authz._objs("rbac.authorization.k8s.io", "roles"):
                return errors.not_found("rbac.authorization.k8s.io", "roles", ref.get("name", ""))
            wanted = authz._role_rules({"roleRef": ref, "metadata": {"namespace": scope_ns}}, errs)
    owner = rules_for(authz, user, groups, scope_ns)
    missing = []
    for r in wanted:
        for a in _atomic(r):
            if not _covers(owner, a) and a not in missing:
                missing.append(a)
    if not missing:
        return None
    msg = 'user "%s" (groups=%s) is attempting to grant RBAC permissions not currently held:\n%s' % (
        user, _go_q(groups), "\n".join(compact(m) for m in missing))
    return errors.forbidden("rbac.authorization.k8s.io", plural, name, msg)
