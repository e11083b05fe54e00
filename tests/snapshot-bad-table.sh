#!/bin/bash
# diskimg snapshot on images with a corrupt snapshot table or metadata:
# each operation is refused with a message (exit 1) and the file is not
# changed at all (same bytes, same size).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"
cd "$T" || fail "cd"

qemu-img create -q -f qcow2 good.qcow2 4M
qemu-io -c 'write -P 1 0 1M' good.qcow2 >/dev/null
qemu-img snapshot -c s1 good.qcow2
qemu-io -c 'write -P 2 0 64k' good.qcow2 >/dev/null
snoff=$(peek64 good.qcow2 64)

# bad CASE RE: every operation on bad.qcow2 refused with RE, file unchanged
bad() {
    local tag=$1 re=$2 args sum
    sum=$(sha1sum < bad.qcow2)
    for args in "-c new" "-d s1" "-a s1"; do
        expect_error "$re" "$DISKIMG" snapshot $args bad.qcow2
        [ "$(sha1sum < bad.qcow2)" = "$sum" ] || fail "$tag: snapshot $args changed the file"
    done
}

cp good.qcow2 bad.qcow2; poke bad.qcow2 60 "$(be32 100000)"            # absurd count
bad "count" "snapshots"
cp good.qcow2 bad.qcow2; poke bad.qcow2 60 "$(be32 4294967295)"
bad "count 2^32-1" "snapshots"
cp good.qcow2 bad.qcow2; poke bad.qcow2 64 "$(be64 $((1 << 40)))"      # table past the end
bad "table offset" "past the end"
cp good.qcow2 bad.qcow2; poke bad.qcow2 $snoff "$(be64 $((1 << 40)))"  # snapshot L1 past the end
bad "snapshot L1 offset" "corruptions"
cp good.qcow2 bad.qcow2; poke bad.qcow2 $snoff "$(be64 12345)"         # misaligned
bad "snapshot L1 misaligned" "corruptions"
cp good.qcow2 bad.qcow2; poke bad.qcow2 $((snoff + 8)) "$(be32 $((1 << 30)))"   # absurd L1 size
bad "snapshot L1 size" "corruptions"
cp good.qcow2 bad.qcow2; poke bad.qcow2 $((snoff + 36)) "$(be32 100000)"  # extra data size
bad "extra data" "extra data"
cp good.qcow2 bad.qcow2; poke bad.qcow2 $((snoff + 12)) "0000"         # empty ID
bad "empty ID" "empty ID"
# the snapshot's L1 table names an L2 table past the end of the file
l1=$(peek64 good.qcow2 "$snoff")
cp good.qcow2 bad.qcow2; poke bad.qcow2 "$l1" "$(be64 $((1 << 40)))"
bad "snapshot L2 offset" "corruptions"
# dirty and corrupt images
cp good.qcow2 bad.qcow2; poke bad.qcow2 79 01
bad "dirty" "dirty bit"
cp good.qcow2 bad.qcow2; poke bad.qcow2 79 02
bad "corrupt bit" "corrupt"
# an external data file
qemu-img create -q -f qcow2 -o data_file=d.raw df.qcow2 1M
sum=$(sha1sum < df.qcow2)
expect_error "external data file" "$DISKIMG" snapshot -c x df.qcow2
[ "$(sha1sum < df.qcow2)" = "$sum" ] || fail "data file image changed"
# 1-bit refcounts cannot count a second reference
qemu-img create -q -f qcow2 -o refcount_bits=1 one.qcow2 1M
qemu-io -c 'write -P 1 0 64k' one.qcow2 >/dev/null
cp one.qcow2 bad.qcow2
expect_error "cannot be raised" "$DISKIMG" snapshot -c x bad.qcow2
cmp one.qcow2 bad.qcow2 || fail "1-bit refcounts: file changed"
echo "snapshot-bad-table: ok"
