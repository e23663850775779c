"""HTTP side of the fake API server: TLS, authentication, request info, authorization,
discovery, the REST verbs, watch streams, fault injection, the audit log and the admin
endpoints under /fakekube/ (reachable only for the group system:masters)."""
import argparse
import base64
import datetime
import json
import os
import random
import secrets
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from . import certs, errors, eviction, openapiv2, patch as patchmod, proto, scale, table, tokenrequest
from .admission import admit
from .errors import ApiError
from .rbac import BOOTSTRAP, Attrs, Authorizer, check_escalation, forbidden_message, rules_for
from .registry import Registry, openapi_doc, openapi_index
from .selection import parse_field_selector, parse_label_selector
from .store import REQ, Store, deep, node_ready, not_ready_taint, now_iso

MAX_BODY = 3 * 1024 * 1024
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml")
PROTOBUF = "application/vnd.kubernetes.protobuf"


def accept_clauses(header):
    """The clauses (type, subtype, q, params) of an Accept header in the order the real server
    tries them: goautoneg.ParseAccept's parsing, and its sort (higher q first, and a clause without
    wildcards before one with) done as Go's sort does short slices, by insertion."""
    out = []
    for part in header.split(","):
        part = part.strip(" ")
        mtype, _, rest = part.partition(";")
        t, slash, sub = mtype.partition("/")
        t = t.strip(" ")
        if not slash:
            if t != "*":
                continue
            sub = "*"
        elif "/" in sub:
            continue
        q, params = 1.0, {}
        for p in rest.split(";") if rest else []:
            k, eq, v = p.partition("=")
            if not eq or "=" in v:
                continue
            k = k.strip(" ")
            if k == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
            else:
                params[k] = v.strip(" ")
        out.append((t, sub.strip(" "), q, params))

    def less(a, b):
        return a[2] > b[2] or (a[0] != "*" and b[0] == "*") or (a[1] != "*" and b[1] == "*")
    for i in range(1, len(out)):
        j = i
        while j > 0 and less(out[j], out[j - 1]):
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return out


def negotiate(header, protobuf=True):
    """(media type, params) of the answer to this Accept header as the real server picks it from
    JSON, YAML and, for built-in kinds (protobuf=True), the Kubernetes protobuf encoding; None when
    nothing offered is acceptable (406). `*/*` and `application/*` get JSON, an empty header too."""
    offered = ["application/json", "application/yaml"] + ([PROTOBUF] if protobuf else [])
    if not header:
        return offered[0], {}
    for t, sub, _, params in accept_clauses(header):
        for mt in offered:
            mt_t, mt_sub = mt.split("/")
            if not ((t == mt_t and sub in (mt_sub, "*")) or (t == "*" and sub == "*")):
                continue
            if params.get("stream") and (params["stream"] != "watch" or mt == "application/yaml"):
                continue  # no such stream form of this type
            return mt, params
    return None


def _yaml():
    try:
        import yaml
        return yaml
    except ImportError:
        return None


class Faults:
    """Injected failures. Each rule matches requests by any of verb, resource, subresource,
    name, namespace, user, apiGroup, path (prefix), and does one action:
      {"code": 503, "retryAfter": 2, "message": "..."}   fail with that status
      {"action": "conflict"}                             409 Conflict as for a stale resourceVersion
      {"latency": 0.5}                                   delay the request (seconds), then serve it
      {"action": "close-watch", "afterEvents": N}        end matching watches after N events
      {"action": "abort-watch", "afterEvents": N}        drop the connection after N events
      {"action": "gone"}                                 next matching watch gets a 410 ERROR event
      {"action": "bookmark", "interval": S}              send BOOKMARKs every S seconds
      {"action": "reset-after-commit", "hold": S}        serve the request (the write is done), hold
                                                         the answer S seconds, then reset the connection
      {"action": "body", "body": "TEXT"}                 serve the request, answer TEXT as its body
      {"action": "cut-body", "afterBytes": N}            serve the request, send N bytes of the body
                                                         (headers announce all), then reset the connection
    "count": N applies the rule to the next N matching requests (default 1, -1 = forever),
    after passing over the first "skip" matching ones (default 0)."""

    KEYS = ("verb", "resource", "subresource", "name", "namespace", "user", "apiGroup", "path")

    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.next_id = 1

    def add(self, rule):
        if not isinstance(rule, dict):
            raise errors.bad_request("a fault must be a JSON object")
        rule = dict(rule)
        if "code" not in rule and "latency" not in rule and "action" not in rule:
            raise errors.bad_request("a fault needs code, latency or action")
        if rule.get("action") not in (None, "conflict", "close-watch", "abort-watch", "gone", "bookmark",
                                      "reset-after-commit", "body", "cut-body"):
            raise errors.bad_request("unknown fault action %r" % rule.get("action"))
        if not isinstance(rule.get("skip", 0), int) or rule.get("skip", 0) < 0:
            raise errors.bad_request("skip must be a non-negative integer")
        rule.setdefault("count", 1)
        with self.lock:
            rule["id"] = self.next_id
            self.next_id += 1
            self.rules.append(rule)
        return rule

    def list(self):
        with self.lock:
            return [dict(r) for r in self.rules]

    def clear(self):
        with self.lock:
            self.rules = []

    def take(self, info, user, kinds):
        """Returns the rules of the given kinds that match, consuming one count of each."""
        out = []
        with self.lock:
            for r in list(self.rules):
                kind = r.get("action") or ("latency" if "latency" in r and "code" not in r else "error")
                if kind not in kinds:
                    continue
                if not self._matches(r, info, user):
                    continue
                if r.get("skip"):
                    r["skip"] -= 1
                    continue
                out.append(dict(r))
                if r["count"] > 0:
                    r["count"] -= 1
                    if r["count"] == 0:
                        self.rules.remove(r)
        return out

    @staticmethod
    def _matches(r, info, user):
        vals = {"verb": info.verb, "resource": info.resource, "subresource": info.subresource, "name": info.name,
                "namespace": info.namespace, "user": user, "apiGroup": info.group}
        for k in Faults.KEYS:
            if k not in r:
                continue
            if k == "path":
                if not info.path.startswith(r[k]):
                    return False
            elif vals[k] != r[k]:
                return False
        return True


class ReqInfo:
    def __init__(self):
        self.resource_request = False
        self.verb = ""
        self.group = ""
        self.version = ""
        self.resource = ""
        self.subresource = ""
        self.namespace = ""
        self.name = ""
        self.path = ""
        self.legacy_watch = False


