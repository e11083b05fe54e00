#!/bin/bash
# The bad-image corpus: hostile and damaged images made by patching small
# qemu-img-made images with dd/printf.
#   tests/corpus/make-bad-images.sh OUTDIR
# Writes the images into OUTDIR (and a few subfolders) and OUTDIR/MANIFEST,
# one case a line, tab-separated:
#   FILE  INFO  CONVERT  REGEX  CHECK
# FILE is relative to OUTDIR; INFO and CONVERT say what `diskimg info FILE`
# and `diskimg convert FILE ...` must do: `bad` = exit 1 with a message on
# stderr matching REGEX (which names the problem), `ok` = exit 0 (for
# convert: the same bytes as qemu-img's reading of FILE), `same` = exit 0
# with the bytes of the undamaged image named in the REGEX column (damage a
# redundant copy repairs, where qemu-img reads zeros).  Only info can be
# `ok` while convert is `bad`: info does not read data clusters.  CHECK is
# the exit status `diskimg check FILE` must give (2: corruptions found), or
# `-` (not run).
# tests/corpus-bad-images.sh runs them.  Needs qemu-img, qemu-io, od, dd,
# python3 (tests/tools/vhdxpatch.py: VHDX fields behind a CRC-32C).
set -eu
out=${1:?usage: make-bad-images.sh OUTDIR}
tools=$(cd "$(dirname "$0")/../tools" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$out"
manifest=$out/MANIFEST
: > "$manifest"
work=$out/.work
rm -rf "$work"; mkdir -p "$work"

# ---- helpers --------------------------------------------------------------
poke() {  # poke FILE OFFSET HEX
    local file=$1 off=$2 hex=$3 esc=""
    while [ -n "$hex" ]; do esc="$esc\\x${hex:0:2}"; hex=${hex:2}; done
    printf "$esc" | dd of="$file" bs=1 seek="$off" conv=notrunc status=none
}
be16() { printf '%04x' "$1"; }
be32() { printf '%08x' "$1"; }
be64() { printf '%016x' "$1"; }
le32() { local h; h=$(printf '%08x' "$1"); echo "${h:6:2}${h:4:2}${h:2:2}${h:0:2}"; }
le64() { local h; h=$(printf '%016x' "$1"); local r="" i; for i in 14 12 10 8 6 4 2 0; do r="$r${h:$i:2}"; done; echo "$r"; }
peek() {  # peek FILE OFFSET BYTES -> big-endian number
    local hex; hex=$(od -v -A n -t x1 -j "$2" -N "$3" "$1" | tr -d ' \n')
    echo $((16#$hex))
}
peekle() {  # little-endian
    local hex r="" i; hex=$(od -v -A n -t x1 -j "$2" -N "$3" "$1" | tr -d ' \n')
    for ((i = ${#hex} - 2; i >= 0; i -= 2)); do r="$r${hex:$i:2}"; done
    echo $((16#$r))
}
fsize() { stat -c %s "$1"; }
# the first header extension of type $2 in $1 (a v3 image), or nothing
find_ext() {
    local f=$1 off type; off=$(peek "$f" 100 4)
    while [ "$off" -lt 4096 ]; do
        type=$(peek "$f" "$off" 4)
        [ "$type" = 0 ] && return 0
        [ "$type" = $(($2)) ] && { echo "$off"; return 0; }
        off=$(( off + 8 + ($(peek "$f" $((off + 4)) 4) + 7) / 8 * 8 ))
    done
}
# case FILE INFO CONVERT REGEX  (CHECK=N before the call: check's status)
case_() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:--}" "${CHECK:--}" >> "$manifest"; }
# patched NAME BASE INFO CONVERT REGEX OFFSET HEX [OFFSET HEX]...
patched() {
    local name=$1 base=$2 info=$3 conv=$4 re=$5; shift 5
    cp "$base" "$name"
    while [ $# -ge 2 ]; do poke "$name" "$1" "$2"; shift 2; done
    case_ "$name" "$info" "$conv" "$re"
}

# ---- qcow2: the base image ----------------------------------------------
# 256 KiB virtual, 4 KiB clusters: data at 0 and 64K, a compressed cluster
# at 128K, a zero cluster at 192K.  Layout as qemu-img makes it: header,
# refcount table, refcount block, L1, L2, data, compressed data at the end.
B=$work/q.qcow2
qemu-img create -q -f qcow2 -o cluster_size=4096 "$B" 256K
qemu-io -f qcow2 -c 'write -P 0x11 0 8K' -c 'write -P 0x12 64K 4K' \
    -c 'write -c -P 0x13 128K 4K' -c 'write -z 192K 4K' "$B" >/dev/null
QSIZE=$(fsize "$B")
L1=$(peek "$B" 40 8)
REFT=$(peek "$B" 48 8)
REFB=$(( $(peek "$B" "$REFT" 8) ))
L2=$(( $(peek "$B" "$L1" 8) & 0x00fffffffffffe00 ))
D0=$(( $(peek "$B" "$L2" 8) & 0x00fffffffffffe00 ))
CENT=$((L2 + 32 * 8))                      # L2 entry of the compressed cluster
CRAW=$(peek "$B" "$CENT" 8)
COFF=$(( CRAW & ((1 << 58) - 1) ))
PAST=$(( (QSIZE + 4095) / 4096 * 4096 + 4096 * 4 ))   # cluster-aligned, past EOF
B2=$work/q2.qcow2                          # version 2 (no zero flag, no extensions)
qemu-img convert -q -f qcow2 -O qcow2 -o compat=0.10,cluster_size=4096 "$B" "$B2"

h() { patched "qcow2-hdr-$1.qcow2" "$B" bad bad "$2" "${@:3}"; }
hok() { patched "qcow2-hdr-$1.qcow2" "$B" ok ok "" "${@:2}"; }

# magic, version
h magic-0 "no known format signature" 0 00000000
h magic-qfi "no known format signature" 3 fa
h version-0 "unsupported qcow2 version 0" 4 "$(be32 0)"
h version-1 "qcow version 1 images are not supported" 4 "$(be32 1)"
h version-4 "unsupported qcow2 version 4" 4 "$(be32 4)"
h version-max "unsupported qcow2 version 4294967295" 4 ffffffff
# backing file name: offset and size at their edges
h bfo-max "backing file name offset [0-9]+ is outside the header cluster" 8 ffffffffffffffff 16 "$(be32 4)"
hok bfo-0 8 "$(be64 0)" 16 "$(be32 8)"   # offset 0: no backing file (qemu too)
h bfo-end "backing file name .* runs past the header cluster" 8 "$(be64 4095)" 16 "$(be32 2)"
h bfs-1024 "backing file name of 1024 bytes is too long \(max 1023\)" 8 "$(be64 2048)" 16 "$(be32 1024)"
h bfs-max "backing file name of 4294967295 bytes is too long" 8 "$(be64 2048)" 16 ffffffff
# cluster_bits
for v in 0 1 8 22 31 32 63 64 4294967295; do
    h cbits-$v "cluster_bits $v is out of range 9..21" 20 "$(be32 $v)"
done
# cluster_bits within range, but not the image's: its tables no longer fit
h cbits-9 "L1 table has 1 entries, but the virtual size 262144 needs 8" 20 "$(be32 9)"
h cbits-21 "L1 table offset 0x[0-9a-f]+ is not aligned to the cluster size" 20 "$(be32 21)"
hok bfs-0 8 "$(be64 2048)" 16 "$(be32 0)"     # an empty backing file name: none
hok corrupt-bit 79 02                          # read-only use of a "corrupt" image is allowed
hok refcount-order-6 96 "$(be32 6)"
# virtual size
hok size-0 24 "$(be64 0)"
hok size-1 24 "$(be64 1)"
hok size-513 24 "$(be64 513)"
h size-2e63m1 "virtual size 9223372036854775807 .*too large" 24 7fffffffffffffff
h size-2e63 "virtual size 9223372036854775808 is out of range" 24 8000000000000000
h size-max "virtual size 18446744073709551615 is out of range" 24 ffffffffffffffff
h size-grow "L1 table has 1 entries, but the virtual size [0-9]+ needs 2" 24 "$(be64 $((4 << 20)))"
# encryption
h crypt-aes "encrypted images are not supported" 32 "$(be32 1)"
h crypt-luks "encrypted images are not supported" 32 "$(be32 2)"
h crypt-3 "unknown crypt_method 3" 32 "$(be32 3)"
h crypt-max "unknown crypt_method 4294967295" 32 ffffffff
# L1 size and offset
h l1size-0 "L1 table has 0 entries, but the virtual size 262144 needs 1" 36 "$(be32 0)"
h l1size-past "L1 table has 4194305 entries \(max 4194304\)" 36 "$(be32 4194305)"
h l1size-max "L1 table has 4294967295 entries \(max 4194304\)" 36 ffffffff
h l1size-file "L1 table \(4194304 entries at offset $L1\) runs past the end of the file" 36 "$(be32 4194304)"
hok l1size-big 36 "$(be32 400)"
h l1off-0 "L1 table offset is 0 \(the header cluster\)" 40 "$(be64 0)"
h l1off-1 "L1 table offset 0x[0-9a-f]+ is not aligned" 40 "$(be64 $((L1 + 1)))"
h l1off-512 "L1 table offset 0x[0-9a-f]+ is not aligned" 40 "$(be64 $((L1 + 512)))"
h l1off-past "L1 table .* runs past the end of the file" 40 "$(be64 "$PAST")"
h l1off-max "L1 table offset 0xffffffffffffffff is not aligned to the cluster size" 40 ffffffffffffffff
h l1off-2e62 "L1 table \(1 entries at offset 4611686018427387904\) runs past the end of the file" 40 4000000000000000
# refcount table
h reft-0 "refcount table offset 0x0 is not a non-zero multiple of the cluster size" 48 "$(be64 0)"
h reft-mis "refcount table offset 0x[0-9a-f]+ is not a non-zero multiple of the cluster size" 48 "$(be64 $((REFT + 8)))"
# a refcount table past the end: only check reads it (qemu-img check: errors)
CHECK=2 hok reft-past 48 "$(be64 "$PAST")"
h reft-max "refcount table offset 0xffffffffffffffff is not a non-zero multiple of the cluster size" 48 ffffffffffffffff
h reftc-0 "no refcount table" 56 "$(be32 0)"
h reftc-past "refcount table of 2049 clusters is larger than" 56 "$(be32 2049)"
h reftc-max "refcount table of 4294967295 clusters is larger than" 56 ffffffff
h refcount-order-7 "refcount_order 7 is out of range 0..6" 96 "$(be32 7)"
h refcount-order-max "refcount_order 4294967295 is out of range 0..6" 96 ffffffff
# snapshot table
h nsnap-1-off0 "snapshot table offset 0x0 is not" 60 "$(be32 1)"
h nsnap-past "image has 65537 snapshots \(max 65536\)" 60 "$(be32 65537)"
h nsnap-max "image has 4294967295 snapshots \(max 65536\)" 60 ffffffff
h snapoff-mis "snapshot table offset 0x[0-9a-f]+ is not" 60 "$(be32 1)" 64 "$(be64 $((L1 + 4)))"
h snapoff-past "snapshot table entry 0 at offset [0-9]+ .*past the end of the file" 60 "$(be32 1)" 64 "$(be64 "$PAST")"
h snapoff-max "snapshot table offset 0xffffffffffffffff is not a non-zero multiple of the cluster size" 60 "$(be32 1)" 64 ffffffffffffffff
h snap-many-l1 "snapshot table entry 0 at offset [0-9]+ is past the end of the file" \
    60 "$(be32 65536)" 64 "$(be64 $((QSIZE / 4096 * 4096)))"
# feature bits
h incompat-bit5 "unsupported incompatible feature bit 5" 72 0000000000000020
h incompat-bit63 "unsupported incompatible feature bit 63" 72 8000000000000000
h incompat-all "unsupported incompatible feature bits 5, 6, 7, .* 63" 72 ffffffffffffffff
h datafile-noname "uses an external data file but does not name it" 79 04
h ctype-nobit "compression_type 1 needs the compression type incompatible bit" 104 01
h ctype-2 "unknown compression_type 2" 79 08 104 02
h ctype-255 "unknown compression_type 255" 79 08 104 ff
h extl2-16k "extended L2 entries need clusters of at least 16384 bytes, cluster_bits is 12" 79 10
hok compat-all 80 ffffffffffffffff
hok autoclear-all 88 fffffffffffffffc
hok dirty 79 01
hok refcount-order-0 96 "$(be32 0)"
h raw-nodata "raw external data bit is set without an external data file" 95 02
# header length
for v in 0 71 72 103; do h hlen-$v "header_length $v is invalid" 100 "$(be32 $v)"; done
h hlen-105 "header_length 105 is invalid \(a multiple of 8, at least 104\)" 100 "$(be32 105)"
h hlen-cluster "header_length 4097 is invalid \(a multiple of 8, at least 104\)" 100 "$(be32 4097)"
h hlen-max "header_length 4294967295 is invalid \(a multiple of 8, at least 104\)" 100 ffffffff
# header extensions (the first one starts at header_length 112)
h ext-len-past "header extension 0x[0-9a-f]+ at offset 112 has length [0-9]+, past the end" \
    112 "12345678$(be32 5000)"
h ext-len-max "header extension 0x[0-9a-f]+ at offset 112 has length 4294967295, past the end" \
    112 "12345678ffffffff"
hok ext-unknown 112 "12345678$(be32 8)0102030405060708"
h ext-features-odd "feature name table length 47 is not a multiple of 48" 112 "6803f857$(be32 47)"
h ext-bfmt-long "backing format name of 16 bytes is too long \(max 15\)" 112 "e2792aca$(be32 16)"
h ext-bfmt-twice "header extension 0xe2792aca appears twice" 112 \
    "e2792aca$(be32 3)7261770000000000e2792aca$(be32 3)7261770000000000"
h ext-datafile-long "header extension 0x44415441 at offset 112 has length 4096, past the end of the extension area" \
    79 04 112 "44415441$(be32 4096)"
h ext-bitmaps-0 "bitmaps extension has 0 bitmaps \(must be 1..65535\)" 88 0000000000000001 112 "23852875$(be32 24)$(be32 0)00000000$(be64 0)$(be64 0)"
h ext-bitmaps-max "bitmaps extension has 4294967295 bitmaps \(must be 1..65535\)" 88 0000000000000001 112 \
    "23852875$(be32 24)ffffffff00000000ffffffffffffffff$(be64 8192)"
h ext-crypto "encryption header extension in an image that is not LUKS-encrypted" 112 "0537be77$(be32 16)$(be64 8192)$(be64 4096)"
# a version 2 image: no extensions, refcount order 4 implied
patched qcow2-v2-zeroflag.qcow2 "$B2" ok bad "L2 entry 0x0000000000000001 at offset [0-9]+ .*(zero flag|reserved)" \
    $(( $(peek "$B2" "$(peek "$B2" 40 8)" 8) & 0x00fffffffffffe00 )) 0000000000000001
patched qcow2-v2-ctype.qcow2 "$B2" ok ok "" 72 0000000000000008 104 05

# ---- qcow2: L1 and L2 entries -------------------------------------------
e() { patched "qcow2-tab-$1.qcow2" "$B" "$2" bad "$3" "${@:4}"; }
e l1-past ok "L2 table at offset $PAST is past the end of the file" "$L1" "$(be64 $((PAST | (1 << 63))))"
e l1-mis ok "L2 table offset 0x[0-9a-f]+ is not aligned to the cluster size" "$L1" "$(be64 $((L2 + 512)))"
e l1-reserved ok "L1 entry 0 \(0x0100000000004000\) at offset $L1 has reserved bits set" "$L1" 0100000000004000
e l1-lowbits ok "L1 entry 0 \(0x8000000000004001\) .*reserved bits" "$L1" 8000000000004001
e l1-max ok "L1 entry 0 .*reserved bits" "$L1" ffffffffffffffff
# an L1 entry of offset 0 (with the copied flag) is unallocated; a data
# cluster at offset 0 likewise; one at the L2 table itself is metadata
# read as data (issue 10 item 5)
patched qcow2-tab-l1-zero.qcow2 "$B" ok ok "" "$L1" 8000000000000000
patched qcow2-tab-l2-zero.qcow2 "$B" ok ok "" "$L2" 8000000000000000
CHECK=2 e l2-self ok "data cluster of guest offset 0 \(host offset $L2, 4096 bytes\) overlaps the L2 table \(host offset $L2, 4096 bytes\)" "$L2" "$(be64 $((L2 | (1 << 63))))"
CHECK=2 e l2-past ok "data cluster at host offset $PAST .*past the end of the file" "$L2" "$(be64 $((PAST | (1 << 63))))"
e l2-past-2e55 ok "data cluster at host offset [0-9]+ .*past the end of the file" "$L2" 80fffffffffff000
e l2-mis ok "host offset 0x[0-9a-f]+ is not aligned to the cluster size" "$L2" "$(be64 $((D0 + 512 | (1 << 63))))"
e l2-reserved ok "L2 entry 0x[0-9a-f]+ at offset $L2 has reserved bits set" "$L2" "$(be64 $((D0 | (1 << 63) | (1 << 56))))"
e l2-reserved-lo ok "L2 entry 0x[0-9a-f]+ at offset $L2 has reserved bits set" "$L2" "$(be64 $((D0 | (1 << 63) | 2)))"
e l2-max ok "compressed L2 entry 0xffffffffffffffff at offset $L2 has the copied flag set" "$L2" ffffffffffffffff
e comp-past ok "compressed data .* starts at host offset [0-9]+, past the end of the file" \
    "$CENT" "$(be64 $(( (1 << 62) | PAST )))"
e comp-header ok "compressed L2 entry .* points into the header cluster" "$CENT" "$(be64 $(( (1 << 62) | 100 )))"
e comp-copied ok "compressed L2 entry .* has the copied flag set" "$CENT" "$(be64 $(( (3 << 62) | COFF )))"
e comp-garbage ok "compressed cluster at host offset $COFF .*corrupt deflate data" "$COFF" ffffffffffffffffffffffff
e comp-short ok "compressed cluster at host offset [0-9]+ \(guest offset 131072\) inflates to 0 bytes, expected 4096" "$CENT" \
    "$(be64 $(( (1 << 62) | (QSIZE - 4) )))"
# refcount table entries (only `check` reads them: convert and info work)
CHECK=2 patched qcow2-tab-refb-past.qcow2 "$B" ok ok "" "$REFT" "$(be64 "$PAST")"
CHECK=2 patched qcow2-tab-refb-mis.qcow2 "$B" ok ok "" "$REFT" "$(be64 $((REFB + 8)))"

# ---- qcow2: truncations ---------------------------------------------------
# every 4 KiB, then inside the header and the tables
for ((t = 4096; t < QSIZE; t += 4096)); do
    head -c "$t" "$B" > "qcow2-trunc-$t.qcow2"
    if [ "$t" -lt $((L1 + 8)) ]; then info=bad; else info=ok; fi
    case_ "qcow2-trunc-$t.qcow2" $info bad "past the end of the file"
done
for t in 0 1 4 19 71 72 103 111; do
    head -c "$t" "$B" > "qcow2-trunc-$t.qcow2"
    case_ "qcow2-trunc-$t.qcow2" bad bad "too short for a (qcow2|version 3) header|no known format signature|header_length 112 runs past the end of the file"
done
for t in $((L1 + 4)) $((L2 + 8)) $((L2 + 2048)) $((D0 + 100)) $((COFF + 3)); do
    head -c "$t" "$B" > "qcow2-trunc-$t.qcow2"
    if [ "$t" -lt $((L1 + 8)) ]; then info=bad; else info=ok; fi
    case_ "qcow2-trunc-$t.qcow2" $info bad "past the end of the file|(L2 table at offset [0-9]+ is )?cut by the end of the file|inflates to [0-9]+ bytes, expected"
done

# ---- qcow2: decompression bombs ------------------------------------------
# A 2 MiB cluster of one byte value compresses to a couple of KiB; placed
# in the 4 KiB-cluster image it would inflate 512 times past its cluster.
bomb() {  # bomb NAME CTYPE-OPTION
    local big=$work/big-$1.qcow2
    qemu-img create -q -f qcow2 -o cluster_size=2M$2 "$big" 2M
    qemu-io -f qcow2 -c 'write -c -P 0x41 0 2M' "$big" >/dev/null
    local bl1 bl2 ent off end name=qcow2-bomb-$1.qcow2 nsect
    bl1=$(peek "$big" 40 8)
    bl2=$(( $(peek "$big" "$bl1" 8) & 0x00fffffffffffe00 ))
    ent=$(peek "$big" "$bl2" 8)
    off=$(( ent & ((1 << 49) - 1) ))
    cp "$B" "$name"
    end=$(( ($(fsize "$name") + 511) / 512 * 512 ))
    dd if="$big" of="$name" bs=1 skip="$off" seek="$end" count=8192 conv=notrunc status=none
    nsect=16   # the most a 4 KiB-cluster descriptor can say: 16 sectors
    poke "$name" "$CENT" "$(be64 $(( (1 << 62) | ((nsect - 1) << 58) | end )))"
    rm -f "$big"
}
bomb zlib ""
CHECK=2 case_ qcow2-bomb-zlib.qcow2 ok bad "inflates to more than the cluster size \(4096 bytes\)"
bomb zstd ",compression_type=zstd"
poke qcow2-bomb-zstd.qcow2 79 08   # compression type bit on the 4 KiB image
poke qcow2-bomb-zstd.qcow2 104 01
# (refused by the frame's window once zstd windows are bounded by the
# cluster size, issue 10 item 3; by its output before)
case_ qcow2-bomb-zstd.qcow2 ok bad "compressed cluster at host offset [0-9]+ \(guest offset 131072\): (inflates to more than the cluster size \(4096 bytes\)|zstd frame asks for a window larger than the cluster size \(4096 bytes allowed\))"

# ---- qcow2: references: loops, depth, host files ------------------------
mkdir -p refs
qemu-img create -q -f qcow2 -o cluster_size=4096 refs/loop-a.qcow2 64K
qemu-img create -q -f qcow2 -o cluster_size=4096 refs/loop-b.qcow2 64K
qemu-img rebase -u -b loop-b.qcow2 -F qcow2 refs/loop-a.qcow2
qemu-img rebase -u -b loop-a.qcow2 -F qcow2 refs/loop-b.qcow2
case_ refs/loop-a.qcow2 ok bad "already in its own chain \(a loop\)"
qemu-img create -q -f qcow2 -o cluster_size=4096 refs/self.qcow2 64K
qemu-img rebase -u -b self.qcow2 -F qcow2 refs/self.qcow2
case_ refs/self.qcow2 ok bad "already in its own chain \(a loop\)"
qemu-img create -q -f qcow2 -o cluster_size=4096 refs/self-noformat.qcow2 64K
qemu-img rebase -u -b ./self-noformat.qcow2 -F qcow2 refs/self-noformat.qcow2
poke refs/self-noformat.qcow2 "$(find_ext refs/self-noformat.qcow2 0xe2792aca)" 12345678
case_ refs/self-noformat.qcow2 ok bad "already in its own chain \(a loop\)"
# a chain 70 deep (the limit is 64)
mkdir -p refs/deep
qemu-img create -q -f raw refs/deep/c0.raw 64K
for ((i = 1; i <= 70; i++)); do
    if [ $i = 1 ]; then bf=raw; else bf=qcow2; fi
    prev=c$((i - 1)).$([ $i = 1 ] && echo raw || echo qcow2)
    qemu-img create -q -f qcow2 -o cluster_size=4096 -u -b "$prev" -F $bf "refs/deep/c$i.qcow2" 64K
done
case_ refs/deep/c70.qcow2 ok bad "backing chain is deeper than 64 images"
# host files, paths leaving the folder, protocols
mkdir -p refs/sub
printf 'secret\n' > refs/secret.raw
ln -sf /etc/passwd refs/sub/link-out
ref() {  # ref NAME BACKING FMT REGEX  (FMT "" = no backing format: probed)
    local f=refs/sub/$1.qcow2 x
    qemu-img create -q -f qcow2 -o cluster_size=4096 "$f" 64K
    qemu-img rebase -u -b "$2" -F "${3:-raw}" "$f"
    if [ -z "$3" ]; then  # turn the backing format extension into an unknown one
        x=$(find_ext "$f" 0xe2792aca)
        poke "$f" "$x" 12345678
    fi
    case_ "$f" ok bad "$4"
}
ref passwd /etc/passwd raw "refers to '/etc/passwd' .*outside the image's folder"
ref passwd-probe /etc/passwd "" "refers to '/etc/passwd' .*outside the image's folder"
ref dotdot ../secret.raw raw "refers to '../secret.raw' .*outside the image's folder"
ref dotdot-deep ./../../../../../../../../../../../../../../../../etc/passwd raw "outside the image's folder"
ref symlink link-out raw "refers to 'link-out' \(.*/link-out\), which leads outside the image's folder .* through a symbolic link"
ref nbd nbd://localhost:10809/x raw "protocols and json: references are not supported"
ref json 'json:{"file.driver":"file","file.filename":"/etc/passwd"}' raw \
    "protocols and json: references are not supported"
ref http http://example.com/x.img raw "protocols and json: references are not supported"
ref missing does-not-exist.qcow2 qcow2 "refers to 'does-not-exist.qcow2', which does not exist"
# a missing file outside the folder: "outside", not "does not exist" (an
# image must not learn which host files exist)
ref probe-missing /nonexistent/x raw "refers to '/nonexistent/x' \(/nonexistent/x\), outside the image's folder"
ref probe-dotdot ../../../../../../../../../../../../../../nonexistent raw \
    "refers to '(\.\./)+nonexistent' \(/nonexistent\), outside the image's folder"
qemu-img create -q -f qcow2 -o cluster_size=4096,data_file=/etc/passwd refs/sub/datafile-passwd.qcow2 64K 2>/dev/null ||
    { qemu-img create -q -f qcow2 -o cluster_size=4096,data_file="$work/d.raw" refs/sub/datafile-passwd.qcow2 64K; }
# name the data file /etc/passwd whatever qemu-img allowed
f=refs/sub/datafile-passwd.qcow2
ext=$(find_ext "$f" 0x44415441)
name=$(printf '/etc/passwd' | od -v -A n -t x1 | tr -d ' \n')
old=$(peek "$f" $((ext + 4)) 4)
poke "$f" $((ext + 4)) "$(be32 11)"
poke "$f" $((ext + 8)) "$name$(printf '%0*d' $(( ((old + 7) / 8 * 8 - 11) * 2 )) 0)"
case_ "$f" bad bad "refers to '/etc/passwd' .*outside the image's folder"

# ---- vmdk: hosted sparse (KDMV, little-endian) ---------------------------
# 1 MiB, 64 KiB grains: header, embedded descriptor, redundant GD/GTs, GD
# and GT at sectors 26/27, grains at 64K and 128K
V=$work/v.vmdk
qemu-img create -q -f vmdk -o subformat=monolithicSparse "$V" 1M
qemu-io -f vmdk -c 'write -P 0x21 0 64K' -c 'write -P 0x22 512K 4K' "$V" >/dev/null
VSIZE=$(fsize "$V")
VGD=$(( $(peekle "$V" 56 8) * 512 ))
VGT=$(( $(peekle "$V" "$VGD" 4) * 512 ))
VRGD=$(( $(peekle "$V" 48 8) * 512 ))
VPAST=$(( VSIZE / 512 + 64 ))                  # a sector past the end
vh() { patched "vmdk-hdr-$1.vmdk" "$V" bad bad "$2" "${@:3}"; }
vh magic "no known format signature" 0 4b444d57
vh version-0 "sparse extent version 0 is not supported \(1..3\)" 4 "$(le32 0)"
vh version-4 "sparse extent version 4 is not supported \(1..3\)" 4 "$(le32 4)"
vh version-max "sparse extent version 4294967295 is not supported \(1..3\)" 4 ffffffff
vh flags-incompat "header has unknown incompatible flags 0x01000000" 8 "$(le32 0x01000003)"
vh capacity-max "capacity of 18446744073709551615 sectors is too large \(max 2199023255552\)" 12 ffffffffffffffff
vh capacity-past "capacity of 2199023255553 sectors is too large \(max 2199023255552\)" 12 "$(le64 $(( (1 << 41) + 1 )))"
vh grain-0 "grain size of 0 sectors is invalid" 20 "$(le64 0)"
vh grain-3 "grain size of 3 sectors is invalid" 20 "$(le64 3)"
vh grain-4096 "grain size of 4096 sectors is invalid" 20 "$(le64 4096)"
vh grain-max "grain size of [0-9]+ sectors is invalid" 20 ffffffffffffffff
vh desc-past "embedded descriptor at offset [0-9]+ \(10240 bytes\) runs past the end of the file" 28 "$(le64 "$VPAST")"
vh desc-huge "embedded descriptor of 1099511627776 sectors is out of range 1..2048" 36 "$(le64 $(( 1 << 40 )))"
vh gtes-0 "0 entries per grain table is out of range 1..4096" 44 "$(le32 0)"
vh gtes-4097 "4097 entries per grain table is out of range 1..4096" 44 "$(le32 4097)"
vh gtes-max "4294967295 entries per grain table is out of range 1..4096" 44 ffffffff
vh gd-max "grain directory offset [0-9]+ sectors is invalid" 56 fffffffffffffffe
vh compress-2 "compression algorithm 2 is not supported" 77 0200
# grain directory and grain table entries
ve() { patched "vmdk-tab-$1.vmdk" "$V" ok bad "$2" "${@:3}"; }
# a grain table inside the descriptor: refused when the image is opened
patched vmdk-tab-gd-header.vmdk "$V" bad bad \
    "grain directory entry 0 points to a grain table at offset 512 .*inside the embedded descriptor" \
    "$VGD" "$(le32 1)"
ve gt-past "grain table entry for LBA 0 points to offset [0-9]+, past the end of the file" "$VGT" "$(le32 "$VPAST")"
ve gt-max "grain table entry for LBA 0 points to offset 2199023255040, past the end of the file" "$VGT" ffffffff
# damage the redundant grain directory makes good: read as the undamaged file
# (qemu-img reads zeros there); a grain table entry pointing into the
# descriptor is corruption (qemu-img hands out the descriptor's text as
# guest data), and check says so
cp "$V" vmdk-base.vmdk
patched vmdk-hdr-gd-past.vmdk "$V" ok same vmdk-base.vmdk 56 "$(le64 "$VPAST")"
patched vmdk-tab-gd-past.vmdk "$V" ok same vmdk-base.vmdk "$VGD" "$(le32 "$VPAST")"
CHECK=2 patched vmdk-tab-gt-header.vmdk "$V" ok bad \
    "grain for LBA 0 at offset 1024 .* overlaps the embedded descriptor at offset 512" "$VGT" "$(le32 2)"
# truncations
for t in 0 4 64 511 512 4096 $((VGD + 2)) $((VGT + 100)) 65536 $((65536 + 4096)) $((VSIZE - 4096)); do
    head -c "$t" "$V" > "vmdk-trunc-$t.vmdk"
    if [ "$t" -lt "$VRGD" ]; then info=bad; else info=ok; fi
    case_ "vmdk-trunc-$t.vmdk" $info bad "past the end of the file|truncated inside the sparse extent header|no known format signature"
done

# ---- vmdk: streamOptimized ------------------------------------------------
S=$work/s.vmdk
qemu-img convert -q -f vmdk -O vmdk -o subformat=streamOptimized "$V" "$S"
SSIZE=$(fsize "$S")
SG0=65536                                       # first grain marker
SG1=$(( SG0 + (12 + $(peekle "$S" $((SG0 + 8)) 4) + 511) / 512 * 512 ))
vs() { patched "vmdk-stream-$1.vmdk" "$S" "$2" bad "$3" "${@:4}"; }
vs lba-past ok "grain at offset [0-9]+ holds LBA 1099511627776, but the grain table maps it to LBA 1024" "$SG1" "$(le64 $(( 1 << 40 )))"
vs lba-odd ok "grain at offset [0-9]+ holds LBA 1000, but the grain table maps it to LBA 1024" "$SG1" "$(le64 1000)"
vs csize-huge ok "compressed grain for LBA 0 claims 2147483647 bytes \(max [0-9]+\)" $((SG0 + 8)) ffffff7f
vs csize-0 ok "unknown marker type [0-9]+" $((SG0 + 8)) "$(le32 0)"
vs deflate-garbage ok "compressed grain is corrupt \(zlib: " $((SG0 + 14)) ffffffffffffffffffff
vs zlib-header ok "compressed grain does not start with a zlib header" $((SG0 + 12)) 0000
# a grain whose stream inflates to 2 MiB (the qcow2 bomb's deflate data
# behind a zlib header) in a 64 KiB-grain file
big=$work/bigz.qcow2
qemu-img create -q -f qcow2 -o cluster_size=2M "$big" 2M
qemu-io -f qcow2 -c 'write -c -P 0x41 0 2M' "$big" >/dev/null
bl2=$(( $(peek "$big" "$(peek "$big" 40 8)" 8) & 0x00fffffffffffe00 ))
boff=$(( $(peek "$big" "$bl2" 8) & ((1 << 49) - 1) ))
# appended after the last sector and pointed at by grain table entry 0
bend=$(( (SSIZE + 511) / 512 * 512 ))
cp "$S" vmdk-stream-bomb.vmdk
dd if="$big" of="$work/bomb.deflate" bs=1 skip="$boff" count=4096 status=none
poke vmdk-stream-bomb.vmdk "$bend" "$(le64 0)$(le32 $((2 + $(fsize "$work/bomb.deflate"))))789c"
dd if="$work/bomb.deflate" of=vmdk-stream-bomb.vmdk bs=1 seek=$((bend + 14)) conv=notrunc status=none
SGT=$(( $(peekle "$S" $(( $(peekle "$S" 56 8) * 512 )) 4) * 512 ))
poke vmdk-stream-bomb.vmdk "$SGT" "$(le32 $((bend / 512)))"
rm -f "$big"
case_ vmdk-stream-bomb.vmdk ok bad "compressed grain inflates to more than the grain size \(65536 bytes\)"
for t in $((SG0 + 6)) $((SG1 + 20)); do
    head -c "$t" "$S" > "vmdk-stream-trunc-$t.vmdk"
    case_ "vmdk-stream-trunc-$t.vmdk" ok bad "past the end of the file"
done
# without its footer and end-of-stream marker: the grain directory at the
# start still describes every grain
for t in $((SSIZE - 1024)) $((SSIZE - 512)); do
    head -c "$t" "$S" > "vmdk-stream-trunc-$t.vmdk"
    case_ "vmdk-stream-trunc-$t.vmdk" ok ok
done

# ---- vmdk: descriptor files -------------------------------------------------
mkdir -p vdesc
desc_head() { printf '# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\ncreateType="%s"\n\n' "${1:-monolithicFlat}"; }
# thousands of extents: past the limit, and at it (one file named 8000 times)
{ desc_head; for ((i = 0; i < 10000; i++)); do echo 'RW 1 ZERO'; done; } > vdesc/extents-10000.vmdk
case_ vdesc/extents-10000.vmdk bad bad "descriptor line 8199: more than 8192 extents"
{ desc_head; printf 'RW 2048 ZERO\n'; head -c $((2 << 20)) /dev/zero | tr '\0' '#'; } > vdesc/desc-2m.vmdk
case_ vdesc/desc-2m.vmdk bad bad "descriptor file of [0-9]+ bytes is too large \(max 1048576\)"
head -c 512 /dev/zero | tr '\0' A > vdesc/one.raw
{ desc_head; for ((i = 0; i < 8000; i++)); do echo 'RW 1 FLAT "one.raw" 0'; done; } > vdesc/extents-8000-flat.vmdk
head -c $((8000 * 512)) /dev/zero | tr '\0' A > vdesc/extents-8000.raw   # (qemu-img takes minutes)
case_ vdesc/extents-8000-flat.vmdk ok same vdesc/extents-8000.raw
{ desc_head; printf 'RW 18446744073709551615 ZERO\n'; } > vdesc/extent-size-max.vmdk
case_ vdesc/extent-size-max.vmdk bad bad "descriptor line 7: extent size is not a number of sectors \(max 2\^41\)"
{ desc_head; printf 'RW 2199023255552 ZERO\nRW 2199023255552 ZERO\n'; } > vdesc/extent-sum-overflow.vmdk
case_ vdesc/extent-sum-overflow.vmdk bad bad "descriptor line 8: extents add up to more than 2\^41 sectors"
{ desc_head; printf 'RW 2048 FLAT "one.raw" 99999999\n'; } > vdesc/flat-offset-past.vmdk
case_ vdesc/flat-offset-past.vmdk bad bad "flat extent needs 1048576 bytes at offset 51199999488, but the file has only 512 bytes"
{ desc_head; printf 'RW 2048 FLAT "one.raw" 0\n'; } > vdesc/flat-short.vmdk
case_ vdesc/flat-short.vmdk bad bad "flat extent needs 1048576 bytes at offset 0, but the file has only 512 bytes"
{ desc_head; printf 'RW 2048 BOGUS "one.raw"\n'; } > vdesc/type-bogus.vmdk
case_ vdesc/type-bogus.vmdk bad bad "BOGUS"
{ desc_head; printf 'RW abc ZERO\n'; } > vdesc/size-junk.vmdk
case_ vdesc/size-junk.vmdk bad bad "descriptor line 7: extent size is not a number of sectors \(max 2\^41\): 'RW abc ZERO'"
{ desc_head; printf 'RW 2048 FLAT "one.raw\n'; } > vdesc/quote-open.vmdk
case_ vdesc/quote-open.vmdk bad bad "descriptor line 7: file name has no closing quote"
# references: host files, folder escapes, protocols, loops
mkdir -p vdesc/sub
ln -sf /etc/passwd vdesc/sub/link-out
printf 'x' > vdesc/secret.raw
vref() {  # vref NAME EXTENT-FILE REGEX
    { desc_head; printf 'RW 8 FLAT "%s" 0\n' "$2"; } > "vdesc/sub/$1.vmdk"
    case_ "vdesc/sub/$1.vmdk" "${4:-ok}" bad "$3"
}
vref passwd /etc/passwd "refers to '/etc/passwd' .*outside the image's folder" bad
vref dotdot ../secret.raw "refers to '../secret.raw' .*outside the image's folder" bad
vref symlink link-out "refers to 'link-out' \\(.*/link-out\\), which leads outside the image's folder .* through a symbolic link" bad
vref nbd nbd://localhost/x "protocols and json: references are not supported" bad
vref missing nothing-here.raw "refers to 'nothing-here.raw', which does not exist" bad
# a delta disk naming itself as its parent, and two naming each other
printf '# Disk DescriptorFile\nversion=1\nCID=1\nparentCID=1\ncreateType="monolithicFlat"\nparentFileNameHint="self.vmdk"\nRW 8 ZERO\n' \
    > vdesc/self.vmdk
case_ vdesc/self.vmdk ok bad "refers to 'self.vmdk', which is already in its own chain \(a loop\)"
printf '# Disk DescriptorFile\nversion=1\nCID=1\nparentCID=2\ncreateType="monolithicFlat"\nparentFileNameHint="loop-b.vmdk"\nRW 8 ZERO\n' \
    > vdesc/loop-a.vmdk
printf '# Disk DescriptorFile\nversion=1\nCID=2\nparentCID=1\ncreateType="monolithicFlat"\nparentFileNameHint="loop-a.vmdk"\nRW 8 ZERO\n' \
    > vdesc/loop-b.vmdk
case_ vdesc/loop-a.vmdk ok bad "refers to 'loop-a.vmdk', which is already in its own chain \(a loop\)"
printf '# Disk DescriptorFile\nversion=1\nCID=1\nparentCID=2\ncreateType="monolithicFlat"\nparentFileNameHint="/etc/passwd"\nRW 8 ZERO\n' \
    > vdesc/sub/parent-passwd.vmdk
case_ vdesc/sub/parent-passwd.vmdk ok bad "refers to '/etc/passwd' .*outside the image's folder"

# ---- OVA ----------------------------------------------------------------------
mkdir -p "$work/ova"
printf '<?xml version="1.0"?>\n<Envelope/>\n' > "$work/ova/app.ovf"
cp "$S" "$work/ova/disk1.vmdk"
(cd "$work/ova" && tar --format=ustar -cf "$work/good.ova" app.ovf disk1.vmdk)
OSIZE=$(fsize "$work/good.ova")
# the disk's tar header is the second one: after app.ovf's header and data block
DH=1024
oct() { printf '%011o' "$1" | od -v -A n -t x1 | tr -d ' \n'; }
# fix_sum FILE OFF: recompute a tar header's checksum
fix_sum() {
    local f=$1 off=$2 sum=0 b
    poke "$f" $((off + 148)) 2020202020202020
    for b in $(od -v -A n -t u1 -j "$off" -N 512 "$f"); do sum=$((sum + b)); done
    poke "$f" $((off + 148)) "$(printf '%06o' $sum | od -v -A n -t x1 | tr -d ' \n')0020"
}
ova() {  # ova NAME INFO REGEX OFFSET HEX...
    local name=ova-$1.ova info=$2 re=$3; shift 3
    cp "$work/good.ova" "$name"
    while [ $# -ge 2 ]; do poke "$name" "$1" "$2"; shift 2; done
    fix_sum "$name" "$DH"
    case_ "$name" "$info" bad "$re"
}
ova member-past bad "tar member 'disk1.vmdk' of [0-9]+ bytes runs past the end of the archive" $((DH + 124)) "$(oct $((OSIZE * 4)))"
ova member-size-max bad "tar member 'disk1.vmdk' of 8589934591 bytes runs past the end of the archive" $((DH + 124)) "$(printf '77777777777' | od -v -A n -t x1 | tr -d ' \n')"
ova member-size-junk bad "tar header size field is invalid" $((DH + 124)) "$(printf 'zzzzzzzzzzz' | od -v -A n -t x1 | tr -d ' \n')"
cp "$work/good.ova" ova-bad-checksum.ova
poke ova-bad-checksum.ova $((DH + 148)) 3030303030300020
case_ ova-bad-checksum.ova bad bad "checksum"
(cd "$work/ova" && tar --format=ustar -cf "$out/ova-no-disk.ova" app.ovf)
case_ ova-no-disk.ova bad bad "the OVA archive holds no .vmdk disk"
head -c $((OSIZE / 2)) "$work/good.ova" > ova-truncated.ova
case_ ova-truncated.ova bad bad "tar member 'disk1.vmdk' of [0-9]+ bytes runs past the end of the archive"
# a descriptor inside the OVA whose extent is a host file
{ desc_head; printf 'RW 8 FLAT "/etc/passwd" 0\n'; } > "$work/ova/disk1.vmdk"
(cd "$work/ova" && tar --format=ustar -cf "$out/ova-extent-passwd.ova" app.ovf disk1.vmdk)
case_ ova-extent-passwd.ova bad bad "refers to '/etc/passwd', an absolute path: inside an OVA archive, references name members of the archive, never host files"

# ---- vhd (vpc) ----------------------------------------------------------
# a 4 MiB dynamic disk with blocks at 0 and 2M (qemu's layout: footer copy,
# header at 512, BAT at 1536, blocks, footer), and a 1 MiB fixed disk
H=$work/d.vhd
qemu-img create -q -f vpc "$H" 4M
qemu-io -f vpc -c 'write -P 0x31 0 64k' -c 'write -P 0x32 2M 64k' "$H" >/dev/null
HSIZE=$(fsize "$H")
HF=$work/f.vhd
qemu-img create -q -f vpc -o subformat=fixed "$HF" 1M
qemu-io -f vpc -c 'write -P 0x33 0 64k' "$HF" >/dev/null
vsum() {  # vsum FILE OFF LEN CKOFF: the one's complement byte sum into the field
    local f=$1 off=$2 len=$3 ck=$4 sum=0 b
    poke "$f" "$ck" 00000000
    for b in $(od -v -A n -t u1 -j "$off" -N "$len" "$f"); do sum=$((sum + b)); done
    poke "$f" "$ck" "$(be32 $(( ~sum & 0xffffffff )))"
}
vfoot() {  # vfoot NAME INFO CONVERT REGEX [FOOTER-OFFSET HEX]...: both footers patched
    local name=vhd-$1.vhd info=$2 conv=$3 re=$4 end; shift 4
    cp "$H" "$name"; end=$(( $(fsize "$name") - 512 ))
    while [ $# -ge 2 ]; do poke "$name" "$1" "$2"; poke "$name" $((end + $1)) "$2"; shift 2; done
    vsum "$name" 0 512 64; vsum "$name" "$end" 512 $((end + 64))
    case_ "$name" "$info" "$conv" "$re"
}
vhdr() {  # vhdr NAME INFO CONVERT REGEX HEADER-OFFSET HEX
    local name=vhd-$1.vhd
    cp "$H" "$name"; poke "$name" $((512 + $5)) "$6"; vsum "$name" 512 1024 $((512 + 36))
    case_ "$name" "$2" "$3" "$4"
}
CHECK=2 patched vhd-block-on-header.vhd "$H" ok bad "block 0 at 512 overlaps the" 1536 00000001
CHECK=2 patched vhd-block-past-end.vhd "$H" ok bad "block 1 at [0-9]+ is past the end of the data" 1540 7fffff00
vhdr bat-offset-past bad bad "block allocation table of [0-9]+ bytes at [0-9]+ is past the end" 16 0000000100000000
vhdr bat-on-header bad bad "block allocation table overlaps the dynamic disk header" 16 0000000000000200
vhdr entries-huge bad bad "block allocation table of [0-9]+ bytes at 1536 is past the end" 28 7fffffff
vhdr entries-few bad bad "block allocation table of 1 entries is too small" 28 00000001
vhdr block-3000 bad bad "block size 3000 is not a power of two" 32 00000bb8
vhdr block-1g bad bad "block size 1073741824 is not a power of two from 512 bytes to 256 MiB" 32 40000000
vhdr version bad bad "unsupported dynamic header version 2.0" 24 00020000
patched vhd-header-checksum.vhd "$H" bad bad "dynamic disk header checksum mismatch" 600 01
vfoot hdr-offset-past bad bad "dynamic disk header of 1024 bytes at [0-9]+ is past the end" 16 0000000010000000
vfoot hdr-offset-odd bad bad "dynamic header offset 513 is not a sector offset" 16 0000000000000201
vfoot type-7 bad bad "unknown disk type 7" 60 00000007
vfoot size-3t bad bad "too large \(at most 2040 GiB\)" 48 0000030000000000 28 77696e20
vfoot version-2 bad bad "unsupported footer version 2.0" 12 00020000
cp "$H" vhd-footers-bad.vhd; poke vhd-footers-bad.vhd 100 01; poke vhd-footers-bad.vhd $((HSIZE - 400)) 01
case_ vhd-footers-bad.vhd bad bad "footer checksum mismatch.*the footer copy at offset 0 cannot stand in"
head -c $((HSIZE - 4096 - 512)) "$H" > vhd-truncated.vhd; tail -c 512 "$H" >> vhd-truncated.vhd
CHECK=2 case_ vhd-truncated.vhd ok bad "block 1 at [0-9]+ is past the end of the data.*truncated"
head -c $((HSIZE - 1024)) "$H" > vhd-cut.vhd
case_ vhd-cut.vhd bad bad "truncated image \(the footer copy at offset 0 cannot stand in\)"
head -c 700 "$H" > vhd-short.vhd
case_ vhd-short.vhd bad bad "past the end|footer"
# the last footer damaged, the file whole: the copy reads the same
cp "$H" vhd-footer-copy.vhd; poke vhd-footer-copy.vhd $((HSIZE - 400)) 01
cp "$H" vhd-base.vhd
case_ vhd-base.vhd ok ok ""
CHECK=2 case_ vhd-footer-copy.vhd ok same vhd-base.vhd
# fixed: the footer claims more than the file holds (-f vpc by name)
mkdir -p vhd-fixed
cp "$HF" vhd-fixed/claims-8m.vhd; FE=$(( $(fsize "$HF") - 512 ))
poke vhd-fixed/claims-8m.vhd $((FE + 40)) 00000000008000000000000000800000
poke vhd-fixed/claims-8m.vhd $((FE + 28)) 77696e20
vsum vhd-fixed/claims-8m.vhd "$FE" 512 $((FE + 64))
case_ vhd-fixed/claims-8m.vhd bad bad "named like a vhd image"
# random bytes named like each format the tool knows
head -c 8192 /dev/urandom > "$work/noise"
for ext in vhd vhdx vdi; do
    cp "$work/noise" "named-noise.$ext"
    case_ "named-noise.$ext" bad bad "named like a $ext image but no known format signature"
done

# ---- vhdx ---------------------------------------------------------------
# an 8 MiB dynamic disk with 1 MiB blocks, data in blocks 0 and 5 (qemu's
# layout: headers, log at 1M, BAT at 2M, metadata at 3M with its items at
# 64K, blocks at 8M and 9M); fields behind a CRC-32C are changed with
# tests/tools/vhdxpatch.py, which makes the checksums right again
X=$work/d.vhdx
qemu-img create -q -f vhdx -o block_size=1M "$X" 8M
qemu-io -f vhdx -c 'write -P 0x51 0 64k' -c 'write -P 0x52 5M 64k' "$X" >/dev/null
XSIZE=$(fsize "$X")
XP="python3 $tools/vhdxpatch.py"
vx() {  # vx NAME INFO CONVERT REGEX EDIT...
    local name=vhdx-$1.vhdx info=$2 conv=$3 re=$4; shift 4
    cp "$X" "$name"; $XP "$name" "$@"
    case_ "$name" "$info" "$conv" "$re"
}
cp "$X" vhdx-base.vhdx
case_ vhdx-base.vhdx ok ok ""
vx hdr-both-bad bad bad "no valid header: header checksum mismatch" bad.hdr.both
vx hdr-version bad bad "unsupported header version 2" hdr.both.version=2
vx hdr-same-seq bad bad "the two headers differ but have the same sequence number 7" \
    hdr.both.seq=7 hdr.2.data_guid=new
vx hdr-log-offset bad bad "log of 1048576 bytes at 4096 is not on 1 MiB boundaries" hdr.both.log_offset=4096
vx log-empty bad bad "the header names a log, but the log holds no valid entry sequence" hdr.both.log_guid=new
vx log-past-end bad bad "log of 1048576 bytes at 1099511627776 is past the end of the file" \
    hdr.both.log_guid=new hdr.both.log_offset=0x10000000000
vx log-huge bad bad "log of 4293918720 bytes to replay" hdr.both.log_guid=new hdr.both.log_length=0xfff00000
vx rt-both-bad bad bad "region table checksum mismatch .*region table 2" raw.$((192 * 1024 + 100))=01 \
    raw.$((256 * 1024 + 100))=01
CHECK=2 vx rt-1-bad ok same vhdx-base.vhdx raw.$((192 * 1024 + 100))=01
vx rt-required bad bad "region 2 has an unknown type 11111111-2222-3333-4444-555555555555 marked required" \
    rt.both.count=3 rt.both.2.guid=11111111-2222-3333-4444-555555555555 rt.both.2.off=0x600000 \
    rt.both.2.len=0x100000 rt.both.2.required=1
vx rt-overlap bad bad "regions 0 and 1 overlap" rt.both.1.off=0x200000
vx rt-bat-past bad bad "BAT region of 1048576 bytes at 1099511627776 is past the end of the file" \
    rt.both.0.off=0x10000000000
vx rt-bat-on-log bad bad "BAT region overlaps the log at 1048576" rt.both.0.off=0x100000
vx rt-count bad bad "region table of 5000 entries \(at most 2047\)" rt.both.count=5000
vx rt-misaligned bad bad "region 1 .*not a non-empty range on 1 MiB boundaries" rt.both.1.off=0x300200
vx meta-sig bad bad "no metadata table signature" raw.$((3 << 20))=00
vx meta-item-past bad bad "metadata item 1 \(virtual disk size\): 8 bytes at 2097152 are not inside" \
    meta.1.off=0x200000
vx meta-overlap bad bad "metadata items [0-9] and [0-9] overlap" meta.1.off=0x10004
vx meta-required bad bad "metadata item 5 has an unknown type 99999999-2222-3333-4444-555555555555 marked required" \
    raw.$(( (3 << 20) + 10 ))=0600 \
    raw.$(( (3 << 20) + 32 + 5 * 32 ))=9999999922223333444455555555555500000100080000000400000000000000
vx meta-missing bad bad "metadata table has no page 83 data item" raw.$(( (3 << 20) + 10 ))=0200
vx block-3m bad bad "block size 3145728 is not a power of two" item.caa16737-fa36-4d43-b3b6-33f0aa44e76b=00003000
vx sector-1k bad bad "logical sector size 1024 is neither 512 nor 4096" \
    item.8141bf1d-a96f-4709-ba47-f233a8faab5f=00040000
vx size-huge bad bad "virtual disk size 71468255805440 is not from 1 byte to 64 TiB" \
    item.2fa54224-cd1b-4876-b211-5dbed83bf4b8=0000000000410000
vx size-odd bad bad "virtual disk size 1000 is not a multiple of the logical sector size 512" \
    item.2fa54224-cd1b-4876-b211-5dbed83bf4b8=e803000000000000
vx bat-small bad bad "BAT region of 1048576 bytes cannot hold the 16781311 entries" \
    item.2fa54224-cd1b-4876-b211-5dbed83bf4b8=0000000000100000
vx parent-no-locator bad bad "differencing disk without a parent locator" \
    item.caa16737-fa36-4d43-b3b6-33f0aa44e76b=0000100002000000
CHECK=2 vx block-past-end ok bad "BAT entry 5 \(block 5\): block at 1099511627776 is past the end of the file" \
    bat.5=0x10000000006
CHECK=2 vx block-on-meta ok bad "BAT entry 0 \(block 0\): block at 3145728 overlaps the metadata region" bat.0=0x300006
CHECK=2 vx block-on-header ok bad "BAT entry 0 \(block 0\): payload BAT entry \(state 6\) points at 0, inside the first MiB" \
    bat.0=0x6
CHECK=2 vx block-twice ok bad "BAT entry 0 \(block 0\): block at 8388608 overlaps another block" bat.5=0x800006
CHECK=2 vx block-state-4 ok bad "BAT entry 0 \(block 0\): payload BAT entry has unknown state 4" bat.0=0x800004
CHECK=2 vx block-reserved ok bad "BAT entry 0 \(block 0\): BAT entry 0000000000800406 has reserved bits set" \
    bat.0=0x800406
CHECK=2 vx block-partial ok bad "partially present block in a disk without a parent" bat.0=0x800007
head -c $((XSIZE - 512 * 1024)) "$X" > vhdx-truncated.vhdx
CHECK=2 case_ vhdx-truncated.vhdx ok bad "block at 9437184 is past the end of the file.*truncated"
head -c 200000 "$X" > vhdx-short.vhdx
case_ vhdx-short.vhdx bad bad "too short for a VHDX header section"

# ---- vdi ----------------------------------------------------------------
# an 8 MiB dynamic image with blocks 0 and 3 (header 512, map at 512, data
# at 1024)
I=$work/d.vdi
qemu-img create -q -f vdi "$I" 8M
qemu-io -f vdi -c 'write -P 0x41 0 64k' -c 'write -P 0x42 3M 64k' "$I" >/dev/null
ISIZE=$(fsize "$I")
vd() { patched "vdi-$1.vdi" "$I" bad bad "$2" "${@:3}"; }
head -c $((ISIZE - 4096)) "$I" > vdi-truncated.vdi
CHECK=2 case_ vdi-truncated.vdi ok bad "block 3 \(index 1, at [0-9]+\) is past the end of the file.*truncated"
head -c 520 "$I" > vdi-map-cut.vdi
case_ vdi-map-cut.vdi bad bad "block map of 8 entries at 512 is past the end of the file"
CHECK=2 patched vdi-index-past.vdi "$I" ok bad "block 0 \(index 16777215, at [0-9]+\) is past the end" 512 ffffff00
vd map-on-data "block map of 8 entries at 512 overlaps the data at 512" 344 00020000
vd map-on-header "block map at 0 overlaps the header" 340 00000000
vd disk-big "disk of 16777216 bytes is larger than its 8 blocks" 368 0000000100000000
vd block-1000 "block size 1000 is not a multiple of 512" 376 e8030000
vd extra-100 "block extra data of 100 bytes" 380 64000000
vd type-undo "unsupported image type 3" 76 03000000
vd version-2 "unsupported VDI version 2.1" 68 01000200
vd blocks-huge "block map of 1073741823 entries at 512 (is past the end|overlaps the data)" 384 ffffff3f
vd sector-4k "sector size 4096 is not 512" 360 00100000
vd header-size "header size 16 is not 384 to 440" 72 10000000
CHECK=2 patched vdi-index-dup.vdi "$I" ok ok "" 516 00000000
CHECK=2 patched vdi-alloc-count.vdi "$I" ok ok "" 388 09000000

rm -rf "$work"
echo "$(wc -l < "$manifest") cases in $out"
