#!/usr/bin/env python3
"""The gcp provider of lib/provider/provider.h against the Compute Engine API and OAuth token
endpoint of tests/fake-cloud: lookup by providerID and by (FQDN) Node name through a paged
aggregated list, dual-stack addresses, TERMINATED instances as shut down, instances gone,
tokens from a service account key (JWT assertion) and from the metadata server, each fetched
once and reused, refreshed once on 401, the throttling answers (403 rateLimitExceeded, 429 with
Retry-After) as retryable, rejected credentials and malformed, hostile or oversized answers as
one clear error without any secret; and the fake's own rules (expired and forged tokens, JWT
checks)."""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402
from providerlookup import TOOL, addrs, eq, renewed_once, write  # noqa: E402
from providerlookup import lookup as provider_lookup  # noqa: E402

PROJECT = "cloudnode-test"
SA = "cloudnode@cloudnode-test.iam.gserviceaccount.com"


def lookup(conf, *calls, env=None):
    return provider_lookup("gcp", conf, *calls, env=env)


def make_key(d, c, email=SA, register=True):
    """A service account key file (RSA 2048, as the console makes them); its public half is
    registered with the fake's token endpoint."""
    pem = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
                         capture_output=True, text=True, check=True).stdout
    pub = subprocess.run(["openssl", "pkey", "-pubout"], input=pem, capture_output=True, text=True, check=True).stdout
    kid = os.urandom(20).hex()
    if register:
        accounts = c.settings()["gcp_service_accounts"]
        c.settings(gcp_service_accounts=accounts + [{"client_email": email, "public_key": pub,
                                                     "private_key_id": kid, "project_id": PROJECT}])
    key = {"type": "service_account", "project_id": PROJECT, "private_key_id": kid, "private_key": pem,
           "client_email": email, "client_id": "1234567890",
           "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": c.url + "/oauth2/token"}
    return write(os.path.join(d, "key-%s.json" % kid[:8]), json.dumps(key)), pem


def key_conf(d, c, key, name="gcp.conf"):
    return write(os.path.join(d, name), "[Global]\nproject-id = %s\napi-endpoint = %s/compute/v1\n"
                 "credentials-file = %s\n" % (PROJECT, c.url, key))


def is_token(r):
    return r.get("path", "").startswith("/oauth2/token") or r.get("path", "").endswith("/service-accounts/default/token")


def token_requests(c, since):
    return [r for r in c.requests()[since:] if is_token(r)]


def pid(inst):
    return "gce://%s/%s/%s" % (PROJECT, inst["zone"], inst["name"])


