/* cli_lab.c: `hvupdater plan` and `hvupdater apply`, for people testing with virsh, the
 * vCenter simulator or a KubeVirt API server. They build one backend from flags (or the config),
 * then use the same engine and the same stable messages as the UpdateMachine hook. Owns that
 * backend. */
#include "cli.h"
#include "config.h"
#include "engine.h"
#include "log.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HV_HAVE_BACKEND_libvirt
#include "libvirt_backend.h"
#endif
#ifdef HV_HAVE_BACKEND_vsphere
#include "vsphere_backend.h"
#endif
#ifdef HV_HAVE_BACKEND_kubevirt
#include "kubevirt_backend.h"
#endif

struct lab {
    bool apply, wait;
    const char *libvirt_uri, *domain, *uuid, *config;
    const char *target; /* the positional DOMAIN (virsh: a name, an ID or a UUID) */
    char uri_buf[1024]; /* the URI libvirt resolved (-c, LIBVIRT_DEFAULT_URI, default) */
    char uuid_buf[64];  /* the positional domain's UUID */
    const char *vs_server, *vs_url, *vs_user, *vs_pass_file, *vs_thumb, *vs_ca;
    bool vs_insecure;
    const char *kv_vm, *kv_cluster, *kv_server, *kv_token, *kv_ca;
    struct hv_hw want;
    const char *disk; /* --disk: libvirt target device / vSphere unit number */
    int timeout_s, poll_ms;
    hj *settings;
};

static void lab_usage(FILE *out, const char *cmd)
{
    fprintf(
        out,
        "usage: hvupdater %s TARGET [--memory-mib N] [--cpus N] [--cores-per-socket N]\n"
        "                  [--disk-gib N [--disk DISK]] [--set SETTING=VALUE]...%s\n"
        "\n"
        "TARGET, libvirt:  [-c URI] DOMAIN   (as virsh: DOMAIN is a name, an ID or a UUID;\n"
        "                  URI: -c/--connect, else $LIBVIRT_DEFAULT_URI, else libvirt's\n"
        "                  default URI, as `virsh uri` shows it)\n"
        "                  or --libvirt-uri URI (--domain NAME | --uuid UUID)\n"
        "TARGET, vSphere:  --vm-uuid BIOS-UUID and either --vsphere-server NAME --config FILE\n"
        "                  or --vsphere-url https://HOST:PORT/sdk --vsphere-user USER\n"
        "                     --vsphere-password-file FILE\n"
        "                     (--vsphere-thumbprint HEX | --vsphere-ca FILE | --vsphere-insecure)\n"
        "TARGET, KubeVirt: --kubevirt-vm NAMESPACE/NAME and either --config FILE\n"
        "                  [--kubevirt-cluster NAME] or --kubevirt-server https://HOST:PORT\n"
        "                  --kubevirt-token-file FILE --kubevirt-ca FILE\n"
        "                  (--cpus counts sockets on KubeVirt; --cores-per-socket is cpu.cores)\n"
        "\n"
        "  --disk-gib N         grow the disk to N GiB (disks never shrink)\n"
        "  --disk DISK          which disk: libvirt target device (default vda), vSphere unit\n"
        "                       number (default: the first virtual disk)\n"
        "  --set SETTING=VALUE  a policy setting, as in ExtensionConfig.spec.settings\n"
        "                       (powerCycle, powerOffMode, liveTimeoutSeconds, ...)\n"
        "%s"
        "\n"
        "exit codes: 0 %s, 1 failure, 2 usage error, 3 still in progress\n",
        cmd, !strcmp(cmd, "apply") ? " [--wait] [--timeout SECONDS]" : "",
        !strcmp(cmd, "apply") ? "  --wait               keep going until done or failed\n"
                                "  --timeout SECONDS    give up waiting after this long "
                                "(default 1800)\n"
                              : "",
        !strcmp(cmd, "apply") ? "done" : "plan printed");
}

