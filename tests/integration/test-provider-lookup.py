#!/usr/bin/env python3
"""lib/provider/provider.h against tests/fake-cloud: the Hetzner and OpenStack InstancesV2 calls
(metadata by providerID and by name, exists, shutdown), error classes (not found, bad
credentials, rate limiting with the server's delay), and OpenStack token reuse and renewal,
counted in the fake cloud's request log."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import HETZNER_TOKEN, OPENSTACK_USER, FakeCloud  # noqa: E402
from providerlookup import TOOL, addrs, eq, lookup, write  # noqa: E402


def test_hetzner(t, c, d):
    w1 = c.add_instance({"platform": "hetzner", "name": "w1"})
    conf = write(os.path.join(d, "hetzner.conf"), "[Global]\ntoken = %s\nendpoint = %s/v1\n" % (HETZNER_TOKEN, c.url))
    res = lookup("hetzner", conf, "metadata", "hcloud://%s" % w1["id"], "metadata", "w1", "exists", "w1",
                 "exists", "nosuch", "metadata", "nosuch", "shutdown", "w1", "metadata", "hcloud://999999")
    by_id, by_name, ex, nex, nf, sd, gone = res
    eq(t, by_id["error"], 0, "hetzner: lookup by providerID succeeds", by_id)
    eq(t, by_id["providerID"], "hcloud://%s" % w1["id"], "hetzner: providerID hcloud://<id>")
    eq(t, (by_id["instanceType"], by_id["region"], by_id["zone"]), (w1["type"], "fsn1", w1["zone"]),
         "hetzner: instance type, region (location) and zone (datacenter)", by_id)
    eq(t, addrs(by_id), [("InternalIP", w1["private_ipv4"]), ("ExternalIP", w1["public_ipv4"]),
                        ("ExternalIP", w1["ipv6"]), ("Hostname", "w1")],
         "hetzner: addresses from private_net, public IPv4 and the first host of the IPv6 /64", by_id)
    eq(t, by_name.get("providerID"), by_id["providerID"], "hetzner: lookup by name finds the same server", by_name)
    eq(t, (ex["error"], ex["value"]), (0, True), "hetzner: exists true", ex)
    eq(t, (nex["error"], nex["value"]), (0, False), "hetzner: exists false for an unknown name (not an error)", nex)
    eq(t, (nf["error"], nf["class"]), (-2, "not-found"), "hetzner: metadata of an unknown name is not-found", nf)
    eq(t, (sd["error"], sd["value"]), (0, False), "hetzner: running server is not shut down", sd)
    eq(t, gone["class"], "not-found", "hetzner: unknown id is not-found", gone)

    c.stop(w1["id"])
    sd2, = lookup("hetzner", conf, "shutdown", "hcloud://%s" % w1["id"])
    eq(t, (sd2["error"], sd2["value"]), (0, True), "hetzner: stopped server is shut down", sd2)

    bad = write(os.path.join(d, "bad.conf"), "[Global]\ntoken = wrong-token\nendpoint = %s/v1\n" % c.url)
    r, = lookup("hetzner", bad, "metadata", "w1")
    eq(t, (r["error"], r["class"]), (-13, "terminal"), "hetzner: rejected token is terminal", r)
    t.ok("wrong-token" not in json.dumps(r), "hetzner: the token is not in the message")

    env, = lookup("hetzner", write(os.path.join(d, "env.conf"), "[Global]\nendpoint = %s/v1\n" % c.url),
                  "exists", "w1", env={"HCLOUD_TOKEN": HETZNER_TOKEN})
    eq(t, (env["error"], env["value"]), (0, True), "hetzner: token from HCLOUD_TOKEN")

    c.throttle("hetzner", count=1)
    th, = lookup("hetzner", conf, "metadata", "w1")
    eq(t, th["class"], "retryable", "hetzner: 429 is retryable", th)
    t.ok(th["retryAfter"] > 0, "hetzner: the rate-limit reset becomes the retry delay", th)
    c.clear_faults()

    # Hetzner's bucket refills evenly until RateLimit-Reset (3600 an hour: one a second), which is
    # an hour away when it is empty: the next request may go when one request is back, not at the
    # reset. Here 10 an hour, one every 360 s.
    saved = {k: c.settings()[k] for k in ("hetzner_ratelimit_limit", "hetzner_ratelimit_refill_per_second")}
    c.settings(hetzner_ratelimit_limit=10, hetzner_ratelimit_refill_per_second=10 / 3600)
    drained = lookup("hetzner", conf, *(["metadata", "w1"] * 12))
    last = drained[-1]
    t.ok(last["class"] == "retryable" and 300 <= last["retryAfter"] <= 400,
         "hetzner: an empty bucket is retried when one request is back (about 360 s), not at its full reset (3600 s)",
         last)
    c.settings(**saved)

    c.fail({"platform": "hetzner", "service": "api", "status": 503, "count": 1})
    r, = lookup("hetzner", conf, "metadata", "w1")
    eq(t, r["class"], "retryable", "hetzner: 503 is retryable", r)
    c.clear_faults()


def test_openstack(t, c, d):
    o1 = c.add_instance({"platform": "openstack", "name": "os1"})
    u = OPENSTACK_USER
    conf = write(os.path.join(d, "os.conf"),
                 "[Global]\nauth-url = %s/v3\nusername = %s\npassword = \"%s\"\nuser-domain-name = %s\n"
                 "project-name = %s\nproject-domain-name = %s\nregion = RegionOne\n"
                 % (c.url, u["name"], u["password"], u["domain"], u["project"], u["domain"]))
    before = len(c.requests())
    res = lookup("openstack", conf, "metadata", "openstack:///%s" % o1["id"], "metadata", "os1", "exists", "nosuch",
                 "shutdown", "os1")
    by_id, by_name, nex, sd = res
    eq(t, by_id["error"], 0, "openstack: lookup by providerID succeeds", by_id)
    eq(t, by_id["providerID"], "openstack:///%s" % o1["id"], "openstack: providerID openstack:///<uuid>")
    eq(t, (by_id["instanceType"], by_id["region"], by_id["zone"]), (o1["type"], "RegionOne", o1["zone"]),
         "openstack: flavor name, configured region, availability zone", by_id)
    t.ok(("InternalIP", o1["private_ipv4"]) in addrs(by_id), "openstack: fixed IP is an InternalIP", by_id)
    eq(t, by_name.get("providerID"), by_id["providerID"], "openstack: lookup by name", by_name)
    eq(t, (nex["error"], nex["value"]), (0, False), "openstack: exists false for an unknown name", nex)
    eq(t, (sd["error"], sd["value"]), (0, False), "openstack: ACTIVE is not shut down", sd)
    log = c.requests()[before:]
    tokens = [r for r in log if r.get("method") == "POST" and r.get("path", "").endswith("/v3/auth/tokens")]
    eq(t, len(tokens), 1, "openstack: one Keystone token serves all four lookups", tokens)
    t.ok(all("demo-password" not in json.dumps(r.get("headers", {})) for r in log if r.get("method") == "GET"),
         "openstack: the password is sent to Keystone only")

    c.stop(o1["id"])
    sd2, = lookup("openstack", conf, "shutdown", "os1")
    eq(t, (sd2["error"], sd2["value"]), (0, True), "openstack: SHUTOFF is shut down", sd2)

    # Nova refuses the cached token once: one new token, then the answer.
    p = subprocess.Popen([TOOL, "openstack", conf, "exists", "os1", "wait", "-", "exists", "os1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    r1 = json.loads(p.stdout.readline())
    p.stdout.readline()
    before = len(c.requests())
    c.fail({"service": "compute", "status": 401, "count": 1})
    out, _ = p.communicate("\n", timeout=60)
    r2 = json.loads(out.splitlines()[0])
    eq(t, (r1["error"], r1["value"]), (0, True), "openstack: first lookup works")
    eq(t, (r2["error"], r2["value"]), (0, True), "openstack: a token Nova rejected is renewed once", r2)
    tokens = [r for r in c.requests()[before:] if r.get("method") == "POST" and r.get("path", "").endswith("/v3/auth/tokens")]
    eq(t, len(tokens), 1, "openstack: exactly one new token after the rejection")
    c.clear_faults()

    # A token Nova rejects right after Keystone issued it is not retried forever.
    c.fail({"service": "compute", "status": 401})
    r, = lookup("openstack", conf, "exists", "os1")
    eq(t, r["class"], "terminal", "openstack: a fresh token rejected by Nova is terminal", r)
    c.clear_faults()

    bad = write(os.path.join(d, "osbad.conf"), "[Global]\nauth-url = %s/v3\nusername = demo\npassword = nope\n"
                "user-domain-name = Default\nproject-name = demo\nproject-domain-name = Default\n" % c.url)
    r, = lookup("openstack", bad, "metadata", "os1")
    eq(t, r["class"], "terminal", "openstack: rejected credentials are terminal", r)
    t.ok("nope" not in json.dumps(r), "openstack: the password is not in the message")

    ac = write(os.path.join(d, "ac.conf"), "[Global]\nauth-url = %s\napplication-credential-id = appcred-demo\n"
               "application-credential-secret = appcred-secret\n" % c.url)
    r, = lookup("openstack", ac, "exists", "os1")
    eq(t, (r["error"], r["value"]), (0, True), "openstack: application credential", r)


def main():
    t = Tap()
    if not os.access(TOOL, os.X_OK):
        t.bail_out("tests/provider-lookup is not built")
    with tempfile.TemporaryDirectory() as d:
        with FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(test_hetzner, c, d)
            t.run(test_openstack, c, d)
    sys.exit(t.done())


main()