def test_lookups(t, c, d):
    g1 = c.add_instance({"platform": "gcp", "name": "g1"})
    g2 = c.add_instance({"platform": "gcp", "name": "g2", "zone": "europe-west1-b", "ipv6": None,
                         "public_ipv4": None})
    for n in range(5):
        c.add_instance({"platform": "gcp", "name": "filler-%d" % n, "zone": "us-east1-c"})
    c.settings(gcp_page_size=2)
    key, pem = make_key(d, c)
    conf = key_conf(d, c, key)
    before = len(c.requests())
    res = lookup(conf, "metadata", pid(g1), "metadata", "g1", "metadata", "g2.c.cloudnode-test.internal",
                 "exists", "nosuch", "metadata", "nosuch", "shutdown", "g1", "exists", "gce://%s/us-central1-a/gone" % PROJECT)
    by_id, by_name, fqdn, nex, nf, sd, gone = res
    eq(t, by_id["error"], 0, "lookup by providerID succeeds", by_id)
    eq(t, by_id["providerID"], pid(g1), "providerID gce://<project>/<zone>/<name>")
    eq(t, (by_id["instanceID"], by_id["instanceType"], by_id["region"], by_id["zone"]),
       (g1["id"], g1["type"], "us-central1", "us-central1-a"), "instance id, machine type, region and zone", by_id)
    eq(t, addrs(by_id), [("InternalIP", g1["private_ipv4"]), ("ExternalIP", g1["public_ipv4"]),
                         ("InternalIP", g1["ipv6"])],
       "dual-stack: networkIP and the IPv6 as InternalIP, the NAT address as ExternalIP", by_id)
    eq(t, by_name.get("providerID"), pid(g1), "lookup by name through the aggregated list", by_name)
    eq(t, (fqdn.get("providerID"), fqdn.get("region")), (pid(g2), "europe-west1"),
       "a Node named by its FQDN is the instance of its first label, in another zone", fqdn)
    eq(t, addrs(fqdn), [("InternalIP", g2["private_ipv4"])], "IPv4-only instance without external address", fqdn)
    eq(t, (nex["error"], nex["value"]), (0, False), "exists is false for an unknown name", nex)
    eq(t, (nf["error"], nf["class"]), (-2, "not-found"), "metadata of an unknown name is not-found", nf)
    eq(t, (sd["error"], sd["value"]), (0, False), "a RUNNING instance is not shut down", sd)
    eq(t, (gone["error"], gone["value"]), (0, False), "exists is false for an unknown providerID", gone)
    log = c.requests()[before:]
    eq(t, len(token_requests(c, before)), 1, "one access token serves every lookup")
    pages = [r for r in log if "aggregated/instances" in r.get("path", "") and "pageToken" in r.get("path", "")]
    t.ok(len(pages) >= 2, "the name lookups follow nextPageToken", [r["path"] for r in log])
    t.ok(all(pem.splitlines()[1] not in json.dumps(r) for r in log), "the private key never leaves the process")
    c.settings(gcp_page_size=500)

    c.stop(g1["id"])
    sd, ex = lookup(conf, "shutdown", pid(g1), "exists", pid(g1))
    eq(t, (sd["error"], sd["value"], ex["value"]), (0, True, True), "a TERMINATED instance exists and is shut down", sd)
    c.start(g1["id"])
    c.remove_instance(g2["id"])
    ex, md = lookup(conf, "exists", pid(g2), "metadata", pid(g2))
    eq(t, (ex["error"], ex["value"]), (0, False), "an instance gone: exists is false", ex)
    eq(t, md["class"], "not-found", "an instance gone: metadata is not-found", md)

    r, = lookup(conf, "metadata", "aws:///us-east-1a/i-0123")
    eq(t, r["class"], "terminal", "a providerID of another cloud is refused", r)
    r, = lookup(conf, "metadata", "gce://%s/us-central1-a/x/../../y" % PROJECT)
    eq(t, r["class"], "terminal", "a providerID with extra segments is refused", r)


def test_credentials(t, c, d):
    c.add_instance({"platform": "gcp", "name": "c1"})
    node = c.add_instance({"platform": "gcp", "name": "md-node"})
    md_conf = write(os.path.join(d, "md.conf"), "[Global]\nproject-id = %s\napi-endpoint = %s/compute/v1\n"
                    "metadata-endpoint = %s\n" % (PROJECT, c.url, c.metadata_url(node["id"])))
    before = len(c.requests())
    a, b = lookup(md_conf, "exists", "c1", "exists", "md-node")
    eq(t, (a["value"], b["value"]), (True, True), "token from the metadata server's default service account", a)
    toks = token_requests(c, before)
    eq(t, [(r["method"], r["headers"].get("Metadata-Flavor")) for r in toks], [("GET", "Google")],
       "one metadata token request, with Metadata-Flavor: Google")

    host = urllib.parse.urlsplit(c.url).netloc
    env_conf = write(os.path.join(d, "env.conf"), "[Global]\nproject-id = %s\napi-endpoint = %s/compute/v1\n"
                     % (PROJECT, c.url))
    r, = lookup(env_conf, "exists", "c1", env={"GCE_METADATA_HOST": host + "/_instance/%s" % node["id"]})
    eq(t, (r["error"], r["value"]), (0, True), "the metadata server from GCE_METADATA_HOST", r)
    key, _ = make_key(d, c)
    r, = lookup(env_conf, "exists", "c1", env={"GOOGLE_APPLICATION_CREDENTIALS": key})
    eq(t, (r["error"], r["value"]), (0, True), "the key from GOOGLE_APPLICATION_CREDENTIALS", r)

    none = c.add_instance({"platform": "gcp", "name": "no-sa", "extra": {"gcp_service_account": None}})
    conf = write(os.path.join(d, "nosa.conf"), "[Global]\nproject-id = %s\napi-endpoint = %s/compute/v1\n"
                 "metadata-endpoint = %s\n" % (PROJECT, c.url, c.metadata_url(none["id"])))
    r, = lookup(conf, "exists", "c1")
    eq(t, r["class"], "terminal", "a VM without service account: terminal", r)
    t.ok("service account" in r.get("message", ""), "and the message says why", r)

    unknown, pem = make_key(d, c, email="stranger@cloudnode-test.iam.gserviceaccount.com", register=False)
    r, = lookup(key_conf(d, c, unknown, "unknown.conf"), "exists", "c1")
    eq(t, r["class"], "terminal", "a key the token endpoint does not know: terminal", r)
    t.ok("rejected" in r.get("message", "") and pem.splitlines()[1] not in json.dumps(r),
         "the message says the key was rejected, without the key", r)

    junk = write(os.path.join(d, "junk.json"), json.dumps({"type": "service_account", "client_email": SA,
                                                            "private_key": "-----BEGIN PRIVATE KEY-----\nsecretjunk\n"
                                                            "-----END PRIVATE KEY-----\n"}))
    p = subprocess.run([TOOL, "gcp", key_conf(d, c, junk, "junk.conf"), "exists", "c1"], capture_output=True,
                       text=True, timeout=60)
    t.ok(p.returncode != 0 and "not an RSA key" in p.stderr and "secretjunk" not in p.stderr,
         "an unreadable private key: one clear configuration error, without the key", p.stderr)


