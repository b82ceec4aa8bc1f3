#!/usr/bin/env bash
# `npm run test:image`: podman and the image (test/image/prepare.sh), then the system run from the
# image as the Kubernetes manifests say, its smoke and its SIGKILL test (test/image/image.test.ts).
# Containers of this run carry the label coinvoice-image-test=<run> and are removed on exit,
# whatever happened; the base and built images stay (the build cache of the next run).
set -euo pipefail
cd "$(dirname "$0")/../.."

started=$(date +%s)
export COINVOICE_IMAGE=${COINVOICE_IMAGE:-localhost/coinvoice:test}
export COINVOICE_IMAGE_RUN=${COINVOICE_IMAGE_RUN:-run$$$(date +%s)}

cleanup() {
  local ids
  ids=$(podman --runtime runc ps --all --quiet --filter "label=coinvoice-image-test=$COINVOICE_IMAGE_RUN" 2>/dev/null || true)
  [ -z "$ids" ] || podman --runtime runc rm --force --time 0 $ids >/dev/null 2>&1 || true
  echo "[test:image] $(( ($(date +%s) - started) / 60 )) min $(( ($(date +%s) - started) % 60 )) s in all"
}
trap cleanup EXIT

bash test/image/prepare.sh
# The test's helpers run from source; `npm run bench`, which it also runs, from bench/dist.
npx tsc -b
npx jest -c jest.image.config.js --runInBand "$@"
