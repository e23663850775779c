"""Runs tests/fake-kube-apiserver for a test and talks to it.

    with FakeKube(state_dir, rbac=[manifest yaml paths], extra_args=[]) as k:
        k.url                      https URL
        k.kubeconfig               admin kubeconfig (client certificate, group system:masters)
        k.kubeconfig_for(user, groups=[...]) -> path of a kubeconfig with a bearer token for that
                                   identity; service accounts are "system:serviceaccount:NS:NAME" and
                                   get their groups (system:serviceaccounts[:NS]) from the server
        k.api(method, path, body=None, content_type=None) -> (status, parsed json)  as admin
        k.audit() -> list of dicts, one per request (user, verb, path, code, ...)
        k.inject(dict or list) -> the fault rules as stored (see Faults in tests/fakekube/server.py)
        k.clear_faults()
        k.watch(path, timeout=...) -> iterator of (type, object) from a watch stream
        k.kubectl(*args, kubeconfig=None) -> subprocess.CompletedProcess (text)
        k.serviceaccount_dir(ns, name, dest) -> dest with token, ca.crt, namespace (in-cluster config)

kube_server(state_dir, **same arguments) is a FakeKube or, with CN_KUBE_SERVER=real, the real
kube-apiserver behind the same interface (tests/pylib/realkube.py).

The server's own documentation: tests/fakekube/README.md."""
import base64
import contextlib
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
from urllib.parse import urlsplit

_HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(os.path.dirname(_HERE), "fake-kube-apiserver")
# Where the per-node ServiceAccounts live (manifests/controller/node-identity-namespace.yaml) and
# how long the tokens the tests mint for them last (a day: longer than any test).
NODE_NAMESPACE = "cloudnode-nodes"
NODE_TOKEN_SECONDS = 86400


