#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the browser tests (Playwright drives /usr/bin/chromium;
# its own browser download cannot work here). Does nothing when both are installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing Debian chromium and chromium-driver for the browser tests ..."
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver
