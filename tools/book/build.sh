#!/usr/bin/env bash
# Builds the user book (docs/book, mdBook) into docs/book/book and checks its links: every relative link and
# #anchor of the built pages must resolve (tools/book, `book-links`; a broken one fails the run, nothing is fetched
# from the network). mdBook comes from crates.io, a pinned version installed with `cargo install --locked` once into
# ~/.cache/capov-tools/mdbook-<version> (CAPOV_TOOLS_CACHE moves it, as for tools/build-go-tools.sh); later runs use
# that copy. The first run compiles mdBook: a few minutes on 2 cores.
#
#   tools/book/build.sh             build and check
#   tools/book/build.sh --mdbook    only print the path of the mdbook binary (installing it if needed)
#
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

version=0.5.4
cache=${CAPOV_TOOLS_CACHE:-$HOME/.cache/capov-tools}
dir=$cache/mdbook-$version
if [[ ! -x $dir/bin/mdbook ]]; then
  echo "tools/book/build.sh: installing mdBook $version from crates.io into $dir (once)" >&2
  mkdir -p "$cache"
  partial=$dir.partial.$$
  trap 'rm -rf "$partial"' EXIT
  # Only the HTML renderer and its search index: no `serve`/`watch` (a web server and a file watcher).
  cargo install mdbook --version "$version" --locked --no-default-features --features search --root "$partial" >&2
  mv "$partial" "$dir" 2>/dev/null || [[ -x $dir/bin/mdbook ]]  # another run may have finished first
fi
if [[ " $* " == *" --mdbook "* ]]; then echo "$dir/bin/mdbook"; exit 0; fi

rm -rf docs/book/book
"$dir/bin/mdbook" build docs/book
cargo run --quiet --locked -p capov-book --bin book-links -- docs/book/book
