#!/usr/bin/env bash
# Builds CAPOV's image without internet access, from parts made on this (Debian) machine: a static musl `manager`
# built by cargo (also `wget`, through a link) and the CA bundle from Debian's package. The final stage is the
# Dockerfile's, built with --build-arg SOURCE=machine; no base image is pulled.
#
# Installs what is missing (docker.io, ca-certificates, musl-tools, the rustup musl target) and
# starts dockerd (storage driver vfs) when none answers. Root only for those installs.
#
# Usage: tools/image/build.sh [IMAGE]   (default capov-manager:<workspace version>)
# Prints progress on stderr and, last on stdout, the image reference.
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

say() { printf 'image: %s\n' "$*" >&2; }
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
image=${1:-capov-manager:$version}
target=x86_64-unknown-linux-musl
target_dir=${CARGO_TARGET_DIR:-target}
out=$target_dir/image
mkdir -p "$out"

# Debian's docker.io ships a 20.10 client that builds with BuildKit on its own; a newer client found first on PATH
# would need the buildx plugin for that.
docker=/usr/bin/docker
missing=()
for package in docker.io ca-certificates musl-tools; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi

if ! "$docker" info >/dev/null 2>&1; then
  say "starting dockerd (storage driver vfs), log in $out/dockerd.log"
  setsid nohup /usr/sbin/dockerd --storage-driver=vfs >"$out/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 120); do
    "$docker" info >/dev/null 2>&1 && break
    sleep 0.5
  done
  "$docker" info >/dev/null 2>&1 || { say "dockerd did not answer within 60s:"; tail -20 "$out/dockerd.log" >&2; exit 1; }
fi

if ! rustup target list --installed | grep -qx "$target"; then
  say "adding the rust target $target"
  rustup target add "$target" >&2
fi
say "cargo build --release --target $target --bin manager"
# Stripped for the image only (keeps it small); other release builds keep their symbols (heap profiles need them).
CARGO_PROFILE_RELEASE_STRIP=true cargo build --release --locked --target "$target" --bin manager >&2

context=$out/context
rm -rf "$context"
mkdir -p "$context/parts/usr/bin" "$context/parts/etc/ssl/certs"
cp "$target_dir/$target/release/manager" "$context/manager"
ln -s /manager "$context/parts/usr/bin/wget"
# The package's Mozilla set only: CAs added locally to this machine's /etc/ssl/certs stay out of the image.
cat /usr/share/ca-certificates/mozilla/*.crt >"$context/parts/etc/ssl/certs/ca-certificates.crt"

say "docker build --build-arg SOURCE=machine -t $image"
DOCKER_BUILDKIT=1 "$docker" build --build-arg SOURCE=machine -f Dockerfile -t "$image" "$context" >&2
size=$("$docker" image inspect --format '{{.Size}}' "$image")
say "$image: $((size / 1024)) KiB ($size bytes)"
echo "$image"
