#!/bin/bash
# Seed corpora for the fuzz targets: small images of every variant, made by
# qemu-img/qemu-io from disks written by the project's seeded generator.
#   tests/fuzz/make-seeds.sh OUTDIR      -> OUTDIR/<target>/<name>
# Needs build/tools/genimg (make unit) and qemu-img/qemu-io.  Images are
# kept small (tiny clusters, 64-512 KiB disks): the fuzzer mutates faster.
set -eu
out=${1:?usage: make-seeds.sh OUTDIR}
top=$(cd "$(dirname "$0")/../.." && pwd)
genimg=${GENIMG:-$top/build/tools/genimg}
[ -x "$genimg" ] || { echo "make-seeds: $genimg missing (run make unit)" >&2; exit 1; }
command -v qemu-img >/dev/null || { echo "make-seeds: qemu-img missing" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)

# a small disk: runs of random, text, zeros and holes
disk() { rm -f "$tmp/$1"; "$genimg" -s "$2" -m 512 -M 8K "${3:-64K}" "$tmp/$1" >/dev/null; }
disk d1 1
disk d2 2
disk d3 3 128K

# ---- qcow2 --------------------------------------------------------------
q=$out/fuzz_qcow2
mkdir -p "$q"
qc() {  # qc NAME [convert options...]: d1 converted to qcow2
    local name=$1; shift
    qemu-img convert -q -f raw -O qcow2 "$@" "$tmp/d1" "$q/$name.qcow2"
}
qc v3-c4k -o cluster_size=4096
qc v3-c512 -o cluster_size=512
qc v2-c4k -o compat=0.10,cluster_size=4096
qc v3-zlib -c -o cluster_size=4096
qc v3-zstd -c -o cluster_size=4096,compression_type=zstd
qc v2-zlib -c -o compat=0.10,cluster_size=4096
qc v3-zlib-c512 -c -o cluster_size=512
qc extl2 -o cluster_size=16384,extended_l2=on
qc extl2-zstd -c -o cluster_size=16384,extended_l2=on,compression_type=zstd
qc rc1 -o cluster_size=4096,refcount_bits=1
qc rc64 -o cluster_size=4096,refcount_bits=64
qc lazy -o cluster_size=4096,lazy_refcounts=on
qc prealloc -o cluster_size=4096,preallocation=metadata
qemu-img convert -q -f raw -O qcow2 -o cluster_size=65536 "$tmp/d3" "$q/c64k.qcow2"
# zero clusters, subcluster writes, a compressed cluster over data (qemu-io)
qemu-img create -q -f qcow2 -o cluster_size=4096 "$q/zero.qcow2" 128K
qemu-io -f qcow2 -c 'write -P 0x11 0 16K' -c 'write -z 8K 8K' -c 'write -c -P 0x22 32K 4K' \
    -c 'write -z -u 64K 4K' "$q/zero.qcow2" >/dev/null
qemu-img create -q -f qcow2 -o cluster_size=16384,extended_l2=on "$q/extl2-sub.qcow2" 128K
qemu-io -f qcow2 -c 'write -P 0x33 1K 3K' -c 'write -z 20K 2K' -c 'write -P 0x44 40K 1K' \
    "$q/extl2-sub.qcow2" >/dev/null
# odd virtual size (not a multiple of the cluster)
qemu-img create -q -f qcow2 -o cluster_size=4096 "$q/odd.qcow2" 100001
qemu-io -f qcow2 -c 'write -P 0x55 95K 2560' "$q/odd.qcow2" >/dev/null
# snapshots
qc snap -o cluster_size=4096
qemu-img snapshot -c one "$q/snap.qcow2"
qemu-io -f qcow2 -c 'write -P 0x66 0 8K' "$q/snap.qcow2" >/dev/null
qemu-img snapshot -c two "$q/snap.qcow2"
# backing file names and formats (refused by the fuzz target: no files)
qemu-img create -q -f raw "$tmp/base.raw" 64K
qemu-img create -q -f qcow2 -o cluster_size=4096 -b "$tmp/base.raw" -F raw "$q/backing.qcow2"
qemu-io -f qcow2 -c 'write -P 0x77 4K 4K' "$q/backing.qcow2" >/dev/null
qemu-img rebase -u -b base.raw -F raw "$q/backing.qcow2"
qemu-img create -q -f qcow2 -o compat=0.10,cluster_size=4096 -b "$tmp/base.raw" -F raw \
    "$q/backing-v2.qcow2"
