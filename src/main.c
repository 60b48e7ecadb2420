/* main.c: the hvupdater command line: `serve` (the Runtime Extension), `version`, and the lab
 * commands. Parses flags, loads the config, wires hooks to backends, and owns process
 * lifetime (signals). Everything else lives in the modules it calls. */
#include "cli.h"
#include "config.h"
#include "log.h"

#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <libxml/parser.h>
#include <microhttpd.h>
#include <yajl/yajl_version.h>
#ifdef HV_HAVE_BACKEND_libvirt
#include <libvirt/libvirt.h>
#endif

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

static int version(void)
{
    printf("hvupdater %s (git %s, built %s)\n", HV_VERSION, HV_GIT, __DATE__);
    printf("backends: %s%s\n",
#ifdef HV_HAVE_BACKEND_libvirt
           "libvirt ",
#else
           "",
#endif
#ifdef HV_HAVE_BACKEND_vsphere
           "vsphere"
#else
           ""
#endif
    );
    unsigned long lv = 0;
#ifdef HV_HAVE_BACKEND_libvirt
    virGetVersion(&lv, NULL, NULL);
#endif
    printf("libraries: libmicrohttpd %s, gnutls %s, libcurl %s, libxml2 %s, yajl %d",
           MHD_get_version(), gnutls_check_version(NULL),
           curl_version_info(CURLVERSION_NOW)->version, xmlParserVersion, yajl_version());
    if (lv)
        printf(", libvirt %lu.%lu.%lu", lv / 1000000, lv / 1000 % 1000, lv % 1000);
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
        return usage(stdout);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        return version();
    }
    if (!strcmp(cmd, "serve"))
        return hv_cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan") || !strcmp(cmd, "apply"))
        return hv_cmd_lab(argc - 1, argv + 1);
    fprintf(stderr, "hvupdater: unknown command %s\n", cmd);
    return usage(stderr);
}
