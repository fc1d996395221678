#!/bin/sh
# make test's first step: the hub's Redis tests need `redis-server` (Debian's package).
# Present: nothing to do. Missing, as root with apt-get: install it, quietly. Otherwise:
# say exactly what to install and fail; the tests never skip silently.
set -u
command -v redis-server >/dev/null 2>&1 && exit 0
help() {
    cat >&2 <<'MSG'
redis-server is not installed, and `make test` cannot install it here.
The hub's Redis tests start their own redis-server on a loopback port. Install it, then
run `make test` again:
  Debian/Ubuntu:  sudo apt-get install -y redis-server
  Fedora:         sudo dnf install -y redis
  macOS:          brew install redis
MSG
    exit 2
}
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    help
fi
echo "redis-server is missing: apt-get update && apt-get install -y redis-server" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || { echo "apt-get update failed" >&2; help; }
# NOTE: policy-rc.d 101 keeps the package's own service from starting (the tests start theirs).
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    cleanup=1
fi
apt-get install -y -qq --no-install-recommends redis-server >/dev/null
status=$?
[ "${cleanup:-0}" = 1 ] && rm -f /usr/sbin/policy-rc.d
[ $status = 0 ] || { echo "apt-get install -y redis-server failed ($status)" >&2; help; }
command -v redis-server >/dev/null 2>&1 || help
