/* cli_serve.c: `hvupdater serve`: flags, config, TLS material, and the server's lifetime
 * (SIGINT/SIGTERM stop it cleanly). Owns the config and every object it starts. */
#include "cli.h"
#include "config.h"
#include "log.h"
#include "runtime.h"
#include "server.h"
#include "statusd.h"

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void serve_usage(FILE *out)
{
    fprintf(out,
            "usage: hvupdater serve [flags]\n"
            "\n"
            "  --listen ADDR:PORT     address to serve HTTPS on (default 127.0.0.1:8443;\n"
            "                         [::]:PORT or 0.0.0.0:PORT for all addresses)\n"
            "  --tls-cert FILE        serving certificate chain (PEM); reloaded when it changes\n"
            "  --tls-key FILE         its private key (PEM)\n"
            "  --cert-dir DIR         without --tls-cert: where the self-signed CA and serving\n"
            "                         certificate are made and kept (default\n"
            "                         $STATE_DIRECTORY/tls, $XDG_STATE_HOME/hvupdater/tls or\n"
            "                         ~/.local/state/hvupdater/tls)\n"
            "  --tls-san NAME         extra DNS name for the self-signed certificate (repeat,\n"
            "                         up to 15)\n"
            "  --config FILE          config file (JSON, see schemas/config.json); without it\n"
            "                         the embedded default: built-in profiles, libvirt\n"
            "                         test:///default\n"
            "  --max-body-bytes N     largest request body accepted (default 4194304)\n"
            "  --threads N            request threads (default 4)\n"
            "  --max-connections N    connections held at once (default 8192)\n"
            "  --max-connections-per-address N\n"
            "                         connections from one client address (default 128)\n"
            "  --head-timeout SECONDS a new connection's TLS handshake and first request head\n"
            "                         must be done within this (default 10)\n"
            "  --port-file FILE       write the bound port there once listening\n"
            "  --log-level LEVEL      debug, info (default), warn or error; wins over the\n"
            "                         config's log.level\n"
            "  --kube-events          the config's kubernetes.events: true (Warning Events on\n"
            "                         Machines for bad settings, a Block, an UpdateMachine\n"
            "                         Failure; the API server from the kubernetes section)\n"
            "  --mhc-hold             the config's kubernetes.holdRemediation: true (while a\n"
            "                         Machine's VM is power-cycled, cluster.x-k8s.io/\n"
            "                         skip-remediation keeps MachineHealthChecks off it)\n"
            "  --dry-run-claims       the config's kubernetes.dryRunClaims: true (CanUpdate*\n"
            "                         covers an infra change only once a dry run on one of\n"
            "                         its infra machines shows the provider accepts it)\n"
            "  --log-format FORMAT    hvupdater (default) or capi: Cluster API's JSON logs\n"
            "                         (ts in ms, caller, msg, v, err; Machine, MachineSet,\n"
            "                         Cluster as {name, namespace}); wins over log.format\n"
            "  --client-ca FILE       require a client certificate on hook calls and\n"
            "                         /metrics, verified against the CAs in FILE (PEM),\n"
            "                         with extended key usage clientAuth\n"
            "  --client-name NAME     with a client CA, only a certificate naming NAME (its\n"
            "                         subject CN or a DNS, URI or e-mail SAN) is let in\n"
            "                         (repeat, up to 16; default: any client of the CA)\n"
            "  --metrics-listen ADDR:PORT\n"
            "                         serve /metrics, /healthz and /readyz over plain HTTP\n"
            "                         there, and no /metrics on --listen\n"
            "  --drain-seconds N      on SIGTERM: /readyz answers 503 at once, hooks are\n"
            "                         still served for N seconds, then the server stops\n"
            "                         (default 0; a second signal stops at once)\n"
            "  --can-update-failure-policy POLICY\n"
            "                         Fail (default) or Ignore: the failurePolicy discovery\n"
            "                         gives CanUpdateMachine and CanUpdateMachineSet (the\n"
            "                         config's canUpdateFailurePolicy); Ignore: while\n"
            "                         hvupdater is unreachable CAPI replaces Machines instead\n"
            "                         of waiting. UpdateMachine is always Fail\n"
            "  --check-machines       the config's kubernetes.checkMachines: true (check every\n"
            "                         hook call against the API server before acting; on by\n"
            "                         default when hvupdater has a Kubernetes client)\n"
            "  --no-check-machines    kubernetes.checkMachines: false\n"
            "  --insecure-any-caller  start on a non-loopback --listen although nothing checks\n"
            "                         who calls (no machine check, no --client-ca with\n"
            "                         --client-name); refused without it\n"
            "  --require-namespace NS refuse to start unless $POD_NAMESPACE (the pod's namespace,\n"
            "                         from the downward API) is NS: the namespace the\n"
            "                         ExtensionConfig sends CAPI's calls to\n"
            "  --check-config         load the config (and every flag) as serve would, build\n"
            "                         the backends without contacting any host or reading\n"
            "                         any file the config names, print ok and exit 0, or\n"
            "                         exit 1 with the reason\n"
            "  --help                 this text\n");
}

