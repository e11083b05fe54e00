#!/bin/bash
# convert never writes onto a file it reads: every file an input chain has
# open (the images, their backing files, VMDK extent files, qcow2 data
# files, -B's image, block devices whatever node names them) against every
# file the output writes or replaces (the target, the extent files a vmdk
# output makes, the old image's extents a commit removes; with -n the
# target and what its image opens for writing; standard output).
# Each refusal: exit 1, "also an input", the inputs unchanged, nothing left.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault/lib.sh"
need qemu-img
mkdir -p "$T/in"
cd "$T/in" || fail "cd"
gen -s 9 -m 4K -M 256K 2M src.raw
qemu-img convert -q -f raw -O vmdk -o subformat=monolithicFlat src.raw flat.vmdk
qemu-img convert -q -f raw -O vmdk -o subformat=twoGbMaxExtentSparse src.raw split.vmdk
qemu-img create -q -f qcow2 -o data_file=q.data q.qcow2 2M
qemu-io -f qcow2 -c 'write -P 0x5a 0 1M' q.qcow2 >/dev/null
qemu-img create -q -f qcow2 base.qcow2 2M
qemu-io -f qcow2 -c 'write -P 0x6b 64k 64k' base.qcow2 >/dev/null
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2
cp src.raw out-flat.vmdk        # a raw input named like a vmdk extent
checksum_inputs

refused() {
    local tag=$1; shift
    expect_error "also an input" "$@"
    unchanged "$tag"
    ls -A | grep -q 'diskimg-' && fail "$tag: left behind: $(ls -A)"
    echo "refused: $tag"
}

refused "the source itself" "$DISKIMG" convert src.raw src.raw
refused "a vmdk extent of the source" "$DISKIMG" convert flat.vmdk flat-flat.vmdk
refused "a split sparse extent, -O vmdk" "$DISKIMG" convert -O vmdk split.vmdk split-s001.vmdk
refused "a qcow2 data file of the source" "$DISKIMG" convert q.qcow2 q.data
refused "the backing file of the source" "$DISKIMG" convert top.qcow2 base.qcow2
refused "-n into an extent of the source" "$DISKIMG" convert -n flat.vmdk flat-flat.vmdk
refused "-n into the data file" "$DISKIMG" convert -n -O raw q.qcow2 q.data
refused "-B names the target" "$DISKIMG" convert -O qcow2 -B top.qcow2 -F qcow2 src.raw top.qcow2
# the extent file the vmdk output would make is an input
refused "an extent the output makes" \
    "$DISKIMG" convert -f raw -O vmdk -o subformat=monolithicFlat out-flat.vmdk out.vmdk
refused "a split extent the output makes" \
    "$DISKIMG" convert -f raw -O vmdk -o subformat=twoGbMaxExtentFlat split-s001.vmdk split.vmdk
# standard output is an input
refused "standard output appends to the source" \
    sh -c '"$1" convert -O raw src.raw - >> src.raw' sh "$DISKIMG"

# the old image at the target names a file an input reads: the commit
# would remove it as the old image's extent
mkdir -p "$T/o"
cd "$T/o" || fail "cd"
qemu-img convert -q -f raw -O vmdk -o subformat=monolithicFlat "$T/in/src.raw" out.vmdk
sed 's/out-flat.vmdk/..\/o\/out-flat.vmdk/' out.vmdk > "$T/in/uses.vmdk"
cd "$T/in" || fail "cd"
checksum_inputs
refused "an extent of the old image the commit removes" \
    "$DISKIMG" convert --allow-external -O vmdk -o subformat=twoGbMaxExtentSparse uses.vmdk \
    "$T/o/out.vmdk"
[ -f "$T/o/out-flat.vmdk" ] || fail "the input's extent was removed"

# a block device, read through one node and written through another
if [ "$(id -u)" = 0 ] && loop=$(losetup -f --show "$T/in/src.raw" 2>/dev/null); then
    trap 'losetup -d "$loop"' EXIT
    mknod "$T/node" b "$((0x$(stat -c %t "$loop")))" "$((0x$(stat -c %T "$loop")))"
    checksum_inputs
    refused "a block device by another node" "$DISKIMG" convert -f raw "$loop" "$T/node"
    refused "a block device by another node, -n" "$DISKIMG" convert -n -f raw "$T/node" "$loop"
    rm -f "$T/node"
fi

# not refused: a different file, and a -n target whose backing file is the source
ok "$DISKIMG" convert flat.vmdk "$T/ok.raw"
qcompare src.raw "$T/ok.raw"
exit 0