def request_info(method, path, query):
    ri = ReqInfo()
    ri.path = path
    m = method.lower()
    # Segments are percent-decoded as Go's net/http does for the real server ("cloudnode%3Ax").
    parts = [unquote(p) for p in path.strip("/").split("/") if p != ""] if path != "/" else []
    if not parts or parts[0] not in ("api", "apis"):
        ri.verb = m if m != "head" else "get"
        return ri
    if parts[0] == "api":
        if len(parts) < 2:
            ri.verb = m
            return ri
        ri.group, ri.version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 3:
            ri.verb = m
            return ri
        ri.group, ri.version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        ri.verb = m
        return ri
    ri.resource_request = True
    if rest[0] == "watch":
        ri.legacy_watch = True
        rest = rest[1:]
    if len(rest) >= 2 and rest[0] == "namespaces":
        ri.namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    if rest:
        ri.resource = rest[0]
    if len(rest) >= 2:
        ri.name = rest[1]
    if len(rest) >= 3:
        ri.subresource = rest[2]
    if len(rest) > 3:
        ri.subresource = "/".join(rest[2:])
    watch = ri.legacy_watch or query.get("watch", [""])[0] in ("1", "true", "True")
    if m in ("get", "head"):
        if ri.name:
            ri.verb = "watch" if watch else "get"
        else:
            ri.verb = "watch" if watch else "list"
            # As the real RequestInfoFactory: a list selecting one name is authorized for that name.
            fs = query.get("fieldSelector", [""])[0]
            try:
                for f, op, v in parse_field_selector(fs):
                    if f == "metadata.name" and op == "=":
                        ri.name = v
            except ApiError:
                pass
    elif m == "post":
        ri.verb = "create"
    elif m == "put":
        ri.verb = "update"
    elif m == "patch":
        ri.verb = "patch"
    elif m == "delete":
        ri.verb = "delete" if ri.name else "deletecollection"
    else:
        ri.verb = m
    return ri


class State:
    def __init__(self, opts):
        self.opts = opts
        self.registry = Registry()
        self.store = Store(self.registry, history=opts.watch_history)
        self.authz = Authorizer(self.store, self.registry)
        self.faults = Faults()
        self.tokens = {}
        self.tokens_lock = threading.Lock()
        self.bound_tokens = tokenrequest.BoundTokens()
        self.audit_lock = threading.Lock()
        self.audit_f = None
        self.url = ""
        self.host_port = ""
        self.store.on_change.append(self._controllers)
        self.store.admission = self._admit

    def _admit(self, op, rt, sub, ns, name, obj, old, dry_run):
        ident = getattr(REQ, "ident", None)
        if ident is None:
            return  # writes by the fake's own controllers
        admit(self.store, op, rt, sub, ns, name, obj, old, ident[0], ident[1], dry_run)

    # --- identities ------------------------------------------------------------------------

    def add_token(self, token, user, groups):
        with self.tokens_lock:
            self.tokens[token] = (user, list(groups))

    def identity(self, user, groups):
        groups = list(groups)
        if user.startswith("system:serviceaccount:"):
            parts = user.split(":")
            if len(parts) == 4:
                for g in ("system:serviceaccounts", "system:serviceaccounts:" + parts[2]):
                    if g not in groups:
                        groups.append(g)
        if user != "system:anonymous" and "system:authenticated" not in groups:
            groups.append("system:authenticated")
        return user, groups

    # --- audit -----------------------------------------------------------------------------

    def audit(self, rec):
        line = json.dumps(rec, separators=(",", ":")) + "\n"
        with self.audit_lock:
            self.audit_f.write(line)
            self.audit_f.flush()

    # --- controllers (what kube-controller-manager and apiextensions would do) -------------

    def _controllers(self, rt, type_, obj, prev):
        key = rt.key
        if key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            if type_ == "DELETED":
                self.registry.unregister_crd(obj)
                spec = obj.get("spec") or {}
                self.store.close_watchers((spec.get("group", ""), (spec.get("names") or {}).get("plural", "")))
            else:
                self.registry.register_crd(obj)
                _later(lambda: self._crd_status(obj["metadata"]["name"]))
                if obj["metadata"].get("deletionTimestamp"):
                    _later(lambda: self._crd_cleanup(obj))
        elif key == ("", "namespaces"):
            if type_ != "DELETED" and obj["metadata"].get("deletionTimestamp"):
                _later(lambda: self._ns_cleanup(obj["metadata"]["name"]))
        elif key == ("", "nodes") and type_ != "DELETED" and node_ready(obj) and not_ready_taint(obj):
            _later(lambda: self._node_untaint(obj["metadata"]["name"]))
        md0 = (obj or {}).get("metadata") or {}
        fins = md0.get("finalizers") or []
        if type_ == "DELETED" or "foregroundDeletion" in fins or "orphan" in fins:
            _later(lambda: self._gc(obj, type_))
        if type_ == "DELETED" and md0.get("ownerReferences"):
            _later(lambda: self._gc_owners_of(obj))
        if type_ == "DELETED" or (obj and obj["metadata"].get("deletionTimestamp")):
            md = (obj or {}).get("metadata") or {}
            if rt.crd is not None:
                crd = self.store.objects[("apiextensions.k8s.io", "customresourcedefinitions")].get(
                    ("", rt.plural + "." + rt.group))
                if crd and crd["metadata"].get("deletionTimestamp"):
                    _later(lambda: self._crd_cleanup(crd))
            if rt.namespaced and md.get("namespace"):
                nso = self.store.objects[("", "namespaces")].get(("", md["namespace"]))
                if nso and nso["metadata"].get("deletionTimestamp"):
                    _later(lambda: self._ns_cleanup(md["namespace"]))

    def _node_untaint(self, name):
        """The node lifecycle controller: once a Node reports Ready, the not-ready taint the API
        server gave it at creation (store.taint_not_ready) goes."""
        def fn(o):
            if node_ready(o):
                o["spec"]["taints"] = [t for t in o["spec"]["taints"] if t is not not_ready_taint(o)]
            o["metadata"].pop("resourceVersion", None)
            return o
        try:
            self.store.update(self.registry.lookup("", "v1", "nodes"), "", name, fn)
        except ApiError:
            pass

    # --- garbage collector: ownerReferences and propagation policies ------------------------

    def _dependents(self, uid):
        out = []
        with self.store.lock:
            for rt in self.registry.all():
                for (ns, name), o in self.store.objects[rt.key].items():
                    refs = (o.get("metadata") or {}).get("ownerReferences") or []
                    if any(r.get("uid") == uid for r in refs):
                        out.append((rt, ns, name, o))
        return out

    def _owner_exists(self, ref, ns):
        with self.store.lock:
            for rt in self.registry.all():
                if rt.kind != ref.get("kind") or rt.api_version() != ref.get("apiVersion"):
                    continue
                o = self.store.objects[rt.key].get((ns if rt.namespaced else "", ref.get("name")))
                if o is not None and o["metadata"].get("uid") == ref.get("uid"):
                    return True
        return False

    def _drop_owner_ref(self, rt, ns, name, uid):
        def mut(o):
            md = o["metadata"]
            md["ownerReferences"] = [r for r in md.get("ownerReferences") or [] if r.get("uid") != uid]
            md.pop("resourceVersion", None)
            return o
        try:
            self.store.update(rt, ns, name, mut)
        except ApiError:
            pass

    def _gc(self, owner, type_):
        """Deletes (Background, Foreground) or releases (Orphan) the dependents of owner, then
        removes the owner's foregroundDeletion/orphan finalizer."""
        md = owner["metadata"]
        uid = md.get("uid")
        orphan = type_ != "DELETED" and "orphan" in (md.get("finalizers") or [])
        for rt, ns, name, dep in self._dependents(uid):
            refs = dep["metadata"].get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != uid and self._owner_exists(r, ns)]
            if orphan or others:
                self._drop_owner_ref(rt, ns, name, uid)
                continue
            try:
                self.store.delete(rt, ns, name, {"propagationPolicy": "Foreground"} if type_ != "DELETED" else {})
            except ApiError:
                pass
        if type_ == "DELETED":
            return
        rt = self.registry.by_kind(owner.get("apiVersion", ""), owner.get("kind", ""))
        if rt is None:
            return
        ns = md.get("namespace", "")
        if orphan:
            self.store.remove_finalizer(rt, ns, md["name"], "orphan")
        elif not any(any(r.get("uid") == uid and r.get("blockOwnerDeletion")
                         for r in d[3]["metadata"].get("ownerReferences") or []) for d in self._dependents(uid)):
            self.store.remove_finalizer(rt, ns, md["name"], "foregroundDeletion")

    def _gc_owners_of(self, dep):
        """A dependent went away: an owner waiting in foreground deletion may now finish."""
        ns = dep["metadata"].get("namespace", "")
        for ref in dep["metadata"].get("ownerReferences") or []:
            rt = self.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
            if rt is None:
                continue
            with self.store.lock:
                o = self.store.objects[rt.key].get((ns if rt.namespaced else "", ref.get("name")))
            if o is not None and "foregroundDeletion" in (o["metadata"].get("finalizers") or []):
                self._gc(o, "MODIFIED")

    def _crd_status(self, name):
        crd_rt = self.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")

        def fn(o):
            spec = o.get("spec") or {}
            st = o.setdefault("status", {})
            names = dict(spec.get("names") or {})
            names.setdefault("singular", names.get("kind", "").lower())
            names.setdefault("listKind", names.get("kind", "") + "List")
            st["acceptedNames"] = names
            storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), None)
            stored = list(st.get("storedVersions") or [])
            if storage and storage not in stored:
                stored.append(storage)
            st["storedVersions"] = stored
            conds = {c.get("type"): c for c in st.get("conditions") or []}
            for t, reason, msg in (("NamesAccepted", "NoConflicts", "no conflicts found"),
                                   ("Established", "InitialNamesAccepted", "the initial names have been accepted")):
                if conds.get(t, {}).get("status") != "True":
                    conds[t] = {"type": t, "status": "True", "lastTransitionTime": now_iso(), "reason": reason,
                                "message": msg}
            if o["metadata"].get("deletionTimestamp"):
                if conds.get("Terminating", {}).get("status") != "True":
                    conds["Terminating"] = {"type": "Terminating", "status": "True",
                                            "lastTransitionTime": now_iso(), "reason": "InstanceDeletionInProgress",
                                            "message": "CustomResource deletion is in progress"}
            st["conditions"] = list(conds.values())
        try:
            self.store.set_status(crd_rt, "", name, fn)
        except ApiError:
            pass

    def _crd_cleanup(self, crd):
        spec = crd.get("spec") or {}
        storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), "")
        rt = self.registry.lookup(spec.get("group", ""), storage, (spec.get("names") or {}).get("plural", ""))
        remaining = 0
        if rt is not None:
            with self.store.lock:
                keys = list(self.store.objects[rt.key].keys())
            for ns, name in keys:
                try:
                    _, gone = self.store.delete(rt, ns, name)
                    remaining += 0 if gone else 1
                except ApiError:
                    pass
        if remaining == 0:
            crd_rt = self.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            self.store.remove_finalizer(crd_rt, "", crd["metadata"]["name"],
                                        "customresourcecleanup.apiextensions.k8s.io")

    def _ns_cleanup(self, ns):
        remaining = 0
        for rt in self.registry.all():
            if not rt.namespaced:
                continue
            with self.store.lock:
                keys = [k for k in self.store.objects[rt.key].keys() if k[0] == ns]
            for _, name in keys:
                try:
                    _, gone = self.store.delete(rt, ns, name, {"gracePeriodSeconds": 0})
                    remaining += 0 if gone else 1
                except ApiError:
                    pass
        if remaining:
            return
        ns_rt = self.registry.lookup("", "v1", "namespaces")

        def fin(o):
            o["spec"] = dict(o.get("spec") or {}, finalizers=[])
            o["metadata"].pop("resourceVersion", None)
            return o
        try:
            cur = self.store.get(ns_rt, "", ns)
            if (cur.get("spec") or {}).get("finalizers"):
                self.store.update(ns_rt, "", ns, fin, subresource="finalize")
            self.store.delete(ns_rt, "", ns)
            with self.store.lock:
                cur = self.store.objects[ns_rt.key].get(("", ns))
                if cur is not None and not cur["metadata"].get("finalizers") \
                        and not (cur.get("spec") or {}).get("finalizers"):
                    self.store._commit(ns_rt, "DELETED", ("", ns), None, cur)
        except ApiError:
            pass

    # --- bootstrap -------------------------------------------------------------------------

    def load_object(self, obj, rbac_only=False):
        kind = obj.get("kind", "")
        if kind == "List":
            for it in obj.get("items") or []:
                self.load_object(it, rbac_only)
            return
        if rbac_only and kind not in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
            return
        rt = self.registry.by_kind(obj.get("apiVersion", ""), kind)
        if rt is None:
            raise RuntimeError("unknown kind %s %s" % (obj.get("apiVersion"), kind))
        ns = (obj.get("metadata") or {}).get("namespace") or ("default" if rt.namespaced else "")
        if rt.namespaced and ("", ns) not in self.store.objects[("", "namespaces")]:
            self.store.create(self.registry.lookup("", "v1", "namespaces"), "",
                              {"metadata": {"name": ns}})
        name = (obj.get("metadata") or {}).get("name")
        if name and (ns if rt.namespaced else "", name) in self.store.objects[rt.key]:
            self.store.update(rt, ns if rt.namespaced else "", name,
                              lambda cur: dict(deep(obj), metadata=dict(deep(obj).get("metadata") or {},
                                                                        resourceVersion=None)))
        else:
            self.store.create(rt, ns if rt.namespaced else "", obj)

    def load_file(self, path, rbac_only=False):
        with open(path) as f:
            text = f.read()
        docs = []
        if path.endswith(".json"):
            docs = [json.loads(text)]
        else:
            y = _yaml()
            if y is None:
                raise RuntimeError("%s: reading YAML needs python3-yaml" % path)
            docs = [d for d in y.safe_load_all(text) if d]
        for d in docs:
            self.load_object(d, rbac_only)


