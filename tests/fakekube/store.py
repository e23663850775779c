"""Object storage with the semantics of the real API server's registry and watch cache.

One global resourceVersion counter (as etcd's revision), a bounded history of changes that
serves watches from a resourceVersion and consistent paginated lists, and watchers that get
every change of their resource type in order."""
import base64
import collections
import copy
import datetime
import json
import queue
import random
import threading
import time
import uuid

from . import errors
from .errors import ApiError
from .quantity import normalize_resources
from .schema import prune, schema_for
from .selection import fields_match, labels_match
from .kinds import (VIRTUAL, apply_defaults, decode_secret_data, normalize_times, omit_empty, secret_string_data,
                    spec_of, validate)

_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def deep(o):
    return json.loads(json.dumps(o))


# Per-request context of the handler thread: identity, fieldValidation, warnings to send.
REQ = threading.local()


def not_ready_taint(node):
    """The node.kubernetes.io/not-ready:NoSchedule taint of node, or None."""
    spec = node.get("spec")
    taints = spec.get("taints") if isinstance(spec, dict) else None
    for t in taints if isinstance(taints, list) else []:
        if isinstance(t, dict) and t.get("key") == "node.kubernetes.io/not-ready" and t.get("effect") == "NoSchedule":
            return t
    return None


def node_ready(node):
    status = node.get("status")
    conds = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conds, list) and any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def drop_node_config_fields(node, old):
    """The Node strategy's dropDisabledFields: the dynamic kubelet config is gone (1.24), so
    spec.configSource and status.config are dropped on create and on any update of a Node that
    does not carry them already."""
    for part, field in (("spec", "configSource"), ("status", "config")):
        sub = node.get(part)
        old_sub = (old or {}).get(part)
        if isinstance(sub, dict) and field in sub and not (isinstance(old_sub, dict) and old_sub.get(field)):
            del sub[field]


def taint_not_ready(node):
    """The admission plugin TaintNodesByCondition (on by default): a Node is created with the
    node.kubernetes.io/not-ready:NoSchedule taint, which the node lifecycle controller removes once
    the kubelet reports Ready (no such controller runs here)."""
    spec = node.setdefault("spec", {})
    taints = spec.setdefault("taints", []) if isinstance(spec, dict) else None
    if isinstance(taints, list) and not_ready_taint(node) is None:
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})

class Change:
    __slots__ = ("rv", "type", "rkey", "okey", "obj", "prev")

    def __init__(self, rv, type_, rkey, okey, obj, prev):
        self.rv, self.type, self.rkey, self.okey, self.obj, self.prev = rv, type_, rkey, okey, obj, prev


class Watcher:
    def __init__(self, rt, ns, name, label_reqs, field_terms):
        self.rt = rt
        self.ns = ns
        self.name = name
        self.label_reqs = label_reqs
        self.field_terms = field_terms
        self.q = queue.SimpleQueue()
        self.closed = False

    def passes(self, obj):
        if obj is None:
            return False
        md = obj.get("metadata") or {}
        if self.ns is not None and md.get("namespace") != self.ns:
            return False
        if self.name is not None and md.get("name") != self.name:
            return False
        return labels_match(self.label_reqs, obj) and fields_match(self.field_terms, obj)

    def convert(self, ch):
        """Turns a change into the event this watcher sees (None when filtered out), as the
        watch cache does: an object leaving the selection is DELETED, one entering is ADDED."""
        if ch.type == "DELETED":
            return ("DELETED", ch.obj) if self.passes(ch.prev) else None
        cur = self.passes(ch.obj)
        old = ch.prev is not None and self.passes(ch.prev)
        if cur and (old or ch.type == "ADDED"):
            return (ch.type, ch.obj)
        if cur:
            return ("ADDED", ch.obj)
        if old:
            prev = dict(ch.prev)
            prev["metadata"] = dict(prev["metadata"], resourceVersion=str(ch.rv))
            return ("DELETED", prev)
        return None


