#!/usr/bin/env bash
# Install Hyperledger Fabric v3.1.5 (peer, orderer, configtxgen, osnadmin + core/orderer.yaml),
# cached outside the repository (docs/fabric.md, "Install"):
#
#   FABRIC_HOME (default $CONSORTIA_CACHE/fabric, CONSORTIA_CACHE default ~/.cache/consortia)
#     bin/{peer,orderer,configtxgen,osnadmin}
#     config/{core,orderer}.yaml
#     gopath/, gocache/            (only for the `go install` route)
#
# Routes, in this order:
#   1. binaries already in FABRIC_HOME: kept when `peer version` says 3.1.5 and every file is
#      present (re-checked on every run, there is no stamp file to trust);
#   2. a Fabric 3.1.5 archive (fabric-3.1.5-linux-amd64.tar.xz, built as docs/fabric.md
#      describes): CONSORTIA_FABRIC_ARCHIVE, else shared/fabric/ beside the checkout; the archive's
#      sha256 and every file's sha256 are checked before anything is installed;
#   3. `go install` at the pinned commit (needs a Go module proxy that serves Fabric).
# Exit 0 when FABRIC_HOME holds working 3.1.5 binaries, else non-zero with one line saying why.
set -euo pipefail

REV=86c1172bec37e6590c6b1ae6f847833df48d65fc   # tag v3.1.5; never @latest (resolves to Fabric 1.4)
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE="${CONSORTIA_CACHE:-$HOME/.cache/consortia}"
FABRIC_HOME="${FABRIC_HOME:-$CACHE/fabric}"
ARCHIVE_NAME=fabric-3.1.5-linux-amd64.tar.xz
ARCHIVE_SHA256=3fb604d4ec7360042dcd0a377863fc1ddab12c34cc8ef4a92406287fc21f88e0
# sha256 of every file of the archive (the build of docs/fabric.md, "Building the archive").
FILE_SHA256="\
5995eb54fe77f579d0dc34881918c015f062330a34b3e23b9a5e753094dd439d  bin/configtxgen
7a8657911d56cd5c11372ebb0ccfd240f485f06d9a81749864b8e4e813cabe28  bin/orderer
c241394b1df8fbee52e14b0102ce55dbffc7c71b34347ed4e032a3222d50fadd  bin/osnadmin
2c0b7c37997510007862dc5bc7262ba7ae30ff991828d4457e6da736ed39f2d0  bin/peer
ec6b65f5ac155c1f977a66b64772488977ca03bb89cf6e7cb5bd6e3777144107  config/core.yaml
b8b78b0770f43b1653cd7a294bc657aaa1e94857919e4a0048221f372cff82a4  config/orderer.yaml"

BINS=(peer orderer configtxgen osnadmin)
say() { echo "[fabric install] $*" >&2; }

installed_ok() {   # every file present and peer reports 3.1.5 (release, archive or go build)
  local b
  for b in "${BINS[@]}"; do [[ -x "$FABRIC_HOME/bin/$b" ]] || return 1; done
  [[ -f "$FABRIC_HOME/config/core.yaml" && -f "$FABRIC_HOME/config/orderer.yaml" ]] || return 1
  if [[ "$(sha256sum "$FABRIC_HOME/bin/peer" | cut -d" " -f1)" == "$(printf '%s\n' "$FILE_SHA256" | awk '$2=="bin/peer"{print $1}')" ]]; then
    # installed from the archive: every file must still be the archive's
    (cd "$FABRIC_HOME" && printf '%s\n' "$FILE_SHA256" | sha256sum --quiet -c - >/dev/null 2>&1) || return 1
  fi
  "$FABRIC_HOME/bin/peer" version 2>/dev/null | grep -Eq "Version: v?3\.1\.5$"
}

if installed_ok; then
  echo "fabric 3.1.5 binaries found in $FABRIC_HOME"
  exit 0
fi

# --- route 2: the archive ----------------------------------------------------------------------
archive=""
if [[ -n "${CONSORTIA_FABRIC_ARCHIVE:-}" ]]; then
  [[ -f "$CONSORTIA_FABRIC_ARCHIVE" ]] || { echo "install.sh: CONSORTIA_FABRIC_ARCHIVE=$CONSORTIA_FABRIC_ARCHIVE does not exist" >&2; exit 4; }
  archive=$CONSORTIA_FABRIC_ARCHIVE