qemu-img rebase -u -b ../base.raw -F raw "$q/backing-v2.qcow2"
# external data file
qemu-img create -q -f qcow2 -o cluster_size=4096,data_file="$tmp/data.raw" "$q/datafile.qcow2" 64K
# persistent dirty bitmap
qc bitmap -o cluster_size=4096
qemu-img bitmap --add "$q/bitmap.qcow2" b0
qemu-img bitmap --add -g 65536 --disable "$q/bitmap.qcow2" b1
# dirty bit set (lazy refcounts, killed mid-way would do the same)
cp "$q/lazy.qcow2" "$q/dirty.qcow2"
printf '\x01' | dd of="$q/dirty.qcow2" bs=1 seek=79 conv=notrunc status=none

# writing into them (convert -n): the same images, sound or not
cp -r "$q" "$out/fuzz_qcow2_inplace"

# ---- vmdk ---------------------------------------------------------------
v=$out/fuzz_vmdk
mkdir -p "$v"
vc() {  # vc NAME SUBFORMAT [more -o options]: d2 converted to vmdk
    local name=$1 sub=$2; shift 2
    qemu-img convert -q -f raw -O vmdk -o subformat=$sub"$@" "$tmp/d2" "$v/$name.vmdk"
}
vc sparse monolithicSparse
vc sparse-zg monolithicSparse ,zeroed_grain=on
vc stream streamOptimized
qemu-img convert -q -f raw -O vmdk -o subformat=streamOptimized "$tmp/d3" "$v/stream-128k.vmdk"
qemu-img create -q -f vmdk -o subformat=monolithicSparse "$v/odd.vmdk" 100001
qemu-io -f vmdk -c 'write -P 0x21 64K 3K' "$v/odd.vmdk" >/dev/null
# descriptor files (their extents are refused by the target: no files)
qemu-img create -q -f vmdk -o subformat=monolithicFlat "$tmp/flat.vmdk" 64K
cp "$tmp/flat.vmdk" "$v/desc-flat.vmdk"
qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse "$tmp/split.vmdk" 64K
cp "$tmp/split.vmdk" "$v/desc-split.vmdk"
qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentFlat "$tmp/splitflat.vmdk" 64K
cp "$tmp/splitflat.vmdk" "$v/desc-splitflat.vmdk"
printf '# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType="vmfs"\n\n# Extent description\nRW 128 VMFS "disk-flat.vmdk"\n\nddb.adapterType = "lsilogic"\n' \
    > "$v/desc-vmfs.vmdk"
# hand-written descriptors: ZERO extents (readable without any file), a
# mix, CRLF line ends, lower-case keywords, a delta disk
zdesc() {
    printf '# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\n'
    printf 'createType="monolithicFlat"\n\n# Extent description\n'
    printf 'RW 128 ZERO\nRDONLY 64 ZERO\nNOACCESS 32 ZERO\n'
    printf 'RW 16 FLAT "x-flat.vmdk" 0\nRW 16 SPARSE "x-s001.vmdk"\n'
    printf '\n# The Disk Data Base\nddb.virtualHWVersion = "4"\nddb.geometry.cylinders = "1"\n'
    printf 'ddb.adapterType = "ide"\n'
}
zdesc > "$v/desc-zero.vmdk"
zdesc | sed 's/$/\r/' > "$v/desc-crlf.vmdk"
zdesc | sed 's/ZERO/zero/; s/createType/createtype/' > "$v/desc-lower.vmdk"
printf '# Disk DescriptorFile\nversion=1\nCID=1\nparentCID=2\ncreateType="monolithicSparse"\nparentFileNameHint="parent.vmdk"\nRW 128 SPARSE "delta.vmdk"\n' \
    > "$v/desc-delta.vmdk"
# real files from other tools (small ones)
samples=$top/../shared/samples
for f in vmdk/vmdk-rs/streamOptimized.vmdk vmdk/vmdk-rs/twoGbMaxExtentSparse.vmdk \
         vmdk/SecurityRonin-vmdk/plaso_image.vmdk vmdk/SecurityRonin-vmdk/dfvfs_ext2.vmdk; do
    [ -f "$samples/$f" ] && cp "$samples/$f" "$v/sample-$(basename "$f")"
done
for f in qemu-iotests/iotest-version3.vmdk.bz2 qemu-iotests/afl9.vmdk.bz2; do
    [ -f "$samples/$f" ] && bzip2 -dc "$samples/$f" > "$v/sample-$(basename "$f" .bz2)"
done

# ---- vmdk: every grain size, layout and marker (make-vmdk-seeds.py) ------
# qemu-img writes 64 KiB grains only: hosted sparse and streamOptimized
# extents of 1..128 sectors (and up to 2048 compressed), with and without
# footer, end-of-stream marker, markers and compression.
python3 "$top/tests/fuzz/make-vmdk-seeds.py" "$v" >/dev/null

