#!/bin/bash
# VHDX output.  convert -O vhdx with every option (subformat dynamic and
# fixed, block_size, log_size, block_state_zero): each image passes
# qemu-img check and compare, reads the same through libyal's vhdimount and
# through our reader, has the virtual and block size qemu-img's own
# conversion has, allocates no more than it +5%, and a block never written
# has the state block_state_zero asks for.  Odd sizes (not whole sectors,
# blocks, MiB) and round trips vhdx -> qcow2 -> vmdk -> raw.  create -f
# vhdx prints qemu-img's line and errors and makes the image qemu-img
# makes.  A write or sync failed at any point of a conversion leaves
# nothing at the target; a conversion killed midway leaves nothing there
# either, and its temporary file is not a VHDX.  measure -O vhdx gives the sizes our files have
# (resize: vhdx-resize.sh).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
M=$((1 << 20))
info_key() { qemu-img info --output=json "$2" | sed -n "s/^ *\"$1\": \([0-9]*\),*$/\1/p" | head -n 1; }
# sizes IMG: "virtual-size cluster-size" as qemu-img reads them
sizes() { qemu-img info --output=json "$1" | sed -n 's/^ *"\(virtual-size\|cluster-size\)": \([0-9]*\),*$/\2/p' | head -n 2 | tr '\n' ' '; }
# bat_state IMG BLOCK: the state (low 3 bits) of payload block BLOCK's BAT
# entry (blocks below the chunk ratio: no bitmap entries before them); the
# BAT's offset from region table 1 (our writer lists the BAT first)
bat_state() {
    local bat
    bat=$(od -An -tu8 -j $((192 * 1024 + 32)) -N8 "$1" | tr -d ' ')
    echo $(( $(od -An -tu8 -j $((bat + 8 * $2)) -N8 "$1" | tr -d ' ') & 7 ))
}

qemu-img create -q -f qcow2 "$T/src.qcow2" 40M
qemu-io -c "write -P 0x33 1M 3M" -c "write -P 0x44 20M 64k" -c "write -P 0x55 $((40 * M - 4096)) 4k" \
    "$T/src.qcow2" > /dev/null || fail qemu-io
qemu-img convert -O raw "$T/src.qcow2" "$T/src.raw"
for o in "" subformat=fixed block_state_zero=off \
         subformat=fixed,block_state_zero=off block_size=1M block_size=256M,log_size=3M \
         block_size=1536K,log_size=1; do
    rm -f "$T/o.vhdx" "$T/q.vhdx"
    ok "$DISKIMG" convert -t unsafe -O vhdx ${o:+-o $o} "$T/src.qcow2" "$T/o.vhdx"
    qemu-img convert -O vhdx ${o:+-o $o} "$T/src.qcow2" "$T/q.vhdx"
    qemu-img check "$T/o.vhdx" > "$T/chk" 2>&1 || { cat "$T/chk"; fail "$o: qemu-img check"; }
    qemu-img compare "$T/src.qcow2" "$T/o.vhdx" > "$T/cmp" 2>&1 || { cat "$T/cmp"; fail "$o: compare"; }
    [ "$(sizes "$T/o.vhdx")" = "$(sizes "$T/q.vhdx")" ] ||
        fail "$o: virtual and block size $(sizes "$T/o.vhdx"), qemu-img $(sizes "$T/q.vhdx")"
    [ $(alloc "$T/o.vhdx") -le $(( $(alloc "$T/q.vhdx") * 105 / 100 )) ] ||
        fail "$o: allocates $(alloc "$T/o.vhdx"), qemu-img $(alloc "$T/q.vhdx")"
    [ $(stat -c %s "$T/o.vhdx") -le $(stat -c %s "$T/q.vhdx") ] || fail "$o: a longer file than qemu-img's"
    # the block at 10M holds nothing: ZERO (2) by default, NOT_PRESENT (0) with
    # block_state_zero=off, FULLY_PRESENT (6) for fixed with off
    e=$(( 10 * M / $(info_key cluster-size "$T/o.vhdx") ))
    case $o in
        *block_size=256M*) ;;
        *fixed*zero=off*) [ "$(bat_state "$T/o.vhdx" $e)" = 6 ] || fail "$o: state $(bat_state "$T/o.vhdx" $e)" ;;
        *zero=off*) [ "$(bat_state "$T/o.vhdx" $e)" = 0 ] || fail "$o: state $(bat_state "$T/o.vhdx" $e)" ;;
        *) [ "$(bat_state "$T/o.vhdx" $e)" = 2 ] || fail "$o: state $(bat_state "$T/o.vhdx" $e)" ;;
    esac
    b=$(( M / $(info_key cluster-size "$T/o.vhdx") ))
    [ "$(bat_state "$T/o.vhdx" $b)" = 6 ] || fail "$o: block $b (data at 1M) not present"
    # our reader, and libyal's
    ok "$DISKIMG" check "$T/o.vhdx" > /dev/null
    ok "$DISKIMG" compare "$T/src.raw" "$T/o.vhdx" > /dev/null
    case $o in ""|*fixed*|block_size=1M)
        ( yal_read "$T/o.vhdx" "$T/yal.raw" vhdx ) ; rc=$?
        [ $rc = 0 ] && { cmp "$T/yal.raw" "$T/src.raw" || fail "$o: vhdimount reads it differently"; }
        [ $rc = 0 ] || [ $rc = 77 ] || fail "$o: vhdimount" ;;
    esac
    # measure: what was written
    [ "$("$DISKIMG" measure -O vhdx ${o:+-o $o} "$T/src.qcow2" | sed -n 's/^required size: //p')" = \
      "$(stat -c %s "$T/o.vhdx")" ] || fail "$o: measure"
