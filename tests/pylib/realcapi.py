"""The real Cluster API (core, kubeadm bootstrap and control-plane providers, clusterctl) for the
tests that drive cloudnode's infrastructure provider with it, on real API servers (realkube.py).

    bindir, why = realcapi.bins()          # (None, why) when it cannot be built here: skip
    repo = Repository(tmp)                   # clusterctl's local repository and configuration
    repo.clusterctl(kubeconfig, "init", ...)
    cm = CertManager(k, tmp); cm.issue()     # what cert-manager (and cainjector) would do
    p = run_deployment(k, deployment, program, tmp, ...)   # a Deployment as a process

The binaries come from tests/realcapi/build.sh (make real-capi), cached per pinned version.

What is real and what stands in (see docs/design.md, "Cluster API, for real"):
- clusterctl installs every provider from a local repository laid out as clusterctl reads one
  ({provider-label}/{version}/{components, metadata.yaml, cluster-template.yaml}), named in its
  `providers:` configuration with file:// URLs. The core and kubeadm components are rendered from
  the release's own config/ kustomizations (kubectl kustomize), as its release does.
- cert-manager: clusterctl installs it from a local file (`cert-manager:` configuration) holding
  only cert-manager's API (tests/data/realcapi-cert-manager.yaml). Its controller and cainjector
  cannot run (no kubelet): CertManager issues each provider Certificate's Secret from a test CA
  and injects the CA where cert-manager.io/inject-ca-from asks.
- No kubelet, no kube-proxy: each provider's Deployment runs as a process with the Deployment's
  own args and env, its ServiceAccount's token, its Secret volumes written to a directory, and
  its webhook Service reached on loopback: the webhook configurations and CRD conversion
  clientConfigs name the Service, which the API server cannot reach; they are pointed at
  https://127.0.0.1:PORT with the same path and CA bundle."""
import base64
import copy
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import yaml

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.dirname(_HERE))  # tests/fakekube, after pylib (pylib/fakecloud.py is not tests/fakecloud)
from fakekube import certs  # noqa: E402
from cntap import build, src  # noqa: E402

BUILD = os.path.join(os.path.dirname(_HERE), "realcapi", "build.sh")
CAPI_VERSION = "v1.11.7"
CERT_MANAGER_VERSION = "v1.16.0"
CLOUDNODE_VERSION = "v0.1.0"
# The provider, its components file in the release, and where in the module its kustomization is.
CAPI_PROVIDERS = (("cluster-api", "CoreProvider", "core-components.yaml", "config/default"),
                  ("kubeadm", "BootstrapProvider", "bootstrap-components.yaml", "bootstrap/kubeadm/config/default"),
                  ("kubeadm", "ControlPlaneProvider", "control-plane-components.yaml",
                   "controlplane/kubeadm/config/default"))
LABELS = {"CoreProvider": "cluster-api", "BootstrapProvider": "bootstrap-kubeadm",
          "ControlPlaneProvider": "control-plane-kubeadm", "InfrastructureProvider": "infrastructure-cloudnode"}
# The program each provider's Deployment runs (its image's /manager).
PROGRAMS = {"capi-system": "cluster-api-manager",
            "capi-kubeadm-bootstrap-system": "kubeadm-bootstrap-manager",
            "capi-kubeadm-control-plane-system": "kubeadm-control-plane-manager"}


