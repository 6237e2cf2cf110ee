#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and kube-scheduler from Debian's
# `kubernetes` source package, twice: labelled with the real upstream version and
# with the next patch version, so the end-to-end suite can drive a real upgrade.
# Also installs what the test bed runs besides them (etcd-server, haproxy) and etcd's client
# (etcd-client: etcdctl reads the snapshots selfhost takes).
#
# Usage: BIN=$(scripts/build-kubernetes.sh)   # as root; SELFHOST_E2E_CACHE overrides the cache
# Progress goes to stderr; stdout gets only the bin directory, as the last line.
set -Eeuo pipefail

CACHE=${SELFHOST_E2E_CACHE:-/var/cache/selfhost-e2e}
SRC_LIST=/etc/apt/sources.list.d/selfhost-e2e-src.sources
PACKAGES=(golang-go dpkg-dev etcd-server etcd-client haproxy)
COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler)
export DEBIAN_FRONTEND=noninteractive

# Keep stdout for the result alone; every tool's output goes to stderr.
exec 3>&1 1>&2

log() { printf 'build-kubernetes: %s\n' "$*"; }
STEP="starting" HINT=""
step() { STEP=$1 HINT=${2:-}; log "$STEP"; }
die() { log "error: $*"; exit 1; }
on_err() { log "FAILED (exit $1): $STEP"; [[ -z $HINT ]] || log "what to do: $HINT"; exit "$1"; }
trap 'on_err $?' ERR
need_root() { [[ $EUID -eq 0 ]] || die "$1 needs root; rerun as root (e.g. with sudo)"; }

# --- Machine setup: deb-src entry, package lists, packages -------------------------
need_update=0
if ! apt-get indextargets --no-release-info --format '$(IDENTIFIER) $(RELEASE) $(COMPONENT)' \
    | grep -qx 'Sources bookworm main'; then
  need_root "adding a deb-src entry"
  step "adding deb-src entry for bookworm main as $SRC_LIST" "check that /etc/apt/sources.list.d is writable"
  printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm' \
    'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' >"$SRC_LIST.tmp"
  mv "$SRC_LIST.tmp" "$SRC_LIST"
  need_update=1
fi

