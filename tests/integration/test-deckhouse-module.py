#!/usr/bin/env python3
"""deckhouse/modules/030-cloud-provider-cloudnode renders with the real helm v3 (tests/helm/build.sh)
over every x-examples entry of openapi/values.yaml and hand-written value sets, without
Deckhouse's helm_lib; `helm lint` is clean; the rendered objects, the capi/ templates and an
InstanceClass of every instance class are applied with strict field validation to the real
kube-apiserver holding the module's CRDs, which judges them against the Kubernetes schemas and
the CRDs' OpenAPI schemas. The capi/ templates are rendered as node-manager renders them, from
the Secrets the module publishes. crds/ and crds/external are laid out as Deckhouse's
cloud-provider modules lay them out; the Cluster API core CRDs pinned in deckhouse/capi-core-crds
are valid, name their source, are that release's files unchanged, and are served by the fake and
the real API server. The Proxmox VE cloud.conf of the credentials Secret is read by
cloudnode-initializer against the fake Proxmox VE API."""
import base64
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import yaml  # noqa: E402
import d8module  # noqa: E402
# Before realkube, which puts tests/ (and so the fake cloud's server package) first on the path.
import cninit  # noqa: E402
import fakecloud  # noqa: E402
import fakekubeclient  # noqa: E402
import realkube  # noqa: E402
from cntap import Tap, src, wait_for  # noqa: E402

NS = "d8-cloud-provider-cloudnode"
RELEASE = "cloud-provider-cloudnode"


def value_sets():
    """(name, module values) to render: the x-examples and hand-written sets."""
    examples = d8module.load("values.yaml")["x-examples"]
    out = [("x-examples[%d]" % i, ex) for i, ex in enumerate(examples)]
    # The configuration examples, each over the first values example.
    for i, cfg in enumerate(d8module.load("config-values.yaml")["x-examples"]):
        if cfg:
            out.append(("config-values x-examples[%d]" % i, dict(copy.deepcopy(examples[0]), **cfg)))
    hetzner = copy.deepcopy(examples[0])
    pcc = hetzner["internal"]["providerClusterConfiguration"]
    pcc["provider"]["endpoint"] = "https://api.hetzner.example.com/v1"
    pcc["masterNodeGroup"]["replicas"] = 1
    pcc["nodeGroups"] = []
    hetzner["cni"] = "simple-bridge"
    # Deckhouse's vertical-pod-autoscaler module on: the Deployments get their VPAs.
    hetzner["global"] = {"enabledModules": d8module.GLOBAL["enabledModules"] + ["vertical-pod-autoscaler"]}
    out.append(("hetzner, one master, custom endpoint", hetzner))
    openstack = copy.deepcopy(examples[1])
    creds = openstack["internal"]["providerClusterConfiguration"]["provider"]["credentials"]
    for k in ("applicationCredentialID", "applicationCredentialSecret"):
        creds.pop(k)
    # A password a template would break if it pasted it into a file.
    creds.update(username="admin", password='p"a\nss: [x]\n# {{ .Values }}')
    openstack["internal"]["providerClusterConfiguration"]["nodeGroups"] = [
        {"name": "gpu", "replicas": 0, "instanceClass": {"openstack": {
            "flavor": "g1.xlarge", "image": "debian-12", "securityGroups": ["default", "gpu"]}}}]
    out.append(("openstack, password, node group", openstack))
    pve = copy.deepcopy(examples[2])
    creds = pve["internal"]["providerClusterConfiguration"]["provider"]["credentials"]
    for k in ("tokenID", "tokenSecret", "fingerprint"):
        creds.pop(k)
    # A password that would add settings to a cloud.conf it were pasted into.
    creds.update(username="root@pam", password='p"a\\ss\n[Global]\nurl = "https://evil.example.com"\t# {{ .Values }}')
    pve["internal"]["providerClusterConfiguration"]["masterNodeGroup"]["replicas"] = 1
    out.append(("proxmoxve, password, no fingerprint", pve))
    return out


def cloud_conf(text):
    """The [Global] settings of a cloud.conf as cloudnode's reader (lib/provider/cloud-config.c) reads
    it: one setting per line, a quoted value with the escapes \\\\ \\" \\n \\t; None when it is not
    one [Global] section of such lines."""
    lines = text.split("\n")
    if lines[0] != "[Global]" or lines[-1] != "":
        return None
    out = {}
    for line in lines[1:-1]:
        key, sep, value = line.partition(" = ")
        if not sep or not value.startswith('"') or not value.endswith('"') or key in out:
            return None
        v, i, body = [], 0, value[1:-1]
        while i < len(body):
            c = body[i]
            if c == '"':
                return None
            if c == "\\":
                i += 1
                esc = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}.get(body[i:i + 1])
                if esc is None:
                    return None
                c = esc
            v.append(c)
            i += 1
        out[key] = "".join(v)
    return out


def full_values(values):
    v = d8module.with_defaults("values.yaml", {k: x for k, x in values.items() if k != "global"})
    v["global"] = dict(copy.deepcopy(d8module.GLOBAL), **values.get("global", {}))
    return v


def module_values(values):
    """The module's own values (what its schema judges), without the global ones of a set."""
    return {k: x for k, x in values.items() if k != "global"}


def helm_run(t, helm, tmp, *args):
    env = dict(os.environ, HOME=tmp, HELM_CACHE_HOME=os.path.join(tmp, "cache"),
               HELM_CONFIG_HOME=os.path.join(tmp, "config"), HELM_DATA_HOME=os.path.join(tmp, "data"))
    return subprocess.run([helm] + list(args), capture_output=True, text=True, env=env, timeout=60)


