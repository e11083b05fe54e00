# Sourced by every tests/*.sh scenario.  Provides:
#   $DISKIMG   the binary under test;  $T  a fresh scratch folder
#   fail MSG / skip MSG / need CMD
#   alloc FILE           allocated bytes (st_blocks * 512)
#   gen ARGS...          the seeded generator (tests/tools/genimg.c)
#   expect_error RE CMD...  CMD must exit 1 with stderr matching RE, no signal
#   qcompare A B         qemu-img compare must say identical
#   vmdk_desc_text FILE  a vmdk descriptor file's text up to its first NUL
#   jfield IMG KEY       a scalar of qemu-img info's JSON
#   vmdk_refused RE CMD...  expect_error, and the *.vmdk files unchanged
#   asan_build           true when $DISKIMG is the ASan+UBSan build
#   sweep_case N LAST    whether case N of an exhaustive sweep runs here
#   cached KEY DIR CMD...  DIR made once per test run by CMD... DIR, shared
#                        by the build variants (tests/out/cache)
set -u
DISKIMG=${DISKIMG:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/diskimg}
TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BUILD:-$TOP/build}
T=${TEST_TMP:-$(mktemp -d)}
mkdir -p "$T"
SHARED=$TOP/../shared
export LC_ALL=C

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
need() { command -v "$1" >/dev/null 2>&1 || skip "$1 not installed"; }
alloc() { echo $(( $(stat -c %b "$1") * 512 )); }
gen() { "$TOP/build/tools/genimg" "$@" || fail "genimg $*"; }

# expect_error REGEX CMD... : exit status 1, stderr matches REGEX
expect_error() {
    local re=$1; shift
    local rc=0
    "$@" >"$T/stdout" 2>"$T/stderr" || rc=$?
    [ $rc -eq 1 ] || { cat "$T/stderr" >&2; fail "expected exit 1, got $rc: $*"; }
    grep -Eq -- "$re" "$T/stderr" || { cat "$T/stderr" >&2; fail "stderr does not match '$re': $*"; }
    grep -q "AddressSanitizer\|runtime error" "$T/stderr" && fail "sanitizer report: $*"
    return 0
}

# vmdk_desc_text FILE: a descriptor file's text as readers see it: up to the
# first NUL (qemu-img pads the file to a sector, and what lies in the padding
# is not part of the descriptor), trailing blank lines dropped
vmdk_desc_text() {
    perl -0777 -ne '($t) = split /\0/; $t //= ""; $t =~ s/\n\s*\z/\n/; print $t' "$1"
}

# jfield IMG KEY: a scalar of `qemu-img info --output=json IMG`
jfield() { qemu-img info --output=json "$1" | sed -n "s/^ *\"$2\": \"*\([^\",]*\)\"*,*$/\1/p" | head -n 1; }

# vmdk_refused RE CMD...: run in the folder of the images, CMD must exit 1
# with stderr matching RE, leave every *.vmdk there byte-identical and no
# .rebase- temporary file behind
vmdk_refused() {
    local re=$1; shift
    local s; s=$(sha1sum -- *.vmdk | sha1sum)
    expect_error "$re" "$@"
    [ "$(sha1sum -- *.vmdk | sha1sum)" = "$s" ] || fail "a refused rebase changed a file: $*"
    ls -A | grep -q '\.rebase-' && fail "a temporary file was left: $*"
    return 0
}

qcompare() {
    qemu-img compare -q "$@" || fail "qemu-img compare says $1 and $2 differ"
}

# ok CMD... : must succeed, stderr shown on failure
ok() {
    "$@" 2>"$T/stderr.ok" || { cat "$T/stderr.ok" >&2; fail "command failed: $*"; }
}

# asan_build: $DISKIMG was built with AddressSanitizer (build-asan/)
asan_build() {
    if [ -z "${ASAN_BUILD:-}" ]; then
        ASAN_BUILD=0
        grep -q __asan_init "$DISKIMG" && ASAN_BUILD=1
    fi
    [ "$ASAN_BUILD" = 1 ]
}

# sweep_case N LAST: exhaustive sweeps (the Nth call of a kind failing, for
# every N a run makes) run every case in the ASan build, where each case
# also proves the error path free of memory errors and leaks; the plain
# build repeats the same assertions without those, so it takes every
# third case and the last (FULL_SWEEP=1: every case in both).  This keeps
# make check within its time without a case that only one build covers.
sweep_case() {
    asan_build || [ "${FULL_SWEEP:-0}" = 1 ] || [ $(($1 % 3)) = 1 ] || [ "$1" = "$2" ]
}

