#!/usr/bin/env python3
"""tests/fake-cloud OpenStack: Keystone v3 tokens and catalog, Nova servers over time, errors,
token expiry, and created servers in the metadata service."""
import base64
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import OPENSTACK_APP_CREDENTIAL, OPENSTACK_USER, run_with_server  # noqa: E402


def password_auth(user=OPENSTACK_USER, password=None, scope=True):
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": user["name"], "domain": {"name": user["domain"]},
        "password": password if password is not None else user["password"]}}}}}
    if scope:
        body["auth"]["scope"] = {"project": {"name": user["project"], "domain": {"name": user["domain"]}}}
    return body


def compute_url(catalog):
    for svc in catalog:
        if svc["type"] == "compute":
            return next(e["url"] for e in svc["endpoints"] if e["interface"] == "public")
    return None


def test_keystone(t, c, ctx):
    st, h, body = c.api("POST", "/v3/auth/tokens", password_auth())
    t.eq(st, 201, "password auth 201")
    t.ok(h.get("X-Subject-Token"), "X-Subject-Token header")
    tok = body["token"]
    t.eq(tok["methods"], ["password"], "methods")
    t.eq((tok["project"]["name"], tok["user"]["name"]), ("demo", "demo"), "project and user")
    t.ok(tok["expires_at"].endswith("Z") and tok["issued_at"] < tok["expires_at"], "expires_at after issued_at", tok)
    url = compute_url(tok["catalog"])
    t.eq(url, c.url + "/compute/v2.1", "catalog points at the fake's own Nova")
    ctx["token"], ctx["nova"] = h["X-Subject-Token"], url
    st, h, body = c.api("POST", "/v3/auth/tokens", password_auth(password="wrong"))
    t.ok(st == 401 and body["error"]["code"] == 401 and body["error"]["title"] == "Unauthorized",
         "wrong password: 401 Keystone error body", body)
    t.ok("WWW-Authenticate" in h, "401 carries WWW-Authenticate")
    st, _, _ = c.api("POST", "/v3/auth/tokens", {"auth": {}})
    t.eq(st, 400, "malformed auth body: 400")
    st, h, body = c.api("POST", "/v3/auth/tokens", {"auth": {"identity": {
        "methods": ["application_credential"], "application_credential": dict(OPENSTACK_APP_CREDENTIAL)}}})
    t.eq(st, 201, "application credential auth 201")
    t.eq(body["token"]["application_credential"]["id"], OPENSTACK_APP_CREDENTIAL["id"], "token names the credential")
    t.ok(compute_url(body["token"]["catalog"]), "application credential token has a catalog")
    by_name = {"name": "cloudnode", "secret": OPENSTACK_APP_CREDENTIAL["secret"],
               "user": {"name": "demo", "domain": {"name": "Default"}}}
    st, _, _ = c.api("POST", "/v3/auth/tokens", {"auth": {"identity": {
        "methods": ["application_credential"], "application_credential": by_name}}})
    t.eq(st, 201, "application credential by name and owner")
    st, _, _ = c.api("POST", "/v3/auth/tokens", {"auth": {"identity": {
        "methods": ["application_credential"], "application_credential": dict(by_name, user={})}}})
    t.eq(st, 401, "application credential by name without its owner: 401")
    bad = dict(OPENSTACK_APP_CREDENTIAL, secret="nope")
    st, _, _ = c.api("POST", "/v3/auth/tokens", {"auth": {"identity": {
        "methods": ["application_credential"], "application_credential": bad}}})
    t.eq(st, 401, "wrong application credential secret: 401")
    st, h, body = c.get("/v3/auth/tokens", {"X-Auth-Token": ctx["token"], "X-Subject-Token": ctx["token"]})
    t.ok(st == 200 and h.get("X-Subject-Token") == ctx["token"] and body["token"]["expires_at"], "token validation")
    t.eq(c.get("/v3/auth/tokens", {"X-Auth-Token": ctx["token"], "X-Subject-Token": "x"})[0], 404,
         "validating an unknown token: 404")
    st, _, v = c.get("/v3")
    t.eq(v["version"]["id"][:2], "v3", "version document")