def write_values(tmp, name, values):
    path = os.path.join(tmp, "values-%s.yaml" % abs(hash(name)))
    with open(path, "w") as f:
        yaml.safe_dump(values, f)
    return path


def by(objs, kind, name):
    return next((o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name), None)


def check_objects(t, name, values, objs):
    pcc = values["internal"]["providerClusterConfiguration"]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    for want in [("Namespace", NS), ("Deployment", "cloud-controller-manager"), ("Deployment", "capi-controller-manager"),
                 ("PodDisruptionBudget", "cloud-controller-manager"), ("Secret", "cloudnode-credentials"),
                 ("Secret", "d8-node-manager-cloud-provider"), ("Secret", "d8-cni-configuration"),
                 ("Secret", "deckhouse-registry")]:
        t.ok(want in kinds, "%s: renders %s %s" % (name, *want))
    creds = by(objs, "Secret", "cloudnode-credentials")
    env = {k: base64.b64decode(v).decode() for k, v in (creds or {}).get("data", {}).items()}
    c = pcc["provider"]["credentials"]
    if pcc["provider"]["name"] == "hetzner":
        want = {"HCLOUD_TOKEN": c["token"]}
        if "endpoint" in pcc["provider"]:
            want["HCLOUD_ENDPOINT"] = pcc["provider"]["endpoint"]
    elif pcc["provider"]["name"] == "proxmoxve":
        want = {"url": pcc["provider"]["endpoint"], "region": pcc["provider"]["region"]}
        for k, setting in (("tokenID", "token-id"), ("tokenSecret", "token-secret"), ("username", "username"),
                           ("password", "password"), ("fingerprint", "fingerprint")):
            if k in c:
                want[setting] = c[k]
        t.eq(sorted(env), ["cloud.conf"], "%s: the credentials Secret holds a cloud.conf only" % name)
        env = cloud_conf(env.get("cloud.conf", ""))
    else:
        want = {"OS_AUTH_URL": pcc["provider"]["endpoint"], "OS_PROJECT_ID": c["projectID"],
                "OS_REGION_NAME": pcc["provider"]["region"]}
        for k, e in (("username", "OS_USERNAME"), ("password", "OS_PASSWORD"),
                     ("applicationCredentialID", "OS_APPLICATION_CREDENTIAL_ID"),
                     ("applicationCredentialSecret", "OS_APPLICATION_CREDENTIAL_SECRET")):
            if k in c:
                want[e] = c[k]
    t.eq(env, want, "%s: the credentials Secret holds exactly the provider's variables, byte for byte" % name)
    secrets = [v for v in c.values()]
    plain = json.dumps([o for o in objs if o["kind"] != "Secret"])
    t.ok(not any(s in plain for s in secrets), "%s: no credential outside the Secret's data" % name)
    regs = [by(objs, "Secret", n) for n in ("d8-node-manager-cloud-provider", "d8-node-manager-cloud-provider-cloudnode")]
    t.ok(all(r and r["metadata"]["labels"].get("cloud-provider.deckhouse.io/registration") == "" and
             r["metadata"]["labels"].get("cloud-provider.deckhouse.io/name") == "cloudnode" for r in regs)
         and regs[0]["data"] == regs[1]["data"],
         "%s: the registration under the fixed and the provider's name, labelled, the same data" % name)
    reg = decoded(regs[0])
    with open(os.path.join(d8module.MODULE, "crds", "cloudnodeinstanceclass.yaml")) as f:
        storage = next(v["name"] for v in yaml.safe_load(f)["spec"]["versions"] if v["storage"])
    subtree = {"provider": pcc["provider"]["name"], "sshPublicKey": pcc["sshPublicKey"]}
    subtree.update({k: pcc["provider"][k] for k in ("region", "endpoint") if k in pcc["provider"]})
    t.eq((reg.get("type"), reg.get("region"), reg.get("instanceClassKind"), reg.get("instanceClassAPIVersion"),
          reg.get("capiClusterKind"), reg.get("capiClusterName"), reg.get("capiMachineTemplateKind"), reg.get("zones"),
          reg.get("sshPublicKey"), reg.get("cloudnode")),
         ("cloudnode", pcc["provider"].get("region", "default"), "CloudnodeInstanceClass", storage, "CloudnodeCluster",
          "cloudnode", "CloudnodeMachineTemplate", values["internal"]["providerDiscoveryData"].get("zones", []),
          pcc["sshPublicKey"], subtree), "%s: registration data for node-manager" % name)
    leaves = [v for v in reg.values() if isinstance(v, str)] + [v for v in reg["cloudnode"].values()]
    t.ok(not set(secrets) & set(leaves), "%s: no credential in the registration" % name)
    capi = by(objs, "Secret", "d8-cloud-provider-cloudnode-capi")
    files = {}
    for n in os.listdir(os.path.join(d8module.MODULE, "capi")):
        with open(os.path.join(d8module.MODULE, "capi", n), "rb") as f:
            files[n] = base64.b64encode(f.read()).decode()
    t.ok(capi and capi["metadata"]["namespace"] == "kube-system" and capi["data"] == files and
         capi["metadata"]["labels"].get("cloud-provider.deckhouse.io/ephemeral-nodes-templates") == "capi" and
         capi["metadata"]["labels"].get("cloud-provider.deckhouse.io/name") == "cloudnode",
         "%s: the capi Secret for node-manager holds the files of capi/, labelled" % name)
    cni = by(objs, "Secret", "d8-cni-configuration")
    t.eq(base64.b64decode(cni["data"]["cni"]).decode() if cni else None, values.get("cni", "cilium"),
         "%s: the CNI Secret" % name)
    vpa_on = "vertical-pod-autoscaler" in full_values(values)["global"]["enabledModules"]
    t.eq(sorted(o["spec"]["targetRef"]["name"] for o in objs if o["kind"] == "VerticalPodAutoscaler"),
         ["capi-controller-manager", "cloud-controller-manager"] if vpa_on else [],
         "%s: a VerticalPodAutoscaler per Deployment exactly when vertical-pod-autoscaler is on" % name)
    for d in ("cloud-controller-manager", "capi-controller-manager"):
        dep = by(objs, "Deployment", d)
        pod = dep["spec"]["template"]["spec"]
        ctr = pod["containers"][0]
        t.ok(pod["securityContext"].get("runAsNonRoot") and ctr["securityContext"]["readOnlyRootFilesystem"]
             and ctr["securityContext"]["capabilities"]["drop"] == ["ALL"]
             and not ctr["securityContext"]["allowPrivilegeEscalation"], "%s: %s is hardened" % (name, d))
        t.eq(pod.get("imagePullSecrets"), [{"name": "deckhouse-registry"}], "%s: %s pulls with the registry Secret" % (name, d))
        t.ok(ctr["image"].startswith(d8module.GLOBAL["modulesImages"]["registry"]["base"] + "@sha256:"),
             "%s: %s image by digest" % (name, d))
        t.ok("--cloud-provider=%s" % pcc["provider"]["name"] in ctr["args"]
             or "--machine-provider=%s" % pcc["provider"]["name"] in ctr["args"], "%s: %s for the cloud" % (name, d))
        # Proxmox VE reads its settings from cloud.conf only: the Secret's is mounted and named;
        # the other clouds take the Secret's keys as their environment.
        if pcc["provider"]["name"] == "proxmoxve":
            flag = "--cloud-config=" if d == "cloud-controller-manager" else "--machine-cloud-config="
            t.eq(([a for a in ctr["args"] if a.startswith(flag)], ctr.get("envFrom"), ctr.get("volumeMounts"),
                  pod.get("volumes")),
                 ([flag + "/etc/cloudnode/cloud-config/cloud.conf"], None,
                  [{"name": "cloud-config", "mountPath": "/etc/cloudnode/cloud-config", "readOnly": True}],
                  [{"name": "cloud-config", "secret": {"secretName": "cloudnode-credentials",
                                                       "items": [{"key": "cloud.conf", "path": "cloud.conf"}]}}]),
                 "%s: %s reads the Secret's cloud.conf, mounted" % (name, d))
        else:
            t.eq((ctr.get("envFrom"), ctr.get("volumeMounts"), pod.get("volumes"),
                  [a for a in ctr["args"] if "cloud-config" in a]),
                 ([{"secretRef": {"name": "cloudnode-credentials"}}], None, None, []),
                 "%s: %s has the Secret's keys as its environment" % (name, d))
    for o in objs:
        if o["kind"] == "Role":
            for r in o["rules"]:
                if "leases" in r["resources"]:
                    t.ok(r["verbs"] == ["create"] or r.get("resourceNames"),
                         "%s: Role %s names its Lease for every verb but create" % (name, o["metadata"]["name"]))
        if o["kind"] in ("Role", "ClusterRole"):
            t.ok(not any("*" in r.get("verbs", []) + r.get("resources", []) for r in o["rules"]),
                 "%s: %s %s has no wildcard" % (name, o["kind"], o["metadata"]["name"]))
            t.ok(o["kind"] == "Role" or not any("secrets" in r["resources"] for r in o["rules"]),
                 "%s: ClusterRole %s grants no Secrets" % (name, o["metadata"]["name"]))


