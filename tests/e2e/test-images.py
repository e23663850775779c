#!/usr/bin/env python3
"""The images `make images` built (CN_IMAGES): each runs its program as uid 65532, has no shell,
holds nothing but the program, its shared libraries and a few files of /etc, and stays small."""
import os
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import cnpodman  # noqa: E402
from cntap import Tap  # noqa: E402

SIZE_LIMIT = 40 * 1000 * 1000
ETC = {"etc/passwd", "etc/group", "etc/nsswitch.conf", "etc/ssl/certs/ca-certificates.crt"}
SHELLS = {"sh", "bash", "dash", "busybox", "ash", "zsh"}


def files_of(ref, tmp):
    """Regular files and symlinks of the image's filesystem (podman create + export)."""
    p = cnpodman.podman("create", ref)
    if p.returncode != 0:
        return None, p.stderr
    cid = p.stdout.strip()
    try:
        tar = os.path.join(tmp, "fs.tar")
        p = cnpodman.podman("export", "-o", tar, cid)
        if p.returncode != 0:
            return None, p.stderr
        with tarfile.open(tar) as tf:
            return {m.name.lstrip("./"): m for m in tf.getmembers() if not m.isdir()}, ""
    finally:
        cnpodman.podman("rm", "-f", cid)


def main():
    t = Tap()
    why = cnpodman.usable()
    if why:
        t.skip_all(why)
    refs = cnpodman.built_images()
    if not refs:
        t.skip_all("CN_IMAGES not set (run through make check)")
    with tempfile.TemporaryDirectory() as tmp:
        for ref in refs:
            prog = ref.rsplit("/", 1)[-1].split(":", 1)[0]
            version = ref.rsplit(":", 1)[1]
            info = cnpodman.inspect(ref)
            if not t.ok(info is not None, "%s exists (built by make images)" % ref):
                continue
            cfg = info.get("Config", {})
            t.eq(cfg.get("User"), "65532:65532", "%s runs as uid/gid 65532" % prog)
            t.eq(cfg.get("Entrypoint"), ["/usr/bin/%s" % prog], "%s entrypoint is the program" % prog)
            t.ok(info["Size"] < SIZE_LIMIT, "%s is %.1f MB (< %d MB)" % (prog, info["Size"] / 1e6, SIZE_LIMIT // 10**6))

            p = cnpodman.podman("run", "--rm", "--network=none", ref, "--version")
            t.eq((p.returncode, p.stdout.strip()), (0, "%s %s" % (prog, version)),
                 "%s --version runs inside the image" % prog) or t.diag(p.stderr)
            p = cnpodman.podman("run", "--rm", "--network=none", "--entrypoint", "/bin/sh", ref, "-c", "true")
            t.ok(p.returncode != 0 and "/bin/sh" in p.stderr, "%s has no /bin/sh" % prog, p.stderr)

            files, err = files_of(ref, tmp)
            if not t.ok(files is not None, "%s filesystem exported" % prog, err):
                continue
            names = set(files)
            t.ok(not any(os.path.basename(n) in SHELLS for n in names), "%s holds no shell" % prog)
            bins = {n for n in names if n.startswith(("usr/bin/", "bin/", "usr/sbin/", "sbin/"))}
            t.eq(bins, {"usr/bin/" + prog}, "%s holds one program" % prog)
            extra = {n for n in names - bins - ETC
                     if not (".so" in os.path.basename(n) and n.startswith(("lib", "usr/lib")))}
            t.eq(extra, set(), "%s holds only its program, shared libraries and /etc basics" % prog)
            foreign = sorted(n for n in names if os.path.basename(n).startswith(("libcurl", "libgnutls")))
            t.eq(foreign, [], "%s holds neither libcurl nor GnuTLS (HTTP is our own, TLS OpenSSL's)" % prog)
            owner = files["usr/bin/" + prog]
            t.ok(owner.mode & 0o022 == 0, "%s program not writable by group/others" % prog)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
