/* --object: qemu-img's user-creatable objects ("secret,id=sec0,data=..."),
 * which its commands take to unlock encrypted images.  diskimg reads no
 * encrypted image (one is refused when it is opened), so an object is
 * checked as qemu-img checks it -- the same messages for a definition it
 * would refuse -- and then not used. */
#ifndef DISKIMG_CLI_OBJECT_OPT_H
#define DISKIMG_CLI_OBJECT_OPT_H

/* The getopt codes every command uses for the options qemu-img's commands
 * share (beyond any command's own codes, which start at 256). */
enum {
    CLI_OPT_OBJECT = 0x1000,        /* --object OBJECTDEF */
    CLI_OPT_IMAGE_OPTS,             /* --image-opts */
    CLI_OPT_TARGET_IMAGE_OPTS,      /* --target-image-opts (convert) */
};

/* Check one --object definition: 0 accepted; 1 refused (qemu-img's message
 * printed); -1 help was asked ("help", "TYPE,help") and printed on stdout,
 * after which qemu-img exits with status 0.  The ids of earlier objects are
 * remembered, for duplicates and a secret's keyid. */
int cli_object(const char *def);

#endif
