#!/usr/bin/env bash
# Install Debian's Chromium for the real-browser check (tests/browser/test_browser.py).
#
# The browser test drives /usr/bin/chromium through the `playwright` Python package; it never runs
# `playwright install` (that downloads a browser build of its own, which cannot be fetched here).
# Idempotent and quiet: does nothing when chromium is already there. When it cannot install (not
# root, or apt fails) it says so on stderr and exits 0, so the browser test skips with a reason
# instead of the whole CI run failing.
set -u

if [ -x /usr/bin/chromium ]; then
    exit 0
fi

if [ "$(id -u)" != "0" ]; then
    echo "install_browser: /usr/bin/chromium missing and not root; the browser test will skip" >&2
    exit 0
fi

log="$(mktemp)"
export DEBIAN_FRONTEND=noninteractive
# fonts-dejavu-core: chart text needs at least one real font in a bare image.
if apt-get update -qq >"$log" 2>&1 \
   && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >>"$log" 2>&1; then
    echo "install_browser: $(/usr/bin/chromium --version 2>/dev/null || echo chromium installed)"
else
    echo "install_browser: apt-get could not install chromium; the browser test will skip" >&2
    tail -n 20 "$log" >&2
fi
rm -f "$log"
exit 0
