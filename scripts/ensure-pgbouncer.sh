#!/bin/sh
# The PostgreSQL store is tested through a real PgBouncer in transaction mode
# (tests/_servers_postgres.py). Install the Debian package when the binary is missing
# (CI runs as root on a fresh machine); otherwise say what to do. Nothing happens when
# pgbouncer is already installed. The fixture runs this script itself when needed.
set -e
if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing pgbouncer (apt-get) for the PostgreSQL store tests"
    apt-get install -y -q pgbouncer >/dev/null 2>&1 || {
        apt-get update -q >/dev/null && apt-get install -y -q pgbouncer >/dev/null
    }
    # The package's own service is not needed: the tests start their own bouncer.
    if command -v service >/dev/null 2>&1; then service pgbouncer stop >/dev/null 2>&1 || true; fi
    exit 0
fi
echo "pgbouncer is missing: install it (sudo apt-get install pgbouncer)" >&2
exit 1
