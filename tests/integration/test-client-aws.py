#!/usr/bin/env python3
"""Amazon's own CLI, `aws` (Debian's awscli, on botocore), against the EC2 fake with
--endpoint-url, for what a user does with it every day: run an instance with tags, list and
describe (by id, by filter, paged), stop and start it (and wait for it), tag and untag it, and
terminate it. Requests are signed by botocore with Signature Version 4 and checked by the fake:
a wrong secret is refused. Every step is also checked in the fake's inventory, so a client that
only prints does not pass. Skipped when aws is not installed."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cliclient import Cli  # noqa: E402
from cntap import Tap  # noqa: E402
from fakecloud import AWS_ACCESS_KEY, scratch_server  # noqa: E402


# Debian's awscli; a user's own aws on PATH (a pyenv shim, a pip install) is not what is judged.
AWS = "/usr/bin/aws" if os.access("/usr/bin/aws", os.X_OK) else shutil.which("aws")


def aws(t, url, home, secret=None):
    env = dict(os.environ, HOME=home, AWS_ACCESS_KEY_ID=AWS_ACCESS_KEY["id"],
               AWS_SECRET_ACCESS_KEY=secret or AWS_ACCESS_KEY["secret"], AWS_DEFAULT_REGION="eu-west-1",
               AWS_CONFIG_FILE=os.path.join(home, "config"), AWS_PAGER="", AWS_EC2_METADATA_DISABLED="true")
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE"):
        env.pop(k, None)
    return Cli(t, [AWS, "--endpoint-url", url + "/ec2", "ec2"], env, ["--output", "json"], timeout=60)


def instances(c, **match):
    return [i for i in c.instances() if i["platform"] == "aws" and all(i.get(k) == v for k, v in match.items())]


def lifecycle(t, a, c, home):
    run = a.json("run-instances with tags", "run-instances", "--image-id", "ami-0abcdef1234567890",
                 "--instance-type", "t3.micro", "--count", "6", "--placement", "AvailabilityZone=eu-west-1b",
                 "--tag-specifications", "ResourceType=instance,Tags=[{Key=Name,Value=web},{Key=team,Value=a}]") or {}
    ids = [i["InstanceId"] for i in run.get("Instances", [])]
    t.ok(len(ids) == 6, "six instances started", run)
    inv = instances(c, region="eu-west-1")
    t.eq(sorted(i["id"] for i in inv), sorted(ids), "the fake holds all six, in eu-west-1")
    t.ok(all(i["zone"] == "eu-west-1b" and i["type"] == "t3.micro" and i["labels"] == {"Name": "web", "team": "a"}
             for i in inv), "zone, type and tags as asked", inv)

    d = a.json("describe-instances by id", "describe-instances", "--instance-ids", ids[0]) or {}
    got = [i for r in d.get("Reservations", []) for i in r.get("Instances", [])]
    t.eq([(i["InstanceId"], i["State"]["Name"], i["Placement"]["AvailabilityZone"]) for i in got],
         [(ids[0], "running", "eu-west-1b")], "described by id: running in eu-west-1b")
    if got:
        t.ok(got[0]["PrivateDnsName"].endswith(".eu-west-1.compute.internal") and got[0]["PrivateIpAddress"],
             "private DNS name and address", got[0])
        t.eq(got[0]["NetworkInterfaces"][0]["Attachment"]["DeviceIndex"], 0, "the primary interface is device 0")
    d = a.json("describe-instances by tag filter", "describe-instances", "--filters", "Name=tag:team,Values=a",
               "Name=instance-state-name,Values=running") or {}
    t.eq(sorted(i["InstanceId"] for r in d.get("Reservations", []) for i in r["Instances"]), sorted(ids),
         "a tag filter finds them all")
    before = len(c.requests())
    d = a.json("describe-instances paged", "describe-instances", "--page-size", "5") or {}
    t.eq(sorted(i["InstanceId"] for r in d.get("Reservations", []) for i in r["Instances"]), sorted(ids),
         "paging (MaxResults/NextToken) lists each once")
    t.eq(len([r for r in c.requests()[before:] if r.get("service") == "api"]), 2, "in two pages of at most five")

    a.ok("stop-instances", "stop-instances", "--instance-ids", ids[0])
    a.ok("wait instance-stopped", "wait", "instance-stopped", "--instance-ids", ids[0])
    t.eq([i["status"] for i in instances(c) if i["id"] == ids[0]], ["stopped"], "stopped in the inventory")
    a.ok("start-instances", "start-instances", "--instance-ids", ids[0])
    a.ok("wait instance-running", "wait", "instance-running", "--instance-ids", ids[0])
    t.eq([i["status"] for i in instances(c) if i["id"] == ids[0]], ["running"], "running again")

    a.ok("create-tags", "create-tags", "--resources", ids[0], "--tags", "Key=env,Value=prod")
    a.ok("delete-tags", "delete-tags", "--resources", ids[0], "--tags", "Key=team")
    t.eq([i["labels"] for i in instances(c) if i["id"] == ids[0]], [{"Name": "web", "env": "prod"}],
         "tags changed in the inventory")
    tags = a.json("describe-tags", "describe-tags", "--filters", "Name=resource-id,Values=" + ids[0]) or {}
    t.eq(sorted((x["Key"], x["Value"]) for x in tags.get("Tags", [])), [("Name", "web"), ("env", "prod")],
         "describe-tags lists them")

    a.ok("terminate-instances", "terminate-instances", "--instance-ids", *ids)
    a.ok("wait instance-terminated", "wait", "instance-terminated", "--instance-ids", *ids)
    rc, out = a.run("start-instances", "--instance-ids", ids[0])
    t.ok(rc != 0 and "IncorrectInstanceState" in out, "a terminated instance cannot be started", out)

    rc, out = a.run("describe-instances", "--instance-ids", "i-0123456789abcdef0")
    t.ok(rc != 0 and "InvalidInstanceID.NotFound" in out, "an unknown id is InvalidInstanceID.NotFound", out)
    rc, out = a.run("describe-instances", "--instance-ids", "bogus")
    t.ok(rc != 0 and "InvalidInstanceID.Malformed" in out, "a malformed id is InvalidInstanceID.Malformed", out)
    bad = aws(t, c.url, home, secret="not-the-secret")
    rc, out = bad.run("describe-instances")
    t.ok(rc != 0 and "SignatureDoesNotMatch" in out, "a request signed with the wrong secret is refused", out)
    c.throttle("aws", service="api")
    rc, out = a.run("describe-instances", "--cli-read-timeout", "5")
    t.ok(rc != 0 and "RequestLimitExceeded" in out, "throttling answers RequestLimitExceeded", out[-400:])
    c.clear_faults()


def main():
    t = Tap()
    if not AWS:
        t.skip_all("aws (Debian package awscli) is not installed")
    with tempfile.TemporaryDirectory(prefix="cn-aws-") as home, \
            scratch_server(prefix="cn-aws-cloud-") as (c, _):
        # botocore retries throttling with backoff: a few attempts keep the storm short.
        with open(os.path.join(home, "config"), "w") as f:
            f.write("[default]\nmax_attempts = 2\nretry_mode = standard\n")
        a = aws(t, c.url, home)
        t.run(lifecycle, a, c, home)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
