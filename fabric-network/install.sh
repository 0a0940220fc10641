#!/usr/bin/env bash
# Install Hyperledger Fabric v3.1.5 and Fabric CA v1.5.21, cached outside the repository
# (docs/fabric.md, "Install"):
#
#   install.sh [core] [tools] [ca]      (no argument: core)
#
#   FABRIC_HOME (default $CONSORTIA_CACHE/fabric, CONSORTIA_CACHE default ~/.cache/consortia)
#     bin/{peer,orderer,configtxgen,osnadmin}                 core   (+ config/{core,orderer}.yaml)
#     bin/{configtxlator,cryptogen,discover,ledgerutil}       tools  (channel configuration updates)
#     bin/{fabric-ca-server,fabric-ca-client}                 ca     (each organisation's own CA)
#     gopath/, gocache/            (only for the `go install` route)
#
# Routes, per component, in this order:
#   1. files already in FABRIC_HOME: kept when the component's version command prints its version
#      and every file is present (re-checked on every run, there is no stamp file to trust); files
#      that came from an archive must still have the archive's sha256;
#   2. the component's archive (built as docs/fabric.md describes): the file named by
#      CONSORTIA_FABRIC_ARCHIVE / CONSORTIA_FABRIC_TOOLS_ARCHIVE / CONSORTIA_FABRIC_CA_ARCHIVE, else
#      shared/fabric/<archive name> beside the checkout; the archive's sha256 and every file's sha256
#      are checked before anything is installed;
#   3. `go install` at the pinned commit / tag (needs a Go module proxy that serves the module;
#      Fabric CA also needs cgo and a C compiler, for its SQLite store).
# Exit 0 when FABRIC_HOME holds every requested component, else non-zero with one line saying why
# (2 no archive and no go, 3 go install failed, 4 a named archive does not exist, 5 a checksum does
# not match, 6 installed binaries do not run or report another version).
set -euo pipefail

REV=86c1172bec37e6590c6b1ae6f847833df48d65fc   # Fabric tag v3.1.5; never @latest (resolves to Fabric 1.4)
CA_VERSION=v1.5.21                             # Fabric CA tag (commit f355456a72323ae2a4a250fdecb8744a8c041150)
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE="${CONSORTIA_CACHE:-$HOME/.cache/consortia}"
FABRIC_HOME="${FABRIC_HOME:-$CACHE/fabric}"
say() { echo "[fabric install] $*" >&2; }

# ---- what each component is -------------------------------------------------------------------
# component: archive name | archive sha256 | variable naming the archive | version command | version regex
core_archive=fabric-3.1.5-linux-amd64.tar.xz
core_sha=3fb604d4ec7360042dcd0a377863fc1ddab12c34cc8ef4a92406287fc21f88e0
core_var=CONSORTIA_FABRIC_ARCHIVE
core_version=("bin/peer" "version")
core_expect="Version: v?3\.1\.5$"
core_files="\
5995eb54fe77f579d0dc34881918c015f062330a34b3e23b9a5e753094dd439d  bin/configtxgen
7a8657911d56cd5c11372ebb0ccfd240f485f06d9a81749864b8e4e813cabe28  bin/orderer
c241394b1df8fbee52e14b0102ce55dbffc7c71b34347ed4e032a3222d50fadd  bin/osnadmin
2c0b7c37997510007862dc5bc7262ba7ae30ff991828d4457e6da736ed39f2d0  bin/peer
ec6b65f5ac155c1f977a66b64772488977ca03bb89cf6e7cb5bd6e3777144107  config/core.yaml
b8b78b0770f43b1653cd7a294bc657aaa1e94857919e4a0048221f372cff82a4  config/orderer.yaml"

