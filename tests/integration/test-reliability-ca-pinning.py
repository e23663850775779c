#!/usr/bin/env python3
"""The cluster CA of a kubeconfig is the only CA trusted for the API server. An impostor on
loopback presents a certificate for 127.0.0.1 from a second CA, and that CA is placed in the
system store (/etc/ssl/certs, both the hashed directory and ca-certificates.crt, bind-mounted in a
private mount namespace made with unshare -m, so the host is untouched): the system store trusts it there,
as curl in the same namespace shows. The Kubernetes client, given the real cluster CA as
certificate-authority-data or as certificate-authority (a file), must refuse the impostor before
it sends the bearer token. With the second CA as the kubeconfig's CA the same request succeeds,
which shows the impostor answers and the token would have been sent."""
import base64
import http.server
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build, root_is_mount  # noqa: E402

DRIVER = build("tests", "kube-client-driver")
TOKEN = "pinning-bearer-token-4b1d"


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(d, name):
    key, crt = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=" + name, "-keyout", key, "-out", crt)
    return key, crt


def make_server_cert(d, ca_key, ca_crt):
    key, csr, crt = (os.path.join(d, "server." + e) for e in ("key", "csr", "crt"))
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", key, "-out", csr)
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
            "-extfile", ext, "-out", crt)
    return key, crt


class Impostor(http.server.BaseHTTPRequestHandler):
    tokens = []

    def do_GET(self):
        Impostor.tokens.append(self.headers.get("Authorization"))
        body = b'{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "resourceVersion": "1"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def kubeconfig(path, port, ca_field, ca_value):
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:%d\n    %s: %s\n"
                "users:\n- name: u\n  user:\n    token: %s\n"
                "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n" % (port, ca_field, ca_value, TOKEN))
    return path


def in_store_namespace(store, *cmd):
    """cmd in a private mount namespace whose /etc/ssl/certs is store."""
    script = 'mount --make-rprivate / && mount --bind "$0" /etc/ssl/certs && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, store, *cmd], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, HTTPS_PROXY="", https_proxy="", NO_PROXY="*"))


def main():
    t = Tap()
    if os.geteuid() != 0:
        t.skip_all("a private mount namespace needs root")
    if not root_is_mount():
        t.skip_all("/ is not a mount point here (a chroot): the system CA store cannot be replaced in a "
                   "private mount namespace")
    p = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if p.returncode != 0:
        t.bail_out("root cannot make a private mount namespace: %s" % p.stderr.strip())
    with tempfile.TemporaryDirectory() as tmp:
        cluster_key, cluster_ca = make_ca(tmp, "cluster-ca")
        public_key, public_ca = make_ca(tmp, "public-ca")
        srv_key, srv_crt = make_server_cert(tmp, public_key, public_ca)
        store = os.path.join(tmp, "store")
        os.mkdir(store)
        shutil.copy(public_ca, os.path.join(store, "public-ca.pem"))
        shutil.copy(public_ca, os.path.join(store, "ca-certificates.crt"))
        openssl("rehash", store)

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(srv_crt, srv_key)
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        port = httpd.server_address[1]
        try:
            p = in_store_namespace(store, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                   "https://127.0.0.1:%d/api/v1/nodes/n1" % port)
            t.eq(p.stdout, "200", "the second CA is trusted by the system store in the namespace (curl)")
            Impostor.tokens.clear()

            with open(cluster_ca, "rb") as f:
                cluster_data = base64.b64encode(f.read()).decode()
            for field, value in (("certificate-authority-data", cluster_data),
                                 ("certificate-authority", cluster_ca)):
                kc = kubeconfig(os.path.join(tmp, "kc-" + field), port, field, value)
                p = in_store_namespace(store, DRIVER, "--kubeconfig", kc, "get", "nodes", "-", "n1")
                t.ok(p.returncode != 0, "%s: the impostor's certificate is refused" % field, p.stdout + p.stderr)
                t.eq(Impostor.tokens, [], "%s: and the token never reached it" % field)
                Impostor.tokens.clear()

            kc = kubeconfig(os.path.join(tmp, "kc-public"), port, "certificate-authority", public_ca)
            p = in_store_namespace(store, DRIVER, "--kubeconfig", kc, "get", "nodes", "-", "n1")
            t.eq(p.returncode, 0, "control: with the impostor's CA as the cluster CA the request succeeds")
            t.eq(Impostor.tokens, ["Bearer " + TOKEN], "control: and carries the token")
        finally:
            httpd.shutdown()
            httpd.server_close()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