def test_tokens(t, c, d):
    c.add_instance({"platform": "gcp", "name": "t1"})
    key, _ = make_key(d, c)
    conf = key_conf(d, c, key)
    # The API rejects the cached token once: one new token, then the answer.
    renewed_once(t, c, "gcp", conf, "t1", {"platform": "gcp", "service": "compute"}, is_token)
    c.fail({"platform": "gcp", "service": "compute", "status": 401})
    r, = lookup(conf, "exists", "t1")
    eq(t, r["class"], "terminal", "a fresh token the API rejects is not retried forever", r)
    c.clear_faults()

    # Tokens that expire within the margin are not reused.
    c.settings(gcp_token_ttl=30)
    before = len(c.requests())
    a, b = lookup(conf, "exists", "t1", "exists", "t1")
    eq(t, (a["value"], b["value"]), (True, True), "short-lived tokens work")
    eq(t, len(token_requests(c, before)), 2, "a token about to expire is fetched again")
    c.settings(gcp_token_ttl=3599)


def test_fake_rules(t, c, d):
    """The fake refuses what the real services refuse."""
    key, pem = make_key(d, c)
    st, _, body = c.api("GET", "/compute/v1/projects/%s/zones/us-central1-a/instances" % PROJECT)
    eq(t, (st, body["error"]["errors"][0]["reason"]), (401, "required"), "no bearer token: 401")
    st, _, body = c.api("GET", "/compute/v1/projects/%s/zones/us-central1-a/instances" % PROJECT,
                        headers={"Authorization": "Bearer forged"})
    eq(t, (st, body["error"]["status"]), (401, "UNAUTHENTICATED"), "a forged token: 401")
    c.settings(gcp_token_ttl=1)
    inst = c.add_instance({"platform": "gcp", "name": "f1"})
    st, _, body = c.get("/_instance/%s/computeMetadata/v1/instance/service-accounts/default/token" % inst["id"],
                        headers={"Metadata-Flavor": "Google"})
    tok = body["access_token"]
    time.sleep(2.1)
    st, _, _ = c.api("GET", "/compute/v1/projects/%s/zones/us-central1-a/instances/f1" % PROJECT,
                     headers={"Authorization": "Bearer " + tok})
    eq(t, st, 401, "an expired token: 401")
    c.settings(gcp_token_ttl=3599)

    def grant(assertion):
        form = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                       "assertion": assertion}).encode()
        st, _, body = c.api("POST", "/oauth2/token", form,
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
        return st, body

    import base64

    def b64(o):
        return base64.urlsafe_b64encode(json.dumps(o).encode()).decode().rstrip("=")

    def sign(claims):
        data = b64({"alg": "RS256", "typ": "JWT"}) + "." + b64(claims)
        with tempfile.NamedTemporaryFile("w", suffix=".pem") as f:
            f.write(pem)
            f.flush()
            sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", f.name], input=data.encode(),
                                 capture_output=True, check=True).stdout
        return data + "." + base64.urlsafe_b64encode(sig).decode().rstrip("=")

    now = int(time.time())
    good = {"iss": SA, "scope": "https://www.googleapis.com/auth/compute", "aud": c.url + "/oauth2/token",
            "iat": now, "exp": now + 3600}
    st, body = grant(sign(good))
    t.ok(st == 200 and body.get("token_type") == "Bearer" and body.get("expires_in") == 3599,
         "a well-signed assertion gets a token", body)
    st, body = grant(sign(dict(good, aud="https://elsewhere/token")))
    eq(t, (st, body.get("error")), (400, "invalid_grant"), "another audience: invalid_grant", body)
    st, body = grant(sign(dict(good, exp=now + 7200)))
    eq(t, (st, body.get("error")), (400, "invalid_grant"), "a lifetime over an hour: invalid_grant", body)
    head, claims, sig = sign(good).split(".")
    st, body = grant(".".join([head, b64(dict(good, iss=SA, scope="https://www.googleapis.com/auth/cloud-platform")),
                               sig]))
    eq(t, (st, body.get("error_description")), (400, "Invalid JWT Signature."), "altered claims: bad signature", body)


