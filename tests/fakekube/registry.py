"""Which resource types exist (built-in and from CRDs) and the discovery documents for them."""
import hashlib
import threading

from .kinds import RType, builtin_types, name_subdomain


class Registry:
    def __init__(self):
        self.lock = threading.Lock()
        self.types = {}       # (group, plural) -> RType
        for t in builtin_types():
            self.types[t.key] = t

    def lookup(self, group, version, plural):
        with self.lock:
            t = self.types.get((group, plural))
        if t is None or version not in t.versions:
            return None
        return t

    def by_kind(self, api_version, kind):
        group, _, version = api_version.rpartition("/")
        with self.lock:
            for t in self.types.values():
                if t.group == group and t.kind == kind and version in t.versions:
                    return t
        return None

    def all(self):
        with self.lock:
            return list(self.types.values())

    # --- CRDs ------------------------------------------------------------------------------

    def register_crd(self, crd):
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        vers = [v for v in spec.get("versions") or [] if v.get("served", True)]
        storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), None)
        if not vers or not storage:
            return None
        sv = next((v for v in spec.get("versions") or [] if v.get("storage")), {})
        subs = (sv.get("subresources") or {})
        sub = []
        if "status" in subs:
            sub.append("status")
        if "scale" in subs:
            sub.append("scale")
        t = RType(spec.get("group", ""), storage, names.get("plural", ""), names.get("kind", ""),
                  spec.get("scope") == "Namespaced", singular=names.get("singular") or names.get("kind", "").lower(),
                  short=names.get("shortNames") or [], categories=names.get("categories") or [], sub=sub,
                  generation=True, name_check=name_subdomain, crd=crd, versions=[v["name"] for v in vers])
        with self.lock:
            old = self.types.get(t.key)
            if old is not None and old.crd is None:
                return None  # a CRD may not shadow a built-in type
            self.types[t.key] = t
        return t

    def unregister_crd(self, crd):
        spec = crd.get("spec") or {}
        key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        with self.lock:
            t = self.types.get(key)
            if t is not None and t.crd is not None:
                del self.types[key]

    # --- discovery -------------------------------------------------------------------------

    def groups(self):
        """[(group, [versions], preferred)] in a stable order: built-in groups first."""
        seen = {}
        order = []
        for t in self.all():
            if t.group == "":
                continue
            if t.group not in seen:
                seen[t.group] = []
                order.append(t.group)
            for v in t.versions:
                if v not in seen[t.group]:
                    seen[t.group].append(v)
        out = []
        for g in order:
            vs = sorted(seen[g], key=_version_priority)
            out.append((g, vs, vs[0]))
        return out

    def api_group(self, name):
        for g, vs, pref in self.groups():
            if g == name:
                return {"name": g, "versions": [{"groupVersion": g + "/" + v, "version": v} for v in vs],
                        "preferredVersion": {"groupVersion": g + "/" + pref, "version": pref}}
        return None

    def resource_list(self, group, version):
        res = []
        for t in self.all():
            if t.group != group or version not in t.versions:
                continue
            e = {"name": t.plural, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind,
                 "verbs": list(t.verbs)}
            if t.short:
                e["shortNames"] = list(t.short)
            if t.categories:
                e["categories"] = list(t.categories)
            e["storageVersionHash"] = hashlib.sha256(("%s/%s/%s" % (t.group, t.version, t.kind)).encode()) \
                .digest()[:8].hex()
            res.append(e)
            for s in sorted(t.sub):
                if s == "scale":
                    res.append({"name": t.plural + "/scale", "singularName": "", "namespaced": t.namespaced,
                                "group": "autoscaling", "version": "v1", "kind": "Scale",
                                "verbs": ["get", "patch", "update"]})
                elif s == "token":
                    res.append({"name": t.plural + "/token", "singularName": "", "namespaced": t.namespaced,
                                "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
                                "verbs": ["create"]})
                elif s == "eviction":
                    res.append({"name": t.plural + "/eviction", "singularName": "", "namespaced": t.namespaced,
                                "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
                elif s == "finalize":
                    res.append({"name": t.plural + "/finalize", "singularName": "", "namespaced": t.namespaced,
                                "kind": t.kind, "verbs": ["update"]})
                else:
                    res.append({"name": t.plural + "/" + s, "singularName": "", "namespaced": t.namespaced,
                                "kind": t.kind, "verbs": ["get", "patch", "update"]})
        if not res:
            return None
        gv = group + "/" + version if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}


_QP = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
       for n in ("dryRun", "fieldManager", "fieldValidation", "pretty")]


def openapi_doc(reg, group, version):
    """A minimal OpenAPI v3 document for one group version: the operations with their GVK
    extension and query parameters (kubectl decides from these that the server validates
    fields itself), and object schemas only for custom resources."""
    paths = {}
    schemas = {}
    for t in reg.all():
        if t.group != group or version not in t.versions:
            continue
        gvk = {"group": group, "version": version, "kind": t.kind}
        base = ("/api/" + version) if not group else "/apis/%s/%s" % (group, version)
        coll = base + ("/namespaces/{namespace}/" if t.namespaced else "/") + t.plural
        op = lambda action: {"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
                             "parameters": list(_QP), "responses": {"200": {"description": "OK"}}}
        paths[coll] = {"get": op("list"), "post": op("post")}
        if "delete" in t.verbs:
            paths[coll + "/{name}"] = {"get": op("get"), "put": op("put"), "patch": op("patch"),
                                        "delete": op("delete")}
        for s in t.sub:
            if s == "token":
                paths[coll + "/{name}/token"] = {"post": op("post")}
                continue
            paths[coll + "/{name}/" + s] = {"get": op("get"), "put": op("put"), "patch": op("patch")}
        if t.crd is not None:
            from .schema import schema_for
            sc = dict(schema_for(t, version))
            sc["x-kubernetes-group-version-kind"] = [gvk]
            schemas["%s.%s.%s" % (".".join(reversed(group.split("."))), version, t.kind)] = sc
    if not paths:
        return None
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths,
            "components": {"schemas": schemas}}


def openapi_index(reg):
    import json
    out = {}
    gvs = [("", "v1")] + [(g, v) for g, vs, _ in reg.groups() for v in vs]
    for g, v in gvs:
        doc = openapi_doc(reg, g, v)
        if doc is None:
            continue
        h = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()
        key = "api/" + v if not g else "apis/%s/%s" % (g, v)
        out[key] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (key, h)}
    return {"paths": out}


def _version_priority(v):
    """Kubernetes version ordering: GA before beta before alpha, higher numbers first."""
    import re
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", v)
    if not m:
        return (3, 0, 0, v)
    major = int(m.group(1))
    kind = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (kind, -major, -minor, v)
