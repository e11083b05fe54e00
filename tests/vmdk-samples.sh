#!/bin/bash
# Real VMDKs written by VMware, ESXi and other tools (../shared/samples) convert
# to exactly the content their README gives (SHA-1 of the virtual disk), from
# the file and, for the single-file stream formats, from a pipe; the
# fuzzer-made afl9.vmdk is refused cleanly with bounded memory.
. "$(dirname "$0")/lib.sh"
need bzcat
R=$SHARED/samples/vmdk/vmdk-rs
S=$SHARED/samples/vmdk/SecurityRonin-vmdk
Q=$SHARED/samples/qemu-iotests
[ -d "$R" ] || skip "no samples in $SHARED/samples"

bzcat "$Q/iotest-version3.vmdk.bz2" > "$T/iotest-version3.vmdk" || fail "bzcat"
bzcat "$Q/afl9.vmdk.bz2" > "$T/afl9.vmdk" || fail "bzcat"

# iotest-version3 is a 16 GiB disk: hashing it costs minutes, so its output is
# compared with qemu-img's reading of it (qemu's own test sample) instead.
same_as_qemu() {  # IMG [convert options]
    local img=$1; shift
    rm -f "$T/out.raw"
    ok "$DISKIMG" convert "$@" -O raw "$img" "$T/out.raw"
    qcompare "$img" "$T/out.raw"
}

digest() {  # IMG SHA1 [convert options]: the whole virtual disk has this SHA-1
    local img=$1 want=$2; shift 2
    rm -f "$T/out.raw"
    ok "$DISKIMG" convert "$@" -O raw "$img" "$T/out.raw"
    local got; got=$(sha1sum < "$T/out.raw" | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail "$img: SHA-1 $got, expected $want"
}

from_pipe() {  # IMG SHA1: the same through stdin, probed and with -f vmdk
    local img=$1 want=$2 got
    for f in "" "-f vmdk"; do
        rm -f "$T/out.raw"

        # shellcheck disable=SC2086
        "$DISKIMG" convert $f -O raw - "$T/out.raw" < <(cat "$img") 2>"$T/err" ||
            { cat "$T/err"; fail "$img from a pipe ($f)"; }
        got=$(sha1sum < "$T/out.raw" | cut -d' ' -f1)
        [ "$got" = "$want" ] || fail "$img from a pipe ($f): SHA-1 $got, expected $want"
    done
}

digest "$R/monolithicSparse.vmdk" dd2fade471d68658b2ebbff7474f5d0a99da8989
digest "$R/0.vmdk" dd2fade471d68658b2ebbff7474f5d0a99da8989
digest "$R/streamOptimized.vmdk" dd2fade471d68658b2ebbff7474f5d0a99da8989
digest "$R/streamOptimizedWithMarkers.vmdk" b6fd01dd1b93b3589e6d76f7507af55c589ef69d
digest "$R/twoGbMaxExtentSparse.vmdk" dd2fade471d68658b2ebbff7474f5d0a99da8989
digest "$R/vmfs_thick.vmdk" 17eaf058191c5f2639d8f983ca7633e4f47087d1
digest "$S/plaso_image.vmdk" 76b29c91e6b9d180558e05e2e2058eac4b639562
digest "$S/dfvfs_ext2.vmdk" 4766c63c7acd5175015e3e8b90013a827e63f4ee
same_as_qemu "$T/iotest-version3.vmdk"
same_as_qemu "$T/iotest-version3.vmdk" -f vmdk

from_pipe "$R/streamOptimized.vmdk" dd2fade471d68658b2ebbff7474f5d0a99da8989
from_pipe "$R/streamOptimizedWithMarkers.vmdk" b6fd01dd1b93b3589e6d76f7507af55c589ef69d
"$DISKIMG" convert -O raw - "$T/out.raw" < <(cat "$T/iotest-version3.vmdk") ||
    fail "iotest-version3.vmdk from a pipe"
qcompare "$T/iotest-version3.vmdk" "$T/out.raw"

# the extent file of a split disk, given alone, is a disk of its own
digest "$R/twoGbMaxExtentSparse-s001.vmdk" dd2fade471d68658b2ebbff7474f5d0a99da8989

# info: what VMware wrote in the descriptors
"$DISKIMG" info --output=json "$R/vmfs_thick.vmdk" > "$T/info.json" || fail "info vmfs_thick"
grep -q '"create-type": "vmfs"' "$T/info.json" || fail "create-type vmfs missing"
grep -q '"cid": 24307876' "$T/info.json" || fail "cid of vmfs_thick"
grep -q '"format": "VMFS"' "$T/info.json" || fail "VMFS extent missing"
"$DISKIMG" info --output=json "$T/iotest-version3.vmdk" > "$T/info.json" || fail "info v3"
grep -q '"compressed": true' "$T/info.json" || fail "compressed extent not shown"
grep -q '"virtual-size": 17179869184' "$T/info.json" || fail "v3 virtual size"

# afl9: absurd capacity; refused at once, under a 64 MiB address-space cap
# outside ASan (which needs a huge reservation of its own)
if [ "${BUILD##*/}" = build-asan ]; then
    expect_error 'afl9.vmdk: .*(capacity|line-end|grain)' "$DISKIMG" convert -O raw "$T/afl9.vmdk" "$T/afl9.raw"
else
    expect_error 'afl9.vmdk: .*(capacity|line-end|grain)' \
        bash -c 'ulimit -v 65536; exec "$0" convert -O raw "$1" "$2"' "$DISKIMG" "$T/afl9.vmdk" "$T/afl9.raw"
fi
[ ! -e "$T/afl9.raw" ] || fail "afl9: an output was left behind"
exit 0