def _later(fn, delay=0.01):
    t = threading.Timer(delay, fn)
    t.daemon = True
    t.start()


def _rfc3339_micro(when=None):
    t = datetime.datetime.now(datetime.timezone.utc) if when is None else \
        datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Closed(Exception):
    pass


class _ResponseDropped(OSError):
    """A reset-after-commit fault took the answer of a request that was served."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.dispatch("GET")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_OPTIONS(self):
        self.dispatch("OPTIONS")

    # --- plumbing --------------------------------------------------------------------------

    @property
    def st(self):
        return self.server.state

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = b""
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                out += self.rfile.read(size)
                self.rfile.readline(65537)
                if len(out) > MAX_BODY:
                    raise ApiError(413, "RequestEntityTooLarge", "the request is too large")
            return out
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.close_connection = True
            raise ApiError(413, "RequestEntityTooLarge", "the request is too large")
        return self.rfile.read(n) if n else b""

    def send_body(self, code, body, ctype="application/json", headers=None):
        if self.drop_response:
            self.drop_answer(code)
        rule, self.body_fault = self.body_fault, None
        if rule and rule["action"] == "body":
            body = str(rule.get("body", "")).encode()
        self.send_response(code)
        self.send_header("Audit-Id", self.audit_id)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        for w in getattr(REQ, "warnings", None) or []:
            self.send_header("Warning", '299 - %s' % json.dumps(w))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if rule and rule["action"] == "cut-body":
            self.wfile.write(body[:int(rule.get("afterBytes") or 0)])
            self.wfile.flush()
            self.drop_response = rule
            self.drop_answer(code)
        if self.command != "HEAD":
            self.wfile.write(body)
        self.code = code

    def drop_answer(self, code):
        # The audit record says what the server did (code) while the client gets a reset
        # after the hold, as when the connection or a proxy dies after the write was stored.
        rule, self.drop_response = self.drop_response, None
        self.code = code
        self.response_dropped = True
        time.sleep(float(rule.get("hold") or 0))
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        raise _ResponseDropped("response dropped by fault %s" % rule.get("id"))

    def send_obj(self, code, obj, headers=None):
        if self.want_proto and (self.proto_objects or isinstance(obj, dict) and obj.get("kind") == "Status"):
            try:
                data = proto.encode_object(obj)
            except (ValueError, TypeError):
                data = None  # a stored object its type cannot hold: JSON, which the client accepts too
            if data is not None:
                self.send_body(code, data, PROTOBUF, headers)
                return
        if self.want_yaml and _yaml() is not None:
            self.send_body(code, _yaml().safe_dump(obj, sort_keys=False).encode(), "application/yaml", headers)
            return
        self.send_body(code, json.dumps(obj, separators=(",", ":")).encode(), "application/json", headers)

    def send_error_obj(self, e):
        self.send_obj(e.code, e.status(), e.headers)

    # --- the request -------------------------------------------------------------------------

    def dispatch(self, method):
        REQ.ident = None
        REQ.warnings = []
        REQ.field_validation = None
        t0 = time.monotonic()
        self.received = time.time()
        self.audit_id = str(uuid.uuid4())
        self.code = 0
        self.want_yaml = False
        self.want_proto = False
        self.proto_objects = True
        self.watch_events = None
        self.drop_response = None
        self.body_fault = None
        self.response_dropped = False
        u = urlsplit(self.path)
        path = u.path or "/"
        query = parse_qs(u.query, keep_blank_values=True)
        info = request_info(method, path, query)
        if info.resource_request:
            # As the real server, errors (401, 403, ...) are answered in the negotiated encoding too.
            self.want_proto = self.protobuf_negotiated()
        user, groups = None, []
        injected = None
        try:
            try:
                body = self.read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            except (ValueError, OSError):
                self.close_connection = True
                raise errors.bad_request("malformed request body")
            ident = self.authenticate()
            if ident is None:
                raise errors.unauthorized()
            user, groups = ident
            self.ident = ident
            REQ.ident = ident
            accept = self.headers.get("Accept") or ""
            if accept and not any(a in accept for a in ("application/json", "*/*", "application/*",
                                                         "application/yaml", "text/plain")
                                  + ((PROTOBUF,) if info.resource_request else ())):
                if info.resource_request or path.startswith("/api"):
                    raise errors.not_acceptable()
            if "application/yaml" in accept and "application/json" not in accept:
                self.want_yaml = True
            if not path.startswith("/fakekube/"):
                for r in self.st.faults.take(info, user, ("latency",)):
                    time.sleep(float(r.get("latency", 0)))
                hits = self.st.faults.take(info, user, ("error", "conflict"))
                dropped = self.st.faults.take(info, user, ("reset-after-commit",))
                body_faults = self.st.faults.take(info, user, ("body", "cut-body"))
                if body_faults and not hits:
                    injected = self.body_fault = body_faults[0]
                if dropped and not hits:
                    injected = self.drop_response = dropped[0]
                if hits:
                    injected = hits[0]
                    if injected.get("action") == "conflict":
                        raise errors.conflict(info.group, info.resource, info.name)
                    raise errors.for_code(int(injected["code"]), injected.get("message"),
                                          injected.get("retryAfter"))
            a = Attrs(user, groups, info.verb, info.resource_request, info.group, info.resource,
                      info.subresource, info.namespace, info.name, path, info.version)
            if path.startswith("/fakekube/"):
                if "system:masters" not in groups:
                    raise errors.forbidden("", "", "", forbidden_message(a))
                self.admin(method, path, body)
            else:
                allowed, reason = self.st.authz.authorize(a)
                if not allowed:
                    msg = forbidden_message(a)
                    if reason:
                        msg += ": " + reason
                    if info.resource_request:
                        raise errors.forbidden(info.group, info.resource, info.name, msg)
                    raise errors.forbidden("", "", "", msg)
                if info.resource_request:
                    self.resource(method, info, query, body)
                else:
                    self.nonresource(method, path)
        except ApiError as e:
            try:
                if getattr(e, "continue_token", None):
                    st = e.status()
                    st["metadata"] = {"continue": e.continue_token}
                    self.send_obj(e.code, st, e.headers)
                else:
                    self.send_error_obj(e)
            except OSError:
                self.close_connection = True
        except _Closed:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        except Exception as e:  # a bug in the fake must still answer like a server would
            import traceback
            traceback.print_exc()
            try:
                self.send_error_obj(ApiError(500, "InternalError", "Internal error occurred: %s" % e))
            except OSError:
                self.close_connection = True
        if info.verb != "watch" or self.code != 200:
            self.write_audit(t0, method, info, user, groups, query, injected)

    def write_audit(self, t0, method, info, user, groups, query, injected, stage="ResponseComplete"):
        rec = {"time": _rfc3339_micro(), "received": _rfc3339_micro(self.received), "auditID": self.audit_id, "stage": stage, "user": user,
               "groups": groups, "verb": info.verb, "method": method, "apiGroup": info.group,
               "apiVersion": info.version, "resource": info.resource,
               "subresource": info.subresource, "namespace": info.namespace, "name": info.name,
               "path": urlsplit(self.path).path, "query": urlsplit(self.path).query,
               "contentType": self.headers.get("Content-Type") or "",
               "userAgent": self.headers.get("User-Agent") or "", "code": self.code,
               "duration": round(time.monotonic() - t0, 6)}
        if injected:
            rec["injected"] = injected.get("id")
        if self.response_dropped:
            rec["responseDropped"] = True
        if self.watch_events is not None:
            rec["watchEvents"] = self.watch_events
        self.st.audit(rec)

    def authenticate(self):
        cert = None
        try:
            cert = self.connection.getpeercert()
        except (AttributeError, ValueError):
            cert = None
        if cert:
            cn, orgs = None, []
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
                    elif k == "organizationName":
                        orgs.append(v)
            if cn:
                return self.st.identity(cn, orgs)
        auth = self.headers.get("Authorization") or ""
        if auth[:7].lower() == "bearer ":
            tok = auth[7:].strip()
            with self.st.tokens_lock:
                ident = self.st.tokens.get(tok)
            if ident:
                return self.st.identity(*ident)
            bound = self.st.bound_tokens.authenticate(self.st.store,
                                                      self.st.registry.lookup("", "v1", "serviceaccounts"), tok)
            return self.st.identity(*bound) if bound else None
        if self.st.opts.insecure_http and not auth:
            # As the real server's old insecure port: no credentials means full access (kubectl
            # will not send a bearer token over plain HTTP).
            return self.st.identity("system:unsecured", ["system:masters"])
        return None

    # --- non-resource paths ----------------------------------------------------------------

    def nonresource(self, method, path):
        if method not in ("GET", "HEAD"):
            raise errors.method_not_allowed()
        p = path.rstrip("/") or "/"
        reg = self.st.registry
        if p in ("/healthz", "/livez", "/readyz"):
            self.send_body(200, b"ok", "text/plain; charset=utf-8")
        elif p == "/version":
            self.send_obj(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0", "gitCommit": "fake",
                                "gitTreeState": "clean", "buildDate": "2024-12-11T00:00:00Z",
                                "goVersion": "go1.23.4", "compiler": "gc", "platform": "linux/amd64"})
        elif p == "/api":
            self.send_obj(200, {"kind": "APIVersions", "versions": ["v1"],
                                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                                "serverAddress": self.st.host_port}]})
        elif p == "/apis":
            self.send_obj(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                "groups": [reg.api_group(g) for g, _, _ in reg.groups()]})
        elif p.startswith("/api/") and p.count("/") == 2:
            rl = reg.resource_list("", p.split("/")[2])
            if rl is None:
                raise errors.path_not_found()
            self.send_obj(200, rl)
        elif p.startswith("/apis/") and p.count("/") == 2:
            g = reg.api_group(p.split("/")[2])
            if g is None:
                raise errors.path_not_found()
            self.send_obj(200, dict({"kind": "APIGroup", "apiVersion": "v1"}, **g))
        elif p.startswith("/apis/") and p.count("/") == 3:
            _, _, g, v = p.split("/")
            rl = reg.resource_list(g, v)
            if rl is None:
                raise errors.path_not_found()
            self.send_obj(200, rl)
        elif p == "/openapi/v3":
            self.send_obj(200, openapi_index(reg))
        elif p.startswith("/openapi/v3/"):
            rest = p[len("/openapi/v3/"):].split("/")
            doc = None
            if len(rest) == 2 and rest[0] == "api":
                doc = openapi_doc(reg, "", rest[1])
            elif len(rest) == 3 and rest[0] == "apis":
                doc = openapi_doc(reg, rest[1], rest[2])
            if doc is None:
                self.send_body(404, b"404 page not found\n", "text/plain; charset=utf-8")
            else:
                self.send_obj(200, doc)
        elif p == "/openapi/v2":
            doc = openapiv2.document(reg)
            if openapiv2.PROTOBUF in (self.headers.get("Accept") or ""):
                self.send_body(200, openapiv2.encode(doc), "application/octet-stream")
            else:
                self.send_obj(200, doc)
        else:
            self.send_body(404, b"404 page not found\n", "text/plain; charset=utf-8")

    # --- admin endpoints -------------------------------------------------------------------

    def admin(self, method, path, body):
        data = json.loads(body) if body.strip() else {}
        if path == "/fakekube/tokens" and method == "POST":
            user = data.get("user")
            if not user:
                raise errors.bad_request("user is required")
            tok = data.get("token") or secrets.token_urlsafe(24)
            self.st.add_token(tok, user, data.get("groups") or [])
            self.send_obj(201, {"token": tok, "user": user, "groups": self.st.identity(user, data.get("groups")
                                                                                        or [])[1]})
        elif path == "/fakekube/faults" and method == "POST":
            rules = data if isinstance(data, list) else [data]
            self.send_obj(201, {"faults": [self.st.faults.add(r) for r in rules]})
        elif path == "/fakekube/faults" and method == "GET":
            self.send_obj(200, {"faults": self.st.faults.list()})
        elif path == "/fakekube/faults" and method == "DELETE":
            self.st.faults.clear()
            self.send_obj(200, {"faults": []})
        elif path == "/fakekube/state" and method == "GET":
            s = self.st.store
            with s.lock:
                self.send_obj(200, {"resourceVersion": s.rv, "compacted": s.compacted,
                                    "history": len(s.history),
                                    "watchers": sum(len(v) for v in s.watchers.values())})
        else:
            raise errors.path_not_found()

    # --- resources -------------------------------------------------------------------------

    def decode(self, body, ctype):
        ct = (ctype or "application/json").split(";")[0].strip().lower()
        if ct in ("application/json", ""):
            try:
                return json.loads(body)
            except ValueError as e:
                raise errors.bad_request("couldn't get version/kind; json parse error: %s" % e)
        if ct == "application/vnd.kubernetes.protobuf":
            try:
                obj = proto.decode(body)
            except (ValueError, IndexError, UnicodeDecodeError):
                obj = None
            if obj is not None:
                return obj
        if ct == "application/yaml" and _yaml() is not None:
            try:
                return _yaml().safe_load(body)
            except Exception as e:
                raise errors.bad_request("error converting YAML to JSON: %s" % e)
        raise errors.unsupported_media(ct)

    def check_kind(self, rt, obj, version):
        if not isinstance(obj, dict):
            raise errors.bad_request("couldn't get version/kind; json parse error: the body is not an object")
        kind = obj.get("kind")
        av = obj.get("apiVersion")
        if rt.crd is not None and (not kind or not av):
            raise errors.bad_request("Object 'Kind' is missing in '%s'" % json.dumps(obj)[:200]
                                     if not kind else "Object 'apiVersion' is missing in '%s'"
                                     % json.dumps(obj)[:200])
        if kind and kind != rt.kind:
            raise errors.bad_request("the kind in the request body (%s) does not match the kind of the resource "
                                     "(%s)" % (kind, rt.kind))
        if av and av != rt.api_version(version):
            raise errors.bad_request("the API version in the data (%s) does not match the expected API version "
                                     "(%s)" % (av, rt.api_version(version)))

    def out(self, rt, obj, version, in_list=False):
        if obj is None:
            return None
        if in_list and rt.crd is None:
            o = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
            return o
        if version != rt.version:
            o = dict(obj)
            o["apiVersion"] = rt.api_version(version)
            return o
        return obj

    def resource(self, method, info, query, body):
        st = self.st
        rt = st.registry.lookup(info.group, info.version, info.resource)
        if rt is None:
            raise errors.path_not_found()
        if info.subresource and info.subresource not in rt.sub:
            raise errors.path_not_found()
        if rt.crd is not None or proto.message_name(rt.api_version(info.version), rt.kind) is None:
            # Custom resources have no protobuf encoding: they answer JSON or YAML when accepted, else
            # 406; as on the real server, Status answers (errors) stay protobuf.
            self.proto_objects = False
            if self.want_proto and negotiate(self.headers.get("Accept") or "", protobuf=False) is None:
                raise errors.not_acceptable(("application/json", "application/yaml", PROTOBUF))
        ns = info.namespace if rt.namespaced else ""
        if rt.namespaced is False and info.namespace and rt.key != ("", "namespaces"):
            raise errors.path_not_found()
        if rt.key == ("", "namespaces"):
            ns = ""
        if info.verb not in rt.verbs and not (info.subresource and info.verb in ("get", "update", "patch")):
            raise errors.method_not_allowed()
        if rt.namespaced and not info.namespace and info.verb not in ("list", "watch"):
            if info.verb in ("create", "deletecollection"):
                raise errors.method_not_allowed()
            raise errors.path_not_found()
        q = {k: v[0] for k, v in query.items()}
        fv = q.get("fieldValidation")
        if fv not in (None, "", "Strict", "Warn", "Ignore"):
            raise errors.bad_request('fieldValidation parameter unsupported: %s' % fv)
        REQ.field_validation = fv or None
        dry_run = q.get("dryRun") == "All" or query.get("dryRun") == ["All"]
        if q.get("dryRun") not in (None, "All"):
            raise errors.bad_request('Invalid dry run value: "%s"' % q.get("dryRun"))
        store = st.store
        v = info.version
        ctype = self.headers.get("Content-Type") or ""
        if info.subresource == "scale":
            scale.handle(self, rt, ns, info.name, info.verb, body, ctype, dry_run)
            return
        if info.subresource == "token":
            tokenrequest.handle(self, store, st.bound_tokens, rt, ns, info.name, info.verb, body, ctype, dry_run)
            return
        if info.subresource == "eviction":
            eviction.handle(self, store, st.registry, rt, ns, info.name, info.verb, body, ctype, dry_run)
            return
        if info.verb == "get":
            obj = store.get(rt, ns, info.name)
            if self.wants_table() and not info.subresource:
                self.send_obj(200, table.build(rt, [self.out(rt, obj, v)], obj["metadata"]["resourceVersion"],
                                               q.get("includeObject") or "Metadata"))
                return
            self.send_obj(200, self.out(rt, obj, v))
        elif info.verb == "list":
            self.do_list(rt, info, q, v)
        elif info.verb == "watch":
            self.do_watch(rt, info, q, v)
        elif info.verb == "create":
            if info.name:
                raise errors.method_not_allowed()
            obj = self.decode(body, ctype)
            self.check_kind(rt, obj, v)
            if (rt.group, rt.plural) in (("authorization.k8s.io", "selfsubjectaccessreviews"),
                                         ("authorization.k8s.io", "subjectaccessreviews"),
                                         ("authentication.k8s.io", "selfsubjectreviews"),
                                         ("authorization.k8s.io", "selfsubjectrulesreviews")):
                self.send_obj(201, self.review(rt, obj))
                return
            self.escalation(rt, ns, obj, None)
            created = store.create(rt, ns, obj, dry_run, v)
            self.send_obj(201, self.out(rt, created, v))
        elif info.verb == "update":
            obj = self.decode(body, ctype)
            self.check_kind(rt, obj, v)
            if not isinstance(obj.get("metadata"), dict):
                raise errors.bad_request("metadata is required")
            if obj["metadata"].get("name") and obj["metadata"]["name"] != info.name:
                raise errors.bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                         % (obj["metadata"]["name"], info.name))
            res, created = store.update(rt, ns, info.name,
                                        self.escalation_checked(rt, ns, info.name, lambda cur: obj),
                                        info.subresource or None, dry_run, put_body=obj, version=v)
            self.send_obj(201 if created else 200, self.out(rt, res, v))
        elif info.verb == "patch":
            ct = ctype.split(";")[0].strip().lower()
            if ct not in PATCH_TYPES:
                raise errors.unsupported_patch([t for t in PATCH_TYPES if t != "application/apply-patch+yaml"
                                                or True])
            if ct == "application/apply-patch+yaml":
                raise errors.unsupported_patch(["application/json-patch+json", "application/merge-patch+json",
                                                "application/strategic-merge-patch+json"])
            if ct == "application/strategic-merge-patch+json" and rt.crd is not None:
                raise errors.unsupported_patch(["application/json-patch+json", "application/merge-patch+json",
                                                "application/apply-patch+yaml"])
            try:
                p = json.loads(body)
            except ValueError as e:
                raise errors.bad_request("error decoding patch: %s" % e)
            if ct == "application/merge-patch+json":
                if not isinstance(p, dict):
                    raise errors.bad_request("json: cannot unmarshal %s into Go value of type "
                                             "map[string]interface {}" % type(p).__name__)
                fn = lambda cur: patchmod.merge_patch(cur, p)
            elif ct == "application/json-patch+json":
                fn = lambda cur: patchmod.json_patch(cur, p)
            else:
                meta = patchmod.SMP_META.get((rt.group, rt.kind), {})
                fn = lambda cur: patchmod.strategic_merge(cur, p, meta)
            res, _ = store.update(rt, ns, info.name, self.escalation_checked(rt, ns, info.name, fn),
                                  info.subresource or None, dry_run, version=v)
            self.send_obj(200, self.out(rt, res, v))
        elif info.verb == "delete":
            opts = {}
            if body.strip():
                opts = self.decode(body, ctype) or {}
            if "propagationPolicy" in q:
                opts["propagationPolicy"] = q["propagationPolicy"]
            for k in ("gracePeriodSeconds",):
                if k in q:
                    try:
                        opts[k] = int(q[k])
                    except ValueError:
                        raise errors.bad_request("invalid %s" % k)
            if opts.get("dryRun") == ["All"]:
                dry_run = True
            res, gone = store.delete(rt, ns, info.name, opts, dry_run)
            if gone and not rt.return_deleted:
                details = {"name": info.name}
                if rt.group:
                    details["group"] = rt.group
                details["kind"] = rt.plural
                details["uid"] = res["metadata"].get("uid")
                self.send_obj(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                    "details": details})
            else:
                self.send_obj(200, self.out(rt, res, v))
        elif info.verb == "deletecollection":
            lr = parse_label_selector(q.get("labelSelector", ""))
            ft = self.field_terms(rt, q.get("fieldSelector", ""))
            items, _, _, _ = store.list(rt, ns or None, lr, ft)
            out = []
            for o in items:
                try:
                    r, _ = store.delete(rt, o["metadata"].get("namespace", ""), o["metadata"]["name"], {}, dry_run)
                    out.append(self.out(rt, r, v, in_list=True))
                except ApiError:
                    pass
            with store.lock:
                rv = store.rv
            self.send_obj(200, {"kind": rt.list_kind(), "apiVersion": rt.api_version(v),
                                "metadata": {"resourceVersion": str(rv)}, "items": out})
        else:
            raise errors.method_not_allowed()

    def escalation(self, rt, ns, obj, request_name):
        """request_name: the name in the request's path, None for a create (POST)."""
        if rt.group == "rbac.authorization.k8s.io" and isinstance(obj, dict):
            err = check_escalation(self.st.authz, self.ident[0], self.ident[1], rt.kind, ns, obj, request_name)
            if err is not None:
                raise err

    def escalation_checked(self, rt, ns, request_name, fn):
        if rt.group != "rbac.authorization.k8s.io":
            return fn

        def wrapped(cur):
            new = fn(cur)
            self.escalation(rt, ns, new, request_name)
            return new
        return wrapped

    def review(self, rt, obj):
        spec = obj.get("spec") or {}
        out = deep(obj)
        out.setdefault("metadata", {})
        out["metadata"].setdefault("creationTimestamp", None)
        user, groups = self.authenticate()
        if rt.plural == "selfsubjectreviews":
            out["status"] = {"userInfo": {"username": user, "groups": groups}}
            return out
        if rt.plural == "selfsubjectrulesreviews":
            rr, nr = [], []
            for r in rules_for(self.st.authz, user, groups, spec.get("namespace", "")):
                if r.get("nonResourceURLs"):
                    nr.append({"verbs": r.get("verbs") or [], "nonResourceURLs": r["nonResourceURLs"]})
                else:
                    rr.append({k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if k in r})
            out["status"] = {"resourceRules": rr, "nonResourceRules": nr, "incomplete": False}
            return out
        if rt.plural == "subjectaccessreviews":
            user, groups = spec.get("user", ""), spec.get("groups") or []
        ra = spec.get("resourceAttributes")
        nra = spec.get("nonResourceAttributes")
        if ra:
            a = Attrs(user, groups, ra.get("verb", ""), True, ra.get("group", ""), ra.get("resource", ""),
                      ra.get("subresource", ""), ra.get("namespace", ""), ra.get("name", ""))
        else:
            nra = nra or {}
            a = Attrs(user, groups, nra.get("verb", ""), False, path=nra.get("path", ""))
        allowed, reason = self.st.authz.authorize(a)
        out["status"] = {"allowed": allowed}
        if reason:
            out["status"]["reason"] = reason
        return out

    def protobuf_negotiated(self):
        """Whether the Accept header picks the protobuf encoding (not a conversion such as
        as=Table, which keeps its own handling)."""
        n = negotiate(self.headers.get("Accept") or "")
        return n is not None and n[0] == PROTOBUF and not set(n[1]) & {"as", "g", "v"}

    def wants_table(self):
        """The first acceptable media type decides, as in the real server's negotiation."""
        for part in (self.headers.get("Accept") or "").split(","):
            params = dict(x.strip().split("=", 1) for x in part.split(";")[1:] if "=" in x)
            if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1",
                                                                                                         "v1beta1"):
                return True
            if part.strip().startswith(("application/json", "*/*")) and "as" not in params:
                return False
        return False

    def field_terms(self, rt, fs):
        terms = parse_field_selector(fs)
        for f, _, _ in terms:
            if f not in rt.fields:
                raise errors.bad_request('field label not supported: %s' % f)
        return terms

    def do_list(self, rt, info, q, v):
        lr = parse_label_selector(q.get("labelSelector", ""))
        ft = self.field_terms(rt, q.get("fieldSelector", ""))
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise errors.bad_request("invalid limit")
        rvm = q.get("resourceVersionMatch")
        if rvm and rvm not in ("Exact", "NotOlderThan"):
            raise errors.bad_request('resourceVersionMatch: Unsupported value: "%s"' % rvm)
        if rvm and not q.get("resourceVersion"):
            raise errors.invalid("meta.k8s.io", "ListOptions", "", [errors.FieldError(
                "resourceVersionMatch", "Forbidden",
                detail="resourceVersionMatch is forbidden unless resourceVersion is provided")])
        items, rv, cont, remaining = self.st.store.list(rt, info.namespace or None, lr, ft, limit,
                                                        q.get("continue"), q.get("resourceVersion"), rvm)
        if self.wants_table():
            self.send_obj(200, table.build(rt, [self.out(rt, o, v) for o in items], rv,
                                           q.get("includeObject") or "Metadata", cont, remaining))
            return
        md = {"resourceVersion": str(rv)}
        if cont:
            md["continue"] = cont
            if remaining is not None:
                md["remainingItemCount"] = remaining
        self.send_obj(200, {"kind": rt.list_kind(), "apiVersion": rt.api_version(v), "metadata": md,
                            "items": [self.out(rt, o, v, in_list=True) for o in items]})

    # --- watch -------------------------------------------------------------------------------

    def chunk(self, data):
        # One write per chunk: a protobuf frame goes out whole with its chunk header.
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch_event(self, etype, obj):
        """One event of the stream: a JSON line, or a length-prefixed protobuf WatchEvent."""
        if self.want_proto:
            return proto.watch_frame(etype, obj)
        return json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n"

    def do_watch(self, rt, info, q, v):
        st = self.st
        t0 = time.monotonic()
        lr = parse_label_selector(q.get("labelSelector", ""))
        ft = self.field_terms(rt, q.get("fieldSelector", ""))
        name = None
        if info.name and not info.subresource and "fieldSelector" not in q:
            name = info.name  # GET .../name?watch=1 (legacy single-object watch)
        try:
            timeout = float(q.get("timeoutSeconds")) if q.get("timeoutSeconds") else None
        except ValueError:
            raise errors.bad_request("invalid timeoutSeconds")
        if timeout is None:
            m = st.opts.min_request_timeout
            timeout = m * (1 + random.random())
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1", "True")
        user = self.authenticate()[0]
        close_after = None
        abort = False
        gone = False
        interval = st.opts.bookmark_interval
        for r in st.faults.take(info, user, ("close-watch", "abort-watch", "gone", "bookmark")):
            if r["action"] == "gone":
                gone = True
            elif r["action"] == "bookmark":
                interval = float(r.get("interval", interval))
            else:
                close_after = int(r.get("afterEvents", 0))
                abort = r["action"] == "abort-watch"
        rv = q.get("resourceVersion")
        if rv not in (None, ""):
            try:
                int(rv)
            except ValueError:
                raise errors.bad_request('resourceVersion: Invalid value: "%s": strconv.ParseUint: parsing '
                                         '"%s": invalid syntax' % (rv, rv))
        w = None
        err = None
        initial = []
        if gone:
            with st.store.lock:
                err = errors.gone("too old resource version: %s (%s)" % (rv or "0", st.store.rv))
        else:
            try:
                w, initial, _ = st.store.watch(rt, info.namespace or None, name, lr, ft, rv)
            except ApiError as e:
                if e.code != 410:
                    raise
                err = e
        self.send_response(200)
        self.send_header("Audit-Id", self.audit_id)
        self.send_header("Cache-Control", "no-cache, private")
        self.want_proto = self.want_proto and self.proto_objects
        self.send_header("Content-Type", PROTOBUF + ";stream=watch" if self.want_proto else "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.code = 200
        self.watch_events = 0
        self.write_audit(t0, "GET", info, user, self.authenticate()[1], None, None, stage="ResponseStarted")
        sent = 0
        try:
            if err is not None:
                self.chunk(self.watch_event("ERROR", err.status()))
                self.chunk(b"")
                return
            deadline = time.monotonic() + timeout
            next_bm = time.monotonic() + interval

            def emit(etype, obj):
                nonlocal sent
                if close_after is not None and sent >= close_after:
                    raise _Closed()
                self.chunk(self.watch_event(etype, self.out(rt, obj, v)))
                sent += 1
                self.watch_events = sent
            for ch in initial:
                ev = w.convert(ch)
                if ev:
                    emit(*ev)
            if close_after is not None and sent >= close_after:
                raise _Closed()
            while True:
                now = time.monotonic()
                if now >= deadline or w.closed:
                    break
                try:
                    ch = w.q.get(timeout=min(0.5, deadline - now))
                except Exception:
                    ch = None
                if ch is not None:
                    ev = w.convert(ch)
                    if ev:
                        emit(*ev)
                    continue
                if self.peer_closed():
                    raise _Closed()
                if bookmarks and time.monotonic() >= next_bm:
                    brv = st.store.bookmark_rv(w)
                    if brv is not None:
                        self.chunk(self.watch_event("BOOKMARK", {
                            "kind": rt.kind, "apiVersion": rt.api_version(v),
                            "metadata": {"resourceVersion": str(brv)}}))
                        next_bm = time.monotonic() + interval
            self.chunk(b"")
        except _Closed:
            if abort or close_after is None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                raise
            self.chunk(b"")
        finally:
            if w is not None:
                st.store.unwatch(w)

    def peer_closed(self):
        """A watch client sends nothing; a readable socket means it went away."""
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
        except (OSError, ValueError):
            return True
        if not r:
            return False
        try:
            self.connection.setblocking(False)
            try:
                data = self.connection.recv(1)
            finally:
                self.connection.setblocking(True)
            return data == b""
        except ssl.SSLWantReadError:
            return False
        except (OSError, ssl.SSLError):
            return True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, state, ctx):
        fam = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.address_family = fam
        self.state = state
        self.ctx = ctx
        super().__init__(addr, Handler)

    def get_request(self):
        sock, addr = super().get_request()
        return sock, addr

    def finish_request(self, request, client_address):
        # Small responses go out at once: with Nagle's algorithm a response written in two parts
        # waits for the client's delayed ACK (40 ms) before its second part.
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        # The TLS handshake runs in the request thread so one slow client cannot stall accept().
        if self.ctx is not None:
            try:
                request.settimeout(30)
                request = self.ctx.wrap_socket(request, server_side=True)
                request.settimeout(None)
            except (ssl.SSLError, OSError):
                try:
                    request.close()
                except OSError:
                    pass
                return
        try:
            self.RequestHandlerClass(request, client_address, self)
        finally:
            try:
                request.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        pass


