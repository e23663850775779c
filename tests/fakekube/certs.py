"""Certificates through the openssl CLI (the standard library cannot make them).

The CA is kept in the state directory and reused on restart so that kubeconfigs written by a
previous run keep working; the server certificate is made anew each start because its
subject alternative names follow --listen and --san."""
import ipaddress
import os
import subprocess


def _run(*args):
    r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (args[0], r.stderr.decode(errors="replace").strip()))


def _newkey(path):
    # P-256 keys are generated in milliseconds and accepted by Go, OpenSSL and Python.
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    os.chmod(path, 0o600)


def ensure_ca(d):
    crt = os.path.join(d, "ca.crt")
    key = os.path.join(d, "ca.key")
    if os.path.exists(crt) and os.path.exists(key):
        return crt, key
    _newkey(key)
    _run("req", "-x509", "-new", "-key", key, "-out", crt, "-days", "3650", "-subj", "/CN=fake-kube-apiserver-ca",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return crt, key


def _subj_escape(s):
    return s.replace("\\", "\\\\").replace("/", "\\/").replace("+", "\\+").replace("=", "\\=")


def issue(d, stem, ca, cn, orgs=(), sans=(), server=False):
    """Issues stem.crt/stem.key in d signed by ca (crt, key); returns their paths."""
    crt = os.path.join(d, stem + ".crt")
    key = os.path.join(d, stem + ".key")
    csr = os.path.join(d, stem + ".csr")
    ext = os.path.join(d, stem + ".ext")
    _newkey(key)
    subj = "".join("/O=" + _subj_escape(o) for o in orgs) + "/CN=" + _subj_escape(cn)
    _run("req", "-new", "-key", key, "-out", csr, "-subj", subj)
    lines = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment"]
    if server:
        lines.append("extendedKeyUsage=serverAuth")
        alt = []
        for s in sans:
            try:
                ipaddress.ip_address(s)
                alt.append("IP:" + s)
            except ValueError:
                alt.append("DNS:" + s)
        lines.append("subjectAltName=" + ",".join(alt))
    else:
        lines.append("extendedKeyUsage=clientAuth")
    with open(ext, "w") as f:
        f.write("\n".join(lines) + "\n")
    _run("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial", "-out", crt,
         "-days", "3650", "-extfile", ext)
    os.unlink(csr)
    os.unlink(ext)
    return crt, key
