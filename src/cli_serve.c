/* cli_serve.c: `hvupdater serve`: flags, config, TLS material, and the server's lifetime
 * (SIGINT/SIGTERM stop it cleanly). Owns the config and every object it starts. */
#include "cli.h"
#include "config.h"
#include "log.h"
#include "runtime.h"
#include "server.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
            "  --log-level LEVEL      debug, info (default), warn or error\n"
            "  --help                 this text\n");
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
        {"max-connections", required_argument, NULL, 'C'},
        {"max-connections-per-address", required_argument, NULL, 'A'},
        {"head-timeout", required_argument, NULL, 'T'},
        {"log-level", required_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *listen = NULL, *cert = NULL, *key = NULL, *config = NULL, *port_file = NULL;
    char cert_dir[512] = "";
    const char *sans[16];
    size_t n_sans = 0;
    long max_body = -1, threads = 4, max_conns = HV_SERVER_MAX_CONNECTIONS,
         per_addr = HV_SERVER_MAX_PER_ADDRESS, head_timeout = HV_SERVER_HEAD_TIMEOUT;
    int c;
    optind = 1;
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
                fprintf(stderr, "hvupdater serve: at most 15 --tls-san names\n");
                return 2;
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
        case 'C':
            max_conns = strtol(optarg, NULL, 10);
            break;
        case 'A':
            per_addr = strtol(optarg, NULL, 10);
            break;
        case 'T':
            head_timeout = strtol(optarg, NULL, 10);
            break;
        case 'v':
            if (hv_log_set_level_name(optarg) < 0) {
                fprintf(stderr, "hvupdater serve: --log-level must be debug|info|warn|error\n");
                return 2;
            }
            break;
        case 'h':
            serve_usage(stdout);
            return 0;
        default:
            serve_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hvupdater serve: unexpected argument %s\n", argv[optind]);
        return 2;
    }
    if (threads < 1 || threads > 256 ||
        (max_body != -1 && (max_body < 1024 || max_body > (64L << 20)))) {
        fprintf(stderr, "hvupdater serve: --threads 1..256, --max-body-bytes 1024..67108864\n");
        return 2;
    }
    if (max_conns < 16 || max_conns > 1000000 || per_addr < 1 || per_addr > max_conns ||
        head_timeout < 1 || head_timeout > 3600) {
        fprintf(stderr, "hvupdater serve: --max-connections 16..1000000, "
                        "--max-connections-per-address 1..max-connections, "
                        "--head-timeout 1..3600\n");
        return 2;
    }
    sans[n_sans] = NULL;
    char err[512];
    struct hv_config cfg;
    hv_config_default(&cfg);
    if (config && hv_config_load_file(&cfg, config, err, sizeof(err)) < 0) {
        fprintf(stderr, "hvupdater serve: %s\n", err);
        hv_config_free(&cfg);
        return 1;
    }
    if (max_body != -1)
        cfg.max_body = (size_t)max_body;
    if (!listen)
        listen = cfg.listen ? cfg.listen : "127.0.0.1:8443";
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
        fprintf(stderr, "hvupdater serve: %s\n", err);
        hv_config_free(&cfg);
        return 1;
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
    };
    struct hv_server *srv = hv_server_start(&so, err, sizeof(err));
    if (!srv) {
        fprintf(stderr, "hvupdater serve: %s\n", err);
        hv_runtime_free(rt);
        hv_config_free(&cfg);
        return 1;
    }
    char port[16];
    snprintf(port, sizeof(port), "%u", hv_server_port(srv));
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
           config ? config : "(embedded default)", (char *)NULL);
    if (hv_server_ca_file(srv))
        fprintf(stderr, "hvupdater: self-signed serving certificate; trust CA %s\n",
                hv_server_ca_file(srv));
    while (!stop_flag)
        sigsuspend(&old);
    hv_log(HV_LOG_INFO, "stopping", (char *)NULL);
    hv_server_set_ready(srv, false);
    hv_server_stop(srv);
    hv_runtime_free(rt);
    hv_config_free(&cfg);
    return 0;
}