# node-manager's side of the capi/ contract, as its chart renders a cloud-provider module's
# templates: the files come from the module's d8-cloud-provider-<type>-capi Secret into
# capi/<type>/, and each is rendered with tpl in node-manager's context (its
# capi_infrastructure_cluster, capi_node_group_instance_class_checksum and
# capi_node_group_machine_template): node-manager's .Values, whose nodeManager.internal.cloudProvider
# is the registration Secret decoded, and the roots it adds. Neither helm_lib nor the module's
# _helpers.tpl is in that chart.
NODE_MANAGER_TEMPLATE = """\
{{- $cp := .Values.nodeManager.internal.cloudProvider }}
{{- $base := dict "Release" .Release "Chart" .Chart "Files" .Files "Capabilities" .Capabilities "Template" .Template "Values" .Values }}
---
{{ tpl (.Files.Get (printf "capi/%s/cluster.yaml" $cp.type)) (merge (dict "clusterName" $cp.capiClusterName) $base) }}
{{- range $ng := .Values.nodeManager.internal.nodeGroups }}
{{- $sum := tpl ($.Files.Get (printf "capi/%s/instance-class.checksum" $cp.type)) (merge (dict "nodeGroup" $ng) $base) }}
{{- $ctx := dict "nodeGroup" $ng "zoneName" ($cp.zones | first | default "") "templateName" (printf "%s-%s" $ng.name (trunc 8 $sum)) "instanceClassChecksum" $sum }}
---
{{ tpl ($.Files.Get (printf "capi/%s/machine-template.yaml" $cp.type)) (merge $ctx $base) }}
{{- end }}
"""


