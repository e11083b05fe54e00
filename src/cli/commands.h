/* One function per subcommand (src/cmd_*.c).  Each takes the arguments after
 * the command name (argv[0] is the command), prints its own output and
 * errors, and returns the process exit status. */
#ifndef DISKIMG_COMMANDS_H
#define DISKIMG_COMMANDS_H

int cmd_convert(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_sparsify(int argc, char **argv);
int cmd_map(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_measure(int argc, char **argv);
int cmd_resize(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_rebase(int argc, char **argv);
int cmd_dd(int argc, char **argv);
int cmd_commit(int argc, char **argv);
int cmd_amend(int argc, char **argv);

#endif
