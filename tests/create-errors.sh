#!/bin/bash
# diskimg create refuses what qemu-img create refuses, with its messages,
# exit status 1, and no file left behind.
. "$(dirname "$0")/lib.sh"
cd "$T"
: >base.raw

bad() {  # REGEX ARGS...
    local re=$1; shift
    expect_error "$re" "$DISKIMG" create "$@"
    [ -e x.qcow2 ] && fail "x.qcow2 created by failing: $*"
    ls -a | grep -q diskimg && fail "temporary file left by: $*"
    return 0
}

bad "Cluster size must be a power of two between 512 and 2048k" -f qcow2 -o cluster_size=3000 x.qcow2 1G
bad "Cluster size must be a power of two" -f qcow2 -o cluster_size=4M x.qcow2 1G
bad "Refcount width must be a power of two and may not exceed 64 bits" -f qcow2 -o refcount_bits=3 x.qcow2 1G
bad "Lazy refcounts only supported with compatibility level 1.1" -f qcow2 -o compat=0.10,lazy_refcounts=on x.qcow2 1G
bad "Different refcount widths than 16 bits require compatibility level 1.1" -f qcow2 -o compat=0.10,refcount_bits=8 x.qcow2 1G
bad "Parameter 'compat' does not accept value '2'" -f qcow2 -o compat=2 x.qcow2 1G
bad "Extended L2 entries are only supported with cluster sizes of at least 16384 bytes" -f qcow2 -o extended_l2=on,cluster_size=4K x.qcow2 1G
bad "Parameter 'compression_type' does not accept value 'lz4'" -f qcow2 -o compression_type=lz4 x.qcow2 1G
bad "Non-zlib compression type is only supported with compatibility level 1.1" -f qcow2 -o compat=0.10,compression_type=zstd x.qcow2 1G
bad "Parameter 'preallocation' does not accept value 'bogus'" -f qcow2 -o preallocation=bogus x.qcow2 1G
bad "Invalid parameter 'foo'" -f qcow2 -o foo=bar x.qcow2 1G
bad "expects 'on' or 'off'" -f qcow2 -o lazy_refcounts=maybe x.qcow2 1G
bad "Image creation needs a size parameter" -f qcow2 x.qcow2
bad "Image creation needs a size parameter" -f qcow2 -u -b base.raw -F raw x.qcow2
bad "Backing file specified without backing format" -f qcow2 -b base.raw x.qcow2
bad "Backing format cannot be used without backing file" -f qcow2 -o backing_fmt=raw x.qcow2 1M
bad "Backing file not supported for file format 'raw'" -f raw -b base.raw -F raw x.qcow2 1M
bad "Could not open backing image 'nonexist.raw'" -f qcow2 -b nonexist.raw -F raw x.qcow2 1M
bad "Backing file and preallocation can only be used at the same time if extended_l2 is on" -f qcow2 -o preallocation=metadata -b base.raw -F raw x.qcow2 1M
bad "The image size is too large for file format 'qcow2'" -f qcow2 -o cluster_size=512 x.qcow2 200G
bad "Invalid image size specified" -f qcow2 x.qcow2 1Z
bad "Invalid image size specified" -f qcow2 x.qcow2 -- -5
bad "encrypted images are not supported" -f qcow2 -o encrypt.format=luks x.qcow2 1M
bad "expecting a filename" -f qcow2
bad "unknown or read-only format 'qed'" -f qed x.qcow2 1M
bad "unknown or read-only format 'ova'" -f ova x.qcow2 1M

# -o help lists the options and creates nothing
out=$("$DISKIMG" create -f qcow2 -o help) || fail "-o help failed"
for k in cluster_size compat compression_type extended_l2 lazy_refcounts preallocation refcount_bits backing_file; do
    grep -q "^  $k=" <<<"$out" || fail "-o help lacks $k"
done
exit 0