def decoded(secret):
    """A Secret's data as node-manager reads the registration: JSON where a value is JSON, the
    string otherwise."""
    out = {}
    for k, v in (secret or {}).get("data", {}).items():
        text = base64.b64decode(v).decode()
        try:
            out[k] = json.loads(text)
        except ValueError:
            out[k] = text
    return out


def node_manager_chart(tmp, capi_secret):
    """A chart named node-manager holding the files of the capi Secret as capi/<type>/."""
    d = os.path.join(tmp, "node-manager")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "templates"))
    os.makedirs(os.path.join(d, "capi", "cloudnode"))
    with open(os.path.join(d, "Chart.yaml"), "w") as f:
        f.write("apiVersion: v2\nname: node-manager\nversion: 0.1.0\n")
    with open(os.path.join(d, "templates", "capi.yaml"), "w") as f:
        f.write(NODE_MANAGER_TEMPLATE)
    for n, v in capi_secret["data"].items():
        with open(os.path.join(d, "capi", "cloudnode", n), "wb") as f:
            f.write(base64.b64decode(v))
    return d


def render_capi(t, helm, tmp, objs, node_groups, masters=None):
    """What node-manager renders from the module's objects (objs) for node_groups [(name,
    instance class spec, extra NodeGroup fields)]: (objects, None) or ([], helm's error)."""
    cp = decoded(by(objs, "Secret", "d8-node-manager-cloud-provider"))
    ngs = [dict(extra, name=n, instanceClass=ic, nodeType="CloudEphemeral",
                cloudInstances={"classReference": {"kind": "CloudnodeInstanceClass", "name": n}})
           for n, ic, extra in node_groups]
    internal = {"cloudProvider": cp, "nodeGroups": ngs}
    if masters is not None:
        internal["clusterMasterAddresses"] = masters
    vf = write_values(tmp, "node-manager %s %s" % (json.dumps(node_groups), masters),
                      {"nodeManager": {"internal": internal}, "global": {"discovery": {"clusterUUID": "u"}}})
    r = helm_run(t, helm, tmp, "template", "node-manager", node_manager_chart(tmp, by(objs, "Secret",
                 "d8-cloud-provider-cloudnode-capi")), "-f", vf, "--namespace", "d8-cloud-instance-manager")
    if r.returncode != 0:
        return [], r.stderr
    return [o for o in yaml.safe_load_all(r.stdout) if o], None


