"""Resource types served by the fake API server: discovery data, scope, subresources, which
field selectors each accepts, defaulting and validation worded like the real server's."""
import base64
import binascii
import re

from .errors import FieldError
from .selection import label_value_errors, qualified_name_errors

_SUB_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_1035_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_CONFIGKEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                 "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                 "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
               "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def _name_check(maxlen, regex, msg):
    def check(name, prefix=False):
        errs = []
        if len(name) > maxlen:
            errs.append("must be no more than %d characters" % maxlen)
        if not regex.match(name):
            errs.append(msg)
        return errs
    return check


name_subdomain = _name_check(253, _SUB_RE, SUBDOMAIN_MSG)
name_label = _name_check(63, _LABEL_RE, LABEL_MSG)
name_1035 = _name_check(63, _1035_RE, DNS1035_MSG)


def name_path_segment(name, prefix=False):
    if name in (".", ".."):
        return ["may not be '%s'" % name]
    for c in ("/", "%"):
        if c in name:
            return ["may not contain '%s'" % c]
    return []


class RType:
    def __init__(self, group, version, plural, kind, namespaced, singular=None, short=(), categories=(),
                 sub=(), generation=False, create_on_update=False, return_deleted=False,
                 name_check=name_subdomain, fields=(), verbs=None, crd=None, versions=None):
        self.group = group
        self.version = version          # the version objects are stored and listed in
        self.versions = versions or [version]
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.singular = singular or kind.lower()
        self.short = list(short)
        self.categories = list(categories)
        self.sub = set(sub)
        self.generation = generation
        self.create_on_update = create_on_update
        self.return_deleted = return_deleted
        self.name_check = name_check
        self.fields = ["metadata.name"] + (["metadata.namespace"] if namespaced else []) + list(fields)
        self.verbs = verbs or ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        self.crd = crd                  # the CRD object for custom resources

    @property
    def key(self):
        return (self.group, self.plural)

    def api_version(self, version=None):
        v = version or self.version
        return self.group + "/" + v if self.group else v

    def list_kind(self):
        return self.kind + "List"


_ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_NO_DC = ["create", "delete", "get", "list", "patch", "update", "watch"]


def builtin_types():
    t = [
        RType("", "v1", "namespaces", "Namespace", False, short=["ns"], sub=["status", "finalize"],
              name_check=name_label, fields=["status.phase"], verbs=_NO_DC),
        RType("", "v1", "nodes", "Node", False, short=["no"], sub=["status"],
              fields=["spec.unschedulable"]),
        RType("", "v1", "pods", "Pod", True, short=["po"], categories=["all"], sub=["status", "eviction"],
              return_deleted=True,
              fields=["spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                      "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"]),
        RType("", "v1", "configmaps", "ConfigMap", True, short=["cm"]),
        RType("", "v1", "secrets", "Secret", True, fields=["type"]),
        RType("", "v1", "events", "Event", True, short=["ev"], create_on_update=True,
              fields=["involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                      "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                      "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"]),
        RType("", "v1", "serviceaccounts", "ServiceAccount", True, short=["sa"], sub=["token"]),
        RType("", "v1", "services", "Service", True, short=["svc"], categories=["all"], sub=["status"],
              name_check=name_1035, verbs=_NO_DC),
        RType("", "v1", "endpoints", "Endpoints", True, short=["ep"], singular="endpoints", create_on_update=True),
        RType("apps", "v1", "deployments", "Deployment", True, short=["deploy"], categories=["all"],
              sub=["status", "scale"], generation=True),
        RType("apps", "v1", "daemonsets", "DaemonSet", True, short=["ds"], categories=["all"],
              sub=["status"], generation=True),
        RType("apps", "v1", "replicasets", "ReplicaSet", True, short=["rs"], categories=["all"],
              sub=["status", "scale"], generation=True),
        RType("apps", "v1", "statefulsets", "StatefulSet", True, short=["sts"], categories=["all"],
              sub=["status", "scale"], generation=True),
        RType("batch", "v1", "jobs", "Job", True, categories=["all"], sub=["status"], generation=True),
        RType("batch", "v1", "cronjobs", "CronJob", True, short=["cj"], categories=["all"], sub=["status"],
              generation=True),
        RType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=["pc"]),
        RType("coordination.k8s.io", "v1", "leases", "Lease", True, create_on_update=True),
        RType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, create_on_update=True,
              name_check=name_path_segment),
        RType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, create_on_update=True,
              name_check=name_path_segment),
        RType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, create_on_update=True,
              name_check=name_path_segment),
        RType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
              create_on_update=True, name_check=name_path_segment),
        RType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, short=["pdb"],
              sub=["status"], generation=True),
        RType("events.k8s.io", "v1", "events", "Event", True, short=["ev"], create_on_update=True,
              fields=["regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
                      "reason", "reportingController", "type"]),
        RType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
              short=["crd", "crds"], categories=["api-extensions"], sub=["status"], generation=True),
        RType("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
              False, categories=["api-extensions"], sub=["status"], generation=True),
        RType("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
              "ValidatingAdmissionPolicyBinding", False, categories=["api-extensions"], generation=True),
        RType("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
              "ValidatingWebhookConfiguration", False, categories=["api-extensions"], generation=True),
        RType("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
              "MutatingWebhookConfiguration", False, categories=["api-extensions"], generation=True),
        RType("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
              verbs=["create"]),
        RType("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
              verbs=["create"]),
        RType("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
              verbs=["create"]),
        RType("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False,
              verbs=["create"]),
    ]
    return t


