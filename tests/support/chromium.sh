#!/usr/bin/env bash
# Installs what tests/http/test_view_browser.py drives: Debian's headless Chromium and
# its WebDriver, and selenium (also in the `dev` extra). Idempotent; needs root (apt-get).
set -euo pipefail
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        chromium chromium-driver
fi
python3 -c 'import selenium' 2>/dev/null || python3 -m pip install -q selenium
