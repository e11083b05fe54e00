#!/bin/bash
# diskimg bitmap against qemu-img bitmap on identical copies: every
# operation and combinations of them, merges across granularities and from
# another file, names of 1 and 1023 bytes, granularities 512 B .. 2 GiB.
# After each run: the exit status and message equal qemu-img's, qemu-img
# info's JSON equal (but for file name and size), qemu-img check clean, and
# the CONTENT of every bitmap equal.  The content is read by qemu itself:
# qemu-nbd exports a bitmap as the block-status context
# qemu:dirty-bitmap:NAME, and qemu-img map with the nbd driver's
# x-dirty-bitmap option reports its dirty ranges as "data": false.
# Then hostile images (refused with a message, the file unchanged) and
# in-use (inconsistent) bitmaps.  Failed writes and kill -9: bitmap-crash.sh.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need qemu-nbd
need perl
cd "$T" || fail "cd"

# dirty IMG NAME: the dirty ranges of bitmap NAME, as qemu reads them
# (a socket name per call: a server that exits removes its socket path)
dirty() {
    local sock out
    sock=$(mktemp -u "$T/nbd.XXXXXXXX") || fail "mktemp"
    qemu-nbd -r -f qcow2 -B "$2" -k "$sock" --fork "$1" || fail "qemu-nbd $1 $2"
    out=$(qemu-img map --output=json --image-opts \
        "driver=nbd,server.type=unix,server.path=$sock,x-dirty-bitmap=qemu:dirty-bitmap:$2") ||
        fail "qemu-img map of bitmap $2 of $1"
    echo "$out" | grep '"data": false' | sed 's/, "depth.*//' || true
}

# bitmaps IMG: qemu-img info's bitmap list (one line per bitmap)
bitmaps() {
    qemu-img info --output=json "$1" | perl -0777 -ne \
        'if (/"bitmaps": \[(.*?)\n {12}\]/s) { $b = $1; $b =~ s/\s+//g; $b =~ s/\},\{/}\n{/g; print "$b\n" }'
}

