#!/bin/bash
# diskimg commit against qemu-img commit on identical copies of the same
# chains (made by qemu-img and qemu-io): afterwards the guest view of the
# base, the top and any image between must be what qemu-img left
# (qemu-img compare), every image qemu-img check clean, stdout, stderr
# and the exit status the same ("qemu-img:" read as "diskimg:").
# Chains: 2 and 3 deep, raw base, -b into a deeper base (the images
# between committed too, the top kept), -d, zero clusters and compressed
# clusters in the top, different cluster sizes, v2 images, extended L2,
# a top larger (the base grows) and smaller than the base, internal
# snapshots in the top and in the base, a top with an external data file.
# Then: a base format that cannot be written in place, corrupt base and
# top, refused before anything changes; the folder rule; -r; -p.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
cd "$T" || fail "cd"

clean() { qemu-img check -q "$1" >/dev/null 2>&1 || { qemu-img check "$1"; fail "$2: qemu-img check $1"; }; }
io() {
    local f=$1 a=() fmt=qcow2; shift
    for c in "$@"; do a+=(-c "$c"); done
    case $f in *.raw) fmt=raw ;; *.vmdk) fmt=vmdk ;; esac
    qemu-io -f $fmt "${a[@]}" "$f" >/dev/null || fail "qemu-io $* $f"
}

