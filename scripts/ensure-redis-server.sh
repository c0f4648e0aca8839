#!/bin/sh
# The tests start real redis-server processes (tests/_servers_redis.py). Install the
# Debian package when the binaries are missing (CI runs as root on a fresh machine);
# otherwise say what to do. Nothing happens when redis-server is already installed.
set -e
# openssl makes the certificate of the TLS test.
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 &&
    command -v openssl >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing redis-server (apt-get) for the Redis store tests"
    apt-get install -y -q redis-server openssl >/dev/null 2>&1 || {
        apt-get update -q >/dev/null && apt-get install -y -q redis-server openssl >/dev/null
    }
    # The package's own service is not needed: the tests start their own servers.
    if command -v service >/dev/null 2>&1; then service redis-server stop >/dev/null 2>&1 || true; fi
    exit 0
fi
echo "redis-server or openssl is missing: install them (sudo apt-get install redis-server openssl)" >&2
exit 1
