#!/bin/bash
# A conversion over an existing file gives the new file the old one's
# owner, group, mode (set-group-ID included), ACL and extended attributes:
# a private image never becomes readable to more people.  Also for the
# files of a multi-file vmdk (each extent takes over the file it replaces,
# a new extent the old image's first extent's), for `create` over a file,
# and where the owner or group cannot be kept (a user converting over its
# own file whose group it is not in: the group loses its permissions) or
# the ACL cannot be set (mode bits no wider than the ACL gave, a warning).
# A new file keeps the default mode (umask).  resize and sparsify keep the
# file itself.
. "$(dirname "$0")/lib.sh"
need qemu-img
need setfacl
need getfacl
need setfattr
need getfattr
need strace
[ "$(id -u)" = 0 ] || skip "needs root (chown to another user)"
mkdir -p "$T/d"
chmod 755 "$T" "$T/d"
D=$T/d
gen -s 3 -m 4K -M 256K 4M "$T/src.raw"
touch "$D/.probe"
setfacl -m u:12345:r "$D/.probe" 2>/dev/null || skip "no ACLs on this file system"
setfattr -n user.probe -v 1 "$D/.probe" 2>/dev/null || skip "no user xattrs on this file system"
rm -f "$D/.probe"

# meta FILE: what must survive (mode, owner, group, ACL, user xattrs)
meta() {
    stat -c '%a %u %g' "$1"
    getfacl -n --absolute-names "$1" 2>/dev/null | grep -v '^# file'
    getfattr -d --absolute-names "$1" 2>/dev/null | grep -v '^# file'
}
# prepare FILE MODE OWNER: a file with MODE, OWNER, an ACL and an xattr
prepare() {
    chown "$3" "$1"
    chmod "$2" "$1"
    setfacl -m u:23456:r,g:34567:rw "$1"
    setfacl -m m::r "$1"
    setfattr -n user.origin -v "image $2 $3" "$1"
}
same_meta() {
    [ "$(meta "$2")" = "$1" ] ||
        fail "$3: metadata not carried over: before: $(echo "$1" | tr '\n' ' ') after: $(meta "$2" | tr '\n' ' ')"
}