# ---- vmdk in place (rebase -b ""): every grain size, monolithicSparse and
# twoGbMaxExtentSparse, with and without a parent (make-vmdk-seeds.py
# --inplace); qemu-img's sparse seeds; qemu-img children of a parent, each
# with its files in the target's container (make-vmdk-seeds.py --pack)
vi=$out/fuzz_vmdk_inplace
mkdir -p "$vi"
python3 "$top/tests/fuzz/make-vmdk-seeds.py" --inplace "$vi" >/dev/null
cp "$v/sparse.vmdk" "$v/sparse-zg.vmdk" "$v/odd.vmdk" "$vi/"
cp "$v"/g*-sparse.vmdk "$v"/g*-sparse-zg.vmdk "$v"/g*-sparse-gtes.vmdk "$vi/"
mkdir -p "$tmp/ip"
(
    cd "$tmp/ip"
    qemu-img create -q -f vmdk parent.vmdk 256K
    qemu-io -f vmdk -c 'write -P 0x41 0 64K' -c 'write -P 0x42 192K 32K' parent.vmdk >/dev/null
    pack() { python3 "$top/tests/fuzz/make-vmdk-seeds.py" --pack "$vi/$1" "${@:2}"; }
    for sub in monolithicSparse twoGbMaxExtentSparse; do
        for zg in off on; do
            rm -f img*.vmdk
            qemu-img create -q -f vmdk -o subformat=$sub,zeroed_grain=$zg -b parent.vmdk -F vmdk \
                img.vmdk
            qemu-io -f vmdk -c 'write -P 0x43 64K 64K' -c 'write -z 192K 64K' img.vmdk >/dev/null
            # (the image first: img-s001.vmdk sorts before img.vmdk)
            pack "qemu-$sub-zg$zg-pack" img.vmdk $(ls img-s*.vmdk 2>/dev/null) parent.vmdk
            if [ $sub = monolithicSparse ]; then
                cp img.vmdk "$vi/qemu-$sub-zg$zg-child.vmdk"
            fi
        done
    done
    rm -f img*.vmdk
    qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse img.vmdk 256K
    qemu-io -f vmdk -c 'write -P 0x44 0 4K' img.vmdk >/dev/null
    pack qemu-split-alone-pack img.vmdk img-s*.vmdk
)

# ---- ova ------------------------------------------------------------------
a=$out/fuzz_ova
mkdir -p "$a"
mkdir -p "$tmp/ova"
printf '<?xml version="1.0"?>\n<Envelope/>\n' > "$tmp/ova/app.ovf"
cp "$v/stream.vmdk" "$tmp/ova/disk1.vmdk"
cp "$v/sparse.vmdk" "$tmp/ova/disk2.vmdk"
(cd "$tmp/ova" && tar --format=ustar -cf "$a/two-disks.ova" app.ovf disk1.vmdk disk2.vmdk)
(cd "$tmp/ova" && tar --format=ustar -cf "$a/stream.ova" app.ovf disk1.vmdk)
(cd "$tmp/ova" && tar --format=gnu -cf "$a/gnu.ova" app.ovf disk1.vmdk)
(cd "$tmp/ova" && tar --format=pax -cf "$a/pax.ova" app.ovf disk1.vmdk)
long=$(printf 'd%.0s' $(seq 1 120)).vmdk
cp "$v/stream.vmdk" "$tmp/ova/$long"
(cd "$tmp/ova" && tar --format=gnu -cf "$a/longname.ova" app.ovf "$long")
(cd "$tmp/ova" && tar --format=pax -cf "$a/pax-longname.ova" app.ovf "$long")

# ---- ova: small-grain streams inside an archive -----------------------------
for g in 1 8 128; do
    cp "$v/g$g-stream.vmdk" "$tmp/ova/disk1.vmdk"
    (cd "$tmp/ova" && tar --format=ustar -cf "$a/stream-g$g.ova" app.ovf disk1.vmdk)
done
# a descriptor with its flat extent as members of the archive
qemu-img create -q -f vmdk -o subformat=monolithicFlat "$tmp/ova/flat.vmdk" 64K
qemu-io -f vmdk -c 'write -P 0x31 4K 4K' "$tmp/ova/flat.vmdk" >/dev/null
(cd "$tmp/ova" && tar --format=ustar -cf "$a/desc-and-flat.ova" app.ovf flat.vmdk flat-flat.vmdk)