static int parse(int argc, char **argv, struct lab *l)
{
    static const struct option opts[] = {{"libvirt-uri", required_argument, NULL, 'u'},
                                         {"connect", required_argument, NULL, 'u'},
                                         {"domain", required_argument, NULL, 'd'},
                                         {"uuid", required_argument, NULL, 'U'},
                                         {"vm-uuid", required_argument, NULL, 'U'},
                                         {"memory-mib", required_argument, NULL, 'm'},
                                         {"cpus", required_argument, NULL, 'n'},
                                         {"cores-per-socket", required_argument, NULL, 'C'},
                                         {"disk-gib", required_argument, NULL, 'g'},
                                         {"disk", required_argument, NULL, 'D'},
                                         {"set", required_argument, NULL, 's'},
                                         {"wait", no_argument, NULL, 'w'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"poll-ms", required_argument, NULL, 'p'},
                                         {"config", required_argument, NULL, 'f'},
                                         {"vsphere-server", required_argument, NULL, 'S'},
                                         {"vsphere-url", required_argument, NULL, 'L'},
                                         {"vsphere-user", required_argument, NULL, 'N'},
                                         {"vsphere-password-file", required_argument, NULL, 'P'},
                                         {"vsphere-thumbprint", required_argument, NULL, 'T'},
                                         {"vsphere-ca", required_argument, NULL, 'A'},
                                         {"vsphere-insecure", no_argument, NULL, 'I'},
                                         {"kubevirt-vm", required_argument, NULL, 'K'},
                                         {"kubevirt-cluster", required_argument, NULL, 'k'},
                                         {"kubevirt-server", required_argument, NULL, 'R'},
                                         {"kubevirt-token-file", required_argument, NULL, 'O'},
                                         {"kubevirt-ca", required_argument, NULL, 'Y'},
                                         {"log-level", required_argument, NULL, 'v'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    /* "-": a positional argument comes back as 1 in its place, so DOMAIN may stand before,
     * between or after the flags, as virsh allows */
    while ((c = getopt_long(argc, argv, "-c:", opts, NULL)) != -1) {
        char *end = NULL;
        long v = 0;
        if (c != 1 && strchr("mnCtpg", c)) {
            v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 16 * 1024 * 1024) {
                fprintf(stderr, "hvupdater %s: %s is not a positive whole number\n", argv[0],
                        optarg);
                return -1;
            }
        }
        switch (c) {
        case 'u':
        case 'c':
            l->libvirt_uri = optarg;
            break;
        case 1: /* a positional argument: the domain */
            if (l->target) {
                fprintf(stderr, "hvupdater %s: unexpected argument %s (one DOMAIN only)\n", argv[0],
                        optarg);
                return -1;
            }
            l->target = optarg;
            break;
        case 'd':
            l->domain = optarg;
            break;
        case 'U':
            l->uuid = optarg;
            break;
        case 'm':
            l->want.memory_mib = v;
            break;
        case 'n':
            l->want.cpus = (int32_t)v;
            break;
        case 'C':
            l->want.cores_per_socket = (int32_t)v;
            break;
        case 'g':
            l->want.disk_mib = (int64_t)v * 1024;
            break;
        case 'D':
            if (!optarg[0] || strlen(optarg) >= sizeof(((struct hv_vm_ref *)0)->disk)) {
                fprintf(stderr, "hvupdater %s: --disk wants a device name or unit number\n",
                        argv[0]);
                return -1;
            }
            l->disk = optarg;
            break;
        case 'w':
            l->wait = true;
            break;
        case 't':
            l->timeout_s = (int)v;
            break;
        case 'p':
            l->poll_ms = (int)v;
            break;
        case 'f':
            l->config = optarg;
            break;
        case 'S':
            l->vs_server = optarg;
            break;
        case 'L':
            l->vs_url = optarg;
            break;
        case 'N':
            l->vs_user = optarg;
            break;
        case 'P':
            l->vs_pass_file = optarg;
            break;
        case 'T':
            l->vs_thumb = optarg;
            break;
        case 'A':
            l->vs_ca = optarg;
            break;
        case 'I':
            l->vs_insecure = true;
            break;
        case 'K':
            l->kv_vm = optarg;
            break;
        case 'k':
            l->kv_cluster = optarg;
            break;
        case 'R':
            l->kv_server = optarg;
            break;
        case 'O':
            l->kv_token = optarg;
            break;
        case 'Y':
            l->kv_ca = optarg;
            break;
        case 'v':
            if (hv_log_set_level_name(optarg) < 0) {
                fprintf(stderr, "hvupdater %s: --log-level must be debug|info|warn|error\n",
                        argv[0]);
                return -1;
            }
            break;
        case 's': {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg) {
                fprintf(stderr, "hvupdater %s: --set wants SETTING=VALUE\n", argv[0]);
                return -1;
            }
            char key[64];
            snprintf(key, sizeof(key), "%.*s", (int)(eq - optarg), optarg);
            hj_obj_set_take(l->settings, key, hj_new_string(eq + 1));
            break;
        }
        case 'h':
            lab_usage(stdout, argv[0]);
            return 1;
        default:
            lab_usage(stderr, argv[0]);
            return -1;
        }
    }
    if (optind < argc && !l->target) /* after "--" */
        l->target = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "hvupdater %s: unexpected argument %s\n", argv[0], argv[optind]);
        return -1;
    }
    bool vs = l->vs_server || l->vs_url;
    bool kv = l->kv_vm || l->kv_cluster || l->kv_server;
    int names = (l->domain != NULL) + (l->uuid != NULL) + (l->target != NULL) + (l->kv_vm != NULL);
    if ((vs && l->libvirt_uri) || names != 1 || (vs && l->domain) ||
        (kv && (!l->kv_vm || vs || l->libvirt_uri))) {
        fprintf(stderr,
                "hvupdater %s: give one target: [-c URI] DOMAIN, --libvirt-uri URI with "
                "--domain or --uuid, a vSphere server with --vm-uuid, or --kubevirt-vm "
                "(see --help)\n",
                argv[0]);
        return -1;
    }
    if (vs && l->target) { /* the positional names the VM by its BIOS UUID, as --vm-uuid */
        l->uuid = l->target;
        l->target = NULL;
    }
    if (l->want.memory_mib < 0 && l->want.cpus < 0 && l->want.cores_per_socket < 0 &&
        !hv_disk_set(l->want.disk_mib)) {
        fprintf(stderr,
                "hvupdater %s: nothing to change: give --memory-mib, --cpus, "
                "--cores-per-socket or --disk-gib\n",
                argv[0]);
        return -1;
    }
    return 0;
}