tools_archive=fabric-tools-3.1.5-linux-amd64.tar.xz
tools_sha=d1bc7d06a95b6defdbc3fa5110718396199705becae5ab6409d5a389592ae1d5
tools_var=CONSORTIA_FABRIC_TOOLS_ARCHIVE
tools_version=("bin/configtxlator" "version")
tools_expect="Version: v?3\.1\.5$"
tools_files="\
b715308feb750d5a0e31a71c46e0e41b8d9fa8c3e67c8c276fe3c36a1990be91  bin/configtxlator
13931d93da792c976da453c72317b302b8c60d7d848955178cd4f6c4223a848c  bin/cryptogen
528f6cdf1c16aebe877c230299ec8eb5db3e71ea7bd3f30530f2cbbbcbfb400c  bin/discover
4187deb84a8d5b4a28e7c51e4c5239df9af90e94b58a2c022e4770fa150d79d3  bin/ledgerutil"

ca_archive=fabric-ca-1.5.21-linux-amd64.tar.xz
ca_sha=567e093d3c6673c4a42b2751205bbafd3c8a09362014d8c46e8c0bc7cb126e0d
ca_var=CONSORTIA_FABRIC_CA_ARCHIVE
ca_version=("bin/fabric-ca-server" "version")
ca_expect="Version: v?1\.5\.21$"
ca_files="\
da9be7cb364eb2b9a91797e563e1f520ec71aaadeefd10c1f16beaf80302a0bd  bin/fabric-ca-client
4f215840a64e4b0f4ab0bdb01dc0665733a546ffd89c1faeb80e0d56f34126b7  bin/fabric-ca-server"

field() { local v="${1}_$2"; printf '%s' "${!v}"; }              # field core archive -> $core_archive
files_of() { field "$1" files | awk '{print $2}'; }
sha_of() { field "$1" files | awk -v f="$2" '$2==f{print $1}'; }

installed_ok() {   # every file present; archive files unchanged; the version command prints the version
  local c=$1 f first
  for f in $(files_of "$c"); do [[ -f "$FABRIC_HOME/$f" ]] || return 1; done
  first=$(files_of "$c" | grep '^bin/' | head -1)
  if [[ "$(sha256sum "$FABRIC_HOME/$first" | cut -d" " -f1)" == "$(sha_of "$c" "$first")" ]]; then
    # installed from the archive: every file must still be the archive's
    (cd "$FABRIC_HOME" && field "$c" files | sha256sum --quiet -c - >/dev/null 2>&1) || return 1
  fi
  local -n cmd="${c}_version"
  "$FABRIC_HOME/${cmd[0]}" "${cmd[@]:1}" 2>/dev/null | grep -Eq "$(field "$c" expect)"
}