class FakeKube:
    # Whether audit() records carry the request's contentType; whether inject() is there.
    AUDIT_CONTENT_TYPE = True
    FAULT_INJECTION = True

    def __init__(self, state_dir, rbac=None, extra_args=None, listen="127.0.0.1:0", load=None, timeout=30):
        self.state_dir = state_dir
        self.rbac = list(rbac or [])
        self.load = list(load or [])
        self.extra_args = list(extra_args or [])
        self.listen = listen
        self.timeout = timeout
        self.proc = None
        self.url = None
        self.kubeconfig = os.path.join(state_dir, "admin.kubeconfig")
        self._n = 0

    # --- lifecycle -----------------------------------------------------------------------

    def start(self):
        os.makedirs(self.state_dir, exist_ok=True)
        args = [sys.executable, "-B", SERVER, "--listen", self.listen, "--state-dir", self.state_dir]
        for r in self.rbac:
            args += ["--rbac", r]
        for f in self.load:
            args += ["--load", f]
        args += self.extra_args
        self._stderr = open(os.path.join(self.state_dir, "server.log"), "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith(("https://", "http://")):
            self.stop()
            with open(os.path.join(self.state_dir, "server.log")) as f:
                raise RuntimeError("fake-kube-apiserver did not start: %r %s" % (line, f.read()))
        self.url = line
        u = urlsplit(self.url)
        self.host, self.port = u.hostname, u.port
        self.https = u.scheme == "https"
        self._ctx = None
        self._admin_token = None
        if not self.https:
            with open(self.kubeconfig) as f:
                self._admin_token = json.load(f)["users"][0]["user"]["token"]
        if self.https:
            self._ctx = ssl.create_default_context(cafile=os.path.join(self.state_dir, "ca.crt"))
            self._ctx.load_cert_chain(os.path.join(self.state_dir, "admin.crt"),
                                      os.path.join(self.state_dir, "admin.key"))
        return self

    def stop(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self._stderr.close()
        rc = self.proc.returncode
        self.proc = None
        return rc

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- requests ------------------------------------------------------------------------

    def _conn(self, timeout=None):
        t = timeout or self.timeout
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, context=self._ctx, timeout=t)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def _conn_as(self, token=None, timeout=None):
        """A connection that authenticates with token, or as admin without one."""
        if token and self.https:
            # A token request must not also present the admin certificate.
            ctx = ssl.create_default_context(cafile=os.path.join(self.state_dir, "ca.crt"))
            return http.client.HTTPSConnection(self.host, self.port, context=ctx, timeout=timeout or self.timeout)
        return self._conn(timeout)

    def _authorization(self, token):
        return {"Authorization": "Bearer " + token} if token else {}

    def request(self, method, path, body=None, content_type=None, headers=None, token=None):
        """Returns (status, headers dict, raw body bytes)."""
        h = dict(headers or {})
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            h.setdefault("Content-Type", content_type or "application/json")
        h.setdefault("Accept", "application/json")
        h.update(self._authorization(token or self._admin_token))
        c = self._conn_as(token)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def api(self, method, path, body=None, content_type=None, token=None, headers=None):
        status, _, raw = self.request(method, path, body, content_type, headers=headers, token=token)
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return status, parsed

    # --- identities ----------------------------------------------------------------------

    def token_for(self, user, groups=None):
        st, r = self.api("POST", "/fakekube/tokens", {"user": user, "groups": list(groups or [])})
        if st != 201:
            raise RuntimeError("token registration failed: %s %s" % (st, r))
        return r["token"]

    def kubeconfig_for(self, user, groups=None):
        return self._write_kubeconfig(user, self.token_for(user, groups))

    def node_identity(self, node, namespace=NODE_NAMESPACE, seconds=NODE_TOKEN_SECONDS):
        """What the installer does for each node (docs/design.md, Security): the ServiceAccount
        named after the Node in the node-identity namespace (both created if missing), and a
        token for it from the TokenRequest API, as `kubectl create token` gets one. Returns
        (user name, token)."""
        for path, body in (("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": namespace}}),
                           ("/api/v1/namespaces/%s/serviceaccounts" % namespace,
                            {"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": node, "namespace": namespace}})):
            st, r = self.api("POST", path, body)
            if st not in (201, 409):
                raise RuntimeError("creating %s failed: %s %s" % (path, st, r))
        st, r = self.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (namespace, node),
                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                          "spec": {"expirationSeconds": seconds}})
        if st != 201:
            raise RuntimeError("TokenRequest for %s/%s failed: %s %s" % (namespace, node, st, r))
        return "system:serviceaccount:%s:%s" % (namespace, node), r["status"]["token"]

    def node_kubeconfig(self, node, namespace=NODE_NAMESPACE):
        """A kubeconfig with node's own credential (node_identity())."""
        user, tok = self.node_identity(node, namespace)
        return self._write_kubeconfig(user, tok)

    def _write_kubeconfig(self, user, tok):
        self._n += 1
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        path = os.path.join(self.state_dir, "kubeconfig-%s-%d" % (safe, self._n))
        cluster = {"server": self.url}
        if self.https:
            with open(os.path.join(self.state_dir, "ca.crt"), "rb") as f:
                cluster["certificate-authority-data"] = base64.b64encode(f.read()).decode()
        cfg = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "fake", "cluster": cluster}],
               "users": [{"name": safe, "user": {"token": tok}}],
               "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": safe}}],
               "current-context": "fake"}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(cfg, f, indent=2)
        return path

    def serviceaccount_dir(self, namespace, name, dest):
        """Writes what a pod of that service account sees in
        /var/run/secrets/kubernetes.io/serviceaccount (token, ca.crt, namespace) into dest, for
        in-cluster configuration; returns dest. The API address is self.host/self.port
        (KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT)."""
        os.makedirs(dest, exist_ok=True)
        tok = self.token_for("system:serviceaccount:%s:%s" % (namespace, name))
        for fname, data, mode in (("token", tok, 0o600), ("namespace", namespace, 0o644)):
            fd = os.open(os.path.join(dest, fname), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "w") as f:
                f.write(data)
        if self.https:
            shutil.copyfile(os.path.join(self.state_dir, "ca.crt"), os.path.join(dest, "ca.crt"))
        return dest

    # --- observation and faults ----------------------------------------------------------

    def audit(self):
        out = []
        with open(os.path.join(self.state_dir, "audit.jsonl")) as f:
            for line in f:
                # The server may be writing the last record right now: a line without its
                # newline is not complete yet.
                if line.strip() and line.endswith("\n"):
                    out.append(json.loads(line))
        return out

    def inject(self, rule):
        st, r = self.api("POST", "/fakekube/faults", rule)
        if st != 201:
            raise RuntimeError("fault injection failed: %s %s" % (st, r))
        return r["faults"] if isinstance(rule, list) else r["faults"][0]

    def clear_faults(self):
        self.api("DELETE", "/fakekube/faults")

    def open_watch(self, path, timeout=10, token=None):
        """Sends the watch request path; returns (connection, response), the body unread."""
        c = self._conn_as(token, timeout)
        h = {"Accept": "application/json"}
        h.update(self._authorization(token or self._admin_token))
        try:
            c.request("GET", path, headers=h)
            return c, c.getresponse()
        except BaseException:
            c.close()
            raise

    def watch(self, path, timeout=10, token=None):
        """Yields (type, object) for each event of a watch stream until it ends or times out."""
        c, r = self.open_watch(path, timeout, token)
        try:
            if r.status != 200:
                raise RuntimeError("watch %s: %s %s" % (path, r.status, r.read()))
            while True:
                try:
                    line = r.readline()
                except (TimeoutError, OSError):
                    return
                if not line:
                    return
                ev = json.loads(line)
                yield ev["type"], ev["object"]
        finally:
            c.close()

    def kubectl(self, *args, kubeconfig=None, input=None, timeout=60):
        env = dict(os.environ, KUBECONFIG=kubeconfig or self.kubeconfig, HOME=self.state_dir)
        return subprocess.run(["kubectl"] + list(args), env=env, input=input, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout)

    def kubectl_popen(self, *args):
        """kubectl started in the background (stdout and stderr piped together, as text)."""
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, HOME=self.state_dir)
        return subprocess.Popen(["kubectl"] + list(args), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def kubectl_wait_deleted(self, ref, timeout="10s"):
        """`kubectl wait --for=delete REF`. kubectl 1.20 fails with "no matching resources found"
        when the object is gone before it looks, where later versions succeed; both mean the
        object is gone, so that answer counts as success."""
        r = self.kubectl("wait", "--for=delete", ref, "--timeout=" + timeout)
        if r.returncode != 0 and "no matching resources found" in r.stderr:
            return subprocess.CompletedProcess(r.args, 0, r.stdout, r.stderr)
        return r


_kubectl_minor = None


def kubectl_minor():
    """The minor version of the kubectl on PATH (20 for Debian 12's kubernetes-client), so that a
    test can skip, naming the version, what only a newer kubectl has."""
    global _kubectl_minor
    if _kubectl_minor is None:
        out = subprocess.run(["kubectl", "version", "--client", "-o", "json"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, check=True).stdout
        _kubectl_minor = int("".join(c for c in json.loads(out)["clientVersion"]["minor"] if c.isdigit()))
    return _kubectl_minor


def server_kind():
    """Which API server the tests that can run against both use: CN_KUBE_SERVER=fake (the default)
    or real (tests/pylib/realkube.py)."""
    kind = os.environ.get("CN_KUBE_SERVER") or "fake"
    if kind not in ("fake", "real"):
        raise ValueError("CN_KUBE_SERVER must be fake or real, not %r" % kind)
    return kind


def kube_server(state_dir, **kwargs):
    """A FakeKube, or with CN_KUBE_SERVER=real a RealKube, with FakeKube's arguments. Where no Go
    can build the real server, the test reports itself skipped (TAP plan 1..0), saying so; where
    one can but it is not built, that is an error of the tree (Bail out!). Call it before the
    first test line."""
    if server_kind() == "fake":
        return FakeKube(state_dir, **kwargs)
    import realkube
    try:
        bins, why = realkube.bindir()
    except RuntimeError as e:
        print("Bail out! %s" % e)
        sys.stdout.flush()
        sys.exit(1)
    if bins is None:
        print("1..0 # SKIP %s" % why)
        sys.stdout.flush()
        sys.exit(0)
    return realkube.RealKube(state_dir, **kwargs)


def state_dir(prefix="fakekube-"):
    return tempfile.mkdtemp(prefix=prefix)


@contextlib.contextmanager
def scratch_server(**kwargs):
    """A FakeKube in a temporary state directory that is removed afterwards."""
    d = state_dir()
    try:
        with FakeKube(os.path.join(d, "kube"), **kwargs) as k:
            yield k
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_with_server(t, fns, **kwargs):
    """Runs test functions fn(t, k) against one scratch server (see cntap.Tap.run)."""
    with scratch_server(**kwargs) as k:
        for fn in fns:
            t.run(fn, k)

