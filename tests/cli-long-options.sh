#!/bin/bash
# qemu-img 10's long option names do what the short options do, in every
# command: the same stdout, messages and exit status, the same images (each
# run on its own copy of the inputs); and every command has --help.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io

for c in convert create info map check compare measure resize snapshot rebase commit amend bitmap sparsify dd; do
    "$DISKIMG" $c --help > "$T/help" || fail "$c --help: exit status"
    grep -q "^Usage: diskimg $c" "$T/help" || fail "$c --help: no usage line"
done

# inputs, copied fresh for each run (commands that change an image)
mkdir -p "$T/in"
qemu-img create -q -f qcow2 "$T/in/base.qcow2" 4M
qemu-io -f qcow2 -c "write -P 0x11 0 1M" "$T/in/base.qcow2" >/dev/null
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 "$T/in/top.qcow2"
qemu-io -f qcow2 -c "write -P 0x22 2M 64k" "$T/in/top.qcow2" >/dev/null
qemu-img create -q -f qcow2 "$T/in/other.qcow2" 4M
qemu-img create -q -f qcow2 "$T/in/snap.qcow2" 4M
qemu-img snapshot -c s1 "$T/in/snap.qcow2"
qemu-img convert -O raw "$T/in/top.qcow2" "$T/in/disk.raw"
truncate -s 8M "$T/in/disk.raw"

# run DIR ARGS...: the command in a fresh copy of the inputs under $T/DIR
run() {
    local dir=$T/$1; shift
    rm -rf "$dir"; cp -a "$T/in" "$dir"
    touch -d '1 hour ago' "$dir"/*
    touch -d '30 minutes ago' "$dir.mark"
    local rc=0
    (cd "$dir" && "$DISKIMG" "$@") > "$dir.out" 2> "$dir.err" || rc=$?
    echo "$rc" > "$dir.rc"
    # the folder's files; the images the command made or changed, as their
    # format, size, backing file, snapshots and guest content
    ls "$dir" > "$dir.state"
    for f in $(find "$dir" -type f -newer "$dir.mark" | sort); do
        echo "$(basename "$f") $(qemu-img info -U --output=json "$f" 2>/dev/null |
            jq -c '{format, "virtual-size", "backing-filename", snapshots: [.snapshots[]?.name]}')"
        qemu-img convert -U -O raw "$f" "$dir.content" 2>/dev/null && md5sum < "$dir.content"
    done >> "$dir.state"
    rm -f "$dir.content"
}

# same "SHORT ARGS" "LONG ARGS": both runs agree in every respect
same() {
    local short=$1 long=$2
    # shellcheck disable=SC2086
    run s $short
    # shellcheck disable=SC2086
    run l $long
    # (a file's allocation is the file system's: two copies of the same
    # file made one after the other need not take the same blocks)
    for x in rc out err state; do
        sed -E "s|$T/s|DIR|g; s/(\"actual-size\": )[0-9]+/\1N/; s/^(disk size: ).*/\1N/" \
            "$T/s.$x" > "$T/s.cmp"
        sed -E "s|$T/l|DIR|g; s/(\"actual-size\": )[0-9]+/\1N/; s/^(disk size: ).*/\1N/" \
            "$T/l.$x" > "$T/l.cmp"
        cmp -s "$T/s.cmp" "$T/l.cmp" ||
            { diff "$T/s.cmp" "$T/l.cmp" | head; fail "'$short' and '$long' differ ($x)"; }
    done
    grep -q "AddressSanitizer\|runtime error" "$T/s.err" "$T/l.err" && fail "sanitizer: $long"
    return 0
}

same "convert -f qcow2 -O qcow2 -o cluster_size=4k -c -S 8k -m 2 -W -t unsafe -T none -U -q top.qcow2 o.qcow2" \
     "convert --source-format qcow2 --target-format qcow2 --target-format-options cluster_size=4k --compress --sparse-size 8k --parallel 2 --oob-writes --target-cache unsafe --source-cache none --force-share --quiet top.qcow2 o.qcow2"
same "convert -O qcow2 -B base.qcow2 -F qcow2 top.qcow2 o.qcow2" \
     "convert --target-format=qcow2 --backing=base.qcow2 --backing-format=qcow2 top.qcow2 o.qcow2"
