#!/bin/sh
# The inspector's browser test (tests/server/test_inspect_browser.py) drives Debian's
# headless chromium through Playwright. Install the Debian package when /usr/bin/chromium
# is missing (CI runs as root on a fresh machine); otherwise say what to do. Nothing
# happens when it is already installed. Playwright's own browser download is never used.
set -e
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium (apt-get) for the inspector's browser test"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || {
        apt-get update -q >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
    }
    exit 0
fi
echo "chromium is missing: install it (sudo apt-get install chromium)" >&2
exit 1
