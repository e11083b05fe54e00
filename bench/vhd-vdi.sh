#!/bin/bash
# VHD (vpc) and VDI benchmark: diskimg convert against qemu-img convert on
# the bench disk (genimg -s 1 SIZE) as qemu-img wrote it (made once, kept
# in WORKDIR).  Cases:
#   vpcd-raw   dynamic VHD -> raw        vpcf-raw   fixed VHD -> raw
#   vdi-raw    VDI -> raw                vpc-qcow2  dynamic VHD -> qcow2
#   raw-vpc    raw -> dynamic VHD        raw-vdi    raw -> VDI
#   big-raw    a 200 GiB dynamic VHD holding a few MiB -> raw
# Both are given -f (qemu-img probes a fixed VHD as raw).  Runs alternate
# diskimg / qemu-img; outputs go to fresh names and are deleted outside the
# timed part; diskimg runs with -t unsafe (qemu-img convert never fsyncs).
# Prints medians and the median of the pairwise ratios diskimg/qemu-img, of
# the wall time and of the CPU time (user + system).  Each round also times
# the page-cache floor of the case: dd if=/dev/zero bs=1M of as many MiB as
# the diskimg output allocates, to a new file (nothing read, nothing
# scanned, no metadata: only the copy into the page cache that any tool
# writing these bytes pays); "floor/q" is the median of floor/qemu-img per
# round, the least wall ratio a conversion that writes the output through
# the page cache into delayed allocation can reach.  diskimg allocates each
# range just before writing it on ext4 (bfile_set_prealloc), which skips
# delayed allocation's per-block work and can go below that floor; one
# fallocate of the whole size before dd is no floor either: right after a
# delete, with the discard mount option, it can wait for the freed blocks
# (0.08-0.89 s for 434 MiB here).
#
#   bench/vhd-vdi.sh [-n RUNS] [-s SIZE] [-c CASES] [WORKDIR]
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${BENCH_RUNS:-3} size=${BENCH_SIZE:-1G}
cases=vpcd-raw,vpcf-raw,vdi-raw,raw-vpc,raw-vdi,vpc-qcow2,big-raw
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
command -v qemu-io >/dev/null || { echo "qemu-io not installed" >&2; exit 1; }
[ -x "$diskimg" ] && [ -x "$genimg" ] || { echo "build first: make all unit" >&2; exit 1; }
mkdir -p "$work"
disk=$work/disk-$size.raw
[ -f "$disk" ] || "$genimg" -s 1 "$size" "$disk" || exit 1
vpcd=$work/disk-$size.dyn.vhd vpcf=$work/disk-$size.fixed.vhd vdi=$work/disk-$size.vdi
big=$work/big-200G.vhd
[ -f "$vpcd" ] || qemu-img convert -f raw -O vpc "$disk" "$vpcd" || exit 1
[ -f "$vpcf" ] || qemu-img convert -f raw -O vpc -o subformat=fixed "$disk" "$vpcf" || exit 1
[ -f "$vdi" ] || qemu-img convert -f raw -O vdi "$disk" "$vdi" || exit 1
if [ ! -f "$big" ]; then
    # 8 MiB of data in four places across the 200 GiB
    qemu-img create -q -f vpc "$big.tmp" 200G &&
        qemu-io -f vpc -c "write -P 0x11 0 2M" -c "write -P 0x22 50G 2M" \
            -c "write -P 0x33 123G 2M" -c "write -P 0x44 199G 2M" "$big.tmp" >/dev/null &&
        mv "$big.tmp" "$big" || exit 1
fi

. "$top/bench/lib.sh"   # now, median, pair_median

# time_run NAME OUT CMD... : append the wall time to $work/NAME.times and
# the CPU time (user + system, the process and its threads) to NAME.cpu
time_run() {
    local name=$1 out=$2; shift 2
    rm -f "$out"; sync
    local TIMEFORMAT='%R %U %S'
    { time "$@" >/dev/null 2>"$work/last.err"; } 2>"$work/last.time" ||
        { cat "$work/last.err" >&2; echo "FAILED: $*" >&2; exit 1; }
    rm -f "$out"
    awk '{ printf "%.3f\n", $1 }' "$work/last.time" >>"$work/$name.times"
    awk '{ printf "%.3f\n", $2 + $3 }' "$work/last.time" >>"$work/$name.cpu"
}

printf '%-10s %10s %10s %8s   %9s %9s %8s   %9s %8s\n' case diskimg qemu-img ratio \
    'CPU: d' q ratio floor floor/q
for c in ${cases//,/ }; do
    case $c in
        vpcd-raw)  src=$vpcd f=vpc fmt=raw ;;
        vpcf-raw)  src=$vpcf f=vpc fmt=raw ;;
        vdi-raw)   src=$vdi f=vdi fmt=raw ;;
        vpc-qcow2) src=$vpcd f=vpc fmt=qcow2 ;;
        raw-vpc)   src=$disk f=raw fmt=vpc ;;
        raw-vdi)   src=$disk f=raw fmt=vdi ;;
        big-raw)   src=$big f=vpc fmt=raw ;;
        *) echo "unknown case $c" >&2; exit 2 ;;
    esac
    cat "$src" >/dev/null 2>&1   # read from the page cache by every run
    rm -f "$work"/{d,q,z}.{times,cpu}
    "$diskimg" convert -q -t unsafe -f "$f" -O "$fmt" "$src" "$work/floor.$fmt" || exit 1
    mib=$(( ($(stat -c %b "$work/floor.$fmt") * 512 + 1048575) / 1048576 ))
    rm -f "$work/floor.$fmt"
    for i in $(seq 1 "$runs"); do
        time_run d "$work/d$i.$fmt" "$diskimg" convert -t unsafe -f "$f" -O "$fmt" "$src" \
            "$work/d$i.$fmt"
        time_run q "$work/q$i.$fmt" qemu-img convert -f "$f" -O "$fmt" "$src" "$work/q$i.$fmt"
        time_run z "$work/z$i" dd if=/dev/zero of="$work/z$i" bs=1M count=$mib status=none
    done
    td=$(median <"$work/d.times") tq=$(median <"$work/q.times")
    r=$(pair_median "$work/d.times" "$work/q.times")
    cd_=$(median <"$work/d.cpu") cq=$(median <"$work/q.cpu")
    rc=$(paste "$work/d.cpu" "$work/q.cpu" | awk '{ printf "%.4f\n", ($1 + .001) / ($2 + .001) }' | median)
    tz=$(median <"$work/z.times") rz=$(pair_median "$work/z.times" "$work/q.times")
    printf '%-10s %9.3fs %9.3fs %8.3f   %8.3fs %8.3fs %8.3f   %8.3fs %8.3f  (%d MiB)\n' "$c" \
        "$td" "$tq" "$r" "$cd_" "$cq" "$rc" "$tz" "$rz" "$mib"
done
echo "(times: medians of $runs runs, wall and CPU (user + system); ratio: median of the"
echo " pairwise ratios diskimg/qemu-img;"
echo " $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg))"