def check_capi(t, name, values, objs, groups, got):
    """What node-manager rendered from capi/ matches the registration node-manager reads: the
    CloudnodeCluster its Cluster refers to, one CloudnodeMachineTemplate per node group named and
    labelled as node-manager selects them, its spec the instance class."""
    pcc = values["internal"]["providerClusterConfiguration"]
    reg = decoded(by(objs, "Secret", "d8-node-manager-cloud-provider"))
    clusters = [o for o in got if o["kind"] == reg["capiClusterKind"]]
    t.eq(len(clusters), 1, "%s: one %s" % (name, reg["capiClusterKind"]))
    c = clusters[0] if clusters else {"metadata": {}, "spec": {}}
    md = c["metadata"]
    t.eq((c.get("apiVersion"), md.get("name"), md.get("namespace"), md.get("labels", {}).get("heritage"),
          md.get("labels", {}).get("module")),
         (reg["capiClusterAPIVersion"], reg["capiClusterName"], "d8-cloud-instance-manager", "deckhouse", "node-manager"),
         "%s: the cluster is the registration's capiClusterName, node-manager's, in d8-cloud-instance-manager" % name)
    want = {"provider": pcc["provider"]["name"], "controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443}}
    if pcc["provider"].get("region"):
        want["region"] = pcc["provider"]["region"]
    t.eq(c["spec"], want, "%s: the cluster's provider, region and first API server" % name)
    templates = {o["metadata"]["labels"]["node-group"]: o for o in got if o["kind"] == "CloudnodeMachineTemplate"}
    t.eq(sorted(templates), sorted(g[0] for g in groups), "%s: a machine template per node group" % name)
    for g, ic, _ in groups:
        mt = templates.get(g)
        if not mt:
            continue
        md = mt["metadata"]
        checksum = md["annotations"].get("checksum/instance-class", "")
        t.eq((mt["apiVersion"], mt["kind"]), (reg["capiMachineTemplateAPIVersion"], reg["capiMachineTemplateKind"]),
             "%s: %s: the machine template's kind is the registration's" % (name, g))
        t.ok(len(checksum) == 64 and all(x in "0123456789abcdef" for x in checksum) and
             md["name"] == "%s-%s" % (g, checksum[:8]) and md["namespace"] == "d8-cloud-instance-manager",
             "%s: %s: named by node-manager after the instance-class checksum" % (name, g), md)
        t.eq((md["labels"].get("heritage"), md["labels"].get("module"), md["annotations"].get("helm.sh/resource-policy")),
             ("deckhouse", "node-manager", "keep"), "%s: %s: labelled as node-manager's, kept on rollover" % (name, g))
        t.eq((mt["spec"]["template"]["spec"], mt["spec"]["template"]["metadata"]["labels"]),
             (ic, {"node.deckhouse.io/group": g}), "%s: %s: the machine template is the instance class" % (name, g))


def test_capi_contract(t, helm, tmp, objs):
    """The edges of the capi/ contract: what rolls machines over, the API server address forms,
    and a registration without the module's subtree."""
    ic = {"hetzner": {"serverType": "cx22", "image": "debian-12", "location": "fsn1"}}
    other = {"hetzner": {"serverType": "cx32", "image": "debian-12", "location": "fsn1"}}
    got, err = render_capi(t, helm, tmp, objs, [("a", ic, {}), ("b", ic, {}), ("c", other, {}),
                                                 ("d", ic, {"manualRolloutID": "r1"})])
    t.ok(err is None, "node-manager renders four node groups", err)
    sums = {o["metadata"]["labels"]["node-group"]: o["metadata"]["annotations"]["checksum/instance-class"]
            for o in got if o["kind"] == "CloudnodeMachineTemplate"}
    t.ok(len(sums) == 4 and sums["a"] == sums["b"] and len({sums["a"], sums["c"], sums["d"]}) == 3,
         "the checksum is the instance class's and the manualRolloutID's: equal classes, equal checksums", sums)
    for masters, want in [(["[2001:db8::1]:6443"], {"host": "2001:db8::1", "port": 6443}),
                          (["api.example.com:443"], {"host": "api.example.com", "port": 443}), ([], None)]:
        got, err = render_capi(t, helm, tmp, objs, [], masters=masters)
        c = next((o for o in got if o["kind"] == "CloudnodeCluster"), {"spec": {}})
        t.eq((err, c["spec"].get("controlPlaneEndpoint")), (None, want),
             "API servers %s: the cluster's controlPlaneEndpoint is %s" % (masters, want))
    old = copy.deepcopy(objs)
    del by(old, "Secret", "d8-node-manager-cloud-provider")["data"]["cloudnode"]
    got, err = render_capi(t, helm, tmp, old, [("a", ic, {})])
    t.ok(err is not None and "nodeManager.internal.cloudProvider.cloudnode is required" in err,
         "a registration without the cloudnode subtree is one clear error", err)


def apply(k, obj):
    """Server-side apply with strict field validation: an unknown or mistyped field is an error."""
    md = obj["metadata"]
    path = k.resource_path(obj["apiVersion"], obj["kind"], md.get("namespace"))
    return k.api("PATCH", "%s/%s?fieldManager=cloudnode-test&fieldValidation=Strict&force=true" % (path, md["name"]),
                 json.dumps(obj), content_type="application/apply-patch+yaml")


def load_crds(d):
    out = []
    for n in sorted(os.listdir(d)):
        if n.endswith(".yaml"):
            with open(os.path.join(d, n)) as f:
                out += [x for x in yaml.safe_load_all(f) if x]
    return out


def crds():
    """The module's CRDs (crds/ and crds/external), the Cluster API core CRDs node-manager serves
    in a Deckhouse cluster (deckhouse/capi-core-crds) and the VerticalPodAutoscaler CRD of
    Deckhouse's module."""
    out = load_crds(os.path.join(d8module.MODULE, "crds")) + load_crds(EXTERNAL) + load_crds(CAPI_CORE)
    with open(src("tests", "data", "vpa-crd.yaml")) as f:
        out += [x for x in yaml.safe_load_all(f) if x]
    return out


EXTERNAL = os.path.join(d8module.MODULE, "crds", "external")
CAPI_CORE = src("deckhouse", "capi-core-crds")
CAPI_CORE_KINDS = {"Cluster", "Machine", "MachineSet", "MachineDeployment", "MachineHealthCheck"}


def crd_problems(c):
    """What makes c no valid apiextensions.k8s.io/v1 CRD (structure the API server requires)."""
    out = []
    spec = c.get("spec") or {}
    names = spec.get("names") or {}
    if (c.get("apiVersion"), c.get("kind")) != ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
        out.append("not an apiextensions.k8s.io/v1 CustomResourceDefinition")
    if c.get("metadata", {}).get("name") != "%s.%s" % (names.get("plural"), spec.get("group")):
        out.append("name is not <plural>.<group>")
    versions = spec.get("versions") or []
    if [v.get("storage") for v in versions].count(True) != 1:
        out.append("not exactly one storage version")
    for v in versions:
        schema = ((v.get("schema") or {}).get("openAPIV3Schema") or {})
        if v.get("served") and schema.get("type") != "object":
            out.append("version %s has no object schema" % v.get("name"))
    return out


def kinds_of(d):
    return {c["spec"]["names"]["kind"]: c for c in load_crds(d)}


def test_crds_layout(t):
    """crds/ holds the module's own InstanceClass, crds/external the CRDs of the Cluster API
    infrastructure provider (cloudnode-controller's, the files of manifests/crds/capi), as
    Deckhouse's cloud-provider modules lay them out; no Cluster API core kind is in the module."""
    own = kinds_of(os.path.join(d8module.MODULE, "crds"))
    t.eq(sorted(own), ["CloudnodeInstanceClass"], "crds/ holds the CloudnodeInstanceClass")
    external = kinds_of(EXTERNAL)
    t.eq(sorted(external), ["CloudnodeCluster", "CloudnodeMachine", "CloudnodeMachineTemplate"],
         "crds/external holds the infrastructure kinds")
    t.ok(all(c["spec"]["group"] == "infrastructure.cluster.x-k8s.io" for c in external.values()),
         "crds/external is all of group infrastructure.cluster.x-k8s.io")
    for n in sorted(os.listdir(EXTERNAL)):
        with open(os.path.join(EXTERNAL, n)) as a, open(src("manifests", "crds", "capi", n)) as b:
            t.ok(a.read() == b.read(), "crds/external/%s is manifests/crds/capi/%s" % (n, n))
    for c in list(own.values()) + list(external.values()):
        t.eq(crd_problems(c), [], "%s is a valid CRD" % c["metadata"]["name"])


def test_capi_core_crds(t, tmp):
    """deckhouse/capi-core-crds: the Cluster API core CRDs, copied unchanged by
    deckhouse/capi-core-crds.sh from the release the tests run for real, valid, and served by the
    fake API server."""
    files = sorted(n for n in os.listdir(CAPI_CORE) if n.endswith(".yaml"))
    got = {}
    for n in files:
        with open(os.path.join(CAPI_CORE, n)) as f:
            text = f.read()
        first = text.splitlines()[0]
        t.ok(first.startswith("# Cluster API v") and first.endswith("config/crd/bases/%s," % n),
             "%s says where it came from" % n, first)
        for c in (x for x in yaml.safe_load_all(text) if x):
            t.eq(crd_problems(c), [], "%s: %s is a valid CRD" % (n, c.get("metadata", {}).get("name")))
            got[c["spec"]["names"]["kind"]] = c
    t.eq(set(got), CAPI_CORE_KINDS, "deckhouse/capi-core-crds has Cluster, Machine, MachineSet, "
         "MachineDeployment, MachineHealthCheck")
    t.ok(all(c["spec"]["group"] == "cluster.x-k8s.io" and "v1beta2" in [v["name"] for v in c["spec"]["versions"]
                                                                          if v["storage"]] for c in got.values()),
         "all of group cluster.x-k8s.io, stored as v1beta2 (the contract the controller speaks)")
    r = subprocess.run(["sh", src("tests", "realcapi", "build.sh"), "--src"], capture_output=True, text=True)
    if r.returncode != 0:
        t.skip("deckhouse/capi-core-crds is the release's config/crd/bases unchanged", "the Cluster API release is not built "
               "(make real-capi)")
    else:
        for n in files:
            with open(os.path.join(r.stdout.strip(), "config", "crd", "bases", n)) as a, \
                    open(os.path.join(CAPI_CORE, n)) as b:
                t.ok(b.read().split("\n", 2)[2] == a.read(), "%s is the release's file unchanged" % n)
    with fakekubeclient.FakeKube(os.path.join(tmp, "fakekube")) as k:
        for kind, c in sorted(got.items()):
            st, r = k.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", c)
            t.eq(st, 201, "the fake API server accepts the %s CRD" % kind)
        for kind, c in sorted(got.items()):
            path = "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/" + c["spec"]["names"]["plural"]
            t.ok(wait_for(lambda: k.api("GET", path)[0] == 200, timeout=20), "%s is served as v1beta2" % kind)
        st, _ = k.api("POST", "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/clusters", {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c1"},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "CloudnodeCluster",
                                           "name": "c1"}}})
        t.eq(st, 201, "a Cluster referring to its CloudnodeCluster is created")