# Types whose objects are never stored: the server answers the create and forgets it.
VIRTUAL = {("authorization.k8s.io", "selfsubjectaccessreviews"), ("authorization.k8s.io", "selfsubjectrulesreviews"), ("authorization.k8s.io", "subjectaccessreviews"),
           ("authentication.k8s.io", "selfsubjectreviews")}


def spec_of(rt, obj):
    """The part of an object whose change bumps metadata.generation."""
    if rt.crd is not None:
        return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}
    return obj.get("spec")


# --- defaulting (the fields clients see the server fill in) ----------------------------------

def _default_container(c):
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    img = c.get("image", "")
    if "imagePullPolicy" not in c:
        tag = img.rsplit("/", 1)[-1]
        c["imagePullPolicy"] = "Always" if (":" not in tag or tag.endswith(":latest")) and "@" not in img \
            else "IfNotPresent"
    c.setdefault("resources", {})
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        pr = c.get(probe)
        if isinstance(pr, dict):
            pr.setdefault("timeoutSeconds", 1)
            pr.setdefault("periodSeconds", 10)
            pr.setdefault("successThreshold", 1)
            pr.setdefault("failureThreshold", 3)
            hg = pr.get("httpGet")
            if isinstance(hg, dict):
                hg.setdefault("scheme", "HTTP")
                hg.setdefault("path", "/")


def default_podspec(s):
    if not isinstance(s, dict):
        return
    s.setdefault("restartPolicy", "Always")
    s.setdefault("terminationGracePeriodSeconds", 30)
    s.setdefault("dnsPolicy", "ClusterFirst")
    s.setdefault("securityContext", {})
    s.setdefault("schedulerName", "default-scheduler")
    if "serviceAccountName" in s:
        s.setdefault("serviceAccount", s["serviceAccountName"])
    for key in ("containers", "initContainers"):
        for c in s.get(key) or []:
            if isinstance(c, dict):
                _default_container(c)
    for v in s.get("volumes") or []:
        if isinstance(v, dict):
            for src in ("configMap", "secret"):
                if isinstance(v.get(src), dict):
                    v[src].setdefault("defaultMode", 420)
            if isinstance(v.get("hostPath"), dict):
                v["hostPath"].setdefault("type", "")


def _default_template(spec):
    tpl = spec.get("template")
    if isinstance(tpl, dict):
        tpl.setdefault("metadata", {})
        if "creationTimestamp" not in tpl["metadata"]:
            tpl["metadata"]["creationTimestamp"] = None
        default_podspec(tpl.get("spec"))


