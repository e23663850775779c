#!/bin/sh
# Build the real Cluster API programs the tests drive cloudnode's infrastructure provider with:
# the core manager, the kubeadm bootstrap and control-plane managers and clusterctl, all from
# sigs.k8s.io/cluster-api at one pinned release. Test tools only: cloudnode itself is C, and no
# Cluster API code is kept in this repository. Each program is built once per pinned version into
# $CN_REAL_CAPI_CACHE (default ~/.cache/cloudnode/real-capi); a second run finds the binaries and
# does nothing. The Go is the one tests/realkube/build.sh finds; where it is older than 1.24 (Debian
# 12's golang-1.23), it runs the pinned toolchain $GO_TOOLCHAIN, which Go fetches from the module
# proxy. Exits 77 (and says why) without a Go, or when the Go module proxy cannot be reached.
#
#   build.sh            build what is missing, print the directory holding the four programs
#   build.sh --bindir   print that directory when all four are there, exit 1 otherwise
#   build.sh --src      print the module's source directory (config/, for the release manifests)
#   build.sh --go-check exit 77 (saying why) when there is no Go to build with
#   build.sh --unreachable  print why the module proxy could not be used, if that stopped the build
#
# The release: v1.11 is the first Cluster API whose core types are served as v1beta2 (the contract
# cloudnode's controller speaks: it watches cluster.x-k8s.io/v1beta2 Clusters and Machines); v1.10,
# the last built by Go 1.23, serves only v1beta1. v1.11.7 is its newest patch release the module
# proxy serves; its module graph declares go 1.24 and k8s.io v0.33.
set -eu
mode=${1:-}

CAPI_VERSION=v1.11.7
GO_MINOR_MIN=24
GO_TOOLCHAIN=go1.24.13

cache=${CN_REAL_CAPI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cloudnode/real-capi}
bindir=$cache/cluster-api-$CAPI_VERSION/bin
progs="cluster-api-manager kubeadm-bootstrap-manager kubeadm-control-plane-manager clusterctl"
here=$(cd "$(dirname "$0")" && pwd)

have_all() {
	for p in $progs; do [ -x "$bindir/$p" ] || return 1; done
	[ -s "$cache/cluster-api-$CAPI_VERSION/src" ]
}
case $mode in
--bindir)
	have_all || exit 1
	echo "$bindir"
	exit 0
	;;
--src)
	have_all || exit 1
	cat "$cache/cluster-api-$CAPI_VERSION/src"
	exit 0
	;;
--unreachable)
	[ -s "$cache/unreachable" ] && cat "$cache/unreachable" && exit 0
	exit 1
	;;
esac
if have_all && [ "$mode" != --go-check ]; then
	echo "$bindir"
	exit 0
fi

go=$("$here/../realkube/build.sh" --go) || {
	echo "real-capi: no Go >= 1.$GO_MINOR_MIN found: not building Cluster API $CAPI_VERSION" >&2
	exit 77
}
minor=$(GOTOOLCHAIN=local "$go" env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
toolchain=local
if [ -z "$minor" ] || [ "$minor" -lt "$GO_MINOR_MIN" ]; then
	# Go >= 1.21 runs another toolchain named in GOTOOLCHAIN, fetched as a module.
	toolchain=$GO_TOOLCHAIN
fi
[ "$mode" = --go-check ] && exit 0

export CN_GO_TOOLCHAIN=$toolchain GOTOOLCHAIN=$toolchain GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$cache"
# One build at a time per cache (make check and make real-capi may start together).
exec 9>"$cache/lock"
flock 9
if have_all; then
	echo "$bindir"
	exit 0
fi

work=$cache/build-$CAPI_VERSION
mkdir -p "$work" "$bindir"
# A throwaway module that requires the release as it is (its own go.mod selects every
# dependency; it has no replace directives); the four programs are main packages in it.
cat >"$work/go.mod" <<MOD
module cloudnode.invalid/realcapi

go 1.$GO_MINOR_MIN.0

require sigs.k8s.io/cluster-api $CAPI_VERSION
MOD
cat >"$work/tools.go" <<'GO'
//go:build tools

package realcapi

import (
	_ "sigs.k8s.io/cluster-api"
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
)
GO

pkgs="sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/bootstrap/kubeadm sigs.k8s.io/cluster-api/controlplane/kubeadm sigs.k8s.io/cluster-api/cmd/clusterctl"
echo "real-capi: fetching Cluster API $CAPI_VERSION (Go toolchain: $toolchain)" >&2
# Fetching the modules is the one step that needs the network (exit 77 when the proxy cannot
# be reached or is not trusted: the tests skip and say why); any other failure is an error.
"$here/../realkube/build.sh" --fetch "$work" "$cache/unreachable" $pkgs
# The newest go directive of the module graph must not be newer than the Go this is pinned for.
newest=$(cd "$work" && "$go" list -m -f '{{.GoVersion}}' all | sort -V | tail -n 1)
if [ -n "$newest" ] && [ "$(printf '%s\n1.%s.999\n' "$newest" "$GO_MINOR_MIN" | sort -V | tail -n 1)" != "1.$GO_MINOR_MIN.999" ]; then
	echo "real-capi: Cluster API $CAPI_VERSION's module graph needs go $newest, more than 1.$GO_MINOR_MIN" >&2
	exit 1
fi

v=sigs.k8s.io/cluster-api/version
ldflags="-s -w -X $v.gitVersion=$CAPI_VERSION -X $v.gitMajor=1 -X $v.gitMinor=11 -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
set -- cluster-api-manager sigs.k8s.io/cluster-api \
	kubeadm-bootstrap-manager sigs.k8s.io/cluster-api/bootstrap/kubeadm \
	kubeadm-control-plane-manager sigs.k8s.io/cluster-api/controlplane/kubeadm \
	clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl
while [ $# -gt 0 ]; do
	if [ ! -x "$bindir/$1" ]; then
		echo "real-capi: building $1 ($2)" >&2
		(cd "$work" && "$go" build -trimpath -ldflags="$ldflags" -o "$bindir/$1.tmp" "$2")
		mv "$bindir/$1.tmp" "$bindir/$1"
	fi
	shift 2
done
# The module's source (read-only in the module cache): config/ holds the kustomizations the
# release's core-, bootstrap- and control-plane-components.yaml are rendered from.
(cd "$work" && "$go" list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api) >"$cache/cluster-api-$CAPI_VERSION/src"
echo "$bindir"