from_archive() {   # 0 installed; 1 no archive found; exits on a bad archive
  local c=$1 var archive="" name got stage f
  var=$(field "$c" var)
  name=$(field "$c" archive)
  if [[ -n "${!var:-}" ]]; then
    [[ -f "${!var}" ]] || { echo "install.sh: $var=${!var} does not exist" >&2; exit 4; }
    archive=${!var}
  elif [[ -f "$HERE/../../shared/fabric/$name" ]]; then
    archive=$(cd "$HERE/../../shared/fabric" && pwd)/$name
  fi
  [[ -n "$archive" ]] || return 1
  say "installing $c from $archive"
  got=$(sha256sum "$archive" | cut -d" " -f1)
  if [[ "$got" != "$(field "$c" sha)" ]]; then
    echo "install.sh: $archive has sha256 $got, expected $(field "$c" sha): not installed" >&2
    exit 5
  fi
  stage=$(mktemp -d "${TMPDIR:-/tmp}/fabric-stage.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$stage'" EXIT
  tar -xJf "$archive" -C "$stage"
  if ! (cd "$stage" && field "$c" files | sha256sum --quiet -c - >&2); then
    echo "install.sh: a file of $archive does not match its sha256: not installed" >&2
    exit 5
  fi
  mkdir -p "$FABRIC_HOME/bin" "$FABRIC_HOME/config"
  for f in $(files_of "$c"); do
    case $f in
      bin/*) install -m 0755 "$stage/$f" "$FABRIC_HOME/$f" ;;
      *) install -m 0644 "$stage/$f" "$FABRIC_HOME/$f" ;;
    esac
  done
  rm -rf "$stage"
  trap - EXIT
  if installed_ok "$c"; then
    echo "fabric $c installed in $FABRIC_HOME (from the archive)"
    return 0
  fi
  echo "install.sh: the binaries of $archive do not run here (${c}: version command does not print the version)" >&2
  exit 6
}

go_env() {
  export GOPATH="${GOPATH_OVERRIDE:-$FABRIC_HOME/gopath}"
  export GOMODCACHE="$GOPATH/pkg/mod"
  export GOCACHE="${GOCACHE_OVERRIDE:-$FABRIC_HOME/gocache}"
  export GOFLAGS="-trimpath -mod=mod" GOTOOLCHAIN=auto
  export GOMAXPROCS="${FABRIC_BUILD_PROCS:-2}"   # polite on a shared 2-core machine
}

from_go() {
  local c=$1 name
  name=$(field "$c" archive)
  if ! command -v go >/dev/null; then
    echo "install.sh: no Fabric $c in $FABRIC_HOME, no archive (set $(field "$c" var) to a $name) and no go (>= 1.26.4) to build it" >&2
    exit 2
  fi
  mkdir -p "$FABRIC_HOME/bin" "$FABRIC_HOME/config"
  go_env
  local LD="-X github.com/hyperledger/fabric/common/metadata.Version=3.1.5 -X github.com/hyperledger/fabric/common/metadata.CommitSHA=${REV:0:7}"
  local mod=github.com/hyperledger/fabric pkgs=() cgo=0 at=$REV
  case $c in
    core) pkgs=(cmd/peer cmd/orderer cmd/configtxgen cmd/osnadmin) ;;
    tools) pkgs=(cmd/configtxlator cmd/cryptogen cmd/discover cmd/ledgerutil) ;;
    ca)
      mod=github.com/hyperledger/fabric-ca at=$CA_VERSION cgo=1   # the SQLite store needs cgo
      LD="-X github.com/hyperledger/fabric-ca/lib/metadata.Version=${CA_VERSION#v}"
      pkgs=(cmd/fabric-ca-server cmd/fabric-ca-client) ;;
  esac
  say "building $c at $mod@$at (this takes several minutes the first time)"
  local args=() p
  for p in "${pkgs[@]}"; do args+=("$mod/$p@$at"); done
  if ! CGO_ENABLED=$cgo GOBIN="$FABRIC_HOME/bin" nice -n 10 go install -p 1 -ldflags "$LD" "${args[@]}"; then
    echo "install.sh: 'go install $mod/...@$at' failed: the Go module proxy must serve $mod at this version$([[ $cgo == 1 ]] && echo ' and cgo needs a C compiler'); else set $(field "$c" var) to a $name (docs/fabric.md)" >&2
    exit 3
  fi
  if [[ $c == core ]]; then
    local moddir
    moddir=$(go mod download -json "$mod@$REV" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [[ -d "$moddir/sampleconfig" ]] || { echo "install.sh: sampleconfig not found under '$moddir'" >&2; exit 1; }
    cp "$moddir/sampleconfig/core.yaml" "$moddir/sampleconfig/orderer.yaml" "$FABRIC_HOME/config/"
    chmod u+w "$FABRIC_HOME/config/"*.yaml
  fi
  installed_ok "$c" || { echo "install.sh: the built $c binaries do not report their version" >&2; exit 6; }
  echo "fabric $c installed in $FABRIC_HOME"
}

components=("$@")
[[ ${#components[@]} -gt 0 ]] || components=(core)
for c in "${components[@]}"; do
  case $c in
    core | tools | ca) ;;
    *) echo "install.sh: unknown component '$c' (core, tools, ca)" >&2; exit 1 ;;
  esac
done
for c in "${components[@]}"; do
  if installed_ok "$c"; then
    echo "fabric $c binaries found in $FABRIC_HOME"
    continue
  fi
  from_archive "$c" || from_go "$c"
done
