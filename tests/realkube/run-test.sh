#!/bin/sh
# Test driver of the .real tests: tests/realkube/NAME.real runs tests/integration/NAME.py against
# the real kube-apiserver (CN_KUBE_SERVER=real; tests/pylib/realkube.py).
set -eu
name=$(basename "$1" .real)
CN_KUBE_SERVER=real
export CN_KUBE_SERVER
exec "${PYTHON:-python3}" "${CN_TOP_SRCDIR:-.}/tests/integration/$name.py"
