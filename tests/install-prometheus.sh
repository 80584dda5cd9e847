#!/usr/bin/env bash
# Debian's Prometheus server and promtool for the monitoring tests (tests/integration/test_prometheus.py,
# tests/unit/test_metrics.py's rule tests). Does nothing when both are installed.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing Debian prometheus (the server and promtool) for the monitoring tests ..."
$SUDO apt-get update -q
# --no-install-recommends: the node exporter and the rest of its recommends are not needed.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends prometheus
