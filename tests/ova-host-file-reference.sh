#!/bin/bash
# An OVA is self-contained: a reference made inside it (a descriptor's
# extent, a parentFileNameHint) names a member of the archive, never a file
# on the host.  An uploaded OVA whose descriptor names `other-upload.raw`
# must not copy the host file beside the .ova (another tenant's upload in an
# import service) into the output -- from a file or a pipe, with or without
# --allow-external; absolute names, ".." out of the archive, and a symlink
# member are refused too; and a host file with a member's name is not read
# instead of the member.
. "$(dirname "$0")/lib.sh"
need tar
need python3
cd "$T" || fail "cd"

mkdir up
gen -s 71 -m 4K -M 64K 1M up/other-upload.raw      # the host file that must not leak
gen -s 72 -m 4K -M 64K 1M member.raw                # the data the archive holds
echo '<Envelope/>' > a.ovf

desc() {  # EXTENT [PARENT]: a monolithicFlat descriptor of 1 MiB
    printf '# Disk DescriptorFile\nversion=1\nCID=12345678\nparentCID=ffffffff\n'
    [ -n "${2:-}" ] && printf 'parentFileNameHint="%s"\n' "$2"
    printf 'createType="monolithicFlat"\n\nRW 2048 FLAT "%s" 0\n' "$1"
}
# refused OVA ARGS...: exit 1 with the message, no output, and the output
# path holds no byte of the host file
refused() {
    local re=$1 ova=$2; shift 2
    rm -f out.raw
    expect_error "$re" "$DISKIMG" convert "$@" -O raw "$ova" out.raw
    [ ! -e out.raw ] || fail "$ova $*: an output was left"
    rm -f out.raw
    local rc=0
    "$DISKIMG" convert "$@" -O raw - out.raw < <(cat "$ova") 2>err || rc=$?
    [ $rc -eq 1 ] || { cat err; fail "$ova $* from a pipe: exit $rc, not 1"; }
    grep -Eq -- "$re" err || { cat err; fail "$ova $* from a pipe: message"; }
    [ ! -e out.raw ] || fail "$ova $* from a pipe: an output was left"
}

# the attack: the extent names a file beside the .ova
desc other-upload.raw > disk.vmdk
tar --format=ustar -cf up/evil.ova a.ovf disk.vmdk || fail "tar"
refused "refers to 'other-upload.raw', which is not a member of the archive" up/evil.ova
refused "not a member of the archive" up/evil.ova --allow-external
expect_error "not a member of the archive" "$DISKIMG" info up/evil.ova

# absolute, and ".." out of the archive
desc "$T/up/other-upload.raw" > disk.vmdk
tar --format=ustar -cf up/abs.ova a.ovf disk.vmdk || fail "tar"
refused "an absolute path: inside an OVA archive" up/abs.ova --allow-external
mkdir -p d && desc ../../up/other-upload.raw > d/disk.vmdk
tar --format=ustar -cf up/dotdot.ova a.ovf d/disk.vmdk || fail "tar"
refused "leads out of the OVA archive" up/dotdot.ova --allow-external

# a parent named by its hint, beside the .ova on the host
cp member.raw disk-flat.vmdk
desc disk-flat.vmdk other-upload.vmdk > disk.vmdk
printf '# Disk DescriptorFile\nversion=1\nCID=ffffffff\nparentCID=ffffffff\ncreateType="monolithicFlat"\n\nRW 2048 FLAT "other-upload.raw" 0\n' \
    > up/other-upload.vmdk
tar --format=ustar -cf up/parent.ova a.ovf disk.vmdk disk-flat.vmdk || fail "tar"
rm -f out.raw
expect_error "refers to 'other-upload.vmdk', which is not a member" \
    "$DISKIMG" convert -O raw up/parent.ova out.raw
[ ! -e out.raw ] || fail "parent.ova: an output was left"
# from a pipe the parent would be looked for past the extent, still needed
expect_error "only be read in order.*'disk-flat.vmdk', which is still being read" \
    "$DISKIMG" convert -O raw - out.raw < <(cat up/parent.ova)

# a symlink member in the extent's place
ln -sf "$T/up/other-upload.raw" disk-flat.vmdk
desc disk-flat.vmdk > disk.vmdk
tar --format=ustar -cf up/link.ova a.ovf disk.vmdk disk-flat.vmdk || fail "tar"
refused "not a regular file \(a folder, link or device entry\)" up/link.ova --allow-external
rm disk-flat.vmdk

# the member is read, not a host file of the same name beside the .ova
cp member.raw disk-flat.vmdk
tar --format=ustar -cf up/shadow.ova a.ovf disk.vmdk disk-flat.vmdk || fail "tar"
cp up/other-upload.raw up/disk-flat.vmdk
rm -f out.raw
ok "$DISKIMG" convert -O raw up/shadow.ova out.raw
cmp member.raw out.raw || fail "the host file was read instead of the member"
rm -f out.raw
ok "$DISKIMG" convert -O raw - out.raw < <(cat up/shadow.ova)
cmp member.raw out.raw || fail "pipe: the host file was read instead of the member"
exit 0
