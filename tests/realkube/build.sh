#!/bin/sh
# Build the real kube-apiserver and etcd the tests use as a judge of the fake API server, and
# kube-controller-manager's garbage collector (garbage-collector/main.go) for the tests that need one.
# Test tools only: cloudnode itself is C. Each program is built once per pinned version into
# $CN_REAL_KUBE_CACHE (default ~/.cache/cloudnode/real-kube); a second run finds the binaries and
# does nothing. Exits 77 (and says why) when no Go >= 1.23 is on PATH or in /usr/local/go or
# /usr/lib/go-1.23.
#
#   build.sh            build what is missing, print the directory holding kube-apiserver and etcd
#   build.sh --bindir   print that directory when both binaries are there, exit 1 otherwise
#   build.sh --go       print the Go it would build with, exit 77 when there is none
#   build.sh --unreachable  print why the module proxy could not be used, if that stopped the build
#   build.sh --fetch DIR FILE PACKAGE...  fetch the modules PACKAGEs need in module DIR, with this
#                       Go (tests/realcapi/build.sh uses it): exit 77 when the module proxy cannot
#                       be used, saying why into FILE
set -eu
mode=${1:-}

# Pinned releases. The newest patch releases whose whole module graph declares go <= 1.23,
# so Debian 12's golang-1.23 (bookworm-backports) builds them.
KUBE_VERSION=v1.32.13
KUBE_STAGING_VERSION=v0.32.13
ETCD_VERSION=v3.5.22

cache=${CN_REAL_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cloudnode/real-kube}
# "-2": kube-apiserver reports its release (/version: the ldflags below); a build of the first
# form reported v0.0.0-master, which clients that check the server's version (clusterctl) refuse.
bindir=$cache/kube-$KUBE_VERSION-etcd-$ETCD_VERSION-2/bin

if [ "$mode" = --bindir ]; then
	[ -x "$bindir/kube-apiserver" ] && [ -x "$bindir/etcd" ] || exit 1
	echo "$bindir"
	exit 0
fi
# Why the last build could not fetch the modules (the module proxy unreachable or not trusted),
# if that is why the binaries are missing; exit 1 when it is not.
if [ "$mode" = --unreachable ]; then
	[ -s "$cache/unreachable" ] && cat "$cache/unreachable" && exit 0
	exit 1
fi
if [ "$mode" != --go ] && [ "$mode" != --fetch ] && [ -x "$bindir/kube-apiserver" ] && [ -x "$bindir/etcd" ] &&
	[ -x "$bindir/garbage-collector" ]; then
	echo "$bindir"
	exit 0
fi