/* Every line serve writes on stderr is JSON (log.h), its errors too. Returns code. */
static int serve_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int serve_error(int code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (code == 2)
        hv_log(HV_LOG_ERROR, "usage-error", "error", msg, "help", "hvupdater serve --help",
               (char *)NULL);
    else
        hv_log(HV_LOG_ERROR, "startup-failed", "error", msg, (char *)NULL);
    return code;
}

/* Whether ADDR:PORT listens on loopback only (127.0.0.0/8, ::1, localhost). */
static bool listen_is_loopback(const char *listen)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : strlen(listen);
    if (n >= sizeof(host))
        return false;
    memcpy(host, listen, n);
    host[n] = '\0';
    if (!strcmp(host, "localhost") || !strcmp(host, "[::1]") || !strcmp(host, "::1"))
        return true;
    unsigned a, b, c, d;
    char tail;
    return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void default_cert_dir(char *out, size_t cap)
{
    const char *sd = getenv("STATE_DIRECTORY"), *home = getenv("HOME");
    if (sd && sd[0])
        snprintf(out, cap, "%s/tls", sd);
    else if (getenv("XDG_STATE_HOME"))
        snprintf(out, cap, "%s/hvupdater/tls", getenv("XDG_STATE_HOME"));
    else
        snprintf(out, cap, "%s/.local/state/hvupdater/tls", home && home[0] ? home : "/tmp");
}

static int mkdir_p(const char *path)
{
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0700);
            *p = '/';
        }
    }
    return 0;
}

