"""tests/provider-lookup, the C driver of lib/provider/provider.h, run by the provider tests: one
JSON object per call, with the environment of the credentials the test names only.

    lookup("gcp", conf, "metadata", "gce://p/z/n", "exists", "name", env={...}) -> [dict, ...]"""
import json
import os
import subprocess

BUILD = os.environ.get("CN_TOP_BUILDDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.path.join(BUILD, "tests", "provider-lookup")
# Variables through which a provider may take settings from the environment: a test gives them
# explicitly or not at all.
CLOUD_ENV_PREFIXES = ("HCLOUD_", "OS_", "AWS_", "DO_", "GOOGLE_", "GCE_", "AZURE_")


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


def renewed_once(t, c, provider, conf, key, api_fault, is_token_request):
    """A cached token the API rejects (api_fault: a fault rule with status 401) is fetched again
    once, between two lookups of key by one provider object."""
    p = subprocess.Popen([TOOL, provider, conf, "exists", key, "wait", "-", "exists", key],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    r1 = json.loads(p.stdout.readline())
    p.stdout.readline()
    before = len(c.requests())
    c.fail(dict(api_fault, status=401, count=1))
    out, _ = p.communicate("\n", timeout=60)
    r2 = json.loads(out.splitlines()[0])
    eq(t, (r1["value"], r2["value"]), (True, True), "%s: a token the API rejected is renewed once" % provider, r2)
    eq(t, len([r for r in c.requests()[before:] if is_token_request(r)]), 1,
       "%s: exactly one new token after the rejection" % provider)
    c.clear_faults()
