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
# convert: the same bytes as qemu-img's reading of FILE).  Only info can be
# `ok` while convert is `bad`: info does not read data clusters.  CHECK is
# the exit status `diskimg check FILE` must give (2: corruptions found), or
# `-` (not run).
# tests/corpus-bad-images.sh runs them.  Needs qemu-img, qemu-io, od, dd.
set -eu
out=${1:?usage: make-bad-images.sh OUTDIR}
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
    local hex; hex=$(od -A n -t x1 -j "$2" -N "$3" "$1" | tr -d ' \n')
    echo $((16#$hex))
}
peekle() {  # little-endian
    local hex r="" i; hex=$(od -A n -t x1 -j "$2" -N "$3" "$1" | tr -d ' \n')
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
h l1off-max "L1 table offset 0x[0-9a-f]+ is (not aligned|too large|invalid)" 40 ffffffffffffffff
h l1off-2e62 "L1 table .*(runs past the end of the file|too large)" 40 4000000000000000
# refcount table
h reft-0 "refcount table offset 0x0 is not a non-zero multiple of the cluster size" 48 "$(be64 0)"
h reft-mis "refcount table offset 0x[0-9a-f]+ is not a non-zero multiple of the cluster size" 48 "$(be64 $((REFT + 8)))"
# a refcount table past the end: only check reads it (qemu-img check: errors)
CHECK=2 hok reft-past 48 "$(be64 "$PAST")"
h reft-max "refcount table offset 0x[0-9a-f]+ is (not|too)" 48 ffffffffffffffff
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
h snapoff-max "snapshot table offset 0x[0-9a-f]+ is" 60 "$(be32 1)" 64 ffffffffffffffff
h snap-many-l1 "snapshot table entry 1 at offset [0-9]+ .*past the end of the file|snapshot .*(L1|past)" \
    60 "$(be32 65536)" 64 "$(be64 $((QSIZE / 4096 * 4096)))"
# feature bits
h incompat-bit5 "unknown incompatible feature bit 5|incompatible feature.* 5" 72 0000000000000020
h incompat-bit63 "unknown incompatible feature bit 63|incompatible feature.* 63" 72 8000000000000000
h incompat-all "unsupported incompatible feature bits 5, 6, 7, .* 63" 72 ffffffffffffffff
h datafile-noname "uses an external data file but does not name it" 79 04
h ctype-nobit "compression_type 1 needs the compression type incompatible bit" 104 01
h ctype-2 "unknown compression_type 2" 79 08 104 02
h ctype-255 "unknown compression_type 255" 79 08 104 ff
h extl2-16k "extended L2|subcluster|L2 entr" 79 10
hok compat-all 80 ffffffffffffffff
hok autoclear-all 88 fffffffffffffffc
hok dirty 79 01
hok refcount-order-0 96 "$(be32 0)"
h raw-nodata "raw external data bit is set without an external data file" 95 02
# header length
for v in 0 71 72 103; do h hlen-$v "header_length $v is invalid" 100 "$(be32 $v)"; done
h hlen-105 "header_length 105 is (invalid|not a multiple)" 100 "$(be32 105)"
h hlen-cluster "header_length 4097 is (larger than the cluster size|invalid)" 100 "$(be32 4097)"
h hlen-max "header_length 4294967295 is (larger than the cluster size|invalid)" 100 ffffffff
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
h ext-datafile-long "external data file name of 4096 bytes is too long|data file name .*too long|past the end" \
    79 04 112 "44415441$(be32 4096)"
h ext-bitmaps-0 "bitmaps extension|bitmap" 88 0000000000000001 112 "23852875$(be32 24)$(be32 0)00000000$(be64 0)$(be64 0)"
h ext-bitmaps-max "bitmaps extension|bitmap" 88 0000000000000001 112 \
    "23852875$(be32 24)ffffffff00000000ffffffffffffffff$(be64 8192)"
h ext-crypto "crypto|encrypt" 112 "0537be77$(be32 16)$(be64 8192)$(be64 4096)"
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
# cluster at offset 0 likewise; one at the L2 table itself is just data
patched qcow2-tab-l1-zero.qcow2 "$B" ok ok "" "$L1" 8000000000000000
patched qcow2-tab-l2-zero.qcow2 "$B" ok ok "" "$L2" 8000000000000000
CHECK=2 patched qcow2-tab-l2-self.qcow2 "$B" ok ok "" "$L2" "$(be64 $((L2 | (1 << 63))))"
CHECK=2 e l2-past ok "data cluster at host offset $PAST .*past the end of the file" "$L2" "$(be64 $((PAST | (1 << 63))))"
e l2-past-2e55 ok "data cluster at host offset [0-9]+ .*past the end of the file" "$L2" 80fffffffffff000
e l2-mis ok "host offset 0x[0-9a-f]+ is not aligned to the cluster size" "$L2" "$(be64 $((D0 + 512 | (1 << 63))))"
e l2-reserved ok "L2 entry 0x[0-9a-f]+ at offset $L2 has reserved bits set" "$L2" "$(be64 $((D0 | (1 << 63) | (1 << 56))))"
e l2-reserved-lo ok "L2 entry 0x[0-9a-f]+ at offset $L2 has reserved bits set" "$L2" "$(be64 $((D0 | (1 << 63) | 2)))"
e l2-max ok "L2 entry 0x[0-9a-f]+ at offset $L2 .*(reserved|copied)" "$L2" ffffffffffffffff
e comp-past ok "compressed data .* starts at host offset [0-9]+, past the end of the file" \
    "$CENT" "$(be64 $(( (1 << 62) | PAST )))"
e comp-header ok "compressed L2 entry .* points into the header cluster" "$CENT" "$(be64 $(( (1 << 62) | 100 )))"
e comp-copied ok "compressed L2 entry .* has the copied flag set" "$CENT" "$(be64 $(( (3 << 62) | COFF )))"
e comp-garbage ok "compressed cluster at host offset $COFF .*corrupt deflate data" "$COFF" ffffffffffffffffffffffff
e comp-short ok "compressed cluster at host offset [0-9]+ .*(inflates to|corrupt|truncated|ends)" "$CENT" \
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
    case_ "qcow2-trunc-$t.qcow2" $info bad "past the end of the file|inflates to [0-9]+ bytes, expected|corrupt"
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
case_ qcow2-bomb-zstd.qcow2 ok bad "inflates to more than the cluster size \(4096 bytes\)|zstd"

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
ref dotdot-deep ./../../../../../../../../etc/passwd raw "outside the image's folder"
ref symlink link-out raw "refers to 'link-out' \(/etc/passwd\), outside the image's folder"
ref nbd nbd://localhost:10809/x raw "protocols and json: references are not supported"
ref json 'json:{"file.driver":"file","file.filename":"/etc/passwd"}' raw \
    "protocols and json: references are not supported"
ref http http://example.com/x.img raw "protocols and json: references are not supported"
ref missing does-not-exist.qcow2 qcow2 "refers to 'does-not-exist.qcow2', which does not exist"
qemu-img create -q -f qcow2 -o cluster_size=4096,data_file=/etc/passwd refs/sub/datafile-passwd.qcow2 64K 2>/dev/null ||
    { qemu-img create -q -f qcow2 -o cluster_size=4096,data_file="$work/d.raw" refs/sub/datafile-passwd.qcow2 64K; }
# name the data file /etc/passwd whatever qemu-img allowed
f=refs/sub/datafile-passwd.qcow2
ext=$(find_ext "$f" 0x44415441)
name=$(printf '/etc/passwd' | od -A n -t x1 | tr -d ' \n')
old=$(peek "$f" $((ext + 4)) 4)
poke "$f" $((ext + 4)) "$(be32 11)"
poke "$f" $((ext + 8)) "$name$(printf '%0*d' $(( ((old + 7) / 8 * 8 - 11) * 2 )) 0)"
case_ "$f" bad bad "refers to '/etc/passwd' .*outside the image's folder"

rm -rf "$work"
echo "$(wc -l < "$manifest") cases in $out"
