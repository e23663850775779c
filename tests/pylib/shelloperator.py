"""A harness that runs a hook as addon-operator (shell-operator) does: `HOOK --config` gives its
bindings; each run gets the binding contexts in BINDING_CONTEXT_PATH, the values in VALUES_PATH
and CONFIG_VALUES_PATH, and leaves JSON patches of the values in VALUES_JSON_PATCH_PATH and
Kubernetes operations in KUBERNETES_PATCH_PATH. The contexts are made from what a Kubernetes API
server (the fake one) holds for each binding: Synchronization lists, Events of one object,
snapshots for includeSnapshotsFrom and for beforeHelm; the Kubernetes operations are carried
out against that server."""
import copy
import json
import os
import subprocess
import tempfile

# Collection paths of the kinds the module's hooks watch or write (apiVersion, kind).
PLURALS = {("v1", "Secret"): "secrets", ("v1", "Node"): "nodes",
           ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "customresourcedefinitions",
           ("deckhouse.io/v1", "CloudnodeInstanceClass"): "cloudnodeinstanceclasses",
           ("deckhouse.io/v1", "NodeGroup"): "nodegroups"}
NAMESPACED = {"Secret"}


def collection(api_version, kind, namespace=None):
    base = "/api/v1" if api_version == "v1" else "/apis/" + api_version
    plural = PLURALS[(api_version, kind)]
    if kind in NAMESPACED:
        return "%s/namespaces/%s/%s" % (base, namespace, plural)
    return "%s/%s" % (base, plural)


def label_selector(sel):
    parts = ["%s=%s" % kv for kv in sorted((sel or {}).get("matchLabels", {}).items())]
    for e in (sel or {}).get("matchExpressions", []):
        if e["operator"] == "Exists":
            parts.append(e["key"])
        elif e["operator"] == "DoesNotExist":
            parts.append("!" + e["key"])
        else:
            parts.append("%s %s (%s)" % (e["key"], e["operator"].lower(), ",".join(e["values"])))
    return ",".join(parts)


class Hook:
    def __init__(self, path, kube, env=None):
        self.path = path
        self.kube = kube
        self.env = dict(os.environ, **(env or {}))
        r = subprocess.run([path, "--config"], capture_output=True, text=True, env=self.env, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("%s --config: %s" % (path, r.stderr))
        self.config = json.loads(r.stdout)
        self.bindings = {b["name"]: b for b in self.config.get("kubernetes", [])}

    # --- binding contexts from the server ----------------------------------------------------

    def objects(self, name):
        """What the server holds for binding name, as shell-operator lists it."""
        b = self.bindings[name]
        namespaces = (b.get("namespace") or {}).get("nameSelector", {}).get("matchNames") or [None]
        names = (b.get("nameSelector") or {}).get("matchNames")
        out = []
        for ns in namespaces:
            path = collection(b["apiVersion"], b["kind"], ns)
            sel = label_selector(b.get("labelSelector"))
            if sel:
                from urllib.parse import quote
                path += "?labelSelector=" + quote(sel)
            st, r = self.kube.api("GET", path)
            if st != 200:
                raise RuntimeError("list %s: %s %s" % (path, st, r))
            for o in r["items"]:
                o.setdefault("apiVersion", b["apiVersion"])
                o.setdefault("kind", b["kind"])
                if names is None or o["metadata"]["name"] in names:
                    out.append(o)
        return sorted(out, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def _snapshots(self, names):
        return {n: [{"object": o} for o in self.objects(n)] for n in names}

    def _with_snapshots(self, ctx, name):
        inc = self.bindings[name].get("includeSnapshotsFrom")
        if inc:
            ctx["snapshots"] = self._snapshots(inc)
        return ctx

    def synchronization(self, name):
        return self._with_snapshots({"binding": name, "type": "Synchronization",
                                     "objects": [{"object": o} for o in self.objects(name)]}, name)

    def event(self, name, watch_event, obj):
        return self._with_snapshots({"binding": name, "type": "Event", "watchEvent": watch_event,
                                     "object": obj}, name)

    def before_helm(self):
        return {"binding": "beforeHelm", "snapshots": self._snapshots(self.bindings)}

    # --- running -----------------------------------------------------------------------------

    def run(self, contexts, values=None, config_values=None, raw_contexts=None):
        """Runs the hook once: (exit status, stderr, values patch or None, Kubernetes operations or
        None); None where the hook left its output file untouched."""
        with tempfile.TemporaryDirectory(prefix="cn-hook-") as d:
            files = {}
            for var, content in (("BINDING_CONTEXT_PATH", raw_contexts if raw_contexts is not None
                                  else json.dumps(contexts)),
                                 ("VALUES_PATH", json.dumps(values or {})),
                                 ("CONFIG_VALUES_PATH", json.dumps(config_values or {}))):
                files[var] = os.path.join(d, var.lower())
                with open(files[var], "w") as f:
                    f.write(content)
            for var in ("VALUES_JSON_PATCH_PATH", "CONFIG_VALUES_JSON_PATCH_PATH", "KUBERNETES_PATCH_PATH"):
                files[var] = os.path.join(d, var.lower())
                # addon-operator creates them empty; a hook that fails must leave them so.
                open(files[var], "w").close()
            r = subprocess.run([self.path], capture_output=True, text=True, env=dict(self.env, **files), timeout=30)
            out = {}
            for var in ("VALUES_JSON_PATCH_PATH", "KUBERNETES_PATCH_PATH"):
                with open(files[var]) as f:
                    out[var] = f.read()
            vp = json.loads(out["VALUES_JSON_PATCH_PATH"]) if out["VALUES_JSON_PATCH_PATH"].strip() else None
            kp = ([json.loads(line) for line in out["KUBERNETES_PATCH_PATH"].splitlines() if line.strip()]
                  if out["KUBERNETES_PATCH_PATH"].strip() else None)
            return r.returncode, r.stderr, vp, kp

    def apply_kubernetes(self, ops):
        """Carries out shell-operator's operations (CreateOrUpdate, MergePatch) on the server."""
        for op in ops or []:
            if op["operation"] == "CreateOrUpdate":
                o = op["object"]
                md = o["metadata"]
                path = collection(o["apiVersion"], o["kind"], md.get("namespace"))
                st, r = self.kube.api("POST", path, o)
                if st == 409:
                    st, cur = self.kube.api("GET", path + "/" + md["name"])
                    o = dict(o, metadata=dict(md, resourceVersion=cur["metadata"]["resourceVersion"]))
                    st, r = self.kube.api("PUT", path + "/" + md["name"], o)
            elif op["operation"] == "MergePatch":
                path = "%s/%s" % (collection(op["apiVersion"], op["kind"], op.get("namespace")), op["name"])
                if op.get("subresource"):
                    path += "/" + op["subresource"]
                st, r = self.kube.api("PATCH", path, op["mergePatch"], content_type="application/merge-patch+json")
            else:
                raise ValueError("operation %r" % op["operation"])
            if st not in (200, 201):
                raise RuntimeError("%s: %s %s" % (op["operation"], st, r))


def apply_values_patch(values, patch):
    """values after the JSON patch (the add and remove operations addon-operator's hooks use)."""
    out = copy.deepcopy(values)
    for op in patch or []:
        keys = op["path"].lstrip("/").split("/")
        parent = out
        for k in keys[:-1]:
            parent = parent.setdefault(k, {})
        if op["op"] == "add":
            parent[keys[-1]] = op["value"]
        elif op["op"] == "remove":
            del parent[keys[-1]]
        else:
            raise ValueError("op %r" % op["op"])
    return out
