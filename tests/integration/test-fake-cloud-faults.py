#!/usr/bin/env python3
"""tests/fake-cloud fault injection and the request log."""
import http.client
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import HETZNER_TOKEN, run_with_server  # noqa: E402

AUTH = {"Authorization": "Bearer " + HETZNER_TOKEN}


def test_fail_n(t, c):
    rule = c.fail({"path": "/meta-data/instance-id$", "count": 2, "status": 503})
    t.ok(rule["id"].startswith("f-"), "rule created")
    got = [c.get("/latest/meta-data/instance-id")[0] for _ in range(3)]
    t.eq(got, [503, 503, 200], "next 2 matching requests fail, then normal")
    t.eq(c.get("/latest/meta-data/instance-type")[0], 200, "non-matching path untouched")
    t.eq(c.faults(), [], "exhausted rule removed")
    c.fail({"method": "PUT", "count": 1, "status": 500})
    st, h, body = c.api("PUT", "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    t.ok(st == 500 and "500 - Internal Server Error" in body, "method match; body shaped like IMDS", body)
    c.fail({"path": "instance-id", "count": 1, "status": 418, "body": {"custom": True}, "headers": {"X-Test": "1"}})
    st, h, body = c.get("/latest/meta-data/instance-id")
    t.eq((st, body, h.get("X-Test")), (418, {"custom": True}, "1"), "custom status, JSON body and header")
    st, _, err = c._admin("POST", "/faults", {"path": "(", "status": 500})
    t.eq(st, 400, "invalid regex rejected")
    st, _, err = c._admin("POST", "/faults", {"path": "x"})
    t.ok(st == 400 and "needs" in err["error"], "rule without an effect rejected", err)


def test_latency_and_reset(t, c):
    c.fail({"path": "local-ipv4", "count": 1, "latency": 0.5})
    t0 = time.monotonic()
    st, _, body = c.get("/latest/meta-data/local-ipv4")
    took = time.monotonic() - t0
    t.ok(st == 200 and took >= 0.45, "latency delays then answers normally (%.2fs)" % took)
    c.fail({"path": "local-ipv4", "count": 1, "reset": True})
    u = urllib.parse.urlsplit(c.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    t.eq(answer(conn, "GET", "/latest/meta-data/local-ipv4"), "dropped", "reset: the client sees the connection dropped")
    t.eq(c.get("/latest/meta-data/local-ipv4")[0], 200, "after the reset requests work again")


def answer(conn, method, path, body=None, headers=None):
    """The status the client got, or "dropped" when the connection went away instead."""
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        r.read()
        return r.status
    except (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError):
        return "dropped"
    finally:
        conn.close()


def test_after_commit(t, c):
    """A create whose answer is lost after the server was made, pinned by skip to the 2nd create."""
    u = urllib.parse.urlsplit(c.url)
    rule = c.fail({"method": "POST", "path": "^/v1/servers$", "skip": 1, "count": 1, "reset": True,
                   "after_commit": True, "latency": 0.3})
    got = []
    for name in ("ac-1", "ac-2"):
        body = json.dumps({"name": name, "server_type": "cx22", "image": "ubuntu-24.04", "location": "fsn1"})
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        got.append(answer(conn, "POST", "/v1/servers", body, dict(AUTH, **{"Content-Type": "application/json"})))
    t.eq(got, [201, "dropped"], "the first create is answered, the second (skip 1) loses its answer")
    st, _, body = c.api("GET", "/v1/servers?name=ac-2", headers=AUTH)
    t.eq([s["name"] for s in body.get("servers", [])], ["ac-2"], "but the second server exists")
    logged = [(r["path"], r["status"], r.get("responseDropped")) for r in c.requests() if r.get("fault") == rule["id"]]
    t.eq(logged, [("/v1/servers", 201, True)], "the log has the status that was not sent and responseDropped")
    st, _, err = c._admin("POST", "/faults", {"after_commit": True, "status": 500})
    t.ok(st == 400 and "reset" in err["error"], "after_commit without reset is refused", err)
    st, _, err = c._admin("POST", "/faults", {"reset": True, "skip": -1})
    t.eq(st, 400, "a negative skip is refused")


def test_throttle(t, c):
    c.throttle("hetzner", count=1)
    st, h, body = c.get("/v1/servers", AUTH)
    t.ok(st == 429 and body["error"]["code"] == "rate_limit_exceeded", "hetzner throttle body", body)
    t.ok(h.get("RateLimit-Remaining") == "0" and "RateLimit-Reset" in h and "RateLimit-Limit" in h,
         "hetzner throttle headers", h)
    t.eq(c.get("/v1/servers", AUTH)[0], 200, "throttle count consumed")
    c.throttle("openstack", count=1, service="identity")
    st, h, body = c.api("POST", "/v3/auth/tokens", {"auth": {}})
    t.ok(st == 429 and "Retry-After" in h, "openstack throttle with Retry-After", (st, h))
    c.fail({"service": "compute", "count": 1, "status": 404})
    st, _, body = c.get("/compute/v2.1/servers/x")
    t.ok(st == 404 and body.get("itemNotFound", {}).get("code") == 404, "Nova-shaped injected error", body)
    c.fail({"service": "identity", "count": 1, "status": 503})
    st, _, body = c.api("POST", "/v3/auth/tokens", {"auth": {}})
    t.ok(st == 503 and body["error"]["code"] == 503, "Keystone-shaped injected error", body)
    c.throttle("aws", count=1)
    st, _, body = c.get("/latest/meta-data/instance-id")
    t.ok(st == 429 and "429" in body, "aws metadata throttle", body)
    gcp = c.add_instance({"platform": "gcp"})
    c.fail({"path": "^/computeMetadata/v1/instance/id$", "count": 1, "status": 500})
    t.eq(c.get("/computeMetadata/v1/instance/id", {"Metadata-Flavor": "Google"}, base=c.metadata_url(gcp["id"]))[0],
         500, "anchored path rule matches the path as the instance sees it")
    c.fail({"instance": gcp["id"], "count": 1, "status": 503})
    t.eq(c.get("/latest/meta-data/instance-id")[0], 200, "instance-scoped rule leaves others alone")
    t.eq(c.get("/computeMetadata/v1/instance/id", {"Metadata-Flavor": "Google"}, base=c.metadata_url(gcp["id"]))[0],
         503, "instance-scoped rule hits its instance")


def test_log(t, c):
    c.clear_requests()
    _, _, tok = c.api("PUT", "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    c.get("/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": tok})
    c.get("/v1/servers", AUTH)
    c.fail({"path": "hostname", "count": 1, "status": 500})
    c.get("/latest/meta-data/hostname")
    log = c.requests()
    t.eq([(e["method"], e["path"], e["status"]) for e in log],
         [("PUT", "/latest/api/token", 200), ("GET", "/latest/meta-data/instance-id", 200),
          ("GET", "/v1/servers", 200), ("GET", "/latest/meta-data/hostname", 500)], "log lines in order")
    t.eq(log[0]["headers"].get("X-aws-ec2-metadata-token-ttl-seconds"), "60", "headers of interest logged")
    t.eq(log[1]["headers"].get("X-aws-ec2-metadata-token"), "<redacted>", "IMDS token redacted")
    t.eq(log[2]["headers"].get("Authorization"), "Bearer <redacted>", "bearer token redacted")
    t.ok("fault" in log[3] and "fault" not in log[2], "faulted request names its rule")
    with open(os.path.join(c.state_dir, "requests.jsonl")) as f:
        raw = f.read()
    t.ok(HETZNER_TOKEN not in raw and tok not in raw, "no secret in the log file")
    t.ok(all(json.loads(line) for line in raw.splitlines()), "each line is JSON")
    t.ok(all(e["time"].endswith("Z") for e in log), "times are UTC")


def main():
    t = Tap()
    run_with_server(t, (test_fail_n, test_latency_and_reset, test_after_commit, test_throttle, test_log), prefix="cn-fake-faults-",
                    platform="aws")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
