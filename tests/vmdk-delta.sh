#!/bin/bash
# Delta disks: parentFileNameHint chains read like qemu-img reads them
# (unallocated grains from the parent, shorter parents, a three-level chain,
# a flat parent); the parent's CID must match parentCID unless overridden;
# loops (a file naming itself, two files naming each other) and parents
# outside the folder are refused.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
cd "$T" || fail "cd"

gen -s 31 -m 4K -M 256K 4M base.raw
qemu-img convert -q -f raw -O vmdk base.raw b.vmdk || fail "base"
qemu-img create -q -f vmdk -b b.vmdk -F vmdk c.vmdk || fail "child"
qemu-io -t unsafe -f vmdk -c "write -P 0x33 1M 200k" -c "write -z 2500k 64k" \
    -c "write -P 0x44 4000k 96k" c.vmdk >/dev/null || fail "qemu-io child"
qemu-img create -q -f vmdk -b c.vmdk -F vmdk g.vmdk 6M || fail "grandchild"
qemu-io -t unsafe -f vmdk -c "write -P 0x55 1100k 64k" -c "write -P 0x66 5M 512k" \
    g.vmdk >/dev/null || fail "qemu-io grandchild"

same() {  # IMG [options]: our reading equals qemu-img's
    local img=$1; shift
    rm -f out.raw q.raw
    qemu-img convert -f vmdk -O raw "$img" q.raw || fail "qemu-img reads $img"
    ok "$DISKIMG" convert "$@" -O raw "$img" out.raw
    cmp q.raw out.raw || fail "$img: differs from qemu-img's reading"
}
same c.vmdk
same g.vmdk
"$BUILD/tools/vmdkcat" -m g.vmdk > map || fail "map"
grep -q 'depth=2' map || { cat map; fail "no range of g.vmdk comes from the base"; }
"$DISKIMG" info --output=json c.vmdk > info.json || fail "info"
grep -q '"backing-filename": "b.vmdk"' info.json || fail "backing-filename"

# a flat (descriptor) parent
qemu-img create -q -f vmdk -o subformat=monolithicFlat f.vmdk 4M || fail "flat parent"
qemu-img convert -q -n -f raw -O vmdk base.raw f.vmdk || fail "fill flat parent"
qemu-img create -q -f vmdk -b f.vmdk -F vmdk fc.vmdk || fail "child of flat"
qemu-io -t unsafe -f vmdk -c "write -P 0x77 300k 700k" fc.vmdk >/dev/null || fail "qemu-io"
same fc.vmdk

# a parent named by a Windows path (VMware Workstation): found next to the delta
qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse -b b.vmdk -F vmdk w.vmdk ||
    fail "descriptor child"
qemu-io -t unsafe -f vmdk -c "write -P 0x21 64k 300k" w.vmdk >/dev/null || fail "qemu-io"
qemu-img convert -f vmdk -O raw w.vmdk wq.raw || fail "qemu-img reads w.vmdk"
sed -i 's/^parentFileNameHint=.*/parentFileNameHint="C:\\VMs\\base dir\\b.vmdk"/' w.vmdk
grep -q 'parentFileNameHint="C:.VMs.base dir.b.vmdk"' w.vmdk || fail "sed"
ok "$DISKIMG" convert -O raw w.vmdk wout.raw
cmp wq.raw wout.raw || fail "Windows parent path: wrong content"
grep -q "parent 'C:.VMs.base dir.b.vmdk' not found; using 'b.vmdk'" "$T/stderr.ok" ||
    fail "no warning about the Windows parent path"

# CID mismatch: the parent changed after the child was made
sed -i 's/^CID=.*/CID=0badc1d0/' f.vmdk
expect_error "parent 'f.vmdk' has CID 0badc1d0, but this image expects parentCID" \
    "$DISKIMG" convert -O raw fc.vmdk o.raw
rm -f o.raw
ok "$DISKIMG" convert --ignore-parent-cid -O raw fc.vmdk o.raw
cmp out.raw o.raw || fail "--ignore-parent-cid: wrong content"

# patch parentFileNameHint inside a sparse file's embedded descriptor
patch_hint() {  # FILE OLD NEW (same length)
    python3 - "$@" <<'PY' || fail "patch $1"
import sys
f, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
assert len(old) == len(new)
d = open(f, "rb").read()
key = b'parentFileNameHint="' + old + b'"'
assert d.count(key) == 1, "hint not found"
open(f, "wb").write(d.replace(key, b'parentFileNameHint="' + new + b'"'))
PY
}

# a file naming itself as its parent (qemu-img recurses without bound)
cp c.vmdk self.vmdk
patch_hint self.vmdk b.vmdk s.vmdk
mv self.vmdk s.vmdk
expect_error "already in its own chain|loop" "$DISKIMG" convert -O raw s.vmdk o2.raw
# two files naming each other
cp c.vmdk x.vmdk && cp c.vmdk y.vmdk
patch_hint x.vmdk b.vmdk y.vmdk
patch_hint y.vmdk b.vmdk x.vmdk
expect_error "already in its own chain|loop" "$DISKIMG" convert -O raw x.vmdk o2.raw
# a descriptor file naming itself
printf '# Disk DescriptorFile\nCID=1\nparentCID=1\nparentFileNameHint="d.vmdk"\nRW 8 ZERO\n' > d.vmdk
expect_error "already in its own chain|loop" "$DISKIMG" convert -O raw d.vmdk o2.raw
# a missing parent, a parent outside the folder
cp c.vmdk m.vmdk && patch_hint m.vmdk b.vmdk n.vmdk
expect_error "refers to 'n.vmdk', which does not exist" "$DISKIMG" convert -O raw m.vmdk o2.raw
mkdir -p sub && cp c.vmdk sub/u.vmdk && patch_hint sub/u.vmdk b.vmdk ../b.v
cp b.vmdk b.v
expect_error "outside the image.s folder" "$DISKIMG" convert -O raw sub/u.vmdk o2.raw
ok "$DISKIMG" convert --allow-external -O raw sub/u.vmdk o2.raw
cmp o2.raw "$(qemu-img convert -f vmdk -O raw c.vmdk q2.raw && echo q2.raw)" ||
    fail "parent outside the folder: wrong content"
exit 0
