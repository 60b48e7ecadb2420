/* cli.h: subcommands of the hvupdater binary. Each takes argv starting at its own name and
 * returns the process exit code (0 ok, 1 failure, 2 usage, 3 still in progress). */
#ifndef HV_CLI_H
#define HV_CLI_H

int hv_cmd_serve(int argc, char **argv);
int hv_cmd_lab(int argc, char **argv);

#endif