# A Go of at least 1.23, without fetching another toolchain.
go=""
for g in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go /usr/lib/go-1.23/bin/go; do
	[ -n "$g" ] && [ -x "$g" ] || continue
	v=$(GOTOOLCHAIN=local "$g" env GOVERSION 2>/dev/null | sed -n 's/^go\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
	major=${v% *} minor=${v#* }
	if [ -n "$v" ] && { [ "$major" -gt 1 ] || [ "$minor" -ge 23 ]; }; then go=$g; break; fi
done
if [ -z "$go" ]; then
	echo "real-kube: no Go >= 1.23 found (go on PATH, /usr/local/go, /usr/lib/go-1.23): not building kube-apiserver and etcd" >&2
	exit 77
fi
if [ "$mode" = --go ]; then
	echo "$go"
	exit 0
fi

# The local Go, unless a caller names a pinned toolchain (CN_GO_TOOLCHAIN, e.g. go1.24.13) that
# Go fetches from the module proxy as the module golang.org/toolchain.
export GOTOOLCHAIN="${CN_GO_TOOLCHAIN:-local}" GOFLAGS=-mod=mod CGO_ENABLED=0

# Fetching the modules is the one step that needs the network: when the module proxy cannot be
# reached or is not trusted, the program cannot be built here (exit 77, the tests skip and say
# why, which is also written to the file named); any other failure is an error.
fetch() { # dir unreachable-file package...
	d=$1 unreachable=$2
	shift 2
	net='dial tcp|x509|certificate|no such host|i/o timeout|connection refused|proxyconnect|TLS handshake|network is unreachable'
	if ! (cd "$d" && "$go" list -deps "$@" >/dev/null 2>"$d/fetch.err"); then
		if grep -qiE "$net" "$d/fetch.err"; then
			{ echo "the Go module proxy cannot be reached from here:"; grep -m1 -iE "$net" "$d/fetch.err"; } >"$unreachable"
			cat "$unreachable" >&2
			exit 77
		fi
		cat "$d/fetch.err" >&2
		exit 1
	fi
	rm -f "$unreachable"
}
if [ "$mode" = --fetch ]; then
	shift
	fetch "$@"
	exit 0
fi

mkdir -p "$cache"
# One build at a time per cache (make check and make real-kube may start together).
exec 9>"$cache/lock"
flock 9
if [ -x "$bindir/kube-apiserver" ] && [ -x "$bindir/etcd" ] && [ -x "$bindir/garbage-collector" ]; then
	echo "$bindir"
	exit 0
fi

work=$cache/build-$KUBE_VERSION-$ETCD_VERSION
mkdir -p "$work/kube" "$work/etcd" "$bindir"

# k8s.io/kubernetes points its staging modules at ./staging with replace directives, which
# a dependant does not inherit: a throwaway module requires it and replaces every staging
# module by its published release of the same minor version.
cat >"$work/kube/go.mod" <<MOD
module cloudnode.invalid/realkube

go 1.23.0

require k8s.io/kubernetes $KUBE_VERSION

replace (
$(for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
	cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
	cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms \
	kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
	mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller; do
	printf '\tk8s.io/%s => k8s.io/%s %s\n' "$m" "$m" "$KUBE_STAGING_VERSION"
done)
)
MOD
printf '//go:build tools\n\npackage realkube\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' >"$work/kube/tools.go"

# etcd's server module, too, replaces its siblings with paths.
cat >"$work/etcd/go.mod" <<MOD
module cloudnode.invalid/realetcd

go 1.23.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
$(for m in api/v3 client/pkg/v3 client/v3 pkg/v3 raft/v3; do
	printf '\tgo.etcd.io/etcd/%s => go.etcd.io/etcd/%s %s\n' "$m" "$m" "$ETCD_VERSION"
done)
	go.etcd.io/etcd/client/v2 => go.etcd.io/etcd/client/v2 v2.305.${ETCD_VERSION#v3.5.}
)
MOD
printf '//go:build tools\n\npackage realetcd\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$work/etcd/tools.go"

# Each program is built only when missing. The graph of modules the build selected must not
# need a Go newer than 1.23 (Debian 12's): the newest go directive in it is checked.
build() { # dir package output [ldflags]
	[ -x "$bindir/$3" ] && return 0
	echo "real-kube: building $3 ($2) with $("$go" env GOVERSION)" >&2
	fetch "$1" "$cache/unreachable" "$2"
	(cd "$1" && "$go" build -trimpath -ldflags="-s -w ${4:-}" -o "$bindir/$3.tmp" "$2")
	newest=$(cd "$1" && "$go" list -m -f '{{.GoVersion}}' all | sort -V | tail -n 1)
	case $newest in
	1.2[0-3] | 1.2[0-3].* | 1.1[0-9] | 1.1[0-9].* | "") ;;
	*)
		echo "real-kube: $2 needs go $newest, more than Debian 12's 1.23: pin an older release" >&2
		rm -f "$bindir/$3.tmp"
		exit 1
		;;
	esac
	mv "$bindir/$3.tmp" "$bindir/$3"
}
build "$work/etcd" go.etcd.io/etcd/server/v3 etcd
v=k8s.io/component-base/version
minor=${KUBE_VERSION#v1.}
build "$work/kube" k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "-X $v.gitVersion=$KUBE_VERSION \
-X $v.gitMajor=1 -X $v.gitMinor=${minor%%.*} -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
# The garbage collector alone, in the same module (its build reuses kube-apiserver's): the module
# proxy does not serve every module the rest of kube-controller-manager needs.
mkdir -p "$work/kube/garbage-collector"
cp "$(dirname "$0")/garbage-collector/main.go" "$work/kube/garbage-collector/main.go"
build "$work/kube" ./garbage-collector garbage-collector
echo "$bindir"
