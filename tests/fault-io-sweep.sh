#!/bin/bash
# EIO and ENOSPC injected on the Nth read, write and fsync, for every N a
# clean conversion reaches (DISKIMG_FAULT_STATS counts them), for raw->raw,
# raw->qcow2, qcow2->raw (plain and compressed clusters) and vmdk->qcow2.
# Each time: exit 1, one message naming the file and the error, the input
# unchanged, nothing at the target path and no temporary file left.  With
# -n (existing target) a failure must still exit 1.
# Every N runs in the ASan build; the plain build takes every third
# (sweep_case in lib.sh).  The compressed output and the streamOptimized
# input are swept over 1 MiB: each grain or compressed cluster is a few
# calls of the same kind, so a larger image adds calls but no new path.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fault/lib.sh"
need qemu-io
mkdir -p "$T/in" "$T/o"
gen -s 11 -m 64K -M 512K 4M "$T/in/src.raw"
qemu-img convert -f raw -O qcow2 "$T/in/src.raw" "$T/in/src.qcow2"
head -c 1M "$T/in/src.raw" > "$T/in/src1.raw"
qemu-img convert -f raw -O qcow2 -c -o cluster_size=16K "$T/in/src1.raw" "$T/in/srcz.qcow2"
qemu-img convert -f raw -O vmdk -o subformat=streamOptimized "$T/in/src1.raw" "$T/in/src.vmdk"
qemu-img convert -f raw -O vmdk -o subformat=monolithicSparse "$T/in/src.raw" "$T/in/sparse.vmdk"
ok "$DISKIMG" info "$T/in/src.vmdk" >/dev/null
checksum_inputs
ERR="failed: (Input/output error|No space left on device)"

# sweep SRC FMT [CONVERT-ARGS...]
sweep() {
    local src=$1 fmt=$2; shift 2
    local tag n e out=$T/o/out.$fmt
    fault_counts "$T/in/$src" "$fmt" "$@"
    local r=$R w=$W s=$S
    for ((n = 1; n <= r; n++)); do
        sweep_case $n $r || continue
        tag="$src->$fmt read $n/$r"
        must_fail "$tag" "$src: read $ERR" DISKIMG_FAULT=read:$n:EIO -- \
            "$DISKIMG" convert -O "$fmt" "$@" "$T/in/$src" "$out"
        empty_dir "$T/o" "$tag"
    done
    for ((n = 1; n <= w; n++)); do
        sweep_case $n $w || continue
        e=ENOSPC; [ $((n % 2)) = 0 ] && e=EIO
        tag="$src->$fmt write $n/$w $e"
        must_fail "$tag" "out\.$fmt(\.diskimg-[A-Za-z0-9]+)?: write $ERR" \
            DISKIMG_FAULT=write:$n:$e -- "$DISKIMG" convert -O "$fmt" "$@" "$T/in/$src" "$out"
        empty_dir "$T/o" "$tag"
    done
    for ((n = 1; n <= s; n++)); do
        sweep_case $n $s || continue
        tag="$src->$fmt sync $n/$s"
        must_fail "$tag" "out\.$fmt.*: fsync $ERR|fsync $ERR" DISKIMG_FAULT=sync:$n:EIO -- \
            "$DISKIMG" convert -O "$fmt" "$@" "$T/in/$src" "$out"
        empty_dir "$T/o" "$tag"
    done
    # every later call failing too (the first error wins, no second message)
    must_fail "$src->$fmt all writes" "write $ERR" DISKIMG_FAULT=write:1+:ENOSPC -- \
        "$DISKIMG" convert -O "$fmt" "$@" "$T/in/$src" "$out"
    empty_dir "$T/o" "$src->$fmt all writes"
    unchanged "$src->$fmt"
    echo "$src -> $fmt: $r reads, $w writes, $s syncs failed one by one"
}

sweep src.raw raw
sweep src.raw qcow2
sweep src1.raw qcow2 -c
sweep src.qcow2 raw
sweep srcz.qcow2 raw
sweep src.vmdk qcow2
sweep sparse.vmdk qcow2

# a streamOptimized vmdk read from a pipe (a reader thread inflates ahead)
DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" convert -f vmdk -O qcow2 - "$T/o/out.qcow2" \
    < "$T/in/src.vmdk" || fail "pipe: clean run failed"