# ---- stream: what `convert -` reads from a pipe, its format probed -------
s=$out/fuzz_stream
mkdir -p "$s"
cp "$v"/stream*.vmdk "$v"/g*-stream*.vmdk "$v"/g*-markers.vmdk "$s/"
cp "$a"/stream*.ova "$a/pax.ova" "$a/desc-and-flat.ova" "$s/"
cp "$v/sparse.vmdk" "$q/v3-c4k.qcow2" "$s/"     # refused: they need a seekable input
head -c 64K "$tmp/d1" > "$s/raw"

# ---- qcow2: every legal value of the header fields ----------------------
# cluster sizes 512 B - 2 MiB in v2 and v3, every refcount order 0-6,
# extended L2 over the cluster sizes that allow it, an external data file
# with and without data_file_raw and with extended L2.  Images of 128 KiB
# clusters and up are large (a few clusters each: up to 14 MiB): run.sh
# lets fuzz_qcow2 inputs be that long.
qd() {  # qd NAME BYTES [create -o options]: NAME holding two small writes
    local name=$1 size=$2; shift 2
    qemu-img create -q -f qcow2 "$@" "$q/$name.qcow2" "$size"
    qemu-io -f qcow2 -c 'write -P 0x5a 0 1536' -c "write -P 0xa5 $((size / 2 + 512)) 1024" \
        "$q/$name.qcow2" >/dev/null
}
for cb in 9 10 11 12 13 14 15 16; do
    cs=$((1 << cb))
    [ -f "$q/v3-cs$cs.qcow2" ] || qc "v3-cs$cs" -o cluster_size=$cs
    [ -f "$q/v2-cs$cs.qcow2" ] || qc "v2-cs$cs" -o compat=0.10,cluster_size=$cs
done
for cb in 17 18 19 20 21; do
    cs=$((1 << cb))
    qd "v3-cs$cs" 4194304 -o cluster_size=$cs
    qd "v2-cs$cs" 4194304 -o compat=0.10,cluster_size=$cs
done
for bits in 1 2 4 8 16 32 64; do
    qc "rcbits$bits" -o cluster_size=1024,refcount_bits=$bits
done
for cs in 16384 32768 65536; do
    qd "extl2-cs$cs" 262144 -o cluster_size=$cs,extended_l2=on
done
qd extl2-cs2097152 4194304 -o cluster_size=2097152,extended_l2=on
qc zstd-c512 -c -o cluster_size=512,compression_type=zstd
qc zstd-c64k -c -o cluster_size=65536,compression_type=zstd
qemu-img create -q -f qcow2 -o cluster_size=4096,data_file="$tmp/data2.raw",data_file_raw=on \
    "$q/datafile-raw.qcow2" 64K
qemu-img create -q -f qcow2 -o cluster_size=16384,extended_l2=on,data_file="$tmp/data3.raw" \
    "$q/datafile-extl2.qcow2" 64K
# snapshots of a v2 image; several bitmaps of several granularities
qc snap-v2 -o compat=0.10,cluster_size=4096
qemu-img snapshot -c one "$q/snap-v2.qcow2"
qemu-io -f qcow2 -c 'write -P 0x67 4K 4K' "$q/snap-v2.qcow2" >/dev/null
qc bitmaps -o cluster_size=4096
for g in 512 65536 4194304; do
    qemu-img bitmap --add -g $g "$q/bitmaps.qcow2" "b$g"
done
# writing into them too, except the large ones (128 KiB clusters and up)
for f in "$q"/v?-cs*.qcow2 "$q"/rcbits*.qcow2 "$q"/extl2-cs*.qcow2 "$q"/zstd-*.qcow2 \
         "$q"/snap-v2.qcow2 "$q"/bitmaps.qcow2; do
    [ "$(stat -c %s "$f")" -le 524288 ] && cp "$f" "$out/fuzz_qcow2_inplace/"
done

# ---- the modifying commands (check -r, resize): the images convert -n
# writes into, and damaged copies of a few: leaks, refcounts too low and too
# high, refcount blocks outside the file (its end wrapping too), a copied
# flag cleared, compressed entries over three host clusters
for t in fuzz_qcow2_repair fuzz_qcow2_resize fuzz_qcow2_snapshot fuzz_qcow2_bitmap; do
    cp -r "$out/fuzz_qcow2_inplace" "$out/$t"
    python3 "$top/tests/fuzz/make-qcow2-damaged.py" "$out/$t" "$q"/v3-c4k.qcow2 \
        "$q"/v2-c4k.qcow2 "$q"/rc1.qcow2 "$q"/rcbits64.qcow2 "$q"/snap.qcow2 \
        "$q"/v3-zlib.qcow2 "$q"/zstd-c64k.qcow2 "$q"/v3-zlib-c512.qcow2 "$q"/extl2.qcow2 \
        "$q"/v3-cs1024.qcow2 "$q"/prealloc.qcow2 >/dev/null
