#!/usr/bin/env bash
# build.sh OUTPUT: build the vcsim launcher (main.go) into OUTPUT against Debian's govmomi
# in GOPATH mode. Skips the ~20 s build when OUTPUT.hash matches the hash of the sources,
# the Go version and the govmomi package version. Go's build cache lives next to OUTPUT
# (or in $HV_VCSIM_GOCACHE) so edits rebuild in seconds.
set -euo pipefail

out=${1:?usage: build.sh OUTPUT}
here=$(cd "$(dirname "$0")" && pwd)
gocode=/usr/share/gocode
if [ ! -d "$gocode/src/github.com/vmware/govmomi/simulator" ]; then
  echo "build.sh: govmomi missing; run scripts/bootstrap.sh test" >&2
  exit 1
fi
command -v go >/dev/null || { echo "build.sh: go missing; run scripts/bootstrap.sh test" >&2; exit 1; }

hash=$( { cat "$here/main.go" "$here/build.sh"; go version;
          dpkg-query -W -f='${Version}' golang-github-vmware-govmomi-dev 2>/dev/null || true; } |
        sha256sum | cut -d' ' -f1)
if [ -x "$out" ] && [ "$(cat "$out.hash" 2>/dev/null)" = "$hash" ]; then
  exit 0
fi

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
gopath=$(mktemp -d)
trap 'rm -rf "$gopath"' EXIT
cache=${HV_VCSIM_GOCACHE:-$(dirname "$out")/.vcsim-gocache}
start=$(date +%s)
(cd "$here" && GO111MODULE=off GOPATH="$gopath:$gocode" GOCACHE="$cache" GOFLAGS='' \
   go build -o "$out.new" .)
mv "$out.new" "$out"
echo "$hash" > "$out.hash"
echo "build.sh: built $out in $(( $(date +%s) - start )) s" >&2
