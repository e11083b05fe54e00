#!/bin/bash
# Damaged and hostile VHDXs laid out by tests/tools/vhdxmake.py --corrupt
# (the qemu-made cases are in the bad-image corpus): refused with the file,
# the offset and the problem named, exit 1, no output left, the input
# unchanged.  Logs that do not replay cleanly (an entry whose checksum
# fails, of another log, writing past the file's end as the log leaves it,
# a file shorter than the log's flushed size) are errors.  BAT problems
# open (info) but fail reads, and check reports them (exit 2, with
# qemu-img's summary where it checks the same).  A damaged
# region table 1 or newer header reads through the good copy; check
# reports it and check -r all rewrites it from the good one, after which
# qemu-img finds the image clean.
. "$(dirname "$0")/lib.sh"
need python3
MK="python3 $TOP/tests/tools/vhdxmake.py"
M=$((1 << 20))

make_bad() {   # make_bad NAME CORRUPTION [vhdxmake options]
    local name=$1 what=$2; shift 2
    $MK "$T/$name.vhdx" --size $((6 * M)) --write 0:8192:0x11 --write $((4 * M)):4096:0x22 \
        --corrupt "$what" "$@" || fail "vhdxmake --corrupt $what"
}
refused() {   # refused REGEX NAME: convert and map fail, nothing left, input unchanged
    local sum
    sum=$(sha256sum < "$T/$2.vhdx")
    expect_error "$1" "$DISKIMG" convert -O raw "$T/$2.vhdx" "$T/out.raw"
    grep -q "$2.vhdx: .*(offset [0-9]*)" "$T/stderr" || fail "$2: no file or offset named"
    [ ! -e "$T/out.raw" ] || fail "$2: output left"
    expect_error "$1" "$DISKIMG" map "$T/$2.vhdx"
    [ "$(sha256sum < "$T/$2.vhdx")" = "$sum" ] || fail "$2: the input changed"
}
while IFS='|' read -r what opts re; do
    make_bad "b-$what" "$what" $opts
    refused "$re" "b-$what"
    expect_error "$re" "$DISKIMG" info "$T/b-$what.vhdx"
done <<'EOF'
both-headers||no valid header: header checksum mismatch
headers-same-seq||the two headers differ but have the same sequence number 10
region-required||region 2 has an unknown type 11111111-2222-3333-4444-555555555555 marked required
region-overlap||regions 0 and 1 overlap
region-missing||region table has no BAT region
meta-required||metadata item 5 has an unknown type 99999999-2222-3333-4444-555555555555 marked required
meta-missing||metadata table has no page 83 data item
block-size||block size 3145728 is not a power of two from 1 MiB to 256 MiB
sector-size||logical sector size 1024 is neither 512 nor 4096
disk-size||virtual disk size 71468255805440 is not from 1 byte to 64 TiB
bat-small|--size 8796093022208|BAT region of 1048576 bytes cannot hold the 8390655 entries
log-crc|--log 2|the log holds no valid entry sequence to replay
log-guid|--log 1|the log holds no valid entry sequence to replay
log-flushed|--log 1|is shorter than the log's flushed size .*truncated image
log-past-eof|--log 2|log entry 1001 writes 4096 bytes at [0-9]+, past the file's end as the log leaves it
EOF

# BAT problems: the image opens, reads of the block fail, check reports
$MK "$T/p.vhdx" --size $((6 * M)) || fail vhdxmake
while IFS='|' read -r what opts re; do
    make_bad "b-$what" "$what" ${opts//PARENT/$T/p.vhdx}
    ok "$DISKIMG" info "$T/b-$what.vhdx" > /dev/null
    refused "$re" "b-$what"
    rc=0
    "$DISKIMG" check "$T/b-$what.vhdx" > /dev/null 2> "$T/check.err" || rc=$?
    [ $rc = 2 ] || fail "check $what: exit $rc"
    grep -Eq "ERROR: BAT entry [0-9]+: .*$re" "$T/check.err" || { cat "$T/check.err"; fail "check $what"; }
    # where qemu-img checks the same (blocks past the end, over metadata),
    # the same summary and exit status
    case $what in bat-past-eof|bat-over-meta|truncate)
        command -v qemu-img > /dev/null || continue
        qrc=0
        qemu-img check "$T/b-$what.vhdx" > "$T/q.out" 2>/dev/null || qrc=$?
        "$DISKIMG" check "$T/b-$what.vhdx" > "$T/d.out" 2>/dev/null
        [ $qrc = 2 ] && diff "$T/q.out" "$T/d.out" || fail "check $what: not qemu-img's summary"
    esac
done <<'EOF'
bat-past-eof||block at [0-9]+ is past the end of the file
bat-over-meta||overlaps the metadata region
bat-overlap||overlaps another block
bat-reserved||reserved bits set
bat-state||payload BAT entry has unknown state 4
truncate||past the end of the file .*truncated
partial-no-bitmap|--type diff --parent PARENT --loc relative_path=p.vhdx|partially present, but its chunk has no sector bitmap
EOF

# damaged copies: read through the good one, reported, repaired
for what in region1 header; do
    make_bad "c-$what" "$what" --expect "$T/c.raw"
    ok "$DISKIMG" convert -O raw "$T/c-$what.vhdx" "$T/got.raw"
    cmp "$T/got.raw" "$T/c.raw" || fail "$what: reads wrong"
    rc=0
    "$DISKIMG" check "$T/c-$what.vhdx" > /dev/null 2> "$T/check.err" || rc=$?
    [ $rc = 2 ] || fail "check $what: exit $rc"
    grep -q "ERROR: .* is damaged" "$T/check.err" || { cat "$T/check.err"; fail "check $what names nothing"; }
    ok "$DISKIMG" check -r all "$T/c-$what.vhdx" > "$T/fix.out"
    grep -q "1 corruptions" "$T/fix.out" || fail "check -r all $what: nothing repaired"
    ok "$DISKIMG" check "$T/c-$what.vhdx" > /dev/null
    if command -v qemu-img > /dev/null; then
        qemu-img check "$T/c-$what.vhdx" > /dev/null || fail "qemu-img check after repairing $what"
        qcompare "$T/c-$what.vhdx" "$T/c.raw"
    fi
done
echo ok