done

# ---- vhd ----------------------------------------------------------------
h=$out/fuzz_vhd
mkdir -p "$h"
mkvhd="python3 $top/tests/tools/vhdmake.py"
for sub in dynamic fixed; do
    for fs in off on; do
        qemu-img create -q -f vpc -o subformat=$sub,force_size=$fs "$h/$sub-fs$fs.vhd" 64K
    done
done
qemu-img convert -q -f raw -O vpc -o subformat=fixed "$tmp/d1" "$h/fixed-data.vhd"
# dynamic disks with small blocks, partial bitmaps, out-of-order blocks
$mkvhd "$h/dyn-4k.vhd" --type dynamic --size 65536 --block 4096 --creator qemu \
    --write 0:4096:0x11 --write 12288:1024:0x22 --write 61440:512:0x33
$mkvhd "$h/dyn-512.vhd" --type dynamic --size 8192 --block 512 --reverse --no-copy \
    --write 0:512:0x44 --write 4096:1024:0x55
$mkvhd "$h/dyn-odd.vhd" --type dynamic --size 10000 --block 8192 --creator 'vpc ' \
    --write 8192:1024:0x66
# differencing: each kind of locator, the header's parent name
$mkvhd "$tmp/parent.vhd" --type dynamic --size 16384 --block 4096 --write 0:8192:0x77
$mkvhd "$h/diff-w2ru.vhd" --type diff --size 16384 --block 4096 --parent "$tmp/parent.vhd" \
    --loc 'W2ru:.\parent.vhd' --loc 'W2ku:C:\x\parent.vhd' --write 512:512:0x12
$mkvhd "$h/diff-macx.vhd" --type diff --size 16384 --block 4096 --parent "$tmp/parent.vhd" \
    --loc 'MacX:file://localhost/Users/x/parent.vhd' --write 4096:4096:0x13
$mkvhd "$h/diff-name.vhd" --type diff --size 16384 --block 4096 --parent "$tmp/parent.vhd" \
    --parent-name parent.vhd --write 8192:512:0x14
$mkvhd "$h/fixed-win.vhd" --type fixed --size 8192 --write 1024:1024:0x15
# the block-size bounds (512 B is dyn-512 above; 256 MiB, unallocated, and
# 1 KiB) and the largest disk a VHD holds (0xff000000 sectors, 8160 BAT
# entries of 256 MiB), so that each bound is a seed, not a mutation away
$mkvhd "$h/dyn-256m.vhd" --type dynamic --size $((512 << 20)) --block $((256 << 20))
$mkvhd "$h/dyn-max-size.vhd" --type dynamic --size $((0xff000000 * 512)) --block $((256 << 20))
$mkvhd "$h/dyn-1k.vhd" --type dynamic --size 4096 --block 1024 --write 1024:1536:0x16
# every other power of two between: allocated blocks up to 128 KiB (two
# blocks, the second one partly written), unallocated above
for bits in $(seq 11 27); do
    bs=$((1 << bits))
    [ $bs = 4096 ] || [ $bs = 8192 ] && continue
    if [ $bs -le $((128 << 10)) ]; then
        $mkvhd "$h/dyn-b$bs.vhd" --type dynamic --size $((2 * bs)) --block $bs \
            --write 0:512:0x17 --write $((bs + 512)):512:0x18
    else
        $mkvhd "$h/dyn-b$bs.vhd" --type dynamic --size $((3 * bs)) --block $bs
    fi
done
# odd sizes qemu-img makes with force_size off (rounded up to the CHS
# geometry) and on (the size asked)
for sub in dynamic fixed; do
    for fs in off on; do
        qemu-img create -q -f vpc -o subformat=$sub,force_size=$fs "$h/$sub-odd-fs$fs.vhd" 100000
    done
done
# the creators qemu-img's size rule tells apart: 'vpc ', 'qemu' and unknown
# ones size the disk by its CHS geometry, the others by the current size;
# each with a geometry smaller than the current size (the specification's
# for it, rounded down), fixed and dynamic
for c in 'vpc ' qemu qem2 'win ' 'd2v ' 'tap\0' CTXS vbox 'xyz '; do
    n=$(printf %s "$c" | tr -c 'a-z0-9' _)
    $mkvhd "$h/creator-$n-fixed.vhd" --type fixed --size 65536 --creator "$c" --chs auto \
        --write 32768:4096:0x19 --write 61440:4096:0x1a
    $mkvhd "$h/creator-$n-dyn.vhd" --type dynamic --size 65536 --block 4096 --creator "$c" \
        --chs auto --write 32768:4096:0x19 --write 61440:4096:0x1a