# Kinds whose spec/status are non-pointer Go structs: always serialized, if only as {}.
_SPEC_STRUCT = {("", "Node"), ("", "Namespace"), ("", "Pod"), ("", "Service"), ("apps", "Deployment"),
                ("apps", "DaemonSet"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
                ("policy", "PodDisruptionBudget"), ("coordination.k8s.io", "Lease"),
                ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
                ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"), ("batch", "Job"),
                ("batch", "CronJob")}
_STATUS_STRUCT = {("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("batch", "Job"),
                  ("batch", "CronJob")}


def _default_job(spec, meta):
    """batch/v1 Job defaults; with the Job's UID known, the selector and template labels the
    server generates (manualSelector unset)."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    uid = (meta or {}).get("uid")
    if uid and not spec.get("manualSelector"):
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
        tmeta.setdefault("labels", {}).update({"batch.kubernetes.io/controller-uid": uid,
                                               "batch.kubernetes.io/job-name": meta.get("name", ""),
                                               "controller-uid": uid, "job-name": meta.get("name", "")})
    _default_template(spec)


def apply_defaults(rt, obj):
    k = (rt.group, rt.kind)
    if k in _SPEC_STRUCT:
        obj.setdefault("spec", {})
    if k in _STATUS_STRUCT:
        obj.setdefault("status", {})
    if k == ("", "Node"):
        st = obj.setdefault("status", {})
        st.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 0}})
        ni = st.setdefault("nodeInfo", {})
        for f in ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
                  "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture"):
            ni.setdefault(f, "")
    if k == ("apps", "DaemonSet"):
        st = obj.setdefault("status", {})
        for f in ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"):
            st.setdefault(f, 0)
    spec = obj.get("spec")
    if k == ("apps", "Deployment") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("strategy", {"type": "RollingUpdate"})
        st = spec["strategy"]
        if isinstance(st, dict) and st.get("type", "RollingUpdate") == "RollingUpdate":
            st.setdefault("type", "RollingUpdate")
            ru = st.setdefault("rollingUpdate", {})
            ru.setdefault("maxUnavailable", "25%")
            ru.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        _default_template(spec)
    elif k == ("apps", "DaemonSet") and isinstance(spec, dict):
        spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        st = spec["updateStrategy"]
        if isinstance(st, dict) and st.get("type") == "RollingUpdate":
            ru = st.setdefault("rollingUpdate", {})
            ru.setdefault("maxUnavailable", 1)
            ru.setdefault("maxSurge", 0)
        spec.setdefault("revisionHistoryLimit", 10)
        _default_template(spec)
    elif k in (("apps", "ReplicaSet"), ("apps", "StatefulSet")) and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        _default_template(spec)
    elif k == ("batch", "Job") and isinstance(spec, dict):
        _default_job(spec, obj.get("metadata"))
    elif k == ("batch", "CronJob") and isinstance(spec, dict):
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        jt = spec.get("jobTemplate")
        if isinstance(jt, dict):
            jt.setdefault("metadata", {}).setdefault("creationTimestamp", None)
            if isinstance(jt.get("spec"), dict):
                _default_job(jt["spec"], None)
    elif k == ("scheduling.k8s.io", "PriorityClass"):
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif k == ("", "Pod"):
        default_podspec(spec)
        obj.setdefault("status", {}).setdefault("phase", "Pending")
        obj["status"].setdefault("qosClass", "BestEffort")
    elif k == ("", "Service") and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for p in spec.get("ports") or []:
            if isinstance(p, dict):
                p.setdefault("protocol", "TCP")
                p.setdefault("targetPort", p.get("port"))
        obj.setdefault("status", {}).setdefault("loadBalancer", {})
    elif k == ("", "Secret"):
        obj.setdefault("type", "Opaque")
    elif k == ("", "ServiceAccount"):
        pass
    elif k == ("", "Namespace"):
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif k == ("policy", "PodDisruptionBudget"):
        obj.setdefault("status", {})
        for f, v in (("disruptionsAllowed", 0), ("currentHealthy", 0), ("desiredHealthy", 0),
                     ("expectedPods", 0)):
            obj["status"].setdefault(f, v)


_EMPTY_MAPS_OMITTED = {"labels", "annotations", "data", "binaryData", "nodeSelector", "matchLabels", "limits",
                       "requests", "capacity", "allocatable"}
_KEEP_NULL = {"creationTimestamp"}


def omit_empty(rt, obj):
    """Built-in types are Go structs whose optional fields are `omitempty`: a null, an empty list
    or an empty map stored through JSON disappears, e.g. a Node whose last taint was removed
    has no spec.taints at all. (Role/ClusterRole rules are not omitempty.)"""
    def walk(v, top=False):
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if x is None and k not in _KEEP_NULL:
                    continue
                if isinstance(x, list) and not x and not (top and k == "rules"):
                    continue
                if isinstance(x, dict) and not x and k in _EMPTY_MAPS_OMITTED:
                    continue
                out[k] = walk(x)
            return out
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return walk(obj, True)


_TIME_KEYS = {"lastTransitionTime", "lastHeartbeatTime", "lastProbeTime", "lastUpdateTime", "firstTimestamp",
              "lastTimestamp", "startedAt", "finishedAt", "startTime", "lastScaleTime", "deletionTimestamp",
              "creationTimestamp", "completionTime"}
_MICRO_KEYS = {"acquireTime", "renewTime", "eventTime", "lastObservedTime"}
_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")
_MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")


def _utc(m, frac):
    import datetime
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    tz = m.group(8)
    off = datetime.timedelta(0)
    if tz not in ("Z", "z"):
        sign = 1 if tz[0] == "+" else -1
        off = sign * datetime.timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
    us = int((m.group(7) or ".0")[1:7].ljust(6, "0"))
    t = datetime.datetime(y, mo, d, h, mi, s, us) - off
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (".%06dZ" % t.microsecond if frac else "Z")


def normalize_times(rt, obj):
    """metav1.Time fields are parsed as RFC 3339 and stored at second precision in UTC;
    metav1.MicroTime fields (Lease renewTime, Event eventTime) must carry exactly six fractional
    digits or the request fails to decode (400), as on the real server. Returns an error
    message or None."""
    err = []

    def walk(v):
        if isinstance(v, dict):
            for k, x in list(v.items()):
                if isinstance(x, str) and (k in _TIME_KEYS or k in _MICRO_KEYS):
                    m = _RFC3339.match(x)
                    if k in _MICRO_KEYS:
                        if not _MICRO.match(x) or not m:
                            what, rest = (".000000", x[19:]) if m else ("2006", x)
                            err.append('parsing time "%s" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "%s" '
                                       'as "%s"' % (x, rest, what))
                            continue
                        v[k] = _utc(m, True)
                    else:
                        if not m:
                            err.append('parsing time "%s" as "2006-01-02T15:04:05Z07:00": cannot parse "%s" as "2006"'
                                       % (x, x))
                            continue
                        v[k] = _utc(m, False)
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk({k: v for k, v in obj.items() if k != "metadata"})
    if err:
        return '%s in version "%s" cannot be handled as a %s: %s' % (rt.kind, rt.version, rt.kind, err[0])
    return None


def secret_string_data(obj):
    """stringData is write-only: merged into data (base64) and never stored."""
    sd = obj.pop("stringData", None)
    if isinstance(sd, dict):
        data = obj.setdefault("data", {}) or {}
        obj["data"] = data
        for k, v in sd.items():
            data[k] = base64.b64encode(str(v).encode()).decode()


# --- validation ------------------------------------------------------------------------------

def _labels(errs, labels, path):
    if labels is None:
        return
    if not isinstance(labels, dict):
        errs.append(FieldError(path, "Invalid value", labels, "must be a map"))
        return
    for k, v in labels.items():
        for m in qualified_name_errors(k):
            errs.append(FieldError(path, "Invalid value", k, m))
        if not isinstance(v, str):
            errs.append(FieldError(path, "Invalid value", v, "must be a string"))
            continue
        for m in label_value_errors(v):
            errs.append(FieldError(path, "Invalid value", v, m))


def validate_meta(rt, obj, create):
    errs = []
    md = obj.get("metadata") or {}
    name = md.get("name") or ""
    if not name and not (create and md.get("generateName")):
        errs.append(FieldError("metadata.name", "Required value", detail="name or generateName is required"))
    elif name:
        for m in rt.name_check(name):
            errs.append(FieldError("metadata.name", "Invalid value", name, m))
    _labels(errs, md.get("labels"), "metadata.labels")
    ann = md.get("annotations")
    if ann is not None:
        if not isinstance(ann, dict):
            errs.append(FieldError("metadata.annotations", "Invalid value", ann, "must be a map"))
        else:
            total = 0
            for k, v in ann.items():
                for m in qualified_name_errors(k):
                    errs.append(FieldError("metadata.annotations", "Invalid value", k, m))
                total += len(k) + len(str(v))
            if total > 256 * 1024:
                errs.append(FieldError("metadata.annotations", "Too long", detail="must have at most 262144 bytes"))
    fins = md.get("finalizers")
    if fins:
        for i, f in enumerate(fins):
            if not isinstance(f, str):
                continue
            fe = qualified_name_errors(f)
            if fe:
                errs.append(FieldError("metadata.finalizers[%d]" % i, "Invalid value", f, fe[0]))
            elif "/" not in f and f not in ("kubernetes", "orphan", "foregroundDeletion") and rt.crd is None \
                    and rt.kind != "Namespace":
                pass  # the real server only warns about unqualified finalizer names
    return errs


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _validate_node(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    seen = set()
    for i, t in enumerate(spec.get("taints") or []):
        p = "spec.taints[%d]" % i
        if not isinstance(t, dict):
            errs.append(FieldError(p, "Invalid value", t, "must be an object"))
            continue
        key = t.get("key") or ""
        if not key:
            errs.append(FieldError(p + ".key", "Required value"))
        else:
            for m in qualified_name_errors(key):
                errs.append(FieldError(p + ".key", "Invalid value", key, m))
        if t.get("value"):
            for m in label_value_errors(t["value"]):
                errs.append(FieldError(p + ".value", "Invalid value", t["value"], m))
        eff = t.get("effect") or ""
        if not eff:
            errs.append(FieldError(p + ".effect", "Required value"))
        elif eff not in _EFFECTS:
            errs.append(FieldError(p + ".effect", "Unsupported value", eff,
                                   'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'))
        if (key, eff) in seen:
            errs.append(FieldError("spec.taints", "Duplicate value", t,
                                   "taints must be unique by key and effect pair"))
        seen.add((key, eff))
    if old is not None:
        ospec = old.get("spec") or {}
        if ospec.get("providerID") and spec.get("providerID") != ospec.get("providerID"):
            errs.append(FieldError("spec.providerID", "Forbidden",
                                   detail='node updates may not change providerID except from "" to valid'))
        if ospec.get("podCIDR") and spec.get("podCIDR") != ospec.get("podCIDR"):
            errs.append(FieldError("spec.podCIDRs", "Forbidden",
                                   detail='node updates may not change podCIDR except from "" to valid'))
    return errs


_ADDR_TYPES = ("Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS")


def _validate_node_status(obj):
    errs = []
    for i, a in enumerate((obj.get("status") or {}).get("addresses") or []):
        if not isinstance(a, dict):
            continue
        if a.get("type") not in _ADDR_TYPES:
            errs.append(FieldError("status.addresses[%d].type" % i, "Unsupported value", a.get("type"),
                                   'supported values: "ExternalDNS", "ExternalIP", "Hostname", '
                                   '"InternalDNS", "InternalIP"'))
    return errs


def _validate_configmap(obj, old):
    errs = []
    for field in ("data", "binaryData"):
        for k in (obj.get(field) or {}):
            if not _CONFIGKEY_RE.match(k) or len(k) > 253:
                errs.append(FieldError(field + "[%s]" % k, "Invalid value", k,
                                       "a valid config key must consist of alphanumeric characters, '-', '_' "
                                       "or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used "
                                       "for validation is '[-._a-zA-Z0-9]+')"))
    if old is not None and old.get("immutable"):
        for field in ("data", "binaryData"):
            if obj.get(field) != old.get(field):
                errs.append(FieldError(field, "Forbidden",
                                       detail="field is immutable when `immutable` is set"))
        if not obj.get("immutable"):
            errs.append(FieldError("immutable", "Forbidden", detail="field is immutable when `immutable` is set"))
    return errs


def _validate_secret(obj, old):
    errs = _validate_configmap({"data": obj.get("data")}, None)
    if old is not None and old.get("type") != obj.get("type"):
        errs.append(FieldError("type", "Invalid value", obj.get("type"), "field is immutable"))
    if old is not None and old.get("immutable"):
        if obj.get("data") != old.get("data"):
            errs.append(FieldError("data", "Forbidden", detail="field is immutable when `immutable` is set"))
    return errs


def _validate_podspec(spec, path):
    errs = []
    if not isinstance(spec, dict):
        return [FieldError(path, "Required value")]
    cs = spec.get("containers")
    if not cs:
        errs.append(FieldError(path + ".containers", "Required value"))
    names = set()
    for i, c in enumerate(cs or []):
        p = "%s.containers[%d]" % (path, i)
        if not isinstance(c, dict):
            continue
        n = c.get("name") or ""
        if not n:
            errs.append(FieldError(p + ".name", "Required value"))
        else:
            for m in name_label(n):
                errs.append(FieldError(p + ".name", "Invalid value", n, m))
            if n in names:
                errs.append(FieldError(p + ".name", "Duplicate value", n))
            names.add(n)
        if not c.get("image"):
            errs.append(FieldError(p + ".image", "Required value"))
    return errs


def _selector_matches(sel, labels):
    if not isinstance(sel, dict):
        return False
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        op, k, vals = e.get("operator"), e.get("key"), e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def _validate_workload(obj, old):
    errs = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("spec", "Required value")]
    sel = spec.get("selector")
    if not sel:
        errs.append(FieldError("spec.selector", "Required value"))
    elif not (sel.get("matchLabels") or sel.get("matchExpressions")):
        errs.append(FieldError("spec.selector", "Invalid value", sel, "empty selector is invalid for deployment"))
    tpl = spec.get("template") or {}
    tl = (tpl.get("metadata") or {}).get("labels") or {}
    if sel and not _selector_matches(sel, tl):
        errs.append(FieldError("spec.template.metadata.labels", "Invalid value", tl,
                               "`selector` does not match template `labels`"))
    _labels(errs, (tpl.get("metadata") or {}).get("labels"), "spec.template.metadata.labels")
    errs += _validate_podspec(tpl.get("spec"), "spec.template.spec")
    if old is not None and (old.get("spec") or {}).get("selector") != sel:
        errs.append(FieldError("spec.selector", "Invalid value", sel, "field is immutable"))
    r = spec.get("replicas")
    if isinstance(r, int) and r < 0:
        errs.append(FieldError("spec.replicas", "Invalid value", r, "must be greater than or equal to 0"))
    return errs


def _validate_lease(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    d = spec.get("leaseDurationSeconds")
    if d is not None and (not isinstance(d, int) or d <= 0):
        errs.append(FieldError("spec.leaseDurationSeconds", "Invalid value", d, "must be greater than 0"))
    t = spec.get("leaseTransitions")
    if t is not None and isinstance(t, int) and t < 0:
        errs.append(FieldError("spec.leaseTransitions", "Invalid value", t, "must be greater than or equal to 0"))
    return errs


def _validate_rbac_rules(obj, old):
    errs = []
    for i, r in enumerate(obj.get("rules") or []):
        if not isinstance(r, dict):
            continue
        p = "rules[%d]" % i
        if not r.get("verbs"):
            errs.append(FieldError(p + ".verbs", "Required value", detail="verbs must contain at least one value"))
        if r.get("nonResourceURLs"):
            if obj.get("kind") == "Role" or r.get("resources") or r.get("apiGroups"):
                if obj.get("kind") == "Role":
                    errs.append(FieldError(p + ".nonResourceURLs", "Invalid value", r["nonResourceURLs"],
                                           "namespaced rules cannot apply to non-resource URLs"))
                else:
                    errs.append(FieldError(p + ".nonResourceURLs", "Invalid value", r["nonResourceURLs"],
                                           "rules cannot apply to both regular resources and non-resource URLs"))
        elif not r.get("resources"):
            errs.append(FieldError(p + ".resources", "Required value",
                                   detail="resource rules must supply at least one resource"))
        elif r.get("apiGroups") is None:
            errs.append(FieldError(p + ".apiGroups", "Required value",
                                   detail="resource rules must supply at least one api group"))
    return errs


def _validate_binding(obj, old):
    errs = []
    ref = obj.get("roleRef") or {}
    if not ref.get("name"):
        errs.append(FieldError("roleRef.name", "Required value"))
    if ref.get("kind") not in ("Role", "ClusterRole"):
        errs.append(FieldError("roleRef.kind", "Unsupported value", ref.get("kind"),
                               'supported values: "Role", "ClusterRole"'))
    if obj.get("kind") == "ClusterRoleBinding" and ref.get("kind") == "Role":
        errs.append(FieldError("roleRef.kind", "Unsupported value", "Role", 'supported values: "ClusterRole"'))
    if old is not None and (old.get("roleRef") or {}) != ref:
        errs.append(FieldError("roleRef", "Invalid value", ref, "cannot change roleRef"))
    for i, s in enumerate(obj.get("subjects") or []):
        if not isinstance(s, dict):
            continue
        if s.get("kind") not in ("User", "Group", "ServiceAccount"):
            errs.append(FieldError("subjects[%d].kind" % i, "Unsupported value", s.get("kind"),
                                   'supported values: "Group", "ServiceAccount", "User"'))
        if not s.get("name"):
            errs.append(FieldError("subjects[%d].name" % i, "Required value"))
        if s.get("kind") == "ServiceAccount" and not s.get("namespace") and obj.get("kind") == "ClusterRoleBinding":
            errs.append(FieldError("subjects[%d].namespace" % i, "Required value"))
    return errs


def _validate_event(obj, old):
    """legacyValidateEvent (core/v1) and the events.k8s.io/v1 create rules."""
    errs = []
    md = obj.get("metadata") or {}
    ns = md.get("namespace", "")
    new_api = obj.get("apiVersion") == "events.k8s.io/v1"
    ref_field = "regarding" if new_api else "involvedObject"
    ctl_field = "reportingController" if new_api else "reportingComponent"
    ref = obj.get(ref_field) or {}
    ref_ns = ref.get("namespace") or ""
    if new_api and not obj.get("eventTime") and old is None:
        errs.append(FieldError("eventTime", "Required value"))
    if not obj.get("eventTime"):
        if (not ref_ns and ns not in ("", "default")) or (ref_ns and ns != ref_ns):
            errs.append(FieldError(ref_field + ".namespace", "Invalid value", ref_ns, "does not match event.namespace"))
    else:
        if not ref_ns and ns not in ("default", "kube-system"):
            errs.append(FieldError(ref_field + ".namespace", "Invalid value", ref_ns, "does not match event.namespace"))
        ctl = obj.get(ctl_field) or ""
        if not ctl:
            errs.append(FieldError(ctl_field, "Required value"))
        else:
            for m in qualified_name_errors(ctl):
                errs.append(FieldError(ctl_field, "Invalid value", ctl, m))
        inst = obj.get("reportingInstance") or ""
        if not inst:
            errs.append(FieldError("reportingInstance", "Required value"))
        elif len(inst) > 128:
            errs.append(FieldError("reportingInstance", "Invalid value", "", "can have at most 128 characters"))
        if not obj.get("action"):
            errs.append(FieldError("action", "Required value"))
        if not obj.get("reason"):
            errs.append(FieldError("reason", "Required value"))
    note = obj.get("note" if new_api else "message") or ""
    if len(note) > 1024 and obj.get("eventTime"):
        errs.append(FieldError("note" if new_api else "message", "Invalid value", "",
                               "can have at most 1024 characters"))
    if new_api and obj.get("type") not in ("Normal", "Warning"):
        errs.append(FieldError("type", "Invalid value", obj.get("type") or "",
                               "has invalid value: %s" % (obj.get("type") or "")))
    return errs


def _validate_crd(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    name = (obj.get("metadata") or {}).get("name", "")
    if not group:
        errs.append(FieldError("spec.group", "Required value"))
    elif "." not in group:
        errs.append(FieldError("spec.group", "Invalid value", group, "should be a domain with at least one dot"))
    if not names.get("plural"):
        errs.append(FieldError("spec.names.plural", "Required value"))
    if not names.get("kind"):
        errs.append(FieldError("spec.names.kind", "Required value"))
    if names.get("plural") and group and name != names["plural"] + "." + group:
        errs.append(FieldError("metadata.name", "Invalid value", name,
                               "must be spec.names.plural+\".\"+spec.group"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errs.append(FieldError("spec.scope", "Unsupported value", spec.get("scope"),
                               'supported values: "Cluster", "Namespaced"'))
    vers = spec.get("versions") or []
    if not vers:
        errs.append(FieldError("spec.versions", "Invalid value", vers, "must have exactly one version marked as storage version"))
    elif sum(1 for v in vers if isinstance(v, dict) and v.get("storage")) != 1:
        errs.append(FieldError("spec.versions", "Invalid value", vers, "must have exactly one version marked as storage version"))
    for i, v in enumerate(vers):
        if isinstance(v, dict) and not (v.get("schema") or {}).get("openAPIV3Schema"):
            errs.append(FieldError("spec.versions[%d].schema.openAPIV3Schema" % i, "Required value",
                                   detail="schemas are required"))
    if old is not None:
        os_ = old.get("spec") or {}
        if os_.get("scope") != spec.get("scope"):
            errs.append(FieldError("spec.scope", "Invalid value", spec.get("scope"), "field is immutable"))
        if os_.get("group") != spec.get("group"):
            errs.append(FieldError("spec.group", "Invalid value", spec.get("group"), "field is immutable"))
    return errs


def _validate_vap(obj, old):
    from .cel import CelError, compile_expr
    errs = []
    spec = obj.get("spec") or {}
    for field in ("matchConditions", "variables", "validations"):
        for i, item in enumerate(spec.get(field) or []):
            if not isinstance(item, dict):
                continue
            for key in ("expression", "messageExpression"):
                expr = item.get(key)
                if expr is None:
                    if key == "expression":
                        errs.append(FieldError("spec.%s[%d].expression" % (field, i), "Required value"))
                    continue
                try:
                    compile_expr(expr)
                except CelError as e:
                    errs.append(FieldError("spec.%s[%d].%s" % (field, i, key), "Invalid value", expr,
                                           "compilation failed: ERROR: <input>: %s" % e))
    if spec.get("failurePolicy") not in (None, "Fail", "Ignore"):
        errs.append(FieldError("spec.failurePolicy", "Unsupported value", spec.get("failurePolicy"),
                               'supported values: "Fail", "Ignore"'))
    return errs


def _validate_vapb(obj, old):
    errs = []
    spec = obj.get("spec") or {}
    if not spec.get("policyName"):
        errs.append(FieldError("spec.policyName", "Required value"))
    acts = spec.get("validationActions") or []
    if not acts:
        errs.append(FieldError("spec.validationActions", "Required value"))
    for i, a in enumerate(acts):
        if a not in ("Deny", "Warn", "Audit"):
            errs.append(FieldError("spec.validationActions[%d]" % i, "Unsupported value", a,
                                   'supported values: "Audit", "Deny", "Warn"'))
    return errs


VALIDATORS = {
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): _validate_vap,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): _validate_vapb,
    ("", "Node"): _validate_node,
    ("", "ConfigMap"): _validate_configmap,
    ("", "Secret"): _validate_secret,
    ("", "Event"): _validate_event,
    ("events.k8s.io", "Event"): _validate_event,
    ("apps", "Deployment"): _validate_workload,
    ("apps", "DaemonSet"): _validate_workload,
    ("apps", "ReplicaSet"): _validate_workload,
    ("apps", "StatefulSet"): _validate_workload,
    ("coordination.k8s.io", "Lease"): _validate_lease,
    ("rbac.authorization.k8s.io", "Role"): _validate_rbac_rules,
    ("rbac.authorization.k8s.io", "ClusterRole"): _validate_rbac_rules,
    ("rbac.authorization.k8s.io", "RoleBinding"): _validate_binding,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _validate_binding,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _validate_crd,
}

STATUS_VALIDATORS = {
    ("", "Node"): _validate_node_status,
}


def validate(rt, obj, old, create, status_only=False):
    errs = validate_meta(rt, obj, create)
    if status_only:
        fn = STATUS_VALIDATORS.get((rt.group, rt.kind))
        errs += fn(obj) if fn else []
        if rt.crd is not None:
            from .schema import validate_cr
            errs += validate_cr(rt, obj)
        return errs
    if (rt.group, rt.kind) == ("", "Pod"):
        errs += _validate_podspec(obj.get("spec"), "spec")
    fn = VALIDATORS.get((rt.group, rt.kind))
    if fn:
        errs += fn(obj, old)
    if (rt.group, rt.kind) == ("", "Node"):
        errs += _validate_node_status(obj)
    if rt.crd is not None:
        from .schema import validate_cr
        errs += validate_cr(rt, obj)
    return errs


def decode_secret_data(obj):
    """Secret data must be base64; the real server fails decoding with 400 before validation."""
    for k, v in (obj.get("data") or {}).items():
        if not isinstance(v, str):
            return "json: cannot unmarshal %s into Go struct field Secret.data of type []uint8" % type(v).__name__
        try:
            base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            return "illegal base64 data at input byte 0"
    return None