done
# zero runs: holes of a fixed image, blocks never allocated in a dynamic one
ok "$DISKIMG" convert -t unsafe -O vhdx -o subformat=fixed,block_state_zero=off "$T/src.qcow2" "$T/fx.vhdx"
[ $(stat -c %s "$T/fx.vhdx") -ge $((40 * M)) ] || fail "fixed: not the whole disk"
[ $(alloc "$T/fx.vhdx") -lt $((6 * M)) ] || fail "fixed: zeros were written ($(alloc "$T/fx.vhdx"))"
ok "$DISKIMG" convert -t unsafe -O vhdx -o block_size=1M "$T/src.qcow2" "$T/dy.vhdx"
# 3 MiB at 1M, 64K at 20M, 4K at the end: 5 blocks after 4 MiB of metadata
[ $(stat -c %s "$T/dy.vhdx") = $((9 * M)) ] || fail "dynamic: $(stat -c %s "$T/dy.vhdx") bytes"

# round trip vhdx -> qcow2 -> vmdk -> raw
ok "$DISKIMG" convert -t unsafe -O qcow2 "$T/dy.vhdx" "$T/rt.qcow2"
ok "$DISKIMG" convert -t unsafe -O vmdk "$T/rt.qcow2" "$T/rt.vmdk"
ok "$DISKIMG" convert -t unsafe -O raw "$T/rt.vmdk" "$T/rt.raw"
cmp "$T/rt.raw" "$T/src.raw" || fail "round trip"

# odd sizes: not whole sectors, exactly a block, a block and a sector, a
# chunk's worth of blocks plus one (the first sector bitmap entry)
for size in 1000 1048577 $((8 * M)) $((8 * M + 512)) $((3 * M + 512)) $((4097 * M)); do
    rm -f "$T/odd.raw" "$T/odd.vhdx" "$T/oddq.vhdx"
    truncate -s $size "$T/odd.raw"
    printf 'first' | dd of="$T/odd.raw" conv=notrunc status=none
    printf 'Z' | dd of="$T/odd.raw" bs=1 seek=$((size - 1)) conv=notrunc status=none
    o=; [ $size = $((4097 * M)) ] && o=block_size=1M
    ok "$DISKIMG" convert -t unsafe -O vhdx ${o:+-o $o} "$T/odd.raw" "$T/odd.vhdx"
    qemu-img convert -O vhdx ${o:+-o $o} "$T/odd.raw" "$T/oddq.vhdx"
    [ "$(sizes "$T/odd.vhdx")" = "$(sizes "$T/oddq.vhdx")" ] ||
        fail "size $size: virtual and block size $(sizes "$T/odd.vhdx"), qemu-img $(sizes "$T/oddq.vhdx")"
    qemu-img check "$T/odd.vhdx" > /dev/null || fail "size $size: check"
    ok "$DISKIMG" compare "$T/odd.raw" "$T/odd.vhdx" > /dev/null
    # qemu reads the first and last sector (past a sector bitmap entry in the BAT)
    qemu-io -r -c "read -P 0x66 0 1" -c "read -P 0x5a $((size - 1)) 1" "$T/odd.vhdx" > "$T/io" ||
        fail "size $size: qemu-io"
    grep -q "Pattern verification failed" "$T/io" && fail "size $size: qemu reads it differently"
done
rm -f "$T/odd.raw" "$T/odd.vhdx" "$T/oddq.vhdx"

