/* qcow2 measure (measure.c): the size a new qcow2 image would take, with
 * qemu-img 7.2's arithmetic. */
#ifndef DISKIMG_QCOW2_MEASURE_H
#define DISKIMG_QCOW2_MEASURE_H

#include <stdbool.h>
#include <stdint.h>

struct bd;
struct bd_measure;
struct diag;
struct kvopts;

/* Refcount table + block clusters that cover `clusters` clusters and
 * themselves. */
uint64_t qcow2_refcount_meta_clusters(uint64_t clusters, unsigned cluster_bits,
                                      unsigned refcount_order);
/* Bytes of an image of `virtual_size` with every cluster allocated. */
uint64_t qcow2_fully_allocated_size(uint64_t virtual_size, unsigned cluster_bits,
                                    unsigned refcount_order, bool extended_l2);
/* bd_driver.measure for qcow2 output. */
int qcow2_measure(struct kvopts *o, uint64_t size, struct bd *src,
                  struct bd_measure *m, struct diag *d);

#endif
