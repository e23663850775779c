"""tests/provider-lookup, the C driver of lib/provider/provider.h, run by the provider tests: one
JSON object per call, with the environment of the credentials the test names only."""
import json
import os
import subprocess

BUILD = os.environ.get("CN_TOP_BUILDDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.path.join(BUILD, "tests", "provider-lookup")
# Variables through which a provider may take settings from the environment.
CLOUD_ENV_PREFIXES = ("HCLOUD_", "OS_", "AWS_", "DO_")


def lookup(provider, conf, *calls, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(CLOUD_ENV_PREFIXES)}
    e.update(env or {})
    p = subprocess.run([TOOL, provider, conf] + list(calls), capture_output=True, text=True, timeout=60, env=e)
    if p.returncode != 0:
        raise RuntimeError("provider-lookup failed (%d): %s" % (p.returncode, p.stderr))
    return [json.loads(line) for line in p.stdout.splitlines()]


def eq(t, got, want, name, diag=None):
    return t.ok(got == want, name, "got:  %r\nwant: %r\n%s" % (got, want, "" if diag is None else diag))


def write(path, text):
    """A file only its owner reads, as cloud configs and credentials are."""
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def addrs(r):
    return [(a["type"], a["address"]) for a in r.get("addresses", [])]
