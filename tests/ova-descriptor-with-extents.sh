#!/bin/bash
# An OVA may hold a descriptor with its extent files as members
# (monolithicFlat: disk.vmdk + disk-flat.vmdk; twoGbMaxExtentSparse and
# twoGbMaxExtentFlat: a descriptor and its numbered extents): they are read
# from the archive, in any member order, also from a subfolder of it.
# The output must equal the raw source, and what qemu-img reads from the
# extracted files.  --disk N counts disks, not extent members; `info` lists
# the disks only.  From a pipe, a descriptor followed by its extent works;
# members that come too early or lie behind a member still being read fail
# with a message saying to read the archive from a file.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need tar
cd "$T" || fail "cd"

echo '<Envelope/>' > a.ovf
gen -s 81 -m 4K -M 128K 3M src.raw
qemu-img convert -q -f raw -O vmdk -o subformat=monolithicFlat src.raw disk.vmdk || fail "qemu-img"
[ -f disk-flat.vmdk ] || fail "qemu-img made no disk-flat.vmdk"

# a 5 GiB twoGbMaxExtentSparse disk: three sparse extent members
qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse sp.vmdk 5G || fail "qemu-img"
qemu-io -f vmdk -c 'write -P 0x11 0 1M' -c 'write -P 0x22 2600M 1M' \
    -c 'write -P 0x33 4700M 64k' sp.vmdk >/dev/null || fail "qemu-io"
[ -f sp-s003.vmdk ] || fail "qemu-img made no third extent"

# twoGbMaxExtentFlat with three 1 MiB extents, in a subfolder
mkdir -p disks
for i in 1 2 3; do
    dd if=src.raw of=disks/tf-f00$i.vmdk bs=1M skip=$((i - 1)) count=1 status=none
done
{
    printf '# Disk DescriptorFile\nversion=1\nCID=2468ace0\nparentCID=ffffffff\n'
    printf 'createType="twoGbMaxExtentFlat"\n\n# Extent description\n'
    for i in 1 2 3; do printf 'RW 2048 FLAT "tf-f00%d.vmdk" 0\n' $i; done
    printf '\n# The Disk Data Base\n#DDB\n\nddb.adapterType = "lsilogic"\n'
} > disks/tf.vmdk

qemu-img convert -q -f raw -O vmdk -o subformat=streamOptimized src.raw stream.vmdk || fail "qemu-img"

# oracle: qemu-img reads each disk from the files as extracted
qcompare disk.vmdk src.raw
qcompare disks/tf.vmdk src.raw

check() {  # OVA WANT-VMDK ARGS...: convert from the archive, compare
    local ova=$1 want=$2; shift 2
    rm -rf out.qcow2 x && mkdir x
    ok "$DISKIMG" convert "$@" -O qcow2 "$ova" out.qcow2
    tar -xf "$ova" -C x || fail "tar -x $ova"
    qcompare "x/$want" out.qcow2
}

# monolithicFlat: descriptor first, extent first (the order `tar *` gives)
tar --format=ustar -cf flat1.ova a.ovf disk.vmdk disk-flat.vmdk || fail "tar"
tar --format=ustar -cf flat2.ova a.ovf disk-flat.vmdk disk.vmdk || fail "tar"
for ova in flat1.ova flat2.ova; do
    check $ova disk.vmdk
    rm -f out.raw
    ok "$DISKIMG" convert -O raw $ova out.raw
    cmp src.raw out.raw || fail "$ova: not the source's bytes"
done
tar --format=ustar -cf sparse.ova a.ovf sp-s00*.vmdk sp.vmdk || fail "tar"
check sparse.ova sp.vmdk
tar --format=gnu -cf tflat.ova a.ovf disks/tf-f00*.vmdk disks/tf.vmdk || fail "tar"
check tflat.ova disks/tf.vmdk
# no host file of those names is needed (nor read): none exists beside the archives
mkdir elsewhere && cp flat2.ova sparse.ova tflat.ova elsewhere/
ok "$DISKIMG" compare elsewhere/flat2.ova src.raw
ok "$DISKIMG" compare elsewhere/tflat.ova src.raw

# --disk counts disks: flat (0), sparse (1), stream (2); 7 *.vmdk members
tar --format=ustar -cf all.ova a.ovf disk-flat.vmdk disk.vmdk sp-s00*.vmdk sp.vmdk \
    stream.vmdk || fail "tar"
check all.ova disk.vmdk
check all.ova sp.vmdk --disk 1
check all.ova stream.vmdk --disk 2
expect_error 'holds 3 disks; disk 3 does not exist' "$DISKIMG" convert --disk 3 -O raw all.ova o.raw
"$DISKIMG" info --output=json all.ova > info.json || fail "info"
names=$(grep -o '"name": "[^"]*"' info.json | tr '\n' ' ')
[ "$names" = '"name": "disk.vmdk" "name": "sp.vmdk" "name": "stream.vmdk" ' ] ||
    fail "info lists $names, not the three disks"

# an extent is named as the member it is, in info and in messages
"$DISKIMG" info --output=json flat2.ova > info.json || fail "info flat2.ova"
grep -q '"filename": "flat2.ova\[disk-flat.vmdk\]"' info.json || fail "info: extent not named as a member"
sed 's/^RW 6144 FLAT/RW 8192 FLAT/' disk.vmdk > big.vmdk
grep -q 'RW 8192 FLAT' big.vmdk || fail "sed"
mkdir -p bigdir && cp big.vmdk bigdir/disk.vmdk && cp disk-flat.vmdk bigdir/
(cd bigdir && tar --format=ustar -cf ../short.ova disk.vmdk disk-flat.vmdk) || fail "tar"
expect_error 'short.ova\[disk-flat.vmdk\]: flat extent needs 4194304 bytes at offset 0, but the file has only 3145728' \
    "$DISKIMG" convert -O raw short.ova o.raw

# pipes: a descriptor before its extent works; the disk after the extents
# counts the same way
rm -f out.raw
ok "$DISKIMG" convert -O raw - out.raw < <(cat flat1.ova)
cmp src.raw out.raw || fail "pipe flat1.ova: wrong content"
tar --format=ustar -cf pipe.ova a.ovf disk.vmdk disk-flat.vmdk stream.vmdk || fail "tar"
rm -f out.raw
ok "$DISKIMG" convert --disk 1 -O raw - out.raw < <(cat pipe.ova)
cmp src.raw out.raw || fail "pipe --disk 1: wrong content"
rm -f out.raw
expect_error "refers to 'disk-flat.vmdk', which comes before it in the archive: from a pipe.*read the OVA from a file" \
    "$DISKIMG" convert -O raw - out.raw < <(cat flat2.ova)
[ ! -e out.raw ] || fail "an output was left"
tar --format=ustar -cf sparse2.ova a.ovf sp.vmdk sp-s00*.vmdk || fail "tar"
expect_error "can only be read in order.*'sp-s001.vmdk', which is still being read; read the OVA from a file" \
    "$DISKIMG" convert -O raw - out.raw < <(cat sparse2.ova)
[ ! -e out.raw ] || fail "an output was left"
exit 0