/* The KubeVirt backend for --kubevirt-vm: a cluster of the config file (--kubevirt-cluster,
 * else its first), or one from the --kubevirt-server flags. */
static struct hv_backend *make_kubevirt(struct lab *l, struct hv_vm_ref *ref, char *err,
                                        size_t errlen)
{
#ifdef HV_HAVE_BACKEND_kubevirt
    if (strlen(l->kv_vm) >= sizeof(ref->name)) {
        snprintf(err, errlen, "--kubevirt-vm is too long");
        return NULL;
    }
    snprintf(ref->name, sizeof(ref->name), "%s", l->kv_vm);
    struct hv_kubevirt_cluster c;
    memset(&c, 0, sizeof(c));
    struct hv_config cfg;
    hv_config_default(&cfg);
    struct hv_backend *b = NULL;
    int timeout_ms = 10000;
    if (l->config) {
        if (l->kv_server) {
            snprintf(err, errlen, "give --config or --kubevirt-server, not both");
            goto out;
        }
        if (hv_config_load_file(&cfg, l->config, err, errlen) < 0)
            goto out;
        size_t k;
        for (k = 0;
             k < cfg.n_kubevirt && l->kv_cluster && strcmp(cfg.kubevirt[k].name, l->kv_cluster);
             k++)
            ;
        if (k == cfg.n_kubevirt) {
            snprintf(err, errlen, "no KubeVirt cluster%s%s in %s", l->kv_cluster ? " named " : "",
                     l->kv_cluster ? l->kv_cluster : "", l->config);
            goto out;
        }
        const struct hv_kubevirt_cfg *kc = &cfg.kubevirt[k];
        c = (struct hv_kubevirt_cluster){.name = kc->name,
                                         .server = kc->server,
                                         .token_file = kc->token_file,
                                         .ca_file = kc->ca_file};
        timeout_ms = cfg.kubevirt_timeout_s * 1000;
    } else {
        if (!l->kv_server || !l->kv_token || !l->kv_ca) {
            snprintf(err, errlen,
                     "--kubevirt-vm needs --config FILE, or --kubevirt-server, "
                     "--kubevirt-token-file and --kubevirt-ca");
            goto out;
        }
        c = (struct hv_kubevirt_cluster){.name = l->kv_cluster ? l->kv_cluster : "lab",
                                         .server = l->kv_server,
                                         .token_file = l->kv_token,
                                         .ca_file = l->kv_ca};
    }
    snprintf(ref->server, sizeof(ref->server), "%s", c.name);
    struct hv_kubevirt_opts o = {.clusters = &c, .n_clusters = 1, .timeout_ms = timeout_ms};
    b = hv_kubevirt_new(&o, err, errlen);
out:
    hv_config_free(&cfg);
    return b;
#else
    (void)l;
    (void)ref;
    snprintf(err, errlen, "this build has no KubeVirt backend");
    return NULL;
#endif
}

