#!/usr/bin/env bash
# Installs the official oVirt Python SDK (ovirt-engine-sdk-python, pinned) into a virtualenv under target/ (cached:
# a second run only checks it) and prints the path of that virtualenv's python, for ovirt-sim/tests/sdk.rs
# (CAPOV_OVIRT_SDK_PYTHON). The SDK builds a C extension against libxml2 and pulls pycurl (libcurl); on Debian:
# apt-get install python3-venv gcc libxml2-dev libcurl4-openssl-dev libssl-dev.
# --help prints the comment above, before anything is installed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
version=4.6.3
venv=${CARGO_TARGET_DIR:-target}/ovirt-sdk-$version
if ! "$venv/bin/python" -c 'import ovirtsdk4' >/dev/null 2>&1; then
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "ovirt-engine-sdk-python==$version" >&2
fi
# Absolute: the test binaries run from their package's directory (tools/test-binaries.sh).
echo "$(cd "$venv" && pwd)/bin/python"