# create -f vhdx: qemu-img's line, messages and image; errors in
# qemu-img's order (size, then log size, then block size)
create_same() {
    local o=$1 size=$2
    rm -f "$T/c.vhdx" "$T/q.vhdx"
    "$DISKIMG" create -f vhdx ${o:+-o $o} "$T/c.vhdx" $size > "$T/d.out" 2>&1
    qemu-img create -f vhdx ${o:+-o $o} "$T/q.vhdx" $size > "$T/q.out" 2>&1
    sed "s|$T/c.vhdx|X|;s|^diskimg:|P:|" "$T/d.out" > "$T/d1"
    sed "s|$T/q.vhdx|X|;s|^qemu-img:|P:|" "$T/q.out" > "$T/q1"
    diff "$T/q1" "$T/d1" || fail "create $o $size: output differs"
    if [ -s "$T/q.vhdx" ]; then
        [ "$(sizes "$T/c.vhdx")" = "$(sizes "$T/q.vhdx")" ] || fail "create $o $size: sizes"
        qemu-img check "$T/c.vhdx" > /dev/null || fail "create $o $size: check"
        # measure --size: an empty image is what create makes
        [ "$("$DISKIMG" measure -O vhdx ${o:+-o $o} --size $size | sed -n 's/^required size: //p')" = \
          "$(stat -c %s "$T/c.vhdx")" ] || fail "create $o $size: measure"
    else
        [ ! -e "$T/c.vhdx" ] || fail "create $o $size: an image left after an error"
    fi
}
for o in "" subformat=fixed block_size=1M log_size=1536K,block_state_zero=off \
         block_state_zero=yes,subformat=dynamic,block_size=300M; do
    for size in 1000 2G; do
        case "$o:$size" in *fixed*:2G) continue ;; esac
        create_same "$o" $size
    done
done
create_same "" 65T
create_same log_size=0,block_size=3M 65T
for o in log_size=0 subformat=foo log_size=4G block_size=3M log_size=0,block_size=3M; do
    create_same "$o" 1G
done
expect_error "cannot be empty" "$DISKIMG" create -f vhdx "$T/z.vhdx" 0
[ ! -e "$T/z.vhdx" ] || fail "an empty vhdx was written"
"$DISKIMG" create -f vhdx -o help > "$T/help" || fail "-o help"
for k in block_size block_state_zero log_size size subformat; do
    grep -q "^  $k=" "$T/help" || fail "-o help lacks $k"
done
# measure: fully allocated is the fixed image
rm -f "$T/c.vhdx"
ok "$DISKIMG" create -q -f vhdx -o subformat=fixed "$T/c.vhdx" 100M
[ "$("$DISKIMG" measure --output=json -O vhdx --size 100M | sed -n 's/^ *"fully-allocated": //p')" = \
  "$(stat -c %s "$T/c.vhdx")" ] || fail "measure: fully allocated"

# what vhdx output cannot be
"$DISKIMG" convert -O vhdx "$T/src.qcow2" - 2> "$T/err" | cat > /dev/null
[ "${PIPESTATUS[0]}" = 1 ] && grep -q "vhdx output to a pipe is not supported" "$T/err" || fail "to a pipe"
expect_error "-n.*not supported" "$DISKIMG" convert -n -O vhdx "$T/src.qcow2" "$T/dy.vhdx"
expect_error "compressed" "$DISKIMG" convert -c -O vhdx "$T/src.qcow2" "$T/x.vhdx"
expect_error "power of two" "$DISKIMG" convert -O vhdx -o block_size=3M "$T/src.qcow2" "$T/x.vhdx"
[ ! -e "$T/x.vhdx" ] || fail "x.vhdx left"

# a failure at any write or sync of a conversion leaves nothing
. "$(dirname "$0")/fault/lib.sh"
mkdir -p "$T/fo"
head -c $((12 * M)) "$T/src.raw" > "$T/f.raw"
fault_counts "$T/f.raw" vhdx -o block_size=1M
for kind in write sync; do
    [ $kind = write ] && n_all=$W || n_all=$S
    for ((n = 1; n <= n_all; n++)); do
        must_fail "$kind $n/$n_all" "(write|fsync) failed: Input/output error" \
            DISKIMG_FAULT=$kind:$n:EIO -- "$DISKIMG" convert -O vhdx -o block_size=1M "$T/f.raw" "$T/fo/out.vhdx"
        empty_dir "$T/fo" "$kind $n/$n_all"
    done
done


# killed midway (slowed down by a delay on every write)
DISKIMG_FAULT=write:1+:delay150 "$DISKIMG" convert -O vhdx -o block_size=1M "$T/f.raw" "$T/fo/out.vhdx" \
    2> "$T/err" &
pid=$!
for ((i = 0; i < 250; i++)); do
    ls -A "$T/fo" | grep -q diskimg- && break
    kill -0 $pid 2>/dev/null || { cat "$T/err"; fail "kill: ended before it was killed"; }
    sleep 0.02
done
sleep 0.3
kill -KILL $pid
wait $pid && fail "kill: not killed"
[ -e "$T/fo/out.vhdx" ] && fail "kill: a file at the target path"
left=$(ls -A "$T/fo")
[[ $left == .out.vhdx.diskimg-* ]] || fail "kill: expected the temporary file, found: $left"
qemu-img info -f vhdx "$T/fo/$left" > /dev/null 2>&1 && fail "kill: the temporary file is a VHDX"
"$DISKIMG" info "$T/fo/$left" 2> /dev/null | grep -q "file format: vhdx" && fail "kill: ours reads it as a VHDX"
echo ok