static struct hv_backend *make_backend(struct lab *l, struct hv_vm_ref *ref, char *err,
                                       size_t errlen)
{
    memset(ref, 0, sizeof(*ref));
    if (l->kv_vm)
        return make_kubevirt(l, ref, err, errlen);
    bool vs = l->vs_server || l->vs_url;
    if (!vs && (!l->libvirt_uri || l->target)) {
#ifdef HV_HAVE_BACKEND_libvirt
        /* virsh's rules: the URI from -c, $LIBVIRT_DEFAULT_URI or libvirt's default; the
         * positional DOMAIN as an ID, a UUID or a name, pinned to its UUID */
        if (hv_libvirt_virsh_resolve(l->libvirt_uri, l->target, l->uri_buf, sizeof(l->uri_buf),
                                     l->uuid_buf, sizeof(l->uuid_buf), err, errlen) < 0)
            return NULL;
        l->libvirt_uri = l->uri_buf;
        if (l->target)
            l->uuid = l->uuid_buf;
#else
        snprintf(err, errlen, "this build has no libvirt backend");
        return NULL;
#endif
    }
    if (l->uuid)
        snprintf(ref->uuid, sizeof(ref->uuid), "%s", l->uuid);
    if (l->domain)
        snprintf(ref->name, sizeof(ref->name), "%s", l->domain);
    /* as the built-in profiles: libvirt's vda, vSphere's first virtual disk */
    snprintf(ref->disk, sizeof(ref->disk), "%s", l->disk ? l->disk : l->libvirt_uri ? "vda" : "");
    if (l->libvirt_uri) {
#ifdef HV_HAVE_BACKEND_libvirt
        const char *uris[1] = {l->libvirt_uri};
        struct hv_libvirt_opts o = {.uris = uris, .n_uris = 1};
        return hv_libvirt_new(&o, err, errlen);
#else
        snprintf(err, errlen, "this build has no libvirt backend");
        return NULL;
#endif
    }
#ifdef HV_HAVE_BACKEND_vsphere
    struct hv_vsphere_server s;
    memset(&s, 0, sizeof(s));
    struct hv_config cfg;
    hv_config_default(&cfg);
    struct hv_backend *b = NULL;
    if (l->vs_server) {
        if (!l->config) {
            snprintf(err, errlen, "--vsphere-server needs --config FILE");
            goto out;
        }
        if (hv_config_load_file(&cfg, l->config, err, errlen) < 0)
            goto out;
        size_t k;
        for (k = 0; k < cfg.n_vsphere && strcmp(cfg.vsphere[k].name, l->vs_server); k++)
            ;
        if (k == cfg.n_vsphere) {
            snprintf(err, errlen, "no vSphere server named %s in %s", l->vs_server, l->config);
            goto out;
        }
        const struct hv_vsphere_cfg *c = &cfg.vsphere[k];
        s = (struct hv_vsphere_server){.name = c->name,
                                       .url = c->url,
                                       .username_file = c->username_file,
                                       .password_file = c->password_file,
                                       .thumbprint = c->thumbprint,
                                       .ca_file = c->ca_file,
                                       .insecure_skip_verify = c->insecure_skip_verify};
        snprintf(ref->server, sizeof(ref->server), "%s", c->name);
    } else {
        if (!l->vs_user || !l->vs_pass_file || (!l->vs_thumb && !l->vs_ca && !l->vs_insecure)) {
            snprintf(err, errlen,
                     "--vsphere-url needs --vsphere-user, --vsphere-password-file "
                     "and --vsphere-thumbprint, --vsphere-ca or --vsphere-insecure");
            goto out;
        }
        s = (struct hv_vsphere_server){.name = "lab",
                                       .url = l->vs_url,
                                       .username = l->vs_user,
                                       .password_file = l->vs_pass_file,
                                       .thumbprint = l->vs_thumb,
                                       .ca_file = l->vs_ca,
                                       .insecure_skip_verify = l->vs_insecure};
        snprintf(ref->server, sizeof(ref->server), "lab");
    }
    if (s.insecure_skip_verify)
        fprintf(stderr, "hvupdater: WARNING: vCenter certificate NOT verified\n");
    b = hv_vsphere_new(&s, 1, err, errlen);
out:
    hv_config_free(&cfg);
    return b;
#else
    snprintf(err, errlen, "this build has no vSphere backend");
    return NULL;
#endif
}

