#!/usr/bin/env bash
# Provides Debian's cloud-init (the `cloud-init` package of the machine's apt sources, 22.4.2 on Debian 12) for the
# payload fidelity tests, without installing it: the package and the Python packages it depends on are fetched with
# `apt-get download` and unpacked with `dpkg-deb -x` into a cache directory, and run with Debian's own python3.
# Installing the package would put cloud-init's services on the machine that runs the tests (they reconfigure host
# name, network and SSH on its next boot); unpacked, it is only a library and a command.
#
#   tools/cloud-init/fetch.sh   -> prints the directory holding `cloud-init` (the command) and `guest-view`
#                                  (cloud-init's own ConfigDrive datasource, jinja rendering and YAML loading applied
#                                  to a config drive; tools/cloud-init/guest_view.py)
#
# The cache key covers this script, guest_view.py and the versions apt offers for every package unpacked, so a
# Debian update of any of them fetches again. CAPOV_CLOUD_INIT_DIR, when it already holds both commands, is used as
# is; CAPOV_TOOLS_CACHE moves the cache (default: ~/.cache/capov-tools). Needs apt (Debian), and root when the apt
# lists or python3 are missing (then `apt-get update` / `apt-get install python3` run).
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${CAPOV_TOOLS_CACHE:-$HOME/.cache/capov-tools}
log() { echo "cloud-init/fetch: $*" >&2; }

if [ -n "${CAPOV_CLOUD_INIT_DIR:-}" ] && [ -x "$CAPOV_CLOUD_INIT_DIR/cloud-init" ] && [ -x "$CAPOV_CLOUD_INIT_DIR/guest-view" ]; then
  echo "$CAPOV_CLOUD_INIT_DIR"
  exit 0
fi
command -v apt-get >/dev/null || { log "apt-get not found: Debian's cloud-init package needs a Debian (or Ubuntu) machine"; exit 1; }

candidate() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }'; }
if [ -z "$(candidate cloud-init)" ] || [ "$(candidate cloud-init)" = "(none)" ]; then
  log "apt has no cloud-init candidate: running apt-get update"
  apt-get update -qq >&2
fi
version=$(candidate cloud-init)
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
  log "apt offers no cloud-init package even after apt-get update; check /etc/apt/sources.list*"
  exit 1
fi
# Debian's interpreter, for which the packages are built (a python3 earlier on PATH, e.g. pyenv's, may lack them).
if [ ! -x /usr/bin/python3 ]; then
  log "installing Debian's python3 (the interpreter only)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >&2
fi

# cloud-init and the Python packages of its dependency closure (the interpreter itself is the machine's).
packages=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
  --no-enhances --no-pre-depends cloud-init 2>/dev/null | grep -E '^python3-' |
  grep -vE '^python3-(minimal|distutils|lib2to3)$' | sort -u)
packages="cloud-init $packages"
# One apt-cache call for every candidate version (one call per package takes a second each).
# shellcheck disable=SC2086
pinned=$(apt-cache policy $packages | awk '/^[^ ].*:$/ { p = $1; sub(/:$/, "", p) } /Candidate:/ { printf " %s=%s", p, $2 }')
case "$pinned" in *"=(none)"*) log "apt offers no candidate for some of:$pinned"; exit 1 ;; esac
key=$( { cat "$here/fetch.sh" "$here/guest_view.py"; echo "$pinned"; /usr/bin/python3 --version; } | sha256sum | cut -c1-16)
out="$cache/cloud-init-$key"
if [ -x "$out/cloud-init" ] && [ -x "$out/guest-view" ]; then
  echo "$out"
  exit 0
fi

log "fetching cloud-init $version and its Python dependencies:$pinned"
tmp="$out.partial.$$"
rm -rf "$tmp"
mkdir -p "$tmp/debs" "$tmp/root"
trap 'rm -rf "$tmp"' EXIT
# apt-get download writes into the current directory; as root it warns that the _apt user cannot write there.
(cd "$tmp/debs" && apt-get download -qq $pinned 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
for p in $packages; do
  ls "$tmp/debs/${p}_"*.deb >/dev/null 2>&1 || { log "apt-get download did not fetch $p"; exit 1; }
done
for deb in "$tmp"/debs/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
rm -rf "$tmp/debs"
cp "$here/guest_view.py" "$tmp/guest_view.py"
site="$out/root/usr/lib/python3/dist-packages"
cat > "$tmp/cloud-init" <<SH
#!/bin/sh
# Debian's cloud-init $version, unpacked (tools/cloud-init/fetch.sh).
PYTHONPATH="$site" exec /usr/bin/python3 -s "$out/root/usr/bin/cloud-init" "\$@"
SH
cat > "$tmp/guest-view" <<SH
#!/bin/sh
# What cloud-init $version makes of a config drive (tools/cloud-init/guest_view.py).
PYTHONPATH="$site" exec /usr/bin/python3 -s "$out/guest_view.py" "\$@"
SH
chmod +x "$tmp/cloud-init" "$tmp/guest-view"
echo "$version" > "$tmp/VERSION"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
"$out/cloud-init" --version >&2
echo "$out"