# build CASE: the chain in q/ and d/ (the same bytes)
# run CASE ARGS...: qemu-img commit ARGS in q/, diskimg commit ARGS in d/,
# then every image of the chain compared and checked
run() {
    local name=$1; shift
    rm -rf q d; mkdir q; mv c/* q/; cp -a q d
    ( cd q && qemu-img commit "$@" > ../q.out 2> ../q.err ); local qr=$?
    ( cd d && "$DISKIMG" commit "$@" > ../d.out 2> ../d.err ); local dr=$?
    sed -i 's/^qemu-img:/diskimg:/' q.err
    [ $qr = $dr ] || { cat d.err; fail "$name: exit $dr, qemu-img $qr"; }
    cmp -s q.out d.out || { diff q.out d.out; fail "$name: stdout differs"; }
    cmp -s q.err d.err || { diff q.err d.err; fail "$name: stderr differs"; }
    for f in q/*; do
        f=${f#q/}
        case $f in *.data) continue ;; esac
        # in the image's folder: qemu looks for data files there
        ( cd q && qemu-img convert -O raw "$f" ../q.view ) || fail "$name: q/$f unreadable"
        ( cd d && qemu-img convert -O raw "$f" ../d.view ) || fail "$name: d/$f unreadable"
        cmp -s q.view d.view ||
            { qemu-img map "q/$f"; qemu-img map "d/$f"; fail "$name: $f differs from qemu-img's"; }
        case $f in *.raw) ;; *) ( cd d && clean "$f" "$name" ) ;; esac
    done
}
# the top's own allocation after the commit: as qemu-img left it
same_map() {
    [ "$(qemu-img map --output=json "q/$1" | grep -c '"depth": 0')" = \
      "$(qemu-img map --output=json "d/$1" | grep -c '"depth": 0')" ] ||
        { qemu-img map q/$1; qemu-img map d/$1; fail "$2: $1 keeps other ranges than qemu-img's"; }
}

mkdir c
# 2-deep: data, zeros over data, a partial cluster, top and base 64k clusters
qemu-img create -q -f qcow2 c/base.qcow2 8M
io c/base.qcow2 'write -P 0x11 0 8M'
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 c/top.qcow2
io c/top.qcow2 'write -P 0x22 1M 64k' 'write -z 2M 128k' 'write -P 0x33 4M 3k' 'write -P 0x44 8128k 64k'
qemu-img convert -O raw c/top.qcow2 view.raw
run 2-deep top.qcow2
qcompare d/base.qcow2 view.raw
same_map top.qcow2 2-deep
[ -z "$(qemu-img map --output=json d/top.qcow2 | grep '"depth": 0')" ] || fail "2-deep: top not emptied"

# -d: the top keeps its clusters
qemu-img create -q -f qcow2 c/base.qcow2 8M
io c/base.qcow2 'write -P 0x11 0 8M'
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 c/top.qcow2
io c/top.qcow2 'write -P 0x22 1M 64k' 'write -z 2M 128k'
run -d -d top.qcow2
same_map top.qcow2 -d
cmp -s q/top.qcow2 d/top.qcow2 || fail "-d: the top changed"

# cluster sizes, versions, extended L2; zero clusters over base data and
# compressed clusters in the top
for v in "cluster_size=4k cluster_size=64k 4k" "cluster_size=64k cluster_size=512 64k" \
         "cluster_size=2M cluster_size=4k 2M" "compat=0.10 compat=0.10 64k" \
         "extended_l2=on,cluster_size=128k cluster_size=64k 128k" \
         "cluster_size=512 extended_l2=on 512"; do
    set -- $v
    qemu-img create -q -f qcow2 -o "$2" c/base.qcow2 6M
    io c/base.qcow2 'write -P 0x11 0 3M' 'write -P 0x12 5M 512k'
    qemu-img create -q -f qcow2 -o "$1" -b base.qcow2 -F qcow2 c/top.qcow2
    io c/top.qcow2 "write -c -P 0x23 2M $3" "write -c -P 0x25 4M $3" 'write -P 0x22 64k 4k' \
        'write -z 1M 1M' 'write -P 0x24 2047k 2k' 'write -z 5M 4k'
    run "top $1 base $2" top.qcow2
    same_map top.qcow2 "top $1 base $2"
done

# raw base, and a raw base smaller than the top (grows)
qemu-img create -q -f raw c/base.raw 4M
io c/base.raw 'write -P 0x11 0 4M'
qemu-img create -q -f qcow2 -b base.raw -F raw c/top.qcow2 6M
io c/top.qcow2 'write -P 0x22 1M 64k' 'write -z 2M 128k' 'write -P 0x33 5M 64k'
run raw-base top.qcow2

# qcow2 base smaller than the top; a top smaller than the base, ending
# inside one of the base's clusters
qemu-img create -q -f qcow2 c/base.qcow2 4M
io c/base.qcow2 'write -P 0x11 0 4M'
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 c/top.qcow2 6M
io c/top.qcow2 'write -P 0x22 5M 64k' 'write -z 3M 64k'
run grow top.qcow2
qemu-img create -q -f qcow2 c/base.qcow2 4M
io c/base.qcow2 'write -P 0x11 0 4M'
qemu-img create -q -f qcow2 -o cluster_size=4k -b base.qcow2 -F qcow2 c/top.qcow2 2100k
io c/top.qcow2 'write -P 0x22 2040k 60k' 'write -P 0x23 0 4k'
run smaller top.qcow2

# 3 deep: the default commits into mid; -b base commits top and mid into
# base (both kept); -b mid.qcow2 (kept: -b implies -d); an absolute name
mk3() {
    qemu-img create -q -f qcow2 c/base.qcow2 4M
    io c/base.qcow2 'write -P 0x11 0 4M'
    qemu-img create -q -f qcow2 -o cluster_size=4k -b base.qcow2 -F qcow2 c/mid.qcow2
    io c/mid.qcow2 'write -P 0x21 0 1M' 'write -z 2M 64k'
    qemu-img create -q -f qcow2 -o cluster_size=16k -b mid.qcow2 -F qcow2 c/top.qcow2
    io c/top.qcow2 'write -P 0x31 512k 1M' 'write -z 3M 64k' 'write -P 0x32 2M 4k'
}
mk3; qemu-img convert -O raw c/top.qcow2 view.raw
run 3-deep top.qcow2
same_map top.qcow2 3-deep; same_map mid.qcow2 3-deep
mk3; run "-b base" -b base.qcow2 top.qcow2
qcompare d/base.qcow2 view.raw
qcompare d/top.qcow2 view.raw
same_map top.qcow2 "-b base"
mk3; run "-b mid" -b mid.qcow2 top.qcow2
same_map top.qcow2 "-b mid"
mk3; run "-b ./base" -b ./base.qcow2 top.qcow2
mk3; rm -rf q d; mkdir d; mv c/* d/
ok "$DISKIMG" commit -q -b "$T/d/base.qcow2" d/top.qcow2
qcompare d/base.qcow2 view.raw
# names are taken relative to the referring image's folder, as qemu-img
mk3; run "-b relative to cwd" -b d/base.qcow2 top.qcow2
mk3; run "-b not in the chain" -b top.qcow2 top.qcow2
mk3; run "-b missing" -b nothing.qcow2 top.qcow2

# an image between that is shorter than the top: -b base reads zeros past
# its end (as qemu-img); committing into it would grow it over its own
# larger backing file, which diskimg refuses before anything changes
qemu-img create -q -f qcow2 c/base.qcow2 4M
io c/base.qcow2 'write -P 0x11 0 4M'
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 c/mid.qcow2 2M
io c/mid.qcow2 'write -P 0x21 1M 64k'
qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 c/top.qcow2 4M
io c/top.qcow2 'write -P 0x31 3M 64k'
cp -a c short
run "-b base past a shorter mid" -b base.qcow2 top.qcow2
rm -rf d; mv short d
sums=$(cat d/* | sha1sum)
expect_error "mid.qcow2: the backing file is larger than the image" "$DISKIMG" commit d/top.qcow2
[ "$(cat d/* | sha1sum)" = "$sums" ] || fail "refused grow: changed"
rm -rf d

# internal snapshots: in the top (emptied, the snapshot keeps its data),
# in the base (its clusters are not overwritten)
qemu-img create -q -f qcow2 c/base.qcow2 4M
io c/base.qcow2 'write -P 0x11 0 4M'
qemu-img snapshot -c s0 c/base.qcow2
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 c/top.qcow2
io c/top.qcow2 'write -P 0x22 0 1M'
qemu-img snapshot -c s1 c/top.qcow2
io c/top.qcow2 'write -P 0x23 512k 1M' 'write -z 3M 64k'
run snapshots top.qcow2
for i in q d; do
    qemu-img convert -l s0 -O raw $i/base.qcow2 $i-s0.raw
    qemu-img convert -l s1 -O raw $i/top.qcow2 $i-s1.raw
done
cmp -s q-s0.raw d-s0.raw || fail "snapshots: the base's snapshot changed"
cmp -s q-s1.raw d-s1.raw || fail "snapshots: the top's snapshot changed"

# a top with an external data file
qemu-img create -q -f qcow2 c/base.qcow2 4M
io c/base.qcow2 'write -P 0x11 0 4M'
# (qemu resolves the data file's name against the working folder)
( cd c && qemu-img create -q -f qcow2 -o data_file=top.data -b base.qcow2 -F qcow2 top.qcow2 &&
  io top.qcow2 'write -P 0x22 1M 64k' 'write -z 2M 64k' )
run data-file top.qcow2

# qemu-img's refusals and messages
qemu-img create -q -f qcow2 c/a.qcow2 1M
run "no backing file" a.qcow2
qemu-img create -q -f qcow2 c/a.qcow2 1M
run "-b without backing" -b x a.qcow2
for a in "-r abc" "-r -5" "-t bogus"; do
    qemu-img create -q -f qcow2 c/base.qcow2 1M
    qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 c/top.qcow2
    io c/top.qcow2 'write -P 1 0 4k'
    run "$a" $a top.qcow2
done
qemu-img create -q -f qcow2 c/base.qcow2 1M
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 c/top.qcow2
io c/top.qcow2 'write -P 1 0 4k'
run "-q -t none -r 0" -q -t none -r 0 top.qcow2
expect_error "Expecting one image file name" "$DISKIMG" commit
expect_error "Expecting one image file name" "$DISKIMG" commit a b
expect_error "Unknown driver 'foo'" "$DISKIMG" commit -f foo d/top.qcow2
expect_error "nonexist.qcow2" "$DISKIMG" commit nonexist.qcow2

# -p when stderr is not a terminal: qemu-img's progress lines on stdout
# ("    (NN.NN/100%)" ending in \r, the last at 100.00, then a newline),
# then "Image committed."; nothing on stderr
mk3; rm -rf d; mkdir d; mv c/* d/
"$DISKIMG" commit -p d/top.qcow2 > out 2> err || { cat err; fail "-p"; }
[ "$(tail -n 1 out)" = "Image committed." ] || fail "-p: stdout: $(cat out)"
head -n 1 out | tr '\r' '\n' | grep -v '^$' > progress
grep -Evq '^    \([0-9]+\.[0-9]{2}/100%\)$' progress && fail "-p: not qemu-img's progress lines: $(cat progress)"
[ "$(tail -n 1 progress)" = "    (100.00/100%)" ] || fail "-p: the progress does not end at 100%: $(cat progress)"
[ -s err ] && fail "-p: stderr: $(cat err)"

# -r: 4 MiB of data at 8 MiB/s take at least half a second
qemu-img create -q -f qcow2 d/base.qcow2 4M
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 d/top.qcow2
io d/top.qcow2 'write -P 1 0 4M'
t0=$(date +%s%N)
ok "$DISKIMG" commit -q -r 8M d/top.qcow2
[ $(( ($(date +%s%N) - t0) / 1000000 )) -ge 450 ] || fail "-r 8M: 4 MiB in less than 0.45 s"
qemu-img compare -q d/base.qcow2 d/top.qcow2 || fail "-r: content"

# bases that cannot be written in place, corrupt images: refused before
# anything changes
qemu-img create -q -f vmdk d/base.vmdk 1M
qemu-img create -q -f qcow2 -b base.vmdk -F vmdk d/top.qcow2
io d/top.qcow2 'write -P 1 0 4k'
sums=$(cat d/* | sha1sum)
expect_error "base.vmdk: committing into vmdk images is not supported" "$DISKIMG" commit d/top.qcow2
[ "$(cat d/* | sha1sum)" = "$sums" ] || fail "vmdk base: changed"
rm -f d/*
qemu-img create -q -f qcow2 d/base.qcow2 1M
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 d/top.qcow2
io d/top.qcow2 'write -P 1 0 4k'
# the top's L2 entry names the top's own L1 table (a cluster used twice)
l1=$(od -An -t x8 --endian=big -j 40 -N 8 d/top.qcow2 | tr -d ' ')
l2=$(( $(od -An -t u8 --endian=big -j $((16#$l1)) -N 8 d/top.qcow2) & 0xfffffffffe00 ))
printf "%016x" $(( 0x8000000000000000 | 16#$l1 )) | xxd -r -p |
    dd of=d/top.qcow2 bs=1 seek=$l2 conv=notrunc 2>/dev/null
sums=$(cat d/* | sha1sum)
expect_error "corruptions" "$DISKIMG" commit d/top.qcow2
[ "$(cat d/* | sha1sum)" = "$sums" ] || fail "corrupt top: changed"
cp d/top.qcow2 d/base2.qcow2
qemu-img rebase -u -b base2.qcow2 -F qcow2 d/top.qcow2 2>/dev/null
qemu-img create -q -f qcow2 -b base2.qcow2 -F qcow2 d/t2.qcow2
io d/t2.qcow2 'write -P 1 64k 4k'
sums=$(cat d/* | sha1sum)
expect_error "corruptions" "$DISKIMG" commit -d d/t2.qcow2
[ "$(cat d/* | sha1sum)" = "$sums" ] || fail "corrupt base: changed"

# a dirty top (lazy refcounts, killed writer) cannot be emptied: refused
# before the base changes; -d only reads it
rm -f d/*
qemu-img create -q -f qcow2 d/base.qcow2 1M
qemu-img create -q -f qcow2 -o lazy_refcounts=on -b base.qcow2 -F qcow2 d/top.qcow2
( qemu-io -c 'write -P 1 0 64k' -c 'sigraise 9' d/top.qcow2; true ) >/dev/null 2>&1
sums=$(cat d/* | sha1sum)
expect_error "top.qcow2: the image was not closed cleanly" "$DISKIMG" commit d/top.qcow2
[ "$(cat d/* | sha1sum)" = "$sums" ] || fail "dirty top: changed"
ok "$DISKIMG" commit -q -d d/top.qcow2
qemu-img compare -q d/base.qcow2 d/top.qcow2 || fail "dirty top -d: content"

# a base with an enabled persistent bitmap: the committed ranges are
# recorded in it (as qemu-img does), which stays consistent (not in use)
rm -f d/*
qemu-img create -q -f qcow2 d/base.qcow2 1M
qemu-img bitmap --add d/base.qcow2 b0
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 d/top.qcow2
io d/top.qcow2 'write -P 1 0 4k'
cp d/top.qcow2 d/top-ref.qcow2
ok "$DISKIMG" commit -d d/top.qcow2
qemu-img check -q d/base.qcow2 || fail "base with bitmaps: check"
qemu-img compare -q d/base.qcow2 d/top-ref.qcow2 || fail "base with bitmaps: content"
qemu-img info --output=json d/base.qcow2 | jq -e '.["format-specific"].data.bitmaps[0] |
    .name == "b0" and (.flags | index("auto")) and (.flags | index("in-use") | not)' >/dev/null ||
    fail "base with bitmaps: b0 not kept enabled and consistent: $(qemu-img info d/base.qcow2)"
# vpc and vdi bases (the convert -n writers): the base reads as the top did
for bf in vpc vdi; do
    rm -f d/*
    qemu-img create -q -f $bf d/base.img 8M
    qemu-io -f $bf -c 'write -P 3 0 1M' d/base.img >/dev/null
    qemu-img create -q -f qcow2 -b base.img -F $bf d/top.qcow2
    io d/top.qcow2 'write -P 5 512k 1M'
    cp d/top.qcow2 d/top-ref.qcow2
    ok "$DISKIMG" commit d/top.qcow2
    qemu-img compare -q -f $bf -F qcow2 d/base.img d/top-ref.qcow2 || fail "$bf base: content"
    [ $bf = vdi ] && { qemu-img check -q -f vdi d/base.img || fail "vdi base: check"; }
done
# a qcow2 base the in-place writer does not take (qemu-img writes it): an
# external data file
rm -f d/*
( cd d && qemu-img create -q -f qcow2 -o data_file=base.data base.qcow2 1M &&
  qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2 && io top.qcow2 'write -P 1 0 4k' )
sums=$(cat d/* | sha1sum)
expect_error "external data file" "$DISKIMG" commit d/top.qcow2
[ "$(cat d/* | sha1sum)" = "$sums" ] || fail "base with a data file: changed"

# the folder rule: the chain is the top's, confined to its folder
rm -rf d; mkdir -p d/sub
qemu-img create -q -f qcow2 d/base.qcow2 1M
qemu-img create -q -f qcow2 -b ../base.qcow2 -F qcow2 d/sub/top.qcow2
io d/sub/top.qcow2 'write -P 1 0 4k'
sums=$(cat d/base.qcow2 d/sub/top.qcow2 | sha1sum)
expect_error "outside" "$DISKIMG" commit d/sub/top.qcow2
[ "$(cat d/base.qcow2 d/sub/top.qcow2 | sha1sum)" = "$sums" ] || fail "outside: changed"
ok "$DISKIMG" commit -q --allow-external d/sub/top.qcow2
clean d/base.qcow2 "--allow-external"

"$DISKIMG" commit --help | grep -q "^Usage: diskimg commit" || fail "--help"
echo "commit: ok"
