#!/usr/bin/env python3
"""lib/provider/provider.h's digitalocean provider against the DigitalOcean API v2 fake of
tests/fake-cloud: lookups by providerID and by droplet name (across pages), dual-stack
addresses, a powered-off droplet, a deleted one, the token from the cloud config, the
environment or a token file (read again once when the API refuses the token: a rotated Secret),
an expired token, throttling (429 with ratelimit-reset) and bad or oversized answers: each a
classified error with a clear message and no token in it."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import DO_TOKEN, FakeCloud  # noqa: E402
from providerlookup import TOOL, addrs, eq, write  # noqa: E402
from providerlookup import lookup as provider_lookup  # noqa: E402


def lookup(conf, *calls, env=None):
    res = provider_lookup("digitalocean", conf, *calls, env=env)
    assert DO_TOKEN not in json.dumps(res)
    return res


def conf_text(c, token=DO_TOKEN, token_file=None):
    s = "[Global]\nendpoint = %s\n" % c.url
    if token:
        s += "token = %s\n" % token
    if token_file:
        s += "token-file = %s\n" % token_file
    return s


def api_requests(c, since):
    return [r for r in c.requests()[since:] if r.get("platform") == "digitalocean" and r.get("service") == "api"]


def test_lookups(t, c, d):
    d1 = c.add_instance({"platform": "digitalocean", "name": "d1"})
    conf = write(os.path.join(d, "do.conf"), conf_text(c))
    before = len(c.requests())
    by_id, by_name, ex, nex, nf, sd = lookup(conf, "metadata", "digitalocean://%s" % d1["id"], "metadata", "d1",
                                             "exists", "d1", "exists", "nosuch", "metadata", "digitalocean://999999",
                                             "shutdown", "digitalocean://%s" % d1["id"])
    eq(t, by_id["error"], 0, "lookup by providerID succeeds", by_id)
    eq(t, by_id["providerID"], "digitalocean://%s" % d1["id"], "providerID digitalocean://<id>, as the agent writes it")
    eq(t, (by_id["instanceType"], by_id["region"], by_id["zone"]), (d1["type"], "nyc3", "nyc3"),
       "size slug; region slug as region and zone", by_id)
    eq(t, addrs(by_id), [("Hostname", "d1"), ("InternalIP", d1["private_ipv4"]), ("ExternalIP", d1["public_ipv4"]),
                         ("ExternalIP", d1["ipv6"])],
       "addresses as digitalocean-cloud-controller-manager sets them (dual-stack)", by_id)
    eq(t, by_name.get("providerID"), by_id["providerID"], "lookup by droplet name finds the same droplet", by_name)
    eq(t, (ex["error"], ex["value"]), (0, True), "exists: true")
    eq(t, (nex["error"], nex["value"]), (0, False), "exists: false for an unknown name", nex)
    eq(t, nf["class"], "not-found", "an unknown droplet id is not-found", nf)
    eq(t, (sd["error"], sd["value"]), (0, False), "an active droplet is not shut down", sd)
    log = api_requests(c, before)
    t.ok(len(log) == 6 and all(r["headers"].get("Authorization") == "Bearer <redacted>" for r in log),
         "one API request per lookup, each with the bearer token", log)
    eq(t, [r["path"] for r in log[1:2]], ["/v2/droplets?name=d1&per_page=200"], "by name: the name filter of the API")

    c.stop(d1["id"])
    r, = lookup(conf, "shutdown", "digitalocean://%s" % d1["id"])
    eq(t, (r["error"], r["value"]), (0, True), "a droplet that is off is shut down", r)
    c.start(d1["id"])
    v4 = c.add_instance({"platform": "digitalocean", "name": "v4only", "ipv6": None, "private_ipv4": None})
    r, = lookup(conf, "metadata", "v4only")
    eq(t, addrs(r), [("Hostname", "v4only"), ("ExternalIP", v4["public_ipv4"])], "IPv4-only droplet", r)
    c.remove_instance(v4["id"])
    r, = lookup(conf, "exists", "digitalocean://%s" % v4["id"])
    eq(t, (r["error"], r["value"]), (0, False), "a deleted droplet does not exist", r)
    r, = lookup(conf, "metadata", "d1/../../v2/account")
    eq(t, r["class"], "not-found", "a hostile name is a filter value, not a path", r)


def test_credentials(t, c, d):
    d2 = c.add_instance({"platform": "digitalocean", "name": "d2"})
    pid = "digitalocean://%s" % d2["id"]
    noauth = write(os.path.join(d, "noauth.conf"), conf_text(c, token=None))
    r, = lookup(noauth, "exists", pid, env={"DO_ACCESS_TOKEN": DO_TOKEN})
    eq(t, (r["error"], r["value"]), (0, True), "token from DO_ACCESS_TOKEN", r)
    r, = lookup(write(os.path.join(d, "env.conf"), "[Global]\n"), "exists", pid,
                env={"DO_ACCESS_TOKEN": DO_TOKEN, "DO_ENDPOINT_URL": c.url})
    eq(t, (r["error"], r["value"]), (0, True), "endpoint from DO_ENDPOINT_URL", r)
    bad = write(os.path.join(d, "bad.conf"), conf_text(c, token="dop_v1_wrong"))
    r, = lookup(bad, "metadata", pid)
    eq(t, (r["class"], r.get("message")), ("terminal", "Unable to authenticate you"), "a wrong token is terminal", r)
    t.ok("dop_v1_wrong" not in json.dumps(r), "the token is not in the message")

    # A rotated token: the file changes while the provider holds the old token; the API's 401
    # makes it read the file again, once.
    tf = write(os.path.join(d, "token"), DO_TOKEN + "\n")
    c.settings(do_tokens=[{"token": DO_TOKEN}, {"token": "dop_v1_rotated"}])
    p = subprocess.Popen([TOOL, "digitalocean", write(os.path.join(d, "tf.conf"), conf_text(c, None, tf)), "exists",
                          pid, "wait", "-", "exists", pid], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env={k: v for k, v in os.environ.items() if not k.startswith("DO_")})
    r1 = json.loads(p.stdout.readline())
    p.stdout.readline()
    write(tf, "dop_v1_rotated\n")
    c.settings(do_tokens=[{"token": "dop_v1_rotated"}])
    before = len(c.requests())
    out, _ = p.communicate("\n", timeout=60)
    r2 = json.loads(out.splitlines()[0])
    eq(t, ((r1["error"], r1["value"]), (r2["error"], r2["value"])), ((0, True), (0, True)),
       "a token refused after rotation is read again from the token file", (r1, r2))
    eq(t, [r["status"] for r in api_requests(c, before)], [401, 200], "one refusal, then one request with the new token")
    c.settings(do_tokens=[{"token": DO_TOKEN, "expires": time.time() - 1}])
    r, = lookup(write(os.path.join(d, "exp.conf"), conf_text(c)), "exists", pid)
    eq(t, r["class"], "terminal", "an expired token is refused: terminal", r)
    c.settings(do_tokens=[{"token": DO_TOKEN}])


def test_pages_and_errors(t, c, d):
    conf = write(os.path.join(d, "err.conf"), conf_text(c))
    d3 = c.add_instance({"platform": "digitalocean", "name": "d3"})
    page1 = {"droplets": [], "links": {"pages": {"next": c.url + "/v2/droplets?name=d3&per_page=200&page=1"}},
             "meta": {"total": 1}}
    c.fail({"platform": "digitalocean", "service": "api", "path": r"name=d3&per_page=200$", "status": 200,
            "body": page1, "count": 1})
    r, = lookup(conf, "metadata", "d3")
    eq(t, (r["error"], r.get("providerID")), (0, "digitalocean://%s" % d3["id"]), "the next page is followed", r)
    page1["links"]["pages"]["next"] = "http://elsewhere.invalid/v2/droplets?page=2"
    c.fail({"platform": "digitalocean", "service": "api", "path": r"name=d3&per_page=200$", "status": 200,
            "body": page1, "count": 1})
    r, = lookup(conf, "metadata", "d3")
    eq(t, (r["class"], r.get("message")), ("retryable", "the DigitalOcean API named a next page elsewhere"),
       "a next page on another host is not followed (the token would go there)", r)
    c.clear_faults()

    c.throttle("digitalocean", service="api")
    before = len(c.requests())
    res = lookup(conf, *(["metadata", "d3"] * 5))
    t.ok(all(r["class"] == "retryable" and 0 < r["retryAfter"] <= 2 for r in res),
         "429 is retryable with the delay of ratelimit-reset", res)
    t.ok(all(r.get("message") == "API Rate limit exceeded." for r in res), "with the API's message", res[:1])
    eq(t, len(api_requests(c, before)), 5, "a throttling storm: one request per lookup")
    c.clear_faults()
    c.fail({"platform": "digitalocean", "service": "api", "status": 200, "body": "{\"droplet\": [1, 2", "count": 1})
    r, = lookup(conf, "metadata", "digitalocean://%s" % d3["id"])
    eq(t, (r["class"], r.get("message")), ("retryable", "malformed response from the cloud API"),
       "malformed JSON is a clear error", r)
    c.fail({"platform": "digitalocean", "service": "api", "status": 200, "count": 1,
            "body": {"droplet": {"id": int(d3["id"]), "name": "d3", "status": "active",
                                 "networks": {"v4": [{"ip_address": "10.0.0.1\n[Evil]", "type": "private"}]}}}})
    r, = lookup(conf, "metadata", "digitalocean://%s" % d3["id"])
    eq(t, (r["error"], r.get("message")), (-74, "unexpected droplet object from the DigitalOcean API"),
       "a hostile address is refused", r)
    c.fail({"platform": "digitalocean", "service": "api", "status": 200, "count": 1,
            "body": "{\"x\": \"" + "x" * (9 * 1024 * 1024) + "\"}"})
    r, = lookup(conf, "metadata", "digitalocean://%s" % d3["id"])
    t.ok(r["class"] == "retryable" and len(r.get("message", "")) < 200, "an oversized answer is a short error", r)
    c.clear_faults()


def main():
    t = Tap()
    if not os.access(TOOL, os.X_OK):
        t.bail_out("tests/provider-lookup is not built")
    with tempfile.TemporaryDirectory() as d:
        with FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(test_lookups, c, d)
            t.run(test_credentials, c, d)
            t.run(test_pages_and_errors, c, d)
    sys.exit(t.done())


main()
