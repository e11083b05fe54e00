#!/bin/sh
# Installs the Debian packages diskimg needs, when they are missing.
#   scripts/deps.sh build   compiler, make, pkg-config, zlib, libzstd, liburing
#   scripts/deps.sh test    the above plus qemu-utils (the test oracle), tools
#                           (xfsprogs, btrfs-progs, e2fsprogs: the copy offload
#                           tests loop-mount those file systems),
#                           and clang with its sanitizer and libFuzzer runtimes
#                           (make check: the ASan+UBSan build, fuzz-smoke)
#   scripts/deps.sh fuzz    the same as test (make fuzz)
# As root it runs apt-get itself; otherwise it prints the exact command.

# clang's runtimes (ASan, UBSan, libFuzzer) are packaged per version:
# libclang-rt-N-dev for the clang the machine has (Debian 12: 14)
clang_rt() {
    local v
    v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
    # not installed yet: the version the distribution's clang package depends on
    [ -n "$v" ] || v=$(apt-cache depends clang 2>/dev/null |
                           sed -n 's/.*Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n 1)
    echo "libclang-rt-${v:-14}-dev"
}
set -eu
build="gcc make pkg-config zlib1g-dev libzstd-dev liburing-dev"
test="$build qemu-utils bzip2 util-linux diffutils tar python3 strace acl attr fuse3 libqcow-utils libvmdk-utils libvhdi-utils xfsprogs btrfs-progs e2fsprogs"
case "${1:-build}" in
    build) want=$build ;;
    test|fuzz) want="$test binutils clang $(clang_rt)" ;;
    bench) want="$test binutils clang $(clang_rt) hyperfine" ;;
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
