#!/bin/sh
# The coinvoice image's entrypoint: one image, the process chosen by the first argument.
#
#   auth | invoice | payout | notifier      serve that gRPC service
#   auth | invoice | payout | notifier migrate
#                                           apply that service's SQL migrations, then exit
#   invoice watch <chain>                   the chain watcher role (e.g. invoice watch ethereum)
#   payout sign | payout sign migrate | payout sign xpub
#                                           the treasury signer (docs/treasury.md), its schema, its account xpub
#   payout process <network>                the treasury processor (e.g. payout process ethereum)
#   auth grant-operator <email> | auth revoke-operator <email>
#                                           operator rights, audit-logged (a one-off Job)
#   auth rotate-kek                         re-encrypt secrets at rest with SECRETS_KEK
#   gateway                                 serve the REST gateway
#   migrate                                 every service's migrations in turn, then exit
#   help                                    this text
#
# Configuration is environment variables only (see README.md, Configuration). `exec` makes node
# PID 1 of the container, so SIGTERM reaches it directly and the process shuts down gracefully.
set -eu

APP_DIR=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)

usage() {
  sed -n '2,17s/^# \{0,1\}//p' "$0"
}

process=${1:-help}
[ "$#" -gt 0 ] && shift

case "$process" in
  auth)
    case "${1:-}" in
      '' | migrate | rotate-kek)
        [ "$#" -le 1 ] || { echo "coinvoice: auth $1 takes no further argument (got: $*)" >&2; exit 64; }
        exec node "$APP_DIR/services/auth/dist/main.js" "$@" ;;
      grant-operator | revoke-operator)
        [ "$#" -eq 2 ] || { echo "coinvoice: auth $1 takes one email (got: $*)" >&2; exit 64; }
        exec node "$APP_DIR/services/auth/dist/main.js" "$@" ;;
      *)
        echo "coinvoice: auth takes no argument but 'migrate', 'grant-operator <email>', 'revoke-operator <email>' or 'rotate-kek' (got: $*)" >&2
        exit 64
        ;;
    esac
    ;;
  invoice | payout | notifier)
    case "$process $*" in
      "$process " | "$process migrate") exec node "$APP_DIR/services/$process/dist/main.js" "$@" ;;
      "payout sign" | "payout sign migrate" | "payout sign xpub") exec node "$APP_DIR/services/payout/dist/main.js" "$@" ;;
      "payout process "?*)
        if [ "$#" -ne 2 ]; then
          echo "coinvoice: payout process takes one network (got: $*)" >&2
          exit 64
        fi
        exec node "$APP_DIR/services/payout/dist/main.js" "$@"
        ;;
      "invoice watch "?*)
        if [ "$#" -ne 2 ]; then
          echo "coinvoice: invoice watch takes one chain (got: $*)" >&2
          exit 64
        fi
        exec node "$APP_DIR/services/invoice/dist/main.js" "$@"
        ;;
      *)
        echo "coinvoice: $process takes no argument but 'migrate' (invoice also 'watch <chain>', payout also 'sign [migrate|xpub]' and 'process <network>') (got: $*)" >&2
        exit 64
        ;;
    esac
    ;;
  gateway)
    if [ "$#" -gt 0 ]; then
      echo "coinvoice: gateway takes no arguments (got: $*)" >&2
      exit 64
    fi
    exec node "$APP_DIR/gateway/dist/main.js"
    ;;
  migrate)
    for service in auth invoice payout notifier; do
      node "$APP_DIR/services/$service/dist/main.js" migrate
    done
    ;;
  help | -h | --help)
    usage
    ;;
  *)
    echo "coinvoice: unknown process '$process'" >&2
    usage >&2
    exit 64
    ;;
esac
