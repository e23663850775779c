"""Runs the real kube-apiserver (with etcd) for a test, behind the interface of FakeKube.

The tests prove cloudnode's cluster-side behaviour against tests/fake-kube-apiserver; a test that
needs no fault injection and no audit log also runs against the real API server, which judges the
fake: where the two disagree, the real one is right (tests/fakekube/README.md, "Checked against
the real API server"). A test picks its server with kube_server() from fakekubeclient, which reads
CN_KUBE_SERVER=fake|real.

    with RealKube(state_dir, rbac=[manifest yaml paths], load=[yaml paths]) as k:
        the same attributes and methods as FakeKube, except inject() and clear_faults(), which
        only the fake has; audit() reads the real server's audit log.

The server: etcd on loopback with its data in the state directory; kube-apiserver with
--authorization-mode=Node,RBAC, the default admission plugins plus NodeRestriction (the
ValidatingAdmissionPolicy plugin is one of the defaults), a CA and serving certificate made for
the run, service-account token signing with a key pair made for the run. Identities:
ServiceAccounts ("system:serviceaccount:NS:NAME") get tokens from the TokenRequest API (the
ServiceAccount, and its namespace, are created if missing); any other user gets a client
certificate (CN user, O groups) signed by the run's CA. token_for() returns a bearer token for a
ServiceAccount and, for another user, a handle that request() and watch() turn into that user's
certificate; kubeconfig_for() writes the token or the certificate.

The binaries come from tests/realkube/build.sh (make real-kube), cached per pinned version."""
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from urllib.parse import urlsplit

_HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(os.path.dirname(_HERE), "realkube", "build.sh")
sys.path.insert(0, os.path.dirname(_HERE))
from fakekube import certs  # noqa: E402
from fakekube.server import kubeconfig as _kubeconfig  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

ISSUER = "https://kubernetes.default.svc.cluster.local"
# Every request at level Metadata (no bodies: no Secret in the log), once it is answered.
AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata"}]}
_METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH",
            "delete": "DELETE", "deletecollection": "DELETE"}
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
_CERT_HANDLE = "cn-realkube-client-certificate:"


