#!/bin/bash
# convert --bitmaps against qemu-img convert --bitmaps (the bitmaps listed
# by qemu-img info, each one's content read by qemu through qemu-nbd as in
# bitmap.sh, check clean, same guest data; refusals with qemu-img's
# messages and nothing left at the target), and convert -n into a target
# with persistent bitmaps: the enabled ones record the ranges written, as
# qemu-img's do, the disabled ones stay as they were.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need qemu-nbd
need perl
cd "$T" || fail "cd"

dirty() {
    local sock out
    sock=$(mktemp -u "$T/nbd.XXXXXXXX") || fail "mktemp"
    qemu-nbd -r -f qcow2 -B "$2" -k "$sock" --fork "$1" || fail "qemu-nbd $1 $2"
    out=$(qemu-img map --output=json --image-opts \
        "driver=nbd,server.type=unix,server.path=$sock,x-dirty-bitmap=qemu:dirty-bitmap:$2") ||
        fail "qemu-img map of bitmap $2 of $1"
    echo "$out" | grep '"data": false' | sed 's/, "depth.*//' || true
}
names() {
    qemu-img info --output=json "$1" | perl -0777 -ne \
        'print "$1\n" while /"name": "([^"]*)"/g'
}
# same TAG Q D: qemu-img's result Q and ours D agree
same() {
    local a b n
    qemu-img check -q "$3" || { qemu-img check "$3"; fail "$1: not clean"; }
    a=$(qemu-img info --output=json "$2" | grep -v '"filename"\|"actual-size"')
    b=$(qemu-img info --output=json "$3" | grep -v '"filename"\|"actual-size"')
    [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b"); fail "$1: info differs"; }
    for n in $(names "$2"); do
        a=$(dirty "$2" "$n"); b=$(dirty "$3" "$n")
        [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b"); fail "$1: bitmap $n differs"; }
    done
    qcompare "$2" "$3"
}

qemu-img create -q -f qcow2 base.qcow2 64M
qemu-io -c 'write -P 7 0 1M' -c 'write -P 8 50M 3M' base.qcow2 >/dev/null
qemu-img bitmap --add base.qcow2 b64k
qemu-img bitmap --add -g 512 base.qcow2 b512
qemu-img bitmap --add -g 2G base.qcow2 huge
qemu-img bitmap --add -g 4k base.qcow2 dis
qemu-io -c 'write 1k 3k' -c 'write 10M 70k' -c 'write 63M 1536' base.qcow2 >/dev/null
qemu-img bitmap --disable base.qcow2 dis
qemu-io -c 'write 20M 1k' -c 'write 40000k 200k' base.qcow2 >/dev/null
[ "$(dirty base.qcow2 b512 | wc -l)" = 5 ] || fail "the bitmap reader sees no dirty ranges"

# --- convert --bitmaps -----------------------------------------------------
qemu-img convert --bitmaps -O qcow2 base.qcow2 q.qcow2
"$DISKIMG" convert --bitmaps -O qcow2 base.qcow2 d.qcow2 || fail "convert --bitmaps"
[ "$(names d.qcow2 | wc -l)" = 4 ] || fail "bitmaps not copied"
same "convert --bitmaps" q.qcow2 d.qcow2
rm -f q.qcow2 d.qcow2
qemu-img convert --bitmaps -c -O qcow2 -o cluster_size=4k base.qcow2 q.qcow2
"$DISKIMG" convert --bitmaps -c -O qcow2 -o cluster_size=4k base.qcow2 d.qcow2 || fail "-c"
same "convert --bitmaps -c, 4 KiB clusters" q.qcow2 d.qcow2

# in-use bitmaps: refused, or skipped with a warning each
cp base.qcow2 inuse.qcow2
(qemu-io -c 'write 0 64k' -c 'sigraise 9' inuse.qcow2 >/dev/null 2>&1; true) 2>/dev/null
qemu-img bitmap --add inuse.qcow2 fresh
qemu-img check -q inuse.qcow2 || fail "in-use image not clean"

# both TAG ARGS...: the same exit status and messages; a failure leaves no output
both() {
    local tag=$1 qrc=0 drc=0; shift
    rm -f o.qcow2 o.raw q.out d.out
    qemu-img convert "$@" 2>q.err || qrc=$?
    [ -e o.qcow2 ] && mv o.qcow2 q.out; [ -e o.raw ] && mv o.raw q.out
    "$DISKIMG" convert "$@" 2>d.err || drc=$?
    [ $qrc = $drc ] || { cat q.err d.err; fail "$tag: exit $drc, qemu-img $qrc"; }
    sed -i 's/^qemu-img: /diskimg: /' q.err
    cmp -s q.err d.err || { diff q.err d.err; fail "$tag: messages differ"; }
    if [ $drc != 0 ]; then
        [ -e o.qcow2 ] || [ -e o.raw ] && fail "$tag: output left behind"
    else
        same "$tag" q.out o.qcow2
    fi
    return 0
}
both "in use" --bitmaps -O qcow2 inuse.qcow2 o.qcow2
both "in use, skipped" --bitmaps --skip-broken-bitmaps -O qcow2 inuse.qcow2 o.qcow2
both "raw output" --bitmaps -O raw base.qcow2 o.raw
both "v2 output" --bitmaps -O qcow2 -o compat=0.10 base.qcow2 o.qcow2
qemu-img create -q -f raw raw.img 64M
both "raw source" --bitmaps -f raw -O qcow2 raw.img o.qcow2
both "two sources" --bitmaps -O qcow2 base.qcow2 base.qcow2 o.qcow2
both "--skip-broken-bitmaps alone" --skip-broken-bitmaps -O qcow2 base.qcow2 o.qcow2

# -n --bitmaps into a target: added; a name it has already is an error
qemu-img create -q -f qcow2 t.qcow2 64M
cp t.qcow2 q.qcow2; cp t.qcow2 d.qcow2
qemu-img convert -n --bitmaps -O qcow2 base.qcow2 q.qcow2
"$DISKIMG" convert -n --bitmaps -O qcow2 base.qcow2 d.qcow2 || fail "-n --bitmaps"
same "-n --bitmaps" q.qcow2 d.qcow2
qemu-img convert -n --bitmaps -O qcow2 base.qcow2 q.qcow2 2>q.err && fail "qemu-img: twice"
expect_error "^diskimg: Failed to create bitmap dis: Bitmap already exists: dis" \
    "$DISKIMG" convert -n --bitmaps -O qcow2 base.qcow2 d.qcow2
sed 's/^qemu-img: /diskimg: /' q.err | cmp -s - "$T/stderr" || fail "-n --bitmaps twice: message"
qemu-img check -q d.qcow2 || fail "-n --bitmaps twice: not clean"

# --- convert -n into a target with bitmaps: the enabled ones record --------
qemu-img create -q -f qcow2 src.qcow2 64M
qemu-io -c 'write -P 3 5M 100k' -c 'write -P 4 30M 1M' src.qcow2 >/dev/null
for t in "" --target-is-zero; do
    cp base.qcow2 q.qcow2; cp base.qcow2 d.qcow2
    qemu-img convert -n $t -O qcow2 src.qcow2 q.qcow2
    "$DISKIMG" convert -n $t -O qcow2 src.qcow2 d.qcow2 || fail "-n $t"
    if [ -z "$t" ]; then
        same "-n over bitmaps" q.qcow2 d.qcow2
    else
        # qemu-img writes the 100 KiB as they are, diskimg whole clusters:
        # the bitmaps of 64 KiB and coarser agree, the 512-byte one may
        # record the rest of the last cluster too
        qemu-img check -q d.qcow2 || fail "-n $t: not clean"
        qcompare q.qcow2 d.qcow2
        for n in b64k huge dis; do
            [ "$(dirty q.qcow2 $n)" = "$(dirty d.qcow2 $n)" ] || fail "-n $t: bitmap $n differs"
        done
        dirty d.qcow2 b512 | grep -q '"start": 5242880, "length": 131072' ||
            fail "-n $t: the written cluster is not recorded"
    fi
done
# a conversion that fails midway leaves the enabled bitmaps in use
# (inconsistent), the image without errors (leaked clusters at worst, as
# any failed convert -n)
cp base.qcow2 d.qcow2
expect_error "." env DISKIMG_FAULT=write:3:EIO "$DISKIMG" convert -n -O qcow2 src.qcow2 d.qcow2
rc=0; qemu-img check -q d.qcow2 >/dev/null 2>&1 || rc=$?
[ $rc = 0 ] || [ $rc = 3 ] || { qemu-img check d.qcow2; fail "failed -n: check exit $rc"; }
qemu-img info --output=json d.qcow2 | grep -q '"in-use"' || fail "failed -n: bitmaps not in use"
echo "convert-bitmaps: ok"