def test_real_server(t, rendered, capi_objs, instance_classes, tmp):
    bins, why = realkube.bindir()
    if bins is None:
        t.skip("rendered objects applied to the real API server", why)
        return
    with realkube.RealKube(os.path.join(tmp, "kube")) as k:
        for c in crds():
            st, r = apply(k, c)
            t.ok(st in (200, 201), "CRD %s is accepted" % c["metadata"]["name"], "%s %s" % (st, r))
        for c in crds():
            g, plural = c["spec"]["group"], c["spec"]["names"]["plural"]
            v = next(x["name"] for x in c["spec"]["versions"] if x["storage"])
            t.ok(wait_for(lambda: k.api("GET", "/apis/%s/%s/%s" % (g, v, plural))[0] == 200, timeout=20),
                 "CRD %s is served" % c["metadata"]["name"])
        k.ensure_namespace("d8-cloud-instance-manager")
        for name, objs in rendered:
            # Namespaces first, as Helm installs them.
            for o in sorted(objs, key=lambda o: o["kind"] != "Namespace"):
                st, r = apply(k, o)
                t.ok(st in (200, 201), "%s: the real server accepts %s %s" % (name, o["kind"], o["metadata"]["name"]),
                     "%s %s" % (st, r))
        # The pods the Deployments make are admitted (Pod Security of the namespace, the pod
        # schema), and but for the host network of the cloud-controller-manager they are
        # "restricted": admission warns about nothing else.
        for name, objs in rendered[:1]:
            for o in objs:
                if o["kind"] != "Deployment":
                    continue
                pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": o["metadata"]["name"] + "-probe"},
                       "spec": o["spec"]["template"]["spec"]}
                st, hdrs, raw = k.request("POST", "/api/v1/namespaces/%s/pods?dryRun=All" % NS, pod)
                warning = " ".join(v for h, v in hdrs.items() if h.lower() == "warning")
                t.diag("%s: %s" % (o["metadata"]["name"], warning or "no warning"))
                t.ok(st == 201, "%s: a pod of Deployment %s is admitted" % (name, o["metadata"]["name"]), raw[:500])
                # What the host network implies (its ports are host ports) is all "restricted" may name.
                rest = warning
                if pod["spec"].get("hostNetwork"):
                    rest = rest.replace("host namespaces (hostNetwork=true)", "")
                    for c in pod["spec"]["containers"]:
                        for p in c.get("ports", []):
                            rest = rest.replace('hostPort (container \\"%s\\" uses hostPort %d)' % (c["name"], p["containerPort"]), "")
                    rest = rest.replace('299 - "would violate PodSecurity \\"restricted:latest\\": , "', "")
                t.ok(rest == "" and (bool(warning) == bool(pod["spec"].get("hostNetwork"))),
                     "%s: %s is restricted but for what it must do" % (name, o["metadata"]["name"]), warning)
        # What the ServiceAccounts may do, asked of the real server's RBAC.
        def can(sa, verb, resource, namespace=None, name=None, group=""):
            review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
                "user": "system:serviceaccount:%s:%s" % (NS, sa),
                "groups": ["system:serviceaccounts", "system:serviceaccounts:" + NS, "system:authenticated"],
                "resourceAttributes": {k: v for k, v in (("verb", verb), ("resource", resource), ("group", group),
                                                         ("namespace", namespace), ("name", name)) if v}}}
            st, r = k.api("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
            return st == 201 and r["status"].get("allowed", False)
        for sa, verb, res, ns, name, group, want in [
                ("cloud-controller-manager", "patch", "nodes", None, "n1", "", True),
                ("cloud-controller-manager", "delete", "nodes", None, "n1", "", True),
                ("cloud-controller-manager", "update", "leases", NS, "cloud-controller-manager", "coordination.k8s.io", True),
                ("cloud-controller-manager", "update", "leases", NS, "other", "coordination.k8s.io", False),
                ("cloud-controller-manager", "update", "leases", "kube-system", "cloud-controller-manager",
                 "coordination.k8s.io", False),
                ("cloud-controller-manager", "get", "secrets", NS, "cloudnode-credentials", "", False),
                ("capi-controller-manager", "get", "secrets", "d8-cloud-instance-manager", "m1-bootstrap", "", True),
                ("capi-controller-manager", "get", "secrets", "kube-system", "d8-provider-cluster-configuration", "",
                 False),
                ("capi-controller-manager", "list", "secrets", "d8-cloud-instance-manager", None, "", False),
                ("capi-controller-manager", "patch", "cloudnodemachines", "d8-cloud-instance-manager", "m1",
                 "infrastructure.cluster.x-k8s.io", True),
                ("capi-controller-manager", "update", "leases", NS, "cloudnode-controller", "coordination.k8s.io", True),
                ("capi-controller-manager", "patch", "nodes", None, "n1", "", False)]:
            t.eq(can(sa, verb, res, ns, name, group), want, "RBAC: %s %s %s %s/%s: %s" % (
                sa, verb, res, ns or "", name or "*", "allowed" if want else "denied"))
        for o in capi_objs + instance_classes:
            st, r = apply(k, o)
            t.ok(st in (200, 201), "the real server accepts %s %s" % (o["kind"], o["metadata"]["name"]),
                 "%s %s" % (st, r))
        # The CRDs' schemas do judge: a wrong field is refused.
        bad = copy.deepcopy(instance_classes[0])
        bad["metadata"]["name"] = "bad"
        bad["spec"] = {"hetzner": {"serverType": "cx22", "image": "debian-12"}}
        st, r = apply(k, bad)
        t.ok(st == 422 and "location" in json.dumps(r), "the real server refuses an InstanceClass without location",
             "%s %s" % (st, r))
        bad["spec"] = {"hetzner": {"serverType": "cx22", "image": "d", "location": "fsn1", "flavour": "x"}}
        st, r = apply(k, bad)
        # Server-side apply reports a field its schema lacks as an error of the typed patch (500).
        t.ok(st >= 400 and "flavour" in json.dumps(r), "the real server refuses an unknown InstanceClass field",
             "%s %s" % (st, r))
        for what, spec, field in [
                ("a Proxmox VE InstanceClass without templateID", {"sourceNode": "pve1"}, "templateID"),
                ("a Proxmox VE tag cloudnode gives its machines", {"sourceNode": "pve1", "templateID": 9000,
                                                                    "tags": ["cloudnode-machine-x"]}, "tags"),
                ("a Proxmox VE node name with a slash", {"sourceNode": "pve/1", "templateID": 9000}, "sourceNode")]:
            bad["spec"] = {"proxmoxve": spec}
            st, r = apply(k, bad)
            t.ok(st == 422 and field in json.dumps(r), "the real server refuses %s" % what, "%s %s" % (st, r))


def test_pve_cloud_conf(t, helm, tmp, chart):
    """The cloud.conf the credentials Secret holds for Proxmox VE, as the cloud-controller-manager
    reads it (--cloud-config): cloudnode-initializer initializes a Node from the fake Proxmox VE
    API over HTTPS, trusted through the rendered fingerprint, with the API token and with the
    password."""
    import hashlib
    import ssl
    from urllib.parse import urlsplit
    token, user = fakecloud.PVE_TOKEN, fakecloud.PVE_USER
    d = os.path.join(tmp, "pve")
    os.makedirs(d)
    tls, _ = fakecloud.tls_args(d)
    with fakekubeclient.kube_server(os.path.join(d, "kube"), rbac=cninit.RBAC) as k, \
            fakecloud.FakeCloud(os.path.join(d, "cloud"), extra_args=tls) as c:
        u = urlsplit(c.tls_url)
        der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((u.hostname, u.port)))
        fingerprint = ":".join("%02X" % b for b in hashlib.sha256(der).digest())
        for how, creds in (("token", {"tokenID": "%s!%s" % (token["user"], token["name"]),
                                      "tokenSecret": token["secret"]}),
                           ("password", {"username": user["user"], "password": user["password"]})):
            values = copy.deepcopy(d8module.load("values.yaml")["x-examples"][2])
            provider = values["internal"]["providerClusterConfiguration"]["provider"]
            provider.update(endpoint=c.tls_url + "/api2/json", region="pve",
                            credentials=dict(creds, fingerprint=fingerprint))
            t.eq(d8module.errors("values.yaml", d8module.with_defaults("values.yaml", values)), [],
                 "proxmoxve (%s) against the fake API: the values are valid" % how)
            vf = write_values(tmp, "pve " + how, full_values(values))
            r = helm_run(t, helm, tmp, "template", RELEASE, chart, "-f", vf, "--namespace", NS,
                         "-s", "templates/credentials-secret.yaml")
            secret = yaml.safe_load(r.stdout) if r.returncode == 0 else None
            conf = os.path.join(d, "cloud-%s.conf" % how)
            with open(conf, "wb") as f:
                f.write(base64.b64decode(((secret or {}).get("data") or {}).get("cloud.conf", "")))
            vm = c.add_instance({"platform": "proxmoxve", "name": "d8-pve-" + how})
            cninit.make_node(k, vm["name"])
            args = ["--kubeconfig=" + k.kubeconfig_for(cninit.CLUSTER_SA), "--cloud-provider=proxmoxve",
                    "--cloud-config=" + conf, "--controllers=cloud-node", "--leader-elect=false",
                    "--bind-address=127.0.0.1", "-v", "4"]
            with cninit.Initializer(args, state_dir=d, name="d8-pve-" + how) as i:
                node = wait_for(lambda: cninit.initialized(k, vm["name"]), 30)
                t.ok(node and node["spec"].get("providerID", "").startswith("proxmox://pve/"),
                     "proxmoxve (%s): the initializer reads the rendered cloud.conf and initializes a Node" % how,
                     i.log()[-2000:])
                t.ok(all(v not in i.log() for v in (token["secret"], user["password"])),
                     "proxmoxve (%s): no secret in its log" % how)


