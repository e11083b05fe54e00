/* beneath: open a path beneath a folder, in one step that a concurrent
 * rename or symlink swap cannot lead out of the folder.
 *
 * The folder rule for image references (formats/bd_ref.c) must not check a
 * name and then open it again: between the two, a symlink can be swapped
 * in.  open_beneath() resolves and opens in the kernel with openat2(2)
 * (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS); where openat2 is missing (old
 * kernels) or filtered (seccomp: ENOSYS or EPERM), it walks the path one
 * component at a time with O_NOFOLLOW (beneath.c says why that one).
 */
#ifndef DISKIMG_BENEATH_H
#define DISKIMG_BENEATH_H

/* Open `rel` (relative, at most PATH_MAX bytes) beneath the folder `dirfd`
 * with open(2) `flags` (O_CLOEXEC is added).  Symbolic links are followed
 * while they stay beneath the folder; one that leaves it (absolute, or ".."
 * above the folder) fails with -EXDEV, more than 40 links with -ELOOP.
 * Returns the descriptor, or a negative errno. */
int open_beneath(int dirfd, const char *rel, int flags);

/* The same, always by the component walk (the fallback; for tests). */
int open_beneath_walk(int dirfd, const char *rel, int flags);

#endif
