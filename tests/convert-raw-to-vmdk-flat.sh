#!/bin/bash
# diskimg convert -O vmdk with the subformats of several files
# (monolithicFlat, twoGbMaxExtentFlat, twoGbMaxExtentSparse): the extents
# are named as qemu-img names them, the descriptor is qemu-img's (CID
# aside), qemu-img check is clean and the content reads back as the source
# (qemu-img, diskimg); sizes no larger than qemu-img's (+5%).  Writes across
# 2 GiB extent boundaries, out of order, over more extents than diskimg
# keeps open.  Extents appear only with the descriptor, at commit: a failed
# or interrupted conversion leaves none behind.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T"

gen -s 61 -m 512 -M 256K 6M src.raw
gen -s 62 -u -m 512 -M 128K 3M odd0.raw
head -c $((2 * 1024 * 1024 + 65536 + 777)) odd0.raw > odd.raw

desc_text() { vmdk_desc_text "$1" | grep -v '^CID='; }

for src in src.raw odd.raw; do
    for sub in monolithicFlat twoGbMaxExtentFlat twoGbMaxExtentSparse; do
        mkdir -p a b
        ok "$DISKIMG" convert -t unsafe -O vmdk -o subformat=$sub,adapter_type=lsilogic \
            "$src" a/x.vmdk
        qemu-img convert -O vmdk -o subformat=$sub,adapter_type=lsilogic "$src" b/x.vmdk ||
            fail "qemu-img convert $sub"
        [ "$(cd a && ls -a)" = "$(cd b && ls -a)" ] || { ls -la a b; fail "$sub: files differ"; }
        diff <(desc_text b/x.vmdk) <(desc_text a/x.vmdk) >&2 || fail "$sub: descriptor"
        qemu-img check -q a/x.vmdk || fail "check $sub"
        qcompare "$src" a/x.vmdk
        qemu-img info --output=json a/x.vmdk | tr -d ' \n' | grep -q "\"create-type\":\"$sub\"" ||
            fail "$sub: info lacks the subformat"
        ok "$DISKIMG" convert -t unsafe -O raw a/x.vmdk back.raw
        cmp -n "$(stat -c %s "$src")" "$src" back.raw || fail "$sub: our reader reads it differently"
        for f in $(cd b && ls); do
            [ "$f" = x.vmdk ] && continue
            [ "$(stat -c %s a/$f)" -le $(( $(stat -c %s b/$f) * 21 / 20 )) ] ||
                fail "$sub: $f has $(stat -c %s a/$f) bytes, qemu-img's $(stat -c %s b/$f)"
            [ "$(alloc a/$f)" -le $(( $(alloc b/$f) * 21 / 20 + 8192 )) ] ||
                fail "$sub: $f allocates $(alloc a/$f) bytes, qemu-img's $(alloc b/$f)"
        done
        rm -rf a b back.raw
    done
done

# 34 GiB: 17 extents of 2 GiB (more than diskimg keeps open), data across
# every boundary, written out of order (-W)
truncate -s 34G big.raw
for i in $(seq 1 16); do
    printf 'across the boundary %02d' "$i" |
        dd of=big.raw bs=1 seek=$((i * (2 << 30) - 10)) conv=notrunc status=none
done
for sub in twoGbMaxExtentFlat twoGbMaxExtentSparse; do
    ok "$DISKIMG" convert -t unsafe -W -O vmdk -o subformat=$sub big.raw m.vmdk
    [ "$(ls m-*.vmdk | wc -l)" = 17 ] || fail "$sub: $(ls m-*.vmdk | wc -l) extents"
    qemu-img check -q m.vmdk || fail "check $sub (17 extents)"
    ok "$DISKIMG" convert -t unsafe -O raw m.vmdk back.raw
    qemu-img compare -q -f raw -F raw big.raw back.raw || fail "$sub: 17 extents read back"
    qemu-io -r -f vmdk -c "read -v $(((2 << 30) - 10)) 22" -c "read -v $((16 * (2 << 30) - 10)) 22" \
        m.vmdk > io.txt || fail "qemu-io $sub"
    [ "$(grep -c "across.the.bound" io.txt)" = 2 ] && grep -q "ary.01" io.txt &&
        grep -q "ary.16" io.txt ||
        { cat io.txt; fail "$sub: qemu reads the boundaries differently"; }
    rm -f m.vmdk m-*.vmdk back.raw
done

# -t none (O_DIRECT) and durable output
for t in none writeback; do
    ok "$DISKIMG" convert -t $t -O vmdk -o subformat=twoGbMaxExtentSparse src.raw t.vmdk
    qemu-img check -q t.vmdk || fail "check -t $t"
    qcompare src.raw t.vmdk
    rm -f t.vmdk t-*.vmdk
done

# refused: compression of flat extents, a pipe as output, an existing image
expect_error "writing into an existing vmdk image \(-n\) is not supported" \
    "$DISKIMG" convert -n -O vmdk src.raw odd.raw
expect_error "flat vmdk extents cannot be compressed" \
    "$DISKIMG" convert -c -O vmdk -o subformat=monolithicFlat src.raw c.vmdk
expect_error "needs a new, named file" \
    bash -o pipefail -c "'$DISKIMG' convert -O vmdk -o subformat=twoGbMaxExtentFlat src.raw - | cat >/dev/null"
# a failed conversion leaves neither descriptor nor extents
DISKIMG_FAULT=write:2:ENOSPC expect_error "No space left" \
    "$DISKIMG" convert -O vmdk -o subformat=twoGbMaxExtentSparse src.raw f.vmdk
[ -z "$(ls -A | grep '^\.\?f[.-]')" ] || { ls -la; fail "a failed conversion left files"; }
# so does an interrupted one (the source is a pipe that stalls)
"$DISKIMG" convert -O vmdk -o subformat=streamOptimized src.raw s.vmdk || fail "stream"
mkfifo feed
{ head -c 100000 s.vmdk; exec sleep 30; } > feed 2>/dev/null &
feeder=$!
"$DISKIMG" convert -f vmdk -O vmdk -o subformat=twoGbMaxExtentFlat - i.vmdk < feed 2>/dev/null &
pid=$!
for _ in $(seq 100); do ls -A | grep -q '^\.i-f001' && break; sleep 0.1; done
ls -A | grep -q '^\.i-f001' || { kill $feeder $pid; fail "no temporary extent while converting"; }
kill -TERM $pid
wait $pid 2>/dev/null
kill $feeder 2>/dev/null
[ -z "$(ls -A | grep '^\.\?i[.-]')" ] || { ls -la; fail "an interrupted conversion left files"; }
exit 0