def main():
    t = Tap()
    try:
        helm, why = d8module.helm()
    except RuntimeError as e:
        print("Bail out! %s" % e)
        sys.exit(1)
    if helm is None:
        t.skip_all(why)
    with tempfile.TemporaryDirectory(prefix="cn-d8-") as tmp:
        chart = d8module.chart_copy(os.path.join(tmp, RELEASE))
        link = os.readlink(os.path.join(d8module.MODULE, "charts", "helm_lib"))
        t.eq(link, "../../../helm_lib/charts/deckhouse_lib_helm", "charts/helm_lib is Deckhouse's library chart")
        # .helmignore leaves Helm only what is Helm's: Chart.yaml, templates/ and the capi/ files
        # templates/capi.yaml publishes.
        r = helm_run(t, helm, tmp, "package", chart, "-d", os.path.join(tmp, "pkg"))
        t.ok(r.returncode == 0, "helm package", r.stderr)
        if r.returncode == 0:
            import tarfile
            pkg = os.path.join(tmp, "pkg", os.listdir(os.path.join(tmp, "pkg"))[0])
            with tarfile.open(pkg) as tf:
                names = sorted(n.split("/", 1)[1] for n in tf.getnames() if "/" in n)
            t.eq(sorted({n.split("/")[0] for n in names}), [".helmignore", "Chart.yaml", "capi", "templates"],
                 "the packaged chart holds only Chart.yaml, .helmignore, templates/ and capi/")
        rendered, capi_objs, instance_classes = [], [], []
        for name, values in value_sets():
            t.eq(d8module.errors("values.yaml", d8module.with_defaults("values.yaml", module_values(values))), [],
                 "%s: the values are valid" % name)
            vf = write_values(tmp, name, full_values(values))
            r = helm_run(t, helm, tmp, "lint", "--strict", chart, "-f", vf)
            t.ok(r.returncode == 0 and "0 chart(s) failed" in r.stdout, "%s: helm lint --strict is clean" % name,
                 r.stdout + r.stderr)
            r = helm_run(t, helm, tmp, "template", RELEASE, chart, "-f", vf, "--namespace", NS)
            t.ok(r.returncode == 0, "%s: helm template renders" % name, r.stderr)
            objs = [o for o in yaml.safe_load_all(r.stdout) if o] if r.returncode == 0 else []
            if objs:
                check_objects(t, name, values, objs)
                rendered.append((name, objs))
            if not objs:
                continue
            pcc = values["internal"]["providerClusterConfiguration"]
            groups = [("master", pcc["masterNodeGroup"]["instanceClass"], {})] + [
                (g["name"], g["instanceClass"], {}) for g in pcc.get("nodeGroups", [])]
            got, err = render_capi(t, helm, tmp, objs, groups, masters=["10.0.0.10:6443", "10.0.0.11:6443"])
            t.ok(err is None, "%s: node-manager renders capi/ for %s" % (name, ", ".join(g[0] for g in groups)), err)
            check_capi(t, name, values, objs, groups, got)
            capi_objs += got
            for o in got:
                if o["kind"] == "CloudnodeMachineTemplate":
                    instance_classes.append({"apiVersion": "deckhouse.io/v1", "kind": "CloudnodeInstanceClass",
                                             "metadata": {"name": o["metadata"]["name"]},
                                             "spec": o["spec"]["template"]["spec"]})
        t.run(test_capi_contract, helm, tmp, rendered[0][1])
        # Broken values: one clear error, nothing rendered.
        broken = full_values(value_sets()[0][1])
        del broken["global"]["modulesImages"]["digests"]["cloudProviderCloudnode"]["cloudnodeInitializer"]
        r = helm_run(t, helm, tmp, "template", RELEASE, chart, "-f", write_values(tmp, "broken", broken))
        t.ok(r.returncode != 0 and "no image digest for cloudnodeInitializer" in r.stderr and not r.stdout.strip(),
             "a missing image digest is one clear error", r.stderr)
        t.run(test_pve_cloud_conf, helm, tmp, chart)
        t.run(test_crds_layout)
        t.run(test_capi_core_crds, tmp)
        t.run(test_real_server, rendered, capi_objs, instance_classes, tmp)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
