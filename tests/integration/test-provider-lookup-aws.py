#!/usr/bin/env python3
"""lib/provider/provider.h's aws provider against the EC2 fake of tests/fake-cloud: lookups by
providerID and by private DNS name, dual-stack addresses, stopped and terminated or deleted
instances, the region from the providerID's zone, credentials from the cloud config, the
environment, the shared credentials file and the instance role (IMDSv2, IMDSv1 fallback, reuse
until shortly before expiry, renewal once after a refusal), throttling (RequestLimitExceeded
storms), and bad or oversized answers: each a classified error with a clear message and no
secret in it. Requests are counted in the fake cloud's request log."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import AWS_ACCESS_KEY, FakeCloud  # noqa: E402
from providerlookup import TOOL, addrs, eq, write  # noqa: E402
from providerlookup import lookup as provider_lookup  # noqa: E402

SECRET = AWS_ACCESS_KEY["secret"]


def lookup(conf, *calls, env=None, home=None):
    """The aws provider with the metadata service off and HOME empty unless the test says."""
    e = {"HOME": home or "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true"}
    e.update(env or {})
    res = provider_lookup("aws", conf, *calls, env=e)
    assert SECRET not in json.dumps(res)
    return res


def conf_text(c, keys=True, zone="us-east-1a", regions=("us-east-1",), extra=""):
    s = "[Global]\n"
    if zone:
        s += "Zone = %s\n" % zone
    if keys:
        s += "access-key-id = %s\nsecret-access-key = %s\n" % (AWS_ACCESS_KEY["id"], SECRET)
    s += extra
    for n, r in enumerate(regions, 1):
        s += '[ServiceOverride "%d"]\nService = ec2\nRegion = %s\nURL = %s/ec2\nSigningRegion = %s\n' % (n, r, c.url, r)
    return s


def pid(inst):
    return "aws:///%s/%s" % (inst["zone"], inst["id"])


def api_requests(c, since):
    return [r for r in c.requests()[since:] if r.get("service") == "api" and r.get("platform") == "aws"]


def test_lookups(t, c, d):
    a1 = c.add_instance({"platform": "aws", "name": "a1"})
    conf = write(os.path.join(d, "aws.conf"), conf_text(c))
    before = len(c.requests())
    by_id, by_name, ex, nex, nf, sd = lookup(conf, "metadata", pid(a1), "metadata", a1["hostname"], "exists",
                                             a1["hostname"], "exists", "ip-10-9-9-9.ec2.internal", "metadata",
                                             "aws:///us-east-1a/i-0000000000000dead", "shutdown", pid(a1))
    eq(t, by_id["error"], 0, "lookup by providerID succeeds", by_id)
    eq(t, by_id["providerID"], pid(a1), "providerID aws:///<zone>/<instance-id>, as the agent writes it")
    eq(t, (by_id["instanceType"], by_id["region"], by_id["zone"]), (a1["type"], "us-east-1", "us-east-1a"),
       "instance type, region and zone", by_id)
    public_dns = "ec2-%s.compute-1.amazonaws.com" % a1["public_ipv4"].replace(".", "-")
    eq(t, addrs(by_id), [("InternalIP", a1["private_ipv4"]), ("ExternalIP", a1["public_ipv4"]),
                         ("InternalDNS", a1["hostname"]), ("Hostname", a1["hostname"]), ("ExternalDNS", public_dns)],
       "addresses as cloud-provider-aws sets them", by_id)
    eq(t, by_name.get("providerID"), pid(a1), "lookup by private DNS name finds the same instance", by_name)
    eq(t, (ex["error"], ex["value"]), (0, True), "exists: true")
    eq(t, (nex["error"], nex["value"]), (0, False), "exists: false for an unknown name (not an error)", nex)
    eq(t, (nf["error"], nf["class"]), (-2, "not-found"), "an unknown instance id is not-found", nf)
    eq(t, (sd["error"], sd["value"]), (0, False), "a running instance is not shut down", sd)
    log = api_requests(c, before)
    eq(t, len(log), 6, "one EC2 request per lookup", log)
    t.ok(all(r["method"] == "POST" and r["headers"].get("Authorization", "").startswith("AWS4-HMAC-SHA256 <")
             for r in log), "signed POSTs (the fake checked each signature)", log[:1])

    c.stop(a1["id"])
    r, = lookup(conf, "shutdown", pid(a1))
    eq(t, (r["error"], r["value"]), (0, True), "a stopped instance is shut down", r)
    r, = lookup(conf, "exists", pid(a1))
    eq(t, (r["error"], r["value"]), (0, True), "a stopped instance exists")
    c.start(a1["id"])

    dual = write(os.path.join(d, "dual.conf"), conf_text(c, extra="NodeIPFamilies = ipv4,ipv6\n"))
    r, = lookup(dual, "metadata", pid(a1))
    eq(t, addrs(r)[:2], [("InternalIP", a1["private_ipv4"]), ("InternalIP", a1["ipv6"])],
       "NodeIPFamilies ipv4,ipv6: the IPv6 address is an InternalIP too", r)

    a2 = c.add_instance({"platform": "aws", "name": "a2", "region": "eu-west-1", "zone": "eu-west-1b"})
    multi = write(os.path.join(d, "multi.conf"), conf_text(c, zone=None, regions=("us-east-1", "eu-west-1")))
    r1, r2 = lookup(multi, "metadata", pid(a2), "exists", pid(a1))
    eq(t, (r1["error"], r1["region"], r1["zone"]), (0, "eu-west-1", "eu-west-1b"),
       "without a configured region, the providerID's zone names it", r1)
    eq(t, (r2["error"], r2["value"]), (0, True), "and each region's endpoint is used", r2)
    r, = lookup(multi, "exists", "ip-10-9-9-9.ec2.internal")
    eq(t, r["class"], "terminal", "a lookup by name without any region is refused", r)

    # Terminated instances stay visible for a while as "terminated"; deleted ones are gone.
    c.update_instance(a2["id"], {"extra": {"ec2_terminated": True}, "status": "stopped"})
    r, = lookup(multi, "exists", pid(a2))
    eq(t, (r["error"], r["value"]), (0, False), "a terminated instance does not exist", r)
    c.remove_instance(a2["id"])
    r1, r2 = lookup(multi, "exists", pid(a2), "metadata", pid(a2))
    eq(t, (r1["error"], r1["value"], r2["class"]), (0, False, "not-found"),
       "a deleted instance (InvalidInstanceID.NotFound) does not exist", (r1, r2))


def test_credentials(t, c, d):
    a3 = c.add_instance({"platform": "aws", "name": "a3"})
    nokeys = write(os.path.join(d, "nokeys.conf"), conf_text(c, keys=False))
    r, = lookup(nokeys, "exists", pid(a3), env={"AWS_ACCESS_KEY_ID": AWS_ACCESS_KEY["id"],
                                               "AWS_SECRET_ACCESS_KEY": SECRET})
    eq(t, (r["error"], r["value"]), (0, True), "credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", r)

    creds = write(os.path.join(d, "credentials"), "[default]\naws_access_key_id = WRONG\naws_secret_access_key = x\n"
                  "[ops]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (AWS_ACCESS_KEY["id"], SECRET))
    r, = lookup(nokeys, "exists", pid(a3), env={"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_PROFILE": "ops"})
    eq(t, (r["error"], r["value"]), (0, True), "credentials from the shared credentials file's profile", r)
    os.makedirs(os.path.join(d, "home", ".aws"), exist_ok=True)
    write(os.path.join(d, "home", ".aws", "credentials"), "[default]\naws_access_key_id = %s\n"
          "aws_secret_access_key = %s\n" % (AWS_ACCESS_KEY["id"], SECRET))
    r, = lookup(nokeys, "exists", pid(a3), home=os.path.join(d, "home"))
    eq(t, (r["error"], r["value"]), (0, True), "credentials from ~/.aws/credentials", r)

    r, = lookup(nokeys, "exists", pid(a3), env={"AWS_SHARED_CREDENTIALS_FILE": creds})
    eq(t, r["class"], "terminal", "rejected credentials are terminal", r)
    t.ok("not able to validate" in r.get("message", ""), "with EC2's message", r)
    bad = write(os.path.join(d, "bad.conf"), conf_text(c).replace(SECRET, "not-the-secret"))
    r, = lookup(bad, "metadata", pid(a3))
    eq(t, r["class"], "terminal", "a wrong secret (SignatureDoesNotMatch) is terminal", r)
    t.ok("not-the-secret" not in json.dumps(r), "the secret is not in the message", r)

    # The instance role through the instance metadata service.
    node = c.add_instance({"platform": "aws", "name": "ctl", "extra": {"iam_role": "cloudnode-ccm"},
                           "require_token": True})
    role_env = {"AWS_EC2_METADATA_SERVICE_ENDPOINT": c.metadata_url(node["id"]), "AWS_EC2_METADATA_DISABLED": ""}
    before = len(c.requests())
    res = lookup(nokeys, "exists", pid(a3), "metadata", a3["hostname"], "shutdown", pid(a3), env=role_env)
    eq(t, [(r["error"], r.get("value", True)) for r in res], [(0, True), (0, True), (0, False)],
       "credentials of the instance role (IMDSv2 required)", res)
    log = c.requests()[before:]
    imds = [(r["method"], r["path"]) for r in log if r.get("service") == "metadata"]
    eq(t, imds, [("PUT", "/latest/api/token"), ("GET", "/latest/meta-data/iam/security-credentials/"),
                 ("GET", "/latest/meta-data/iam/security-credentials/cloudnode-ccm")],
       "one IMDSv2 token and one credentials fetch serve three lookups", imds)
    signed = [r["headers"].get("X-Amz-Security-Token") for r in log if r.get("service") == "api"]
    eq(t, signed, ["<redacted>"] * 3, "each EC2 request carries the role's session token", signed)

    c.update_instance(node["id"], {"require_token": False})
    c.fail({"method": "PUT", "path": "/latest/api/token", "status": 403, "count": 1})
    r, = lookup(nokeys, "exists", pid(a3), env=role_env)
    eq(t, (r["error"], r["value"]), (0, True), "IMDSv1 when the token request is refused", r)
    c.clear_faults()

    c.settings(aws_role_credentials_ttl=120)
    before = len(c.requests())
    lookup(nokeys, "exists", pid(a3), "exists", pid(a3), env=role_env)
    fetches = [r for r in c.requests()[before:] if r["path"].endswith("/security-credentials/cloudnode-ccm")]
    eq(t, len(fetches), 2, "credentials that expire within the margin are fetched again for each call", fetches)
    c.settings(aws_role_credentials_ttl=21600)

    # EC2 refuses the credentials once (rotated early): fetched again once, then the answer.
    before = len(c.requests())
    c.fail({"service": "api", "platform": "aws", "status": 401, "count": 1})
    r, = lookup(nokeys, "exists", pid(a3), env=role_env)
    fetches = [r for r in c.requests()[before:] if r["path"].endswith("/security-credentials/cloudnode-ccm")]
    eq(t, (r["error"], r["value"], len(fetches)), (0, True, 2),
       "refused role credentials are renewed once and the lookup succeeds", (r, fetches))
    c.fail({"service": "api", "platform": "aws", "status": 401})
    r, = lookup(nokeys, "exists", pid(a3), env=role_env)
    eq(t, r["class"], "terminal", "credentials refused again after renewal are terminal", r)
    c.clear_faults()
    r, = lookup(nokeys, "exists", pid(a3), env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": c.metadata_url(a3["id"]),
                                               "AWS_EC2_METADATA_DISABLED": ""})
    eq(t, r["class"], "terminal", "an instance without a role has no credentials: terminal", r)


def test_errors(t, c, d):
    a4 = c.add_instance({"platform": "aws", "name": "a4"})
    conf = write(os.path.join(d, "err.conf"), conf_text(c))
    c.throttle("aws", service="api")
    before = len(c.requests())
    res = lookup(conf, *(["metadata", pid(a4)] * 5))
    t.ok(all(r["class"] == "retryable" and r["retryAfter"] >= 1 for r in res),
         "RequestLimitExceeded is retryable with a delay of at least a second", res)
    t.ok(all("Request limit exceeded" in r.get("message", "") for r in res), "with EC2's message", res[:1])
    eq(t, len(api_requests(c, before)), 5, "a throttling storm: one request per lookup, no retry inside")
    c.clear_faults()

    c.fail({"service": "api", "platform": "aws", "status": 503, "count": 1, "headers": {"Retry-After": "7"}})
    r, = lookup(conf, "metadata", pid(a4))
    eq(t, (r["class"], r["retryAfter"]), ("retryable", 7.0), "503 Unavailable is retryable with Retry-After", r)
    c.fail({"service": "api", "platform": "aws", "status": 200, "body": "<DescribeInstancesResponse><oops>",
            "content_type": "text/xml", "count": 1})
    r, = lookup(conf, "metadata", pid(a4))
    eq(t, (r["class"], r.get("message")), ("retryable", "malformed answer from the EC2 API"),
       "malformed XML is a clear error", r)
    c.fail({"service": "api", "platform": "aws", "status": 200, "content_type": "text/xml", "count": 1,
            "body": "<!DOCTYPE a [<!ENTITY b \"bbbbbbbb\"><!ENTITY c \"&b;&b;&b;&b;\">]><a>&c;</a>"})
    r, = lookup(conf, "metadata", pid(a4))
    eq(t, r.get("message"), "malformed answer from the EC2 API", "entity declarations are refused", r)
    hostile = ("<DescribeInstancesResponse><reservationSet><item><instancesSet><item>"
               "<instanceId>%s</instanceId><instanceState><name>running</name></instanceState>"
               "<placement><availabilityZone>us-east-1a/../../x</availabilityZone></placement>"
               "</item></instancesSet></item></reservationSet></DescribeInstancesResponse>" % a4["id"])
    c.fail({"service": "api", "platform": "aws", "status": 200, "body": hostile, "content_type": "text/xml",
            "count": 1})
    r, = lookup(conf, "metadata", pid(a4))
    eq(t, (r["error"], r.get("message")), (-74, "unexpected instance object from the EC2 API"),
       "a hostile zone is refused", r)
    c.fail({"service": "api", "platform": "aws", "status": 200, "content_type": "text/xml", "count": 1,
            "body": "<a>" + "x" * (9 * 1024 * 1024) + "</a>"})
    r, = lookup(conf, "metadata", pid(a4))
    eq(t, r["class"], "retryable", "an oversized answer is an error", r)
    t.ok(len(r.get("message", "")) < 200, "with a short message", r.get("message", "")[:300])
    c.clear_faults()


def main():
    t = Tap()
    if not os.access(TOOL, os.X_OK):
        t.bail_out("tests/provider-lookup is not built")
    with tempfile.TemporaryDirectory() as d:
        with FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(test_lookups, c, d)
            t.run(test_credentials, c, d)
            t.run(test_errors, c, d)
    sys.exit(t.done())


main()
