#!/bin/bash
# VMDK input benchmark: diskimg convert against qemu-img convert reading the
# bench disk (genimg -s 1 SIZE) as qemu-img wrote it in streamOptimized and
# monolithicSparse form (made once, kept in WORKDIR).  Cases:
#   so-raw    streamOptimized -> raw        so-qcow2  streamOptimized -> qcow2
#   so-pipe   streamOptimized on stdin -> raw (qemu-img reads the file)
#   ms-qcow2  monolithicSparse -> qcow2
# Runs alternate diskimg / qemu-img; outputs go to fresh names and are
# deleted outside the timed part; diskimg runs with -t unsafe (qemu-img
# convert never fsyncs).  Prints medians and the median of the pairwise
# ratios diskimg/qemu-img.
#
#   bench/vmdk.sh [-n RUNS] [-s SIZE] [-c CASES] [WORKDIR]
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${BENCH_RUNS:-3} size=${BENCH_SIZE:-4G} cases=so-raw,so-qcow2,so-pipe,ms-qcow2
while getopts "n:s:c:" opt; do
    case $opt in
        n) runs=$OPTARG ;;
        s) size=$OPTARG ;;
        c) cases=$OPTARG ;;
        *) echo "usage: $0 [-n RUNS] [-s SIZE] [-c CASES] [WORKDIR]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
work=${1:-${BENCH_DIR:-$top/bench/out}}
diskimg=${DISKIMG:-$top/build/diskimg}
genimg=$top/build/tools/genimg
command -v qemu-img >/dev/null || { echo "qemu-img not installed" >&2; exit 1; }
[ -x "$diskimg" ] && [ -x "$genimg" ] || { echo "build first: make all unit" >&2; exit 1; }
mkdir -p "$work"
disk=$work/disk-$size.raw
[ -f "$disk" ] || "$genimg" -s 1 "$size" "$disk" || exit 1
so=$work/disk-$size.stream.vmdk ms=$work/disk-$size.sparse.vmdk
[ -f "$so" ] || qemu-img convert -f raw -O vmdk -o subformat=streamOptimized "$disk" "$so" || exit 1
[ -f "$ms" ] || qemu-img convert -f raw -O vmdk "$disk" "$ms" || exit 1
cat "$so" "$ms" >/dev/null   # read from the page cache by every run

. "$top/bench/lib.sh"   # now, median, pair_median

# time_run NAME OUT CMD... : append the wall time to $work/NAME.times
time_run() {
    local name=$1 out=$2; shift 2
    rm -f "$out"; sync
    local t0; t0=$(now)
    "$@" || { echo "FAILED: $*" >&2; exit 1; }
    awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.3f\n", a - b }' >>"$work/$name.times"
    rm -f "$out"
}

printf '%-9s %10s %10s %8s\n' case diskimg qemu-img ratio
for c in ${cases//,/ }; do
    case $c in
        so-raw)   src=$so fmt=raw pipe=0 ;;
        so-qcow2) src=$so fmt=qcow2 pipe=0 ;;
        so-pipe)  src=$so fmt=raw pipe=1 ;;
        ms-qcow2) src=$ms fmt=qcow2 pipe=0 ;;
        *) echo "unknown case $c" >&2; exit 2 ;;
    esac
    rm -f "$work"/{d,q}.times
    for i in $(seq 1 "$runs"); do
        out=$work/d$i.$fmt
        if [ "$pipe" = 1 ]; then
            time_run d "$out" bash -c '"$1" convert -t unsafe -f vmdk -O "$2" - "$3" < "$4"' _ \
                "$diskimg" "$fmt" "$out" <(cat "$src")
        else
            time_run d "$out" "$diskimg" convert -t unsafe -O "$fmt" "$src" "$out"
        fi
        time_run q "$work/q$i.$fmt" qemu-img convert -O "$fmt" "$src" "$work/q$i.$fmt"
    done
    td=$(median <"$work/d.times") tq=$(median <"$work/q.times")
    r=$(pair_median "$work/d.times" "$work/q.times")
    printf '%-9s %9.2fs %9.2fs %8.3f\n' "$c" "$td" "$tq" "$r"
done
echo "(times: medians of $runs runs; ratio: median of the pairwise ratios diskimg/qemu-img;"
echo " $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg))"