def test_nova(t, c, ctx):
    nova = ctx["nova"][len(c.url):]
    H = {"X-Auth-Token": ctx["token"]}
    st, h, body = c.get(nova + "/servers/detail")
    t.ok(st == 401 and body["error"]["code"] == 401, "no X-Auth-Token: 401", body)
    t.eq(c.get(nova + "/servers/detail", {"X-Auth-Token": "garbage"})[0], 401, "bad token: 401")
    ud = "#cloud-config\nhostname: w1\n"
    req = {"server": {"name": "cn-worker-1", "imageRef": "img-1", "flavorRef": "2",
                      "user_data": base64.b64encode(ud.encode()).decode(),
                      "metadata": {"cluster": "c1", "machine-uid": "abc"}}}
    st, h, body = c.api("POST", nova + "/servers", req, H)
    t.eq(st, 202, "create 202")
    sid = body["server"]["id"]
    t.ok({"id", "links", "adminPass", "OS-DCF:diskConfig", "security_groups"} <= set(body["server"]),
         "create response has the documented keys", body)
    t.ok(h.get("Location", "").endswith("/servers/" + sid), "Location header")
    t.ok(h.get("OpenStack-API-Version", "").startswith("compute "), "microversion header")
    st, _, s = c.get(nova + "/servers/" + sid, H)
    t.eq((st, s["server"]["status"], s["server"]["OS-EXT-STS:task_state"]), (200, "BUILD", "spawning"),
         "new server is BUILD")
    end = time.time() + 10
    while time.time() < end and s["server"]["status"] == "BUILD":
        time.sleep(0.1)
        s = c.get(nova + "/servers/" + sid, H)[2]
    srv = s["server"]
    t.eq(srv["status"], "ACTIVE", "server becomes ACTIVE")
    t.eq(srv["metadata"], {"cluster": "c1", "machine-uid": "abc"}, "metadata kept")
    addrs = [a["addr"] for net in srv["addresses"].values() for a in net]
    inv = c.get_instance(sid)
    t.ok(inv["private_ipv4"] in addrs, "addresses list the fixed IP", srv["addresses"])
    t.eq(inv["user_data"], ud, "base64 user_data decoded into the inventory")

    # the server in the metadata service
    base = c.metadata_url(sid)
    st, _, md = c.get("/openstack/latest/meta_data.json", base=base)
    t.eq((md["uuid"], md["name"], md["meta"]["cluster"]), (sid, "cn-worker-1", "c1"), "meta_data.json of created server")
    t.eq(c.get("/openstack/latest/user_data", base=base)[2], ud, "user_data in metadata")
    t.eq(c.get("/latest/meta-data/local-ipv4", base=base)[2], inv["private_ipv4"], "EC2 local-ipv4 matches Nova")

    c.api("POST", nova + "/servers", {"server": {"name": "cn-cp-1", "imageRef": "img-1", "flavorRef": "m1.medium"}}, H)
    c.api("POST", nova + "/servers", {"server": {"name": "other", "imageRef": "img-1", "flavorRef": "1"}}, H)
    names = sorted(x["name"] for x in c.get(nova + "/servers/detail?name=%5Ecn-", H)[2]["servers"])
    t.eq(names, ["cn-cp-1", "cn-worker-1"], "name filter is a regex")
    names = sorted(x["name"] for x in c.get(nova + "/servers/detail?name=worker", H)[2]["servers"])
    t.eq(names, ["cn-worker-1"], "name regex matches anywhere")
    names = [x["name"] for x in c.get(nova + "/servers/detail?ip=%5E" + inv["private_ipv4"].replace(".", "%5C.") + "%24",
                                      H)[2]["servers"]]
    t.eq(names, ["cn-worker-1"], "ip filter")
    st, _, page = c.get(nova + "/servers/detail?limit=2", H)
    t.ok(len(page["servers"]) == 2 and page.get("servers_links"), "limit gives a next link", page)
    st, _, brief = c.get(nova + "/servers", H)
    t.eq(set(brief["servers"][0]), {"id", "name", "links"}, "GET /servers is the brief list")

    # errors
    st, _, e = c.api("POST", nova + "/servers", {"server": {"name": "x", "imageRef": "i", "flavorRef": "99"}}, H)
    t.ok(st == 400 and "badRequest" in e, "unknown flavor: badRequest", e)
    st, _, e = c.api("POST", nova + "/servers", {"server": {"name": "x", "imageRef": "i", "flavorRef": "1",
                                                            "user_data": "not base64!"}}, H)
    t.ok(st == 400 and "base 64" in e["badRequest"]["message"], "invalid base64 user_data", e)
    st, _, e = c.get(nova + "/servers/does-not-exist", H)
    t.ok(st == 404 and e["itemNotFound"]["code"] == 404, "unknown server: itemNotFound", e)

    # ERROR with a fault
    c.settings(nova_build_errors=[{"code": 500, "message": "No valid host was found. ", "details": "capacity"}])
    st, _, b = c.api("POST", nova + "/servers", {"server": {"name": "doomed", "imageRef": "i", "flavorRef": "1"}}, H)
    s = c.get(nova + "/servers/" + b["server"]["id"], H)[2]["server"]
    t.eq((s["status"], s["fault"]["code"], s["fault"]["message"]), ("ERROR", 500, "No valid host was found. "),
         "ERROR server carries a fault")

    # stop/start and delete
    t.eq(c.api("POST", nova + "/servers/%s/action" % sid, {"os-stop": None}, H)[0], 202, "os-stop 202")
    t.eq(c.get(nova + "/servers/" + sid, H)[2]["server"]["status"], "SHUTOFF", "stopped server SHUTOFF")
    t.eq(c.api("POST", nova + "/servers/%s/action" % sid, {"os-stop": None}, H)[0], 409, "stop twice: 409")
    t.eq(c.api("POST", nova + "/servers/%s/action" % sid, {"os-start": None}, H)[0], 202, "os-start 202")
    st, _, _ = c.api("DELETE", nova + "/servers/" + sid, None, H)
    t.eq(st, 204, "delete 204")
    end = time.time() + 10
    while time.time() < end and c.get(nova + "/servers/" + sid, H)[0] == 200:
        time.sleep(0.1)
    t.eq(c.get(nova + "/servers/" + sid, H)[0], 404, "deleted server then 404")
    t.eq(c.get("/openstack/latest/meta_data.json", base=base)[0], 404, "deleted server leaves metadata")


def test_expiry(t, c, ctx):
    # Long enough that a busy machine still uses the token before it expires; then wait for
    # the expiry the token itself states.
    c.settings(token_ttl=6)
    start = time.monotonic()
    st, h, _ = c.api("POST", "/v3/auth/tokens", password_auth())
    tok = h["X-Subject-Token"]
    nova = ctx["nova"][len(c.url):]
    t.eq(c.get(nova + "/servers", {"X-Auth-Token": tok})[0], 200, "fresh token works")
    time.sleep(max(0.0, 6.5 - (time.monotonic() - start)))
    t.eq(c.get(nova + "/servers", {"X-Auth-Token": tok})[0], 401, "expired token: 401")
    c.settings(token_ttl=3600)


def main():
    t = Tap()
    run_with_server(t, (test_keystone, test_nova, test_expiry), {}, prefix="cn-fake-openstack-",
                    extra_args=["--build-seconds", "2"])
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