same_content "$T/in/src.vmdk" "$T/o/out.qcow2"
rm -f "$T/o/out.qcow2"
read -r _ R _ W _ S _ P < "$T/stats"
for ((n = 1; n <= R; n++)); do
    sweep_case $n $R || continue
    must_fail "pipe read $n/$R" "\(stdin\): read $ERR" DISKIMG_FAULT=read:$n:EIO -- \
        sh -c 'exec "$1" convert -f vmdk -O qcow2 - "$2" < "$3"' sh "$DISKIMG" \
        "$T/o/out.qcow2" "$T/in/src.vmdk"
    empty_dir "$T/o" "pipe read $n"
done
echo "vmdk from a pipe: $R reads failed one by one"

# -n: writing into an existing target; a failure exits 1 (the target stays,
# but nothing reports it as a success).  Each run starts from the same
# target (a qcow2 target filled once needs fewer writes the second time);
# a qcow2 target is left consistent: qemu-img check finds leaks at most.
fresh() { cp --sparse=always "$T/pristine.$1" "$T/o/existing.$1"; }
consistent() {  # FMT TAG
    [ "$1" = qcow2 ] || return 0
    local rc=0
    qemu-img check "$T/o/existing.qcow2" >"$T/check" 2>&1 || rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 3 ] || { cat "$T/check" >&2; fail "$2: check exit $rc"; }
}
for fmt in raw qcow2; do
    qemu-img create -q -f $fmt "$T/pristine.$fmt" 4M
    [ $fmt = qcow2 ] && { qemu-io -c 'write -P 0x77 1M 2M' -c 'write -c -P 0x78 3M 1M' \
                              "$T/pristine.$fmt" >/dev/null || fail "qemu-io"; }
    fresh $fmt
    if ! DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" convert -n -O $fmt "$T/in/src.qcow2" \
            "$T/o/existing.$fmt" 2>"$T/err"; then
        cat "$T/err" >&2
        fail "-n $fmt: clean run failed"
    fi
    same_content "$T/in/src.qcow2" "$T/o/existing.$fmt"
    read -r _ R _ W _ S _ P < "$T/stats"
    [ $fmt = raw ] || [ "$W" -gt 3 ] || fail "-n $fmt: only $W writes counted"
    for ((n = 1; n <= P; n++)); do
        sweep_case $n $P || continue
        fresh $fmt
        must_fail "-n $fmt punch $n/$P" "existing\.$fmt: cannot punch a hole: Input/output error" \
            DISKIMG_FAULT=punch:$n:EIO -- "$DISKIMG" convert -n -O $fmt "$T/in/src.qcow2" "$T/o/existing.$fmt"
    done
    for ((n = 1; n <= W; n++)); do
        sweep_case $n $W || continue
        fresh $fmt
        must_fail "-n $fmt write $n/$W" "existing\.$fmt: write $ERR" DISKIMG_FAULT=write:$n:EIO -- \
            "$DISKIMG" convert -n -O $fmt "$T/in/src.qcow2" "$T/o/existing.$fmt"
        consistent $fmt "-n $fmt write $n/$W"
    done
    for ((n = 1; n <= S; n++)); do
        sweep_case $n $S || continue
        fresh $fmt
        must_fail "-n $fmt sync $n/$S" "existing\.$fmt: .*Input/output error" \
            DISKIMG_FAULT=sync:$n:EIO -- "$DISKIMG" convert -n -O $fmt "$T/in/src.qcow2" "$T/o/existing.$fmt"
    done
    for ((n = 1; n <= R; n++)); do
        sweep_case $n $R || continue
        fresh $fmt
        must_fail "-n $fmt read $n/$R" "read $ERR" DISKIMG_FAULT=read:$n:EIO -- \
            "$DISKIMG" convert -n -O $fmt "$T/in/src.qcow2" "$T/o/existing.$fmt"
        consistent $fmt "-n $fmt read $n/$R"
    done
    rm -f "$T/o/existing.$fmt" "$T/pristine.$fmt"
    echo "-n $fmt: $R reads, $W writes, $S syncs, $P punches failed one by one"
done
empty_dir "$T/o" "-n"
unchanged "-n"
exit 0