done
# a geometry larger than the current size: the disk outgrows the file / BAT
$mkvhd "$h/chs-large-fixed.vhd" --type fixed --size 8192 --creator 'vpc ' --chs 2,16,63
$mkvhd "$h/chs-large-dyn.vhd" --type dynamic --size 8192 --block 4096 --creator 'vpc ' \
    --chs 2,16,63 --write 0:512:0x1b
# every disk type value: 0 none, 1 and 5, 6 reserved (refused); a fixed
# disk's footer on a dynamic layout and the reverse
for t in 0 1 5 6; do
    $mkvhd "$h/type$t.vhd" --type dynamic --size 8192 --block 4096 --footer-type $t \
        --write 0:512:0x1c
done
$mkvhd "$h/type2-on-dyn.vhd" --type dynamic --size 8192 --block 4096 --footer-type 2 \
    --write 0:512:0x1c
$mkvhd "$h/type3-on-fixed.vhd" --type fixed --size 8192 --footer-type 3 --write 0:512:0x1c
# checksums: a damaged last footer (checksum or cookie) the copy at 0
# stands in for, both damaged, a stale copy (another size) behind a good
# footer, a damaged dynamic header, a fixed disk's damaged footer
d='--type dynamic --size 16384 --block 4096 --write 4096:1024:0x1d'
$mkvhd "$h/sum-footer.vhd" $d --damage footer-sum
$mkvhd "$h/cookie-footer.vhd" $d --damage footer-cookie
$mkvhd "$h/sum-both.vhd" $d --damage footer-sum --damage copy-sum
$mkvhd "$h/sum-copy.vhd" $d --damage copy-sum
$mkvhd "$h/stale-copy.vhd" $d --damage copy-size
$mkvhd "$h/stale-copy-used.vhd" $d --damage copy-size --damage footer-sum
$mkvhd "$h/sum-header.vhd" $d --damage header-sum
$mkvhd "$h/sum-fixed.vhd" --type fixed --size 8192 --write 0:512:0x1e --damage footer-sum
# every locator kind: the deprecated Wi2r, Wi2k and 'Mac ' (not read)
# beside the header's name, and each of them alone
$mkvhd "$h/diff-oldlocs.vhd" --type diff --size 16384 --block 4096 --parent "$tmp/parent.vhd" \
    --loc 'Wi2r:.\parent.vhd' --loc 'Wi2k:C:\x\parent.vhd' --loc 'Mac :parent.vhd' \
    --parent-name parent.vhd --write 0:512:0x1f
for l in 'W2ku:C:\x\parent.vhd' 'Wi2r:parent.vhd' 'Mac :parent.vhd'; do
    n=$(printf %s "${l%%:*}" | tr -c 'a-zA-Z0-9' _)
    $mkvhd "$h/diff-only-$n.vhd" --type diff --size 16384 --block 4096 \
        --parent "$tmp/parent.vhd" --loc "$l" --write 0:512:0x1f
done
# cut at each structure boundary (cut-seeds.py): refused, or read the same
for s in dyn-4k dyn-512 diff-w2ru fixed-win creator-vpc_-dyn; do
    python3 "$top/tests/fuzz/cut-seeds.py" "$h/$s.vhd" "$h"
done

# ---- vhdx ---------------------------------------------------------------
# (at least 3 MiB each: the header section, metadata and BAT regions are
# 1 MiB apart by the format)
x=$out/fuzz_vhdx
mkdir -p "$x"
mkvhdx="python3 $top/tests/tools/vhdxmake.py"
M=$((1 << 20))
qemu-img create -q -f vhdx -o block_size=1M,log_size=1M "$x/qemu-dyn.vhdx" 2M
qemu-io -f vhdx -c 'write -P 0x11 0 4k' -c 'write -z 1M 4k' "$x/qemu-dyn.vhdx" >/dev/null
qemu-img create -q -f vhdx -o block_size=1M,log_size=1M,block_state_zero=on "$x/qemu-zero.vhdx" 2M
qemu-io -f vhdx -c 'write -P 0x12 512 512' -c 'discard 1M 1M' "$x/qemu-zero.vhdx" >/dev/null
qemu-img create -q -f vhdx -o subformat=fixed,block_size=1M,log_size=1M "$x/qemu-fixed.vhdx" 1M
W="--write 0:4096:0x21 --write 8192:512:0x22"
$mkvhdx "$x/b1m.vhdx" --size $((2 * M)) --log-size 0 $W
$mkvhdx "$x/b2m-4k.vhdx" --size $((2 * M)) --block $((2 * M)) --sector 4096 --log-size 0 \
    --write 0:8192:0x24
