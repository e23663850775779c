#!/usr/bin/env python3
"""An OpenShift upgrade as the cluster version operator drives it: the controller of the new
release starts with the new RELEASE_VERSION and the images ConfigMap names the new images. The
operand Deployment rolls (new image, the release stamped on its pod template), and the
ClusterOperator's versions ("operator") move to the new release only once that rollout has
completed, never before; its relatedObjects name what must-gather collects."""
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import openshift  # noqa: E402
from cntap import Tap, sibling_test, wait_for  # noqa: E402

apply = sibling_test("test-controller-apply.py")
RELEASE = "cloudnode.io/release-version"
MERGE = "application/merge-patch+json"


def co(k):
    return apply.get(k, openshift.CO + "/cloudnode") or {}


def versions(k):
    return {v["name"]: v["version"] for v in (co(k).get("status") or {}).get("versions") or []}


def condition(k, typ):
    for c in (co(k).get("status") or {}).get("conditions") or []:
        if c["type"] == typ:
            return c["status"]
    return None


def template(k):
    dep = apply.get(k, apply.DEPLOY) or {"spec": {"template": {"metadata": {}, "spec": {"containers": [{}]}}}}
    return (dep["spec"]["template"]["metadata"].get("annotations") or {}).get(RELEASE), apply.container(dep).get("image")


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with openshift.Cluster(tmp, "OpenStack") as k:
            apply.setup_cluster(k)
            images = json.loads(apply.get(k, apply.IMAGES)["data"]["images.json"])
            with openshift.controller(t, k, tmp, cloud_provider=None, env={"RELEASE_VERSION": "4.18.3"}) as c:
                t.ok(wait_for(lambda: template(k)[0] == "4.18.3", 30), "the release is stamped on the pod template",
                     c.output()[-2000:])
                time.sleep(1)
                t.eq(versions(k), {}, "no version is reported before the operand has rolled out")
                t.ok(wait_for(lambda: apply.roll_out(k) or versions(k) == {"operator": "4.18.3"}, 30),
                     "once rolled out: versions operator=4.18.3", co(k).get("status"))
                related = {(o["group"], o["resource"], o.get("namespace", ""), o["name"])
                           for o in co(k)["status"].get("relatedObjects") or []}
                t.eq(related, {("", "namespaces", "", "cloudnode"), ("", "namespaces", "", "cloudnode-nodes"),
                               ("config.openshift.io", "clusteroperators", "", "cloudnode"),
                               ("apps", "deployments", "cloudnode", "cloudnode-cloud-controller-manager")},
                     "relatedObjects: the namespaces, the ClusterOperator and the operand Deployment")

            # The upgrade: new images, then the new release's controller.
            new_image = "quay.example.test/cloudnode/cloudnode-initializer@sha256:" + "ab" * 32
            images.update(cloudControllerManager=new_image, cloudNodeManager=new_image)
            k.api("PATCH", apply.IMAGES, {"data": {"images.json": json.dumps(images)}}, MERGE)
            with openshift.controller(t, k, tmp, cloud_provider=None, env={"RELEASE_VERSION": "4.19.0"}):
                t.eq(wait_for(lambda: template(k) == ("4.19.0", new_image) and template(k), 30),
                     ("4.19.0", new_image), "the operand rolls: the new image and release on its pod template")
                t.ok(wait_for(lambda: condition(k, "Progressing") == "True", 30), "Progressing while it rolls out")
                seen = set()
                end = time.monotonic() + 3
                while time.monotonic() < end:
                    seen.add(json.dumps(versions(k)))
                    time.sleep(0.1)
                t.eq(seen, {json.dumps({"operator": "4.18.3"})},
                     "the versions stay at the old release while the rollout has not completed")
                t.ok(wait_for(lambda: apply.roll_out(k) or versions(k) == {"operator": "4.19.0"}, 30),
                     "and move to 4.19.0 once it has", co(k).get("status"))
                t.ok(wait_for(lambda: condition(k, "Progressing") == "False", 30), "Progressing ends")
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