class Store:
    def __init__(self, registry, history=1000):
        self.registry = registry
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.rv = 1
        self.objects = collections.defaultdict(dict)  # (group, plural) -> {(ns, name): obj}
        self.history = collections.deque()
        self.history_size = history
        self.compacted = 0  # every change with rv <= compacted has left the history
        self.watchers = collections.defaultdict(set)
        self.on_change = []  # callbacks(rt, type, obj, prev) run under the lock
        self.admission = None  # fn(op, rt, subresource, ns, name, obj, old, dry_run), may raise

    # --- low level -----------------------------------------------------------------------

    def _commit(self, rt, type_, okey, obj, prev):
        self.rv += 1
        rv = self.rv
        if obj is not None:
            obj["metadata"]["resourceVersion"] = str(rv)
        objs = self.objects[rt.key]
        if type_ == "DELETED":
            objs.pop(okey, None)
            gone = dict(prev)
            gone["metadata"] = dict(prev["metadata"], resourceVersion=str(rv))
            obj = gone
        else:
            objs[okey] = obj
        ch = Change(rv, type_, rt.key, okey, obj, prev)
        self.history.append(ch)
        while len(self.history) > self.history_size:
            self.compacted = self.history.popleft().rv
        for w in self.watchers.get(rt.key, ()):
            w.q.put(ch)
        for cb in self.on_change:
            cb(rt, type_, obj, prev)
        self.cond.notify_all()
        return obj

    def snapshot(self, rt, at_rv):
        """The objects of rt as they were at at_rv, rebuilt by undoing later changes."""
        if at_rv < self.compacted:
            return None
        cur = dict(self.objects[rt.key])
        for ch in reversed(self.history):
            if ch.rv <= at_rv:
                break
            if ch.rkey != rt.key:
                continue
            if ch.type == "ADDED":
                cur.pop(ch.okey, None)
            else:
                cur[ch.okey] = ch.prev
        return cur

    def wait_rv(self, rv, timeout=3.0):
        """Blocks until the store reached rv, as the watch cache does for a too-new version."""
        end = time.monotonic() + timeout
        with self.cond:
            while self.rv < rv:
                left = end - time.monotonic()
                if left <= 0:
                    raise errors.too_large_rv(rv, self.rv)
                self.cond.wait(left)

    # --- reads ---------------------------------------------------------------------------

    def get(self, rt, ns, name):
        with self.lock:
            o = self.objects[rt.key].get((ns or "", name))
        if o is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return o

    def list(self, rt, ns, label_reqs, field_terms, limit=0, cont=None, rv=None, rv_match=None):
        """Returns (items, list_rv, continue, remaining)."""
        start_after = None
        with self.lock:
            if cont:
                if rv not in (None, ""):
                    raise errors.bad_request("specifying resource version is not allowed when using continue")
                try:
                    tok = json.loads(base64.b64decode(cont))
                    list_rv = int(tok["rv"])
                    start_after = tok["start"]
                except (ValueError, KeyError, TypeError):
                    raise errors.bad_request("continue key is not valid: incorrect encoded start resourceVersion "
                                             "(version meta.k8s.io/v1)")
                snap = self.snapshot(rt, list_rv)
                if snap is None:
                    raise self._continue_expired(rt, ns, label_reqs, field_terms, start_after, limit)
            elif rv_match == "Exact" and rv not in (None, "", "0"):
                list_rv = int(rv)
                snap = self.snapshot(rt, list_rv)
                if snap is None:
                    raise errors.gone("too old resource version: %s (%s)" % (rv, self.compacted + 1))
                if list_rv > self.rv:
                    raise errors.too_large_rv(list_rv, self.rv)
            else:
                if rv not in (None, "", "0"):
                    want = int(rv)
                    if want > self.rv:
                        self.lock.release()
                        try:
                            self.wait_rv(want)
                        finally:
                            self.lock.acquire()
                list_rv = self.rv
                snap = self.objects[rt.key]
                if rv == "0":
                    limit = 0  # served from the watch cache, which ignores limit for resourceVersion=0
            keys = sorted(snap.keys(), key=lambda k: k[0] + "/" + k[1])
            items = []
            nxt = None
            remaining = None
            selective = bool(label_reqs or field_terms)
            for i, k in enumerate(keys):
                if ns is not None and k[0] != ns:
                    continue
                sk = k[0] + "/" + k[1]
                if start_after is not None and sk <= start_after:
                    continue
                o = snap[k]
                if not (labels_match(label_reqs, o) and fields_match(field_terms, o)):
                    continue
                if limit and len(items) >= limit:
                    last = items[-1]["metadata"]
                    lk = (last.get("namespace") or "") + "/" + last["name"]
                    nxt = base64.b64encode(json.dumps({"v": "meta.k8s.io/v1", "rv": list_rv, "start": lk})
                                           .encode()).decode()
                    if not selective:
                        remaining = sum(1 for k2 in keys[i:] if ns is None or k2[0] == ns)
                    break
                items.append(o)
        return items, list_rv, nxt, remaining

    def _continue_expired(self, rt, ns, lr, ft, start_after, limit):
        with self.lock:
            tok = base64.b64encode(json.dumps({"v": "meta.k8s.io/v1", "rv": -1, "start": start_after})
                                   .encode()).decode()
        e = errors.gone("The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter, or use the continue token "
                        "in this response to retrieve the remainder of the results. Continuing with the "
                        "provided token results in an inconsistent list - objects that were created, "
                        "modified, or deleted between the time the first chunk was returned and now may "
                        "show up in the list.")
        e.continue_token = tok
        return e

    # --- watch ---------------------------------------------------------------------------

    def watch(self, rt, ns, name, label_reqs, field_terms, rv):
        """Registers a watcher; returns (watcher, initial changes, start rv). Raises 410 as an
        ApiError for the caller to send as an ERROR event."""
        w = Watcher(rt, ns, name, label_reqs, field_terms)
        if rv not in (None, "", "0"):
            want = int(rv)
            if want > self.rv:
                self.wait_rv(want)
        with self.lock:
            if rv in (None, "", "0"):
                initial = []
                objs = self.objects[rt.key]
                for k in sorted(objs.keys(), key=lambda k: k[0] + "/" + k[1]):
                    o = objs[k]
                    initial.append(Change(int(o["metadata"]["resourceVersion"]), "ADDED", rt.key, k, o, None))
            else:
                want = int(rv)
                if want < self.compacted:
                    raise errors.gone("too old resource version: %d (%d)" % (want, self.compacted + 1))
                initial = [ch for ch in self.history if ch.rv > want and ch.rkey == rt.key]
            self.watchers[rt.key].add(w)
            start = self.rv
        return w, initial, start

    def close_watchers(self, rkey):
        """Ends every open watch of a resource type, as the API server does when a CRD is
        deleted: the clients' next watch or list then gets 404."""
        with self.lock:
            for w in self.watchers.get(rkey, ()):
                w.closed = True

    def unwatch(self, w):
        with self.lock:
            self.watchers[w.rt.key].discard(w)

    def bookmark_rv(self, w):
        """A resourceVersion safe to report in a BOOKMARK: only when nothing is queued for w
        is every change up to the current revision already delivered."""
        with self.lock:
            if not w.q.empty():
                return None
            return self.rv

    # --- writes --------------------------------------------------------------------------

    def namespace_check(self, rt, ns, name="", creating=True):
        if not rt.namespaced:
            return
        nso = self.objects[("", "namespaces")].get(("", ns))
        if nso is None:
            raise errors.not_found("", "namespaces", ns)
        if creating and (nso.get("metadata") or {}).get("deletionTimestamp"):
            raise errors.forbidden(rt.group, rt.plural, name,
                                   "unable to create new content in namespace %s because it is being terminated"
                                   % ns)

    def _prepare_new(self, rt, obj, ns):
        if rt.crd is not None:
            obj = self._prune_cr(rt, obj)
        else:
            obj = omit_empty(rt, obj)
            self._decode_fields(rt, obj)
        if (rt.group, rt.kind) == ("", "Secret"):
            secret_string_data(obj)
            bad = decode_secret_data(obj)
            if bad:
                raise errors.bad_request(bad)
        return obj

    @staticmethod
    def _decode_fields(rt, obj):
        """Times and quantities as the Go types decode (and re-encode) them; a value they cannot
        decode fails the whole request with 400, as on the real server."""
        bad = normalize_times(rt, obj)
        if bad is None:
            q = normalize_resources(obj)
            if q:
                bad = '%s in version "%s" cannot be handled as a %s: %s' % (rt.kind, rt.version, rt.kind, q)
        if bad:
            raise errors.bad_request(bad)

    @staticmethod
    def _prune_cr(rt, obj):
        """Prunes unknown fields; with fieldValidation=Strict they are an error, with Warn (the
        default) a warning, as on the real server."""
        dropped = []
        out = prune(obj, schema_for(rt), dropped)
        fv = getattr(REQ, "field_validation", None) or "Warn"
        if dropped and fv == "Strict":
            raise errors.bad_request("strict decoding error: " + ", ".join('unknown field "%s"' % p for p in dropped))
        if dropped and fv == "Warn":
            w = getattr(REQ, "warnings", None)
            if w is not None:
                w.extend('unknown field "%s"' % p for p in dropped)
        return out

    def create(self, rt, ns, body, dry_run=False, version=None):
        obj = deep(body)
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise errors.bad_request("metadata must be an object")
        if rt.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise errors.bad_request("the namespace of the provided object does not match the namespace "
                                         "sent on the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if md.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        obj["apiVersion"] = rt.api_version(version)
        obj["kind"] = rt.kind
        if (rt.group, rt.plural) in VIRTUAL:
            return obj
        obj = self._prepare_new(rt, obj, ns)
        md = obj["metadata"]
        with self.lock:
            if not md.get("name") and md.get("generateName"):
                for _ in range(8):
                    cand = md["generateName"] + "".join(random.choice(_GEN_CHARS) for _ in range(5))
                    if (ns or "", cand) not in self.objects[rt.key]:
                        break
                md["name"] = cand
            self.namespace_check(rt, ns, md.get("name", ""))
            # Fields only the server sets. managedFields sent with the object are kept, as the
            # real field manager decodes them from the request.
            for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "selfLink", "generation"):
                md.pop(f, None)
            if not isinstance(md.get("managedFields"), list):
                md.pop("managedFields", None)
            if "status" in rt.sub and (rt.group, rt.kind) != ("", "Node"):
                obj.pop("status", None)
            # The UID comes first: a Job's defaults (its generated selector) name it.
            md["uid"] = str(uuid.uuid4())
            if rt.crd is None:
                apply_defaults(rt, obj)
            if rt.key == ("", "nodes"):
                taint_not_ready(obj)
                drop_node_config_fields(obj, None)
            errs = validate(rt, obj, None, True)
            if errs:
                raise errors.invalid(rt.group, rt.kind, md.get("name", ""), errs)
            name = md["name"]
            if (ns or "", name) in self.objects[rt.key]:
                raise errors.already_exists(rt.group, rt.plural, name)
            md["creationTimestamp"] = now_iso()
            if rt.generation:
                md["generation"] = 1
            if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
                fins = md.setdefault("finalizers", [])
                if "customresourcecleanup.apiextensions.k8s.io" not in fins:
                    fins.append("customresourcecleanup.apiextensions.k8s.io")
            obj = self._order(obj)
            if self.admission:
                self.admission("CREATE", rt, None, ns, name, obj, None, dry_run)
            if dry_run:
                return obj
            return self._commit(rt, "ADDED", (ns or "", name), obj, None)

    @staticmethod
    def _order(obj):
        out = {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "metadata": obj.get("metadata")}
        for k, v in obj.items():
            if k not in out:
                out[k] = v
        return out

    def update(self, rt, ns, name, mutate, subresource=None, dry_run=False, put_body=None, version=None):
        """Read-modify-write of one object. mutate(current copy) returns the desired object; a
        resourceVersion in it is a precondition. put_body is set for PUT (create-on-update)."""
        with self.lock:
            cur = self.objects[rt.key].get((ns or "", name))
            if cur is None:
                if put_body is not None and rt.create_on_update and subresource is None:
                    b = deep(put_body)
                    b.setdefault("metadata", {}).pop("resourceVersion", None)
                    return self.create(rt, ns, b, dry_run, version), True
                raise errors.not_found(rt.group, rt.plural, name)
            new = mutate(deep(cur))
            if not isinstance(new, dict):
                raise errors.bad_request("the object is not a JSON object")
            md = new.get("metadata")
            if not isinstance(md, dict):
                md = new["metadata"] = {}
            if md.get("name", name) != name:
                raise errors.bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                         % (md.get("name"), name))
            if rt.namespaced and md.get("namespace") and md["namespace"] != ns:
                raise errors.bad_request("the namespace of the provided object does not match the namespace "
                                         "sent on the request")
            if md.get("uid") and md["uid"] != cur["metadata"].get("uid"):
                raise errors.conflict(rt.group, rt.plural, name,
                                      "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                                      % (md["uid"], cur["metadata"].get("uid")))
            want_rv = md.get("resourceVersion")
            if want_rv not in (None, "") and str(want_rv) != cur["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.group, rt.plural, name)
            if (rt.group, rt.plural) == ("", "namespaces") and subresource == "finalize":
                out = deep(cur)
                out["spec"] = dict(out.get("spec") or {}, finalizers=(new.get("spec") or {}).get("finalizers") or [])
            elif subresource == "status":
                out = deep(cur)
                if "status" in new:
                    out["status"] = new["status"]
                else:
                    out.pop("status", None)
                if rt.crd is not None:
                    out = self._prune_cr(rt, out)
                else:
                    out = omit_empty(rt, out)
                    self._decode_fields(rt, out)
            else:
                out = new
                if "status" in rt.sub:
                    if "status" in cur:
                        out["status"] = deep(cur["status"])
                    else:
                        out.pop("status", None)
                out["apiVersion"] = cur["apiVersion"]
                out["kind"] = cur["kind"]
                out = self._prepare_new(rt, out, ns)
                if rt.crd is None:
                    apply_defaults(rt, out)
            omd = out["metadata"]
            cmd = cur["metadata"]
            for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "generation", "selfLink", "generateName"):
                if f in cmd:
                    omd[f] = cmd[f]
                else:
                    omd.pop(f, None)
            omd["name"] = name
            if rt.namespaced:
                omd["namespace"] = ns
            omd["resourceVersion"] = cmd["resourceVersion"]
            if rt.key == ("", "nodes"):
                drop_node_config_fields(out, cur)
            errs = validate(rt, out, cur, False, status_only=(subresource == "status"))
            if cmd.get("deletionTimestamp"):
                added = [f for f in omd.get("finalizers") or [] if f not in (cmd.get("finalizers") or [])]
                if added:
                    errs.append(errors.FieldError("metadata.finalizers", "Forbidden",
                                                  detail="no new finalizers can be added if the object is "
                                                         "being deleted, found new finalizers %s"
                                                         % json.dumps(added)))
            if errs:
                raise errors.invalid(rt.group, rt.kind, name, errs)
            if rt.generation and spec_of(rt, out) != spec_of(rt, cur):
                omd["generation"] = cmd.get("generation", 0) + 1
            if not omd.get("finalizers"):
                omd.pop("finalizers", None)
            out = self._order(out)
            # Validating admission sees every update, a no-op one too (the real registry calls it
            # inside GuaranteedUpdate before storage finds nothing to write).
            if self.admission:
                self.admission("UPDATE", rt, subresource, ns, name, out, cur, dry_run)
            if out == cur:
                return cur, False  # a no-op write changes nothing, not even resourceVersion
            if dry_run:
                return out, False
            if cmd.get("deletionTimestamp") and not omd.get("finalizers"):
                self._commit(rt, "DELETED", (ns or "", name), None, cur)
                return self.objects_removed_result(rt, out), False
            return self._commit(rt, "MODIFIED", (ns or "", name), out, cur), False

    @staticmethod
    def objects_removed_result(rt, obj):
        return obj

    def delete(self, rt, ns, name, opts=None, dry_run=False):
        """Returns (object or Status, deleted_now)."""
        opts = opts or {}
        with self.lock:
            cur = self.objects[rt.key].get((ns or "", name))
            if cur is None:
                raise errors.not_found(rt.group, rt.plural, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != cur["metadata"].get("uid"):
                raise errors.conflict(rt.group, rt.plural, name,
                                      "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                                      % (pre["uid"], cur["metadata"].get("uid")))
            if pre.get("resourceVersion") and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.group, rt.plural, name,
                                      "Precondition failed: ResourceVersion in precondition: %s, "
                                      "ResourceVersion in object meta: %s"
                                      % (pre["resourceVersion"], cur["metadata"]["resourceVersion"]))
            md = cur["metadata"]
            if self.admission and not md.get("deletionTimestamp"):
                self.admission("DELETE", rt, None, ns, name, None, cur, dry_run)
            grace = opts.get("gracePeriodSeconds")
            graceful = ((rt.group, rt.kind) == ("", "Pod") and (cur.get("spec") or {}).get("nodeName")
                        and grace != 0 and not (cur.get("status") or {}).get("phase") in ("Succeeded", "Failed"))
            policy = opts.get("propagationPolicy")
            if policy is None and opts.get("orphanDependents") is not None:
                policy = "Orphan" if opts["orphanDependents"] else "Background"
            if policy not in (None, "Foreground", "Background", "Orphan"):
                raise errors.invalid("meta.k8s.io", "DeleteOptions", "", [errors.FieldError(
                    "propagationPolicy", "Unsupported value", policy,
                    'supported values: "Foreground", "Background", "Orphan", nil')])
            # Foreground and Orphan are finalizers the garbage collector removes once it has
            # deleted, or released, the dependents.
            gc_fin = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}.get(policy)
            if md.get("finalizers") or graceful or gc_fin or rt.key == ("", "namespaces"):
                if md.get("deletionTimestamp") and not (gc_fin and gc_fin not in (md.get("finalizers") or [])):
                    return cur, False
                out = deep(cur)
                omd = out["metadata"]
                if gc_fin:
                    omd["finalizers"] = [f for f in omd.get("finalizers") or []
                                         if f not in ("foregroundDeletion", "orphan")] + [gc_fin]
                if md.get("deletionTimestamp"):
                    return self._commit(rt, "MODIFIED", (ns or "", name), out, cur), False
                if graceful:
                    g = grace if grace is not None else (cur.get("spec") or {}).get(
                        "terminationGracePeriodSeconds", 30)
                    omd["deletionTimestamp"] = (datetime.datetime.now(datetime.timezone.utc)
                                                + datetime.timedelta(seconds=g)).strftime("%Y-%m-%dT%H:%M:%SZ")
                    omd["deletionGracePeriodSeconds"] = g
                else:
                    omd["deletionTimestamp"] = now_iso()
                    omd["deletionGracePeriodSeconds"] = 0
                if rt.generation:
                    omd["generation"] = md.get("generation", 0) + 1
                if rt.key == ("", "namespaces"):
                    out.setdefault("status", {})["phase"] = "Terminating"
                if dry_run:
                    return out, False
                return self._commit(rt, "MODIFIED", (ns or "", name), out, cur), False
            if dry_run:
                return cur, True
            gone = self._commit(rt, "DELETED", (ns or "", name), None, cur)
            return gone, True

    def remove_finalizer(self, rt, ns, name, fin):
        def mut(o):
            md = o["metadata"]
            md["finalizers"] = [f for f in md.get("finalizers") or [] if f != fin]
            md.pop("resourceVersion", None)
            return o
        try:
            return self.update(rt, ns, name, mut)
        except ApiError:
            return None

    def set_status(self, rt, ns, name, fn):
        def mut(o):
            fn(o)
            o["metadata"].pop("resourceVersion", None)
            return o
        return self.update(rt, ns, name, mut, subresource="status" if "status" in rt.sub else None)
