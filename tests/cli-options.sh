#!/bin/bash
# Command line: help, version, bad options and values, probing rules.
. "$(dirname "$0")/lib.sh"
"$DISKIMG" --help | grep -q "Usage: diskimg COMMAND" || fail "--help"
"$DISKIMG" --version | grep -Eq "^diskimg [0-9]+\.[0-9]+" || fail "--version"
for c in convert info sparsify snapshot rebase commit amend bitmap; do
    "$DISKIMG" $c --help | grep -q "Usage: diskimg $c" || fail "$c --help"
done
expect_error "no command" "$DISKIMG"
expect_error "unknown command 'frobnicate'" "$DISKIMG" frobnicate
expect_error "unrecognized option|invalid option|bad option" "$DISKIMG" convert --no-such-option a b
expect_error "expected a source and a destination" "$DISKIMG" convert onlyone
truncate -s 1M "$T/a.raw"
expect_error "invalid size '12Q'" "$DISKIMG" convert -S 12Q "$T/a.raw" "$T/b.raw"
expect_error "multiples of 512" "$DISKIMG" convert -S 100 "$T/a.raw" "$T/b.raw"
expect_error "multiples of 512" "$DISKIMG" convert -S 32M "$T/a.raw" "$T/b.raw"
expect_error "-m must be" "$DISKIMG" convert -m 0 "$T/a.raw" "$T/b.raw"
expect_error "Invalid cache option: sometimes" "$DISKIMG" convert -t sometimes "$T/a.raw" "$T/b.raw"
expect_error "unknown output format 'qed'" "$DISKIMG" convert -O qed "$T/a.raw" "$T/b.raw"
expect_error "unknown format 'nope'" "$DISKIMG" convert -f nope "$T/a.raw" "$T/b.raw"
expect_error "invalid option 'bogus'" "$DISKIMG" convert -o bogus=1 "$T/a.raw" "$T/b.raw"
expect_error "raw output cannot be compressed|cannot be compressed" "$DISKIMG" convert -c "$T/a.raw" "$T/b.raw"
expect_error "--output must be" "$DISKIMG" info --output=xml "$T/a.raw"
[ -e "$T/b.raw" ] && fail "output created by a failed command"
# sizes with suffixes
ok "$DISKIMG" convert -S 64k "$T/a.raw" "$T/b.raw"
ok "$DISKIMG" convert -S 0 "$T/a.raw" "$T/c.raw"
[ "$(alloc "$T/c.raw")" -ge 1048576 ] || fail "-S 0 must allocate everything"

# probing: a file named like a format with no signature is refused, -f raw wins
head -c 65536 /dev/urandom > "$T/broken.qcow2"
expect_error "broken.qcow2: named like a qcow2 image.*-f raw" "$DISKIMG" convert "$T/broken.qcow2" "$T/x.raw"
cp "$T/broken.qcow2" "$T/broken.vmdk"
expect_error "broken.vmdk: named like a vmdk image" "$DISKIMG" info "$T/broken.vmdk"
ok "$DISKIMG" convert -f raw "$T/broken.qcow2" "$T/x.raw"
cmp "$T/broken.qcow2" "$T/x.raw" || fail "-f raw content differs"
# an unnamed file of anything is raw
cp "$T/broken.qcow2" "$T/plain.img"
"$DISKIMG" info --output=json "$T/plain.img" | grep -q '"format": "raw"' || fail "plain file not raw"
exit 0