$mkvhdx "$x/b32m.vhdx" --size $M --block $((32 * M)) --log-size 0 $W
$mkvhdx "$x/b256m.vhdx" --size $M --block $((256 * M)) --log-size 0 --write 4096:512:0x23
$mkvhdx "$x/fixed.vhdx" --type fixed --size $((2 * M)) --log-size 0 $W
$mkvhdx "$x/states.vhdx" --size $((4 * M)) --log-size 0 --state 0:2 --state 1:3 --state 2:1 $W
$mkvhdx "$x/dirty1.vhdx" --size $M --log 1 $W
$mkvhdx "$x/dirty3-wrap.vhdx" --size $((2 * M)) --log 3 --log-wrap --log-zero $W
$mkvhdx "$x/dirty-data.vhdx" --size $M --log 2 --log-data --log-stale $W
$mkvhdx "$tmp/xp.vhdx" --size $((2 * M)) --log-size 0 --write 0:$M:0x31
$mkvhdx "$x/diff.vhdx" --type diff --size $((2 * M)) --log-size 0 --parent "$tmp/xp.vhdx" \
    --loc 'relative_path=.\xp.vhdx' --loc 'absolute_win32_path=C:\x\xp.vhdx' \
    --write 512:512:0x32 --write 4096:4096:0x33
$mkvhdx "$x/diff-4k.vhdx" --type diff --size $((2 * M)) --sector 4096 --log-size 0 \
    --linkage '{00000000-1111-2222-3333-444444444444}' --loc volume_path=p.vhdx \
    --write 8192:4096:0x34 --state 1:2
$mkvhdx "$x/diff-dirty.vhdx" --type diff --size $M --log 1 --parent "$tmp/xp.vhdx" \
    --loc relative_path=xp.vhdx --write 512:512:0x35
# every legal block size (1 MiB to 256 MiB, powers of two), both logical
# and physical sector sizes, disk sizes that are not a whole block or MiB,
# and disks past one sector-bitmap chunk (2^23 sectors: 4 GiB with 512-byte
# sectors), where the BAT interleaves a bitmap entry after every chunk's
# payload entries and a differencing disk needs a second bitmap block
$mkvhdx "$x/b4m-odd.vhdx" --size $((5 * M + 512)) --block $((4 * M)) --log-size 0 \
    --write $((4 * M + 512)):512:0x25 --write $((5 * M)):512:0x26
$mkvhdx "$x/b8m-4k-p512.vhdx" --size $((8 * M + 4096)) --block $((8 * M)) --sector 4096 \
    --psector 512 --log-size 0 --write $((8 * M)):4096:0x27
$mkvhdx "$x/b16m.vhdx" --size $((3 * M + 512)) --block $((16 * M)) --log-size 0 $W
$mkvhdx "$x/b64m-4k.vhdx" --size $M --block $((64 * M)) --sector 4096 --log-size 0 \
    --write 4096:4096:0x28
$mkvhdx "$x/b128m.vhdx" --size $M --block $((128 * M)) --log-size 0 --write 0:512:0x29
$mkvhdx "$x/fixed-4k.vhdx" --type fixed --size $M --sector 4096 --log-size 0 --write 0:4096:0x2a
$mkvhdx "$x/dirty-log2m.vhdx" --size $M --log 2 --log-size $((2 * M)) --log-overwrite $W
G=$((1 << 30))
$mkvhdx "$x/chunk2.vhdx" --size $((5 * G)) --log-size 0 --write 0:512:0x2b \
    --write $((4 * G + 512 * M)):4096:0x2c --state 4097:2
$mkvhdx "$tmp/xbig.vhdx" --size $((5 * G)) --log-size 0 --write $((4 * G)):4096:0x2d
$mkvhdx "$x/diff-chunk2.vhdx" --type diff --size $((5 * G)) --log-size 0 --parent "$tmp/xbig.vhdx" \
    --loc relative_path=xbig.vhdx --write 512:512:0x2e --write $((4 * G + 1024)):512:0x2f
$mkvhdx "$x/region2.vhdx" --size $M --log-size 0 --corrupt region1 $W
$mkvhdx "$x/header-old.vhdx" --size $M --log-size 0 --corrupt header $W

