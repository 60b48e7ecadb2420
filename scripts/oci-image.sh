#!/usr/bin/env bash
# oci-image.sh VERSION OUT.tar [WORK]: hvupdater's container image as an OCI archive (an OCI
# image layout in a tar: `skopeo copy oci-archive:OUT.tar docker://REGISTRY/hvupdater:VERSION`
# pushes it with its digest unchanged), built without a container engine, as
# deploy/container/Containerfile describes it:
#   - the build stage: deploy/container/build-steps.sh SRC STAGED (Release, -Werror);
#   - the runtime stage: Debian 12 (bookworm) minbase made by mmdebstrap with the packages
#     the Containerfile's runtime stage installs (read from it), without docs but copyright,
#     the user hvupdater 65532:65532, the staged binary and copyright file;
#   - umoci packs that root as one layer with the Containerfile's USER, ENTRYPOINT and
#     EXPOSE (linux/amd64).
# Prints the image manifest's digest (sha256:...) on stdout, the log on stderr.
# Needs root (mmdebstrap's root mode), mmdebstrap and umoci (scripts/bootstrap.sh test) and
# the Debian mirror of the machine's apt sources.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "oci-image: $*" >&2; }
die() { log "$*"; exit 1; }

[ $# -ge 2 ] || die "usage: scripts/oci-image.sh VERSION OUT.tar [WORK]"
VERSION=$1
OUT=$2
WORK=${3:-$(mktemp -d)}
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap makes the root file system as root)"
for t in mmdebstrap umoci; do
    command -v "$t" >/dev/null || die "$t is missing: scripts/bootstrap.sh test installs it"
done
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
CF=$ROOT/deploy/container/Containerfile

# The runtime stage's packages: the words of its `apt-get install ... --no-install-recommends`.
PKGS=$(python3 - "$CF" <<'EOF'
import re, sys
text = open(sys.argv[1]).read().split("\nFROM ")[-1]
m = re.search(r"--no-install-recommends\s*\\?\n?(.*?)&&", text, re.S)
words = [w for w in re.split(r"[\s\\]+", m.group(1)) if w] if m else []
if not words or not all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", w) for w in words):
    sys.exit("oci-image: cannot read the runtime packages from the Containerfile")
print(",".join(words))
EOF
)
ENTRY=$(sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' "$CF" | tr -d '"' | tr ',' ' ')
USERID=$(sed -n 's/^USER \([0-9:]*\)$/\1/p' "$CF")
PORT=$(sed -n 's/^EXPOSE \([0-9]*\)$/\1/p' "$CF")
[ -n "$ENTRY" ] && [ -n "$USERID" ] && [ -n "$PORT" ] ||
    die "cannot read ENTRYPOINT, USER, EXPOSE from the Containerfile"

log "build stage: build-steps.sh"
"$ROOT/deploy/container/build-steps.sh" "$ROOT" "$WORK/staged" "$WORK/build" >"$WORK/build.log" 2>&1 ||
    { tail -30 "$WORK/build.log" >&2; die "build-steps.sh failed"; }

log "runtime stage: Debian 12 minbase + $PKGS"
rm -f "$WORK/rootfs.tar"
mmdebstrap --variant=minbase --include="$PKGS" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$WORK/rootfs.tar" >"$WORK/mmdebstrap.log" 2>&1 ||
    { tail -30 "$WORK/mmdebstrap.log" >&2; die "mmdebstrap failed"; }

log "image"
L=$WORK/layout B=$WORK/bundle
rm -rf "$L" "$B"
umoci init --layout "$L"
umoci new --image "$L:$VERSION"
umoci unpack --image "$L:$VERSION" "$B" >/dev/null
tar -C "$B/rootfs" -xf "$WORK/rootfs.tar"
groupadd --root "$B/rootfs" --system --gid "${USERID#*:}" hvupdater
useradd --root "$B/rootfs" --system --uid "${USERID%%:*}" --gid "${USERID#*:}" \
    --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin hvupdater
install -D -m 0755 "$WORK/staged/usr/bin/hvupdater" "$B/rootfs/usr/bin/hvupdater"
install -D -m 0644 "$WORK/staged/usr/share/doc/hvupdater/copyright" \
    "$B/rootfs/usr/share/doc/hvupdater/copyright"
chroot "$B/rootfs" /usr/bin/hvupdater version >/dev/null ||
    die "the binary does not run in the image's root (a missing library?)"
umoci repack --image "$L:$VERSION" "$B"
# shellcheck disable=SC2086
umoci config --image "$L:$VERSION" --os linux --architecture amd64 \
    --config.user "$USERID" --config.exposedports "$PORT/tcp" \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    $(for w in $ENTRY; do printf -- '--config.entrypoint %s ' "$w"; done)
umoci gc --layout "$L"
(cd "$L" && tar --sort=name --owner=0 --group=0 --numeric-owner -cf "$OUT.tmp" .)
mv "$OUT.tmp" "$OUT"
python3 - "$L/index.json" "$VERSION" <<'EOF'
import json, sys
idx = json.load(open(sys.argv[1]))
d = [m["digest"] for m in idx["manifests"]
     if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == sys.argv[2]]
if len(d) != 1:
    sys.exit("oci-image: no single manifest tagged %s in the layout" % sys.argv[2])
print(d[0])
EOF