def test_errors(t, c, d):
    e1 = c.add_instance({"platform": "gcp", "name": "e1"})
    key, _ = make_key(d, c)
    conf = key_conf(d, c, key)
    c.throttle("gcp", count=1, service="compute")
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, (r["class"], r.get("message")), ("retryable", "Rate Limit Exceeded"),
       "GCE's 403 rateLimitExceeded is retryable", r)
    c.fail({"platform": "gcp", "service": "compute", "status": 429, "count": 1, "headers": {"Retry-After": "7"},
            "body": {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, (r["class"], r["retryAfter"]), ("retryable", 7.0), "429 with Retry-After: retryable after that delay", r)
    c.settings(gcp_requests_per_second=1)
    res = lookup(conf, *(["exists", pid(e1)] * 6))
    t.ok(any(x["class"] == "retryable" for x in res) and res[0]["value"] is True,
         "a request storm meets the API's own rate limit as retryable errors", res)
    c.settings(gcp_requests_per_second=0)
    c.fail({"platform": "gcp", "service": "compute", "status": 403, "count": 1,
            "body": {"error": {"code": 403, "message": "Required 'compute.instances.get' permission",
                               "errors": [{"reason": "forbidden", "domain": "global"}]}}})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, (r["class"], r.get("message")), ("terminal", "Required 'compute.instances.get' permission"),
       "a missing permission is terminal, with the API's message", r)
    c.fail({"platform": "gcp", "service": "compute", "status": 200, "count": 1, "body": "<html>proxy</html>"})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, (r["class"], r.get("message")), ("retryable", "malformed response from the cloud API"),
       "a body that is not JSON: one clear error", r)
    hostile = {"id": "1", "name": "e1/../../x", "zone": "zones/us-central1-a", "status": "RUNNING"}
    c.fail({"platform": "gcp", "service": "compute", "status": 200, "count": 1, "body": hostile})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, (r["class"], r.get("message")), ("retryable", "unexpected instance object from the Compute Engine API"),
       "a hostile instance name is refused, not turned into a providerID", r)
    c.fail({"platform": "gcp", "service": "compute", "status": 200, "count": 1,
            "body": {"id": "1", "name": "e1", "zone": "z/us-central1-a", "networkInterfaces": [{"networkIP": "1.2.3.999"}]}})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, r["class"], "retryable", "an address that is no IP address is refused", r)
    c.fail({"platform": "gcp", "service": "compute", "status": 200, "count": 1,
            "body": '{"id": "1", "name": "' + "a" * (9 * 1024 * 1024) + '"}'})
    r, = lookup(conf, "metadata", pid(e1))
    t.ok(r["class"] == "retryable" and r.get("message") and "aaaa" not in r["message"],
         "an oversized answer is refused with a short message", r.get("message"))
    c.fail({"platform": "gcp", "service": "compute", "status": 200, "count": 1, "body": {"kind": "x"}})
    r, = lookup(conf, "exists", "e1")
    eq(t, (r["error"], r["value"]), (0, False), "a list without items is an empty list", r)
    c.fail({"platform": "gcp", "service": "compute", "status": 200, "count": 1, "body": {"items": []}})
    r, = lookup(conf, "exists", "e1")
    eq(t, r["class"], "retryable", "a list whose items are no object is refused", r)
    c.fail({"platform": "gcp", "service": "oauth2", "status": 503, "count": 1})
    other, _ = make_key(d, c)
    r, = lookup(key_conf(d, c, other, "other.conf"), "metadata", pid(e1))
    eq(t, r["class"], "retryable", "a token endpoint outage is retryable", r)
    c.clear_faults()


def main():
    t = Tap()
    if not os.access(TOOL, os.X_OK):
        t.bail_out("tests/provider-lookup is not built")
    with tempfile.TemporaryDirectory() as d:
        with FakeCloud(os.path.join(d, "cloud")) as c:
            for fn in (test_lookups, test_credentials, test_tokens, test_fake_rules, test_errors):
                t.run(fn, c, d)
    sys.exit(t.done())


main()