# cached KEY DIR CMD...: run `CMD... DIR` once per test run for KEY (a
# name that changes with whatever CMD's output depends on), then copy the
# result to DIR.  The two build variants run side by side: the second
# waits for the first's result instead of making its own.
cached() {
    local key=$1 dir=$2; shift 2
    local cache=${TEST_CACHE:-$TOP/tests/out/cache}
    mkdir -p "$cache"
    (
        flock 9
        if [ ! -d "$cache/$key" ]; then
            rm -rf "$cache/$key.tmp"
            "$@" "$cache/$key.tmp" >/dev/null || exit 1
            mv "$cache/$key.tmp" "$cache/$key"
        fi
    ) 9>"$cache/$key.lock" || return 1
    mkdir -p "$dir"
    cp -a "$cache/$key/." "$dir/"
}

# yal_read IMAGE OUT [FMT]: the guest disk of IMAGE as libyal's independent
# reader sees it (qcowmount, vmdkmount or vhdimount, through FUSE, by the
# image's format as qemu-img names it, or FMT: qemu-img calls a fixed VHD
# raw), copied to the raw file OUT.  Skips (77) when
# the tool or /dev/fuse is missing; any other failure fails the test.
yal_read() {
    local img=$1 out=$2 fmt=${3:-} tool mnt rc=0
    [ -n "$fmt" ] || fmt=$(qemu-img info --output=json "$img" | sed -n 's/^ *"format": "\(.*\)",*$/\1/p' | head -n 1)
    case $fmt in
        qcow2) tool=qcowmount ;;
        vmdk) tool=vmdkmount ;;
        vpc|vhdx) tool=vhdimount ;;
        *) fail "yal_read: no libyal reader for format '$fmt' of $img" ;;
    esac
    need "$tool"
    [ -c /dev/fuse ] || skip "no /dev/fuse for $tool"
    mnt=$(mktemp -d "$T/yal.XXXXXX")
    timeout 30 "$tool" "$img" "$mnt" >"$T/yal.err" 2>&1 ||
        { cat "$T/yal.err" >&2; rmdir "$mnt"; fail "$tool cannot read $img"; }
    cp "$mnt"/* "$out" || rc=$?
    umount "$mnt" 2>/dev/null || fusermount3 -u "$mnt" 2>/dev/null || fusermount -u "$mnt"
    rmdir "$mnt"
    [ $rc -eq 0 ] || fail "$tool: cannot copy the disk of $img"
}

# loop_fs TYPE DIR: a fresh small file system of TYPE (xfs, with reflink;
# btrfs; ext4) in a sparse file under $T, loop-mounted on DIR and unmounted
# at exit (the loop device goes with it).  Skips when not root, or when the
# kernel, mkfs or the loop driver lacks it.
LOOP_MOUNTS=()
loop_fs_cleanup() {
    local d
    for d in "${LOOP_MOUNTS[@]}"; do umount "$d" 2>/dev/null || umount -l "$d"; done
    LOOP_MOUNTS=()
}
loop_fs() {
    local type=$1 dir=$2 img=$T/$1-$RANDOM.fsimg size mk
    [ "$(id -u)" = 0 ] || skip "loop-mounting $type needs root"
    grep -qw "$type" /proc/filesystems || modprobe "$type" 2>/dev/null || true
    grep -qw "$type" /proc/filesystems || skip "the kernel has no $type"
    case $type in
        xfs) need mkfs.xfs; size=320M; mk=(mkfs.xfs -q -m reflink=1) ;;
        btrfs) need mkfs.btrfs; size=512M; mk=(mkfs.btrfs -q) ;;
        ext4) need mkfs.ext4; size=64M; mk=(mkfs.ext4 -q -F) ;;
        *) fail "loop_fs: unknown type $type" ;;
    esac
    truncate -s "$size" "$img" || fail "loop_fs: truncate"
    "${mk[@]}" "$img" >"$T/mkfs.err" 2>&1 || { cat "$T/mkfs.err" >&2; fail "mkfs $type"; }
    mkdir -p "$dir"
    mount -o loop "$img" "$dir" 2>"$T/mount.err" || skip "cannot loop-mount $type: $(cat "$T/mount.err")"
    LOOP_MOUNTS+=("$dir")
    trap loop_fs_cleanup EXIT
}

# offload_bytes KIND STDERR: from convert -v's "copy offload:" line, the
# bytes shared, offloaded or copied (KIND = 1, 2, 3)
offload_bytes() {
    sed -n 's/^diskimg: copy offload: .*(\([0-9]*\), \([0-9]*\), \([0-9]*\) bytes).*/\1 \2 \3/p' "$2" |
        awk -v k="$1" '{ print $k }'
}

# shared_extents FILE: how many of FILE's extents FIEMAP flags shared
shared_extents() {
    filefrag -v "$1" | grep -c 'shared' || true
}