for fm in raw:600 qcow2:640 vmdk:2660 raw:2640; do
    fmt=${fm%:*} m=${fm#*:}
    (
        rm -f "$D/out.$fmt"
        qemu-img create -q -f "$fmt" "$D/out.$fmt" 4M
        prepare "$D/out.$fmt" "$m" 12345:23456
        want=$(meta "$D/out.$fmt")
        ino=$(stat -c %i "$D/out.$fmt")
        ok "$DISKIMG" convert -O "$fmt" "$T/src.raw" "$D/out.$fmt"
        [ "$(stat -c %i "$D/out.$fmt")" != "$ino" ] || fail "$fmt: not a new file"
        qcompare "$T/src.raw" "$D/out.$fmt"
        same_meta "$want" "$D/out.$fmt" "$fmt mode $m"
    ) || exit 1
done
echo "raw, qcow2, vmdk: mode, owner, group, ACL, xattr kept"

# create over a file
qemu-img create -q -f raw "$D/c.qcow2" 1M
prepare "$D/c.qcow2" 600 12345:23456
want=$(meta "$D/c.qcow2")
ok "$DISKIMG" create -q -f qcow2 "$D/c.qcow2" 8M
same_meta "$want" "$D/c.qcow2" "create"

# multi-file vmdk: old monolithicFlat, descriptor 0640, data 0600 with an
# ACL of its own; a new monolithicFlat replaces both files, a new
# twoGbMaxExtentFlat's new extent takes the old extent's
rm -f "$D"/*
ok "$DISKIMG" convert -O vmdk -o subformat=monolithicFlat "$T/src.raw" "$D/m.vmdk"
prepare "$D/m.vmdk" 640 12345:23456
prepare "$D/m-flat.vmdk" 600 12346:23457
setfacl -m u:45678:rw "$D/m-flat.vmdk"
want_desc=$(meta "$D/m.vmdk")
want_data=$(meta "$D/m-flat.vmdk")
ok "$DISKIMG" convert -O vmdk -o subformat=monolithicFlat "$T/src.raw" "$D/m.vmdk"
qcompare "$T/src.raw" "$D/m.vmdk"
same_meta "$want_desc" "$D/m.vmdk" "monolithicFlat descriptor"
same_meta "$want_data" "$D/m-flat.vmdk" "monolithicFlat extent"
ok "$DISKIMG" convert -O vmdk -o subformat=twoGbMaxExtentSparse "$T/src.raw" "$D/m.vmdk"
qcompare "$T/src.raw" "$D/m.vmdk"
[ -e "$D/m-flat.vmdk" ] && fail "the old extent was left behind"
same_meta "$want_desc" "$D/m.vmdk" "twoGbMaxExtentSparse descriptor"
same_meta "$want_data" "$D/m-s001.vmdk" "twoGbMaxExtentSparse's new extent"
echo "vmdk of several files: each file's permissions kept"

# a new file: the umask's mode, our owner
rm -f "$D"/*
(umask 027 && ok "$DISKIMG" convert -O qcow2 "$T/src.raw" "$D/new.qcow2")
[ "$(stat -c '%a %u' "$D/new.qcow2")" = "640 0" ] || fail "new file: $(stat -c '%a %u' "$D/new.qcow2")"
(umask 027 && ok "$DISKIMG" convert -O vmdk -o subformat=twoGbMaxExtentFlat "$T/src.raw" "$D/n.vmdk")
[ "$(stat -c '%a' "$D/n.vmdk" "$D/n-f001.vmdk" | sort -u)" = 640 ] || fail "new vmdk files' mode"

# a user over its own file whose group it is not in: the group cannot be
# kept, so it gets no permissions (and no set-group-ID)
if command -v setpriv >/dev/null; then
    mkdir -p "$T/u"; chown 12345:12345 "$T/u"; chmod 755 "$T/u"
    cp "$T/src.raw" "$T/u/src.raw"; chmod 644 "$T/u/src.raw"
    qemu-img create -q -f raw "$T/u/out.raw" 4M
    chown 12345:23456 "$T/u/out.raw"; chmod 2664 "$T/u/out.raw"
    setpriv --reuid=12345 --regid=12345 --clear-groups "$DISKIMG" convert "$T/u/src.raw" \
        "$T/u/out.raw" 2>"$T/err" || { cat "$T/err" >&2; fail "convert as a user"; }
    got=$(stat -c '%a %u %g' "$T/u/out.raw")
    [ "$got" = "604 12345 12345" ] || fail "another group's file as a user: $got (want 604 12345 12345)"
    echo "as a user: group permissions dropped with the group"
fi

# the ACL cannot be set: the group class is narrowed to what the owning
# group had (r), named entries are lost, a warning says so
qemu-img create -q -f raw "$D/acl.raw" 4M
chmod 600 "$D/acl.raw"
setfacl -m g::r,u:23456:rw "$D/acl.raw"     # mask rw: mode shows 0660
rc=0
# (LeakSanitizer cannot run under ptrace)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
    strace -f -o /dev/null -e inject=fsetxattr:error=EOPNOTSUPP "$DISKIMG" convert \
    "$T/src.raw" "$D/acl.raw" 2>"$T/err" || rc=$?
[ $rc = 0 ] || { cat "$T/err" >&2; fail "ACL not settable: exit $rc"; }
grep -q "ACL could not be carried over" "$T/err" || { cat "$T/err" >&2; fail "no warning"; }
[ "$(stat -c %a "$D/acl.raw")" = 640 ] || fail "ACL not settable: mode $(stat -c %a "$D/acl.raw")"
getfacl -c "$D/acl.raw" 2>/dev/null | grep -q 23456 && fail "ACL not settable, yet named entry there"

# resize and sparsify work on the file itself
for cmd in "resize $D/k.raw 8M" "sparsify $D/k.raw"; do
    cp "$T/src.raw" "$D/k.raw"
    prepare "$D/k.raw" 600 12345:23456
    want=$(meta "$D/k.raw")
    ino=$(stat -c %i "$D/k.raw")
    ok "$DISKIMG" $cmd
    [ "$(stat -c %i "$D/k.raw")" = "$ino" ] || fail "$cmd: a new file"
    same_meta "$want" "$D/k.raw" "$cmd"
done
exit 0