def bindir():
    """(directory holding kube-apiserver and etcd, None); (None, why) when they cannot be built
    here for want of Go >= 1.23 or of a reachable module proxy (the test skips). With both but
    without the binaries, the tree is not built: RuntimeError."""
    r = subprocess.run([BUILD, "--bindir"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode == 0:
        return r.stdout.strip(), None
    if subprocess.run([BUILD, "--go"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 77:
        return None, ("no Go >= 1.23 to build the real kube-apiserver and etcd with "
                      "(golang-1.23-go from bookworm-backports)")
    r = subprocess.run([BUILD, "--unreachable"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode == 0:
        return None, "the real kube-apiserver and etcd cannot be built here: " + " ".join(r.stdout.split())
    raise RuntimeError("the real kube-apiserver and etcd are not built: run make real-kube")


def _free_port(host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _yaml_docs(path):
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _fake_record(ev):
    """An audit.k8s.io/v1 Event as a record of the fake's audit log; None for the stage the fake
    does not log (a watch is logged when its stream starts, any other request when it is done)."""
    watch = ev.get("verb") == "watch"
    if ev.get("stage") != ("ResponseStarted" if watch else "ResponseComplete"):
        return None
    ref = ev.get("objectRef") or {}
    path, _, query = ev.get("requestURI", "").partition("?")
    user = ev.get("user") or {}
    return {"time": ev.get("stageTimestamp"), "received": ev.get("requestReceivedTimestamp"), "auditID": ev.get("auditID"), "stage": ev.get("stage"),
            "user": user.get("username"), "groups": user.get("groups") or [], "verb": ev.get("verb"),
            "method": _METHODS.get(ev.get("verb"), ev.get("verb", "").upper()), "apiGroup": ref.get("apiGroup", ""),
            "apiVersion": ref.get("apiVersion", ""), "resource": ref.get("resource", ""),
            "subresource": ref.get("subresource", ""), "namespace": ref.get("namespace", ""),
            "name": ref.get("name", ""), "path": path, "query": query, "userAgent": ev.get("userAgent", ""),
            "code": (ev.get("responseStatus") or {}).get("code", 0)}


class RealKube(FakeKube):
    AUDIT_CONTENT_TYPE = False
    FAULT_INJECTION = False

    def __init__(self, state_dir, rbac=None, extra_args=None, listen="127.0.0.1:0", load=None, timeout=30,
                 garbage_collector=False):
        """garbage_collector: also run kube-controller-manager's garbage collector (the program
        tests/realkube/build.sh builds next to kube-apiserver), which deletes the dependants of a
        deleted owner as in a cluster."""
        if extra_args:
            raise ValueError("extra_args are options of the fake API server, not of the real one: %r" % extra_args)
        host, _, port = listen.rpartition(":")
        if not port.isdigit():
            raise ValueError("the real API server listens on ADDRESS:PORT (PORT 0: a free one), not %r" % listen)
        super().__init__(state_dir, rbac=rbac, load=load, timeout=timeout)
        self.listen_host = host
        self.listen_port = int(port)
        self.etcd = None
        self.gc = None
        self.garbage_collector = garbage_collector
        self._certs = {}
        self._resources = {}

    # --- lifecycle -----------------------------------------------------------------------

    def _gen_certs(self):
        d = self.state_dir
        ca = certs.ensure_ca(d)
        self._ca = ca
        certs.issue(d, "apiserver", ca, "kube-apiserver", sans=sorted({"127.0.0.1", self.listen_host}) + [
            "localhost", "kubernetes", "kubernetes.default.svc"], server=True)
        admin_crt, admin_key = certs.issue(d, "admin", ca, "kubernetes-admin", orgs=["system:masters"])
        for args in (["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "sa.key"],
                     ["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"]):
            subprocess.run(["openssl"] + args, cwd=d, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        os.chmod(os.path.join(d, "sa.key"), 0o600)
        return admin_crt, admin_key

    def start(self):
        bins, why = bindir()
        if bins is None:
            raise RuntimeError(why)
        os.makedirs(self.state_dir, exist_ok=True)
        admin_crt, admin_key = self._gen_certs()
        d = self.state_dir
        with open(os.path.join(d, "audit-policy.yaml"), "w") as f:
            json.dump(AUDIT_POLICY, f)
        p = lambda name: os.path.join(d, name)  # noqa: E731
        for _ in range(3):
            self._stderr = open(p("server.log"), "ab")
            # A free port found here may be taken by another test before the server binds it:
            # then the server exits, and another set of ports is tried.
            etcd_port, peer_port = _free_port(), _free_port()
            port = self.listen_port or _free_port(self.listen_host)
            etcd_url = "http://127.0.0.1:%d" % etcd_port
            peer_url = "http://127.0.0.1:%d" % peer_port
            data = os.path.join(d, "etcd")
            shutil.rmtree(data, ignore_errors=True)
            self.etcd = subprocess.Popen(
                [os.path.join(bins, "etcd"), "--name", "default", "--data-dir", data,
                 "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                 "--initial-cluster", "default=" + peer_url, "--unsafe-no-fsync", "--log-level", "error"],
                stdout=subprocess.DEVNULL, stderr=self._stderr)
            self.proc = subprocess.Popen(
                [os.path.join(bins, "kube-apiserver"), "--etcd-servers", etcd_url,
                 "--bind-address", self.listen_host, "--advertise-address", self.listen_host,
                 "--secure-port", str(port),
                 "--tls-cert-file", p("apiserver.crt"), "--tls-private-key-file", p("apiserver.key"),
                 "--client-ca-file", p("ca.crt"), "--cert-dir", p("certs"),
                 "--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
                 "--service-account-issuer", ISSUER, "--service-account-key-file", p("sa.pub"),
                 "--service-account-signing-key-file", p("sa.key"),
                 "--service-cluster-ip-range", "10.96.0.0/16", "--endpoint-reconciler-type", "none",
                 "--enable-priority-and-fairness=false", "--profiling=false",
                 "--audit-policy-file", p("audit-policy.yaml"), "--audit-log-path", p("audit-real.jsonl"),
                 "--audit-log-format", "json", "--audit-log-mode", "blocking"],
                stdout=subprocess.DEVNULL, stderr=self._stderr)
            self.url = "https://%s:%d" % (self.listen_host, port)
            u = urlsplit(self.url)
            self.host, self.port, self.https = u.hostname, u.port, True
            self._admin_token = None
            self._ctx = ssl.create_default_context(cafile=p("ca.crt"))
            self._ctx.load_cert_chain(admin_crt, admin_key)
            if self._wait_ready():
                break
            self.stop()
        else:
            with open(p("server.log"), errors="replace") as f:
                raise RuntimeError("kube-apiserver did not start: %s" % f.read()[-4000:])
        self._write_private(self.kubeconfig, _kubeconfig(self.url, p("ca.crt"), "admin", admin_crt, admin_key))
        for path in self.rbac:
            for doc in _yaml_docs(path):
                if doc.get("kind") in RBAC_KINDS:
                    self.create(doc)
        for path in self.load:
            for doc in _yaml_docs(path):
                self.create(doc)
        if self.garbage_collector:
            gc = os.path.join(bins, "garbage-collector")
            if not os.access(gc, os.X_OK):
                raise RuntimeError("the garbage collector is not built: run make real-kube")
            with open(p("garbage-collector.log"), "ab") as log:
                self.gc = subprocess.Popen([gc, "--kubeconfig", self.kubeconfig], stdout=subprocess.DEVNULL,
                                           stderr=log)
        return self

    def _wait_ready(self, timeout=90):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None or self.etcd.poll() is not None:
                return False
            try:
                st, _, _ = self.request("GET", "/readyz")
                if st == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def stop(self):
        rc = None
        for name in ("gc", "proc", "etcd"):
            proc = getattr(self, name)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if name == "proc":
                rc = proc.returncode
            setattr(self, name, None)
        if getattr(self, "_stderr", None):
            self._stderr.close()
            self._stderr = None
        return rc

    # --- objects -------------------------------------------------------------------------

    def resource_path(self, api_version, kind, namespace=None):
        """The collection path of kind (from discovery), in namespace when it is namespaced."""
        if api_version not in self._resources:
            base = "/api/" + api_version if "/" not in api_version else "/apis/" + api_version
            st, r = self.api("GET", base)
            if st != 200:
                raise RuntimeError("discovery of %s: %s %s" % (api_version, st, r))
            self._resources[api_version] = (base, {x["kind"]: x for x in r["resources"] if "/" not in x["name"]})
        base, kinds = self._resources[api_version]
        res = kinds[kind]
        if res["namespaced"]:
            return "%s/namespaces/%s/%s" % (base, namespace or "default", res["name"])
        return "%s/%s" % (base, res["name"])

    def ensure_namespace(self, ns):
        st, r = self.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
        if st not in (201, 409):
            raise RuntimeError("creating namespace %s: %s %s" % (ns, st, r))

    def create(self, obj):
        """Creates obj as admin (its namespace first), or replaces it when it exists, as the fake's
        --load and --rbac do."""
        md = obj.get("metadata") or {}
        path = self.resource_path(obj["apiVersion"], obj["kind"], md.get("namespace"))
        if "/namespaces/" in path:
            self.ensure_namespace(path.split("/namespaces/")[1].split("/")[0])
        st, r = self.api("POST", path, obj)
        if st == 409:
            cur_st, cur = self.api("GET", path + "/" + md["name"])
            obj = dict(obj, metadata=dict(md, resourceVersion=cur["metadata"]["resourceVersion"]))
            st, r = self.api("PUT", path + "/" + md["name"], obj)
        if st not in (200, 201):
            raise RuntimeError("creating %s %s: %s %s" % (obj["kind"], md.get("name"), st, r))
        return r

    # --- identities ----------------------------------------------------------------------

    def token_for(self, user, groups=None):
        parts = user.split(":")
        if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
            ns, name = parts[2], parts[3]
            self.ensure_namespace(ns)
            st, r = self.api("POST", "/api/v1/namespaces/%s/serviceaccounts" % ns,
                             {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
            if st not in (201, 409):
                raise RuntimeError("creating ServiceAccount %s: %s %s" % (user, st, r))
            st, r = self.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (ns, name),
                             {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                              "spec": {"expirationSeconds": 3600}})
            if st != 201:
                raise RuntimeError("TokenRequest for %s: %s %s" % (user, st, r))
            return r["status"]["token"]
        key = (user, tuple(groups or ()))
        if key not in self._certs:
            self._n += 1
            self._certs[key] = certs.issue(self.state_dir, "user-%d" % self._n, self._ca, user,
                                           orgs=list(groups or ()))
        return _CERT_HANDLE + "%s" % list(self._certs).index(key)

    def _cert_of(self, token):
        if token and token.startswith(_CERT_HANDLE):
            return list(self._certs.values())[int(token[len(_CERT_HANDLE):])]
        return None

    def _conn_as(self, token=None, timeout=None):
        cert = self._cert_of(token)
        if cert is None:
            return super()._conn_as(token, timeout)
        ctx = ssl.create_default_context(cafile=os.path.join(self.state_dir, "ca.crt"))
        ctx.load_cert_chain(*cert)
        return http.client.HTTPSConnection(self.host, self.port, context=ctx, timeout=timeout or self.timeout)

    def _authorization(self, token):
        # A certificate handle is no bearer token: the certificate is the credential.
        return {} if self._cert_of(token) else super()._authorization(token)

    def kubeconfig_for(self, user, groups=None):
        tok = self.token_for(user, groups)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        self._n += 1
        path = os.path.join(self.state_dir, "kubeconfig-%s-%d" % (safe, self._n))
        cert = self._cert_of(tok)
        text = _kubeconfig(self.url, os.path.join(self.state_dir, "ca.crt"), safe,
                           cert=cert[0] if cert else None, key=cert[1] if cert else None,
                           token=None if cert else tok)
        self._write_private(path, text)
        return path

    @staticmethod
    def _write_private(path, text):
        # Kubeconfigs hold a private key or a token: readable by their owner only.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)

    # --- what only the fake has ----------------------------------------------------------

    def audit(self):
        """The real server's audit log in the fake's record format (tests/fakekube/README.md, Audit
        log), without contentType, duration and watchEvents, which it does not record. An event is
        logged just after its response is sent: a request of our own is made and waited for first,
        so that what was answered before it is in the log."""
        self._marks = getattr(self, "_marks", itertools.count(1))
        mark = "/version?cn-audit-mark=%d" % next(self._marks)
        self.request("GET", mark)
        end = time.monotonic() + 10
        while True:
            out, seen = [], False
            with open(os.path.join(self.state_dir, "audit-real.jsonl")) as f:
                for line in f:
                    if not line.endswith("\n"):
                        break
                    ev = json.loads(line)
                    if ev.get("requestURI") == mark:
                        seen = True
                        continue
                    rec = _fake_record(ev)
                    if rec is not None:
                        out.append(rec)
            if seen or time.monotonic() > end:
                return out
            time.sleep(0.02)

    def inject(self, rule):
        raise NotImplementedError("fault injection is the fake API server's; this test runs against the real one")

    def clear_faults(self):
        raise NotImplementedError("fault injection is the fake API server's; this test runs against the real one")