int hv_cmd_serve(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"tls-cert", required_argument, NULL, 'c'},
        {"tls-key", required_argument, NULL, 'k'},
        {"cert-dir", required_argument, NULL, 'd'},
        {"tls-san", required_argument, NULL, 's'},
        {"config", required_argument, NULL, 'f'},
        {"max-body-bytes", required_argument, NULL, 'm'},
        {"threads", required_argument, NULL, 't'},
        {"port-file", required_argument, NULL, 'p'},
        {"log-level", required_argument, NULL, 'v'},
        {"log-format", required_argument, NULL, 'F'},
        {"kube-events", no_argument, NULL, 'E'},
        {"mhc-hold", no_argument, NULL, 'H'},
        {"dry-run-claims", no_argument, NULL, 'Y'},
        {"check-config", no_argument, NULL, 'C'},
        {"client-ca", required_argument, NULL, 'A'},
        {"client-name", required_argument, NULL, 'u'},
        {"metrics-listen", required_argument, NULL, 'M'},
        {"drain-seconds", required_argument, NULL, 'D'},
        {"max-connections", required_argument, NULL, 'N'},
        {"max-connections-per-address", required_argument, NULL, 'a'},
        {"head-timeout", required_argument, NULL, 'T'},
        {"can-update-failure-policy", required_argument, NULL, 'P'},
        {"require-namespace", required_argument, NULL, 'R'},
        {"check-machines", no_argument, NULL, 'K'},
        {"no-check-machines", no_argument, NULL, 'k' + 256},
        {"insecure-any-caller", no_argument, NULL, 'I'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *listen = NULL, *cert = NULL, *key = NULL, *config = NULL, *port_file = NULL;
    char cert_dir[512] = "";
    const char *sans[16], *client_names[17];
    size_t n_sans = 0, n_client_names = 0;
    long max_body = -1, threads = 4, max_conns = HV_SERVER_MAX_CONNECTIONS,
         per_addr = HV_SERVER_MAX_PER_ADDRESS, head_timeout = HV_SERVER_HEAD_TIMEOUT;
    bool check_only = false, kube_events = false, level_flag = false, format_flag = false;
    bool mhc_hold = false, dry_run_claims = false;
    const char *client_ca = NULL, *metrics_listen = NULL;
    long drain_s = 0;
    int can_update_ignore = -1; /* -1: the config's */
    const char *require_ns = NULL;
    int check_machines = -1; /* -1: the config's */
    bool any_caller = false;
    int c;
    optind = 1;
    opterr = 0; /* getopt's own messages are not JSON: serve_error says it */
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen = optarg;
            break;
        case 'c':
            cert = optarg;
            break;
        case 'k':
            key = optarg;
            break;
        case 'd':
            snprintf(cert_dir, sizeof(cert_dir), "%s", optarg);
            break;
        case 's':
            if (n_sans == 15) {
                return serve_error(2, "at most 15 --tls-san names");
            }
            sans[n_sans++] = optarg;
            break;
        case 'f':
            config = optarg;
            break;
        case 'm':
            max_body = strtol(optarg, NULL, 10);
            break;
        case 't':
            threads = strtol(optarg, NULL, 10);
            break;
        case 'p':
            port_file = optarg;
            break;
        case 'N':
            max_conns = strtol(optarg, NULL, 10);
            break;
        case 'a':
            per_addr = strtol(optarg, NULL, 10);
            break;
        case 'T':
            head_timeout = strtol(optarg, NULL, 10);
            break;
        case 'v':
            if (hv_log_set_level_name(optarg) < 0)
                return serve_error(2, "--log-level must be debug|info|warn|error");
            level_flag = true;
            break;
        case 'E':
            kube_events = true;
            break;
        case 'H':
            mhc_hold = true;
            break;
        case 'K':
            check_machines = 1;
            break;
        case 'k' + 256:
            check_machines = 0;
            break;
        case 'I':
            any_caller = true;
            break;
        case 'Y':
            dry_run_claims = true;
            break;
        case 'F':
            if (hv_log_set_format_name(optarg) < 0)
                return serve_error(2, "--log-format must be hvupdater|capi");
            format_flag = true;
            break;
        case 'C':
            check_only = true;
            break;
        case 'A':
            client_ca = optarg;
            break;
        case 'u':
            if (n_client_names == 16 || !*optarg)
                return serve_error(2, "--client-name: 1 to 16 names, none empty");
            client_names[n_client_names++] = optarg;
            break;
        case 'M':
            metrics_listen = optarg;
            break;
        case 'D': {
            char *end;
            drain_s = strtol(optarg, &end, 10);
            if (*end || end == optarg || drain_s < 0 || drain_s > 300)
                return serve_error(2, "--drain-seconds must be 0..300");
            break;
        }
        case 'P': {
            bool ig;
            if (hv_failure_policy_parse(optarg, &ig) < 0)
                return serve_error(2, "--can-update-failure-policy must be Fail|Ignore");
            can_update_ignore = ig;
            break;
        }
        case 'R':
            require_ns = optarg;
            break;
        case 'h':
            serve_usage(stdout);
            return 0;
        default: {
            /* Name the flag, never its value: "--flag=value" may carry a secret. */
            const char *f = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
            return serve_error(2, "unknown flag or missing value: %.*s", (int)strcspn(f, "="), f);
        }
        }
    }
    if (optind < argc)
        return serve_error(2, "unexpected argument number %d: serve takes flags only", optind);
    if (threads < 1 || threads > 256 ||
        (max_body != -1 && (max_body < 1024 || max_body > (64L << 20)))) {
        return serve_error(2, "--threads 1..256, --max-body-bytes 1024..67108864");
    }
    if (max_conns < 16 || max_conns > 1000000 || per_addr < 1 || per_addr > max_conns ||
        head_timeout < 1 || head_timeout > 3600) {
        return serve_error(2, "--max-connections 16..1000000, --max-connections-per-address "
                              "1..max-connections, --head-timeout 1..3600");
    }
    sans[n_sans] = NULL;
    client_names[n_client_names] = NULL;
    if (require_ns) {
        /* clusterctl --target-namespace moves the pod but not the ExtensionConfig, which is
         * cluster-scoped: CAPI would call a Service in a namespace hvupdater is not in. */
        const char *pod_ns = getenv("POD_NAMESPACE");
        if (!pod_ns || !pod_ns[0])
            return serve_error(1, "--require-namespace: POD_NAMESPACE is not set (the "
                                  "Deployment passes it from the downward API, "
                                  "metadata.namespace)");
        if (strcmp(pod_ns, require_ns))
            return serve_error(1,
                               "this pod runs in namespace %.63s but the ExtensionConfig sends "
                               "CAPI's calls to namespace %.63s: with clusterctl "
                               "--target-namespace %.63s set HVUPDATER_TARGET_NAMESPACE=%.63s "
                               "too (or only the variable)",
                               pod_ns, require_ns, pod_ns, pod_ns);
    }
    char err[512];
    struct hv_config cfg;
    hv_config_default(&cfg);
    if (config && hv_config_load_file(&cfg, config, err, sizeof(err)) < 0) {
        hv_config_free(&cfg);
        return serve_error(1, "%s", err);
    }
    /* the config's log section where no flag set it (the flags took effect when parsed, so
     * usage errors are already in the chosen format) */
    if (!format_flag && cfg.log.format >= 0)
        hv_log_set_format((enum hv_log_format)cfg.log.format);
    if (!level_flag && cfg.log.level >= 0)
        hv_log_set_level((enum hv_log_level)cfg.log.level);
    if (kube_events)
        cfg.kube.events = true; /* an alias of the config's kubernetes.events */
    if (mhc_hold)
        cfg.kube.mhc_hold = true; /* an alias of kubernetes.holdRemediation */
    if (check_machines >= 0)
        cfg.kube.check_machines = check_machines; /* kubernetes.checkMachines */
    if (dry_run_claims)
        cfg.kube.dry_run_claims = true; /* an alias of kubernetes.dryRunClaims */
    if (max_body != -1)
        cfg.max_body = (size_t)max_body;
    if (can_update_ignore != -1)
        cfg.can_update_ignore = can_update_ignore;
    if (!client_ca)
        client_ca = cfg.client_ca_file;
    if (n_client_names && !client_ca) {
        hv_config_free(&cfg);
        return serve_error(2, "--client-name needs a client CA (--client-ca or clientCAFile)");
    }
    if (!metrics_listen)
        metrics_listen = cfg.metrics_listen;
    if (check_only) {
        struct hv_runtime *probe = hv_runtime_new(&cfg, err, sizeof(err));
        hv_runtime_free(probe);
        hv_config_free(&cfg);
        if (!probe)
            return serve_error(1, "%s", err);
        printf("config %s: ok\n", config ? config : "(embedded default)");
        return 0;
    }
    if (!listen)
        listen = cfg.listen ? cfg.listen : "127.0.0.1:8443";
    /* Who may make hvupdater act: beyond this host, the machine check or named client
     * certificates, or the operator's explicit word (docs/operations.md). */
    bool checked = hv_config_checks_machines(&cfg), named = client_ca && n_client_names;
    if (!checked && !named && !listen_is_loopback(listen)) {
        if (!any_caller) {
            hv_config_free(&cfg);
            return serve_error(1,
                               "--listen %.200s is not a loopback address and nothing checks "
                               "who calls: turn on the machine check (kubernetes.server or "
                               "kubernetes.checkMachines), or give --client-ca with "
                               "--client-name, or accept any caller with --insecure-any-caller",
                               listen);
        }
        hv_log(HV_LOG_WARN, "insecure-any-caller", "listen", listen, "detail",
               "anyone who reaches this address can make hvupdater resize and power-cycle VMs",
               (char *)NULL);
    }
    if (!cert_dir[0])
        default_cert_dir(cert_dir, sizeof(cert_dir));
    if (!cert && !key)
        mkdir_p(cert_dir);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigset_t old;
    sigprocmask(SIG_BLOCK, &set, &old); /* threads started below inherit the block */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct hv_runtime *rt = hv_runtime_new(&cfg, err, sizeof(err));
    if (!rt) {
        hv_config_free(&cfg);
        return serve_error(1, "%s", err);
    }

    struct hv_server_opts so = {
        .listen = listen,
        .cert_file = cert,
        .key_file = key,
        .cert_dir = cert_dir,
        .extra_sans = sans,
        .max_body = cfg.max_body,
        .threads = (unsigned)threads,
        .max_connections = (unsigned)max_conns,
        .max_per_address = (unsigned)per_addr,
        .head_timeout = (unsigned)head_timeout,
        .hooks = hv_runtime_hooks(rt),
        .client_ca_file = client_ca,
        .client_names = client_names,
        .metrics_elsewhere = metrics_listen != NULL,
    };
    struct hv_server *srv = hv_server_start(&so, err, sizeof(err));
    if (!srv) {
        hv_runtime_free(rt);
        hv_config_free(&cfg);
        return serve_error(1, "%s", err);
    }
    struct hv_statusd *status = NULL;
    if (metrics_listen) {
        status = hv_statusd_start(metrics_listen, srv, err, sizeof(err));
        if (!status) {
            hv_server_stop(srv);
            hv_runtime_free(rt);
            hv_config_free(&cfg);
            return serve_error(1, "%s", err);
        }
    }
    char port[16], mport[16];
    snprintf(port, sizeof(port), "%u", hv_server_port(srv));
    snprintf(mport, sizeof(mport), "%u", hv_statusd_port(status));
    if (port_file) {
        FILE *pf = fopen(port_file, "w");
        if (pf) {
            fprintf(pf, "%s\n", port);
            fclose(pf);
        }
    }
    hv_server_set_ready(srv, true);
    hv_log(HV_LOG_INFO, "listening", "listen", listen, "#port", port, "ca",
           hv_server_ca_file(srv) ? hv_server_ca_file(srv) : "", "config",
           config ? config : "(embedded default)", "clientCA", client_ca ? client_ca : "",
           "metricsListen", metrics_listen ? metrics_listen : "", "#metricsPort", mport,
           (char *)NULL);
    if (hv_server_ca_file(srv))
        hv_log(HV_LOG_INFO, "self-signed", "detail",
               "serving certificate made here: clients must trust the CA file", "ca",
               hv_server_ca_file(srv), (char *)NULL);
    while (!stop_flag)
        sigsuspend(&old);
    /* Drain: readiness off at once, so endpoints drop this replica, while calls already on
     * their way are still answered; then stop. A second signal cuts the wait short. */
    hv_server_set_ready(srv, false);
    char drain_text[16];
    snprintf(drain_text, sizeof(drain_text), "%ld", drain_s);
    hv_log(HV_LOG_INFO, "draining", "#seconds", drain_text, (char *)NULL);
    if (drain_s > 0) {
        stop_flag = 0;
        struct timespec end;
        clock_gettime(CLOCK_MONOTONIC, &end);
        end.tv_sec += drain_s;
        sigprocmask(SIG_SETMASK, &old, NULL);
        for (;;) {
            struct timespec now, left;
            clock_gettime(CLOCK_MONOTONIC, &now);
            left.tv_sec = end.tv_sec - now.tv_sec;
            left.tv_nsec = end.tv_nsec - now.tv_nsec;
            if (left.tv_nsec < 0) {
                left.tv_sec--;
                left.tv_nsec += 1000000000L;
            }
            if (left.tv_sec < 0 || stop_flag)
                break;
            nanosleep(&left, NULL); /* a signal interrupts it */
        }
    }
    hv_log(HV_LOG_INFO, "stopping", (char *)NULL);
    hv_statusd_stop(status);
    hv_server_stop(srv);
    hv_runtime_free(rt);
    hv_config_free(&cfg);
    return 0;
}