same "convert -l s1 -O raw snap.qcow2 o.raw" "convert --snapshot s1 -O raw snap.qcow2 o.raw"
same "convert -n -O qcow2 top.qcow2 other.qcow2" "convert --no-create -O qcow2 top.qcow2 other.qcow2"
same "convert -C -O raw disk.raw o.raw" "convert --copy-range-offloading -O raw disk.raw o.raw"
same "create -q -f qcow2 -o cluster_size=16k -b base.qcow2 -F qcow2 new.qcow2" \
     "create --quiet --format qcow2 --options cluster_size=16k --backing base.qcow2 --backing-format qcow2 new.qcow2"
same "create -f qcow2 -u -b nothere.qcow2 -F qcow2 new.qcow2 1M" \
     "create --format=qcow2 --backing-unsafe --backing=nothere.qcow2 --backing-format=qcow2 new.qcow2 1M"
same "info -f qcow2 -U --output=json top.qcow2" "info --format qcow2 --force-share --output json top.qcow2"
same "map -f qcow2 -U top.qcow2" "map --format=qcow2 --force-share top.qcow2"
same "check -f qcow2 -q -U top.qcow2" "check --format qcow2 --quiet --force-share top.qcow2"
same "check -r all top.qcow2" "check --repair all top.qcow2"
same "compare -f qcow2 -F raw -s -q -T none -U top.qcow2 disk.raw" \
     "compare --a-format qcow2 --b-format raw --strict --quiet --cache none --force-share top.qcow2 disk.raw"
same "compare -f qcow2 -F qcow2 top.qcow2 base.qcow2" \
     "compare --a-format=qcow2 --b-format=qcow2 top.qcow2 base.qcow2"
same "measure -O qcow2 -o cluster_size=4k -f qcow2 -U top.qcow2" \
     "measure --target-format qcow2 --options cluster_size=4k --format qcow2 --force-share top.qcow2"
same "measure -O qcow2 -o cluster_size=4k -f qcow2 -l s1 snap.qcow2" \
     "measure --target-format=qcow2 --target-format-options=cluster_size=4k --source-format=qcow2 --snapshot=s1 snap.qcow2"
same "resize -f qcow2 -q other.qcow2 +1M" "resize --format qcow2 --quiet other.qcow2 +1M"
same "snapshot -c s2 -q snap.qcow2" "snapshot --create s2 --quiet snap.qcow2"
same "snapshot -a s1 -f qcow2 snap.qcow2" "snapshot --apply s1 --format qcow2 snap.qcow2"
same "snapshot -d s1 snap.qcow2" "snapshot --delete s1 snap.qcow2"
same "snapshot -l -U snap.qcow2" "snapshot --list --force-share snap.qcow2"
same "rebase -f qcow2 -b other.qcow2 -F qcow2 -c -q -t none -T none -U top.qcow2" \
     "rebase --format qcow2 --backing other.qcow2 --backing-format qcow2 --compress --quiet --cache none --backing-cache none --force-share top.qcow2"
same "rebase -u -b other.qcow2 -F qcow2 top.qcow2" \
     "rebase --backing-unsafe --backing=other.qcow2 --backing-format=qcow2 top.qcow2"
same "commit -f qcow2 -t none -b base.qcow2 -r 100M -d -q top.qcow2" \
     "commit --format qcow2 --cache none --base base.qcow2 --rate-limit 100M --no-drop --quiet top.qcow2"
same "commit -p top.qcow2" "commit --progress top.qcow2"
same "amend -f qcow2 -t none -q -o lazy_refcounts=on other.qcow2" \
     "amend --format qcow2 --cache none --quiet --options lazy_refcounts=on other.qcow2"
same "bitmap --add -g 64k -f qcow2 other.qcow2 b0" "bitmap --add --granularity 64k --format qcow2 other.qcow2 b0"
same "sparsify -S 64k -f raw -q disk.raw" "sparsify --sparse-size 64k --format raw --quiet disk.raw"
same "dd -f qcow2 -O qcow2 -U bs=64k count=40 skip=3 if=top.qcow2 of=o.qcow2" \
     "dd --format qcow2 --output-format qcow2 --force-share bs=64k count=40 skip=3 if=top.qcow2 of=o.qcow2"

# --progress without a value is -p (a bar only on a terminal: here, nothing)
same "convert -p -O raw top.qcow2 o.raw" "convert --progress -O raw top.qcow2 o.raw"
same "compare -p top.qcow2 disk.raw" "compare --progress top.qcow2 disk.raw"
same "rebase -p -b other.qcow2 -F qcow2 top.qcow2" "rebase --progress -b other.qcow2 -F qcow2 top.qcow2"
# ... and --progress=json is still JSON
run s convert --progress=json -O raw top.qcow2 o.raw
grep -q '"done"' "$T/s.err" || fail "--progress=json: no JSON progress"
exit 0
