#!/bin/bash
# Every pair of qcow2 features qemu allows together, in at least one image
# (issue 10 item 13): cluster sizes 512 B..2 MiB, v2/v3, extended L2, an
# external data file (and data_file_raw), zlib/zstd compressed clusters, a
# backing file, a snapshot, bitmaps, refcount widths, lazy refcounts,
# preallocation.  tests/qcow2/matrix.py makes the pairwise matrix and
# tests/qcow2/make-matrix.sh the images (qemu-img, qemu-io).  diskimg's
# reading of each is checked against qemu's: the raw conversion (and the
# snapshot's) by qemu-img compare and byte for byte, map --output=json and
# the human map, info's qcow2 data, and check --output=json.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
need python3

key=qcow2-matrix-$(cat "$TOP/tests/qcow2/matrix.py" "$TOP/tests/qcow2/make-matrix.sh" |
                   cksum | cut -d' ' -f1)
cached "$key" "$T/m" bash "$TOP/tests/qcow2/make-matrix.sh" || fail "making the images"
section() { awk -v k="\"$2\": " 'index($0, k) == 5 {on=1} on {print} on && /^    []}],?$/ {exit}' "$1" | sed 's/,$//'; }
same() {    # same WHAT CMD...: diskimg CMD and qemu-img CMD: same exit status and output
    local what=$1 rc=0 qrc=0; shift
    "$DISKIMG" "$@" >mine.out 2>mine.err || rc=$?
    qemu-img "$@" >ref.out 2>ref.err || qrc=$?
    grep -q "AddressSanitizer\|runtime error" mine.err && { cat mine.err; fail "$conf: sanitizer"; }
    [ $rc = $qrc ] || { cat mine.err ref.err; fail "$conf: $what: exit $rc, qemu-img $qrc"; }
    cmp -s mine.out ref.out || { diff mine.out ref.out | head; fail "$conf: $what differs"; }
}

n=0 comp=0
for d in "$T"/m/*/; do
    i=$(basename "$d")
    n=$((n + 1))
    cd "$d" || fail "cd $d"
    conf=$(cat $i.conf)
    img=$i.qcow2
    # content: diskimg's raw is what qemu reads, by qemu-img compare and byte for byte
    ok "$DISKIMG" convert -O raw $img mine.raw
    qemu-img compare -q -F qcow2 -f raw mine.raw $img || fail "$conf: qemu-img compare differs"
    qemu-img convert -O raw $img ref.raw
    cmp -s mine.raw ref.raw || fail "$conf: raw conversion differs"
    if [[ $conf == *snap=yes* ]]; then
        ok "$DISKIMG" convert -l s1 -O raw $img mine.raw
        qemu-img convert -l s1 -O raw $img ref.raw
        cmp -s mine.raw ref.raw || fail "$conf: snapshot s1 differs"
    fi
    rm -f mine.raw ref.raw
    same "map --output=json" map --output=json $img
    same "map" map $img
    same "check --output=json" check --output=json $img
    grep -q '"compressed-clusters": [1-9]' mine.out && comp=$((comp + 1))
    # info: the qcow2 data, the snapshots, sizes
    "$DISKIMG" info --output=json $img >mine.json || fail "$conf: info"
    qemu-img info --output=json $img >ref.json
    for s in format-specific snapshots; do
        section mine.json $s >a; section ref.json $s >b
        cmp -s a b || { diff a b; fail "$conf: info \"$s\" differs"; }
    done
    for k in virtual-size cluster-size dirty-flag backing-filename; do
        a=$(grep "^    \"$k\"" mine.json | sed 's/,$//'); b=$(grep "^    \"$k\"" ref.json | sed 's/,$//')
        [ "$a" = "$b" ] || fail "$conf: info $k: $a vs $b"
    done
done
[ $n -ge 20 ] || fail "only $n images"
[ $comp -ge 5 ] || fail "only $comp images hold compressed clusters"
exit 0
