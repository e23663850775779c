#!/bin/sh
# Build the real helm v3, which renders and lints the Deckhouse module's chart in the tests.
# A test tool only: built once per pinned version into $CN_HELM_CACHE (default
# ~/.cache/cloudnode/helm) from its Go module; a second run finds the binary and does nothing.
# The Go is the one tests/realkube/build.sh finds. Exits 77 (and says why) without Go >= 1.23 or
# when the Go module proxy cannot be reached.
#
#   build.sh            build helm if missing, print its path
#   build.sh --path     print its path when it is built, exit 1 otherwise
set -eu
mode=${1:-}

# The newest helm 3 whose module graph declares go <= 1.23 (Debian 12's golang-1.23); it is on
# k8s.io v0.32, as the real kube-apiserver, so the two share the module cache.
HELM_VERSION=v3.17.4

here=$(dirname "$0")
cache=${CN_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cloudnode/helm}
bin=$cache/helm-$HELM_VERSION/helm

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
[ "$mode" = --path ] && exit 1

go=$(sh "$here/../realkube/build.sh" --go) || exit $?

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$cache"
# One build at a time per cache.
exec 9>"$cache/lock"
flock 9
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

work=$cache/build-$HELM_VERSION
mkdir -p "$work" "${bin%/*}"
printf 'module cloudnode.invalid/helm\n\ngo 1.23.0\n\nrequire helm.sh/helm/v3 %s\n' "$HELM_VERSION" >"$work/go.mod"
printf '//go:build tools\n\npackage helm\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n' >"$work/tools.go"

echo "helm: building helm $HELM_VERSION with $("$go" env GOVERSION)" >&2
# Fetching the modules is the one step that needs the network.
if ! (cd "$work" && "$go" list -deps helm.sh/helm/v3/cmd/helm >/dev/null 2>"$work/fetch.err"); then
	pattern='dial tcp|x509|certificate|no such host|i/o timeout|connection refused|proxyconnect|TLS handshake|network is unreachable'
	if grep -qiE "$pattern" "$work/fetch.err"; then
		echo "helm: the Go module proxy cannot be reached from here: $(grep -m1 -iE "$pattern" "$work/fetch.err")" >&2
		exit 77
	fi
	cat "$work/fetch.err" >&2
	exit 1
fi
newest=$(cd "$work" && "$go" list -m -f '{{.GoVersion}}' all | sort -V | tail -n 1)
case $newest in
1.2[0-3] | 1.2[0-3].* | 1.1[0-9] | 1.1[0-9].* | "") ;;
*)
	echo "helm: $HELM_VERSION needs go $newest, more than Debian 12's 1.23: pin an older release" >&2
	exit 1
	;;
esac
(cd "$work" && "$go" build -trimpath \
	-ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
	-o "$bin.tmp" helm.sh/helm/v3/cmd/helm)
mv "$bin.tmp" "$bin"
echo "$bin"