elif [[ -f "$HERE/../../shared/fabric/$ARCHIVE_NAME" ]]; then
  archive=$(cd "$HERE/../../shared/fabric" && pwd)/$ARCHIVE_NAME
fi

if [[ -n "$archive" ]]; then
  say "installing from $archive"
  got=$(sha256sum "$archive" | cut -d" " -f1)
  if [[ "$got" != "$ARCHIVE_SHA256" ]]; then
    echo "install.sh: $archive has sha256 $got, expected $ARCHIVE_SHA256: not installed" >&2
    exit 5
  fi
  stage=$(mktemp -d "${TMPDIR:-/tmp}/fabric-stage.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  tar -xJf "$archive" -C "$stage"
  if ! (cd "$stage" && printf '%s\n' "$FILE_SHA256" | sha256sum --quiet -c - >&2); then
    echo "install.sh: a file of $archive does not match its sha256: not installed" >&2
    exit 5
  fi
  mkdir -p "$FABRIC_HOME/bin" "$FABRIC_HOME/config"
  for b in "${BINS[@]}"; do install -m 0755 "$stage/bin/$b" "$FABRIC_HOME/bin/$b"; done
  install -m 0644 "$stage/config/core.yaml" "$stage/config/orderer.yaml" "$FABRIC_HOME/config/"
  if installed_ok; then
    "$FABRIC_HOME/bin/peer" version | head -3
    echo "fabric installed in $FABRIC_HOME (from the archive)"
    exit 0
  fi
  echo "install.sh: the binaries of $archive do not run here (peer version does not print 3.1.5)" >&2
  exit 6
fi

# --- route 3: go install at the pinned commit ---------------------------------------------------
if ! command -v go >/dev/null; then
  echo "install.sh: no Fabric 3.1.5 in $FABRIC_HOME, no archive (set CONSORTIA_FABRIC_ARCHIVE to a $ARCHIVE_NAME) and no go (>= 1.26.4) to build it" >&2
  exit 2
fi
mkdir -p "$FABRIC_HOME/bin" "$FABRIC_HOME/config"

export GOPATH="${GOPATH_OVERRIDE:-$FABRIC_HOME/gopath}"
export GOMODCACHE="$GOPATH/pkg/mod"
export GOCACHE="${GOCACHE_OVERRIDE:-$FABRIC_HOME/gocache}"
export CGO_ENABLED=0 GOFLAGS="-trimpath -mod=mod" GOTOOLCHAIN=auto
# Keep the build polite on a shared 2-core machine.
export GOMAXPROCS="${FABRIC_BUILD_PROCS:-2}"
NICE="nice -n 10"

LD="-X github.com/hyperledger/fabric/common/metadata.Version=3.1.5 -X github.com/hyperledger/fabric/common/metadata.CommitSHA=${REV:0:7}"
say "building fabric binaries at $REV (this takes several minutes the first time)"
# cryptogen is not needed: identities come from ledger.identity.Consortium.generate (same layout).
# The ccaas builder is fabric-network/builders/ccaas (same behaviour as Fabric's, no Go module).
if ! GOBIN="$FABRIC_HOME/bin" $NICE go install -p 1 -ldflags "$LD" \
  "github.com/hyperledger/fabric/cmd/peer@$REV" \
  "github.com/hyperledger/fabric/cmd/orderer@$REV" \
  "github.com/hyperledger/fabric/cmd/configtxgen@$REV" \
  "github.com/hyperledger/fabric/cmd/osnadmin@$REV"; then
  echo "install.sh: 'go install github.com/hyperledger/fabric/cmd/...@$REV' failed: the Go module proxy must serve github.com/hyperledger/fabric at this commit; else set CONSORTIA_FABRIC_ARCHIVE to a $ARCHIVE_NAME (docs/fabric.md)" >&2
  exit 3
fi

MODDIR=$(go mod download -json "github.com/hyperledger/fabric@$REV" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d "$MODDIR/sampleconfig" ]] || { echo "install.sh: sampleconfig not found under '$MODDIR'" >&2; exit 1; }
cp "$MODDIR/sampleconfig/core.yaml" "$MODDIR/sampleconfig/orderer.yaml" "$FABRIC_HOME/config/"
chmod u+w "$FABRIC_HOME/config/"*.yaml

installed_ok || { echo "install.sh: the built peer does not report version 3.1.5" >&2; exit 6; }
"$FABRIC_HOME/bin/peer" version | head -3
echo "fabric installed in $FABRIC_HOME"
