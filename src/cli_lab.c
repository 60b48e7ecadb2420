/* cli_lab.c: `hvupdater plan` and `hvupdater apply`, for people testing with virsh or the
 * vCenter simulator. They run the same engine as UpdateMachine. */
#include "cli.h"

#include <stdio.h>

int hv_cmd_lab(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "hvupdater %s: no backend is built in yet\n", argv[0]);
    return 1;
}