def _write_atomic(path, data, mode=0o600):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def kubeconfig(url, ca_file, user_name, cert=None, key=None, token=None):
    with open(ca_file, "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    u = {}
    if cert:
        with open(cert, "rb") as f:
            u["client-certificate-data"] = base64.b64encode(f.read()).decode()
        with open(key, "rb") as f:
            u["client-key-data"] = base64.b64encode(f.read()).decode()
    if token:
        u["token"] = token
    cfg = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "fake", "cluster": {"server": url, "certificate-authority-data": ca}}],
           "users": [{"name": user_name, "user": u}],
           "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": user_name}}],
           "current-context": "fake", "preferences": {}}
    # JSON is YAML: every kubeconfig reader accepts it.
    return json.dumps(cfg, indent=2) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="fake-kube-apiserver",
        description="A Kubernetes API server for tests. Prints its URL on the first line of stdout, writes "
                    "DIR/admin.kubeconfig (client certificate, groups system:masters) and DIR/audit.jsonl, "
                    "and serves until SIGTERM. See tests/fakekube/README.md.")
    p.add_argument("--listen", default="127.0.0.1:0", help="ADDR:PORT (port 0 picks a free one)")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--rbac", action="append", default=[], help="YAML/JSON file with RBAC objects (repeatable)")
    p.add_argument("--load", action="append", default=[], help="YAML/JSON file with any objects to create")
    p.add_argument("--token", action="append", default=[], help="TOKEN=user[,group...] (repeatable)")
    p.add_argument("--token-file", help="static token CSV: token,user,uid,\"group1,group2\"")
    p.add_argument("--san", action="append", default=[], help="extra subject alternative name for the server "
                                                                "certificate (repeatable)")
    p.add_argument("--insecure-http", action="store_true",
                   help="serve plain HTTP: requests without credentials are admin, as on the real server's old "
                        "insecure port; bearer tokens still select their identity")
    p.add_argument("--watch-history", type=int, default=1000,
                   help="changes kept for watches and paginated lists; older resourceVersions get 410 Gone")
    p.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between watch BOOKMARKs")
    p.add_argument("--min-request-timeout", type=float, default=1800.0,
                   help="watches without timeoutSeconds end after a random time between this and twice this")
    p.add_argument("--faults", help="JSON file with a list of fault rules to start with")
    return p.parse_args(argv)