static const char *how_name(enum hv_how h)
{
    switch (h) {
    case HV_HOW_LIVE:
        return "live";
    case HV_HOW_COLD:
        return "with a power cycle";
    case HV_HOW_IMPOSSIBLE:
        return "impossible";
    default:
        return "unchanged";
    }
}

static int do_plan(struct hv_backend *be, const struct hv_vm_ref *ref, const struct lab *l)
{
    static const char *const names[HV_F_COUNT] = {"memory", "vCPUs", "cores per socket",
                                                  "disk MiB"};
    bool sockets = !strcmp(be->ops->name, "kubevirt"); /* its cpus are sockets */
    struct hv_vm_obs *obs = calloc(1, sizeof(*obs));
    struct hv_err err = {0};
    struct hv_field_plan fp[HV_F_COUNT];
    int rc = 1;
    if (!obs)
        abort();
    memset(fp, 0, sizeof(fp));
    if (be->ops->observe(be, ref, obs, &err) != HV_OK) {
        printf("cannot observe the VM: %s\n", hv_errcode_message(err.code));
        goto out;
    }
    if (!obs->found) {
        printf("VM %s not found\n", ref->uuid[0] ? ref->uuid : ref->name);
        goto out;
    }
    if (be->ops->plan(be, ref, obs, &l->want, fp, &err) != HV_OK) {
        printf("cannot plan the change: %s\n", hv_errcode_message(err.code));
        goto out;
    }
    printf("VM %s on %s: %s, memory %lld MiB, %d%s%s", ref->uuid[0] ? ref->uuid : ref->name,
           obs->host,
           obs->power == HV_POWER_ON    ? "running"
           : obs->power == HV_POWER_OFF ? "off"
                                        : "in another state",
           (long long)obs->hw.memory_mib, obs->hw.cpus, sockets ? " socket" : " vCPU",
           obs->hw.cpus == 1 ? "" : "s");
    if (hv_disk_set(obs->hw.disk_mib))
        printf(", disk %lld MiB", (long long)obs->hw.disk_mib);
    printf("\n");
    int64_t have[HV_F_COUNT] = {obs->hw.memory_mib, obs->hw.cpus, obs->hw.cores_per_socket,
                                obs->hw.disk_mib};
    int64_t want[HV_F_COUNT] = {l->want.memory_mib, l->want.cpus, l->want.cores_per_socket,
                                hv_disk_set(l->want.disk_mib) ? l->want.disk_mib : -1};
    rc = 0;
    for (int f = 0; f < HV_F_COUNT; f++) {
        if (want[f] < 0)
            continue;
        printf("%-17s %lld -> %lld: %s", f == HV_F_CPUS && sockets ? "sockets" : names[f],
               (long long)have[f], (long long)want[f], how_name(fp[f].how));
        if (fp[f].how == HV_HOW_LIVE && fp[f].method[0])
            printf(" (%s)", fp[f].method);
        else if (fp[f].reason[0])
            printf(" (%s)", fp[f].reason);
        else if (f == HV_F_DISK && fp[f].how == HV_HOW_NONE && want[f] < have[f])
            printf(" (%s: the larger disk is left as it is)", HV_REASON_DISK_SHRINK);
        printf("\n");
    }
out:
    free(obs);
    return rc;
}

