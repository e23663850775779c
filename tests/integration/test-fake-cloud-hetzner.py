#!/usr/bin/env python3
"""tests/fake-cloud Hetzner Cloud API: auth, servers, actions over time, selectors, errors,
rate limiting, and servers showing up in the metadata service."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import HETZNER_TOKEN, FakeCloud, scratch_server  # noqa: E402

AUTH = {"Authorization": "Bearer " + HETZNER_TOKEN}


def wait_action(c, aid, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        st, _, body = c.get("/v1/actions/%d" % aid, AUTH)
        if body["action"]["status"] != "running":
            return body["action"]
        time.sleep(0.1)
    return None


def test_auth(t, c):
    st, h, body = c.get("/v1/servers")
    t.eq(st, 401, "no token: 401")
    t.eq(body["error"]["code"], "unauthorized", "error code unauthorized")
    t.ok(set(body["error"]) >= {"code", "message"}, "error body shape", body)
    st, _, _ = c.get("/v1/servers", {"Authorization": "Bearer wrong"})
    t.eq(st, 401, "wrong token: 401")
    st, h, body = c.get("/v1/servers", AUTH)
    t.eq((st, body["servers"]), (200, []), "empty list")
    t.eq(body["meta"]["pagination"]["total_entries"], 0, "pagination meta")
    for k in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"):
        t.ok(k in h, "%s header present" % k, h)


def test_servers(t, c):
    body = {"name": "worker-1", "server_type": "cx22", "image": "ubuntu-24.04", "location": "hel1",
            "labels": {"cluster": "c1", "role": "worker"}, "user_data": "#cloud-config\n", "networks": [4711]}
    st, h, out = c.api("POST", "/v1/servers", body, AUTH)
    t.eq(st, 201, "create 201")
    srv, action = out["server"], out["action"]
    t.eq((srv["name"], srv["status"], srv["server_type"]["name"], srv["location"]["name"]),
         ("worker-1", "initializing", "cx22", "hel1"), "created server fields")
    t.eq(srv["datacenter"]["location"]["network_zone"], "eu-central", "datacenter location network zone")
    t.eq((action["command"], action["status"]), ("create_server", "running"), "create action running")
    t.ok(isinstance(out["next_actions"], list) and "root_password" in out, "create envelope keys", out)
    st, _, dup = c.api("POST", "/v1/servers", body, AUTH)
    t.ok(st == 409 and dup["error"]["code"] == "uniqueness_error", "same name: uniqueness_error", dup)
    done = wait_action(c, action["id"])
    t.ok(done and done["status"] == "success" and done["progress"] == 100 and done["finished"],
         "action reaches success", done)
    st, _, got = c.get("/v1/servers/%d" % srv["id"], AUTH)
    t.eq(got["server"]["status"], "running", "server running after the action")
    inv = c.get_instance(str(srv["id"]))
    t.eq([(n["network"], n["ip"]) for n in got["server"]["private_net"]], [(4711, inv["private_ipv4"])],
         "private_net lists the attached network")
    t.eq(got["server"]["public_net"]["ipv4"]["ip"], inv["public_ipv4"], "public ipv4 from the inventory")

    # metadata of the created server
    iid = str(srv["id"])
    st, _, hostname = c.get("/hetzner/v1/metadata/hostname", base=c.metadata_url(iid))
    t.eq((st, hostname), (200, "worker-1"), "created server appears in the metadata service")
    st, _, pn = c.get("/hetzner/v1/metadata/private-networks", base=c.metadata_url(iid))
    t.ok(got["server"]["private_net"][0]["ip"] in pn, "metadata private-networks matches the API", pn)
    t.eq(c.get("/hetzner/v1/userdata", base=c.metadata_url(iid))[2], "#cloud-config\n", "userdata")

    c.api("POST", "/v1/servers", {"name": "cp-1", "server_type": "cx32", "image": "debian-12",
                                  "location": "fsn1", "labels": {"cluster": "c1", "role": "cp"}}, AUTH)
    c.api("POST", "/v1/servers", {"name": "other", "server_type": "cx22", "image": "debian-12",
                                  "labels": {"cluster": "c2"}}, AUTH)

    def names(q):
        st, _, b = c.get("/v1/servers?" + q, AUTH)
        return sorted(s["name"] for s in b["servers"]) if st == 200 else st
    t.eq(names("label_selector=cluster%3Dc1"), ["cp-1", "worker-1"], "label_selector k=v")
    t.eq(names("label_selector=cluster%3Dc1,role!%3Dcp"), ["worker-1"], "label_selector AND with !=")
    t.eq(names("label_selector=role"), ["cp-1", "worker-1"], "label_selector existence")
    t.eq(names("label_selector=!role"), ["other"], "label_selector absence")
    t.eq(names("label_selector=role%20in%20(cp,x)"), ["cp-1"], "label_selector in (...)")
    t.eq(names("label_selector=cluster%20notin%20(c1)"), ["other"], "label_selector notin")
    t.eq(names("name=cp-1"), ["cp-1"], "name filter")
    t.eq(names("name=nope"), [], "name filter no match")
    t.eq(names("label_selector=%3D%3Dbad"), 422, "bad selector: 422 invalid_input")
    st, _, b = c.get("/v1/servers?per_page=2&page=2", AUTH)
    t.eq((len(b["servers"]), b["meta"]["pagination"]["last_page"], b["meta"]["pagination"]["previous_page"]),
         (1, 2, 1), "pagination")

    # delete returns an action; the server is gone once it completes
    st, _, d = c.api("DELETE", "/v1/servers/%d" % srv["id"], None, AUTH)
    t.eq((st, d["action"]["command"]), (200, "delete_server"), "delete returns an action")
    wait_action(c, d["action"]["id"])
    st, _, nf = c.get("/v1/servers/%d" % srv["id"], AUTH)
    t.ok(st == 404 and nf["error"]["code"] == "not_found", "deleted server: not_found", nf)
    t.eq(c.get("/hetzner/v1/metadata/hostname", base=c.metadata_url(iid))[0], 404, "deleted server leaves metadata")
    st, _, nf = c.get("/v1/actions/999999", AUTH)
    t.eq(nf["error"]["code"], "not_found", "unknown action not_found")


def test_invalid(t, c):
    def create(body):
        return c.api("POST", "/v1/servers", body, AUTH)
    st, _, b = create({"server_type": "cx22", "image": "debian-12"})
    t.ok(st == 422 and b["error"]["code"] == "invalid_input" and b["error"]["details"]["fields"][0]["name"] == "name",
         "missing name: invalid_input naming the field", b)
    st, _, b = create({"name": "bad_name!", "server_type": "cx22", "image": "debian-12"})
    t.eq((st, b["error"]["code"]), (422, "invalid_input"), "invalid hostname")
    st, _, b = create({"name": "x1", "server_type": "nope", "image": "debian-12"})
    t.eq(b["error"]["details"]["fields"][0]["name"], "server_type", "unknown server type")
    st, _, b = create({"name": "x1", "server_type": "cx22", "image": "debian-12", "location": "mars"})
    t.eq(b["error"]["details"]["fields"][0]["name"], "location", "unknown location")
    st, _, b = create({"name": "x1", "server_type": "cx22", "image": "debian-12", "labels": {"bad key": "v"}})
    t.eq(b["error"]["details"]["fields"][0]["name"], "labels", "invalid label")
    st, _, b = c.api("POST", "/v1/servers", "{not json", {**AUTH, "Content-Type": "application/json"})
    t.eq((st, b["error"]["code"]), (400, "json_error"), "malformed JSON: json_error")


def test_catalog(t, c):
    st, _, b = c.get("/v1/server_types", AUTH)
    t.ok(st == 200 and any(x["name"] == "cx22" for x in b["server_types"]), "server_types lists cx22")
    cx22 = next(x for x in b["server_types"] if x["name"] == "cx22")
    t.ok({"cores", "memory", "disk", "prices", "architecture", "cpu_type"} <= set(cx22), "server type fields")
    st, _, b = c.get("/v1/server_types?name=cx32", AUTH)
    t.eq([x["name"] for x in b["server_types"]], ["cx32"], "server_types name filter")
    st, _, b = c.get("/v1/locations", AUTH)
    zones = {x["name"]: x["network_zone"] for x in b["locations"]}
    t.eq((zones.get("fsn1"), zones.get("ash")), ("eu-central", "us-east"), "locations with network zones")
    st, _, b = c.get("/v1/datacenters", AUTH)
    t.ok(any(d["name"] == "fsn1-dc14" for d in b["datacenters"]), "datacenters")


def test_ratelimit(t, c):
    # A slow refill keeps the countdown exact however loaded the machine is.
    c.settings(hetzner_ratelimit_limit=3, hetzner_ratelimit_refill_per_second=0.001)
    c.clear_requests()
    # The bucket carries over from earlier requests; start from a fresh token.
    c.settings(hetzner_tokens=[HETZNER_TOKEN, "second-token"])
    auth = {"Authorization": "Bearer second-token"}
    rem = []
    for _ in range(3):
        st, h, _ = c.get("/v1/servers", auth)
        rem.append((st, h["RateLimit-Remaining"], h["RateLimit-Limit"]))
    t.eq(rem, [(200, "2", "3"), (200, "1", "3"), (200, "0", "3")], "remaining counts down")
    st, h, b = c.get("/v1/servers", auth)
    t.ok(st == 429 and b["error"]["code"] == "rate_limit_exceeded", "empty bucket: 429 rate_limit_exceeded", b)
    t.ok(int(h["RateLimit-Reset"]) > time.time(), "RateLimit-Reset in the future", h)
    c.settings(hetzner_ratelimit_refill_per_second=20.0)
    time.sleep(0.2)
    t.eq(c.get("/v1/servers", auth)[0], 200, "bucket refills over time")
    c.settings(hetzner_ratelimit_limit=3600, hetzner_ratelimit_refill_per_second=1.0)


def test_action_error(t, c):
    c.settings(hetzner_action_errors=[{"code": "server_error", "message": "no capacity"}])
    st, _, out = c.api("POST", "/v1/servers", {"name": "fails", "server_type": "cx22", "image": "debian-12"}, AUTH)
    a = wait_action(c, out["action"]["id"])
    t.ok(a and a["status"] == "error" and a["error"]["code"] == "server_error", "queued action error", a)


def test_concurrency(t, c):
    """Creates racing on one inventory: distinct names all succeed with distinct ids, one name
    succeeds once."""
    from concurrent.futures import ThreadPoolExecutor

    def create(name):
        st, _, b = c.api("POST", "/v1/servers", {"name": name, "server_type": "cx22", "image": "debian-12"}, AUTH)
        return st, (b.get("server") or {}).get("id")
    with ThreadPoolExecutor(8) as ex:
        res = list(ex.map(create, ["par-%d" % i for i in range(16)]))
    t.ok(all(st == 201 for st, _ in res) and len({i for _, i in res}) == 16, "16 parallel creates, 16 ids", res)
    with ThreadPoolExecutor(8) as ex:
        res = list(ex.map(create, ["same"] * 8))
    t.eq(sorted(st for st, _ in res), [201] + [409] * 7, "one of 8 racing creates of one name wins")


def test_two_processes(t, c, tmp):
    """A second server on the same state directory: each parses the shared file only when it
    changed, so a change made through one must show at once in the other, also when the file
    keeps its size; the token bucket is shared too."""
    with FakeCloud(tmp) as other:
        inst = other.add_instance({"platform": "hetzner", "name": "shared-1", "labels": {"v": "a0"}})
        seen = []
        for i in range(20):
            other.update_instance(inst["id"], {"labels": {"v": "a%d" % (i % 10)}})
            _, _, b = c.get("/v1/servers?name=shared-1", AUTH)
            seen.append(b["servers"][0]["labels"]["v"] if b["servers"] else None)
        t.eq(seen, ["a%d" % (i % 10) for i in range(20)], "equal-size changes by the other process seen at once")
        other.update_instance(inst["id"], {"name": "shared-2"})
        _, _, old = c.get("/v1/servers?name=shared-1", AUTH)
        _, _, new = c.get("/v1/servers?name=shared-2", AUTH)
        t.eq(([s["id"] for s in old["servers"]], [s["id"] for s in new["servers"]]), ([], [int(inst["id"])]),
             "lookup by name follows a rename made by the other process")
        other.remove_instance(inst["id"])
        st, _, _ = c.get("/v1/servers/%s" % inst["id"], AUTH)
        t.eq(st, 404, "instance removed by the other process is gone")
        c.settings(hetzner_tokens=[HETZNER_TOKEN, "third-token"], hetzner_ratelimit_limit=4,
                   hetzner_ratelimit_refill_per_second=0.001)
        auth = {"Authorization": "Bearer third-token"}
        rem = [srv.get("/v1/servers", auth)[1].get("RateLimit-Remaining") for srv in (c, other, c, other)]
        t.eq(rem, ["3", "2", "1", "0"], "one token bucket for both processes")
        t.eq(other.get("/v1/servers", auth)[0], 429, "bucket emptied through either process")
        c.settings(hetzner_ratelimit_limit=3600, hetzner_ratelimit_refill_per_second=1.0)


def main():
    t = Tap()
    with scratch_server("cn-fake-hetzner-", extra_args=["--action-seconds", "0.4"]) as (c, tmp):
        for fn in (test_auth, test_servers, test_invalid, test_catalog, test_ratelimit, test_action_error,
                   test_concurrency):
            t.run(fn, c)
        t.run(test_two_processes, c, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