# ---- vdi ----------------------------------------------------------------
w=$out/fuzz_vdi
mkdir -p "$w"
mkvdi="python3 $top/tests/tools/vdimake.py"
qemu-img create -q -f vdi "$w/dynamic.vdi" 64K
qemu-img create -q -f vdi -o static=on "$w/static.vdi" 64K
for v in 1.1 1.0 0; do
    $mkvdi "$w/v$v-4k.vdi" --size 65536 --version $v --block 4096 --reverse \
        --write 0:4096:0x21 --write 20480:1024:0x22 --zero 3
done
$mkvdi "$w/static-4k.vdi" --size 16384 --type 2 --block 4096 --write 4096:512:0x23
$mkvdi "$tmp/vparent.vdi" --size 16384 --block 4096 --write 0:8192:0x24
$mkvdi "$w/diff.vdi" --size 16384 --type 4 --block 4096 --parent "$tmp/vparent.vdi" \
    --write 8192:512:0x25 --zero 1
$mkvdi "$w/odd.vdi" --size 10000 --block 8192 --write 8192:1024:0x26
# the bounds: 512-byte and 256 MiB blocks (unallocated), block extra data
# (VirtualBox writes none; 512 B and 256 KiB: the 1 MiB limit would not
# fit the fuzzers' 512 KiB inputs), a 64 GiB disk of 1 MiB blocks (a
# 256 KiB map)
$mkvdi "$w/b512.vdi" --size 4096 --block 512 --write 512:1024:0x27 --zero 7
$mkvdi "$w/b256m.vdi" --size $((1 << 30)) --block $((256 << 20))
$mkvdi "$w/extra512.vdi" --size 16384 --block 4096 --extra 512 --write 4096:4096:0x28
$mkvdi "$w/extra-max.vdi" --size 8192 --block 4096 --extra $((256 << 10)) --write 0:512:0x29
$mkvdi "$w/big-map.vdi" --size $((64 << 30)) --block $((1 << 20)) --zero 65535
# header sizes 384 (no LCHS geometry) and 440 (the whole sector), a
# version 0 header whose sector size is 0 (old VirtualBox), an undo image
# (type 3, refused), a version 1.0 static and differencing image
for hs in 384 440; do
    $mkvdi "$w/hsize$hs.vdi" --size 16384 --block 4096 --header-size $hs \
        --write 4096:1024:0x2a --zero 3
done
$mkvdi "$w/v0-sector0.vdi" --size 16384 --version 0 --block 4096 --sector-size 0 \
    --write 0:512:0x2b
$mkvdi "$w/undo.vdi" --size 16384 --type 3 --block 4096 --write 0:512:0x2c
$mkvdi "$w/v1.0-static.vdi" --size 16384 --version 1.0 --type 2 --block 4096 \
    --write 8192:512:0x2d
$mkvdi "$w/v1.0-diff.vdi" --size 16384 --version 1.0 --type 4 --block 4096 \
    --parent "$tmp/vparent.vdi" --write 0:512:0x2e
# two blocks of extra data written out of order (a write across a block
# boundary): the stride is extra + block
$mkvdi "$w/extra-2blk.vdi" --size 16384 --block 4096 --extra 1024 --reverse \
    --write 3584:1024:0x2f --write 12288:512:0x30
# cut at each structure boundary (cut-seeds.py): refused, or read the same
for s in v1.1-4k v0-4k static-4k diff extra-2blk hsize384; do
    python3 "$top/tests/fuzz/cut-seeds.py" "$w/$s.vdi" "$w"
done

# writing into them (convert -n): the same images, sound or not
cp -r "$h" "$out/fuzz_vhd_inplace"
cp -r "$w" "$out/fuzz_vdi_inplace"

# ---- options and sizes ---------------------------------------------------
o=$out/fuzz_options
mkdir -p "$o"
i=0
while IFS= read -r line; do
    i=$((i + 1))
    printf '%s' "$line" > "$o/opt$i"
done <<'EOF'
cluster_size=64K,compression_type=zstd
compat=0.10,refcount_bits=1,lazy_refcounts=on
extended_l2=on,cluster_size=2M
preallocation=metadata,backing_file=a,,b,backing_fmt=raw
help
1.5G
512
0.5k
9223372036854775807
8E
subformat=streamOptimized,adapter_type=lsilogic,zeroed_grain=on
cluster_size=512,,,,refcount_bits=64,compat=1.1
EOF
printf 'size=1M\0001.25M' > "$o/opt-nul"

echo "seeds in $out: $(find "$out" -type f | wc -l) files"
