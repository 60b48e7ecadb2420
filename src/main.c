/* main.c: the hvupdater command line: `serve` (the Runtime Extension), `version`, and the lab
 * commands. Parses flags, loads the config, wires hooks to backends, and owns process
 * lifetime (signals). Everything else lives in the modules it calls. */
#include "cli.h"
#include "config.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

static int usage(FILE *out)
{
    fprintf(out, "hvupdater: Cluster API in-place update extension for vSphere and libvirt/KVM\n"
                 "\n"
                 "usage: hvupdater COMMAND [flags]\n"
                 "\n"
                 "commands:\n"
                 "  serve     run the Runtime Extension HTTPS server\n"
                 "  plan      show what a memory/CPU change to one VM would do (lab)\n"
                 "  apply     make a memory/CPU change to one VM through the engine (lab)\n"
                 "  version   print version and build information\n"
                 "  help      this text; `hvupdater COMMAND --help` for a command's flags\n"
                 "\n"
                 "exit codes: 0 success, 1 failure, 2 usage error, 3 still in progress\n");
    return out == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
        return usage(stdout);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("hvupdater %s (git %s, built %s)\n", HV_VERSION, HV_GIT, __DATE__);
        return 0;
    }
    if (!strcmp(cmd, "serve"))
        return hv_cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan") || !strcmp(cmd, "apply"))
        return hv_cmd_lab(argc - 1, argv + 1);
    fprintf(stderr, "hvupdater: unknown command %s\n", cmd);
    return usage(stderr);
}
