#!/bin/bash
# External data files (data_file, data_file_raw), info's data-file keys, and
# a data file reference leaving the image's folder.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/qcow2/helpers.sh"

cd "$T" || fail "cd"
for raw in off on; do
    img=df-$raw.qcow2
    qemu-img create -q -f qcow2 -o data_file=df-$raw.data,data_file_raw=$raw $img 3M ||
        fail "create data_file_raw=$raw"
    qemu-io -c 'write -P 0x61 0 100k' -c 'write -P 0x62 1M 64k' -c 'write -z 32k 32k' \
            -c 'write -P 0x63 2M 1k' $img >/dev/null || fail "qemu-io $raw"
    readback $img
    "$DISKIMG" info --output=json $img > info.json
    qemu-img info --output=json $img > ref.json
    for key in data-file data-file-raw; do
        grep "\"$key\"" ref.json > want
        grep "\"$key\"" info.json > got
        cmp want got || { cat got want; fail "info $key ($raw)"; }
    done
    "$DISKIMG" check --output=json $img > mine.json || fail "check data file image: exit $?"
    qemu-img check --output=json $img > ref.json
    cmp mine.json ref.json || { diff mine.json ref.json; fail "check json ($raw)"; }
done

# data file outside the image's folder
mkdir -p sub
(cd sub && qemu-img create -q -f qcow2 -o data_file=../outside.data x.qcow2 1M) || fail "create x"
[ -e outside.data ] || fail "data file not where expected"
# (qemu resolves data file names from its working directory: run it in sub/)
(cd sub && qemu-io -c 'write -P 0x64 0 4k' x.qcow2 >/dev/null) || fail "qemu-io x"
expect_error "outside the image's folder" "$DISKIMG" convert -O raw sub/x.qcow2 x.raw
ok "$DISKIMG" convert --allow-external -O raw sub/x.qcow2 x.raw
(cd sub && qemu-img convert -O raw x.qcow2 ../x.ref) || fail "qemu-img convert x"
cmp x.raw x.ref || fail "--allow-external data file read differs"

# a missing data file
qemu-img create -q -f qcow2 -o data_file=lost.data lost.qcow2 1M
rm -f lost.data
expect_error "lost.data.*does not exist" "$DISKIMG" convert -O raw lost.qcow2 lost.raw
exit 0
