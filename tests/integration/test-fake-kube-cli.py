#!/usr/bin/env python3
"""tests/fake-kube-apiserver as a program: options (--token, --token-file, --san, --insecure-http,
--load), clean exit on SIGTERM, bad input refused with one clear line, state-dir reuse, and the
wrapper's in-cluster service account directory."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, src  # noqa: E402
from fakekubeclient import SERVER, FakeKube, scratch_server, state_dir  # noqa: E402


def test_tokens_and_san(t):
    d = state_dir()
    try:
        tf = os.path.join(d, "tokens.csv")
        with open(tf, "w") as f:
            f.write('csvtoken,carl,1001,"ops,dev"\n')
        args = ["--token", "static1=alice,admins", "--token-file", tf, "--san", "10.0.2.2", "--san", "kube.example"]
        with FakeKube(os.path.join(d, "s"), extra_args=args) as k:
            st, r = k.api("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, token="static1")
            ui = r["status"]["userInfo"]
            t.eq((ui["username"], ui["groups"]), ("alice", ["admins", "system:authenticated"]), "--token identity")
            st, r = k.api("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, token="csvtoken")
            ui = r["status"]["userInfo"]
            t.eq((ui["username"], ui["groups"]), ("carl", ["ops", "dev", "system:authenticated"]), "--token-file")
            out = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in",
                                  os.path.join(k.state_dir, "apiserver.crt")], stdout=subprocess.PIPE, text=True)
            t.ok("IP Address:10.0.2.2" in out.stdout and "DNS:kube.example" in out.stdout
                 and "IP Address:127.0.0.1" in out.stdout, "--san in the server certificate", out.stdout)
            sa = k.serviceaccount_dir("kube-system", "cn", os.path.join(d, "sa"))
            with open(os.path.join(sa, "token")) as f:
                tok = f.read()
            st, r = k.api("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, token=tok)
            t.eq(r["status"]["userInfo"]["username"], "system:serviceaccount:kube-system:cn",
                 "service account directory token")
            t.ok(os.path.exists(os.path.join(sa, "ca.crt")) and oct(os.stat(os.path.join(sa, "token")).st_mode & 0o777)
                 == "0o600", "ca.crt present, token 0600")
            ca_before = open(os.path.join(k.state_dir, "ca.crt")).read()
            rc = k.stop()
            t.eq(rc, 0, "SIGTERM: exit 0")
        with FakeKube(os.path.join(d, "s")) as k:
            t.eq(open(os.path.join(k.state_dir, "ca.crt")).read(), ca_before, "restart reuses the CA")
            st, _ = k.api("GET", "/version")
            t.eq(st, 200, "restarted server serves")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_insecure(t):
    with scratch_server(extra_args=["--insecure-http"]) as k:
        t.ok(k.url.startswith("http://"), "--insecure-http URL")
        st, r = k.api("GET", "/api/v1/namespaces")
        t.eq(st, 200, "admin token from admin.kubeconfig works over HTTP")
        st, r = k.api("GET", "/api/v1/namespaces", token="nope")
        t.eq(st, 401, "other tokens still 401")
        r = k.kubectl("get", "ns", "default", "-o", "name")
        t.eq(r.stdout.strip(), "namespace/default", "kubectl over HTTP (no credentials: admin)")
        tok = k.token_for("nobody")
        st, r = k.api("GET", "/api/v1/namespaces", token=tok)
        t.eq(st, 403, "a token selects its own identity over HTTP")


def test_bad_input(t):
    d = state_dir()
    try:
        bad = os.path.join(d, "bad.yaml")
        with open(bad, "w") as f:
            f.write("apiVersion: v1\nkind: Nope\nmetadata: {name: x}\n")
        for args, what in ((["--listen", "127.0.0.1:notaport"], "bad --listen"),
                           (["--token", "novalue"], "bad --token"),
                           (["--load", bad], "unknown kind in --load"),
                           (["--rbac", os.path.join(d, "missing.yaml")], "missing --rbac file")):
            r = subprocess.run([sys.executable, "-B", SERVER, "--state-dir", os.path.join(d, "s")] + args,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
            lines = [x for x in r.stderr.splitlines() if x.strip()]
            t.ok(r.returncode != 0 and len(lines) == 1 and lines[0].startswith("fake-kube-apiserver: ")
                 and r.stdout == "", "%s: one clear line, non-zero exit" % what, r.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_load_and_namespaces(t):
    with scratch_server(load=[src("tests", "data", "fakekube-capi-core-crds.yaml")]) as k:
        st, r = k.api("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        t.eq(sorted(o["metadata"]["name"] for o in r["items"]),
             ["clusters.cluster.x-k8s.io", "machines.cluster.x-k8s.io"], "--load creates objects")
        k.api("POST", "/api/v1/namespaces", {"metadata": {"name": "gone"}})
        k.api("POST", "/api/v1/namespaces/gone/configmaps",
              {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
        st, r = k.api("DELETE", "/api/v1/namespaces/gone")
        t.eq((st, r["status"]["phase"]), (200, "Terminating"), "namespace delete: Terminating")
        st, r = k.api("POST", "/api/v1/namespaces/gone/configmaps", {"metadata": {"name": "new"}})
        t.eq((st, r.get("message")), (403, 'configmaps "new" is forbidden: unable to create new content in '
                                           'namespace gone because it is being terminated'),
             "no creation in a terminating namespace")
        k.api("PATCH", "/api/v1/namespaces/gone/configmaps/held", {"metadata": {"finalizers": None}},
              "application/merge-patch+json")
        r = k.kubectl_wait_deleted("namespace/gone")
        t.eq(r.returncode, 0, "namespace goes once its content is gone")


def main():
    t = Tap()
    for fn in (test_tokens_and_san, test_insecure, test_bad_input, test_load_and_namespaces):
        t.run(fn)
    sys.exit(t.done())


main()
