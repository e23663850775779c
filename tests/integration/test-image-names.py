#!/usr/bin/env python3
"""The images the manifests name are exactly those `make images` builds (CN_IMAGES, from
packaging/images.am: repository, names and the version of configure.ac): image-references, the
default images.json, every container of the shipped Deployments and the bootstrap pod layout."""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import yaml  # noqa: E402
from cntap import Tap, src  # noqa: E402


def name_of(ref):
    return ref.rsplit("/", 1)[-1].split(":", 1)[0]


def main():
    t = Tap()
    built = os.environ.get("CN_IMAGES", "").split()
    if not built:
        t.skip_all("CN_IMAGES not set (run through make check)")
    by_name = {name_of(r): r for r in built}

    with open(src("manifests", "image-references")) as f:
        refs = yaml.safe_load(f)
    listed = {tag["name"]: tag["from"]["name"] for tag in refs["spec"]["tags"]}
    t.eq(listed, by_name, "image-references lists exactly the images make images builds")
    t.ok(all(tag["from"]["kind"] == "DockerImage" for tag in refs["spec"]["tags"]),
         "image-references tags are DockerImage references")

    with open(src("manifests", "controller", "images-configmap.yaml")) as f:
        images = json.loads(yaml.safe_load(f)["data"]["images.json"])
    t.eq(sorted(images), ["cloudControllerManager", "cloudNodeManager"], "images.json keys")
    t.ok(all(v == by_name["cloudnode-initializer"] for v in images.values()),
         "images.json maps both keys to the built initializer image", images)

    used = {}
    for path in sorted(glob.glob(src("manifests", "**", "*.yaml"), recursive=True)):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not isinstance(doc, dict) or doc.get("kind") not in ("Deployment", "Pod"):
                    continue
                spec = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
                for c in spec.get("containers", []) + spec.get("initContainers", []):
                    if "image" in c:
                        used["%s %s" % (os.path.relpath(path, src()), c["name"])] = c["image"]
    t.ok(len(used) >= 3, "the operand and controller Deployments and the bootstrap pod name images", used)
    for where, image in sorted(used.items()):
        t.ok(image in built, "%s uses a built image" % where, "%s not in %s" % (image, built))
        # The command of each container is the program of its image.
        t.ok(name_of(image) in ("cloudnode-initializer", "cloudnode-controller"),
             "%s image is one of the programs" % where, image)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
