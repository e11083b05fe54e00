#!/bin/sh
# Installs the Debian packages diskimg needs, when they are missing.
#   scripts/deps.sh build   compiler, make, pkg-config, zlib, libzstd, liburing
#   scripts/deps.sh test    the above plus qemu-utils (the test oracle) and tools
#   scripts/deps.sh fuzz    the above plus clang with libFuzzer (make fuzz)
# As root it runs apt-get itself; otherwise it prints the exact command.
set -eu
build="gcc make pkg-config zlib1g-dev libzstd-dev liburing-dev"
test="$build qemu-utils bzip2 util-linux diffutils tar python3"
case "${1:-build}" in
    build) want=$build ;;
    test) want=$test ;;
    bench) want="$test hyperfine" ;;
    fuzz) want="$test clang libclang-rt-14-dev" ;;
    *) echo "usage: $0 build|test|bench|fuzz" >&2; exit 2 ;;
esac
missing=
for p in $want; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "diskimg: missing packages:$missing (install them with your package manager)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "diskimg: missing packages:$missing" >&2
    echo "install them with: sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 || {
    apt-get update -q >/dev/null 2>&1
    apt-get install -y -q --no-install-recommends $missing
}