src_version() { # highest version of the kubernetes source package apt knows about
  local v best=
  for v in $({ apt-cache showsrc --only-source kubernetes 2>/dev/null || true; } | sed -n 's/^Version: //p'); do
    if [[ -z $best ]] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
  done
  echo "$best"
}
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -qx 'install ok installed' || missing+=("$p")
done
# Installing from stale lists can hit files the mirror no longer has, so refresh first.
if ((need_update == 0)) && { ((${#missing[@]} > 0)) || [[ -z $(src_version) ]]; }; then need_update=1; fi
if ((need_update)); then
  need_root "apt-get update"
  step "apt-get update" "check that http://deb.debian.org/debian is reachable and /etc/apt/sources.list.d is valid"
  apt-get update -q
fi
if ((${#missing[@]} > 0)); then
  need_root "installing packages"
  step "installing ${missing[*]}" "see apt's message above; try 'apt-get install ${missing[*]}' by hand"
  apt-get install -q -y --no-install-recommends "${missing[@]}"
fi

debver=$(src_version)
[[ -n $debver ]] || die "apt knows no source package 'kubernetes'; check the deb-src entry in $SRC_LIST and run apt-get update"
upfull=${debver#*:}
upfull=${upfull%-*}      # e.g. 1.20.5+really1.20.2
base=${upfull##*really}  # the version actually packaged
base=${base%%[+~]*}
[[ $base =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "cannot read an upstream version from '$debver'"
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]} patch=${BASH_REMATCH[3]}
VERSIONS=("v$base" "v$major.$minor.$((patch + 1))")

work=$CACHE/kubernetes-$debver
srcdir=$work/src/kubernetes-$upfull
gopath=$work/gopath
bindir=$work/bin
step "using cache $work" "set SELFHOST_E2E_CACHE to a writable directory"
mkdir -p "$work"
exec 9>"$work/.lock"
flock -n 9 || { log "waiting for another build-kubernetes.sh on $work"; flock 9; }

todo=()
for v in "${VERSIONS[@]}"; do
  for c in "${COMMANDS[@]}"; do [[ -x $bindir/$v/$c ]] || todo+=("$v/$c"); done
done
if ((${#todo[@]} == 0)); then
  log "kubernetes $debver: ${VERSIONS[*]} already built in $bindir; nothing to do"
  echo "$bindir" >&3
  exit 0
fi
log "kubernetes $debver: building ${todo[*]} into $bindir"

# --- Source: fetched and unpacked (Debian patches applied) under a temporary name ----
if [[ ! -d $srcdir ]]; then
  step "fetching source package kubernetes=$debver into $work/src" \
    "check that deb.debian.org is reachable and 'apt-cache showsrc kubernetes' lists $debver (else run apt-get update)"
  rm -rf "$work/src" "$work/src.tmp"
  mkdir -p "$work/src.tmp"
  cd "$work/src.tmp"
  # As root into a root-only directory apt's _apt sandbox cannot write anyway.
  sandbox=(); [[ $EUID -ne 0 ]] || sandbox=(-o APT::Sandbox::User=root)
  apt-get source -q "${sandbox[@]}" "kubernetes=$debver"
  [[ -d kubernetes-$upfull ]]
  cd "$work"
  mv "$work/src.tmp" "$work/src"
fi

# Go 1.19 cannot build this tree with -mod=vendor, so build as upstream did then: in GOPATH
# mode, from a GOPATH whose k8s.io/kubernetes is the source tree, as debian/rules does.
step "setting up GOPATH $gopath" "install golang-go (Go 1.19) and check that $CACHE is writable"
mkdir -p "$gopath/src/k8s.io"
ln -sfn "$srcdir" "$gopath/src/k8s.io/kubernetes"
export PATH=/usr/lib/go/bin:$PATH GOPATH=$gopath GOCACHE=$CACHE/go-build GO111MODULE=off \
  GOFLAGS= GOPROXY=off CGO_ENABLED=0
cd "$gopath/src/k8s.io/kubernetes"
log "using $(go version)"

# --- Generated OpenAPI definitions: not shipped in the tarball, kube-apiserver needs them ---
openapi=pkg/generated/openapi/zz_generated.openapi.go
if [[ ! -f $openapi ]]; then
  step "building openapi-gen from vendor/k8s.io/kube-openapi" "see the Go error above"
  go build -o "$work/tools/openapi-gen" k8s.io/kubernetes/vendor/k8s.io/kube-openapi/cmd/openapi-gen
  step "generating $openapi" "see openapi-gen's error above"
  # Same inputs as build/root/Makefile.generated_files (KUBE target): every directory of
  # the tree (staging seen through vendor/) with a file tagged +k8s:openapi-gen=.
  find . \( -path './_*' -o -path './.*' -o -path ./vendor \) -prune -o -type f -name '*.go' -print |
    sed 's|^\./staging/src/|vendor/|; s|^\./||' |
    grep -v -e '^vendor/k8s\.io/code-generator/' -e '^vendor/k8s\.io/sample-apiserver/' |
    { xargs -r grep -l '^// *+k8s:' || true; } | { xargs -r grep -l '+k8s:openapi-gen=' || true; } |
    xargs -r -n1 dirname | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' >"$work/openapi-inputs"
  [[ -s $work/openapi-inputs ]]
  rm -rf "$work/openapi.tmp"
  "$work/tools/openapi-gen" --logtostderr -i "$(paste -sd, "$work/openapi-inputs")" \
    -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
    -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
    -o "$work/openapi.tmp" -r "$work/openapi-violations.report"
  # Upstream fails on a differing report; here it only means the API lint changed.
  cmp -s "$work/openapi-violations.report" api/api-rules/violation_exceptions.list ||
    log "note: API rule violations differ from api/api-rules/violation_exceptions.list (harmless)"
  mv "$work/openapi.tmp/k8s.io/kubernetes/$openapi" "$openapi"
  rm -rf "$work/openapi.tmp"
fi

# --- Binaries --------------------------------------------------------------------
# Version stamps as hack/lib/version.sh sets them. The commit is the one the tarball was
# exported from; "dirty" because Debian's patches sit on top. The date is the changelog's,
# so rebuilds are reproducible.
commit=$(sed -n 's/^\s*gitCommit\s*= "\([0-9a-f]\{40\}\)".*/\1/p' vendor/k8s.io/component-base/version/base.go)
commit=${commit:-0000000000000000000000000000000000000000}
builddate=$(date -u -d "@$(dpkg-parsechangelog -l debian/changelog -S Timestamp)" +%Y-%m-%dT%H:%M:%SZ)
for v in "${VERSIONS[@]}"; do
  cmds=()
  for t in "${todo[@]}"; do if [[ $t == "$v/"* ]]; then cmds+=("${t#*/}"); fi; done
  ((${#cmds[@]} > 0)) || continue
  ldflags="-s -w -buildid="
  for kv in "gitVersion=$v" "gitMajor=$major" "gitMinor=$minor" "gitCommit=$commit" \
    "gitTreeState=dirty" "buildDate=$builddate"; do
    for pkg in component-base/version client-go/pkg/version; do
      ldflags+=" -X k8s.io/kubernetes/vendor/k8s.io/$pkg.$kv"
    done
  done
  tmp=$bindir/.$v.tmp
  rm -rf "$tmp"
  mkdir -p "$tmp" "$bindir/$v"
  step "building ${cmds[*]} as $v (with a cold Go cache this takes many minutes)" "see the Go error above"
  start=$SECONDS
  go build -tags selinux,notest -ldflags "$ldflags" -o "$tmp/" "${cmds[@]/#/k8s.io/kubernetes/cmd/}"
  for c in "${cmds[@]}"; do
    step "checking $v/$c --version" "the build did not stamp the version; check the -X paths in this script"
    out=$("$tmp/$c" --version 2>&1 || true)
    [[ $out == "Kubernetes $v" ]] || die "$tmp/$c --version printed '$out', expected 'Kubernetes $v'"
  done
  # Only verified binaries get their final names, so a partial build never counts as built.
  for c in "${cmds[@]}"; do mv -f "$tmp/$c" "$bindir/$v/$c"; done
  rmdir "$tmp"
  log "built $v in $((SECONDS - start))s"
done

log "done in ${SECONDS}s; binaries in $bindir/{${VERSIONS[0]},${VERSIONS[1]}}"
echo "$bindir" >&3