def _load_tokens(state, opts):
    for t in opts.token:
        if "=" not in t:
            raise SystemExit("fake-kube-apiserver: --token wants TOKEN=user[,group...], got %r" % t)
        tok, rest = t.split("=", 1)
        parts = rest.split(",")
        state.add_token(tok, parts[0], [g for g in parts[1:] if g])
    if opts.token_file:
        import csv
        with open(opts.token_file) as f:
            for row in csv.reader(f):
                if not row or row[0].startswith("#"):
                    continue
                if len(row) < 2:
                    raise SystemExit("fake-kube-apiserver: %s: bad line %r" % (opts.token_file, row))
                groups = row[3].split(",") if len(row) > 3 and row[3] else []
                state.add_token(row[0], row[1], groups)


def main(argv=None):
    opts = parse_args(argv if argv is not None else sys.argv[1:])
    d = opts.state_dir
    os.makedirs(d, exist_ok=True)
    host, _, port = opts.listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port)
    except ValueError:
        raise SystemExit("fake-kube-apiserver: --listen wants ADDR:PORT, got %r" % opts.listen)
    state = State(opts)
    _load_tokens(state, opts)
    ns_rt = state.registry.lookup("", "v1", "namespaces")
    for n in SYSTEM_NAMESPACES:
        state.store.create(ns_rt, "", {"metadata": {"name": n}})
    for o in BOOTSTRAP:
        state.load_object(deep(o))
    try:
        for f in opts.rbac:
            state.load_file(f, rbac_only=True)
        for f in opts.load:
            state.load_file(f)
    except (OSError, ValueError, RuntimeError, ApiError) as e:
        raise SystemExit("fake-kube-apiserver: loading objects: %s" % e)
    if opts.faults:
        with open(opts.faults) as f:
            for r in json.load(f):
                state.faults.add(r)
    ctx = None
    admin_cert = admin_key = None
    ca = None
    if not opts.insecure_http:
        ca = certs.ensure_ca(d)
        sans = ["127.0.0.1", "localhost", "::1"] + ([host] if host not in ("127.0.0.1", "localhost", "::1",
                                                                           "0.0.0.0", "::") else []) + opts.san
        srv_crt, srv_key = certs.issue(d, "apiserver", ca, "kube-apiserver", sans=sans, server=True)
        admin_cert, admin_key = certs.issue(d, "admin", ca, "kubernetes-admin", orgs=["system:masters"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(srv_crt, srv_key)
        ctx.load_verify_locations(ca[0])
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.set_alpn_protocols(["http/1.1"])
    state.audit_f = open(os.path.join(d, "audit.jsonl"), "a")
    srv = Server((host, port), state, ctx)
    real_port = srv.server_address[1]
    hp = "[%s]:%d" % (host, real_port) if ":" in host else "%s:%d" % (host, real_port)
    scheme = "http" if opts.insecure_http else "https"
    state.url = "%s://%s" % (scheme, hp)
    state.host_port = hp
    if ca is not None:
        _write_atomic(os.path.join(d, "admin.kubeconfig"),
                      kubeconfig(state.url, ca[0], "admin", admin_cert, admin_key))
    else:
        tok = secrets.token_urlsafe(24)
        state.add_token(tok, "kubernetes-admin", ["system:masters"])
        _write_atomic(os.path.join(d, "admin.kubeconfig"),
                      json.dumps({"apiVersion": "v1", "kind": "Config",
                                  "clusters": [{"name": "fake", "cluster": {"server": state.url}}],
                                  "users": [{"name": "admin", "user": {"token": tok}}],
                                  "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "admin"}}],
                                  "current-context": "fake"}, indent=2) + "\n")
    _write_atomic(os.path.join(d, "url"), state.url + "\n", 0o644)

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.stdout.write(state.url + "\n")
    sys.stdout.flush()
    srv.serve_forever(poll_interval=0.2)
    srv.server_close()
    state.audit_f.close()
    return 0
