#!/bin/bash
# Round trips through diskimg's vmdk writer: raw -> vmdk (streamOptimized)
# -> qcow2 -> vmdk (monolithicSparse) -> raw ends byte for byte where it
# started; every VMDK variant qemu-img writes, and the real VMware/ESXi files
# in ../shared/samples, rewritten as both subformats, keep their content
# (qemu-img compare; the samples' SHA-1 from their README).
# (Flat and split outputs are covered in convert-raw-to-vmdk-flat.sh.)
. "$(dirname "$0")/lib.sh"
need qemu-img
cd "$T"

# 5 MiB + 1000 bytes: ends inside a grain and inside a sector
gen -s 51 -u -m 512 -M 300K $((5 * 1024 * 1024 + 1000)) src.raw
size=$(stat -c %s src.raw)
ok "$DISKIMG" convert -t unsafe -O vmdk -o subformat=streamOptimized src.raw a.vmdk
ok "$DISKIMG" convert -t unsafe -O qcow2 a.vmdk b.qcow2
ok "$DISKIMG" convert -t unsafe -O vmdk b.qcow2 c.vmdk
ok "$DISKIMG" convert -t unsafe -O raw c.vmdk d.raw
for f in a.vmdk b.qcow2 c.vmdk d.raw; do
    qcompare src.raw "$f"
done
qemu-img check -q b.qcow2 || fail "check b.qcow2"
# the virtual size is whole sectors: the round trip adds zeros only there
[ "$(stat -c %s d.raw)" = $(( (size + 511) / 512 * 512 )) ] || fail "size of d.raw"
cmp -n "$size" src.raw d.raw || fail "round trip changed the content"
[ -z "$(tail -c +$((size + 1)) d.raw | tr -d '\0')" ] || fail "round trip: tail not zeros"
# and back from qemu-img's qcow2 of it, both subformats
qemu-img convert -O qcow2 src.raw q.qcow2 || fail "qemu-img convert"
for sub in monolithicSparse streamOptimized; do
    ok "$DISKIMG" convert -t unsafe -O vmdk -o subformat=$sub q.qcow2 q-$sub.vmdk
    qemu-img check -q q-$sub.vmdk || fail "check q-$sub.vmdk"
    qcompare src.raw q-$sub.vmdk
done

# every variant qemu-img writes, rewritten by diskimg in four subformats
i=0
for opts in subformat=monolithicSparse,zeroed_grain=on subformat=monolithicFlat \
            subformat=twoGbMaxExtentSparse subformat=streamOptimized; do
    i=$((i + 1))
    qemu-img convert -f raw -O vmdk -o "$opts" src.raw v$i.vmdk || fail "qemu-img -o $opts"
    for sub in monolithicSparse streamOptimized monolithicFlat twoGbMaxExtentSparse; do
        ok "$DISKIMG" convert -t unsafe -O vmdk -o subformat=$sub v$i.vmdk w.vmdk
        qemu-img check -q w.vmdk || fail "check: $opts -> $sub"
        qcompare v$i.vmdk w.vmdk
        rm -f w.vmdk w-*.vmdk
    done
done

# real files from VMware, ESXi and other tools keep their SHA-1
R=$SHARED/samples/vmdk/vmdk-rs
S=$SHARED/samples/vmdk/SecurityRonin-vmdk
[ -d "$R" ] || exit 0
while read -r img sha; do
    for sub in monolithicSparse streamOptimized; do
        ok "$DISKIMG" convert -t unsafe -O vmdk -o subformat=$sub "$img" s.vmdk
        qemu-img check -q s.vmdk || fail "check: $img -> $sub"
        qemu-img convert -O raw s.vmdk s.raw || fail "qemu-img reads $img -> $sub"
        got=$(sha1sum < s.raw | cut -d' ' -f1)
        [ "$got" = "$sha" ] || fail "$img -> $sub: SHA-1 $got, expected $sha"
        rm -f s.vmdk s.raw
    done
done <<EOF
$R/monolithicSparse.vmdk dd2fade471d68658b2ebbff7474f5d0a99da8989
$R/streamOptimized.vmdk dd2fade471d68658b2ebbff7474f5d0a99da8989
$R/streamOptimizedWithMarkers.vmdk b6fd01dd1b93b3589e6d76f7507af55c589ef69d
$R/twoGbMaxExtentSparse.vmdk dd2fade471d68658b2ebbff7474f5d0a99da8989
$R/vmfs_thick.vmdk 17eaf058191c5f2639d8f983ca7633e4f47087d1
$S/plaso_image.vmdk 76b29c91e6b9d180558e05e2e2058eac4b639562
$S/dfvfs_ext2.vmdk 4766c63c7acd5175015e3e8b90013a827e63f4ee
EOF
exit 0