def bins():
    """(directory of the four programs, None), or (None, why) when they cannot be built here (the
    test skips). With Go and the proxy but without the binaries: RuntimeError."""
    r = subprocess.run([BUILD, "--bindir"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode == 0:
        return r.stdout.strip(), None
    r = subprocess.run([BUILD, "--unreachable"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode == 0:
        return None, "Cluster API cannot be built here: " + " ".join(r.stdout.split())
    r = subprocess.run([BUILD, "--go-check"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode == 77:
        return None, " ".join(r.stderr.split())
    raise RuntimeError("the real Cluster API is not built: run make real-capi")


def bins_or_skip(t):
    """The directory of the Cluster API programs, with the real kube-apiserver built too; a bail
    out (t) when the tree lacks them, a skip of the whole test when they cannot be built here."""
    import realkube
    try:
        bindir, why = bins()
        kube_bins, kube_why = realkube.bindir()
    except RuntimeError as e:
        t.bail_out(str(e))
    if bindir is None or kube_bins is None:
        t.skip_all(why or kube_why)
    return bindir


def run_clusters(t, prefix, workload_rbac, scenario, workload_listen="127.0.0.1:0"):
    """scenario(tmp, mgmt, workload, cloud, procs) with a management and a workload API server (on
    workload_listen) and the fake cloud under a new directory tmp; the processes it adds to procs
    are stopped after it.
    The directory (the cloud's state, the managers' logs) stays for a failed run only."""
    import realkube
    from fakecloud import FakeCloud
    tmp = tempfile.mkdtemp(prefix=prefix)
    procs = []
    with realkube.RealKube(os.path.join(tmp, "mgmt")) as mgmt, \
            realkube.RealKube(os.path.join(tmp, "workload"), rbac=workload_rbac, listen=workload_listen) as wl, \
            FakeCloud(os.path.join(tmp, "cloud")) as cloud:
        try:
            scenario(tmp, mgmt, wl, cloud, procs)
        finally:
            stop(procs)
    if t.failed:
        t.diag("kept %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def module_src():
    return subprocess.run([BUILD, "--src"], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kustomize(path):
    r = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("kubectl kustomize %s: %s" % (path, r.stderr))
    return r.stdout


class Repository:
    """clusterctl's local repository and configuration file under d."""

    def __init__(self, d, bindir):
        self.d, self.bindir = d, bindir
        self.root = os.path.join(d, "repository")
        self.config = os.path.join(d, "clusterctl.yaml")
        capi = module_src()
        providers = []
        for name, ptype, fname, kust in CAPI_PROVIDERS:
            vdir = os.path.join(self.root, LABELS[ptype], CAPI_VERSION)
            os.makedirs(vdir, exist_ok=True)
            with open(os.path.join(vdir, fname), "w") as f:
                f.write(_kustomize(os.path.join(capi, kust)))
            shutil.copyfile(os.path.join(capi, "metadata.yaml"), os.path.join(vdir, "metadata.yaml"))
            providers.append({"name": name, "type": ptype, "url": "file://" + os.path.join(vdir, fname)})
        vdir = os.path.join(self.root, LABELS["InfrastructureProvider"], CLOUDNODE_VERSION)
        os.makedirs(vdir, exist_ok=True)
        shutil.copyfile(build("manifests", "infrastructure-components.yaml"),
                        os.path.join(vdir, "infrastructure-components.yaml"))
        shutil.copyfile(build("manifests", "metadata.yaml"), os.path.join(vdir, "metadata.yaml"))
        for name in ("cluster-template.yaml", "cluster-template-openstack.yaml", "cluster-template-topology.yaml",
                     "clusterclass-cloudnode-hetzner.yaml", "cluster-template-ha.yaml",
                     "cluster-template-openstack-ha.yaml"):
            shutil.copyfile(src("templates", name), os.path.join(vdir, name))
        providers.append({"name": "cloudnode", "type": "InfrastructureProvider",
                          "url": "file://" + os.path.join(vdir, "infrastructure-components.yaml")})
        cmdir = os.path.join(self.root, "cert-manager", CERT_MANAGER_VERSION)
        os.makedirs(cmdir, exist_ok=True)
        shutil.copyfile(src("tests", "data", "realcapi-cert-manager.yaml"), os.path.join(cmdir, "cert-manager.yaml"))
        with open(self.config, "w") as f:
            yaml.safe_dump({"providers": providers,
                            "cert-manager": {"url": "file://" + os.path.join(cmdir, "cert-manager.yaml"),
                                             "version": CERT_MANAGER_VERSION, "timeout": "2m"}}, f)

    def clusterctl(self, kubeconfig, *args, env=None, check=True):
        """Runs clusterctl with this configuration; returns the CompletedProcess."""
        home = os.path.join(self.d, "clusterctl-home")
        os.makedirs(home, exist_ok=True)
        e = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
                 CLUSTERCTL_DISABLE_VERSIONCHECK="true", HTTP_PROXY="", HTTPS_PROXY="", NO_PROXY="")
        e.update(env or {})
        argv = [os.path.join(self.bindir, "clusterctl")] + list(args) + ["--config", self.config]
        if kubeconfig:
            argv += ["--kubeconfig", kubeconfig]
        r = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=300)
        if check and r.returncode:
            raise RuntimeError("%s: exit %d\n%s\n%s" % (" ".join(map(shlex.quote, argv)), r.returncode,
                                                       r.stdout[-3000:], r.stderr[-3000:]))
        return r


class CertManager:
    """What cert-manager's controller and cainjector do for the providers' components: every
    Certificate's Secret issued by one CA, that CA injected where cert-manager.io/inject-ca-from
    asks. And what the missing kube-proxy would do: the webhook Services, which the API server
    cannot reach, are replaced by URLs on loopback (ports: {namespace: port})."""

    def __init__(self, k, d):
        self.k, self.d = k, os.path.join(d, "cert-manager")
        os.makedirs(self.d, exist_ok=True)
        self.ca = certs.ensure_ca(self.d)
        with open(self.ca[0], "rb") as f:
            self.ca_pem = f.read()

    def issue(self):
        """Issues the Secret of every Certificate that has none; returns their number."""
        _, lst = self.k.api("GET", "/apis/cert-manager.io/v1/certificates")
        n = 0
        for c in lst.get("items", []):
            ns, name = c["metadata"]["namespace"], c["metadata"]["name"]
            secret = c["spec"]["secretName"]
            if self.k.api("GET", "/api/v1/namespaces/%s/secrets/%s" % (ns, secret))[0] == 200:
                continue
            crt, key = certs.issue(self.d, "%s-%s" % (ns, name), self.ca, name,
                                   sans=list(c["spec"]["dnsNames"]) + ["127.0.0.1"], server=True)
            data = {"tls.crt": open(crt, "rb").read(), "tls.key": open(key, "rb").read(), "ca.crt": self.ca_pem}
            st, body = self.k.api("POST", "/api/v1/namespaces/%s/secrets" % ns, {
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": secret, "annotations": {"cert-manager.io/certificate-name": name}},
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()}})
            if st != 201:
                raise RuntimeError("secret %s/%s: %s %s" % (ns, secret, st, body))
            n += 1
        return n

    def route(self, ports):
        """Injects the CA and points every webhook of the providers at loopback; returns the number
        of objects changed."""
        ca = base64.b64encode(self.ca_pem).decode()
        n = 0

        def client_config(cc):
            svc = cc.pop("service", None)
            if svc is None:
                return False
            cc["url"] = "https://127.0.0.1:%d%s" % (ports[svc["namespace"]], svc.get("path") or "")
            cc["caBundle"] = ca
            return True

        def update(path, change):
            """GET, change, PUT until no conflict (the managers migrate their CRDs meanwhile);
            whether change changed anything."""
            for _ in range(20):
                st, o = self.k.api("GET", path)
                if not change(o):
                    return False
                st, body = self.k.api("PUT", path, o)
                if st == 200:
                    return True
                if st != 409:
                    raise RuntimeError("PUT %s: %s %s" % (path, st, body))
            raise RuntimeError("PUT %s: conflicts" % path)

        def ours(cc):
            return (cc.get("service") or {}).get("namespace") in ports

        for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            path = "/apis/admissionregistration.k8s.io/v1/" + kind
            for o in self.k.api("GET", path)[1].get("items", []):
                n += update(path + "/" + o["metadata"]["name"], lambda o: any(
                    [client_config(w["clientConfig"]) for w in o.get("webhooks") or [] if ours(w["clientConfig"])]))
        # A CRD's new conversion settings make the API server rebuild its storage, a moment
        # later, and end every watch on its objects; a manager whose watch ends re-lists, and until
        # then its cache misses what was created meanwhile (a MachineDeployment that finds no
        # MachineSet creates one). So each CRD is changed under a watch of ours, and the route is
        # done when all those watches have ended: the managers started afterwards watch the new
        # storage. Names of CRDs whose watch did not end within timeout are in self.unsettled.
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

        def change(o):
            conv = o["spec"].get("conversion") or {}
            cc = (conv.get("webhook") or {}).get("clientConfig") or {}
            return conv.get("strategy") == "Webhook" and ours(cc) and client_config(cc)
        crds = [o for o in self.k.api("GET", path)[1].get("items", []) if change(copy.deepcopy(o))]
        watches = self._watch_objects(crds)
        changed = []
        for o in crds:
            name = o["metadata"]["name"]
            if update(path + "/" + name, change):
                n += 1
                changed.append(name)
        self.unsettled = [name for name in changed if not _drain(*watches.pop(name))]
        for c, _ in watches.values():
            c.close()
        return n

    def _watch_objects(self, crds, timeout=30):
        """An open watch on the objects of each of crds (at its storage version), by CRD name. A
        CRD's storage answers 429 while it is being set up (a moment, the first time its objects
        are asked for); those are asked again together."""
        watches, pending = {}, list(crds)
        end = time.monotonic() + timeout
        while pending:
            waiting = []
            for crd in pending:
                spec = crd["spec"]
                version = [v["name"] for v in spec["versions"] if v.get("storage")][0]
                c, r = self.k.open_watch("/apis/%s/%s/%s?watch=1&timeoutSeconds=%d" % (
                    spec["group"], version, spec["names"]["plural"], timeout * 2), timeout)
                if r.status == 200:
                    watches[crd["metadata"]["name"]] = (c, r)
                    continue
                body = r.read()
                c.close()
                if r.status != 429 or time.monotonic() > end:
                    for wc, _ in watches.values():
                        wc.close()
                    raise RuntimeError("watch %s: %s %s" % (crd["metadata"]["name"], r.status, body))
                waiting.append(crd)
            pending = waiting
            if pending:
                time.sleep(0.2)
        return watches


def _drain(conn, response):
    """Reads a watch to its end; whether it ended before the connection's timeout."""
    try:
        while response.readline():
            pass
        return True
    except (TimeoutError, OSError):
        return False
    finally:
        conn.close()


def aggregate_cluster_roles(k):
    """What kube-controller-manager's clusterrole-aggregation controller does (the test runs no
    controller manager): every ClusterRole with an aggregationRule gets the rules of the
    ClusterRoles its selectors match (Cluster API's managers' roles are aggregated, and so are
    the rules cloudnode adds to them). Returns the names of the roles written."""
    path = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    roles = k.api("GET", path)[1].get("items", [])
    done = []
    for r in roles:
        selectors = (r.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        if not selectors:
            continue
        rules = []
        for other in roles:
            labels = other["metadata"].get("labels") or {}
            if other is r or not any(all(labels.get(key) == v for key, v in (sel.get("matchLabels") or {}).items())
                                     for sel in selectors):
                continue
            rules += [x for x in other.get("rules") or [] if x not in rules]
        if rules != (r.get("rules") or []):
            r["rules"] = rules
            st, body = k.api("PUT", path + "/" + r["metadata"]["name"], r)
            if st != 200:
                raise RuntimeError("clusterrole %s: %s %s" % (r["metadata"]["name"], st, body))
            done.append(r["metadata"]["name"])
    return done


def deployment(k, namespace):
    """The one Deployment of a provider's namespace."""
    items = k.api("GET", "/apis/apps/v1/namespaces/%s/deployments" % namespace)[1].get("items", [])
    if len(items) != 1:
        raise RuntimeError("%s: %d Deployments" % (namespace, len(items)))
    return items[0]


def run_deployment(k, dep, program, d, args=lambda mounts: [], log_name=None):
    """Runs a Deployment's (first) container as a process, as its ServiceAccount: its args with
    $(VAR) expanded from its env (fieldRef metadata.namespace / metadata.name), every Secret
    volume written to a directory under d and its mount path replaced in the args, then
    args({mountPath: directory}) (later flags win). Returns (Popen, {mountPath: directory}, log path)."""
    ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {}
    for e in c.get("env") or []:
        ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        env[e["name"]] = {"metadata.namespace": ns, "metadata.name": name + "-0"}.get(ref, e.get("value", ""))
    mounts = {}
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for m in c.get("volumeMounts") or []:
        v = volumes.get(m["name"]) or {}
        if "secret" not in v:
            continue
        sd = os.path.join(d, "%s-%s-%s" % (ns, name, m["name"]))
        os.makedirs(sd, exist_ok=True)
        st, s = k.api("GET", "/api/v1/namespaces/%s/secrets/%s" % (ns, v["secret"]["secretName"]))
        if st != 200:
            raise RuntimeError("secret %s/%s: %s" % (ns, v["secret"]["secretName"], st))
        for key, val in (s.get("data") or {}).items():
            p = os.path.join(sd, key)
            with open(p, "wb") as f:
                f.write(base64.b64decode(val))
            os.chmod(p, 0o400)
        mounts[m["mountPath"]] = sd
    argv = []
    for a in c.get("args") or []:
        for var, val in env.items():
            a = a.replace("$(%s)" % var, val)
        for mp, sd in mounts.items():
            a = a.replace(mp.rstrip("/") + "/", sd + "/")
        argv.append(a)
    sa = pod.get("serviceAccountName", "default")
    kc = k.kubeconfig_for("system:serviceaccount:%s:%s" % (ns, sa))
    log = os.path.join(d, (log_name or "%s-%s" % (ns, name)) + ".log")
    p = subprocess.Popen([program] + argv + list(args(mounts)),
                         env=dict(os.environ, KUBECONFIG=kc, HTTP_PROXY="", HTTPS_PROXY="", NO_PROXY="", **env),
                         stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    return p, mounts, log


def run_capi_manager(k, namespace, bindir, d, port):
    """A Cluster API provider's manager from its Deployment, its webhook on loopback port;
    returns (Popen, log path). Leader election is off: controller-runtime finds its
    lease's namespace only in a Pod (the managers take no flag for it). The resync period is 15 s
    instead of 10 min: without a KubeadmControlPlane the core manager watches a workload cluster's
    Nodes only once its control plane is initialized, so the first control-plane Machine whose Node
    registers after its last reconcile learns its nodeRef only from a resync."""
    dep = deployment(k, namespace)

    def args(mounts):
        # The serving certificate's Secret volume (cert-manager's Secret) is the webhook's cert dir.
        certdir = [sd for mp, sd in mounts.items() if mp.rstrip("/").endswith("serving-certs")]
        return ["--leader-elect=false", "--webhook-port=%d" % port, "--webhook-cert-dir=%s" % certdir[0],
                "--health-addr=127.0.0.1:%d" % free_port(), "--diagnostics-address=127.0.0.1:%d" % free_port(),
                "--insecure-diagnostics=true", "--sync-period=15s"]
    p, _, log = run_deployment(k, dep, os.path.join(bindir, PROGRAMS[namespace]), d, args)
    return p, log


def wait_port(port, proc, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return True
        except OSError:
            time.sleep(0.3)
    return False


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def items(k, path):
    st, body = k.api("GET", path)
    return body.get("items", []) if st == 200 else []


def install(t, tmp, repo, mgmt, conf_b64, procs, who, ns="default", env=None):
    """clusterctl init on a management cluster, then its providers as processes, with the TAP
    lines of each step; whether all went well. who names the cluster in the test lines, ns the
    namespace of the workload clusters (cloudnode-controller's Secrets there), env more variables
    of clusterctl init (CLOUDNODE_PROVIDER)."""
    d = os.path.join(tmp, "providers-" + who)
    os.makedirs(d, exist_ok=True)
    r = repo.clusterctl(mgmt.kubeconfig, "init", "--core", "cluster-api:" + CAPI_VERSION,
                        "--bootstrap", "kubeadm:" + CAPI_VERSION,
                        "--control-plane", "kubeadm:" + CAPI_VERSION,
                        "--infrastructure", "cloudnode:" + CLOUDNODE_VERSION,
                        env=dict({"CLOUDNODE_B64ENCODED_CLOUD_CONF": conf_b64, "CLUSTER_TOPOLOGY": "true"}, **(env or {})),
                        check=False)
    t.ok(r.returncode == 0, "%s: clusterctl init installs the four providers from the local repository" % who,
         r.stdout[-3000:] + r.stderr[-3000:])
    if r.returncode:
        return False
    provs = sorted((p["metadata"]["name"], p.get("type"), p.get("version")) for p in
                   items(mgmt, "/apis/clusterctl.cluster.x-k8s.io/v1alpha3/providers"))
    t.eq(provs, [("bootstrap-kubeadm", "BootstrapProvider", CAPI_VERSION),
                 ("cluster-api", "CoreProvider", CAPI_VERSION),
                 ("control-plane-kubeadm", "ControlPlaneProvider", CAPI_VERSION),
                 ("infrastructure-cloudnode", "InfrastructureProvider", CLOUDNODE_VERSION)],
         "%s: clusterctl's inventory: the four providers at their versions" % who)

    # The providers, as processes.
    agg = aggregate_cluster_roles(mgmt)
    t.ok("capi-aggregated-manager-role" in agg, "%s: the aggregated ClusterRoles get their rules" % who, agg)
    cm = CertManager(mgmt, d)
    t.eq(cm.issue(), 3, "%s: cert-manager's part: a serving certificate for each Cluster API provider" % who)
    # The webhooks are routed before the managers start (see CertManager.route).
    ports = {system: free_port() for system in PROGRAMS}
    t.ok(cm.route(ports) >= 6 and not cm.unsettled,
         "%s: webhook configurations and conversion webhooks point at the managers" % who,
         "the API server did not end the watches on %s" % cm.unsettled if cm.unsettled else None)
    for system in PROGRAMS:
        p, log = run_capi_manager(mgmt, system, repo.bindir, d, ports[system])
        procs.append(p)
        ok = wait_port(ports[system], p)
        t.ok(ok, "%s: %s: the manager serves its webhooks" % (who, system),
             None if ok else open(log, errors="replace").read()[-4000:])
        if not ok:
            return False
    # The namespace owner's grants: reading the Secrets of the cluster's objects, and publishing
    # the cloud config Secret the templates' ClusterResourceSet applies.
    for binding, role in (("cloudnode-controller-secrets", "capi-secrets"),
                          ("cloudnode-controller-cloud-config", "capi-cloud-config")):
        mgmt.api("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings" % ns, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cloudnode:controller:" + role},
            "subjects": [{"kind": "ServiceAccount", "name": "cloudnode-controller",
                          "namespace": "cloudnode-system"}]})
    ctl_port = free_port()
    p, _, _ = run_deployment(
        mgmt, deployment(mgmt, "cloudnode-system"), build("controller", "cloudnode-controller"), d,
        lambda mounts: ["--port=%d" % ctl_port, "--bind-address=127.0.0.1", "-v", "4"])
    procs.append(p)
    return True


def dump(obj):
    return json.dumps(obj, indent=1, sort_keys=True)[:4000]
