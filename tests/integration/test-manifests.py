#!/usr/bin/env python3
"""manifests/: every kustomize variant renders with the real `kubectl kustomize`, and the rendered
objects have the properties the rest of cloudnode relies on (identities, least privilege, the
cluster-mode initializer's scheduling and availability rules)."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import yaml  # noqa: E402
import clusterctl  # noqa: E402
from cntap import Tap, src  # noqa: E402

VARIANTS = ["base", "overlays/single-node", "overlays/openshift", "operand"]
CAPI_NS = "cloudnode-system"
CLOUD_CONF_VAR = "CLOUDNODE_B64ENCODED_CLOUD_CONF"
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterOperator"}


def render(t, variant, tmp):
    # kustomize refuses nothing in a read-only tree, but copy anyway so the check works the same
    # from a distcheck tarball and never writes near the sources.
    root = os.path.join(tmp, "manifests")
    if not os.path.exists(root):
        shutil.copytree(src("manifests"), root)
    p = subprocess.run(["kubectl", "kustomize", os.path.join(root, variant)],
                       capture_output=True, text=True)
    t.ok(p.returncode == 0, "kubectl kustomize %s renders" % variant, p.stderr)
    return [d for d in yaml.safe_load_all(p.stdout) if d] if p.returncode == 0 else []


def find(objs, kind, name):
    for o in objs:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    return None


def rules_of(obj):
    out = set()
    for r in obj.get("rules", []):
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                for v in r.get("verbs", []):
                    out.add((g, res, v))
    return out


def check_common(t, variant, objs, ns):
    for o in objs:
        if o["kind"] in CLUSTER_SCOPED:
            continue
        want = ns
        if o["kind"] in ("Role", "RoleBinding") and \
                o["metadata"]["namespace"] in ("openshift-config", "openshift-config-managed"):
            want = o["metadata"]["namespace"]
        if o["kind"] == "CredentialsRequest":
            want = "openshift-cloud-credential-operator"  # where the Cloud Credential Operator reads them
        t.eq(o["metadata"].get("namespace"), want,
             "%s: %s/%s namespace" % (variant, o["kind"], o["metadata"]["name"]))
    for o in objs:
        for s in o.get("subjects", []) if o["kind"].endswith("Binding") else []:
            if s.get("kind") == "ServiceAccount":
                t.eq(s.get("namespace"), ns, "%s: %s subject %s namespace" %
                     (variant, o["metadata"]["name"], s["name"]))

    node = find(objs, "ClusterRole", "cloudnode:node-initializer")
    t.eq(rules_of(node), {("", "nodes", v) for v in ("get", "list", "watch", "patch")} |
         {("", "nodes/status", "patch"), ("", "events", "create"), ("events.k8s.io", "events", "create")},
         "%s: node-mode initializer has exactly nodes get/list/watch/patch, nodes/status patch, "
         "events create" % variant)
    cl = find(objs, "ClusterRole", "cloudnode:cloud-controller-manager")
    got = rules_of(cl)
    t.ok(("", "nodes", "delete") in got and rules_of(node) <= got,
         "%s: cluster-mode initializer is node mode plus nodes delete" % variant)
    t.ok(not any(r[1] in ("secrets", "*") or r[2] == "*" for r in got | rules_of(node)),
         "%s: no initializer rule grants secrets or wildcards" % variant)
    role = find(objs, "Role", "cloudnode:cloud-controller-manager")
    t.ok(("coordination.k8s.io", "leases", "update") in rules_of(role),
         "%s: cluster-mode initializer may update leases in its namespace" % variant)

    vap = find(objs, "ValidatingAdmissionPolicy", "cloudnode-node-initializer")
    vapb = find(objs, "ValidatingAdmissionPolicyBinding", "cloudnode-node-initializer")
    t.ok(vap is not None and vapb is not None and vapb["spec"]["policyName"] == "cloudnode-node-initializer"
         and vapb["spec"]["validationActions"] == ["Deny"],
         "%s: admission policy for the node identity is bound with Deny" % variant)
    if vap:
        cond = vap["spec"]["matchConditions"][0]["expression"]
        t.ok("'system:serviceaccounts:cloudnode-nodes' in request.userInfo.groups" in cond,
             "%s: policy matches the node identities (the ServiceAccounts of cloudnode-nodes)" % variant)
        own = vap["spec"]["validations"][0]["expression"]
        t.ok("request.userInfo.username == 'system:serviceaccount:cloudnode-nodes:' + object.metadata.name" in own,
             "%s: policy's first rule: a node identity changes its own Node only" % variant)
    crb = find(objs, "ClusterRoleBinding", "cloudnode:node-initializer")
    t.eq((crb or {}).get("subjects"), [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                         "name": "system:serviceaccounts:cloudnode-nodes"}],
         "%s: node-mode RBAC is bound to the node identities' group" % variant)
    if variant != "operand":
        # What the controller applies has no Namespace; the installation brings this one.
        t.ok(find(objs, "Namespace", "cloudnode-nodes") is not None, "%s: the node-identity namespace" % variant)
    t.ok(not find(objs, "ServiceAccount", "cloudnode-node-initializer"),
         "%s: no ServiceAccount shared by all nodes" % variant)

    d = find(objs, "Deployment", "cloudnode-cloud-controller-manager")
    spec = d["spec"]["template"]["spec"]
    t.ok(spec["hostNetwork"] is True, "%s: initializer Deployment uses hostNetwork" % variant)
    t.eq(spec["priorityClassName"], "system-cluster-critical", "%s: priority class" % variant)
    aff = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    t.ok(aff[0]["topologyKey"] == "kubernetes.io/hostname" and
         aff[0]["labelSelector"]["matchLabels"] == d["spec"]["selector"]["matchLabels"],
         "%s: required anti-affinity on hostname against its own pods" % variant)
    tol = {(x.get("key"), x.get("effect"), x.get("tolerationSeconds")) for x in spec["tolerations"]}
    for want in [("node-role.kubernetes.io/control-plane", "NoSchedule", None),
                 ("node.kubernetes.io/unreachable", "NoExecute", 120),
                 ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule", None)]:
        t.ok(want in tol, "%s: toleration %s" % (variant, want[0]))
    c = spec["containers"][0]
    t.eq(c["name"], "cloud-controller-manager", "%s: container name" % variant)
    t.ok("--leader-elect=true" in c["args"], "%s: --leader-elect" % variant)
    t.ok("requests" in c["resources"] and "limits" not in c["resources"],
         "%s: requests without limits" % variant)
    t.ok(c["livenessProbe"]["httpGet"]["path"] == "/healthz" and
         c["readinessProbe"]["httpGet"]["path"] == "/readyz", "%s: health probes" % variant)
    t.eq(spec["serviceAccountName"], "cloudnode-cloud-controller-manager", "%s: cluster-mode SA" % variant)
    pdb = find(objs, "PodDisruptionBudget", "cloudnode-cloud-controller-manager")
    t.eq(pdb["spec"]["selector"]["matchLabels"], d["spec"]["selector"]["matchLabels"],
         "%s: PDB selects the initializer pods" % variant)
    return d, pdb


def test_variants(t, tmp):
    for variant in VARIANTS:
        objs = render(t, variant, tmp)
        if not objs:
            continue
        ns = "openshift-cloudnode" if variant == "overlays/openshift" else "cloudnode"
        d, pdb = check_common(t, variant, objs, ns)
        if variant == "operand":
            t.eq(d["spec"]["replicas"], 2, "operand (what the controller applies): two initializer replicas")
        else:
            # Without --cloud-provider, which only the controller fills in, its pods would crash-loop.
            t.eq(d["spec"]["replicas"], 0, "%s: the initializer Deployment is applied scaled to zero, "
                                           "the controller scales it up" % variant)
        if variant == "overlays/single-node":
            t.eq(pdb["spec"]["minAvailable"], 0, "single-node: the PDB does not block draining")
        else:
            t.eq(pdb["spec"]["minAvailable"], 1, "%s: PDB minAvailable 1" % variant)
        if variant == "operand":
            t.ok(find(objs, "Deployment", "cloudnode-controller") is None,
                 "operand does not contain the controller itself")
            continue
        cm = find(objs, "ConfigMap", "cloud-controller-manager-images")
        images = json.loads(cm["data"]["images.json"])
        t.ok(set(images) == {"cloudControllerManager", "cloudNodeManager"},
             "%s: images.json names both images" % variant)
        ctl = find(objs, "Deployment", "cloudnode-controller")
        t.eq(ctl["spec"]["template"]["spec"]["serviceAccountName"], "cloudnode-controller",
             "%s: controller runs as its own SA" % variant)
        args = ctl["spec"]["template"]["spec"]["containers"][0]["args"]
        t.ok(args[0] == "run" and "--leader-elect=true" in args, "%s: controller args" % variant)
        crole = rules_of(find(objs, "ClusterRole", "cloudnode:controller"))
        t.ok(("", "nodes", "patch") not in crole and ("", "nodes", "delete") not in crole,
             "%s: controller cannot modify Nodes" % variant)
        t.ok(find(objs, "CustomResourceDefinition", "cloudnodeoperators.operator.cloudnode.io"),
             "%s: status CRD included" % variant)
        if variant == "overlays/openshift":
            t.ok("--cloud-config-source=openshift-config/cloud-provider-config" in args,
                 "openshift: cloud config from openshift-config")
            r = find(objs, "Role", "cloudnode:controller:cloud-config-reader")
            t.eq(r["metadata"]["namespace"], "openshift-config", "openshift: reader Role in openshift-config")
            r = find(objs, "Role", "cloudnode:controller:managed-cloud-config-reader")
            t.eq((r["metadata"]["namespace"], r["rules"][0].get("resourceNames")),
                 ("openshift-config-managed", ["kube-cloud-config"]),
                 "openshift: reader Role of kube-cloud-config only, in openshift-config-managed")


def test_capi_components(t, tmp):
    """overlays/capi is what `clusterctl init --infrastructure cloudnode` installs: the provider's
    CRDs, its controller running only the machine reconcilers and their RBAC, in cloudnode-system;
    the variables clusterctl substitutes are the documented ones."""
    root = os.path.join(tmp, "manifests")
    p = subprocess.run(["kubectl", "kustomize", os.path.join(root, "overlays", "capi")], capture_output=True, text=True)
    t.ok(p.returncode == 0, "kubectl kustomize overlays/capi renders", p.stderr)
    if p.returncode != 0:
        return
    required, defaults = clusterctl.variables(p.stdout)
    t.eq((sorted(required), defaults), ([CLOUD_CONF_VAR], {"CLOUDNODE_PROVIDER": "hetzner"}),
         "capi: clusterctl variables: the credentials required, the provider defaulting to hetzner")
    try:
        clusterctl.substitute(p.stdout, {})
        t.ok(False, "capi: without the credentials variable clusterctl refuses")
    except clusterctl.MissingVariables as e:
        t.eq(e.names, [CLOUD_CONF_VAR], "capi: without the credentials variable clusterctl refuses, naming it")
    conf = base64.b64encode(b"[Global]\ntoken = x\n").decode()
    objs = [d for d in yaml.safe_load_all(clusterctl.substitute(p.stdout, {CLOUD_CONF_VAR: conf})) if d]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    for n in ("cloudnodeclusters", "cloudnodeclustertemplates", "cloudnodemachines", "cloudnodemachinetemplates"):
        crd = find(objs, "CustomResourceDefinition", n + ".infrastructure.cluster.x-k8s.io")
        t.ok(crd is not None and crd["metadata"]["labels"].get("cluster.x-k8s.io/provider") ==
             "infrastructure-cloudnode", "capi: CRD %s with the provider label" % n)

    def schema(n):
        crd = find(objs, "CustomResourceDefinition", n + ".infrastructure.cluster.x-k8s.io") or {}
        return ((crd.get("spec") or {}).get("versions") or [{}])[0].get("schema", {}).get("openAPIV3Schema", {})
    t.eq(schema("cloudnodeclustertemplates").get("properties", {}).get("spec", {}).get("properties", {})
         .get("template", {}).get("properties", {}).get("spec"), schema("cloudnodeclusters")["properties"]["spec"],
         "capi: a CloudnodeClusterTemplate's spec.template.spec is the CloudnodeCluster spec, the same schema")
    t.eq(sorted(k for k in kinds if k[0] in ("Deployment", "ValidatingAdmissionPolicy", "ConfigMap") or
                (k[0] == "CustomResourceDefinition" and "cloudnode.io" in k[1])),
         [("Deployment", "cloudnode-controller")],
         "capi: nothing but the provider: no operand, no admission policy, no images ConfigMap, no "
         "CloudnodeOperator CRD")
    for o in objs:
        if o["kind"] not in CLUSTER_SCOPED:
            t.eq(o["metadata"].get("namespace"), CAPI_NS, "capi: %s/%s in %s" % (o["kind"], o["metadata"]["name"],
                                                                                  CAPI_NS))
        for s in o.get("subjects", []) if o["kind"].endswith("Binding") else []:
            t.eq(s.get("namespace"), CAPI_NS, "capi: %s binds the provider's ServiceAccount" % o["metadata"]["name"])
    ctl = find(objs, "Deployment", "cloudnode-controller")
    spec = ctl["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    t.ok("--operand=false" in args and "--machine-provider=hetzner" in args and "--leader-elect=true" in args,
         "capi: the controller runs only the machine reconcilers, leader-elected, provider hetzner by default",
         args)
    c0 = spec["containers"][0]
    t.ok("--port=9440" in args and c0["livenessProbe"]["httpGet"]["port"] == 9440 and
         c0["readinessProbe"]["httpGet"]["port"] == 9440,
         "capi: health and metrics on 9440 (Cluster API's provider port), not the base controller's 10260")
    t.ok(any(v.get("secret", {}).get("secretName") == "cloudnode-machine-credentials" for v in spec.get("volumes", [])),
         "capi: credentials mounted from the Secret cloudnode-machine-credentials")
    t.eq((spec.get("securityContext") or {}).get("fsGroup"), 65532,
         "capi: the credentials Secret is readable by the controller's uid/gid 65532 (fsGroup), not only by root")
    t.eq(find(objs, "Secret", "cloudnode-machine-credentials")["data"], {"cloud.conf": conf},
         "capi: the Secret holds the substituted cloud.conf")
    other = [d for d in yaml.safe_load_all(clusterctl.substitute(p.stdout, {CLOUD_CONF_VAR: conf,
                                                                         "CLOUDNODE_PROVIDER": "openstack"})) if d]
    t.ok("--machine-provider=openstack" in find(other, "Deployment", "cloudnode-controller")["spec"]["template"]
         ["spec"]["containers"][0]["args"], "capi: CLOUDNODE_PROVIDER chooses the provider")
    role = rules_of(find(objs, "ClusterRole", "cloudnode:controller:capi"))
    t.ok(not any(r[1] in ("secrets", "nodes", "*") or r[2] == "*" for r in role),
         "capi: the provider's cluster-wide role grants no Secrets, Nodes or wildcards")

    # clusterctl metadata: the release series of this version, the contract of the CRDs.
    with open(src("manifests", "clusterctl", "metadata.yaml")) as f:
        meta = yaml.safe_load(f)
    tag = spec["containers"][0]["image"].rsplit(":", 1)[1]
    major, minor = (int(x) for x in tag.split(".")[:2])
    series = [r for r in meta["releaseSeries"] if (r["major"], r["minor"]) == (major, minor)]
    contracts = {crd["metadata"]["labels"].get("cluster.x-k8s.io/v1beta2") for crd in objs
                 if crd["kind"] == "CustomResourceDefinition"}
    t.ok(len(series) == 1 and contracts == {series[0]["contract"]},
         "capi: metadata.yaml has the release series of the image version %s with the CRDs' contract" % tag,
         (meta, contracts))


def test_bootstrap_pod(t, tmp):
    with open(src("manifests", "bootstrap", "cloudnode-cloud-node-pod.yaml")) as f:
        pod = yaml.safe_load(f)
    t.eq(pod["metadata"]["namespace"], "kube-system", "bootstrap pod in kube-system")
    c = pod["spec"]["containers"][0]
    t.ok(c["name"] == "cloud-controller-manager" and "--controllers=cloud-node" in c["args"] and
         "--leader-elect=false" in c["args"], "bootstrap pod runs only cloud-node, no leader election")
    t.ok(pod["spec"]["hostNetwork"] and pod["spec"]["priorityClassName"] == "system-node-critical",
         "bootstrap pod hostNetwork and node-critical")


def test_machine_controller_overlay(t, tmp):
    """overlays/machine-controller: machine-controller's three CRDs as it ships them, the flag that
    enables the Machine reconciler, and RBAC for exactly what that reconciler does."""
    objs = render(t, "overlays/machine-controller", tmp)
    crds = {o["spec"]["names"]["kind"]: o for o in objs if o["kind"] == "CustomResourceDefinition"
            and o["spec"]["group"] == "cluster.k8s.io"}
    t.eq(sorted(crds), ["Machine", "MachineDeployment", "MachineSet"], "the three cluster.k8s.io kinds")
    for kind, o in crds.items():
        vs = o["spec"]["versions"]
        t.eq([(v["name"], v["served"], v["storage"]) for v in vs], [("v1alpha1", True, True)],
             "%s: v1alpha1 served and stored" % kind)
        cols = [c["name"] for c in vs[0].get("additionalPrinterColumns", [])]
        t.ok("Provider" in cols and "OS" in cols and "Age" in cols, "%s: machine-controller's columns" % kind, cols)
    subs = {k: (o["spec"]["versions"][0].get("subresources") or {}) for k, o in crds.items()}
    t.eq(subs.get("Machine"), {}, "Machine: no subresource, as machine-controller's (status is in the object)")
    t.eq((subs.get("MachineDeployment") or {}).get("scale"),
         {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
         "MachineDeployment: the scale subresource")
    dep = find(objs, "Deployment", "cloudnode-controller")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"] if dep else []
    t.ok("--machine-controller-namespace=kube-system" in args, "the controller reconciles kube-system's Machines",
         args)
    cr = find(objs, "ClusterRole", "cloudnode:controller:machine-controller")
    t.eq(rules_of(cr) if cr else set(),
         {("", "nodes", v) for v in ("get", "list", "watch", "patch", "delete")} |
         {("", "pods", "list"), ("", "pods/eviction", "create")},
         "cluster-wide: Nodes, Pods list and evictions only (no Secrets, no Pod deletion)")
    role = find(objs, "Role", "cloudnode:controller:machine-controller")
    t.eq(role["metadata"]["namespace"] if role else None, "kube-system", "the rest only in kube-system")
    got = rules_of(role) if role else set()
    t.eq({r for r in got if r[1] in ("secrets", "configmaps")}, {("", "secrets", "get"), ("", "configmaps", "get")},
         "Secrets and ConfigMaps: get only, never list or watch")
    t.ok(not any(r[2] == "*" or r[1] == "*" for r in got | (rules_of(cr) if cr else set())), "no wildcards")
    for b in ("ClusterRoleBinding", "RoleBinding"):
        o = find(objs, b, "cloudnode:controller:machine-controller")
        t.eq([(s["kind"], s["namespace"], s["name"]) for s in (o or {}).get("subjects", [])],
             [("ServiceAccount", "cloudnode", "cloudnode-controller")], "%s: the controller's service account" % b)


def main():
    t = Tap()
    if not shutil.which("kubectl"):
        t.skip_all("kubectl is not installed (make installs Debian's kubernetes-client)")
    with tempfile.TemporaryDirectory() as tmp:
        t.run(test_variants, tmp)
        t.run(test_capi_components, tmp)
        t.run(test_machine_controller_overlay, tmp)
        t.run(test_bootstrap_pod, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