# same TAG: q.qcow2 (qemu-img's) and d.qcow2 (ours) agree in info, check
# and the content of every bitmap
same() {
    local tag=$1 a b n
    qemu-img check -q d.qcow2 || { qemu-img check d.qcow2; fail "$tag: not clean"; }
    a=$(qemu-img info --output=json q.qcow2 | grep -v '"filename"\|"actual-size"')
    b=$(qemu-img info --output=json d.qcow2 | grep -v '"filename"\|"actual-size"')
    [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b"); fail "$tag: info differs"; }
    for n in $(bitmaps q.qcow2 | sed -n 's/.*"name":"\([^"]*\)".*/\1/p'); do
        bitmaps q.qcow2 | grep -q '"in-use"' && continue
        a=$(dirty q.qcow2 "$n"); b=$(dirty d.qcow2 "$n")
        [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b"); fail "$tag: bitmap $n differs"; }
    done
    qcompare q.qcow2 d.qcow2
}

# both TAG BASE ARGS...: `bitmap ARGS` on copies of BASE by qemu-img and
# by us; same exit status and message (node names as file names)
both() {
    local tag=$1 base=$2 qrc=0 drc=0; shift 2
    cp "$base" q.qcow2; cp "$base" d.qcow2
    qemu-img bitmap "$@" 2>q.err || qrc=$?
    set -- "${@/q.qcow2/d.qcow2}"
    "$DISKIMG" bitmap "$@" 2>d.err || drc=$?
    [ $qrc = $drc ] || { cat q.err d.err; fail "$tag: exit $drc, qemu-img $qrc"; }
    sed -i 's/^qemu-img: /diskimg: /; s/#block[0-9]*/q.qcow2/g' q.err
    sed -i 's/d\.qcow2/q.qcow2/g' d.err
    cmp -s q.err d.err || { diff q.err d.err; fail "$tag: messages differ"; }
    # nothing written (a refusal): qemu-img's copy must still list the same
    if cmp -s "$base" d.qcow2; then
        [ "$(bitmaps q.qcow2)" = "$(bitmaps "$base")" ] || fail "$tag: qemu-img changed it"
        return 0
    fi
    same "$tag"
}

# --- images --------------------------------------------------------------
qemu-img create -q -f qcow2 base.qcow2 64M
qemu-io -c 'write -P 7 0 1M' base.qcow2 >/dev/null
qemu-img bitmap --add base.qcow2 b64k
qemu-img bitmap --add -g 512 base.qcow2 b512
qemu-img bitmap --add -g 2G base.qcow2 huge
qemu-img bitmap --add -g 4k base.qcow2 dis
qemu-io -c 'write 1k 3k' -c 'write 10M 70k' -c 'write 63M 1536' base.qcow2 >/dev/null
qemu-img bitmap --disable base.qcow2 dis
qemu-io -c 'write 20M 1k' -c 'write 40000k 200k' base.qcow2 >/dev/null
[ "$(dirty base.qcow2 b512 | wc -l)" = 5 ] || fail "the bitmap reader sees no dirty ranges"
[ "$(dirty base.qcow2 dis | wc -l)" = 3 ] || fail "disabled bitmap recorded writes"
qemu-img create -q -f qcow2 other.qcow2 64M
qemu-img bitmap --add -g 128k other.qcow2 o
qemu-io -c 'write 5M 1k' -c 'write 33M 1M' other.qcow2 >/dev/null
qemu-img create -q -f qcow2 small.qcow2 32M
qemu-img bitmap --add small.qcow2 s
qemu-img create -q -f qcow2 -o cluster_size=4k plain.qcow2 16M
long=$(printf 'n%.0s' $(seq 1023)); toolong=${long}x

# --- each operation, combinations, errors ---------------------------------
both "add" base.qcow2 --add q.qcow2 new
both "add -g 512" base.qcow2 --add -g 512 q.qcow2 new
both "add -g 2G" base.qcow2 --add -g 2G q.qcow2 new
both "add -g 0 (default)" plain.qcow2 --add -g 0 q.qcow2 new
both "add --disable" base.qcow2 --add --disable q.qcow2 new
both "add, disable, enable" base.qcow2 --add -g 4k --disable --enable q.qcow2 new
both "add 1-byte name" plain.qcow2 --add q.qcow2 x
both "add 1023-byte name" base.qcow2 --add q.qcow2 "$long"
both "add 1024-byte name" base.qcow2 --add q.qcow2 "$toolong"
both "add empty name" base.qcow2 --add q.qcow2 ""
both "add existing" base.qcow2 --add q.qcow2 b512
both "add -g 256" base.qcow2 --add -g 256 q.qcow2 x
both "add -g 3000" base.qcow2 --add -g 3000 q.qcow2 x
both "add -g 4G" base.qcow2 --add -g 4G q.qcow2 x
both "add -g abc" base.qcow2 --add -g abc q.qcow2 x
both "remove" base.qcow2 --remove q.qcow2 b512
both "remove the last one" small.qcow2 --remove q.qcow2 s
both "remove missing" base.qcow2 --remove q.qcow2 nope
both "clear" base.qcow2 --clear q.qcow2 b64k
both "clear missing" base.qcow2 --clear q.qcow2 nope
both "enable" base.qcow2 --enable q.qcow2 dis
both "disable" base.qcow2 --disable q.qcow2 b64k
both "merge fine into coarse" base.qcow2 --merge b512 q.qcow2 b64k
both "merge coarse into fine" base.qcow2 --merge b64k q.qcow2 b512
both "merge 2G into 512" base.qcow2 --merge huge q.qcow2 b512
both "merge into disabled" base.qcow2 --merge b512 q.qcow2 dis
both "merge missing" base.qcow2 --merge nope q.qcow2 b64k
both "merge from a file" base.qcow2 --merge o -b other.qcow2 -F qcow2 q.qcow2 b512
both "merge from a file, probed" base.qcow2 --merge o -b other.qcow2 q.qcow2 dis
both "merge from a smaller disk" base.qcow2 --merge s -b small.qcow2 q.qcow2 b64k
both "add, merge" base.qcow2 --add -g 1M --merge b512 --merge dis q.qcow2 new
both "add, merge, remove, add" base.qcow2 --add --merge b512 --remove --add q.qcow2 new
both "clear, merge" base.qcow2 --clear --merge dis q.qcow2 b64k
both "first fails: nothing kept" base.qcow2 --clear --add q.qcow2 new
both "later fails: earlier kept" base.qcow2 --add --merge nope q.qcow2 new
both "remove, then add again" base.qcow2 --remove --add -g 512 q.qcow2 b64k
both "no operation" base.qcow2 q.qcow2 b64k
both "no bitmap name" base.qcow2 --add q.qcow2
both "-g without --add" base.qcow2 --remove -g 512 q.qcow2 b64k
both "-b without --merge" base.qcow2 --remove -b other.qcow2 q.qcow2 b64k
both "-F without -b" base.qcow2 --merge o -F qcow2 q.qcow2 b64k
qemu-img create -q -f qcow2 -o compat=0.10 v2.qcow2 1M
both "add to a v2 image" v2.qcow2 --add q.qcow2 x
qemu-img create -q -f raw raw.img 1M
cp raw.img r.img
expect_error "^diskimg: Operation add on bitmap x failed: Can't store persistent bitmaps to r.img: Operation not supported" \
    "$DISKIMG" bitmap --add -f raw r.img x
cmp -s raw.img r.img || fail "raw image changed"

# --- in-use (inconsistent) bitmaps: only --remove, as qemu -----------------
cp base.qcow2 inuse.qcow2
(qemu-io -c 'write 0 64k' -c 'sigraise 9' inuse.qcow2 >/dev/null 2>&1; true) 2>/dev/null
bitmaps inuse.qcow2 | grep -q '"in-use"' || fail "no in-use bitmap made"
both "clear in use" inuse.qcow2 --clear q.qcow2 b64k
both "merge from in use" inuse.qcow2 --merge b512 q.qcow2 b64k
both "enable in use" inuse.qcow2 --enable q.qcow2 dis
both "remove in use" inuse.qcow2 --remove q.qcow2 b64k
both "add beside in use" inuse.qcow2 --add q.qcow2 new

# --- hostile images: refused with a message, nothing written --------------
# field IMG: the bitmap directory offset, entry 0's table offset, and the
# offsets of the L1 and refcount tables
fields() {
    perl -e 'open F, "<", $ARGV[0] or die; binmode F; read F, $h, 65536;
        $i = index($h, pack("N", 0x23852875)); ($nb, $r, $ds, $do) = unpack("NNQ>Q>", substr($h, $i + 8, 24));
        seek F, $do, 0; read F, $d, 24; ($to) = unpack("Q>", $d);
        print "$do $to ", unpack("Q>", substr($h, 40, 8)), " ", unpack("Q>", substr($h, 48, 8)), "\n"' "$1"
}
# poke IMG OFFSET PACK VALUE: write one packed field
poke() {
    perl -e 'open F, "+<", $ARGV[0] or die; binmode F; seek F, $ARGV[1], 0; print F pack($ARGV[2], $ARGV[3])' "$@"
}
hostile() {
    local tag=$1 re=$2; shift 2
    cp h.qcow2 h0.qcow2
    expect_error "$re" "$DISKIMG" bitmap "$@" h.qcow2 b512
    cmp -s h.qcow2 h0.qcow2 || fail "$tag: the image was changed"
}
read -r dir tab l1 reft < <(fields base.qcow2)
cp base.qcow2 h.qcow2; poke h.qcow2 $((dir + 17)) C 40
hostile "granularity bits 40" "h.qcow2: .*granularity_bits 40 is out of range" --clear
cp base.qcow2 h.qcow2; poke h.qcow2 $((dir + 8)) N 2147483647
hostile "absurd table size" "h.qcow2: .*table of 2147483647 entries is out of range" --remove
cp base.qcow2 h.qcow2; poke h.qcow2 $((dir + 18)) n 60000
hostile "name runs past the directory" "h.qcow2: .*runs past the directory size" --add
cp base.qcow2 h.qcow2; poke h.qcow2 $((dir + 12)) N 256
hostile "reserved flags" "h.qcow2: .*reserved flags" --enable
cp base.qcow2 h.qcow2; poke h.qcow2 "$tab" Q\> "$l1"
hostile "data cluster is the L1 table" "h.qcow2: .*(metadata|corruption)" --clear
hostile "data cluster is the L1 table (merge)" "h.qcow2: .*(metadata|corruption)" --merge b512
cp base.qcow2 h.qcow2; poke h.qcow2 "$tab" Q\> $((1 << 40))
hostile "data cluster past the end" "h.qcow2: .*(past the end|corruption)" --merge b64k
cp base.qcow2 h.qcow2; poke h.qcow2 "$tab" Q\> $(((1 << 60) | 65536))
hostile "reserved bits in a table entry" "h.qcow2: .*(reserved bits|corruption)" --merge b64k
cp base.qcow2 h.qcow2; poke h.qcow2 "$dir" Q\> "$reft"
hostile "table is the refcount table" "h.qcow2: .*(metadata|corruption|overlap)" --remove
echo "bitmap: ok"