static double mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int do_apply(struct hv_backend *be, const struct hv_vm_ref *ref, const struct lab *l,
                    const struct hv_settings *s)
{
    struct hv_engine_cfg ec;
    hv_engine_cfg_default(&ec);
    ec.workers = 1;
    ec.scan_interval_s = -1; /* one VM, one command: no other VM's cycle is carried on here */
    struct hv_engine *e = hv_engine_new(&ec, &be, 1);
    if (!e) {
        fprintf(stderr, "hvupdater: cannot start the engine\n");
        return 1;
    }
    struct hv_update_result r;
    char last[1024] = "";
    double t0 = mono();
    int rc;
    /* On a terminal the current step's line is redrawn with a running clock; piped, each
     * new message is one plain line. */
    bool tty = isatty(STDOUT_FILENO);
    for (;;) {
        hv_engine_reconcile(e, be, ref, &l->want, s, &r);
        bool changed = strcmp(last, r.message) != 0;
        if (tty) {
            printf("%s\r\033[K[%6.1fs] %s", changed && last[0] ? "\n" : "", mono() - t0, r.message);
            if (r.failure || r.retry_after_s == 0)
                printf("\n");
        } else if (changed) {
            printf("[%6.1fs] %s\n", mono() - t0, r.message);
        }
        fflush(stdout);
        if (changed)
            snprintf(last, sizeof(last), "%s", r.message);
        if (r.failure) {
            rc = 1;
            break;
        }
        if (r.retry_after_s == 0) {
            rc = 0;
            break;
        }
        if (!l->wait) {
            if (tty)
                printf("\n");
            printf("still in progress: run the same command again, or add --wait\n");
            rc = 3;
            break;
        }
        if (mono() - t0 > l->timeout_s) {
            if (tty)
                printf("\n");
            printf("still in progress after %d s; the operation continues on the next apply\n",
                   l->timeout_s);
            rc = 3;
            break;
        }
        usleep((useconds_t)l->poll_ms * 1000);
    }
    hv_engine_free(e);
    return rc;
}

int hv_cmd_lab(int argc, char **argv)
{
    struct lab l = {.apply = !strcmp(argv[0], "apply"),
                    .want = {-1, -1, -1, -1},
                    .timeout_s = 1800,
                    .poll_ms = 500,
                    .settings = hj_new_object()};
    hv_log_set_level(HV_LOG_ERROR);
    int prc = parse(argc, argv, &l);
    if (prc != 0) {
        hj_free(l.settings);
        return prc > 0 ? 0 : 2;
    }
    char err[512];
    struct hv_settings s;
    hv_settings_default(&s);
    if (hv_settings_apply(&s, l.settings, err, sizeof(err)) < 0) {
        fprintf(stderr, "hvupdater %s: %s\n", argv[0], err);
        hj_free(l.settings);
        return 2;
    }
    hj_free(l.settings);
    struct hv_vm_ref ref;
    struct hv_backend *be = make_backend(&l, &ref, err, sizeof(err));
    if (!be) {
        fprintf(stderr, "hvupdater %s: %s\n", argv[0], err);
        return 1;
    }
    int rc = l.apply ? do_apply(be, &ref, &l, &s) : do_plan(be, &ref, &l);
    be->ops->free(be);
    return rc;
}
